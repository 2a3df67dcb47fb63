"""Siltation beyond the buffer line, from turbidity sensors (land-disturbing 28-5(a)).

28-5(a): "No land-disturbing activity during periods of construction or improvement to
land shall be permitted in proximity to a lake or natural watercourse unless a buffer zone
is provided along the margin of the watercourse of sufficient width to confine visible
siltation within the 25 percent of the buffer zone nearest the land-disturbing activity."

Sensors with placement ``line_placement`` (``buffer_line``) stand at the line that bounds
that 25 percent; sensors with ``reference_placement`` (``reference``) stand upstream or
away from the site. A line reading shows siltation beyond the line when it is more than
``max_above_reference_ntu`` above the reference (the median of the reference readings
within ``reference_window_s`` of it) or more than ``max_ntu`` outright. Only a condition
lasting longer than ``min_duration_s`` counts (a passing truck or a stirred-up sensor is
not siltation): every minute from the moment it has lasted that long is a VIOLATION for
that sensor (earlier minutes of the run are not flagged). Gaps shorter than
``max_gap_s`` do not break a run. Without a reference reading only ``max_ntu`` is judged,
and the finding's completeness says what share of its readings had a reference.

28-5(a) sets no turbidity number ("visible siltation"): the NTU limits are the profile's (its
comments and ``considered`` give their source), and the findings say so rather than cite
28-5(a) for them.

28-5(a)(1): "This subsection shall not apply to a land-disturbing activity in connection
with the construction of facilities to be located on, over, or under a lake or natural
watercourse." A site whose flag ``exempt_flag`` (``activity_over_water``) is true gets
EXEMPT_EXCEEDANCE findings instead, kept as evidence.

The words are the profile's (``reading``, ``exempt_source``, ``exempt_reading``): another town's
buffer standard reads its own ordinance's, not these.

An area condition (land-disturbing 28-5(d): sediment kept within the tract "whenever
land-disturbing activity is undertaken where more than 5,000 square feet is uncovered"): the
standard is judged only where the area is more than ``area_over_sqft``. With ``area_open_kind``
set, the area is the one the operator's records say was uncovered when the reading was taken
(``rules.uncovered``: ``area_open_kind`` records less those closed by ``area_close_kind``, each
giving ``area_record_field``), the same area the erosion control standard of 28-5(d) judges; an
open activity of unknown size counts as possibly over, as it does there, and the finding asks
for its area. At a site whose records hold no ``area_open_kind`` record at all, or with no
``area_open_kind``, the area is the site's fact ``area_flag`` (``[sites] flags``, square feet),
the Town's statement for a site that sends no such records. Where the area is not more than the
threshold, or not given, a reading beyond the line is an INFO finding saying why it is not
judged: the rule does not guess an area.

Early warning: a line sensor whose condition is running but not yet long enough.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from rules.base import RuleSpec, Standard, make_finding, only_site, sensor_label
from rules.citation import citation_text
from rules.deadlines import flag_set
from rules.model import (
    Finding,
    FindingKind,
    Measurement,
    Placement,
    SensorKind,
    SiteContext,
    SiteData,
    TurbidityReading,
)
from rules.numbers import within
from rules.times import aligned_windows, iso, local_hm, span_text
from rules.uncovered import AreaRecords, Uncovered, UncoveredArea, uncovered_area

FINDING_WINDOW_S = 60
_PLACEMENTS = {p.value for p in Placement}


@dataclass(frozen=True, slots=True)
class TurbidityParams:
    max_above_reference_ntu: float = field(
        default=25.0, metadata=within(minimum=0, maximum=10000, unit=" NTU")
    )
    max_ntu: float = field(default=50.0, metadata=within(minimum=0, maximum=10000, unit=" NTU"))
    min_duration_s: float = field(default=600.0, metadata=within(minimum=0, maximum=86400, unit=" s"))
    max_gap_s: float = field(default=300.0, metadata=within(minimum=0, maximum=86400, unit=" s"))
    reference_window_s: float = field(default=600.0, metadata=within(minimum=0, maximum=86400, unit=" s"))
    line_placement: str = "buffer_line"
    reference_placement: str = "reference"
    exempt_flag: str = "activity_over_water"
    # The words of the profile's ordinance (land-disturbing: 28-5(a), 28-5(a)(1)): what a reading
    # beyond the line is read as, and the exemption the flag stands for and where it is written.
    reading: str = "turbidity beyond the line"
    exempt_reading: str = "the site is exempt"
    exempt_source: str = ""
    # The site fact giving the site's area in square feet, and the area the standard applies
    # beyond ("" : everywhere).
    area_flag: str = ""
    area_over_sqft: float = field(default=0.0, metadata=within(minimum=0, maximum=1e9, unit=" sq ft"))
    # The operator's records giving the area uncovered at each moment, which then decide where they
    # exist ("" : not read): opened by area_open_kind, closed by area_close_kind with the same id,
    # the area in area_record_field (land-disturbing: disturbance-started, ground-cover-established,
    # area_sqft, as its erosion_control standard reads them).
    area_open_kind: str = ""
    area_close_kind: str = ""
    area_record_field: str = ""

    def __post_init__(self) -> None:
        for name in ("line_placement", "reference_placement"):
            if getattr(self, name) not in _PLACEMENTS:
                raise ValueError(f"{name}: expected one of {', '.join(sorted(_PLACEMENTS))}")
        if self.line_placement == self.reference_placement:
            raise ValueError("reference_placement: must differ from line_placement")
        if self.area_open_kind and not self.area_record_field:
            raise ValueError("area_record_field: required with area_open_kind (the field giving the area)")
        if not self.area_open_kind and (self.area_close_kind or self.area_record_field):
            raise ValueError("area_open_kind: required with area_close_kind and area_record_field")


@dataclass(frozen=True, slots=True)
class _Judged:
    reading: TurbidityReading
    reference: float | None
    above: bool
    run_start: datetime
    run_s: float  # duration of the condition through this reading


def _sensors(site: SiteContext, placement: str) -> list[str]:
    return [
        s.id
        for s in sorted(site.sensors.values(), key=lambda s: s.id)
        if s.kind == SensorKind.TURBIDITY and s.placement.value == placement
    ]


def _judge(
    site: SiteContext, params: TurbidityParams, data: SiteData, sensor: str, earliest: datetime, end: datetime
) -> list[_Judged]:
    references = set(_sensors(site, params.reference_placement))
    ref_readings = sorted((r for r in data.turbidity if r.sensor in references), key=lambda r: r.ts)
    window = timedelta(seconds=params.reference_window_s)
    readings = sorted(
        (r for r in data.turbidity if r.sensor == sensor and earliest <= r.ts < end), key=lambda r: r.ts
    )
    judged: list[_Judged] = []
    previous: _Judged | None = None
    for reading in readings:
        near = [r.ntu for r in ref_readings if r.ts < reading.end + window and r.end > reading.ts - window]
        reference = statistics.median(near) if near else None
        above = reading.ntu > params.max_ntu or (
            reference is not None and reading.ntu - reference > params.max_above_reference_ntu
        )
        if not above:
            item = _Judged(reading, reference, False, reading.ts, 0.0)
        elif (
            previous is not None
            and previous.above
            and (reading.ts - previous.reading.end).total_seconds() <= params.max_gap_s
        ):
            item = _Judged(reading, reference, True, previous.run_start, previous.run_s + reading.duration_s)
        else:
            item = _Judged(reading, reference, True, reading.ts, reading.duration_s)
        judged.append(item)
        previous = item
    return judged


def _lookback(params: TurbidityParams) -> timedelta:
    return timedelta(seconds=params.min_duration_s + params.max_gap_s)


def _condition(item: _Judged, params: TurbidityParams) -> str:
    if item.reference is not None and item.reading.ntu - item.reference > params.max_above_reference_ntu:
        return (
            f"{item.reading.ntu:g} NTU, {item.reading.ntu - item.reference:g} NTU above the reference "
            f"({item.reference:g} NTU; the profile's limit: {params.max_above_reference_ntu:g} NTU above it)"
        )
    return f"{item.reading.ntu:g} NTU, above the profile's {params.max_ntu:g} NTU limit"


def _exemption_text(params: TurbidityParams) -> str:
    """The exemption a site's flag stands for, after the citation of where it is written as a
    label ("28-5(a)(1): ...", as the short citations in parentheses are)."""
    source = f"{params.exempt_source}: " if params.exempt_source else ""
    return f"{source}{params.exempt_reading} (site flag {params.exempt_flag})"


def site_area_sqft(value: object) -> float | None:
    """A site fact read as an area in square feet: a number, 0 or more (None: it is not one)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < float("inf"):
        return None
    return float(value)


