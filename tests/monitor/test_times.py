"""monitor.times: the one parser for the times a person types on the command line."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest

from monitor.errors import UsageError
from monitor.evidence.disclosure import TimeScope
from monitor.times import end_of_day, end_of_scope, parse_date, parse_time, scope_window
from monitor.wire.canonical import to_us
from rules.deadlines import cure_deadline, end_of_local_day

CHICAGO = ZoneInfo("America/Chicago")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-12-15T17:20", datetime(2026, 12, 15, 23, 20, tzinfo=UTC)),  # no offset: site time (CST)
        ("2026-06-15T17:20", datetime(2026, 6, 15, 22, 20, tzinfo=UTC)),  # CDT in summer
        ("2026-12-15T17:20:00-06:00", datetime(2026, 12, 15, 23, 20, tzinfo=UTC)),
        ("2026-12-15T23:20Z", datetime(2026, 12, 15, 23, 20, tzinfo=UTC)),
        ("2026-12-15T23:20:00z", datetime(2026, 12, 15, 23, 20, tzinfo=UTC)),
        ("2026-12-15", datetime(2026, 12, 15, 6, 0, tzinfo=UTC)),  # the site's midnight
        (" 2026-12-15T17:20 ", datetime(2026, 12, 15, 23, 20, tzinfo=UTC)),
    ],
)
def test_forms(text: str, expected: datetime) -> None:
    parsed = parse_time(text, CHICAGO, "--at")
    assert parsed == expected and parsed.tzinfo == UTC


def test_end_of_day_for_a_date_and_as_given_for_a_time() -> None:
    end = datetime(2026, 12, 16, 5, 59, 59, 999_000, tzinfo=UTC)  # 23:59:59.999 CST
    assert end_of_day("2026-12-15", CHICAGO, "--until") == end
    assert end_of_day("2026-12-15T12:00Z", CHICAGO, "--until") == datetime(2026, 12, 15, 12, tzinfo=UTC)


@pytest.mark.parametrize("zone", [UTC, CHICAGO, ZoneInfo("America/Asuncion")])
def test_a_deadline_ends_a_day_at_its_millisecond_and_a_scope_at_its_microsecond(zone: ZoneInfo) -> None:
    """One function ends a day given as a date: a deadline (end_of_day) at the last millisecond,
    as a counted deadline, a reader's scope (end_of_scope) at the last microsecond, as the store's
    times; a time given is the same moment to both."""
    midnight = datetime.combine(date(2026, 12, 16), time(0), zone).astimezone(UTC)
    assert end_of_day("2026-12-15", zone, "--until") == midnight - timedelta(milliseconds=1)
    assert end_of_scope("2026-12-15", zone, "not_after") == midnight - timedelta(microseconds=1)
    for text in ("2026-12-15T17:20", "2026-12-15T23:59:59.999999Z"):
        assert (
            end_of_day(text, zone, "--until")
            == end_of_scope(text, zone, "not_after")
            == parse_time(text, zone, "--at")
        )


@pytest.mark.parametrize("day", [date(2026, 12, 15), date(2026, 3, 8), date(2026, 11, 1), date(2023, 3, 25)])
def test_a_deadline_given_as_a_date_is_the_deadline_counted_to_that_date(day: date) -> None:
    """``notices extend --until DATE`` ended at 23:59:59 while a deadline the profile's rule counts
    (13.3.A) ends at 23:59:59.999: one day had two ends. Both are rules.deadlines.end_of_local_day,
    days of 23 and 25 hours and one whose last hour comes twice included."""
    for zone in (CHICAGO, ZoneInfo("America/Asuncion")):
        counted = cure_deadline(datetime.combine(day - timedelta(days=14), time(12), zone), 14, zone)
        assert end_of_day(day.isoformat(), zone, "--until") == counted == end_of_local_day(day, zone)


@pytest.mark.parametrize("text", ["yesterday", "2026-12-15T25:00", "", "15/12/2026"])
def test_wrong_text_names_the_option_and_the_text(text: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_time(text, CHICAGO, "--from")
    message = str(caught.value)
    assert message.startswith("--from: expected a date") and repr(text) in message
    assert "\n" not in message


def test_dates() -> None:
    assert parse_date("2026-11-29", "--date") == date(2026, 11, 29)
    with pytest.raises(
        UsageError, match=r"--date: expected a date like 2026-12-15 \(YYYY-MM-DD\), got '29/11'"
    ):
        parse_date("29/11", "--date")


@pytest.mark.parametrize(
    ("parse", "text", "zone"),
    [
        (parse_time, "9999-12-31T23:59", CHICAGO),  # west of Greenwich: past the calendar's end in UTC
        (end_of_day, "9999-12-31", CHICAGO),
        (parse_time, "0001-01-01", ZoneInfo("Asia/Tokyo")),  # east: before its start
        # Inside the calendar, outside what the store and its date arithmetic take.
        (parse_time, "1969-12-31T23:59:59Z", CHICAGO),
        (parse_time, "9999-01-01T00:00Z", CHICAGO),
        (end_of_day, "9998-12-31", CHICAGO),  # 9999-01-01T05:59:59Z
        (end_of_scope, "9999-12-31", CHICAGO),
        (end_of_scope, "9998-12-31", CHICAGO),  # 9999-01-01T05:59:59.999999Z
    ],
)
def test_a_time_past_the_calendar_in_utc_is_a_usage_error(parse: object, text: str, zone: ZoneInfo) -> None:
    with pytest.raises(
        UsageError,
        match=r"--at: '.*' is .* UTC, out of range: a time must lie from 1970-01-01 to 9998-12-31 \(UTC\)",
    ):
        parse(text, zone, "--at")  # type: ignore[operator]


def test_the_last_day_past_the_end_in_utc_says_where_it_falls() -> None:
    """ "'9998-12-31' is out of range: a time from 1970-01-01 to 9998-12-31" named the very day given."""
    with pytest.raises(UsageError) as refused:
        end_of_day("9998-12-31", CHICAGO, "--until")
    assert str(refused.value) == (
        "--until: '9998-12-31' is 9999-01-01 05:59 UTC, out of range: a time must lie from 1970-01-01 to"
        " 9998-12-31 (UTC)"
    )


def test_the_first_and_last_times_and_days_taken() -> None:
    from monitor.times import EARLIEST, LATEST, parse_day

    assert parse_time("1970-01-01T00:00Z", CHICAGO, "--at") == EARLIEST
    assert parse_time("9998-12-31T23:59:59Z", CHICAGO, "--at") < LATEST
    assert parse_day("9998-12-31", "--day").isoformat() == "9998-12-31"
    for day in ("1969-12-31", "9999-01-01"):
        with pytest.raises(
            UsageError, match=f"--day: must be a day from 1970-01-01 to 9998-12-31, got {day}"
        ):
            parse_day(day, "--day")


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("2026-02-30", "--date: 2026-02-30 is no day: February 2026 has 28 days"),
        ("2024-02-30", "--date: 2024-02-30 is no day: February 2024 has 29 days"),
        ("2026-13-01", "--date: 2026-13-01 is no day: there are 12 months"),
        ("0000-01-01", "--date: 0000-01-01 is no day: years start at 1"),
    ],
)
def test_a_date_of_the_right_shape_the_calendar_lacks_is_named_so(text: str, said: str) -> None:
    """It was "expected a date like 2026-12-15 (YYYY-MM-DD)", of a date written just so."""
    with pytest.raises(UsageError) as caught:
        parse_date(text, "--date")
    assert str(caught.value) == said


def test_a_time_the_clocks_skip_is_refused() -> None:
    """2026-03-08T02:30 in Chicago was read as 03:30 CDT, so "from 02:30 to 03:00" was said to
    end before it began."""
    with pytest.raises(UsageError) as refused:
        parse_time("2026-03-08T02:30", CHICAGO, "--from")
    assert str(refused.value) == (
        "--from: '2026-03-08T02:30' is no time at the site: the clocks skip it when daylight-saving time"
        " begins (America/Chicago); give a time an hour later or earlier"
    )
    assert parse_time("2026-03-08T03:00", CHICAGO, "--from").isoformat() == "2026-03-08T08:00:00+00:00"
    assert parse_time("2026-03-08T02:30Z", CHICAGO, "--from").isoformat() == "2026-03-08T02:30:00+00:00"


def test_a_time_that_occurs_twice_is_refused_naming_both_offsets() -> None:
    """2026-11-01T01:30 in Chicago occurs at 06:30 and at 07:30 UTC; it was taken silently as the
    first, so a notice served at the second 01:30 was recorded an hour early."""
    with pytest.raises(UsageError) as refused:
        parse_time("2026-11-01T01:30", CHICAGO, "--on")
    assert str(refused.value) == (
        "--on: '2026-11-01T01:30' occurs twice at the site, before and after the clocks go back"
        " (America/Chicago); give its offset: 2026-11-01T01:30-05:00 (the first) or"
        " 2026-11-01T01:30-06:00 (the second)"
    )
    for given, utc in (("2026-11-01T01:30-05:00", "06:30"), ("2026-11-01T01:30-06:00", "07:30")):
        assert parse_time(given, CHICAGO, "--on").isoformat() == f"2026-11-01T{utc}:00+00:00"
    # The minutes either side of the repeated hour are one time each.
    assert parse_time("2026-11-01T00:59", CHICAGO, "--on").isoformat() == "2026-11-01T05:59:00+00:00"
    assert parse_time("2026-11-01T02:00", CHICAGO, "--on").isoformat() == "2026-11-01T08:00:00+00:00"
    with pytest.raises(UsageError, match="occurs twice"):
        end_of_day("2026-11-01T01:00:00", CHICAGO, "--until")


def test_the_portals_time_fields_refuse_a_repeated_hour_naming_both_readings_until_one_is_chosen() -> None:
    """A browser's datetime-local field carries no offset: the portal's forms took the first
    01:30 that night silently, a resident's complaint about the second placed an hour early. The
    refusal names the two readings as the clock said them; the form's ``<field>_offset`` chooses."""
    from monitor.portal.limits import checked_time
    from monitor.times import OccursTwice, readings_if_twice

    with pytest.raises(OccursTwice) as refused:
        checked_time("2026-11-01T01:30", CHICAGO, "from")
    assert str(refused.value) == (
        "from: 01:30 happened twice that night (2026-11-01), before and after the clocks went back:"
        " choose 01:30 CDT (the first) or 01:30 CST (the second)"
    )
    assert refused.value.readings == (("-05:00", "CDT"), ("-06:00", "CST"))
    first = checked_time("2026-11-01T01:30", CHICAGO, "from", "-05:00")
    second = checked_time("2026-11-01T01:30", CHICAGO, "from", "-06:00")
    assert (first.isoformat(), second.isoformat()) == (
        "2026-11-01T06:30:00+00:00",
        "2026-11-01T07:30:00+00:00",
    )
    with pytest.raises(OccursTwice):  # an offset neither reading has chooses nothing
        checked_time("2026-11-01T01:30", CHICAGO, "from", "-04:00")
    # A choice left from an earlier time does not move a time that occurs once.
    assert (
        checked_time("2026-11-02T01:30", CHICAGO, "from", "-05:00").isoformat() == "2026-11-02T07:30:00+00:00"
    )
    assert readings_if_twice("2026-11-01T01:30:15", CHICAGO) == (("-05:00", "CDT"), ("-06:00", "CST"))
    assert readings_if_twice("2026-11-01T02:30", CHICAGO) is None
    assert readings_if_twice("not a time", CHICAGO) is None
    with pytest.raises(UsageError, match="is no time at the site"):  # a skipped time stays refused
        checked_time("2026-03-08T02:30", CHICAGO, "from")


