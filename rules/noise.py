"""Noise at the mine-site boundaries (Dovre 6.D; conveyor parcels 6.G).

6.D: keep noise "at or below 80 db at the Mine Site boundaries", except blasting,
haul trucks entering or leaving, and site preparation, construction, restoration or
repair work. 6.G makes the outer perimeter of each parcel a conveyor crosses a
boundary for 6.D, so conveyor-placement meters count.

Per boundary meter and per UTC-aligned interval (default one minute):

1. The interval's metric from its per-second records: LAeq (energy average, the
   default) or the maximum per-second LASmax. At or below the limit: no finding.
2. Above it: drop the exempt seconds (blast +- margin, a truck at a gate this meter
   stands near +- margin, declared work of an exempt kind) and hold the residual
   against the limit. Fewer non-exempt seconds than ``min_judged_s``: INFO "not judged".
3. Residual at or below the limit: EXEMPT_EXCEEDANCE listing the reasons; never a violation.
4. Residual above it but not without the weather-affected seconds (wind above the
   threshold or rain): UNRELIABLE (a profile switch), because wind on the microphone
   and rain on the ground raise the level without the mine doing anything.
5. Otherwise VIOLATION.

Missing seconds are not invented: the interval is judged on what is there and
``completeness`` says how much was present.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from rules.base import (
    RuleSpec,
    Standard,
    aligned_windows,
    floor_to,
    fmt_db,
    fmt_limit,
    iso,
    leq,
    local_hm,
    local_hms,
    make_finding,
    only_site,
    overlaps,
    sensor_label,
)
from rules.model import (
    Finding,
    FindingKind,
    Measurement,
    Placement,
    SensorInfo,
    SensorKind,
    SiteContext,
    SiteData,
    SoundLevels,
    WorkKind,
)

METRICS = ("LAeq", "LASmax")


@dataclass(frozen=True, slots=True)
class NoiseParams:
    limit_db: float = 80.0
    metric: str = "LAeq"  # "LAeq": energy average of the interval; "LASmax": loudest slow second
    interval_s: int = 60
    placements: tuple[str, ...] = ("boundary", "conveyor")  # meters that stand on the boundary
    min_judged_s: float = 15.0  # fewer non-exempt seconds than this: not judged
    blast_margin_before_s: float = 5.0
    blast_margin_after_s: float = 30.0
    truck_margin_before_s: float = 30.0
    truck_margin_after_s: float = 30.0
    exempt_work_kinds: tuple[str, ...] = ("site_preparation", "construction", "restoration", "repair")
    wind_limit_ms: float = 5.0
    rain_affects: bool = True
    weather_makes_unreliable: bool = True
    warning_margin_db: float = 3.0  # early warning this far below the limit

    def __post_init__(self) -> None:
        if self.metric not in METRICS:
            raise ValueError(f"metric: expected one of {', '.join(METRICS)}, got {self.metric!r}")
        if self.interval_s <= 0:
            raise ValueError(f"interval_s: must be positive, got {self.interval_s}")
        placements = {p.value for p in Placement}
        for placement in self.placements:
            if placement not in placements:
                raise ValueError(f"placements: unknown placement {placement!r}; known: {sorted(placements)}")
        kinds = {k.value for k in WorkKind}
        for kind in self.exempt_work_kinds:
            if kind not in kinds:
                raise ValueError(f"exempt_work_kinds: unknown work kind {kind!r}; known: {sorted(kinds)}")
        for name in (
            "min_judged_s",
            "blast_margin_before_s",
            "blast_margin_after_s",
            "truck_margin_before_s",
            "truck_margin_after_s",
            "wind_limit_ms",
            "warning_margin_db",
        ):
            if getattr(self, name) < 0:
                raise ValueError(f"{name}: must not be negative")


@dataclass(frozen=True, slots=True)
class _Second:
    """One record with what the rule concluded about it."""

    record: SoundLevels
    exempt: tuple[str, ...] = ()
    weather: tuple[str, ...] = ()
    refs: tuple[str, ...] = field(default=())


@dataclass(frozen=True, slots=True)
class _Exemption:
    start: datetime
    end: datetime
    reason: str
    ref: str


def _metric_value(records: Sequence[SoundLevels], metric: str) -> float:
    if metric == "LASmax":
        values = [r.LASmax for r in records if r.LASmax is not None]
        return max(values) if values else -math.inf
    return leq((r.LAeq for r in records), (r.duration_s for r in records))


def _metric_name(params: NoiseParams) -> str:
    minutes = params.interval_s / 60
    span = f"{minutes:g}min" if params.interval_s % 60 == 0 else f"{params.interval_s}s"
    return f"{params.metric},{span}"


def _monitored(site: SiteContext, params: NoiseParams) -> dict[str, SensorInfo]:
    return {
        sensor_id: info
        for sensor_id, info in sorted(site.sensors.items())
        if info.kind == SensorKind.SOUND and info.placement.value in params.placements
    }


def _exemptions(site: SiteContext, info: SensorInfo, params: NoiseParams, data: SiteData) -> list[_Exemption]:
    tz = site.tz
    found: list[_Exemption] = []
    for blast in data.blasts:
        found.append(
            _Exemption(
                blast.ts - timedelta(seconds=params.blast_margin_before_s),
                blast.ts + timedelta(seconds=params.blast_margin_after_s),
                f"blasting: blast {blast.id} at {local_hms(blast.ts, tz)}",
                f"blast:{blast.id}",
            )
        )
    for truck in data.trucks:
        # A truck exempts only the meters that stand near its gate: elsewhere it is not what they hear.
        if truck.gate not in info.gates:
            continue
        which = f" {truck.truck_id}" if truck.truck_id else ""
        found.append(
            _Exemption(
                truck.ts - timedelta(seconds=params.truck_margin_before_s),
                truck.ts + timedelta(seconds=params.truck_margin_after_s),
                f"haul truck{which} {'entering' if truck.direction == 'in' else 'leaving'} "
                f"at gate {truck.gate} at {local_hms(truck.ts, tz)}",
                f"truck:{truck.id}",
            )
        )
    for work in data.work:
        if work.kind.value not in params.exempt_work_kinds:
            continue
        if work.sensors and info.id not in work.sensors:
            continue
        found.append(
            _Exemption(
                work.start,
                work.end,
                f"declared {work.kind.value.replace('_', ' ')} work {work.id} "
                f"({local_hm(work.start, tz)}-{local_hm(work.end, tz)})",
                f"work:{work.id}",
            )
        )
    return found


def _weather_flags(
    record: SoundLevels, data: SiteData, params: NoiseParams
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    reasons: list[str] = []
    refs: list[str] = []
    for reading in data.weather:
        if not overlaps(record.ts, record.end, reading.ts, reading.end):
            continue
        if reading.wind_speed_ms > params.wind_limit_ms:
            reasons.append(f"wind {reading.wind_speed_ms:.1f} m/s")
            refs.append(f"weather:{reading.sensor}:{iso(reading.ts)}")
        elif params.rain_affects and reading.rain:
            reasons.append("rain")
            refs.append(f"weather:{reading.sensor}:{iso(reading.ts)}")
    return tuple(reasons), tuple(refs)


def _classify(
    records: Sequence[SoundLevels],
    exemptions: Sequence[_Exemption],
    data: SiteData,
    params: NoiseParams,
) -> list[_Second]:
    seconds: list[_Second] = []
    for record in records:
        hits = [e for e in exemptions if overlaps(record.ts, record.end, e.start, e.end)]
        weather, weather_refs = _weather_flags(record, data, params)
        seconds.append(
            _Second(
                record,
                tuple(e.reason for e in hits),
                weather,
                tuple(e.ref for e in hits) + weather_refs,
            )
        )
    return seconds


def _records_in(
    sound: Sequence[SoundLevels], sensor: str, start: datetime, end: datetime
) -> list[SoundLevels]:
    return [r for r in sound if r.sensor == sensor and start <= r.ts < end]


def _dedupe(items: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


def _judge_window(
    site: SiteContext,
    standard: Standard,
    params: NoiseParams,
    info: SensorInfo,
    data: SiteData,
    exemptions: Sequence[_Exemption],
    window_start: datetime,
    window_end: datetime,
    records: list[SoundLevels],
) -> Finding | None:
    if not records:
        return None
    full_value = _metric_value(records, params.metric)
    if full_value <= params.limit_db:
        return None  # compliant; no finding, to keep the store small

    tz = site.tz
    seconds = _classify(records, exemptions, data, params)
    kept = [s for s in seconds if not s.exempt]
    kept_dry = [s for s in kept if not s.weather]
    kept_s = sum(s.record.duration_s for s in kept)
    kept_dry_s = sum(s.record.duration_s for s in kept_dry)
    residual = _metric_value([s.record for s in kept], params.metric) if kept else -math.inf
    residual_dry = _metric_value([s.record for s in kept_dry], params.metric) if kept_dry else -math.inf

    expected_s = (window_end - window_start).total_seconds()
    present_s = min(expected_s, sum(r.duration_s for r in records))
    exempt_s = present_s - kept_s
    weather_s = kept_s - kept_dry_s
    metric = _metric_name(params)
    verb = "averaged" if params.metric == "LAeq" else "reached a slow maximum of"
    unit = "dB(A)"
    span = f"{local_hm(window_start, tz)}-{local_hm(window_end, tz)} local"
    where = sensor_label(info)
    section = standard.section
    limit = fmt_limit(params.limit_db)
    exemption_reasons = _dedupe([reason for s in seconds for reason in s.exempt])
    refs = (
        f"sound:{info.id}:{iso(records[0].ts)}/{iso(records[-1].end)}",
        *_dedupe([ref for s in seconds for ref in s.refs]),
    )
    missing_s = expected_s - present_s
    gap_note = f"; {missing_s:.0f} of {expected_s:.0f} seconds had no data" if missing_s >= 1 else ""
    details = {
        "metric": params.metric,
        "expected_s": expected_s,
        "present_s": present_s,
        "missing_s": missing_s,
        "exempt_s": exempt_s,
        "weather_affected_s": weather_s,
        "judged_s": kept_s,
        "judged": True,
    }
    measurements = [Measurement(metric, round(full_value, 2), params.limit_db, unit)]
    if exempt_s > 0 and kept:
        measurements.append(
            Measurement(f"{metric} without exempt seconds", round(residual, 2), params.limit_db, unit)
        )

    def emit(kind: FindingKind, summary: str) -> Finding:
        return make_finding(
            site,
            standard,
            kind,
            window_start,
            window_end,
            summary,
            sensors=(info.id,),
            measurements=tuple(measurements),
            exemptions=exemption_reasons,
            refs=refs,
            completeness=present_s / expected_s,
            details=details,
        )

    if residual <= params.limit_db:
        # Includes the case where every second was exempt: the exceedance is the exempt activity's.
        without = (
            f"without those seconds it was {fmt_db(residual)} {unit}"
            if kept
            else "every second of it was exempt"
        )
        summary = (
            f"Noise at {where} {verb} {fmt_db(full_value)} {unit} over {span}, above the {limit} dB limit, "
            f"but only because of exempt activity ({'; '.join(exemption_reasons)}); {without}"
            f"{gap_note} (section {section})"
        )
        return emit(FindingKind.EXEMPT_EXCEEDANCE, summary)

    if kept_s < params.min_judged_s:
        # Too few seconds left to say the mine, not the exempt activity, was too loud.
        details["judged"] = False
        summary = (
            f"Noise at {where} {verb} {fmt_db(full_value)} {unit} over {span}, above the {limit} dB limit, "
            f"but only {kept_s:.0f} seconds were not exempt and present (at least {params.min_judged_s:g} "
            f"are needed), so the minute is not judged{gap_note} (section {section})"
        )
        return emit(FindingKind.INFO, summary)

    shown = residual
    exempt_note = f" after leaving out {exempt_s:.0f} exempt seconds" if exempt_s > 0 else ""
    weather_dependent = weather_s > 0 and (
        kept_dry_s < params.min_judged_s or residual_dry <= params.limit_db
    )
    if params.weather_makes_unreliable and weather_dependent:
        weather_reasons = _dedupe([w for s in kept for w in s.weather])
        details["residual_without_weather_db"] = None if not kept_dry else round(residual_dry, 2)
        if kept_dry:
            measurements.append(
                Measurement(
                    f"{metric} without weather-affected seconds",
                    round(residual_dry, 2),
                    params.limit_db,
                    unit,
                )
            )
        without = (
            f"without them it was {fmt_db(residual_dry)} {unit}"
            if kept_dry_s >= params.min_judged_s
            else "too few seconds were unaffected to tell"
        )
        summary = (
            f"Noise at {where} {verb} {fmt_db(shown)} {unit} over {span}{exempt_note}, above the {limit} dB "
            f"limit, but {weather_s:.0f} seconds were affected by weather ({', '.join(weather_reasons)}) and "
            f"{without}, so the reading is unreliable{gap_note} (section {section})"
        )
        return emit(FindingKind.UNRELIABLE, summary)

    summary = (
        f"Noise at {where} {verb} {fmt_db(shown)} {unit} over {span}{exempt_note}, "
        f"above the {limit} dB limit{gap_note} (section {section})"
    )
    return emit(FindingKind.VIOLATION, summary)


def evaluate(
    site: SiteContext,
    standard: Standard,
    params: NoiseParams,
    data: SiteData,
    start: datetime,
    end: datetime,
    now: datetime,
) -> list[Finding]:
    data = only_site(data, site.id)
    findings: list[Finding] = []
    sound = data.sound_by_sensor
    for info in _monitored(site, params).values():
        exemptions = _exemptions(site, info, params, data)
        for window_start, window_end in aligned_windows(start, end, params.interval_s):
            records = _records_in(sound.get(info.id, ()), info.id, window_start, window_end)
            finding = _judge_window(
                site, standard, params, info, data, exemptions, window_start, window_end, records
            )
            if finding is not None:
                findings.append(finding)
    return findings


def early_warnings(
    site: SiteContext, standard: Standard, params: NoiseParams, data: SiteData, now: datetime
) -> list[Finding]:
    """Warn before the interval closes: near the limit, or already unable to end below it.

    For LAeq the projection is a bound, not a guess: even if every remaining second
    were silent, the energy already in the interval divided by all the seconds that
    could still count (the interval less those already exempt) is above the limit.
    """
    data = only_site(data, site.id)
    tz = site.tz
    window_start = floor_to(now, params.interval_s)
    window_end = window_start + timedelta(seconds=params.interval_s)
    warnings: list[Finding] = []
    for info in _monitored(site, params).values():
        series = data.sound_by_sensor.get(info.id, ())
        records = [r for r in _records_in(series, info.id, window_start, window_end) if r.ts < now]
        if not records:
            continue
        seconds = _classify(records, _exemptions(site, info, params, data), data, params)
        kept = [s.record for s in seconds if not s.exempt]
        if not kept:
            continue
        so_far = _metric_value(kept, params.metric)
        exempt_s = sum(s.record.duration_s for s in seconds if s.exempt)
        if params.metric == "LAeq":
            energy = sum(r.duration_s * 10.0 ** (r.LAeq / 10.0) for r in kept)
            best_case = 10.0 * math.log10(energy / max(params.interval_s - exempt_s, 1.0))
        else:
            best_case = so_far
        metric = _metric_name(params)
        span = f"{local_hm(window_start, tz)}-{local_hm(window_end, tz)} local"
        where = sensor_label(info)
        limit = fmt_limit(params.limit_db)
        if best_case > params.limit_db:
            which = "cannot_end_below_limit"
            summary = (
                f"Noise at {where} has already made the {span} {params.metric} certain to end above the "
                f"{limit} dB limit ({fmt_db(best_case)} dB(A) even if it were quiet from now on); "
                f"reduce noise now (section {standard.section})"
            )
        elif so_far >= params.limit_db - params.warning_margin_db:
            which = "approaching_limit"
            summary = (
                f"Noise at {where} is running at {fmt_db(so_far)} dB(A) for {span}, within "
                f"{params.warning_margin_db:g} dB of the {limit} dB limit (section {standard.section})"
            )
        else:
            continue
        warnings.append(
            make_finding(
                site,
                standard,
                FindingKind.WARNING,
                window_start,
                window_end,
                summary,
                sensors=(info.id,),
                measurements=(
                    Measurement(f"{metric} so far", round(so_far, 2), params.limit_db, "dB(A)"),
                    Measurement(
                        f"{metric} lowest possible at close", round(best_case, 2), params.limit_db, "dB(A)"
                    ),
                ),
                refs=(f"sound:{info.id}:{iso(records[0].ts)}/{iso(records[-1].end)}",),
                completeness=sum(r.duration_s for r in records) / params.interval_s,
                details={"warning": which, "as_of": iso(now)},
            )
        )
    return warnings


def margins(params: NoiseParams) -> tuple[timedelta, timedelta]:
    # Exemptions reach into the interval from events outside it; readings are only needed inside
    # the aligned windows, which may start before ``start`` when the daemon's interval is not aligned.
    return timedelta(seconds=params.interval_s), timedelta(seconds=params.interval_s)


RULE: RuleSpec[NoiseParams] = RuleSpec(
    name="noise",
    params_type=NoiseParams,
    evaluate=evaluate,
    margins=margins,
    early_warnings=early_warnings,
    description="Boundary noise against a limit, with blasting, truck and work exemptions and weather.",
    reads=("sound", "weather"),
)
