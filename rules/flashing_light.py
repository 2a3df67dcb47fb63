"""Flashing, revolving or intermittent light (Dovre 6.C.3: "Except for lighting on vehicles or
moving equipment, there shall be no flashing, revolving or intermittent lighting").

Each night light summary with a raw ``burst`` sampled at >= ``min_burst_rate_hz`` is
examined with an FFT: a flashing light shows a dominant periodic component between
``min_hz`` and ``max_hz`` (a strobe, a rotating beacon) with a large modulation depth
(Michelson contrast of the 5th/95th percentiles). How long it flashed within the burst
is measured from the first to the last crossing of the mid level and scaled to the
summary's duration.

"Except for lighting on vehicles or moving equipment" is decided from the record first:
flashing at a sensor that coincides (within ``vehicle_margin_s``) with a truck passage at
one of the sensor's gates, a declared work period naming the sensor, or a vehicle-present
event (``vehicle_event_kind``) at one of its gates or naming it, is a vehicle's. Such
flashing gives an EXEMPT_EXCEEDANCE that names the record, only where it lasted long enough
to be a violation otherwise. Without a record the duration test is the fallback: flashing
summaries that follow each other add up, and only flashing that persists longer than
``min_duration_s`` is a VIOLATION (a fixed installation does not stop after a few seconds;
a beacon passing for 20 s does). ``details["decided_by"]`` says which test decided:
``vehicle_record`` or ``duration``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from rules.base import RuleSpec, Standard, make_finding, only_site, sensor_label, sensors_of
from rules.citation import citation_text
from rules.lazy import lazy_import
from rules.lighting import (
    LINKED_TO_TEMPORARY_LIGHTING,
    TemporaryDays,
    light_context,
    minute_groups,
    run_totals,
    series,
    temporary_considered,
    vehicle_records,
    vehicles_during,
)
from rules.model import Finding, FindingKind, LightSummary, Measurement, SensorKind, SiteContext, SiteData
from rules.numbers import within
from rules.times import iso, local_hm, span_text

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_import("numpy")  # only the burst analysis needs it, not loading a profile


@dataclass(frozen=True, slots=True)
class FlashingLightParams:
    min_hz: float = field(default=0.1, metadata=within(more_than=0, maximum=100, unit=" Hz"))
    max_hz: float = field(default=5.0, metadata=within(more_than=0, maximum=100, unit=" Hz"))
    min_modulation_depth: float = field(default=0.3, metadata=within(minimum=0, maximum=1))
    # Share of the varying power in the dominant frequency
    min_periodicity: float = field(default=0.4, metadata=within(minimum=0, maximum=1))
    # Below this nothing visible flashes
    min_level_lux: float = field(default=0.2, metadata=within(minimum=0, maximum=100000, unit=" lux"))
    min_burst_rate_hz: float = field(default=10.0, metadata=within(more_than=0, maximum=100000, unit=" Hz"))
    min_duration_s: float = field(default=60.0, metadata=within(minimum=0, maximum=86400, unit=" s"))
    max_gap_s: float = field(default=120.0, metadata=within(minimum=0, maximum=86400, unit=" s"))
    # A truck passage or a vehicle-present event without an end covers flashing this long before and after.
    vehicle_margin_s: float = field(default=300.0, metadata=within(minimum=0, maximum=3600, unit=" s"))
    # Operator event kind (GenericEvent) placing a vehicle at a gate or sensors; "" reads none.
    vehicle_event_kind: str = ""
    # Declared temporary lighting exempts on the year's allowed days only; the profile links this
    # to the temporary_lighting standard's counting (rules.lighting.TemporaryDays), not set here.
    temporary_days: TemporaryDays = field(default=TemporaryDays(), metadata=LINKED_TO_TEMPORARY_LIGHTING)

    def __post_init__(self) -> None:
        if self.max_hz <= self.min_hz:
            raise ValueError(f"max_hz: must be more than min_hz ({self.min_hz:g} Hz), got {self.max_hz:g}")


@dataclass(frozen=True, slots=True)
class Flashing:
    frequency_hz: float
    depth: float
    periodicity: float
    flashing_s: float  # seconds of the summary spent flashing


def analyse_burst(reading: LightSummary, params: FlashingLightParams) -> Flashing | None:
    """Whether a summary's burst shows periodic flashing, and for how long."""
    rate = reading.burst_rate_hz
    if rate is None or rate < params.min_burst_rate_hz or len(reading.burst) < 8:
        return None
    samples = np.asarray(reading.burst, dtype=np.float64)
    burst_s = len(samples) / rate
    high, low = (float(v) for v in np.percentile(samples, [95, 5]))
    if high < params.min_level_lux or high + low <= 0:
        return None
    depth = (high - low) / (high + low)
    if depth < params.min_modulation_depth:
        return None
    varying = samples - samples.mean()
    power = np.abs(np.fft.rfft(varying * np.hanning(len(samples)))) ** 2
    freqs = np.fft.rfftfreq(len(samples), d=1.0 / rate)
    # Two full periods are needed to call something periodic.
    band = (freqs >= max(params.min_hz, 2.0 / burst_s)) & (freqs <= min(params.max_hz, rate / 2))
    total = float(power[1:].sum())
    if not band.any() or total <= 0:
        return None
    peak = int(np.argmax(np.where(band, power, 0.0)))
    periodicity = float(power[max(peak - 2, 1) : peak + 3].sum()) / total
    if periodicity < params.min_periodicity:
        return None
    frequency = float(freqs[peak])
    mid = (high + low) / 2
    crossings = np.flatnonzero(np.diff(np.sign(samples - mid)) != 0)
    if len(crossings) < 2:
        return None
    span_s = min(burst_s, (crossings[-1] - crossings[0]) / rate + 1.0 / frequency)
    return Flashing(frequency, depth, periodicity, span_s / burst_s * reading.duration_s)


