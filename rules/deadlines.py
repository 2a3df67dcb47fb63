"""Helpers the deadline and record rules share (land-disturbing profiles). Not a rule itself.

* Operator records of profile-defined kinds arrive as ``GenericEvent``s. Records about the
  same thing share its id across kinds: ``slope-exposed`` "s-3" is cured by
  ``slope-covered`` "s-3" (the store keys events by site, kind and id, so this is allowed).
* Days are the site's local calendar days. "Within 21 calendar days" of an act on day D
  leaves all of day D+21 (the day of the act is not counted, the last day is), so the
  condition is overdue from local midnight at the start of day D+22.
* Working days skip the calendar's weekend days and holidays (profile params, which an
  agreement can change for one site): ISO dates and the computed calendars of
  ``rules.holidays`` ("us-federal", "wisconsin").
* Cure periods (Dovre 13.3.A, used by monitor.notify.notices): 14 days after the day of issue,
  to the end of that local day; optionally moved off a Sunday or legal holiday.
* A continuing violation is reported when it begins and again at each local midnight while
  it lasts, one finding per moment, spanning to the next midnight (or the cure, if known).
  Each moment falls in exactly one evaluation interval, so re-evaluating a minute gives
  the same findings and ids; consecutive days abut, so episodes see one continuing story.
  Subjects overdue at the same moment share one finding (Finding ids are per moment).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from zoneinfo import ZoneInfo

from rules.holidays import check_holidays, is_holiday
from rules.model import GenericEvent, SiteContext, SiteData
from rules.numbers import number_problem

WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")


# ---------------------------------------------------------------------------
# Calendar
# ---------------------------------------------------------------------------


def check_weekdays(field_name: str, names: Iterable[str]) -> None:
    """ValueError("field: reason") for a name that is not a weekday (Params.__post_init__)."""
    for name in names:
        if name.lower() not in WEEKDAYS:
            raise ValueError(f"{field_name}: {name!r} is not a weekday; use {', '.join(WEEKDAYS)}")


def check_dates(field_name: str, texts: Iterable[str]) -> None:
    """Holiday entries: ISO dates or calendar names (``rules.holidays.CALENDARS``)."""
    check_holidays(field_name, texts)


@dataclass(frozen=True, slots=True)
class WorkCalendar:
    """Working days: every day except the weekend days and the holidays.

    ``holidays`` are ISO dates and calendar names ("us-federal", "wisconsin"; see
    ``rules.holidays``), computed for whichever year a day falls in.
    """

    weekend: frozenset[int]  # date.weekday() numbers, Monday = 0
    holidays: tuple[str, ...] = ()

    @classmethod
    def of(cls, weekend: Iterable[str], holidays: Iterable[str]) -> WorkCalendar:
        return cls(frozenset(WEEKDAYS.index(name.lower()) for name in weekend), tuple(holidays))

    def is_working(self, day: date) -> bool:
        return day.weekday() not in self.weekend and not is_holiday(self.holidays, day)

    def add_working_days(self, day: date, count: int) -> date:
        """The ``count``-th working day after ``day`` (``day`` itself is not counted)."""
        if len(self.weekend) >= 7:
            raise ValueError(
                "a calendar whose every weekday is weekend has no working days"
            )  # programmer error
        found = 0
        while found < count:
            day += timedelta(days=1)
            if self.is_working(day):
                found += 1
        return day

    def next_working(self, day: date) -> date:
        """``day`` itself if it is a working day, else the first working day after it."""
        if len(self.weekend) >= 7:
            raise ValueError("a calendar whose every weekday is weekend has no working days")
        while not self.is_working(day):
            day += timedelta(days=1)
        return day


def local_date(site: SiteContext, ts: datetime) -> date:
    return ts.astimezone(site.tz).date()


def local_midnight(site: SiteContext, day: date) -> datetime:
    """Start of the local day, in UTC."""
    return datetime.combine(day, time(0), site.tz).astimezone(UTC)


def next_midnight(site: SiteContext, ts: datetime) -> datetime:
    """The first local midnight strictly after ``ts``."""
    return local_midnight(site, local_date(site, ts) + timedelta(days=1))


def last_day(start_day: date, calendar_days: int, working_days: int, calendar: WorkCalendar) -> date | None:
    """Last local day allowed by "within N calendar days or M working days, whichever is shorter".

    A period of 0 is not set; None when neither is set (no deadline).
    """
    candidates = []
    if calendar_days > 0:
        candidates.append(start_day + timedelta(days=calendar_days))
    if working_days > 0:
        candidates.append(calendar.add_working_days(start_day, working_days))
    return min(candidates) if candidates else None


# ---------------------------------------------------------------------------
# Cure periods (Dovre 13.3.A)
# ---------------------------------------------------------------------------


# A deadline's precision: what timestamps on the wire and in notices carry
# (``monitor.wire.codec.format_ts``), so that a deadline reads back as itself.
MILLISECOND = timedelta(milliseconds=1)


def end_of_local_day(day: date, tz: tzinfo, last: timedelta = MILLISECOND) -> datetime:
    """The last moment of a local day, in UTC: the next local midnight less ``last`` (a day of
    23 or 25 hours whole, one whose last hour comes twice ended at its second coming). The one
    end of a day: a cure deadline, counted or extended, and one given as a date alone (``notices
    extend --until``: monitor.times.end_of_day) end at its last millisecond (23:59:59.999); a
    reader's time scope and a date its texts name, held to the store's microseconds, pass
    ``last`` = one microsecond (monitor.times.end_of_scope).
    """
    following = datetime.combine(day + timedelta(days=1), time(0), tz).astimezone(UTC)
    return following - last


def cure_deadline(issued: datetime, days: int, tz: ZoneInfo, roll_to: WorkCalendar | None = None) -> datetime:
    """13.3.A: "fourteen (14) days in which to correct": the end of the site's local day
    ``days`` days after the day of issue (the day of issue is not counted, the last day is).

    ``roll_to``: a last day that is not a business day of that calendar (a Sunday or legal
    holiday under the Wis. Stat. 990.001(4) reading) moves to the next one that is.
    """
    last = issued.astimezone(tz).date() + timedelta(days=days)
    if roll_to is not None:
        last = roll_to.next_working(last)
    return end_of_local_day(last, tz)


# The most days an extension may grant or a request ask for: ten years is beyond any cure period,
# and without a bound a number of days overflows the date arithmetic.
MAX_EXTRA_DAYS = 3650


def extra_days_problem(days: object) -> str | None:
    """Why ``days`` cannot be an extension's, a request's or a cure period's number of days, or
    None, in the words of every number read (rules.numbers); the caller's key says "days"."""
    return number_problem(days, whole=True, minimum=1, maximum=MAX_EXTRA_DAYS)


