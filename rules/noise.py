"""Noise at the mine-site boundaries (Dovre 6.D; conveyor parcels 6.G).

6.D: keep noise "at or below 80 db at the Mine Site boundaries", except blasting,
haul trucks entering or leaving, and site preparation, construction, restoration or
repair work. 6.G makes the outer perimeter of each parcel a conveyor crosses a
boundary for 6.D, so conveyor-placement meters count.

The ordinance names no averaging period, so the metric is the profile's choice (the
Town should adopt it in writing; ``method_adopted`` records whether it has):

* ``LAeq`` over a window of ``window_s`` seconds that slides by ``window_step_s``
  (default 60 s by 1 s). A loud minute that straddles two clock minutes is caught,
  and ``window_step_s = interval_s`` gives back plain clock minutes.
* ``LASmax``: a not-to-exceed slow maximum, judged second by second.
* ``LAeq+LASmax``: both.

Per boundary meter, each window is judged from its per-second records:

1. Its metric with every second present. At or below the limit: nothing.
2. Above it: drop the exempt seconds (blast +- margin, a truck at a gate this meter
   stands near +- margin, declared work of an exempt kind) and judge what is left:
   the average over the non-exempt seconds present when there are at least
   ``min_judged_s`` of them, otherwise (a partial window) only when their energy alone,
   spread over the full window as if every other second were silent, exceeds the limit.
   Ten non-exempt seconds at 95 dB(A) are judged (87.2 dB(A) over 60 s); ten at 85 are not.
3. Nothing left above the limit: EXEMPT_EXCEEDANCE listing the reasons, never a violation;
   above it only over too few seconds: INFO "not judged".
4. Above it but not without the weather-affected seconds (wind above the threshold or
   rain): UNRELIABLE (a profile switch), because wind on the microphone and rain on the
   ground raise the level without the mine doing anything.
5. Otherwise VIOLATION.

A second the meter was overloaded in (its input reached full scale, IEC 61672-1 5.11;
``SoundLevels.overload``) reads low: its level is a lower bound. A judged window holding
one is still a violation ("at least N dB(A)"); any other window holding a non-exempt one
is never taken as compliant or exempt: INFO "not judged: the meter was overloaded".

Findings are reported per UTC-aligned interval (``interval_s``, the minute view that
plots, InfluxDB and early warnings use): a window belongs to the interval its end falls
in, (start, end]. One finding per interval and meter, the most serious kind among its
windows; it spans those windows (clipped to the data present) and its measurements and
details name the worst window, the metric, the window and the exempt seconds removed.

The per-window sums are differences of cumulative sums over a per-second grid (numpy):
the daemon judges every meter of every site each minute, 60 windows each.

Missing seconds are not invented: a window is judged on what is there and
``completeness`` says how much was present.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from operator import attrgetter
from typing import TYPE_CHECKING

from rules.base import (
    RuleSpec,
    Standard,
    fmt_db,
    fmt_limit,
    is_given,
    leq,
    make_finding,
    only_site,
    sensor_label,
)
from rules.citation import citation_text
from rules.lazy import lazy_import
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
from rules.numbers import within
from rules.quantities import stored_value
from rules.times import aligned_windows, floor_to, iso, local_hm, local_hms, overlaps

METRICS = ("LAeq", "LASmax", "LAeq+LASmax")
# Levels are compared with this much slack so that 80.0 dB(A) computed through sums of
# energies (80.00000000000001) is still "at or below 80"; 80.01 is above.
_EPS_DB = 1e-6
_TS, _LAEQ, _LASMAX = attrgetter("ts"), attrgetter("LAeq"), attrgetter("LASmax")
_OVERLOAD = attrgetter("overload")

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]
    IntArray = npt.NDArray[np.int64]
else:
    # Only evaluation needs numpy: loading a profile (every command's configuration) does not.
    np = lazy_import("numpy")


@dataclass(frozen=True, slots=True)
class NoiseParams:
    limit_db: float = field(default=80.0, metadata=within(minimum=0, maximum=200, unit=" dB"))
    # "LAeq": energy average over the window; "LASmax": loudest slow second (not to exceed);
    # "LAeq+LASmax": both.
    metric: str = "LAeq"
    # LAeq averaging window
    window_s: int = field(default=60, metadata=within(minimum=1, maximum=86400, unit=" s"))
    # Windows start this often; interval_s gives clock minutes
    window_step_s: int = field(default=1, metadata=within(minimum=1, maximum=86400, unit=" s"))
    # Reporting interval: one finding per interval and meter at most
    interval_s: int = field(default=60, metadata=within(minimum=1, maximum=86400, unit=" s"))
    method_adopted: bool = False  # the Town has adopted this metric in writing (6.D names none)
    placements: tuple[str, ...] = ("boundary", "conveyor")  # meters that stand on the boundary
    # Fewer non-exempt seconds than this: judged only when their energy alone exceeds the
    # limit over the whole window (a partial window).
    min_judged_s: float = field(default=15.0, metadata=within(minimum=0, maximum=86400, unit=" s"))
    blast_margin_before_s: float = field(default=5.0, metadata=within(minimum=0, maximum=3600, unit=" s"))
    blast_margin_after_s: float = field(default=30.0, metadata=within(minimum=0, maximum=3600, unit=" s"))
    truck_margin_before_s: float = field(default=30.0, metadata=within(minimum=0, maximum=3600, unit=" s"))
    truck_margin_after_s: float = field(default=30.0, metadata=within(minimum=0, maximum=3600, unit=" s"))
    exempt_work_kinds: tuple[str, ...] = ("site_preparation", "construction", "restoration", "repair")
    wind_limit_ms: float = field(default=5.0, metadata=within(minimum=0, maximum=60, unit=" m/s"))
    rain_affects: bool = True
    weather_makes_unreliable: bool = True
    # Early warning this far below the limit
    warning_margin_db: float = field(default=3.0, metadata=within(minimum=0, maximum=50, unit=" dB"))

    def __post_init__(self) -> None:
        if self.metric not in METRICS:
            raise ValueError(f"metric: expected one of {', '.join(METRICS)}, got {self.metric!r}")
        if self.window_step_s <= 0 or self.interval_s % self.window_step_s:
            raise ValueError(
                f"window_step_s: must be a positive divisor of interval_s ({self.interval_s}), "
                f"got {self.window_step_s}"
            )
        placements = {p.value for p in Placement}
        for placement in self.placements:
            if placement not in placements:
                raise ValueError(f"placements: unknown placement {placement!r}; known: {sorted(placements)}")
        kinds = {k.value for k in WorkKind}
        for kind in self.exempt_work_kinds:
            if kind not in kinds:
                raise ValueError(f"exempt_work_kinds: unknown work kind {kind!r}; known: {sorted(kinds)}")


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


def _span_text(seconds: int) -> str:
    return f"{seconds // 60}min" if seconds % 60 == 0 else f"{seconds}s"


def _seconds(count: float) -> str:
    return "1 second" if round(count) == 1 else f"{count:.0f} seconds"


def _metric_name(metric: str, params: NoiseParams) -> str:
    """'LAeq,1min' (the window), 'LASmax,1min' (the loudest second of the reporting interval)."""
    span = params.window_s if metric == "LAeq" else params.interval_s
    return f"{metric},{_span_text(span)}"


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
                f"at {site.gate_label(truck.gate)} at {local_hms(truck.ts, tz)}",
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


# --------------------------------------------------------------------------- windows (numpy)

# In order of seriousness (an interval takes its most serious window's). _OVERLOADED: a window
# no judgement could clear, since an overloaded second's level is only a lower bound.
_NONE, _EXEMPT, _INFO, _OVERLOADED, _UNRELIABLE, _VIOLATION = 0, 1, 2, 3, 4, 5
_KIND_OF = {
    _EXEMPT: FindingKind.EXEMPT_EXCEEDANCE,
    _INFO: FindingKind.INFO,
    _OVERLOADED: FindingKind.INFO,
    _UNRELIABLE: FindingKind.UNRELIABLE,
    _VIOLATION: FindingKind.VIOLATION,
}


@dataclass(frozen=True, slots=True)
class _Grid:
    """One meter's records summed per second over [origin, origin + n) (epoch seconds)."""

    origin: int
    present: FloatArray  # seconds of data
    energy: FloatArray  # sum of duration * 10^(LAeq/10)
    kept: FloatArray  # the same for non-exempt seconds ...
    kept_energy: FloatArray
    dry: FloatArray  # ... and for non-exempt seconds not affected by weather
    dry_energy: FloatArray
    lasmax: FloatArray  # loudest LASmax in the second, -inf without one
    kept_lasmax: FloatArray
    dry_lasmax: FloatArray
    overloaded: FloatArray  # non-exempt seconds the meter was overloaded in