def evaluate(
    site: SiteContext,
    standard: Standard,
    params: FlashingLightParams,
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
    for sensor_id, info in sensors_of(site, SensorKind.LIGHT).items():
        readings = series(data, sensor_id, earliest, end)
        analysed = [analyse_burst(r, params) if context.at_night(r) else None for r in readings]
        exempt = [context.temporary_for(r) is not None for r in readings]
        records, problems = vehicle_records(
            site, info, data, params.vehicle_margin_s, params.vehicle_event_kind
        )
        vehicles = vehicles_during(readings, records)
        # A vehicle's flashing does not break a run: a fixed light keeps counting while a truck passes.
        totals = run_totals(
            readings,
            [a.flashing_s if a and not e else None for a, e in zip(analysed, exempt, strict=True)],
            params.max_gap_s,
        )
        for window_start, window_end, indices in minute_groups(readings, start, end):
            long = [i for i in indices if analysed[i] is not None and totals[i][1] > params.min_duration_s]
            if not long:
                continue
            own = [i for i in long if not vehicles[i]]
            chosen = own or long
            kind = FindingKind.VIOLATION if own else FindingKind.EXEMPT_EXCEEDANCE
            last = chosen[-1]
            flashing = analysed[last]
            assert flashing is not None
            run_start, run_total = totals[last]
            run_end = readings[last].end
            since = (
                f"from before {local_hm(run_start, tz)} to {local_hm(run_end, tz)}"
                if run_start == readings[0].ts
                else f"over {span_text(run_start, run_end, tz)}"
            )
            seen = list(dict.fromkeys(v.label for i in long for v in vehicles[i]))
            if own:
                decided = (
                    f"no record puts a vehicle at this sensor's gate or area then, and it lasted longer "
                    f"than {params.min_duration_s:g} s"
                )
                tail = (
                    f"; flashing or revolving lights are not allowed except on vehicles "
                    f"({citation_text(standard.section)})"
                    f"{context.beyond_allowance([readings[i] for i in chosen])}"
                )
            else:
                decided = f"the record puts a vehicle there ({'; '.join(seen)})"
                tail = (
                    "; it is taken for a vehicle's light, which is allowed"
                    f" ({citation_text(standard.section)})"
                )
            summary = (
                f"A light at {sensor_label(info)} was flashing at about "
                f"{flashing.frequency_hz:.1f} times a second at {local_hm(window_start, tz)} local, "
                f"{since}{tail}"
            )
            details: dict[str, object] = {
                "run_start": iso(run_start),
                "periodicity": round(flashing.periodicity, 3),
                "decided_by": "duration" if own else "vehicle_record",
                "decision": decided,
                "considered": [temporary_considered(params.temporary_days)],
            }
            if problems:
                details["unusable_vehicle_records"] = problems
            refs = (
                f"light:{sensor_id}:{iso(readings[chosen[0]].ts)}/{iso(readings[last].end)}",
                *dict.fromkeys(v.ref for i in chosen for v in vehicles[i]),
            )
            findings.append(
                make_finding(
                    site,
                    standard,
                    kind,
                    window_start,
                    max(window_end, readings[last].end),
                    summary,
                    sensors=(sensor_id,),
                    measurements=(
                        Measurement("flash frequency", round(flashing.frequency_hz, 3), None, "Hz"),
                        Measurement(
                            "modulation depth", round(flashing.depth, 3), params.min_modulation_depth, ""
                        ),
                        Measurement("flashing duration", round(run_total, 1), params.min_duration_s, "s"),
                    ),
                    exemptions=() if own else tuple(seen),
                    refs=refs,
                    details=details,
                )
            )
    return findings


def margins(params: FlashingLightParams) -> tuple[timedelta, timedelta]:
    return timedelta(seconds=params.min_duration_s + params.max_gap_s), timedelta(0)


def event_kinds(params: FlashingLightParams) -> tuple[str, ...]:
    return (params.vehicle_event_kind,) if params.vehicle_event_kind else ()


RULE: RuleSpec[FlashingLightParams] = RuleSpec(
    name="flashing_light",
    params_type=FlashingLightParams,
    evaluate=evaluate,
    margins=margins,
    event_kinds=event_kinds,
    description="Periodic light modulation (0.1-5 Hz) at night that persists, from raw bursts.",
    reads=("light",),
)
