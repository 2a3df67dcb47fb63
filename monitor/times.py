"""The one parser for the times and dates a person types on the command line or in the portal.

Every command that takes a time (``status --at``, ``evidence --from/--to``, ``notices extend
--until``, ``simulate --start/--date``, ``sensor --start``, ``demo --date``) reads it here:

* ``2026-12-15T17:20:00-06:00``, ``2026-12-15T23:20Z``: ISO 8601 with an offset, as given;
* ``2026-12-15T17:20`` (no offset): the site's local time; one the clocks skip in spring, or
  one that occurs twice in autumn (01:30 on the day they go back), is refused, the latter naming
  the two offsets to choose from (``2026-11-01T01:30-05:00`` or ``-06:00``); a portal form,
  whose datetime-local field carries no offset, offers the two readings (OccursTwice) and passes
  the one chosen as ``offset``;
* ``2026-12-15`` (a date alone): the site's local midnight at the start of that day
  (``end_of_day`` for deadlines: the last millisecond of that day, site time, as a counted
  deadline ends; ``end_of_scope`` for the end of a reader's time scope: the whole day, to its
  last microsecond).

A wrong text raises UsageError naming the option and showing the accepted forms; so does a
time or a day outside 1970-01-01 to 9998-12-31 (UTC), what the store's microsecond times and the
date arithmetic take (``FIRST_DAY``..``LAST_DAY``, the portal's pages and API included).

A notice's number of days (``notices extend/request-extension --days``, the portal's notice
forms) is read by ``extra_days``, in the same words everywhere.
"""

from __future__ import annotations

import calendar
import re
from datetime import UTC, date, datetime, time, timedelta, tzinfo

from monitor.errors import UsageError

FORMS = "e.g. 2026-12-15, 2026-12-15T17:20 (site time) or 2026-12-15T23:20Z"

# The days and times a command, a page or the API takes: what the store's microsecond times and
# datetime arithmetic (a day's neighbours, a local midnight in UTC) hold without overflowing.
FIRST_DAY = date(1970, 1, 1)
LAST_DAY = date(9998, 12, 31)
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(9999, 1, 1, tzinfo=UTC)
MICROSECOND = timedelta(microseconds=1)  # the store's unit of time


_DATE_SHAPE = re.compile(r"(\d{4})-(\d{2})-(\d{2})")


def parse_date(text: str, option: str) -> date:
    try:
        return date.fromisoformat(text.strip())
    except ValueError:
        shaped = _DATE_SHAPE.fullmatch(text.strip())
        if shaped:  # the right shape, a day the calendar lacks: 2026-02-30
            year, month, _ = (int(part) for part in shaped.groups())
            if year < 1:
                raise UsageError(f"{option}: {text.strip()} is no day: years start at 1") from None
            if 1 <= month <= 12:
                days = calendar.monthrange(year, month)[1]
                raise UsageError(
                    f"{option}: {text.strip()} is no day: {calendar.month_name[month]} {year} has {days} days"
                ) from None
            raise UsageError(f"{option}: {text.strip()} is no day: there are 12 months") from None
        raise UsageError(f"{option}: expected a date like 2026-12-15 (YYYY-MM-DD), got {text!r}") from None


def parse_day(text: str, option: str) -> date:
    """A day (YYYY-MM-DD) from FIRST_DAY to LAST_DAY; UsageError naming the option otherwise."""
    day = parse_date(text, option)
    if not FIRST_DAY <= day <= LAST_DAY:
        raise UsageError(f"{option}: must be a day from {FIRST_DAY} to {LAST_DAY}, got {day.isoformat()}")
    return day


class TimeOutOfRange(UsageError):
    """A time outside EARLIEST..LATEST (one that exists where it was typed but not in UTC too)."""


def _in_utc(moment: datetime, option: str, text: str) -> datetime:
    try:
        utc = moment.astimezone(UTC)
    except OverflowError:  # e.g. 9999-12-31T23:59 west of Greenwich is past the calendar's end
        utc = None
    if utc is None or not EARLIEST <= utc < LATEST:
        raise TimeOutOfRange(
            f"{option}: {text.strip()[:40]!r} {_reads_as(utc)}, out of range:"
            f" a time must lie from {FIRST_DAY} to {LAST_DAY} (UTC)"
        )
    return utc