@dataclass(frozen=True, slots=True)
class _Judged:
    """Every window of one metric: where it lies, what it measured, how it was judged."""

    metric: str  # "LAeq" | "LASmax"
    window_s: int
    starts: IntArray  # epoch seconds
    ends: IntArray
    code: IntArray  # _NONE .. _VIOLATION
    shown: FloatArray  # the value the judgement rests on
    full: FloatArray  # with every second present
    residual: FloatArray  # without the exempt seconds
    averaged: npt.NDArray[np.bool_]  # judged on the average (False: partial window, energy bound)
    present: FloatArray
    kept: FloatArray
    weather: FloatArray  # non-exempt seconds affected by weather
    residual_dry: FloatArray
    overloaded: FloatArray  # non-exempt seconds the meter was overloaded in


def _db(energy: FloatArray, seconds: FloatArray | float) -> FloatArray:
    """10 log10(energy / seconds); -inf where there is no energy or no time."""
    seconds_arr = np.broadcast_to(np.asarray(seconds, dtype=np.float64), energy.shape)
    ok = (energy > 0) & (seconds_arr > 1e-9)
    ratio = np.divide(energy, seconds_arr, out=np.zeros_like(energy), where=ok)
    out = np.full(energy.shape, -np.inf)
    np.log10(ratio, out=out, where=ok)
    return np.where(ok, 10.0 * out, -np.inf)


