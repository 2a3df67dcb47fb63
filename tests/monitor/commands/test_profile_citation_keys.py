"""A town's profile copied from an older one lacks the keys newer texts cite from (docs/CONFIG.md,
"Another town"): `minewatch check-config` says each on one line with what the texts then do, and
`minewatch run` logs the same as a warning at its start (a real Mosquitto); neither refuses it,
since a town may have no such section (it then writes the key as "")."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from monitor.cli import main
from tests.support.config_samples import MINIMAL
from tests.support.daemon import Daemon, wait_until, write_config
from tests.support.paths import REPO
from tests.support.servers import Mosquitto

DOVRE = (REPO / "rules" / "profiles" / "dovre.toml").read_text()
# Each key newer texts cite from, as said, and the line of Dovre's profile that sets it.
KEYS = {
    "cure_section": "cure_section",
    "notice.more_time": "more_time",
    "notice.consequence_section": "consequence_section",
    "cure_next_business_day_source": "cure_next_business_day_source",
    "preexisting_section": "preexisting_section",
    "standards.temporary_lighting.params.quoted": "quoted",
    "standards.high_intensity_light.params.fixed_sources_section": "fixed_sources_section",
    "standards.blast_notice.params.hours_source": "hours_source",
    "standards.blast_notice.params.owners_reading": "owners_reading",
}


def older_copy(folder: Path, written_as_empty: bool = False) -> Path:
    """Dovre's profile as a town copied it before the citation keys existed (or with each written
    as "", a town whose ordinance has none of those sections)."""
    text = DOVRE
    for line in KEYS.values():
        text, found = re.subn(rf"(?m)^{line} = .*$", f'{line} = ""' if written_as_empty else "", text)
        assert found == 1, line
    profile = folder / "town.toml"
    profile.write_text(text)
    return profile


def site_config(folder: Path, profile: str) -> Path:
    config = folder / "minewatch.toml"
    config.write_text(MINIMAL.replace('id = "s1"', f'id = "s1"\nprofile = "{profile}"'))
    return config


def test_check_config_says_each_citation_key_a_copied_profile_lacks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    profile = older_copy(tmp_path)
    assert main(["check-config", str(site_config(tmp_path, str(profile)))]) == 0  # said, not refused
    out, err = capsys.readouterr()
    assert ": OK (1 site(s)" in out
    warnings = [line for line in err.splitlines() if line.startswith("warning: ")]
    assert [re.findall(r"\(sites s1\): (\S+): not given; ", w) for w in warnings] == [[k] for k in KEYS], err
    for warning in warnings:
        assert warning.startswith(f"warning: profile {profile} (sites s1): "), warning
    assert (
        f"warning: profile {profile} (sites s1): notice.more_time: not given; notices and cure-deadline"
        " reminders state no way to ask for more time"
    ) in warnings
    assert (
        f"warning: profile {profile} (sites s1): notice.consequence_section: not given; a citation"
        " recommended and an early escalation refused cite no section"
    ) in warnings
    assert '9 citation key(s) not given; write each the ordinance has no section for as ""' in err


@pytest.mark.parametrize(
    "profile",
    [pytest.param("written-empty", id="keys-written-as-empty"), pytest.param("dovre", id="shipped-dovre")],
)
def test_check_config_is_silent_where_every_citation_key_is_given(
    profile: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    named = str(older_copy(tmp_path, written_as_empty=True)) if profile == "written-empty" else profile
    assert main(["check-config", str(site_config(tmp_path, named))]) == 0
    out, err = capsys.readouterr()
    assert ": OK (1 site(s)" in out and err == ""


def test_the_daemon_logs_the_missing_citation_keys_at_its_start(tmp_path: Path, mosquitto: Mosquitto) -> None:
    profile = older_copy(tmp_path)
    config = write_config(tmp_path / "minewatch.toml", mosquitto.url)
    config.write_text(config.read_text().replace('profile = "dovre"', f'profile = "{profile}"'))
    daemon = Daemon(config).start()
    try:
        daemon.wait_ready()
        assert wait_until(lambda: "owners_reading" in daemon.logs(), 10), daemon.logs()
        assert daemon.alive()  # started all the same
    finally:
        daemon.stop()
    said = [line for line in daemon.logs().splitlines() if "Citation key missing: " in line]
    assert [re.findall(r"\(sites quarry\): (\S+): not given; ", s) for s in said] == [[k] for k in KEYS], said
    assert all(f"profile {profile} (sites quarry): " in line for line in said), said
