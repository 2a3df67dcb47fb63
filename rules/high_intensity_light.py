"""High-intensity light (Dovre 6.C.4: "Search lights, laser source lights, or any similar high
intensity light shall not be permitted, except in emergencies by police or fire personnel").

At night, a boundary light sensor's lux_max above ``max_lux`` is a VIOLATION (no duration:
a searchlight sweep is brief by nature). During declared temporary lighting: EXEMPT_EXCEEDANCE.
Emergency use by police or fire is not known to the meters; the town's clerk decides that.

The finding says what was measured: the peak illuminance at the boundary. A meter cannot
tell a search light from a bright floodlight aimed at it, so the finding calls the source
a search light only when the profile's beam signature matched: the peak at least
``beam_peak_to_mean`` times the summary's mean, i.e. bright only for a moment, as a sweeping
beam is (0 turns the signature off). ``details["beam_signature"]`` says whether it matched.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

from rules.base import RuleSpec, Standard, make_finding, only_site, sensor_label, sensors_of
from rules.lighting import light_context, minute_groups, series
from rules.model import Finding, FindingKind, LightSummary, Measurement, SensorKind, SiteContext, SiteData
from rules.times import iso, local_hm


@dataclass(frozen=True, slots=True)
class HighIntensityLightParams:
    max_lux: float = 25.0
    # A sweeping beam: peak at least this many times the summary's mean lux; 0 never names one.
    beam_peak_to_mean: float = 0.0

    def __post_init__(self) -> None:
        if self.max_lux <= 0:
            raise ValueError("max_lux: must be positive")
        if self.beam_peak_to_mean < 0:
            raise ValueError("beam_peak_to_mean: must not be negative")


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
    context = light_context(site, data, start, end)
    findings: list[Finding] = []
    for sensor_id, info in sensors_of(site, SensorKind.LIGHT, boundary_only=True).items():
        readings = series(data, sensor_id, start, end)
        for window_start, window_end, indices in minute_groups(readings, start, end):
            bright = [
                i for i in indices if context.at_night(readings[i]) and readings[i].lux_max > params.max_lux
            ]
            if not bright:
                continue
            periods = [context.temporary_for(readings[i]) for i in bright]
            own = [i for i, p in zip(bright, periods, strict=True) if p is None]
            chosen = own or bright
            kind = FindingKind.VIOLATION if own else FindingKind.EXEMPT_EXCEEDANCE
            peak = max(chosen, key=lambda i: readings[i].lux_max)
            worst = readings[peak].lux_max
            ratio = beam_ratio(readings[peak])
            beam = params.beam_peak_to_mean > 0 and ratio >= params.beam_peak_to_mean
            reasons = tuple(
                dict.fromkeys(f"declared temporary lighting {p.id}" for p in periods if p is not None)
            )
            tail = "" if own else f"; it was declared temporary lighting ({', '.join(reasons)})"
            source = (
                f"; it was bright only briefly ({min(ratio, 999):.0f} times the minute's mean), as a "
                "sweeping search light is"
                if beam
                else ""
            )
            summary = (
                f"Peak illuminance of {worst:.1f} lux was measured at {sensor_label(info)} at "
                f"{local_hm(window_start, site.tz)} local, above the {params.max_lux:g} lux allowed for "
                f"any light at night{source}; search lights and similar high-intensity lights are not "
                f"permitted (section {standard.section}){tail}"
            )
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
                    exemptions=() if own else reasons,
                    refs=tuple(f"light:{sensor_id}:{iso(readings[i].ts)}" for i in chosen),
                    details={
                        "measured": "peak illuminance at the boundary",
                        "peak_lux": round(worst, 3),
                        "peak_to_mean": round(ratio, 2) if math.isfinite(ratio) else None,
                        "beam_signature": "matched" if beam else "not matched",
                    },
                )
            )
    return findings


RULE: RuleSpec[HighIntensityLightParams] = RuleSpec(
    name="high_intensity_light",
    params_type=HighIntensityLightParams,
    evaluate=evaluate,
    description="Night boundary lux_max above a search-light threshold.",
    reads=("light",),
)