def _grid(
    records: Sequence[SoundLevels],
    origin: int,
    n: int,
    exemptions: Sequence[tuple[float, float]],
    weather: Sequence[tuple[float, float]],
    limit_db: float,
    metric: str,
) -> _Grid | None:
    """Per-second sums; None when no record could take any window above the limit.

    ``records``: the meter's, in time order. Only those in [origin, origin + n) are read: a
    bisection, so the neighbourhood's other seconds cost nothing (issue 31).
    """
    first = bisect.bisect_left(records, _utc(origin), key=_TS)
    records = records[first : bisect.bisect_left(records, _utc(origin + n), key=_TS)]
    count = len(records)
    if not count:
        return None
    # Most minutes are quiet: an average or a maximum is never above the loudest second, so when
    # no record could take a window above the limit nothing below needs computing (in C: max over
    # itemgetters, the records' times least of all).
    loudest = max(map(_LAEQ, records)) if metric != "LASmax" else -math.inf
    if metric != "LAeq":
        loudest = max(loudest, max(filter(is_given, map(_LASMAX, records)), default=-math.inf))
    if loudest <= limit_db + _EPS_DB and not any(map(_OVERLOAD, records)):
        return None
    ts = np.fromiter((r.ts.timestamp() for r in records), np.float64, count)
    laeq = np.fromiter(map(_LAEQ, records), np.float64, count)
    lasmax = np.fromiter((math.nan if r.LASmax is None else r.LASmax for r in records), np.float64, count)
    duration = np.fromiter((r.duration_s for r in records), np.float64, count)
    overload = np.fromiter(map(_OVERLOAD, records), bool, count)
    ends = ts + duration
    exempt = np.zeros(ts.shape, dtype=bool)
    for ex_start, ex_end in exemptions:
        exempt |= (ts < ex_end) & (ends > ex_start)
    wet = np.zeros(ts.shape, dtype=bool)
    for w_start, w_end in weather:
        wet |= (ts < w_end) & (ends > w_start)
    kept = ~exempt
    dry = kept & ~wet
    # Binned by the second a record starts in: sensors report 1 s periods; a longer period
    # counts whole in its first second (its exemption test still uses its whole span).
    index = np.floor(ts - origin).astype(np.int64)
    energy = duration * np.power(10.0, laeq / 10.0)

    def total(values: FloatArray, mask: npt.NDArray[np.bool_]) -> FloatArray:
        return np.bincount(index[mask], weights=values[mask], minlength=n).astype(np.float64)

    def loudest_of(mask: npt.NDArray[np.bool_]) -> FloatArray:
        out = np.full(n, -np.inf)
        has = mask & ~np.isnan(lasmax)
        np.maximum.at(out, index[has], lasmax[has])
        return out

    everything = np.ones(ts.shape, dtype=bool)
    return _Grid(
        origin,
        total(duration, everything),
        total(energy, everything),
        total(duration, kept),
        total(energy, kept),
        total(duration, dry),
        total(energy, dry),
        loudest_of(everything),
        loudest_of(kept),
        loudest_of(dry),
        total(duration, kept & overload),
    )