def unjudged_by_area(site: SiteContext, section: str, params: TurbidityParams) -> str:
    """Why the area condition leaves the standard unjudged at a site whose records give no area
    ("" : it is judged)."""
    if not params.area_flag and not params.area_open_kind:
        return ""
    given = site.flags.get(params.area_flag) if params.area_flag else None
    over = f"{params.area_over_sqft:,.0f} sq ft"
    applies = f"{citation_text(section)} applies where the area is more than {over}"
    if given is None:
        sources = [f"no {params.area_open_kind} record"] if params.area_open_kind else []
        sources += [f"site fact {params.area_flag}"] if params.area_flag else []
        return f"not judged: area not given ({', nor '.join(sources)}; {applies})"
    area = site_area_sqft(given)
    if area is None:
        return (
            f"not judged: area not given (site fact {params.area_flag} is {given!r}, not square feet;"
            f" {applies})"
        )
    if area <= params.area_over_sqft:
        return (
            f"not judged: the site's area, {area:,.0f} sq ft (site fact {params.area_flag}), is not more"
            f" than {over} ({citation_text(section)})"
        )
    return ""


def area_records(params: TurbidityParams) -> AreaRecords | None:
    """The records the profile reads the uncovered area from (None: it reads none)."""
    if not params.area_open_kind:
        return None
    return AreaRecords(params.area_open_kind, params.area_close_kind, params.area_record_field)