def test_a_day_that_ends_in_a_repeated_hour_ends_at_its_second_occurrence() -> None:
    """Paraguay put its clocks back at midnight (2023-03-26 00:00 -03:00 became 03-25 23:00 -04:00):
    the day's last second came twice, and a deadline on that day ended an hour early."""
    asuncion = ZoneInfo("America/Asuncion")
    assert end_of_day("2023-03-25", asuncion, "--until").isoformat() == "2023-03-26T03:59:59.999000+00:00"
    assert end_of_day("2026-11-01", CHICAGO, "--until").isoformat() == "2026-11-02T05:59:59.999000+00:00"


# fmt: off
SCOPE_ENDS = [
    # A date alone is the whole day in the zone, to the microsecond before the next midnight there.
    pytest.param("2026-07-07", UTC, "2026-07-07T23:59:59.999999+00:00", id="a-day-in-utc"),
    pytest.param("2026-07-07", CHICAGO, "2026-07-08T04:59:59.999999+00:00", id="a-summer-day-in-chicago"),
    pytest.param("2026-03-08", CHICAGO, "2026-03-09T04:59:59.999999+00:00", id="23-hours-clocks-go-forward"),
    pytest.param("2026-11-01", CHICAGO, "2026-11-02T05:59:59.999999+00:00", id="25-hours-clocks-go-back"),
    # Paraguay's clocks went back at midnight (2023-03-26 00:00 -03:00 became 03-25 23:00 -04:00):
    # the day ends after its last hour came a second time.
    pytest.param("2023-03-25", ZoneInfo("America/Asuncion"), "2023-03-26T03:59:59.999999+00:00",
                 id="repeated-last-hour"),
    # ... and went forward at midnight (2023-10-01 00:00 -04:00 became 01:00 -03:00): the next day
    # began at 01:00, its midnight skipped.
    pytest.param("2023-09-30", ZoneInfo("America/Asuncion"), "2023-10-01T03:59:59.999999+00:00",
                 id="skipped-next-midnight"),
    pytest.param("9998-12-31", UTC, "9998-12-31T23:59:59.999999+00:00", id="the-last-day-taken"),
    # A time is taken as given, to the second or the minute it names.
    pytest.param("2026-07-07T12:00:00Z", CHICAGO, "2026-07-07T12:00:00+00:00", id="a-time-in-utc"),
    pytest.param("2026-07-07T23:59", CHICAGO, "2026-07-08T04:59:00+00:00", id="a-site-time"),
    pytest.param("2026-07-07T23:59:59-05:00", UTC, "2026-07-08T04:59:59+00:00", id="a-time-with-its-offset"),
]
# fmt: on