def _laeq_windows(grid: _Grid, ends: IntArray, params: NoiseParams) -> _Judged:
    """LAeq over [end - window_s, end) for every end, from cumulative sums of energy."""
    window = params.window_s
    hi = ends - grid.origin
    lo = hi - window

    def sums(values: FloatArray) -> FloatArray:
        cumulative = np.concatenate(([0.0], np.cumsum(values)))
        # Rounding in the differences of large sums can leave a hair below zero.
        difference: FloatArray = np.maximum(cumulative[hi] - cumulative[lo], 0.0)
        return difference

    present, energy = sums(grid.present), sums(grid.energy)
    kept, kept_energy = sums(grid.kept), sums(grid.kept_energy)
    dry, dry_energy = sums(grid.dry), sums(grid.dry_energy)
    overloaded = sums(grid.overloaded)
    full = _db(energy, present)
    residual = _db(kept_energy, kept)
    residual_dry = _db(dry_energy, dry)
    bound = _db(kept_energy, float(window))  # as if every other second were silent
    bound_dry = _db(dry_energy, float(window))
    limit = params.limit_db + _EPS_DB
    enough = params.min_judged_s - 1e-9
    over = full > limit
    averaged = (kept >= enough) & (residual > limit)
    judged = over & (averaged | (bound > limit))
    dry_exceeds = ((dry >= enough) & (residual_dry > limit)) | (bound_dry > limit)
    weather = kept - dry
    code = np.zeros(ends.shape, dtype=np.int64)
    code[over & ~(residual > limit)] = _EXEMPT
    code[over & (residual > limit) & ~judged] = _INFO
    code[~judged & (overloaded > 1e-9)] = _OVERLOADED  # a lower bound clears nothing
    code[judged] = _VIOLATION
    if params.weather_makes_unreliable:
        code[judged & (weather > 1e-9) & ~dry_exceeds] = _UNRELIABLE
    shown = np.where(judged, np.where(averaged, residual, bound), full)
    return _Judged(
        "LAeq", window, ends - window, ends, code, shown, full, residual, averaged, present, kept,
        weather, residual_dry, overloaded,
    )  # fmt: skip


def _lasmax_seconds(grid: _Grid, ends: IntArray, params: NoiseParams) -> _Judged:
    """Not to exceed: every second's slow maximum against the limit; no averaging, no minimum."""
    at = ends - grid.origin - 1
    full, kept_max, dry_max = grid.lasmax[at], grid.kept_lasmax[at], grid.dry_lasmax[at]
    limit = params.limit_db + _EPS_DB
    over = full > limit
    judged = kept_max > limit
    code = np.zeros(ends.shape, dtype=np.int64)
    code[over & ~judged] = _EXEMPT
    overloaded = grid.overloaded[at]
    code[~judged & (overloaded > 1e-9)] = _OVERLOADED  # a lower bound clears nothing
    code[judged] = _VIOLATION
    weather = grid.kept[at] - grid.dry[at]
    if params.weather_makes_unreliable:
        code[judged & (weather > 1e-9) & ~(dry_max > limit)] = _UNRELIABLE
    shown = np.where(judged, kept_max, full)
    return _Judged(
        "LASmax", 1, ends - 1, ends, code, shown, full, kept_max, np.ones(ends.shape, dtype=bool),
        grid.present[at], grid.kept[at], weather, dry_max, overloaded,
    )  # fmt: skip


def _records_in(
    sound: Sequence[SoundLevels], sensor: str, start: datetime, end: datetime
) -> list[SoundLevels]:
    return [r for r in sound if r.sensor == sensor and start <= r.ts < end]


