"""Boundary noise (6.D) and conveyor parcels (6.G): exemptions, weather, metric, gaps."""

from __future__ import annotations

from datetime import timedelta

import pytest

from rules import evaluate_site
from rules.model import FindingKind, SiteData, WorkKind, WorkPeriod
from tests.rules.helpers import (
    DOVRE,
    SITE,
    at,
    blast,
    kinds,
    make_site,
    run,
    seconds,
    truck,
    wind,
    with_overrides,
)

MINUTE = at("2026-06-15 11:31")  # 16:31 UTC
NEXT = MINUTE + timedelta(minutes=1)
case = pytest.param


def split(first_s: int, first_db: float, rest_db: float):
    return lambda i: first_db if i < first_s else rest_db


def noise(data: SiteData, sensor: str = "n1", profile=DOVRE, key: str = "noise"):
    findings = run(key, data, MINUTE, NEXT, profile=profile)
    return [f for f in findings if f.sensors == (sensor,)]


def test_violation_summary_reads_like_a_sentence() -> None:
    [finding] = noise(SiteData(sound=tuple(seconds("n2", MINUTE, 60, 83.4))), sensor="n2")
    assert finding.kind == FindingKind.VIOLATION
    assert finding.summary == (
        "Noise at boundary meter n2 (south fence) averaged 83.4 dB(A) over 11:31-11:32 local, "
        "above the 80 dB limit (section 6.D)"
    )
    assert finding.start == MINUTE and finding.end == NEXT and finding.completeness == 1.0
    assert finding.measurements[0].name == "LAeq,1min" and finding.measurements[0].limit == 80.0
    assert finding.refs[0] == "sound:n2:2026-06-15T16:31:00Z/2026-06-15T16:32:00Z"


TRUCK_ALL = {"trucks": (truck(MINUTE + timedelta(seconds=30)),)}  # 11:31:30 +-30 s: the whole minute
TRUCK_HALF = {"trucks": (truck(MINUTE),)}  # 11:30:30-11:31:30: the first 30 s
TRUCK_LATER = {"trucks": (truck(MINUTE + timedelta(minutes=5)),)}
SOUTH_TRUCK = {"trucks": (truck(MINUTE + timedelta(seconds=30), gate="south"),)}
BLAST_PART = {"blasts": (blast(MINUTE + timedelta(seconds=10)),)}  # 5 s before, 30 s after: seconds 5-39
TWO_BLASTS = {"blasts": (blast(MINUTE - timedelta(seconds=4)), blast(MINUTE + timedelta(seconds=30), "b2"))}
BLAST_EARLIER = {"blasts": (blast(MINUTE - timedelta(minutes=3)),)}
AROUND = (MINUTE - timedelta(hours=1), NEXT + timedelta(hours=1))
REPAIR = {"work": (WorkPeriod("pit1", "w7", *AROUND, WorkKind.REPAIR),)}
N2_RESTORATION = {"work": (WorkPeriod("pit1", "w7", *AROUND, WorkKind.RESTORATION, sensors=("n2",)),)}
LOUD_HALF_THEN_75 = seconds("n1", MINUTE, 60, split(30, 90.0, 75.0))
LOUD_HALF_THEN_83 = seconds("n1", MINUTE, 60, split(30, 90.0, 83.0))
BLAST_SHAPE = seconds("n1", MINUTE, 60, lambda i: 95.0 if 5 <= i < 40 else 72.0)
V, EX = "violation", "exempt_exceedance"

