"""`minewatch check-config` on a copy of the deploy template whose REPLACE texts were not filled
in: they passed as OK, and the notices then printed "REPLACE with the name of the officer ...".
check-config and the daemon say each in the same words (monitor.config.placeholder_warning); they
once said "notices would print it" and "notices print it"."""

from __future__ import annotations

from pathlib import Path

import pytest

from monitor.cli import main
from tests.support.paths import REPO
from tests.support.servers import Mosquitto


def test_the_templates_placeholders_left_are_each_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MINEWATCH_MQTT_PASSWORD", "secret")
    template = (REPO / "deploy" / "dovre-quarry.toml").read_text()
    copied = tmp_path / "site.toml"
    copied.write_text(template)
    assert main(["check-config", str(copied)]) == 0  # still valid: a warning, not a refusal
    err = capsys.readouterr().err.splitlines()
    assert [line for line in err if line.startswith("warning: ")] == [
        f"warning: {key}: still the deploy template's REPLACE text, which notices print as it stands;"
        " fill it in"
        for key in ("town.officer", "town.contact", "sites[0].operator_address")
    ]
    assert (
        err[-1]
        == f"{copied}: 3 value(s) still to fill in before notices go out (the deploy template's REPLACE text)"
    )

    filled = template.replace("REPLACE with the name of the officer who signs notices", "Jane Roe")
    filled = filled.replace("REPLACE with the postal address", "PO Box 1, Dovre WI; tel. 555-0100")
    copied.write_text(filled.replace("REPLACE with the operator's postal address", "1 Quarry Rd"))
    assert main(["check-config", str(copied)]) == 0
    assert "REPLACE" not in capsys.readouterr().err


def test_the_daemon_logs_the_placeholders_left_at_its_start(tmp_path: Path, mosquitto: Mosquitto) -> None:
    """`minewatch run` on a configuration with the template's REPLACE text left says each key
    as it starts (and runs: a warning, as check-config's). A real daemon against a real
    Mosquitto on a free port."""
    from tests.support.daemon import Daemon, wait_until, write_config

    config = write_config(tmp_path / "minewatch.toml", mosquitto.url)
    text = config.read_text().replace(
        "[[sites]]\n", '[[sites]]\noperator_address = "REPLACE with the operator\'s postal address"\n', 1
    )
    config.write_text(text)
    daemon = Daemon(config).start()
    try:
        daemon.wait_ready()
        said = (
            "sites[0].operator_address: still the deploy template's REPLACE text, which notices print"
            " as it stands; fill it in"
        )
        assert wait_until(lambda: said in daemon.logs(), 10), daemon.logs()
        assert daemon.alive()
    finally:
        daemon.stop()