def _reads_as(utc: datetime | None) -> str:
    """Where the time falls in UTC, the scale the range is in: the end of 9998-12-31 in Chicago
    is 9999-01-01 in UTC, past the last day although the date given is the last day."""
    return "is past the calendar's end in UTC" if utc is None else f"is {utc:%Y-%m-%d %H:%M} UTC"


class OccursTwice(UsageError):
    """A local time without an offset that occurs twice at the site (the hour repeated when the
    clocks go back). ``readings`` are its two offsets with the zone's names for them, the first
    occurrence first (("-05:00", "CDT"), ("-06:00", "CST")): what a portal form offers to choose
    from, since a browser's datetime-local field cannot carry an offset."""

    def __init__(self, message: str, option: str, value: str, readings: tuple[tuple[str, str], ...]) -> None:
        super().__init__(message)
        self.option, self.value, self.readings = option, value, readings

    def in_words(self) -> str:
        """The refusal as a form says it: "from: 01:30 happened twice that night (2026-11-01):
        choose 01:30 CDT (the first) or 01:30 CST (the second)"."""
        local = datetime.fromisoformat(self.value)
        clock = f"{local:%H:%M:%S}" if local.second else f"{local:%H:%M}"
        (_, first), (_, second) = self.readings
        return (
            f"{self.option}: {clock} happened twice that night ({local:%Y-%m-%d}), before and after"
            f" the clocks went back: choose {clock} {first} (the first) or {clock} {second} (the second)"
        )


def parse_time(text: str, zone: tzinfo, option: str, *, offset: str = "") -> datetime:
    """An aware time in UTC; see the module docstring for the forms. A local time that occurs
    twice raises OccursTwice, unless ``offset`` (a form's companion field: one of the two offsets
    it named) chooses the reading; an offset given for a time that occurs once is not used, the
    time being the same either way."""
    value = text.strip()
    if len(value) == 10:
        return _in_utc(datetime.combine(parse_date(value, option), time(0), zone), option, text)
    try:
        parsed = datetime.fromisoformat(value.replace("z", "Z").replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"{option}: expected a date or a time, {FORMS}; got {text!r}") from None
    if parsed.tzinfo is None:
        local = parsed.replace(tzinfo=zone)
        twice = offsets_if_twice(local)
        if twice and offset.strip() in twice:
            local = local.replace(fold=twice.index(offset.strip()))
        else:
            _refuse_unless_once(
                local,
                option,
                value,
                subject=f"{option}: {value!r}",
                choose="give its offset: {first} (the first) or {second} (the second)",
                instead="give a time an hour later or earlier",
            )
        parsed = local
    return _in_utc(parsed, option, text)


def at_time_of_day(day: date, clock: time, zone: tzinfo, option: str, what: str) -> datetime:
    """``clock`` on ``day`` at the site, in UTC (``simulate --date``: the scenario's start time of
    day on that date). A time the clocks skip, or show twice, is refused as parse_time refuses a
    typed one, naming the date, the time of day (``what`` it is) and the ``--start`` to give."""
    local = datetime.combine(day, clock, zone)
    shown = f"{clock:%H:%M:%S}" if clock.second else f"{clock:%H:%M}"
    written = f"{day}T{shown}"
    _refuse_unless_once(
        local,
        option,
        written,
        subject=f"{option} {day}: {shown} on that date ({what})",
        choose="give --start {first} (the first) or --start {second} (the second), or another date",
        instead="give --start with a time an hour later or earlier, or another date",
    )
    return _in_utc(local, option, written)


def _refuse_unless_once(
    local: datetime, option: str, written: str, *, subject: str, choose: str, instead: str
) -> None:
    """Refuses a wall-clock time the clocks skip or show twice, in the one wording of both:
    ``subject`` names the time as the person gave it, ``choose`` what to write for a repeated
    one ({first} and {second}: ``written`` with each offset), ``instead`` what to give for a
    skipped one. OccursTwice carries the readings for a form to offer."""
    zone = local.tzinfo
    refuse_if_skipped(local, subject=subject, instead=instead)
    if twice := offsets_if_twice(local):
        first, second = twice
        raise OccursTwice(
            f"{subject} occurs twice at the site, before and after the clocks go back ({zone}); "
            + choose.format(first=f"{written}{first}", second=f"{written}{second}"),
            option,
            written,
            ((first, _zone_name(local, 0)), (second, _zone_name(local, 1))),
        )


