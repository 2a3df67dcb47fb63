"""The periods the day view shows (pure: times in, periods out; the clock and the store are the caller's).

A period is [start, end) in UTC, shown in the site's time. Zooming moves along a ladder of
steps (an hour, 3 h, 6 h, 12 h, a day, a week, a month), each aligned in site time (hours on
multiples of the step from midnight, each pass of an hour the clocks repeat an hour of its own;
weeks from Monday, months from the 1st), so that a link
names the same period whoever follows it. A period a person typed (from/to) is kept as given.
Up to a day (25 h on the day clocks go back) the plot shows per-minute LAeq; longer periods
show hourly LAeq, L10 and L90 (monitor/journal/queries.py computes both in the store).
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from monitor.times import offset_text, offsets_if_twice

STEPS: tuple[str, ...] = ("hour", "3 hours", "6 hours", "12 hours", "day", "week", "month")
_HOURS = {"hour": 1, "3 hours": 3, "6 hours": 6, "12 hours": 12}
MIN_SPAN = timedelta(minutes=10)
MAX_SPAN = timedelta(days=31)
MINUTE_SPAN_MAX = timedelta(hours=25)  # a day, also the 25-hour one: per-minute points


@dataclass(frozen=True, slots=True)
class Period:
    start: datetime  # UTC
    end: datetime  # UTC, exclusive
    zone: ZoneInfo

    @property
    def span(self) -> timedelta:
        return self.end - self.start

    @property
    def resolution(self) -> str:
        """'minute' (per-minute LAeq) up to a day, 'hour' (hourly LAeq, L10, L90) beyond."""
        return "minute" if self.span <= MINUTE_SPAN_MAX else "hour"

    @property
    def centre(self) -> datetime:
        return self.start + self.span / 2

    def local(self, moment: datetime) -> datetime:
        return moment.astimezone(self.zone)

    def query(self) -> str:
        """The period as the page's query string (site time, to the minute when whole minutes),
        with the reading of an end the clocks showed twice (``from_offset``), which the site time
        alone leaves open: the link to the second 01:00-02:00 that night is to that hour."""
        fields = [("from", form_value(self.start, self.zone)), ("to", form_value(self.end, self.zone))]
        fields += [
            (f"{name}_offset", offset)
            for name, moment in (("from", self.start), ("to", self.end))
            if (offset := offset_if_twice(moment, self.zone))
        ]
        return urllib.parse.urlencode(fields, safe=":")


def form_value(moment: datetime, zone: ZoneInfo) -> str:
    """A time as a datetime-local form field holds it: site time, YYYY-MM-DDTHH:MM[:SS]."""
    local = moment.astimezone(zone)
    return local.strftime("%Y-%m-%dT%H:%M:%S" if local.second else "%Y-%m-%dT%H:%M")


def offset_if_twice(moment: datetime, zone: ZoneInfo) -> str:
    """The UTC offset of ``moment`` ("-06:00") when its site time occurs twice (the hour repeated
    when the clocks go back), which a form's ``<field>_offset`` names; "" otherwise."""
    local = moment.astimezone(zone)
    offset = local.utcoffset()
    return offset_text(offset) if offset is not None and offsets_if_twice(local) else ""


def _midnight(day: date, zone: ZoneInfo) -> datetime:
    return datetime.combine(day, time(0), zone).astimezone(UTC)


def aligned(step: str, moment: datetime, zone: ZoneInfo) -> Period:
    """The ``step`` period of site time that holds ``moment``."""
    local = moment.astimezone(zone)
    day = local.date()
    if step == "hour":
        # An hour of its own for each pass of the hour the clocks repeat (01:00-02:00 CDT, then
        # CST): the moment's own reading (fold), an hour of elapsed time from there.
        first = local.replace(minute=0, second=0, microsecond=0).astimezone(UTC)
        return Period(first, first + timedelta(hours=1), zone)
    if step in _HOURS:
        hours = _HOURS[step]
        first = datetime.combine(day, time(local.hour // hours * hours), zone)
        # Wall-clock arithmetic, then UTC: a step of hours is the site's hours, also across DST.
        last = first + timedelta(hours=hours)
        return Period(first.astimezone(UTC), last.astimezone(UTC), zone)
    if step == "day":
        return Period(_midnight(day, zone), _midnight(day + timedelta(days=1), zone), zone)
    if step == "week":
        monday = day - timedelta(days=day.weekday())
        return Period(_midnight(monday, zone), _midnight(monday + timedelta(days=7), zone), zone)
    if step == "month":
        first_day = day.replace(day=1)
        following = date(first_day.year + first_day.month // 12, first_day.month % 12 + 1, 1)
        return Period(_midnight(first_day, zone), _midnight(following, zone), zone)
    raise ValueError(f"step: unknown step {step!r}; known: {', '.join(STEPS)}")


def day_period(day: date, zone: ZoneInfo) -> Period:
    return aligned("day", _midnight(day, zone), zone)


def step_of(period: Period) -> str | None:
    """The ladder step ``period`` is an aligned period of, None for a period typed in."""
    for step in STEPS:
        if aligned(step, period.start, period.zone) == period:
            return step
    return None


def shifted(period: Period, direction: int) -> Period:
    """The period before (-1) or after (+1): the adjacent aligned period, or as long a one."""
    step = step_of(period)
    if step is not None:
        edge = period.start - timedelta(microseconds=1) if direction < 0 else period.end
        return aligned(step, edge, period.zone)
    return Period(period.start + direction * period.span, period.end + direction * period.span, period.zone)


def zoomed(period: Period, direction: int) -> Period | None:
    """The next smaller (-1) or larger (+1) step around the period's centre; None past the ladder."""
    spans = [aligned(step, period.centre, period.zone) for step in STEPS]
    if direction < 0:
        smaller = [p for p in spans if p.span < period.span]
        return smaller[-1] if smaller else None
    larger = [p for p in spans if p.span > period.span]
    return larger[0] if larger else None


def latest_period(bounds: tuple[datetime, datetime] | None, zone: ZoneInfo) -> Period | None:
    """The period a view opens on: the whole hours of the latest local day with data that hold
    its data (``bounds``: the first and the last record of that day); None without data."""
    if bounds is None:
        return None
    first, last = (b.astimezone(zone) for b in bounds)
    start = first.replace(minute=0, second=0, microsecond=0)
    end = last.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    return Period(start.astimezone(UTC), end.astimezone(UTC), zone)


def checked_period(start: datetime, end: datetime, zone: ZoneInfo) -> Period:
    """A period typed in, or the reason it is refused (ValueError naming the field)."""
    if end <= start:
        raise ValueError("to: must be after from")
    if end - start < MIN_SPAN:
        raise ValueError("to: the period must be at least 10 minutes long")
    if end - start > MAX_SPAN:
        raise ValueError("to: the period must be at most 31 days long")
    return Period(start, end, zone)


def around(start: datetime, end: datetime, zone: ZoneInfo) -> Period:
    """The smallest aligned period that holds [start, end): where a finding or an episode is
    shown on the chart. Beyond a month, the span itself with a tenth either side."""
    last = max(start, end - timedelta(microseconds=1))
    for step in STEPS:
        period = aligned(step, start, zone)
        if period.end > last:
            return period
    margin = (end - start) / 10
    return Period(start - margin, end + margin, zone)
