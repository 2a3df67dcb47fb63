"""Land-disturbing records missing or out of order (§ 28-5), and the working-day calendar.

* A closing record counts only from its opening on: a slope "covered" on 20 April and
  exposed on 1 May is overdue like one never covered (28-5(b)); ground cover too (28-5(d)).
* An activity start without an area may uncover more than 5,000 sq ft: without erosion
  control devices it is a finding that asks for the area (28-5(d)).
* A fill load without a material description is reported, never compliant (28-5(c)).
* "Working day" is not defined: the profile's calendar (weekend plus holidays: none by
  default, US federal and Wisconsin legal holidays as options).
"""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

import pytest

from rules.deadlines import last_day
from rules.model import GenericEvent
from rules.profile import ProfileError, load_profile
from tests.support.land_disturbing import at, day, ev, first_minute, kinds, records, run

case = pytest.param

# --------------------------------------------------------------------------- covers before openings

EXPOSED_AT = "2026-05-01 10:00:00"  # slope s-3; day 21 is 22 May, overdue from 23 May

# fmt: off
SLOPE_ORDER_CASES = [
    case("2026-04-20 10:00:00", ["violation"], id="28-5(b)-covered-11-days-before-exposed"),
    case("2026-04-30 10:00:00", ["violation"], id="28-5(b)-covered-a-day-before"),
    case("2026-05-01 09:59:59", ["violation"], id="28-5(b)-covered-a-second-before"),
    case("2026-05-01 10:00:00", [], id="28-5(b)-covered-the-same-second"),
    case("2026-05-01 10:00:01", [], id="28-5(b)-covered-a-second-after"),
    case("2026-05-02 10:00:00", [], id="28-5(b)-covered-a-day-after"),
]
# fmt: on


@pytest.mark.parametrize(("covered", "expected"), SLOPE_ORDER_CASES)
def test_a_cover_dated_before_the_exposure_does_not_close_it(covered: str, expected: list[str]) -> None:
    data = records(
        ev("slope-exposed", "s-3", EXPOSED_AT, area_sqft=1800), ev("slope-covered", "s-3", covered)
    )
    findings = run("slopes", data, *first_minute("2026-05-23"))
    assert kinds(findings) == expected
    for finding in findings:
        assert "Slope s-3" in finding.summary and "due by the end of 2026-05-22" in finding.summary


COMPLETED_AT = "2026-06-25 16:00:00"  # lot-7, a Thursday; the 15th working day is Thu 16 July

# fmt: off
GROUND_COVER_ORDER_CASES = [
    case("2026-06-20 12:00:00", ["violation"], id="28-5(d)-cover-5-days-before-completion"),
    case("2026-06-24 16:00:00", ["violation"], id="28-5(d)-cover-a-day-before"),
    case("2026-06-25 15:59:59", ["violation"], id="28-5(d)-cover-a-second-before"),
    case("2026-06-25 16:00:00", [], id="28-5(d)-cover-the-same-second"),
    case("2026-06-25 16:00:01", [], id="28-5(d)-cover-a-second-after"),
]
# fmt: on


@pytest.mark.parametrize(("covered", "expected"), GROUND_COVER_ORDER_CASES)
def test_a_ground_cover_dated_before_completion_does_not_count(covered: str, expected: list[str]) -> None:
    data = records(
        ev("construction-completed", "lot-7", COMPLETED_AT, area_sqft=12000),
        ev("ground-cover-established", "lot-7", covered),
    )
    assert kinds(run("ground_cover", data, *first_minute("2026-07-17"))) == expected


def test_a_ground_cover_before_the_activity_started_does_not_close_its_area() -> None:
    # lot-a 3,000 + lot-b 2,500 sq ft; lot-a's "cover" is dated the day before lot-a started.
    data = records(
        ev("ground-cover-established", "lot-a", "2026-05-31 08:00"),
        ev("disturbance-started", "lot-a", "2026-06-01 08:00", area_sqft=3000),
        ev("disturbance-started", "lot-b", "2026-06-03 09:15", area_sqft=2500),
    )
    (finding,) = run("erosion_control", data, *first_minute("2026-06-04"))
    assert finding.kind.value == "violation" and finding.measurements[0].value == 5500


# --------------------------------------------------------------------------- activity of unknown size

STARTED = "2026-06-01 08:00:00"


def started(area: float | None) -> GenericEvent:
    fields: dict[str, Any] = {} if area is None else {"area_sqft": area}
    return ev("disturbance-started", "lot-9", STARTED, **fields)


# fmt: off
UNKNOWN_AREA_CASES = [
    case(started(None), None, None, ["violation"], id="28-5(d)-no-area-no-devices"),
    case(started(5000), None, None, [], id="28-5(d)-5000-sq-ft-given"),
    case(started(5001), None, None, ["violation"], id="28-5(d)-5001-sq-ft-given"),
    case(started(None), "2026-06-01 08:00:00", None, [], id="28-5(d)-no-area-devices-at-start"),
    case(started(None), "2026-06-01 08:00:01", None, ["violation"], id="28-5(d)-no-area-devices-1s-late"),
    case(started(None), None, "2026-06-01 07:59:59", ["violation"], id="28-5(d)-no-area-cover-before-start"),
    case(started(None), None, "2026-06-01 08:00:00", [], id="28-5(d)-no-area-covered-at-start"),
]
# fmt: on