def refuse_if_skipped(local: datetime, *, subject: str, instead: str) -> None:
    """Refuses a wall-clock time the clocks skip when daylight-saving time begins (02:30 on
    2026-03-08 in Chicago), which read as it stands is an hour on (03:30 CDT): UsageError in the
    words of every such refusal (``subject`` names the time as given, ``instead`` what to give).
    A time shown twice is the caller's to judge (a scenario's clock time picks its showing)."""
    if not _exists(local):
        raise UsageError(
            f"{subject} is no time at the site: the clocks skip it when daylight-saving"
            f" time begins ({local.tzinfo}); {instead}"
        )


def readings_if_twice(text: str, zone: tzinfo) -> tuple[tuple[str, str], ...] | None:
    """The two readings (offset, the zone's name) of a local time without an offset that occurs
    twice at the site, the earlier first; None for any other text (one with an offset, a date, a
    time that occurs once, no time at all): what a form offers beside such a time."""
    try:
        parse_time(text, zone, "time")
    except OccursTwice as exc:
        return exc.readings
    except UsageError:
        return None
    return None


def _exists(local: datetime) -> bool:
    """Whether a wall-clock time occurs in its zone (not in the hour skipped in spring)."""
    try:
        back = local.astimezone(UTC).astimezone(local.tzinfo)
    except OverflowError:  # at the calendar's ends: _in_utc says so
        return True
    return back.replace(tzinfo=None) == local.replace(tzinfo=None)


def offsets_if_twice(local: datetime) -> tuple[str, str] | None:
    """The UTC offsets ("-05:00", "-06:00") of a wall-clock time that occurs twice in its zone
    (the hour repeated when the clocks go back), the first occurrence first; None otherwise.
    Taken silently, such a time was the first one, an hour off if the second was meant."""
    try:
        first, second = local.replace(fold=0).utcoffset(), local.replace(fold=1).utcoffset()
    except OverflowError:  # at the calendar's ends: _in_utc says so
        return None
    if first is None or second is None or first == second:
        return None
    return offset_text(first), offset_text(second)


def _zone_name(local: datetime, fold: int) -> str:
    """The zone's name for one reading of a repeated time (CDT, CST), its offset where it has none."""
    reading = local.replace(fold=fold)
    name = reading.tzname()
    offset = reading.utcoffset()
    if name and not name.startswith(("+", "-")):
        return name
    return f"UTC{offset_text(offset)}" if offset is not None else "?"


def offset_text(offset: timedelta) -> str:
    """An offset as ISO 8601 writes it: "-06:00"."""
    sign = "-" if offset < timedelta(0) else "+"
    minutes = abs(offset) // timedelta(minutes=1)
    return f"{sign}{minutes // 60:02d}:{minutes % 60:02d}"


def end_of_day(
    text: str, zone: tzinfo, option: str, *, last: timedelta | None = None, offset: str = ""
) -> datetime:
    """An end a person gives: a date alone is the end of that day in ``zone``, ``last`` before
    the next midnight there (rules.deadlines.end_of_local_day: a day of 23 or 25 hours whole);
    a time is taken as given (parse_time, ``offset`` choosing a repeated one's reading).

    ``last`` is the precision of what ends: by default (None) a deadline's millisecond
    (rules.deadlines.MILLISECOND, 23:59:59.999), the end a deadline counted by the profile's rule
    has, so that a day given (`notices extend --until`) and a day counted are one deadline; a
    reader's time scope passes the store's microsecond (end_of_scope)."""
    from rules.deadlines import MILLISECOND, end_of_local_day

    value = text.strip()
    if len(value) != 10:
        return parse_time(value, zone, option, offset=offset)
    day = parse_date(value, option)
    _in_utc(datetime.combine(day, time(0), zone), option, value)  # refused before its next day overflows
    return _in_utc(end_of_local_day(day, zone, MILLISECOND if last is None else last), option, value)


def end_of_scope(text: str, zone: tzinfo, option: str) -> datetime:
    """The last moment a time scope holds (it holds its end: TimeScope.holds, scope_window):
    end_of_day to the microsecond, not a deadline's millisecond. The store's times are
    microseconds and a date a record's text names is read so (disclosure._site_times): a date
    alone is its whole day, to the microsecond before the next midnight; ended at 23:59:59, it
    kept out every text naming the scope's last day and every record in its last second."""
    return end_of_day(text, zone, option, last=MICROSECOND)