def extended_deadline(
    current: datetime, extra_days: int, tz: ZoneInfo, roll_to: WorkCalendar | None = None
) -> datetime:
    """An extension of ``extra_days`` more days: the end of the local day that many days after
    the current deadline's day (rolled forward like the first deadline)."""
    if problem := extra_days_problem(extra_days):
        raise ValueError(f"extra days: {problem}")
    last = current.astimezone(tz).date() + timedelta(days=extra_days)
    if roll_to is not None:
        last = roll_to.next_working(last)
    return end_of_local_day(last, tz)


def extra_time(previous: datetime, new: datetime) -> timedelta:
    return new - previous


def after_deadline(moment: datetime, deadline: datetime) -> bool:
    """13.3.B applies only once the (current) cure deadline has passed."""
    return moment > deadline


def deadline_words(deadline: datetime, now: datetime, tz: ZoneInfo) -> str:
    """How far off a cure deadline is at ``now``, in the site's local days: "today", "tomorrow",
    "in 3 days", or "passed" (the reminder and `minewatch status` say it alike)."""
    if after_deadline(now, deadline):
        return "passed"
    days = (deadline.astimezone(tz).date() - now.astimezone(tz).date()).days
    return "today" if days == 0 else "tomorrow" if days == 1 else f"in {days} days"


# ---------------------------------------------------------------------------
# Operator records
# ---------------------------------------------------------------------------


def events_of(data: SiteData, site: SiteContext, kind: str) -> list[GenericEvent]:
    """This site's records of one kind, by time; empty kind (not configured) gives none."""
    if not kind:
        return []
    return sorted(
        (e for e in data.other_events if e.site == site.id and e.kind == kind), key=lambda e: (e.ts, e.id)
    )


def first_by_id(events: Iterable[GenericEvent]) -> dict[str, GenericEvent]:
    """The earliest record per id (a resent record with the same id is the same record)."""
    found: dict[str, GenericEvent] = {}
    for event in events:
        if event.id not in found or event.ts < found[event.id].ts:
            found[event.id] = event
    return found


def number_field(event: GenericEvent, name: str) -> float | None:
    """A finite number in the record's fields, or None if absent or not a number."""
    value = event.fields.get(name)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def text_field(event: GenericEvent, name: str) -> str | None:
    value = event.fields.get(name)
    return value if isinstance(value, str) and value.strip() else None


def flag_set(site: SiteContext, name: str) -> bool:
    """A site fact from configuration (``[sites.flags]``); only TOML ``true`` counts."""
    return bool(name) and site.flags.get(name) is True


def ref(event: GenericEvent) -> str:
    return f"{event.kind}:{event.id}"


# ---------------------------------------------------------------------------
# Continuing violations
# ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Overdue:
    """One subject out of compliance from ``since`` until ``until`` (None: not cured, as far as known)."""

    subject: str
    since: datetime
    until: datetime | None
    refs: tuple[str, ...] = ()
    details: tuple[tuple[str, object], ...] = ()


@dataclass(frozen=True, slots=True)
class Occurrence:
    """A moment a continuing violation is reported, and the subjects overdue then."""

    start: datetime
    end: datetime
    subjects: tuple[Overdue, ...]

    def first_for(self, subject: Overdue) -> bool:
        """True when this is the moment the subject became overdue (not a later day)."""
        return subject.since == self.start


def occurrences(
    site: SiteContext, overdue: Sequence[Overdue], start: datetime, end: datetime, now: datetime
) -> list[Occurrence]:
    """Report moments in [start, end), not after ``now``: each ``since``, then each local midnight."""
    moments: dict[datetime, list[Overdue]] = {}
    for item in overdue:
        until = item.until
        candidates: list[datetime] = []
        if start <= item.since < end:
            candidates.append(item.since)
        midnight = next_midnight(site, max(item.since, start - timedelta(microseconds=1)))
        while midnight < end:
            candidates.append(midnight)
            midnight = next_midnight(site, midnight)
        for moment in candidates:
            if moment > now or (until is not None and until <= moment):
                continue
            moments.setdefault(moment, []).append(item)
    found: list[Occurrence] = []
    for moment in sorted(moments):
        subjects = tuple(sorted(moments[moment], key=lambda o: (o.since, o.subject)))
        stop = next_midnight(site, moment)
        cures = [o.until for o in subjects]
        if all(cure is not None for cure in cures):
            stop = min(stop, max(c for c in cures if c is not None))
        found.append(Occurrence(moment, stop, subjects))
    return found


def days_text(count: int) -> str:
    return f"{count} day" if count == 1 else f"{count} days"
