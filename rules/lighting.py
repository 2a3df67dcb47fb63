"""Helpers the lighting rules share (Dovre 6.C). Not a rule itself.

* Night is civil night, end of civil dusk to start of civil dawn (``rules.sun``): the
  ordinance speaks of "night time safety", and light trespass means nothing in daylight.
* Declared temporary lighting (6.C.6: "Temporary lighting that does not conform with this
  Section may be allowed for a period of not longer than 30 total days within each year")
  exempts the other 6.C findings while it is on, on the year's first ``max_days_per_year``
  days of temporary lighting only. ``lighting_days`` is the one count of those days: the
  ``temporary_lighting`` rule flags the day over the yearly limit with it, and
  ``LightContext.temporary_for`` exempts nothing on that day or later. The profile gives
  every lighting rule the temporary_lighting standard's counting (``TemporaryDays``).
* Vehicles are not fixed light sources (6.C: "light trespass from fixed light sources"; 6.C.3:
  "Except for lighting on vehicles or moving equipment"): ``vehicle_records`` is the one reading
  of the records that put a vehicle at a sensor, for every rule that spares a vehicle's light.
* Findings are grouped per sensor and UTC-aligned minute so that re-evaluating the same
  minute after late data yields the same finding ids.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from types import MappingProxyType

from rules import sun
from rules.citation import citation_text
from rules.model import (
    LightSummary,
    SensorInfo,
    SiteContext,
    SiteData,
    TemporaryLighting,
    VehiclePresence,
)
from rules.numbers import number_problem
from rules.times import aligned_windows, overlaps

FINDING_WINDOW_S = 60


@dataclass(frozen=True, slots=True)
class TemporaryDays:
    """How a temporary lighting allowance (Dovre 6.C.6: "30 total days within each year") is
    counted (``rules.temporary_lighting`` explains the reading). The temporary_lighting standard's
    params hold it; the profile passes the same one, with the standard's section, to every lighting
    rule (their ``temporary_days``, see ``rules.profile``)."""

    max_days_per_year: int = 30
    # An overnight use is one day (of the date it began), not the two calendar dates it touches.
    overnight_counts_as_one_day: bool = True
    # Declared periods (of any fixtures) that overlap or follow within this are one use, dated by its
    # first start: a light switched off for a minute at midnight has not begun a second day.
    same_use_gap_s: float = 3600.0
    # How the lighting rules cite the allowance: the temporary lighting standard's section (the
    # profile fills it in) and the ordinance's words for it, quoted after the section where given.
    # "" for either: the texts cite no section, or quote nothing.
    section: str = ""
    quoted: str = ""

    def __post_init__(self) -> None:
        for key, problem in (
            (
                "max_days_per_year",
                number_problem(self.max_days_per_year, whole=True, minimum=0, unit=" days"),
            ),
            ("same_use_gap_s", number_problem(self.same_use_gap_s, minimum=0, unit=" s")),
        ):
            if problem is not None:
                raise ValueError(f"{key}: {problem}")


# A lighting rule's ``temporary_days`` field carries this: not set in its own params, the profile
# fills it from the standard of this rule kind (rules.profile), so one counting serves all.
LINKED_TO_TEMPORARY_LIGHTING: Mapping[str, str] = MappingProxyType({"linked": "temporary_lighting"})


@dataclass(frozen=True, slots=True)
class LightingDay:
    day: date
    ordinal: int  # 1 for the first temporary-lighting day of its calendar year
    first_on: datetime  # UTC: when temporary lighting began that day
    last_off: datetime  # UTC: when it ended that day
    periods: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class TemporaryPart:
    """The part [on, off) of one declared period that counts on one day of temporary lighting."""

    period: TemporaryLighting
    day: date
    ordinal: int  # the day's number within its calendar year
    on: datetime
    off: datetime


def _uses(periods: Sequence[TemporaryLighting], gap: timedelta) -> list[list[TemporaryLighting]]:
    """Declared periods grouped into uses: each overlaps or follows the use so far within ``gap``."""
    uses: list[list[TemporaryLighting]] = []
    use_end: datetime | None = None
    for period in sorted(periods, key=lambda p: (p.start, p.end, p.id)):
        if use_end is not None and period.start <= use_end + gap:
            uses[-1].append(period)
            use_end = max(use_end, period.end)
        else:
            uses.append([period])
            use_end = period.end
    return uses


def _parts(
    site: SiteContext, periods: Sequence[TemporaryLighting], counting: TemporaryDays
) -> list[tuple[date, datetime, datetime, TemporaryLighting]]:
    """(local date counted, on, off, declared period) for each part of a period that counts on a date."""
    parts = []
    if counting.overnight_counts_as_one_day:
        for use in _uses(periods, timedelta(seconds=counting.same_use_gap_s)):
            on, use_end = use[0].start, max(p.end for p in use)
            while on < use_end:
                off = min(use_end, on + timedelta(hours=24))
                day = on.astimezone(site.tz).date()
                lit = [p for p in use if overlaps(p.start, p.end, on, off)]
                parts += [(day, max(p.start, on), min(p.end, off), p) for p in lit]
                on = off
        return parts
    for period in periods:
        for day in local_days(site, period.start, period.end):
            day_start, day_end = local_day_bounds(site, day)
            parts.append((day, max(period.start, day_start), min(period.end, day_end), period))
    return parts


def temporary_parts(
    site: SiteContext, periods: Sequence[TemporaryLighting], counting: TemporaryDays
) -> list[TemporaryPart]:
    """Every declared period cut into the days it counts on, each day numbered within its year."""
    parts = _parts(site, [p for p in periods if p.end > p.start], counting)
    ordinals: dict[date, int] = {}
    counts: dict[int, int] = {}
    for day in sorted({day for day, *_ in parts}):
        counts[day.year] = counts.get(day.year, 0) + 1
        ordinals[day] = counts[day.year]
    return [TemporaryPart(period, day, ordinals[day], on, off) for day, on, off, period in parts]


def lighting_days(
    site: SiteContext, periods: Sequence[TemporaryLighting], counting: TemporaryDays | None = None
) -> list[LightingDay]:
    """Every day of declared temporary lighting, numbered within its calendar year (see the module)."""
    spans: dict[date, tuple[int, datetime, datetime, list[str]]] = {}
    for part in temporary_parts(site, periods, counting or TemporaryDays()):
        if part.day in spans:
            ordinal, first, last, ids = spans[part.day]
            spans[part.day] = (ordinal, min(first, part.on), max(last, part.off), [*ids, part.period.id])
        else:
            spans[part.day] = (part.ordinal, part.on, part.off, [part.period.id])
    return [
        LightingDay(day, ordinal, first, last, tuple(sorted(set(ids))))
        for day, (ordinal, first, last, ids) in sorted(spans.items())
    ]


def temporary_considered(counting: TemporaryDays) -> str:
    """The reading every lighting finding lists: temporary lighting exempts within the allowance only."""
    return (
        "Declared temporary lighting exempts a light from this standard only on the year's first "
        f"{counting.max_days_per_year} days of temporary lighting{allowance_cited(counting)}, counted as the"
        " temporary-lighting standard counts them; from the next day on the light is judged like any"
        " other (minewatch reading)."
    )


def allowance_cited(counting: TemporaryDays) -> str:
    """ " (6.C.6: 'not longer than 30 total days within each year')", " (§ 4.5(f))" or "":
    the allowance as the profile cites it, nothing where it names no section."""
    if not counting.section:
        return ""
    if counting.quoted:
        return f" ({counting.section}: '{counting.quoted}')"
    return f" ({citation_text(counting.section)})"


@dataclass(frozen=True, slots=True)
class LightContext:
    """The night and the temporary-lighting days around one evaluation."""

    nights: list[tuple[datetime, datetime]]
    allowed: tuple[TemporaryPart, ...]  # parts on days within the year's allowance
    beyond: tuple[TemporaryPart, ...]  # parts on the days after it: not exempt
    max_days_per_year: int
    cited: str = ""  # " (section 6.C.6)": the allowance's section, or "" where the profile names none

    def at_night(self, reading: LightSummary) -> bool:
        # Midpoint, so a summary straddling dusk counts on the side where most of it lies.
        return sun.is_night(self.nights, reading.ts + (reading.end - reading.ts) / 2)

    def temporary_for(self, reading: LightSummary) -> TemporaryLighting | None:
        """The declared temporary lighting that exempts this reading: on one of the year's allowed days."""
        for part in self.allowed:
            if overlaps(reading.ts, reading.end, part.on, part.off):
                return part.period
        return None

    def beyond_allowance(self, readings: Sequence[LightSummary]) -> str:
        """'; declared temporary lighting tl-31 was on, but on day 31 of 2026, ...' or ''."""
        late = dict.fromkeys(
            (part.period.id, part.ordinal, part.day.year)
            for part in self.beyond
            for r in readings
            if overlaps(r.ts, r.end, part.on, part.off) and self.temporary_for(r) is None
        )
        if not late:
            return ""
        days = ", ".join(f"{period} on day {ordinal} of {year}" for period, ordinal, year in late)
        return (
            f"; declared temporary lighting was on ({days}), beyond the {self.max_days_per_year} days a "
            f"year it may be used, so it does not exempt this light{self.cited}"
        )


def light_context(
    site: SiteContext,
    data: SiteData,
    start: datetime,
    end: datetime,
    depression_deg: float = sun.CIVIL_DEPRESSION_DEG,
    *,
    temporary_days: TemporaryDays,
) -> LightContext:
    """Night is civil night unless a rule asks for a darker one (upward light: see there)."""
    near = [
        part
        for part in temporary_parts(site, data.temporary_lighting, temporary_days)
        if overlaps(part.on, part.off, start, end)
    ]
    allowed = tuple(p for p in near if p.ordinal <= temporary_days.max_days_per_year)
    beyond = tuple(p for p in near if p.ordinal > temporary_days.max_days_per_year)
    nights = sun.night(site, start, end, depression_deg)
    cited = f" ({citation_text(temporary_days.section)})" if temporary_days.section else ""
    return LightContext(nights, allowed, beyond, temporary_days.max_days_per_year, cited)


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