def _area_at(
    site: SiteContext,
    section: str,
    params: TurbidityParams,
    area: UncoveredArea | None,
    moment: datetime,
) -> tuple[str, Uncovered | None]:
    """Why the area condition leaves a reading at ``moment`` unjudged ("" : judged), and the
    area the records say was uncovered then (None: the records are not read at this site)."""
    if area is None or not area.changes:
        return unjudged_by_area(site, section, params), None
    now = area.at(moment) or Uncovered(moment, 0.0, (), (), ())
    if now.over(params.area_over_sqft):
        return "", now
    open_ids = ", ".join(now.open_ids) or "none"
    return (
        f"not judged: the area uncovered then, {now.known_sqft:,.0f} sq ft ({params.area_open_kind}"
        f" records open: {open_ids}), is not more than {params.area_over_sqft:,.0f} sq ft"
        f" ({citation_text(section)})"
    ), now


def _area_text(params: TurbidityParams, now: Uncovered) -> str:
    """What the records say of the area where they put the reading under the standard."""
    if now.known_sqft > params.area_over_sqft:
        return (
            f"{now.known_sqft:,.0f} sq ft uncovered then ({params.area_open_kind} records open:"
            f" {', '.join(now.open_ids)})"
        )
    which = ", ".join(now.unknown)
    return (
        f"land-disturbing activity of unknown size uncovered then ({params.area_open_kind} {which} gives"
        f" no {params.area_record_field}), possibly more than {params.area_over_sqft:,.0f} sq ft: record"
        f" the area ({params.area_record_field})"
    )


def _area_refs(params: TurbidityParams, now: Uncovered | None) -> tuple[str, ...]:
    """The records the area rests on, as refs ("disturbance-started:lot-9"); none where not read."""
    return tuple(f"{params.area_open_kind}:{i}" for i in now.open_ids) if now is not None else ()


def _area_details(params: TurbidityParams, now: Uncovered | None) -> dict[str, object]:
    """The records' area a finding keeps (nothing where the records are not read)."""
    if now is None:
        return {}
    return {
        "uncovered_sqft": now.known_sqft,
        "area_records": list(_area_refs(params, now)),
        "area_unknown": list(now.unknown),
        "area_requested": bool(now.unknown),
    }


