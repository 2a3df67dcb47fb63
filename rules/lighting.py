"""Helpers the lighting rules share (Dovre 6.C). Not a rule itself.

* Night is civil night, end of civil dusk to start of civil dawn (``rules.sun``): the
  ordinance speaks of "night time safety", and light trespass means nothing in daylight.
* Declared temporary lighting (6.C.6: "Temporary lighting that does not conform with this
  Section may be allowed") exempts the other 6.C findings while it is on; the
  ``temporary_lighting`` rule counts its days and flags the day over the yearly limit.
* Findings are grouped per sensor and UTC-aligned minute so that re-evaluating the same
  minute after late data yields the same finding ids.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta

from rules import sun
from rules.model import LightSummary, SiteContext, SiteData, TemporaryLighting
from rules.times import aligned_windows, overlaps

FINDING_WINDOW_S = 60


@dataclass(frozen=True, slots=True)
class LightContext:
    """The night and the temporary-lighting periods around one evaluation."""

    nights: list[tuple[datetime, datetime]]
    temporary: tuple[TemporaryLighting, ...]

    def at_night(self, reading: LightSummary) -> bool:
        # Midpoint, so a summary straddling dusk counts on the side where most of it lies.
        return sun.is_night(self.nights, reading.ts + (reading.end - reading.ts) / 2)

    def temporary_for(self, reading: LightSummary) -> TemporaryLighting | None:
        for period in self.temporary:
            if overlaps(reading.ts, reading.end, period.start, period.end):
                return period
        return None


def light_context(
    site: SiteContext,
    data: SiteData,
    start: datetime,
    end: datetime,
    depression_deg: float = sun.CIVIL_DEPRESSION_DEG,
) -> LightContext:
    """Night is civil night unless a rule asks for a darker one (upward light: see there)."""
    return LightContext(sun.night(site, start, end, depression_deg), data.temporary_lighting)


def series(data: SiteData, sensor: str, start: datetime, end: datetime) -> list[LightSummary]:
    return sorted((r for r in data.light if r.sensor == sensor and start <= r.ts < end), key=lambda r: r.ts)


def run_totals(
    readings: Sequence[LightSummary], amounts: Sequence[float | None], max_gap_s: float
) -> list[tuple[datetime, float]]:
    """For each reading, (start of its run, amount accumulated through it); None breaks a run.

    Consecutive readings belong to one run when each starts within ``max_gap_s`` of the
    previous one's end, so a dropped summary or two does not reset a sustained condition.
    """
    totals: list[tuple[datetime, float]] = []
    run_start: datetime | None = None
    running = 0.0
    previous_end: datetime | None = None
    for reading, amount in zip(readings, amounts, strict=True):
        contiguous = previous_end is not None and (reading.ts - previous_end).total_seconds() <= max_gap_s
        if amount is None:
            run_start, running = None, 0.0
            totals.append((reading.ts, 0.0))
        else:
            if run_start is None or not contiguous:
                run_start, running = reading.ts, 0.0
            running += amount
            totals.append((run_start, running))
        previous_end = reading.end
    return totals


def minute_groups(
    readings: Sequence[LightSummary], start: datetime, end: datetime
) -> list[tuple[datetime, datetime, list[int]]]:
    """Indices of the readings that start in each aligned minute of [start, end)."""
    groups: list[tuple[datetime, datetime, list[int]]] = []
    for window_start, window_end in aligned_windows(start, end, FINDING_WINDOW_S):
        indices = [i for i, r in enumerate(readings) if window_start <= r.ts < window_end]
        if indices:
            groups.append((window_start, window_end, indices))
    return groups


def local_days(site: SiteContext, start: datetime, end: datetime) -> list[date]:
    """Local calendar dates a period [start, end) touches (an end at midnight does not touch the next day)."""
    tz = site.tz
    first = start.astimezone(tz).date()
    last = (end - timedelta(microseconds=1)).astimezone(tz).date() if end > start else first
    days = []
    day = first
    while day <= last:
        days.append(day)
        day += timedelta(days=1)
    return days


def local_day_bounds(site: SiteContext, day: date) -> tuple[datetime, datetime]:
    tz = site.tz
    return datetime.combine(day, time(0), tz), datetime.combine(day + timedelta(days=1), time(0), tz)


Predicate = Callable[[LightSummary], bool]