def _dedupe(items: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


def _utc(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, tz=UTC)


def _clock(start: datetime, end: datetime, site: SiteContext) -> str:
    """'11:31-11:32' on whole minutes, '11:30:30-11:31:30' otherwise."""
    whole = start.second == 0 and end.second == 0 and not start.microsecond and not end.microsecond
    fmt = local_hm if whole else local_hms
    return f"{fmt(start, site.tz)}-{fmt(end, site.tz)}"


def _method_text(params: NoiseParams) -> str:
    parts = []
    if params.metric != "LASmax":
        if params.window_step_s >= params.window_s and params.window_s == params.interval_s:
            parts.append(f"LAeq over clock intervals of {params.window_s} s")
        else:
            parts.append(f"LAeq over {params.window_s} s windows starting every {params.window_step_s} s")
    if params.metric != "LAeq":
        parts.append("LASmax not to exceed, second by second")
    return " and ".join(parts)


@dataclass(frozen=True, slots=True)
class _Context:
    site: SiteContext
    standard: Standard
    params: NoiseParams
    info: SensorInfo
    exemptions: Sequence[_Exemption]
    weather: Sequence[tuple[float, float, str, str]]  # start, end, reason, ref of flagged readings


def _finding(
    ctx: _Context, grid: _Grid, judged: _Judged, chosen: npt.NDArray[np.bool_], code: int,
    interval: tuple[int, int], others: Sequence[Measurement],
) -> Finding:  # fmt: skip
    params, info, site = ctx.params, ctx.info, ctx.site
    picks = np.flatnonzero(chosen)
    # The window shown: for a judgement, the worst (highest value to the hundredth, then the
    # most seconds judged); for an exempt or unjudged exceedance, the most complete (then the
    # loudest), which shows what the exempt seconds hid. Ties: the first.
    if code in (_VIOLATION, _UNRELIABLE):
        first, second = np.round(judged.shown[picks], 2), judged.kept[picks]
    else:
        first, second = judged.present[picks], np.round(judged.full[picks], 2)
    best = picks[first == first.max()]
    second = second[first == first.max()]
    best = best[second == second.max()]
    i = int(best[0])
    w_start, w_end = _utc(int(judged.starts[i])), _utc(int(judged.ends[i]))
    # The finding spans the windows of this kind, clipped to the seconds with data.
    lo, hi = int(judged.starts[picks].min()), int(judged.ends[picks].max())
    with_data = np.flatnonzero(grid.present[lo - grid.origin : hi - grid.origin] > 0)
    span_start = _utc(lo + int(with_data[0])) if with_data.size else _utc(lo)
    span_end = _utc(lo + int(with_data[-1]) + 1) if with_data.size else _utc(hi)

    window_s = judged.window_s
    expected_s = float(window_s)
    present_s = min(expected_s, float(judged.present[i]))
    kept_s = float(judged.kept[i])
    exempt_s = max(0.0, present_s - kept_s)
    weather_s = float(judged.weather[i])
    missing_s = expected_s - present_s
    full_value = float(judged.full[i])
    residual = float(judged.residual[i])
    shown = float(judged.shown[i])
    averaged = bool(judged.averaged[i])
    overloaded_s = float(judged.overloaded[i])
    metric = _metric_name(judged.metric, params)
    unit = "dB(A)"
    limit = fmt_limit(params.limit_db)
    db = partial(fmt_db, limit=params.limit_db)  # a level past the limit never reads as it
    kept_apart = partial(stored_value, limit=params.limit_db)
    section = ctx.standard.section
    where = sensor_label(info)
    if judged.metric == "LAeq":
        verb, when = "averaged", f"over {_clock(w_start, w_end, site)} local"
    else:
        verb, when = "reached a slow maximum of", f"at {local_hms(w_start, site.tz)} local"

    hits = [e for e in ctx.exemptions if overlaps(span_start, span_end, e.start, e.end)]
    exemption_reasons = _dedupe([e.reason for e in hits])
    wet = [w for w in ctx.weather if w[0] < w_end.timestamp() and w[1] > w_start.timestamp()]
    refs = (
        f"sound:{info.id}:{iso(span_start)}/{iso(span_end)}",
        *_dedupe([e.ref for e in hits] + [w[3] for w in wet]),
    )
    gap_note = f"; {missing_s:.0f} of {expected_s:.0f} seconds had no data" if missing_s >= 1 else ""
    judged_by = (
        "not to exceed"
        if judged.metric == "LASmax"
        else "average of the non-exempt seconds present"
        if averaged
        else "energy of the non-exempt seconds over the full window"
    )
    details: dict[str, object] = {
        "metric": judged.metric,
        "method": _method_text(params),
        "method_adopted": params.method_adopted,
        "window_s": window_s,
        "window_step_s": params.window_step_s if judged.metric == "LAeq" else 1,
        "window_start": iso(w_start),
        "window_end": iso(w_end),
        "windows_over_limit": int(picks.size),
        "interval_start": iso(_utc(interval[0])),
        "interval_end": iso(_utc(interval[1])),
        "expected_s": expected_s,
        "present_s": present_s,
        "missing_s": missing_s,
        "exempt_s": exempt_s,
        "weather_affected_s": weather_s,
        "judged_s": kept_s,
        "judged": code in (_VIOLATION, _UNRELIABLE, _EXEMPT),
        "judged_by": judged_by,
    }
    if overloaded_s > 0:  # only then: every other finding's details are as they were
        details["overloaded_s"] = overloaded_s
        details["lower_bound"] = True
    bound = overloaded_s > 0  # a level read with the meter overloaded is a lower bound
    measurements = [Measurement(metric, kept_apart(full_value), params.limit_db, unit, bound)]
    if exempt_s > 0 and kept_s > 0:
        measurements.append(
            Measurement(
                f"{metric} without exempt seconds", kept_apart(residual), params.limit_db, unit, bound
            )
        )
    if code in (_VIOLATION, _UNRELIABLE) and not averaged:
        measurements.append(
            Measurement(
                f"{metric} of the non-exempt seconds alone over the full window",
                kept_apart(shown),
                params.limit_db,
                unit,
                bound,
            )
        )
    measurements.extend(others)

    def emit(kind: FindingKind, summary: str) -> Finding:
        return make_finding(
            site,
            ctx.standard,
            kind,
            span_start,
            span_end,
            summary,
            sensors=(info.id,),
            measurements=tuple(measurements),
            exemptions=exemption_reasons,
            refs=refs,
            completeness=present_s / expected_s,
            details=details,
        )

    if code == _EXEMPT:
        # Includes the case where every second was exempt: the exceedance is the exempt activity's.
        without = (
            f"without those seconds it was {db(residual)} {unit}"
            if kept_s > 0 and math.isfinite(residual)
            else "every second of it was exempt"
        )
        return emit(
            FindingKind.EXEMPT_EXCEEDANCE,
            f"Noise at {where} {verb} {db(full_value)} {unit} {when}, above the {limit} dB limit, "
            f"but only because of exempt activity ({'; '.join(exemption_reasons)}); {without}"
            f"{gap_note} ({citation_text(section)})",
        )
    if code == _OVERLOADED:
        # The level read is a lower bound: at or below the limit it shows nothing, above it (with
        # the exempt seconds) it cannot be told from what the mine alone made.
        level = f"at least {db(full_value)} {unit}" if math.isfinite(full_value) else "an unknown level"
        return emit(
            FindingKind.INFO,
            f"Noise at {where} not judged {when}: the meter was overloaded for {_seconds(overloaded_s)}"
            f" (its input reached full scale, IEC 61672-1 5.11), so it {verb} {level}, a lower bound"
            f" that cannot show the {limit} dB limit was kept{gap_note} ({citation_text(section)})",
        )
    if code == _INFO:
        # Too few seconds left, and not loud enough on their own, to say the mine was too loud.
        return emit(
            FindingKind.INFO,
            f"Noise at {where} {verb} {db(full_value)} {unit} {when}, above the {limit} dB limit, "
            f"but only {kept_s:.0f} seconds were not exempt and present (at least {params.min_judged_s:g} "
            f"are needed unless those alone exceed the limit over the whole {window_s} seconds), so the "
            f"window is not judged{gap_note} ({citation_text(section)})",
        )

    exempt_note = f" after leaving out {exempt_s:.0f} exempt seconds" if exempt_s > 0 else ""
    # An overloaded meter read low: the level is a lower bound, and still above the limit.
    at_least = "at least " if overloaded_s > 0 else ""
    if overloaded_s > 0:
        exempt_note += (
            f" (the meter was overloaded for {_seconds(overloaded_s)}, its input at full scale:"
            " the true level was higher)"
        )
    if averaged:
        measured = f"Noise at {where} {verb} {at_least}{db(shown)} {unit} {when}{exempt_note}"
    else:
        measured = (
            f"Noise at {where} {when}: its {kept_s:.0f} non-exempt seconds alone average "
            f"{at_least}{db(shown)} {unit} over the whole {window_s} seconds, counting every other second "
            f"as silent{exempt_note}"
        )
    if code == _UNRELIABLE:
        weather_reasons = _dedupe([w[2] for w in wet])
        dry_value = float(judged.residual_dry[i])
        details["residual_without_weather_db"] = round(dry_value, 2) if math.isfinite(dry_value) else None
        if math.isfinite(dry_value):
            measurements.append(
                Measurement(
                    f"{metric} without weather-affected seconds", kept_apart(dry_value), params.limit_db, unit
                )
            )
        dry_s = kept_s - weather_s
        without = (
            f"without them it was {db(dry_value)} {unit}"
            if math.isfinite(dry_value) and (judged.metric == "LASmax" or dry_s >= params.min_judged_s)
            else "too few seconds were unaffected to tell"
        )
        return emit(
            FindingKind.UNRELIABLE,
            f"{measured}, above the {limit} dB limit, but {weather_s:.0f} seconds were affected by weather "
            f"({', '.join(weather_reasons)}) and {without}, so the reading is unreliable{gap_note} "
            f"({citation_text(section)})",
        )
    return emit(
        FindingKind.VIOLATION, f"{measured}, above the {limit} dB limit{gap_note} ({citation_text(section)})"
    )


def _weather_spans(data: SiteData, params: NoiseParams) -> list[tuple[float, float, str, str]]:
    found = []
    for reading in data.weather:
        if reading.wind_speed_ms > params.wind_limit_ms:
            reason = f"wind {reading.wind_speed_ms:.1f} m/s"
        elif params.rain_affects and reading.rain:
            reason = "rain"
        else:
            continue
        found.append(
            (
                reading.ts.timestamp(),
                reading.end.timestamp(),
                reason,
                f"weather:{reading.sensor}:{iso(reading.ts)}",
            )
        )
    return found


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
    intervals = [
        (int(a.timestamp()), int(b.timestamp())) for a, b in aligned_windows(start, end, params.interval_s)
    ]
    if not intervals:
        return []
    lookback = params.window_s if params.metric != "LASmax" else 1
    origin = intervals[0][0] - lookback
    n = intervals[-1][1] - origin
    weather = _weather_spans(data, params)
    findings: list[Finding] = []
    for info in _monitored(site, params).values():
        records = data.sound_by_sensor.get(info.id, ())
        exemptions = _exemptions(site, info, params, data)
        grid = _grid(
            records,
            origin,
            n,
            [(e.start.timestamp(), e.end.timestamp()) for e in exemptions],
            [(w[0], w[1]) for w in weather],
            params.limit_db,
            params.metric,
        )
        if grid is None:
            continue
        results: list[_Judged] = []
        if params.metric != "LASmax":
            step = params.window_step_s
            ends = np.arange(intervals[0][0] + step, intervals[-1][1] + 1, step, dtype=np.int64)
            results.append(_laeq_windows(grid, ends, params))
        if params.metric != "LAeq":
            ends = np.arange(intervals[0][0] + 1, intervals[-1][1] + 1, dtype=np.int64)
            results.append(_lasmax_seconds(grid, ends, params))
        ctx = _Context(site, standard, params, info, exemptions, weather)
        for interval in intervals:
            owned = [(r.ends > interval[0]) & (r.ends <= interval[1]) for r in results]
            codes = [
                int(r.code[mask].max()) if mask.any() else _NONE
                for r, mask in zip(results, owned, strict=True)
            ]
            code = max(codes)
            if code == _NONE:
                continue
            which = codes.index(code)  # LAeq first when both metrics agree on the kind
            chosen = owned[which] & (results[which].code == code)
            others = [
                Measurement(
                    _metric_name(r.metric, params),
                    stored_value(float(r.full[mask].max()), params.limit_db),
                    params.limit_db,
                    "dB(A)",
                )
                for j, (r, mask) in enumerate(zip(results, owned, strict=True))
                if j != which and codes[j] != _NONE
            ]
            findings.append(_finding(ctx, grid, results[which], chosen, code, interval, others))
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
    warn_metric = "LASmax" if params.metric == "LASmax" else "LAeq"
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
        so_far = _metric_value(kept, warn_metric)
        exempt_s = sum(s.record.duration_s for s in seconds if s.exempt)
        # Seconds read with the meter overloaded (clipped: they read low): the levels below are
        # lower bounds, and the interval can no longer be shown to keep the limit.
        overloaded_s = sum(r.duration_s for r in kept if r.overload)
        at_least = "at least " if overloaded_s else ""
        if warn_metric == "LAeq":
            energy = sum(r.duration_s * 10.0 ** (r.LAeq / 10.0) for r in kept)
            best_case = 10.0 * math.log10(energy / max(params.interval_s - exempt_s, 1.0))
        else:
            best_case = so_far
        metric = f"{warn_metric},{_span_text(params.interval_s)}"
        span = f"{local_hm(window_start, tz)}-{local_hm(window_end, tz)} local"
        where = sensor_label(info)
        limit = fmt_limit(params.limit_db)
        db = partial(fmt_db, limit=params.limit_db)
        kept_apart = partial(stored_value, limit=params.limit_db)
        if best_case > params.limit_db:
            which = "cannot_end_below_limit"
            summary = (
                f"Noise at {where} has already made the {span} {warn_metric} certain to end above the "
                f"{limit} dB limit ({at_least}{db(best_case)} dB(A) even if it were quiet from now on); "
                f"reduce noise now ({citation_text(standard.section)})"
            )
        elif so_far >= params.limit_db - params.warning_margin_db:
            which = "approaching_limit"
            running = (
                f"reads at least {db(so_far)} dB(A) (the meter was overloaded for {_seconds(overloaded_s)}:"
                " a lower bound)"
                if overloaded_s
                else f"is running at {db(so_far)} dB(A)"
            )
            summary = (
                f"Noise at {where} {running} for {span}, within "
                f"{params.warning_margin_db:g} dB of the {limit} dB limit ({citation_text(standard.section)})"
            )
        elif overloaded_s:
            which = "meter_overloaded"
            summary = (
                f"Noise at {where} overloaded the meter for {_seconds(overloaded_s)} of {span} (its input"
                f" at full scale, IEC 61672-1 5.11): it reads at least {db(so_far)} dB(A), a lower bound,"
                f" so the interval cannot be shown to keep the {limit} dB limit; check the meter's range"
                f" ({citation_text(standard.section)})"
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
                    Measurement(
                        f"{metric} so far", kept_apart(so_far), params.limit_db, "dB(A)", bool(overloaded_s)
                    ),
                    Measurement(
                        f"{metric} lowest possible at close",
                        kept_apart(best_case),
                        params.limit_db,
                        "dB(A)",
                        bool(overloaded_s),
                    ),
                ),
                refs=(f"sound:{info.id}:{iso(records[0].ts)}/{iso(records[-1].end)}",),
                completeness=sum(r.duration_s for r in records) / params.interval_s,
                details={"warning": which, "as_of": iso(now)},
            )
        )
    return warnings


def margins(params: NoiseParams) -> tuple[timedelta, timedelta]:
    # Readings: a window ending early in the first interval reaches window_s back; the aligned
    # intervals may start before ``start`` when the daemon's interval is not aligned.
    back = max(params.interval_s, params.window_s)
    return timedelta(seconds=back), timedelta(seconds=params.interval_s)


RULE: RuleSpec[NoiseParams] = RuleSpec(
    name="noise",
    params_type=NoiseParams,
    evaluate=evaluate,
    margins=margins,
    early_warnings=early_warnings,
    description="Boundary noise against a limit, with blasting, truck and work exemptions and weather.",
    reads=("sound", "weather"),
)
