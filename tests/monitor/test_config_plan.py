"""The site plan in the configuration (docs/CONFIG.md, "The site plan"): each mistake is one
line naming its key and the reason; configurations without a plan stay valid."""

from __future__ import annotations

from pathlib import Path

import pytest

from monitor import geo
from monitor.cli import main
from monitor.config import PLAN_TOLERANCE_M, load_config, parse_config
from monitor.errors import ConfigError
from monitor.portal import siteplan
from tests.support.config_samples import MINIMAL
from tests.support.paths import REPO

# A square site of about 667 m (north-south) by 626 m (east-west) about (45.27, -91.62).
SQUARE = "[[45.273, -91.624], [45.273, -91.616], [45.267, -91.616], [45.267, -91.624]]"
NORTH_EDGE = 45.273


def site(boundary: str = SQUARE, sensor: str = "", extra: str = "") -> str:
    """One site with a boundary and a sound meter n1 (``sensor``: more keys of n1)."""
    return f"""
[[sites]]
id = "s1"
timezone = "America/Chicago"
latitude = 45.27
longitude = -91.62
boundary = {boundary}
[[sites.adjoining_owners]]
id = "p-1"
name = "Hansen residence"
[[sites.sensors]]
id = "n1"
kind = "sound"
{sensor}
{extra}
"""


def problems(text: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_config(text)
    return info.value.problems


def metres_north(lat: float, metres: float) -> float:
    return lat + metres / geo.EARTH_RADIUS_M * 180 / 3.141592653589793


def test_a_whole_plan_is_read_as_given() -> None:
    config = parse_config(
        site(
            sensor="position = [45.273, -91.620]",
            extra="""
[[sites.gates]]
id = "g1"
name = "North gate"
position = [45.273, -91.621]
[[sites.parcels]]
id = "conveyor"
name = "Conveyor parcel"
section = "6.G"
polygon = [[45.268, -91.616], [45.268, -91.613], [45.267, -91.613], [45.267, -91.616], [45.268, -91.616]]
[[sites.dwellings]]
id = "hansen"
name = "Hansen residence"
owner = "p-1"
position = [45.265, -91.620]
""",
        )
    )
    s = config.sites[0]
    assert s.boundary == ((45.273, -91.624), (45.273, -91.616), (45.267, -91.616), (45.267, -91.624))
    assert s.sensors[0].position == (45.273, -91.620)
    assert s.gates[0].position == (45.273, -91.621)
    # A closed ring is kept open: its repeated first point is dropped.
    corners = ((45.268, -91.616), (45.268, -91.613), (45.267, -91.613), (45.267, -91.616))
    assert s.parcels[0].polygon == corners
    dwelling = s.dwellings[0]
    assert (s.parcels[0].section, dwelling.owner, dwelling.position) == ("6.G", "p-1", (45.265, -91.62))
    assert siteplan.missing(s) == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            site(boundary="[[45.273, -91.624], [45.267, -91.616]]"),
            "sites[0].boundary: a polygon needs at least 3 distinct points, got 2",
        ),
        (
            site(boundary="[[45.273, -91.624], [45.267, -91.616], [45.273, -91.624]]"),
            "sites[0].boundary: a polygon needs at least 3 distinct points, got 2",
        ),
        (
            # Four identical points: a ring of three, none distinct (it was accepted)
            site(boundary="[[45.273, -91.624], [45.273, -91.624], [45.273, -91.624], [45.273, -91.624]]"),
            "sites[0].boundary: a polygon needs at least 3 distinct points, got 1",
        ),
        (
            site(boundary="[[45.273, -91.624], [45.267, -91.616], [45.267, -91.616], [45.273, -91.616]]"),
            "sites[0].boundary[2]: repeats point 1: list each corner once",
        ),
        (
            # A bow tie: the edges 0-1 and 2-3 cross.
            site(boundary="[[45.273, -91.624], [45.267, -91.616], [45.273, -91.616], [45.267, -91.624]]"),
            "sites[0].boundary: the edge from point 0 to point 1 crosses the edge from point 2 to point 3:"
            " a polygon may not intersect itself",
        ),
        (
            site(boundary="[[45.273, -91.624], [95.0, -91.616], [45.267, -91.616]]"),
            "sites[0].boundary[1]: latitude 95 is out of range"
            " (-90 to 90; the order is [latitude, longitude])",
        ),
        (
            site(boundary='[[45.273, -91.624], "north", [45.267, -91.616]]'),
            "sites[0].boundary[1]: expected [latitude, longitude] in degrees (WGS84), got 'north'",
        ),
        (site(boundary='"square"'), "sites[0].boundary: expected a list of [latitude, longitude] points"),
        (
            site(sensor="position = [45.273, -191.62]"),
            "sites[0].sensors[0].position: longitude -191.62 is out of range (-180 to 180)",
        ),
        (
            site(sensor="position = [45.273]"),
            "sites[0].sensors[0].position: expected [latitude, longitude] in degrees (WGS84), got [45.273]",
        ),
        (
            # 334 m inside the north edge, 313 m from the east and west ones: not at the boundary.
            site(sensor="position = [45.270, -91.620]"),
            "sites[0].sensors[0].position: n1 is a boundary monitor but stands 313 m from the site boundary"
            f" (at most {PLAN_TOLERANCE_M:g} m): move the point onto the boundary",
        ),
        (
            site(sensor='placement = "site"\nposition = [45.280, -91.620]'),
            "sites[0].sensors[0].position: n1 stands 778 m outside the site boundary (an on-site monitor"
            f" is inside it or within {PLAN_TOLERANCE_M:g} m)",
        ),
        (
            site(
                sensor='placement = "conveyor"\nposition = [45.270, -91.620]',
                extra='[[sites.parcels]]\nid = "c"\n'
                "polygon = [[45.268, -91.616], [45.268, -91.613], [45.267, -91.613]]",
            ),
            "sites[0].sensors[0].position: n1 watches a conveyor parcel's perimeter but stands",
        ),
        (
            site(extra='[[sites.dwellings]]\nid = "hansen"\nposition = [45.270, -91.620]'),
            "sites[0].dwellings[0].position: hansen lies inside the site boundary; a dwelling near the site"
            " is outside it",
        ),
        (
            site(extra='[[sites.dwellings]]\nid = "hansen"\nowner = "p-9"\nposition = [45.265, -91.620]'),
            "sites[0].dwellings[0].owner: unknown adjoining owner 'p-9' (adjoining_owners: p-1)",
        ),
        (
            site(extra='[[sites.dwellings]]\nid = "hansen"'),
            "sites[0].dwellings[0].position: required: [latitude, longitude] in degrees (WGS84)",
        ),
        (
            site(extra='[[sites.parcels]]\nid = "c"\nsection = "6.G"'),
            "sites[0].parcels[0].polygon: required: [[latitude, longitude], ...] around the parcel",
        ),
        (
            site(extra='[[sites.gates]]\nid = "g1"\nposition = [-91.62, 45.27]'),
            "sites[0].gates[0].position: latitude -91.62 is out of range",
        ),
        (
            site(extra='[[sites.dwellings]]\nid = "x"\nposition = [45.265, -91.62]\nheight = 3'),
            "sites[0].dwellings[0].height: unknown key",
        ),
    ],
)
def test_each_mistake_is_one_line_naming_the_key(text: str, expected: str) -> None:
    found = problems(text)
    assert any(p.startswith(expected) for p in found), found
    assert all("\n" not in p for p in found)