# fmt: off
EXEMPTION_CASES = [
    case(seconds("n1", MINUTE, 60, 79.9), {}, "n1", [], id="6.D-below-limit"),
    case(seconds("n1", MINUTE, 60, 80.0), {}, "n1", [], id="6.D-at-limit-is-compliant"),
    case(seconds("n1", MINUTE, 60, 83.0), {}, "n1", [V], id="6.D-above-limit"),
    case(seconds("n1", MINUTE, 60, 88.0), TRUCK_ALL, "n1", [EX], id="6.D-truck-covers-whole-minute"),
    case(LOUD_HALF_THEN_75, TRUCK_HALF, "n1", [EX], id="6.D-truck-covers-loud-half"),
    case(LOUD_HALF_THEN_83, TRUCK_HALF, "n1", [V], id="6.D-truck-covers-half-rest-still-loud"),
    case(seconds("n1", MINUTE, 60, 88.0), TRUCK_LATER, "n1", [V], id="6.D-truck-covers-nothing"),
    case(seconds("n1", MINUTE, 60, 88.0), SOUTH_TRUCK, "n1", [V], id="6.D-truck-at-other-gate-not-exempt"),
    case(seconds("n2", MINUTE, 60, 88.0), SOUTH_TRUCK, "n2", [EX], id="6.D-truck-at-own-gate-exempt"),
    case(BLAST_SHAPE, BLAST_PART, "n1", [EX], id="6.D-blast-covers-loud-part"),
    case(seconds("n1", MINUTE, 60, 86.0), TWO_BLASTS, "n1", [EX], id="6.D-two-blasts-cover-whole-minute"),
    case(seconds("n1", MINUTE, 60, 86.0), BLAST_EARLIER, "n1", [V], id="6.D-blast-covers-nothing"),
    case(seconds("n1", MINUTE, 60, 86.0), REPAIR, "n1", [EX], id="6.D-declared-repair-work"),
    case(seconds("n1", MINUTE, 60, 86.0), N2_RESTORATION, "n1", [V], id="6.D-work-declared-for-other-meter"),
]
# fmt: on


@pytest.mark.parametrize(("sound", "events", "sensor", "expected"), EXEMPTION_CASES)
def test_exemptions(sound, events, sensor: str, expected: list[str]) -> None:
    assert kinds(noise(SiteData(sound=tuple(sound), **events), sensor=sensor)) == expected


def test_exempt_exceedance_lists_reasons_and_is_never_a_violation() -> None:
    data = SiteData(sound=tuple(seconds("n1", MINUTE, 60, split(30, 90.0, 75.0))), trucks=(truck(MINUTE),))
    [finding] = noise(data)
    assert finding.exemptions == ("haul truck T-17 entering at gate north at 11:31:00",)
    assert "truck:t1" in finding.refs
    assert [m.name for m in finding.measurements] == ["LAeq,1min", "LAeq,1min without exempt seconds"]
    assert finding.measurements[0].value > 80 >= finding.measurements[1].value


WINDY_LOUD_START = seconds("n1", MINUTE, 60, split(20, 95.0, 75.0))
WINDY_QUIET_START = seconds("n1", MINUTE, 60, split(20, 75.0, 85.0))

# fmt: off
WEATHER_CASES = [
    case(seconds("n1", MINUTE, 60, 83.0), wind(MINUTE, 6, 7.5), ["unreliable"], id="6.D-wind-all-minute"),
    case(WINDY_LOUD_START, wind(MINUTE, 2, 7.5), ["unreliable"], id="6.D-exceedance-needs-windy-seconds"),
    case(WINDY_QUIET_START, wind(MINUTE, 2, 7.5), [V], id="6.D-exceeds-without-windy-seconds"),
    case(seconds("n1", MINUTE, 60, 83.0), wind(MINUTE, 6, 4.0), [V], id="6.D-light-wind-is-fine"),
    case(seconds("n1", MINUTE, 60, 83.0), wind(MINUTE, 6, 1.0, rain=True), ["unreliable"], id="6.D-rain"),
]
# fmt: on


@pytest.mark.parametrize(("sound", "weather", "expected"), WEATHER_CASES)
def test_weather(sound, weather, expected: list[str]) -> None:
    findings = noise(SiteData(sound=tuple(sound), weather=tuple(weather)))
    assert kinds(findings) == expected
    if expected == ["unreliable"]:
        assert "affected by weather" in findings[0].summary


def test_weather_switch_off_makes_it_a_violation() -> None:
    profile = with_overrides(noise__weather_makes_unreliable=False)
    data = SiteData(sound=tuple(seconds("n1", MINUTE, 60, 83.0)), weather=tuple(wind(MINUTE, 6, 7.5)))
    assert kinds(noise(data, profile=profile)) == ["violation"]


# fmt: off
METRIC_CASES = [
    case("LAeq", [], id="6.D-LAeq-average-below-limit"),
    case("LASmax", [V], id="6.D-LASmax-one-loud-second"),
]
# fmt: on


