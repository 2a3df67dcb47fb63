"""Upward light (Dovre 6.C.5: "All outdoor flood light projection above the horizontal is
prohibited"; 6.C.1 asks for fully shielded fixtures).

A sky-facing sensor sees the night sky plus whatever the site throws upward. Its own
baseline is the median of its earlier night readings within ``baseline_window_h`` (sky
glow differs from site to site, so no absolute number fits all). A night reading above
``factor`` times that baseline, and at least ``min_excess_lux`` above it, is a VIOLATION;
during declared temporary lighting an EXEMPT_EXCEEDANCE. With fewer than
``min_baseline_readings`` earlier readings nothing is judged.

The median tolerates a flood light on up to half of the baseline's readings; a light aimed
upward every night for days becomes part of the baseline, which is why the window is short.

A sky-facing sensor sees natural twilight long before civil dawn (the sky brightens many
times over while the sun climbs from -18 to -6 degrees), so this rule's night is darker
than civil night: the sun at least ``sun_depression_deg`` (default 12, nautical night)
below the horizon. Found by running the simulated day: civil night flagged every dawn.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from rules.base import RuleSpec, Standard, make_finding, only_site, sensor_label, sensors_of
from rules.citation import citation_text
from rules.lighting import (
    LINKED_TO_TEMPORARY_LIGHTING,
    TemporaryDays,
    light_context,
    minute_groups,
    series,
    temporary_considered,
)
from rules.model import Finding, FindingKind, Measurement, SensorKind, SiteContext, SiteData
from rules.numbers import within
from rules.times import iso, local_hm


@dataclass(frozen=True, slots=True)
class UpwardLightParams:
    factor: float = field(default=3.0, metadata=within(more_than=1, maximum=1000))
    min_excess_lux: float = field(default=0.05, metadata=within(minimum=0, maximum=100000, unit=" lux"))
    baseline_window_h: float = field(default=72.0, metadata=within(more_than=0, maximum=720, unit=" h"))
    min_baseline_readings: int = field(default=30, metadata=within(minimum=1, maximum=100000))
    # The sun this far below the horizon: 6 (civil night) to 18 degrees (astronomical night)
    sun_depression_deg: float = field(default=12.0, metadata=within(minimum=6, maximum=18, unit=" degrees"))
    # Declared temporary lighting exempts on the year's allowed days only; the profile links this
    # to the temporary_lighting standard's counting (rules.lighting.TemporaryDays), not set here.
    temporary_days: TemporaryDays = field(default=TemporaryDays(), metadata=LINKED_TO_TEMPORARY_LIGHTING)


def evaluate(
    site: SiteContext,
    standard: Standard,
    params: UpwardLightParams,
    data: SiteData,
    start: datetime,
    end: datetime,
    now: datetime,
) -> list[Finding]:
    data = only_site(data, site.id)
    lookback = timedelta(hours=params.baseline_window_h)
    context = light_context(
        site, data, start - lookback, end, params.sun_depression_deg, temporary_days=params.temporary_days
    )
    findings: list[Finding] = []
    for sensor_id, info in sensors_of(site, SensorKind.SKY).items():
        earlier = [
            r.lux_mean
            for r in series(data, sensor_id, start - lookback, start)
            if context.at_night(r) and context.temporary_for(r) is None
        ]
        if len(earlier) < params.min_baseline_readings:
            continue
        baseline = statistics.median(earlier)
        threshold = max(baseline * params.factor, baseline + params.min_excess_lux)
        readings = series(data, sensor_id, start, end)
        for window_start, window_end, indices in minute_groups(readings, start, end):
            bright = [
                i for i in indices if context.at_night(readings[i]) and readings[i].lux_mean > threshold
            ]
            if not bright:
                continue
            periods = [context.temporary_for(readings[i]) for i in bright]
            own = [i for i, p in zip(bright, periods, strict=True) if p is None]
            chosen = own or bright
            kind = FindingKind.VIOLATION if own else FindingKind.EXEMPT_EXCEEDANCE
            worst = max(readings[i].lux_mean for i in chosen)
            reasons = tuple(
                dict.fromkeys(f"declared temporary lighting {p.id}" for p in periods if p is not None)
            )
            tail = (
                context.beyond_allowance([readings[i] for i in chosen])
                if own
                else f"; it was declared temporary lighting ({', '.join(reasons)})"
            )
            summary = (
                f"The {sensor_label(info)} saw {worst:.3f} lux at {local_hm(window_start, site.tz)} local, "
                f"{worst / baseline if baseline > 0 else float('inf'):.1f} times its usual night sky of "
                f"{baseline:.3f} lux: light is being projected above the horizontal "
                f"({citation_text(standard.section)}){tail}"
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
                        Measurement("sky illuminance", round(worst, 4), round(threshold, 4), "lx"),
                        Measurement("night baseline (median)", round(baseline, 4), None, "lx"),
                    ),
                    exemptions=() if own else reasons,
                    refs=tuple(f"light:{sensor_id}:{iso(readings[i].ts)}" for i in chosen),
                    details={
                        "baseline_readings": len(earlier),
                        "factor": params.factor,
                        "considered": [temporary_considered(params.temporary_days)],
                    },
                )
            )
    return findings


def margins(params: UpwardLightParams) -> tuple[timedelta, timedelta]:
    return timedelta(hours=params.baseline_window_h), timedelta(0)


RULE: RuleSpec[UpwardLightParams] = RuleSpec(
    name="upward_light",
    params_type=UpwardLightParams,
    evaluate=evaluate,
    margins=margins,
    description="Sky-facing sensor above its own night baseline by a factor.",
    reads=("light",),
)
