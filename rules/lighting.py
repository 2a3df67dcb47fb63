"""Helpers the lighting rules share (Dovre 6.C). Not a rule itself.

* Night is civil night, end of civil dusk to start of civil dawn (``rules.sun``): the
  ordinance speaks of "night time safety", and light trespass means nothing in daylight.
* Declared temporary lighting (6.C.6: "Temporary lighting that does not conform with this
  Section may be allowed") exempts the other 6.C findings while it is on; the
  ``temporary_lighting`` rule counts its days and flags the day over the yearly limit.
* Vehicles are not fixed light sources (6.C: "light trespass from fixed light sources"; 6.C.3:
  "Except for lighting on vehicles or moving equipment"): ``vehicle_records`` is the one reading
  of the records that put a vehicle at a sensor, for every rule that spares a vehicle's light.
* Findings are grouped per sensor and UTC-aligned minute so that re-evaluating the same
  minute after late data yields the same finding ids.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta

from rules import sun
from rules.model import (
    LightSummary,
    SensorInfo,
    SiteContext,
    SiteData,
    TemporaryLighting,
    VehiclePresence,
)
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


@dataclass(frozen=True, slots=True)
class VehicleRecord:
    """A record placing a vehicle at a sensor from ``start`` to ``end``, and how a notice names it."""

    start: datetime
    end: datetime
    label: str
    ref: str


def vehicle_records(
    site: SiteContext, info: SensorInfo, data: SiteData, margin_s: float, event_kind: str
) -> tuple[list[VehicleRecord], list[str]]:
    """Records that put a vehicle at this sensor's gates or area, and problems with unusable ones.

    A truck passage at one of the sensor's gates (``margin_s`` either side: waiting at the
    gate), work declared for this sensor, or an ``event_kind`` event (a ``VehiclePresence``)
    at one of its gates or naming it; without an end, that event too covers ``margin_s``
    either side. ``event_kind`` "" reads no such events.
    """
    margin = timedelta(seconds=margin_s)
    records: list[VehicleRecord] = []
    problems: list[str] = []
    for truck in data.trucks:
        if truck.gate in info.gates:
            gate = site.gate_label(truck.gate)
            label = f"haul truck {truck.truck_id or truck.id} at {gate} ({truck.direction})"
            records.append(VehicleRecord(truck.ts - margin, truck.ts + margin, label, f"truck:{truck.id}"))
    for work in data.work:
        # Only work declared for this sensor's area: a site-wide declaration puts no vehicle here.
        if info.id in work.sensors:
            label = f"declared {work.kind.value.replace('_', ' ')} work {work.id} at {info.id}"
            records.append(VehicleRecord(work.start, work.end, label, f"work:{work.id}"))
    for event in data.other_events:
        if not event_kind or event.kind != event_kind:
            continue
        try:
            seen = VehiclePresence.from_event(event)
        except ValueError as exc:
            problems.append(f"{event.kind} {event.id}: {exc}")
            continue
        if (seen.gate is None or seen.gate not in info.gates) and info.id not in seen.sensors:
            continue
        where = f"gate {seen.gate}" if seen.gate in info.gates else info.id
        label = f"vehicle present at {where} ({seen.description or seen.id})"
        start, end = (
            (seen.start, seen.end) if seen.end is not None else (seen.start - margin, seen.start + margin)
        )
        records.append(VehicleRecord(start, end, label, f"{event.kind}:{event.id}"))
    return records, problems


def vehicles_during(
    readings: Sequence[LightSummary], records: Sequence[VehicleRecord]
) -> list[list[VehicleRecord]]:
    """For each reading, the vehicle records whose time overlaps it."""
    return [[v for v in records if overlaps(r.ts, r.end, v.start, v.end)] for r in readings]


Predicate = Callable[[LightSummary], bool]
