"""`minewatch check-config` on a land-disturbing site with turbidity sensors at the tract's
boundary and no area: 28-5(d)'s sediment standard applies only where more than 5,000 square
feet is uncovered, so it is not judged there, and nothing said so before a reading rose."""

from __future__ import annotations

from pathlib import Path

import pytest

from monitor.cli import main

TRACT = """
[storage]
path = "{db}"

[town]
officer = "Robin Clerk"
title = "Town Clerk"
contact = "Town Hall, 1 Main Street"

[[sites]]
id = "tract"
name = "Hill tract"
operator = "Grader Co"
timezone = "America/New_York"
latitude = 35.78
longitude = -78.64
profile = "land-disturbing"
{flags}
[[sites.sensors]]
id = "b1"
kind = "turbidity"
placement = "boundary"
location = "outfall at the south line"
expected_period_s = 60
"""


def test_a_tract_without_its_area_is_told_its_sediment_standard_is_not_judged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "tract.toml"
    config.write_text(TRACT.format(db=tmp_path / "store.db", flags=""))
    assert main(["check-config", str(config)]) == 0  # valid: the standard is said not judged
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning: ")]
    assert warnings == [
        "warning: site tract: flags.disturbed_area_sqft: not given; sediment_on_tract (section 28-5(d)) is"
        " not judged at b1: a reading beyond its limits is recorded as not judged, area not given"
    ]
    config.write_text(TRACT.format(db=tmp_path / "store.db", flags="flags = { disturbed_area_sqft = 12000 }"))
    assert main(["check-config", str(config)]) == 0
    assert "warning" not in capsys.readouterr().err
