"""`minewatch check-config` on a land-disturbing site with turbidity sensors at the tract's
boundary and no area: 28-5(d)'s sediment standard applies only where more than 5,000 square
feet is uncovered. A profile reading that area from the operator's records needs no configured
area; one reading only the configured area does not judge the standard without it, and nothing
said so before a reading rose."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest

from monitor.cli import main
from tests.support.land_disturbing import BOUNDARY, tract_toml

TOWN = """
[storage]
path = "{db}"

[town]
officer = "Robin Clerk"
title = "Town Clerk"
contact = "Town Hall, 1 Main Street"

"""


def tract(db: Path, profile: str | Path, flags: str = "") -> str:
    """The tract's configuration with its boundary sensor alone (b1), where 28-5(d) judges."""
    return TOWN.format(db=db) + tract_toml(str(profile), flags, (BOUNDARY,))


def flag_only_profile(tmp_path: Path) -> Path:
    """A town's copy of land-disturbing whose sediment standard reads no records, only the flag."""
    text = resources.files("rules.profiles").joinpath("land-disturbing.toml").read_text()
    for line in (
        'area_open_kind = "disturbance-started"',
        'area_close_kind = "ground-cover-established"',
        'area_record_field = "area_sqft"',
    ):
        assert text.count(line) == 1, line
        text = text.replace(line, line.split(" = ")[0] + ' = ""')
    path = tmp_path / "town.toml"
    path.write_text(text)
    return path


def test_a_tract_whose_profile_reads_the_area_from_records_needs_no_configured_area(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "tract.toml"
    config.write_text(tract(tmp_path / "store.db", "land-disturbing"))
    assert main(["check-config", str(config)]) == 0
    assert "warning" not in capsys.readouterr().err


def test_a_tract_without_its_area_is_told_its_sediment_standard_is_not_judged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "tract.toml"
    profile = flag_only_profile(tmp_path)
    config.write_text(tract(tmp_path / "store.db", profile))
    assert main(["check-config", str(config)]) == 0  # valid: the standard is said not judged
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning: ")]
    assert warnings == [
        "warning: site tract: flags.disturbed_area_sqft: not given; sediment_on_tract (section 28-5(d)) is"
        " not judged at b1: a reading beyond its limits is recorded as not judged, area not given"
    ]
    area = "flags = { disturbed_area_sqft = 12000 }"
    config.write_text(tract(tmp_path / "store.db", profile, area))
    assert main(["check-config", str(config)]) == 0
    assert "warning" not in capsys.readouterr().err