def test_a_boundary_monitor_within_the_tolerance_is_at_the_boundary() -> None:
    inside_10m = metres_north(NORTH_EDGE, -10)
    config = parse_config(site(sensor=f"position = [{inside_10m}, -91.620]"))
    assert config.sites[0].sensors[0].position == (inside_10m, -91.62)
    outside_30m = metres_north(NORTH_EDGE, 30)
    (problem,) = problems(site(sensor=f"position = [{outside_30m}, -91.620]"))
    assert "stands 30 m from the site boundary" in problem


def test_a_seismograph_at_a_structure_stands_where_the_structure_is() -> None:
    """A seismograph's monitoring point is at the structure, outside the boundary: no problem."""
    extra = '[[sites.sensors]]\nid = "sg1"\nkind = "seismograph"\nposition = [45.265, -91.620]'
    assert parse_config(site(extra=extra)).sites[0].sensors[1].position == (45.265, -91.62)


def test_a_configuration_without_a_plan_stays_valid_and_the_plan_says_what_is_missing() -> None:
    s = parse_config(MINIMAL).sites[0]
    assert (s.boundary, s.parcels, s.dwellings, s.sensors[0].position) == ((), (), (), None)
    assert siteplan.missing(s) == [
        "the site boundary (sites.boundary)",
        "the position of monitor n1",
        "the nearest dwellings (sites.dwellings)",
    ]
    assert siteplan.view(s, siteplan.ALL_LAYERS)["drawn"] is False


def test_check_config_prints_each_problem_on_its_line_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(
        site(
            boundary="[[45.273, -91.624], [45.267, -91.616], [45.273, -91.616], [45.267, -91.624]]",
            sensor="position = [45.273, -191.62]",
            extra='[[sites.dwellings]]\nid = "hansen"',
        )
    )
    assert main(["check-config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    for expected in (
        "sites[0].boundary: the edge from point 0 to point 1 crosses the edge from point 2 to point 3",
        "sites[0].sensors[0].position: longitude -191.62 is out of range (-180 to 180)",
        "sites[0].dwellings[0].position: required",
    ):
        assert sum(expected in line for line in err.splitlines()) == 1, err


def test_the_shipped_sites_have_a_whole_plan() -> None:
    for path in (REPO / "sensors" / "demo" / "dovre-demo.toml", REPO / "deploy" / "dovre-quarry.toml"):
        s = load_config(path, secrets="defer").sites[0]
        assert siteplan.missing(s) == [], path
        assert [p.section for p in s.parcels] == ["6.G"]
        assert {d.owner for d in s.dwellings} == {o.id for o in s.adjoining_owners}