@pytest.mark.parametrize(("text", "zone", "expected"), SCOPE_ENDS)
def test_a_scope_given_by_a_date_ends_with_the_whole_day(text: str, zone: ZoneInfo, expected: str) -> None:
    """A scope's date-only end was 23:59:59 (end_of_day), so a record in the last second of its
    day, or a text naming that day (read to its last microsecond), lay outside a scope given it."""
    assert end_of_scope(text, zone, "not_after").isoformat() == expected


@pytest.mark.parametrize("not_after", ["2026-12-03T21:00:00Z", "2026-12-03"])
def test_the_portals_cut_holds_what_the_scope_holds(not_after: str) -> None:
    """A scope holds its end (TimeScope.holds); the portal's half-open window stopped before it,
    so a reading at exactly a clock end was the bundle's and not the portal's. Each microsecond
    about the end is in the cut exactly when the scope holds it."""
    start = datetime(2026, 12, 3, 20, tzinfo=UTC)
    end = end_of_scope(not_after, UTC, "not_after")
    scope = TimeScope.of(start, end, {})
    assert scope is not None
    lo, hi = scope_window(start - timedelta(hours=1), end + timedelta(hours=1), start, end)
    for moment in (start - MICRO, start, end - MICRO, end, end + MICRO):
        assert (lo <= moment < hi) == scope.holds(to_us(moment)), moment
    assert scope_window(start, end, None, None) == (start, end)


MICRO = timedelta(microseconds=1)
