"""Cure deadlines (Dovre 13.3.A) and legal holiday calendars: pure arithmetic, no store.

13.3.A: "An Operator shall be granted fourteen (14) days in which to correct violations".
The day of issue is not counted; the period ends at the end of the site's local day.
Optionally (Wis. Stat. 990.001(4) reading, for the Town to confirm) a last day on a
Sunday or legal holiday moves to the next business day.
"""

from __future__ import annotations

import tomllib
from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from rules.deadlines import (
    WorkCalendar,
    after_deadline,
    cure_deadline,
    end_of_local_day,
    extended_deadline,
)
from rules.holidays import holiday_dates, is_holiday, nth_weekday
from rules.profile import ProfileError, build_profile, load_profile
from tests.support.paths import REPO

TZ = ZoneInfo("America/Chicago")
ROLL = WorkCalendar.of(["sunday"], ["us-federal", "wisconsin"])
case = pytest.param


def local(*args: int) -> datetime:
    return datetime(*args, tzinfo=TZ).astimezone(UTC)  # type: ignore[misc]


def eod(*args: int) -> datetime:
    return end_of_local_day(date(*args), TZ)


# fmt: off
CURE_CASES = [
    case(local(2026, 6, 15, 11, 31, 6), None, eod(2026, 6, 29), id="13.3.A-14-days-end-of-local-day"),
    case(local(2026, 6, 15, 23, 59, 59), None, eod(2026, 6, 29), id="13.3.A-issued-last-second-of-day"),
    case(local(2026, 6, 16, 0, 0, 0), None, eod(2026, 6, 30), id="13.3.A-issued-first-second-of-next-day"),
    case(local(2026, 6, 15, 0, 0, 0), None, eod(2026, 6, 29), id="13.3.A-issued-at-midnight"),
    # 19:30 CDT is 00:30 UTC the next day: the site's day counts, not UTC's.
    case(local(2026, 6, 15, 19, 30), None, eod(2026, 6, 29), id="13.3.A-local-day-not-utc-day"),
    # Across the start of daylight saving time (8 March 2026): still the end of the local day.
    case(local(2026, 2, 25, 9, 0), None, eod(2026, 3, 11), id="13.3.A-across-dst"),
    # Sunday 28 June 2026: kept without the option, Monday with it.
    case(local(2026, 6, 14, 10, 0), None, eod(2026, 6, 28), id="13.3.A-sunday-kept-by-default"),
    case(local(2026, 6, 14, 10, 0), ROLL, eod(2026, 6, 29), id="13.3.A-sunday-to-monday"),
    # Saturday is not a Sunday or legal holiday under 990.001(4).
    case(local(2026, 6, 13, 10, 0), ROLL, eod(2026, 6, 27), id="13.3.A-saturday-kept"),
    # Saturday 4 July 2026 is a legal holiday; Sunday 5 July too: Monday 6 July.
    case(local(2026, 6, 20, 10, 0), ROLL, eod(2026, 7, 6), id="13.3.A-independence-day-then-sunday"),
    # Sunday 6 September, then Labor Day: Tuesday 8 September.
    case(local(2026, 8, 23, 10, 0), ROLL, eod(2026, 9, 8), id="13.3.A-sunday-then-labor-day"),
    case(local(2026, 8, 22, 10, 0), ROLL, eod(2026, 9, 5), id="13.3.A-saturday-before-labor-day-kept"),
    # The day before and after a holiday are ordinary days.
    case(local(2026, 8, 20, 10, 0), ROLL, eod(2026, 9, 3), id="13.3.A-thursday-kept"),
    # Wisconsin's general election day (3 November 2026) is a legal holiday there.
    case(local(2026, 10, 20, 10, 0), ROLL, eod(2026, 11, 4), id="13.3.A-wisconsin-election-day"),
]
# fmt: on


@pytest.mark.parametrize(("issued", "roll", "expected"), CURE_CASES)
def test_cure_deadline(issued: datetime, roll: WorkCalendar | None, expected: datetime) -> None:
    assert cure_deadline(issued, 14, TZ, roll) == expected


def test_end_of_local_day_is_the_last_millisecond() -> None:
    end = eod(2026, 6, 29)
    assert end.astimezone(TZ).strftime("%Y-%m-%d %H:%M:%S.%f") == "2026-06-29 23:59:59.999000"
    assert end + timedelta(milliseconds=1) == local(2026, 6, 30, 0, 0)


# fmt: off
AFTER_CASES = [
    case(eod(2026, 6, 29) - timedelta(seconds=1), False, id="13.3.B-a-second-before"),
    case(local(2026, 6, 29, 23, 59, 59), False, id="13.3.B-last-second-of-the-day"),
    case(eod(2026, 6, 29), False, id="13.3.B-at-the-deadline"),
    case(local(2026, 6, 30, 0, 0, 0), True, id="13.3.B-next-local-midnight"),
    case(local(2026, 6, 30, 0, 0, 1), True, id="13.3.B-a-second-after"),
]
# fmt: on


@pytest.mark.parametrize(("moment", "expected"), AFTER_CASES)
def test_after_deadline(moment: datetime, expected: bool) -> None:
    assert after_deadline(moment, eod(2026, 6, 29)) is expected


# fmt: off
EXTENSION_CASES = [
    case(eod(2026, 6, 29), 1, None, eod(2026, 6, 30), id="13.3.A-one-more-day"),
    case(eod(2026, 6, 29), 21, None, eod(2026, 7, 20), id="13.3.A-21-more-days"),
    case(eod(2026, 6, 29), 6, None, eod(2026, 7, 5), id="13.3.A-extension-to-a-sunday"),
    case(eod(2026, 6, 29), 6, ROLL, eod(2026, 7, 6), id="13.3.A-extension-rolled-off-sunday"),
]
# fmt: on


