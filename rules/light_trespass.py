"""Light trespass (Dovre 6.C.2: "Lighting must be directed away from adjacent properties to
prevent light from trespassing or spilling onto those properties").

At night, boundary illuminance (lux_mean) above ``limit_lux`` sustained longer than
``min_duration_s`` is a VIOLATION for every minute from the moment it has lasted that
long (earlier minutes of the run are not flagged: until then it was not yet sustained).
During declared temporary lighting (6.C.6) the same condition is an EXEMPT_EXCEEDANCE, on
the year's allowed days of temporary lighting only (``rules.lighting``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from rules.base import RuleSpec, Standard, make_finding, only_site, sensor_label, sensors_of
from rules.citation import citation_text
from rules.lighting import (
    LINKED_TO_TEMPORARY_LIGHTING,
    TemporaryDays,
    light_context,
    minute_groups,
    run_totals,
    series,
    temporary_considered,
)
from rules.model import Finding, FindingKind, Measurement, SensorKind, SiteContext, SiteData
from rules.numbers import within
from rules.times import iso, local_hm, span_text


@dataclass(frozen=True, slots=True)
class LightTrespassParams:
    limit_lux: float = field(default=1.0, metadata=within(minimum=0, maximum=100000, unit=" lux"))
    min_duration_s: float = field(default=300.0, metadata=within(minimum=0, maximum=86400, unit=" s"))
    # Missing summaries shorter than this do not break a run
    max_gap_s: float = field(default=120.0, metadata=within(minimum=0, maximum=86400, unit=" s"))
    # Declared temporary lighting exempts on the year's allowed days only; the profile links this
    # to the temporary_lighting standard's counting (rules.lighting.TemporaryDays), not set here.
    temporary_days: TemporaryDays = field(default=TemporaryDays(), metadata=LINKED_TO_TEMPORARY_LIGHTING)


def evaluate(
    site: SiteContext,
    standard: Standard,
    params: LightTrespassParams,
    data: SiteData,
    start: datetime,
    end: datetime,
    now: datetime,
) -> list[Finding]:
    data = only_site(data, site.id)
    lookback = timedelta(seconds=params.min_duration_s + params.max_gap_s)
    # Runs are followed back through whatever earlier readings the daemon sent, so a run's
    # start is told truthfully when more than the minimum lookback is available.
    earliest = min([start - lookback, *(r.ts for r in data.light)])
    context = light_context(site, data, earliest, end, temporary_days=params.temporary_days)
    tz = site.tz
    findings: list[Finding] = []
    allowance = params.temporary_days.section
    allowed_under = f" under {allowance}" if allowance else ""  # "under 6.C.6": the profile's section
    for sensor_id, info in sensors_of(site, SensorKind.LIGHT, boundary_only=True).items():
        readings = series(data, sensor_id, earliest, end)
        above = [context.at_night(r) and r.lux_mean > params.limit_lux for r in readings]
        exempt = [context.temporary_for(r) is not None for r in readings]
        any_totals = run_totals(
            readings,
            [r.duration_s if a else None for r, a in zip(readings, above, strict=True)],
            params.max_gap_s,
        )
        own_totals = run_totals(
            readings,
            [r.duration_s if a and not e else None for r, a, e in zip(readings, above, exempt, strict=True)],
            params.max_gap_s,
        )
        for window_start, window_end, indices in minute_groups(readings, start, end):
            violating = [i for i in indices if own_totals[i][1] > params.min_duration_s and not exempt[i]]
            exempted = [
                i for i in indices if exempt[i] and above[i] and any_totals[i][1] > params.min_duration_s
            ]
            chosen = violating or exempted
            if not chosen:
                continue
            kind = FindingKind.VIOLATION if violating else FindingKind.EXEMPT_EXCEEDANCE
            worst = max(readings[i].lux_mean for i in chosen)
            run_start, run_total = (own_totals if violating else any_totals)[chosen[-1]]
            reasons = tuple(
                dict.fromkeys(
                    f"declared temporary lighting {p.id}"
                    for i in chosen
                    if (p := context.temporary_for(readings[i]))
                )
            )
            tail = (
                context.beyond_allowance([readings[i] for i in chosen])
                if violating
                else f"; it was declared temporary lighting ({', '.join(reasons)}), allowed{allowed_under} "
                f"within the year's {params.temporary_days.max_days_per_year} days"
            )
            # The daemon sends only the lookback the rule needs, so an older run looks shorter.
            run_end = readings[chosen[-1]].end
            since = (
                f"from before {local_hm(run_start, tz)} to {local_hm(run_end, tz)}"
                if run_start == readings[0].ts
                else f"over {span_text(run_start, run_end, tz)}"
            )
            summary = (
                f"Light at {sensor_label(info)} reached {worst:.2f} lux at "
                f"{local_hm(window_start, tz)} local, above the {params.limit_lux:g} lux limit {since} "
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
                        Measurement("illuminance (mean)", round(worst, 3), params.limit_lux, "lx"),
                        Measurement("duration above limit", round(run_total, 1), params.min_duration_s, "s"),
                    ),
                    exemptions=reasons,
                    refs=(
                        f"light:{sensor_id}:{iso(readings[chosen[0]].ts)}/{iso(readings[chosen[-1]].end)}",
                    ),
                    details={
                        "run_start": iso(run_start),
                        "considered": [temporary_considered(params.temporary_days)],
                    },
                )
            )
    return findings


def margins(params: LightTrespassParams) -> tuple[timedelta, timedelta]:
    return timedelta(seconds=params.min_duration_s + params.max_gap_s), timedelta(0)


RULE: RuleSpec[LightTrespassParams] = RuleSpec(
    name="light_trespass",
    params_type=LightTrespassParams,
    evaluate=evaluate,
    margins=margins,
    description="Night boundary illuminance above a limit for longer than a duration.",
    reads=("light",),
)