@pytest.mark.parametrize(("metric", "expected"), METRIC_CASES)
def test_metric_selection(metric: str, expected: list[str]) -> None:
    sound = seconds("n1", MINUTE, 60, 76.0, lasmax=lambda i: 86.0 if i == 42 else 77.0)
    findings = noise(SiteData(sound=tuple(sound)), profile=with_overrides(noise__metric=metric))
    assert kinds(findings) == expected
    if findings:
        assert findings[0].measurements[0].name == "LASmax,1min"
        assert findings[0].measurements[0].value == 86.0


# fmt: off
DATA_GAP_CASES = [
    case(40, 83.0, [V], 40 / 60, id="6.D-gap-judged-on-what-is-there"),
    case(8, 90.0, ["info"], 8 / 60, id="6.D-gap-too-few-seconds-not-judged"),
    case(0, 90.0, [], 0.0, id="6.D-no-data-no-finding"),
]
# fmt: on


@pytest.mark.parametrize(("present", "level", "expected", "completeness"), DATA_GAP_CASES)
def test_data_gaps(present: int, level: float, expected: list[str], completeness: float) -> None:
    sound = seconds("n1", MINUTE, 60, level, skip=range(present, 60))
    findings = noise(SiteData(sound=tuple(sound)))
    assert kinds(findings) == expected
    if findings:
        assert findings[0].completeness == pytest.approx(completeness)
        assert findings[0].details["missing_s"] == 60 - present
        assert f"{60 - present} of 60 seconds had no data" in findings[0].summary


def test_too_few_non_exempt_seconds_is_not_judged() -> None:
    # Trucks at 11:30:50 and 11:31:20 (+-30 s) cover seconds 0-49; 10 s are left at 88 dB.
    trucks = (truck(MINUTE - timedelta(seconds=10)), truck(MINUTE + timedelta(seconds=20), truck_id="t2"))
    sound = seconds("n1", MINUTE, 60, 88.0)
    [finding] = noise(SiteData(sound=tuple(sound), trucks=trucks))
    assert finding.kind == FindingKind.INFO
    assert finding.details["judged"] is False and finding.details["judged_s"] == 10
    assert "not judged" in finding.summary


def test_conveyor_parcel_meter_cites_6G() -> None:
    data = SiteData(sound=tuple(seconds("c1", MINUTE, 60, 84.0) + seconds("n1", MINUTE, 60, 70.0)))
    findings = evaluate_site(SITE, DOVRE, data, MINUTE, NEXT, NEXT)
    assert [(f.standard, f.section, f.sensors) for f in findings] == [("conveyor_noise", "6.G", ("c1",))]
    assert "conveyor-parcel boundary meter c1" in findings[0].summary


def test_operations_agreement_changes_limit_for_one_site_only() -> None:
    # Section 4.1: an agreement tailors standards to one operator; the other site keeps 80 dB.
    agreed = with_overrides(noise__limit_db=85)
    quarry_a, quarry_b = make_site("pit-a"), make_site("pit-b")
    data_a = SiteData(sound=tuple(seconds("n1", MINUTE, 60, 83.0, site="pit-a")))
    data_b = SiteData(sound=tuple(seconds("n1", MINUTE, 60, 83.0, site="pit-b")))
    assert evaluate_site(quarry_a, agreed, data_a, MINUTE, NEXT, NEXT) == []
    assert kinds(evaluate_site(quarry_b, DOVRE, data_b, MINUTE, NEXT, NEXT)) == ["violation"]
    assert DOVRE.params("noise").limit_db == 80.0


def test_preexisting_site_is_held_to_noise() -> None:
    # 1.4.C.1: pre-existing operations remain subject to the noise standard.
    old = make_site(preexisting=True)
    data = SiteData(sound=tuple(seconds("n1", MINUTE, 60, 83.0)))
    assert kinds(evaluate_site(old, DOVRE, data, MINUTE, NEXT, NEXT)) == ["violation"]


def test_interval_of_several_minutes_gives_one_finding_per_minute() -> None:
    sound = seconds("n1", MINUTE, 180, 83.0)
    findings = run("noise", SiteData(sound=tuple(sound)), MINUTE, MINUTE + timedelta(minutes=3))
    assert [f.start for f in findings] == [MINUTE + timedelta(minutes=i) for i in range(3)]
    assert len({f.id for f in findings}) == 3