@pytest.mark.parametrize(("current", "days", "roll", "expected"), EXTENSION_CASES)
def test_extension(current: datetime, days: int, roll: WorkCalendar | None, expected: datetime) -> None:
    assert extended_deadline(current, days, TZ, roll) == expected


def test_extension_needs_at_least_a_day() -> None:
    with pytest.raises(ValueError, match=r"^extra days: must be at least 1, got 0$"):
        extended_deadline(eod(2026, 6, 29), 0, TZ)


# --------------------------------------------------------------------------- holiday calendars

# fmt: off
HOLIDAY_CASES = [
    case("us-federal", date(2026, 1, 19), True, id="federal-mlk-3rd-monday"),
    case("us-federal", date(2026, 1, 12), False, id="federal-2nd-monday-january"),
    case("us-federal", date(2026, 2, 16), True, id="federal-washington"),
    case("us-federal", date(2026, 5, 25), True, id="federal-memorial-last-monday"),
    case("us-federal", date(2026, 5, 18), False, id="federal-monday-before-memorial"),
    case("us-federal", date(2026, 6, 19), True, id="federal-juneteenth"),
    case("us-federal", date(2020, 6, 19), False, id="federal-no-juneteenth-before-2021"),
    case("us-federal", date(2026, 7, 3), True, id="federal-july-4-saturday-observed-friday"),
    case("us-federal", date(2026, 9, 7), True, id="federal-labor-day"),
    case("us-federal", date(2026, 10, 12), True, id="federal-columbus"),
    case("us-federal", date(2026, 11, 26), True, id="federal-thanksgiving"),
    case("us-federal", date(2026, 11, 27), False, id="federal-day-after-thanksgiving"),
    case("us-federal", date(2027, 12, 24), True, id="federal-christmas-saturday-observed-friday"),
    case("us-federal", date(2027, 12, 31), True, id="federal-new-year-saturday-observed-dec-31"),
    case("us-federal", date(2026, 11, 3), False, id="federal-no-election-day"),
    case("wisconsin", date(2026, 1, 1), True, id="wi-new-year"),
    case("wisconsin", date(2026, 7, 3), False, id="wi-no-friday-observance"),
    case("wisconsin", date(2027, 7, 5), True, id="wi-sunday-july-4-moves-to-monday"),
    case("wisconsin", date(2026, 8, 11), True, id="wi-partisan-primary-even-year"),
    case("wisconsin", date(2027, 8, 10), False, id="wi-no-primary-odd-year"),
    case("wisconsin", date(2026, 11, 3), True, id="wi-general-election"),
    case("wisconsin", date(2026, 11, 11), True, id="wi-veterans-day"),
    case("wisconsin", date(2026, 12, 24), False, id="wi-december-24-not-a-legal-holiday"),
    case("wisconsin", date(2026, 4, 3), False, id="wi-good-friday-not-a-whole-holiday"),
    case("2026-12-26", date(2026, 12, 26), True, id="listed-date"),
    case("2026-12-26", date(2027, 12, 26), False, id="listed-date-other-year"),
]
# fmt: on


@pytest.mark.parametrize(("calendar", "day", "expected"), HOLIDAY_CASES)
def test_holidays(calendar: str, day: date, expected: bool) -> None:
    assert is_holiday([calendar], day) is expected


def test_each_calendar_has_its_count_in_2026() -> None:
    # Federal: 11 holidays, July 4 (Saturday) observed on Friday 3 July as well.
    assert len(holiday_dates(["us-federal"], 2026)) == 12
    # Wisconsin 995.20: 11 days plus the two election days of an even year.
    assert len(holiday_dates(["wisconsin"], 2026)) == 13


@pytest.mark.parametrize(
    ("month", "weekday", "n", "expected"),
    [
        case(5, 0, -1, date(2026, 5, 25), id="last-monday-may"),
        case(11, 3, 4, date(2026, 11, 26), id="4th-thursday-november"),
        case(12, 3, -1, date(2026, 12, 31), id="last-thursday-december"),
        case(3, 6, 1, date(2026, 3, 1), id="first-sunday-is-the-1st"),
    ],
)
def test_nth_weekday(month: int, weekday: int, n: int, expected: date) -> None:
    assert nth_weekday(2026, month, weekday, n) == expected


# --------------------------------------------------------------------------- the profile


def test_dovre_default_keeps_sundays_and_lists_the_calendars() -> None:
    dovre = load_profile("dovre")
    assert dovre.cure_next_business_day is False and dovre.cure_calendar() is None
    assert dovre.cure_closed_days == ("sunday",)
    assert dovre.holidays == ("us-federal", "wisconsin")
    rolled = load_profile("dovre", {"cure_next_business_day": True})
    calendar = rolled.cure_calendar()
    assert calendar is not None and not calendar.is_working(date(2026, 7, 4))
    assert cure_deadline(local(2026, 6, 14, 10, 0), rolled.cure_days, TZ, calendar) == eod(2026, 6, 29)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        case(
            "holidays",
            ["July 4"],
            "holidays: expected dates like '2026-07-03' or a calendar",
            id="bad-holiday",
        ),
        case("holidays", ["texas"], "got 'texas'", id="unknown-calendar"),
        case("cure_closed_days", ["sun"], "'sun' is not a weekday", id="bad-closed-day"),
        case("cure_next_business_day", "yes", "expected true or false", id="bad-switch"),
    ],
)
def test_bad_cure_settings_are_refused(key: str, value: Any, message: str) -> None:
    raw = tomllib.loads((REPO / "rules/profiles/dovre.toml").read_text("utf-8"))
    raw[key] = value
    with pytest.raises(ProfileError, match=message):
        build_profile(raw, source="test")