@pytest.mark.parametrize(("opened", "installed", "covered", "expected"), UNKNOWN_AREA_CASES)
def test_an_activity_of_unknown_size_may_be_over_5000_square_feet(
    opened: GenericEvent, installed: str | None, covered: str | None, expected: list[str]
) -> None:
    data = records(
        opened,
        ev("erosion-control-installed", "fence-1", installed) if installed else None,
        ev("ground-cover-established", "lot-9", covered) if covered else None,
    )
    findings = run("erosion_control", data, at(STARTED), at(STARTED) + timedelta(minutes=1))
    assert kinds(findings) == expected


def test_the_unknown_size_finding_asks_for_the_area_and_continues_daily() -> None:
    data = records(started(None))
    (finding,) = run("erosion_control", data, at(STARTED), at(STARTED) + timedelta(minutes=1))
    assert "unknown size (disturbance-started lot-9 gives no area_sqft)" in finding.summary
    assert "possibly more than 5,000 square feet" in finding.summary
    assert "record the area (area_sqft)" in finding.summary
    assert finding.details["area_unknown"] == ["lot-9"] and finding.details["area_requested"] is True
    assert kinds(run("erosion_control", data, *first_minute("2026-06-02"))) == ["violation"]
    # A known area over the size beside it: the known total is reported, the unknown still listed.
    big = ev("disturbance-started", "lot-1", "2026-06-01 09:00", area_sqft=6000)
    (both,) = run("erosion_control", records(started(None), big), *first_minute("2026-06-02"))
    assert "More than 5,000 square feet were uncovered (up to 6,000)" in both.summary
    assert both.details["area_unknown"] == ["lot-9"]


# --------------------------------------------------------------------------- fill without a description

DELIVERY = "2026-06-02 11:20"

# fmt: off
FILL_DESCRIPTION_CASES = [
    case({"max_piece_in": 0, "organic": False}, ["info"], id="28-5(c)-no-description"),
    case({"material": "", "max_piece_in": 0, "organic": False}, ["info"], id="28-5(c)-empty-description"),
    case({"material": "   ", "max_piece_in": 0, "organic": False}, ["info"], id="28-5(c)-blank-description"),
    case({"material": "clean sandy clay", "max_piece_in": 0, "organic": False}, ["compliant"],
         id="28-5(c)-described"),
    case({"max_piece_in": 14, "organic": False}, ["violation"], id="28-5(c)-no-description-but-too-big"),
]
# fmt: on


@pytest.mark.parametrize(("fields", "expected"), FILL_DESCRIPTION_CASES)
def test_a_fill_load_without_a_description_is_reported(fields: dict[str, Any], expected: list[str]) -> None:
    data = records(ev("fill-delivery", "load-88", DELIVERY, **fields))
    findings = run("fill_material", data, at(DELIVERY), at(DELIVERY) + timedelta(minutes=1))
    assert kinds(findings) == expected
    if expected == ["info"]:
        assert "the record lacks material" in findings[0].summary
        assert findings[0].details["missing"] == ["material"]


# --------------------------------------------------------------------------- working days

# Completed Monday 15 June 2026. Juneteenth (Fri 19 June) is a federal and a Wisconsin
# holiday; Independence Day (Sat 4 July) is observed federally on Fri 3 July only.
# fmt: off
WORKING_DAY_CASES = [
    case([], date(2026, 7, 6), id="no-holidays-every-weekday-counts"),
    case(["us-federal"], date(2026, 7, 8), id="us-federal-skips-juneteenth-and-july-3"),
    case(["wisconsin"], date(2026, 7, 7), id="wisconsin-skips-juneteenth-only"),
    case(["us-federal", "wisconsin", "2026-07-07"], date(2026, 7, 9), id="both-and-a-local-closure"),
]
# fmt: on


@pytest.mark.parametrize(("holidays", "due"), WORKING_DAY_CASES)
def test_working_days_follow_the_profiles_holiday_calendar(holidays: list[str], due: date) -> None:
    profile = load_profile("land-disturbing", {"ground_cover.holidays": holidays})
    params = profile.params("ground_cover")
    assert last_day(date(2026, 6, 15), params.calendar_days, params.working_days, params.calendar) == due
    completed = ev("construction-completed", "lot-7", "2026-06-15 10:00", area_sqft=12000)
    # Not overdue on the last day (one day before), overdue from the next local midnight.
    assert run("ground_cover", records(completed), *day(due.isoformat()), profile=profile) == []
    after = (due + timedelta(days=1)).isoformat()
    (finding,) = run("ground_cover", records(completed), *first_minute(after), profile=profile)
    assert f"due by the end of {due.isoformat()}" in finding.summary


def test_default_calendar_is_documented_and_bad_entries_are_refused() -> None:
    assert load_profile("land-disturbing").params("ground_cover").holidays == ()
    with pytest.raises(ProfileError, match=r"ground_cover.*holidays.*texas"):
        load_profile("land-disturbing", {"ground_cover.holidays": ["texas"]})


def test_default_overdue_moment_is_local_midnight() -> None:
    completed = ev("construction-completed", "lot-7", "2026-06-15 10:00", area_sqft=12000)
    last_second = (at("2026-07-06 23:59:59"), at("2026-07-07 00:00:00"))
    assert run("ground_cover", records(completed), *last_second) == []
    first_second = (at("2026-07-07 00:00:00"), at("2026-07-07 00:00:01"))
    assert kinds(run("ground_cover", records(completed), *first_second)) == ["violation"]