def evaluate(
    site: SiteContext,
    standard: Standard,
    params: TurbidityParams,
    data: SiteData,
    start: datetime,
    end: datetime,
    now: datetime,
) -> list[Finding]:
    data = only_site(data, site.id)
    exempt = flag_set(site, params.exempt_flag)
    records = area_records(params)
    area = uncovered_area(site, records, data) if records is not None else None
    # Runs are followed back through whatever earlier readings the daemon sent.
    earliest = min([start - _lookback(params), *(r.ts for r in data.turbidity)])
    tz = site.tz
    findings: list[Finding] = []
    for sensor in _sensors(site, params.line_placement):
        info = site.sensors[sensor]
        judged = _judge(site, params, data, sensor, earliest, end)
        for window_start, window_end in aligned_windows(start, end, FINDING_WINDOW_S):
            chosen = [
                j
                for j in judged
                if window_start <= j.reading.ts < window_end and j.above and j.run_s > params.min_duration_s
            ]
            if not chosen:
                continue
            # Each reading is judged with the area uncovered when it was taken; a minute with some
            # readings under the standard reports those.
            areas = {id(j): _area_at(site, standard.section, params, area, j.reading.ts) for j in chosen}
            judged_here = [j for j in chosen if not areas[id(j)][0]]
            chosen = judged_here or chosen
            worst = max(chosen, key=lambda j: j.reading.ntu - (j.reference or 0.0))
            unjudged, uncovered_then = areas[id(worst)]
            last = chosen[-1]
            with_reference = sum(1 for j in chosen if j.reference is not None) / len(chosen)
            since = f"over {span_text(last.run_start, last.reading.end, tz)}"
            exemption = _exemption_text(params)
            cited = citation_text(standard.section)
            read_as = f"read as {params.reading} ({cited}, which sets no turbidity number)"
            if uncovered_then is not None and not unjudged:
                read_as += f", with {_area_text(params, uncovered_then)}"
            if unjudged:
                kind, exempt_here = FindingKind.INFO, False
                read_as = f"{params.reading} {unjudged}"
            elif exempt:
                kind, exempt_here = FindingKind.EXEMPT_EXCEEDANCE, True
                read_as += f"; {exemption}, so {cited} does not apply"
            else:
                kind, exempt_here = FindingKind.VIOLATION, False
            summary = (
                f"Turbidity at {sensor_label(info)} was {_condition(worst, params)} at "
                f"{local_hm(window_start, tz)} local, {since}: {read_as}"
            )
            measurements = [Measurement("turbidity", worst.reading.ntu, params.max_ntu, "NTU")]
            if worst.reference is not None:
                measurements.append(
                    Measurement(
                        "above reference",
                        round(worst.reading.ntu - worst.reference, 3),
                        params.max_above_reference_ntu,
                        "NTU",
                    )
                )
            measurements.append(Measurement("duration", round(last.run_s, 1), params.min_duration_s, "s"))
            area_facts = _area_details(params, uncovered_then)
            findings.append(
                make_finding(
                    site,
                    standard,
                    kind,
                    window_start,
                    max(window_end, last.reading.end),
                    summary,
                    sensors=(sensor,),
                    measurements=tuple(measurements),
                    exemptions=(exemption,) if exempt_here else (),
                    refs=(
                        f"turbidity:{sensor}:{iso(chosen[0].reading.ts)}/{iso(last.reading.end)}",
                        *_area_refs(params, uncovered_then),
                    ),
                    completeness=with_reference if worst.reference is not None else 1.0,
                    details={
                        "run_start": iso(last.run_start),
                        "reference_ntu": worst.reference,
                        "reference_sensors": _sensors(site, params.reference_placement),
                        **area_facts,
                    },
                )
            )
    return findings


def early_warnings(
    site: SiteContext, standard: Standard, params: TurbidityParams, data: SiteData, now: datetime
) -> list[Finding]:
    data = only_site(data, site.id)
    if flag_set(site, params.exempt_flag):
        return []
    records = area_records(params)
    area = uncovered_area(site, records, data) if records is not None else None
    warnings = []
    for sensor in _sensors(site, params.line_placement):
        judged: Sequence[_Judged] = _judge(site, params, data, sensor, now - _lookback(params), now)
        if not judged:
            continue
        last = judged[-1]
        if not last.above or last.run_s > params.min_duration_s:
            continue  # clean, or already a violation the evaluation reports
        if (now - last.reading.end).total_seconds() > params.max_gap_s:
            continue
        if _area_at(site, standard.section, params, area, last.reading.ts)[0]:
            continue  # not under the standard: the area is not over its size
        left = (params.min_duration_s - last.run_s) / 60
        summary = (
            f"Turbidity at {sensor_label(site.sensors[sensor])} is {_condition(last, params)} since "
            f"{local_hm(last.run_start, site.tz)}; it becomes a violation if it lasts {left:.0f} more "
            f"minutes ({citation_text(standard.section)})"
        )
        warnings.append(
            make_finding(
                site,
                standard,
                FindingKind.WARNING,
                last.run_start,
                last.reading.end,
                summary,
                sensors=(sensor,),
                measurements=(Measurement("duration", round(last.run_s, 1), params.min_duration_s, "s"),),
                details={"as_of": iso(now)},
            )
        )
    return warnings


def event_kinds(params: TurbidityParams) -> tuple[str, ...]:
    return tuple(k for k in (params.area_open_kind, params.area_close_kind) if k)


def margins(params: TurbidityParams) -> tuple[timedelta, timedelta]:
    window = timedelta(seconds=params.reference_window_s)
    return _lookback(params) + window, window


RULE: RuleSpec[TurbidityParams] = RuleSpec(
    name="turbidity",
    params_type=TurbidityParams,
    evaluate=evaluate,
    margins=margins,
    early_warnings=early_warnings,
    description="Buffer-line turbidity above the reference or a limit for longer than a duration.",
    reads=("turbidity",),
    event_kinds=event_kinds,
)