# An inspector's scope bound as configured, before a site is chosen: a date (the site's local
# day), a time without an offset (the site's local time) or one with an offset (an instant), as
# every other time a person types is read (the module docstring). Each site's reader resolves it
# in that site's zone (scope_moment).
ScopeBound = date | datetime


def scope_bound(text: str, option: str) -> ScopeBound:
    """A scope bound as written (``not_before``, ``not_after``), its form checked: a date, a
    naive time or an aware one (in UTC). UsageError as parse_time's."""
    value = text.strip()
    moment = parse_time(value, UTC, option)  # the form, and the range as UTC reads it
    if len(value) == 10:
        return moment.date()
    naive = datetime.fromisoformat(value.replace("z", "Z").replace("Z", "+00:00")).tzinfo is None
    return moment.replace(tzinfo=None) if naive else moment


def scope_moment(bound: ScopeBound, zone: tzinfo, option: str, *, end: bool) -> datetime:
    """A scope bound at a site in ``zone``: an instant as it is; a local time there (refused,
    UsageError, where it is skipped or occurs twice); a date its local day's start, or for the
    scope's ``end`` the whole day (end_of_scope)."""
    if isinstance(bound, datetime):
        if bound.tzinfo is not None:
            return bound
        # Read as typed: "2026-11-01T01:30" in a refusal, not the 01:30:00 of isoformat().
        whole_minute = bound.second == 0 and bound.microsecond == 0
        return parse_time(bound.isoformat(timespec="minutes" if whole_minute else "auto"), zone, option)
    read = end_of_scope if end else parse_time
    return read(bound.isoformat(), zone, option)


def scope_window(
    start: datetime, end: datetime, not_before: datetime | None, not_after: datetime | None
) -> tuple[datetime, datetime]:
    """[start, end) cut to a reader's time scope [not_before, not_after] (None: open on that
    side), empty (end <= start) when nothing is left: the one cut of every portal view and of a
    scoped reader's bundle. The scope holds its end, as TimeScope.holds and a bundle manifest's
    ``not_after_us`` say, so the half-open cut ends a microsecond (the store's unit) after
    ``not_after``: cut at it, a reading at exactly a scope's clock end (21:00:00Z) was in the
    bundle's records and its texts' check but not on the portal's plots, tables and CSV."""
    if not_before is not None:
        start = max(start, not_before)
    if not_after is not None:
        end = min(end, not_after + MICROSECOND)
    return start, end


def extra_days(text: str) -> int:
    """The days of an extension granted or asked for, as a person typed them: a whole number in
    ASCII digits (no plus sign, no other script's digits; a minus sign is read to say the bound),
    held to the notices' bound (rules.deadlines.extra_days_problem), in rules.numbers' words.
    ValueError says what is wrong, without the option's name."""
    from rules.deadlines import MAX_EXTRA_DAYS, extra_days_problem
    from rules.numbers import too_many_digits

    text = text.strip()
    digits = text.removeprefix("-")
    if not (digits.isascii() and digits.isdigit()):  # a plus sign, a point, another script's digits
        raise ValueError(extra_days_problem(text[:20]))
    if len(digits) > 20:  # past any bound; not worth reading as a number
        raise ValueError(too_many_digits(len(digits), MAX_EXTRA_DAYS))
    days = int(text)
    if problem := extra_days_problem(days):
        raise ValueError(problem)
    return days


def day_given(text: str, option: str) -> date | None:
    """The day when ``text`` is a date alone ('2026-12-07'), None for a time: what was done on a
    day is told as that day, not as the moment :func:`moment_on_or_after` counts it from."""
    value = text.strip()
    return parse_date(value, option) if len(value) == 10 else None


def moment_on_or_after(
    text: str,
    zone: tzinfo,
    option: str,
    earliest: datetime,
    *,
    offset: str = "",
) -> datetime:
    """A time as parse_time reads it. A date alone is the start of that day, except on the day of
    ``earliest``: something done that day (a notice served on the day it was issued) was done
    after it, not at midnight before it. A day before stays before, for the caller to refuse."""
    moment = parse_time(text, zone, option, offset=offset)
    if len(text.strip()) == 10 and parse_date(text, option) == earliest.astimezone(zone).date():
        return max(moment, earliest)
    return moment
