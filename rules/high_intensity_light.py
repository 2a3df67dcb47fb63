"""High-intensity light (Dovre 6.C.4: "Search lights, laser source lights, or any similar high
intensity light shall not be permitted, except in emergencies by police or fire personnel").

At night, a boundary light sensor's lux_max above ``max_lux`` is a VIOLATION (no duration:
a searchlight sweep is brief by nature). The ordinance sets no figure: ``max_lux`` is the
profile's threshold for what counts as a high-intensity light, and the finding says so.
During declared temporary lighting: EXEMPT_EXCEEDANCE. Emergency use by police or fire is
not known to the meters; the town's clerk decides that.

A vehicle's lights are not a search light: 6.C governs "fixed light sources", and a haul
truck's headlights swept across a gate-road sensor are bright for a moment just as a beam is.
A bright reading while the record puts a vehicle at the sensor (the records flashing_light
reads: ``rules.lighting.vehicle_records``, with ``vehicle_margin_s`` and ``vehicle_event_kind``)
is an EXEMPT_EXCEEDANCE naming the record; ``details["decided_by"]`` is ``vehicle_record``.

The finding says what was measured: the peak illuminance at the boundary. A meter cannot
tell a search light from a bright floodlight aimed at it, so the finding calls the source
a search light only when the profile's beam signature matched: the peak at least
``beam_peak_to_mean`` times the summary's mean, i.e. bright only for a moment, as a sweeping
beam is (0 turns the signature off), and no vehicle was recorded there.
``details["beam_signature"]`` says whether it matched.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime

from rules.base import RuleSpec, Standard, make_finding, only_site, sensor_label, sensors_of
from rules.citation import citation_text
from rules.lighting import (
    LINKED_TO_TEMPORARY_LIGHTING,
    TemporaryDays,
    light_context,
    minute_groups,
    series,
    temporary_considered,
    vehicle_records,
    vehicles_during,
)
from rules.model import Finding, FindingKind, LightSummary, Measurement, SensorKind, SiteContext, SiteData
from rules.numbers import within
from rules.times import iso, local_hm


@dataclass(frozen=True, slots=True)
class HighIntensityLightParams:
    max_lux: float = field(default=25.0, metadata=within(more_than=0, maximum=100000, unit=" lux"))
    # A sweeping beam: peak at least this many times the summary's mean lux; 0 never names one.
    beam_peak_to_mean: float = field(default=0.0, metadata=within(minimum=0, maximum=1000))
    # A truck passage or a vehicle-present event without an end covers bright light this long either side.
    vehicle_margin_s: float = field(default=300.0, metadata=within(minimum=0, maximum=3600, unit=" s"))
    # Operator event kind (GenericEvent) placing a vehicle at a gate or sensors; "" reads none.
    vehicle_event_kind: str = ""
    # The section limiting the lighting standards to fixed light sources, cited where a vehicle's
    # lights are exempt (Dovre "6.C"); "" cites none.
    fixed_sources_section: str = ""
    # Declared temporary lighting exempts on the year's allowed days only; the profile links this
    # to the temporary_lighting standard's counting (rules.lighting.TemporaryDays), not set here.
    temporary_days: TemporaryDays = field(default=TemporaryDays(), metadata=LINKED_TO_TEMPORARY_LIGHTING)


def beam_ratio(reading: LightSummary) -> float:
    """Peak over mean illuminance of one summary (inf for a dark mean with a bright peak)."""
    return reading.lux_max / reading.lux_mean if reading.lux_mean > 0 else math.inf


def evaluate(
    site: SiteContext,
    standard: Standard,
    params: HighIntensityLightParams,
    data: SiteData,
    start: datetime,
    end: datetime,
    now: datetime,
) -> list[Finding]:
    data = only_site(data, site.id)
    context = light_context(site, data, start, end, temporary_days=params.temporary_days)
    section = params.fixed_sources_section
    fixed_sources = f" ({citation_text(section)})" if section else ""
    findings: list[Finding] = []
    for sensor_id, info in sensors_of(site, SensorKind.LIGHT, boundary_only=True).items():
        readings = series(data, sensor_id, start, end)
        records, problems = vehicle_records(
            site, info, data, params.vehicle_margin_s, params.vehicle_event_kind
        )
        vehicles = vehicles_during(readings, records)
        for window_start, window_end, indices in minute_groups(readings, start, end):
            bright = [
                i for i in indices if context.at_night(readings[i]) and readings[i].lux_max > params.max_lux
            ]
            if not bright:
                continue
            periods = {i: context.temporary_for(readings[i]) for i in bright}
            own = [i for i in bright if periods[i] is None and not vehicles[i]]
            chosen = own or bright
            kind = FindingKind.VIOLATION if own else FindingKind.EXEMPT_EXCEEDANCE
            peak = max(chosen, key=lambda i: readings[i].lux_max)
            worst = readings[peak].lux_max
            ratio = beam_ratio(readings[peak])
            beam = params.beam_peak_to_mean > 0 and ratio >= params.beam_peak_to_mean
            declared = tuple(
                dict.fromkeys(
                    f"declared temporary lighting {p.id}" for p in periods.values() if p is not None
                )
            )
            seen = tuple(dict.fromkeys(v.label for i in bright for v in vehicles[i]))
            by_vehicle = not own and any(vehicles[i] for i in chosen)
            tails = []
            if not own and declared:
                tails.append(f"it was declared temporary lighting ({', '.join(declared)})")
            if by_vehicle:
                tails.append(
                    f"the record puts a vehicle there ({'; '.join(seen)}): it is taken for the vehicle's "
                    f"lights, not a fixed light{fixed_sources}"
                )
            tail = "".join(f"; {t}" for t in tails)
            if own:
                tail += context.beyond_allowance([readings[i] for i in own])
            source = (
                f"; it was bright only briefly ({min(ratio, 999):.0f} times the minute's mean), as a "
                "sweeping search light is"
                if beam and not by_vehicle
                else ""
            )
            summary = (
                f"Peak illuminance of {worst:.1f} lux was measured at {sensor_label(info)} at "
                f"{local_hm(window_start, site.tz)} local, above {params.max_lux:g} lux, this profile's "
                f"threshold for a high-intensity light at night (the ordinance sets no figure){source}; "
                f"search lights and similar high-intensity lights are not permitted "
                f"({citation_text(standard.section)}){tail}"
            )
            details: dict[str, object] = {
                "measured": "peak illuminance at the boundary",
                "peak_lux": round(worst, 3),
                "peak_to_mean": round(ratio, 2) if math.isfinite(ratio) else None,
                "beam_signature": "matched" if beam else "not matched",
                "considered": [temporary_considered(params.temporary_days)],
            }
            if by_vehicle:
                details["decided_by"] = "vehicle_record"
            if problems:
                details["unusable_vehicle_records"] = problems
            findings.append(
                make_finding(
                    site,
                    standard,
                    kind,
                    window_start,
                    max(window_end, readings[chosen[-1]].end),
                    summary,
                    sensors=(sensor_id,),
                    measurements=(
                        Measurement(
                            "peak illuminance at the boundary", round(worst, 3), params.max_lux, "lx"
                        ),
                    ),
                    exemptions=() if own else (*declared, *seen),
                    refs=(
                        *(f"light:{sensor_id}:{iso(readings[i].ts)}" for i in chosen),
                        *(() if own else dict.fromkeys(v.ref for i in chosen for v in vehicles[i])),
                    ),
                    details=details,
                )
            )
    return findings


def event_kinds(params: HighIntensityLightParams) -> tuple[str, ...]:
    return (params.vehicle_event_kind,) if params.vehicle_event_kind else ()


RULE: RuleSpec[HighIntensityLightParams] = RuleSpec(
    name="high_intensity_light",
    params_type=HighIntensityLightParams,
    evaluate=evaluate,
    event_kinds=event_kinds,
    description="Night boundary lux_max above a search-light threshold, unless a vehicle was recorded there.",
    reads=("light",),
)
