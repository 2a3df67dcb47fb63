"""`minewatch check-config` on a copy of the deploy template whose REPLACE texts were not filled
in: they passed as OK, and the notices then printed "REPLACE with the name of the officer ..."."""

from __future__ import annotations

from pathlib import Path

import pytest

from monitor.cli import main
from tests.support.paths import REPO


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
        f"warning: {key}: still the template's REPLACE text; notices would print it"
        for key in ("town.officer", "town.contact", "sites[0].operator_address")
    ]
    assert (
        err[-1]
        == f"{copied}: 3 value(s) still to fill in before notices go out (the template's REPLACE text)"
    )

    filled = template.replace("REPLACE with the name of the officer who signs notices", "Jane Roe")
    filled = filled.replace("REPLACE with the postal address", "PO Box 1, Dovre WI; tel. 555-0100")
    copied.write_text(filled.replace("REPLACE with the operator's postal address", "1 Quarry Rd"))
    assert main(["check-config", str(copied)]) == 0
    assert "REPLACE" not in capsys.readouterr().err
