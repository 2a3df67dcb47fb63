"""Ground vibration from blasting at a monitoring point (Dovre 6.F: blasting "strictly in
accordance with Wis. Adm. Code Ch. SPS 307", whose "blasting resultants", 307.40-307.44, limit
ground vibration outside the controlled blasting site area).

Each seismograph event in the interval is judged axis by axis: the axis's peak particle velocity
(PPV) against the limit curve at that axis's zero-crossing frequency (rules/seismic_limits.py;
the curve is data in the profile and the finding names it). Any axis above its limit: VIOLATION
naming the axes. None above: COMPLIANT, kept as the blast's evidence, unless a channel clipped
(its true peak is higher than recorded): UNRELIABLE, saying so. A summary that is the
seismograph's own (its waveforms not all in) is judged too and says so; the daemon's summary
from the waveforms replaces it when they are.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import NamedTuple

from rules.base import RuleSpec, Standard, make_finding, only_site
from rules.citation import citation_text
from rules.model import (
    Blast,
    BlastNotice,
    Finding,
    FindingKind,
    Measurement,
    SeismicEvent,
    SiteContext,
    SiteData,
    SiteLawPoint,
)
from rules.numbers import within
from rules.scaled_distance import Forecast, forecast, pending_notices
from rules.seismic_limits import UNITS, check_curve, limit_at
from rules.times import iso, local_hms, local_stamp

Curve = tuple[tuple[float, ...], ...]

# USBM RI 8507 (Siskind et al. 1980) Appendix B, "safe levels of blasting vibration for
# houses": 0.030 in displacement at low frequency; 0.75 in/s (drywall) or 0.50 in/s (plaster on
# lath); then 0.008 in displacement up to 2.0 in/s, flat from about 40 Hz. The corners are where
# the lines meet: 2 pi f x 0.030 in = 0.75 in/s at 3.98 Hz (0.50 at 2.65 Hz), 2 pi f x 0.008 in
# = 0.75 at 14.92 Hz (0.50 at 9.95 Hz) and 2.0 at 39.79 Hz.
USBM_DRYWALL: Curve = ((1.0, 0.18850), (3.979, 0.75), (14.92, 0.75), (39.79, 2.0), (100.0, 2.0))
USBM_PLASTER: Curve = ((1.0, 0.18850), (2.653, 0.50), (9.947, 0.50), (39.79, 2.0), (100.0, 2.0))
DEFAULT_CURVES: Mapping[str, Curve] = MappingProxyType(
    {"usbm-ri8507-drywall": USBM_DRYWALL, "usbm-ri8507-plaster": USBM_PLASTER}
)


@dataclass(frozen=True, slots=True)
class GroundVibrationParams:
    units: str = "in/s"  # of the curves and of what findings show: "in/s" or "mm/s"
    curve: str = "usbm-ri8507-plaster"  # the curve judged; the others are named alternatives
    # Each corner point [Hz, PPV in units]: both more than 0 (seismic_limits.check_curve says the rest)
    curves: Mapping[str, Curve] = field(default_factory=lambda: DEFAULT_CURVES, metadata=within(more_than=0))
    axes: tuple[str, ...] = ("T", "V", "L")
    # A blast record this close before the event's first sample ...
    blast_before_s: float = field(default=10.0, metadata=within(minimum=0, maximum=3600, unit=" s"))
    # ... or after it is the blast the event recorded
    blast_after_s: float = field(default=60.0, metadata=within(minimum=0, maximum=3600, unit=" s"))
    # Before the blast (scaled distance, issue 27): a pending notice with its charge per delay
    # and distance is an operator early warning when the site law's upper 95 % prediction bound
    # reaches forecast_fraction of the judged curve at forecast_hz (the site's typical frequency).
    forecast_hz: float = field(default=15.0, metadata=within(minimum=0.5, maximum=200, unit=" Hz"))
    forecast_fraction: float = field(default=0.75, metadata=within(more_than=0, maximum=1))

    def __post_init__(self) -> None:
        if self.units not in UNITS:
            raise ValueError(f"units: must be one of {', '.join(UNITS)}, got {self.units!r}")
        if self.curve not in self.curves:
            raise ValueError(f"curve: {self.curve!r} is not one of curves ({', '.join(sorted(self.curves))})")
        for name, points in self.curves.items():
            check_curve(name, points)
        for axis in self.axes:
            if axis not in ("T", "V", "L"):
                raise ValueError(f"axes: {axis!r} is not T, V or L")

    def limit(self, hz: float | None) -> float:
        """The judged curve's limit in ``units`` at ``hz``."""
        return limit_at(self.curves[self.curve], hz if hz is not None else 0.0)

    def shown(self, mm_s: float) -> float:
        return mm_s / UNITS[self.units]

    def forecast(self, notice: BlastNotice, points: Sequence[SiteLawPoint]) -> Forecast | None:
        """The notice's scaled distance and predicted PPV against this curve (None: no charge/distance)."""
        limit_mm_s = self.limit(self.forecast_hz) * UNITS[self.units]
        return forecast(notice, points, limit_mm_s, self.forecast_fraction, self.forecast_hz)


class AxisJudgement(NamedTuple):
    axis: str
    ppv: float  # in the params' units
    hz: float | None
    frequency_from: str  # "zero crossing" or "spectrum"
    limit: float
    over: bool
    clipped: bool


def blast_of(event: SeismicEvent, blasts: tuple[Blast, ...], before_s: float, after_s: float) -> Blast | None:
    """The blast an event recorded: the one it names, else the nearest blast record in time."""
    if event.blast_id is not None:
        named = [b for b in blasts if b.id == event.blast_id]
        if named:
            return named[0]
    near = [
        b
        for b in blasts
        if event.ts - timedelta(seconds=after_s) <= b.ts <= event.ts + timedelta(seconds=before_s)
    ]
    return min(near, key=lambda b: abs((b.ts - event.ts).total_seconds()), default=None)


def evaluate(
    site: SiteContext,
    standard: Standard,
    params: GroundVibrationParams,
    data: SiteData,
    start: datetime,
    end: datetime,
    now: datetime,
) -> list[Finding]:
    data = only_site(data, site.id)
    return [
        _judge(site, standard, params, event, data.blasts)
        for event in data.seismic
        if start <= event.ts < end
    ]


def _judge(
    site: SiteContext,
    standard: Standard,
    params: GroundVibrationParams,
    event: SeismicEvent,
    blasts: tuple[Blast, ...],
) -> Finding:
    unit = params.units
    judged = [a for a in event.axes if a.axis in params.axes]
    rows: list[AxisJudgement] = []
    for axis in judged:
        hz = axis.judged_hz
        limit = params.limit(hz)
        ppv = params.shown(axis.ppv_mm_s)
        rows.append(
            AxisJudgement(
                axis.axis,
                round(ppv, 4),
                None if hz is None else round(hz, 2),
                "zero crossing" if axis.zc_hz is not None else "spectrum",
                round(limit, 4),
                ppv > limit,
                axis.clipped,
            )
        )
    over = [r.axis for r in rows if r.over]
    clipped = [a.axis for a in judged if a.clipped]
    if over:
        kind = FindingKind.VIOLATION
    elif clipped:
        kind = FindingKind.UNRELIABLE
    else:
        kind = FindingKind.COMPLIANT
    blast = blast_of(event, blasts, params.blast_before_s, params.blast_after_s)
    worst = max(rows, key=lambda r: r.ppv / r.limit)
    what = f"blast {blast.id}" if blast is not None else "an event with no blast record"
    where = f" at {event.location}" if event.location else ""
    axes_text = ", ".join(
        f"{r.axis} {r.ppv:.3g} {unit} at {r.hz if r.hz is not None else '?'} Hz (limit {r.limit:.3g})"
        for r in rows
    )
    if over:
        verdict = f"above the {params.curve} limit curve on axis {', '.join(over)}"
    else:
        verdict = f"within the {params.curve} limit curve"
    summary = (
        f"Ground vibration from {what} recorded by seismograph {event.sensor}{where} at "
        f"{local_hms(event.ts, site.tz)} local: {axes_text}; {verdict} ({citation_text(standard.section)})"
    )
    if clipped:
        summary += f"; channel {', '.join(clipped)} clipped, so its true peak was higher than recorded"
    if event.source == "edge":
        summary += "; from the seismograph's own summary (its waveforms have not all arrived)"
    others = ", ".join(sorted(set(params.curves) - {params.curve})) or "none"
    considered = [
        f"Judged on the {params.curve} curve, each axis's PPV at its own zero-crossing frequency; "
        f"the other curves in the profile ({others}) are alternatives the Town may adopt instead.",
    ]
    return make_finding(
        site,
        standard,
        kind,
        event.ts,
        event.end,
        summary,
        sensors=(event.sensor,),
        measurements=(
            *(Measurement(f"PPV {r.axis} at {r.hz} Hz", r.ppv, r.limit, unit) for r in rows),
            Measurement("peak vector sum", round(params.shown(event.pvs_mm_s), 4), None, unit),
        ),
        refs=(f"seismic:{event.sensor}:{event.id}",) + ((f"blast:{blast.id}",) if blast else ()),
        details={
            "curve": params.curve,
            "curve_points": [list(p) for p in params.curves[params.curve]],
            "units": unit,
            "axes": [r._asdict() for r in rows],
            "worst_axis": worst.axis,
            "event_id": event.id,
            "blast_id": blast.id if blast else None,
            "source": event.source,
            "clipped": clipped,
            "considered": considered,
        },
    )


def site_law_points(
    params: GroundVibrationParams,
    seismic: Sequence[SeismicEvent],
    blasts: Sequence[Blast],
    notices: Sequence[BlastNotice],
    distances: Mapping[str, float],
) -> tuple[SiteLawPoint, ...]:
    """The site's recorded blasts as site-law points: each seismograph event paired with its
    blast (``blast_of``), that blast's latest notice giving a charge per delay, and the monitoring
    point's distance (``distances`` by seismograph, else the notice's). The PPV is the greatest
    judged axis's; an event with a clipped judged axis is left out (its true peak is unknown)."""
    designs: dict[str, BlastNotice] = {}
    for n in sorted(notices, key=lambda n: n.issued_ts):
        if n.charge_kg_per_delay is not None:
            designs[n.id] = n
    points = []
    for event in seismic:
        blast = blast_of(event, tuple(blasts), params.blast_before_s, params.blast_after_s)
        blast_id = blast.id if blast is not None else event.blast_id
        notice = designs.get(blast_id) if blast_id is not None else None
        axes = [a for a in event.axes if a.axis in params.axes]
        if notice is None or notice.charge_kg_per_delay is None or not axes or any(a.clipped for a in axes):
            continue
        distance = distances.get(event.sensor, notice.distance_m)
        if distance is None:
            continue
        ppv = max(a.ppv_mm_s for a in axes)
        points.append(
            SiteLawPoint(notice.id, event.sensor, event.ts, notice.charge_kg_per_delay, distance, ppv)
        )
    return tuple(points)


def early_warnings(
    site: SiteContext, standard: Standard, params: GroundVibrationParams, data: SiteData, now: datetime
) -> list[Finding]:
    """A pending blast whose site-law forecast reaches the warning fraction of the limit curve.

    Needs the notice's charge per delay and distance and a site law (``data.site_law``, at least
    rules.scaled_distance.MIN_EVENTS recorded events); one warning per notice, keyed on it.
    """
    data = only_site(data, site.id)
    fired = {b.id for b in data.blasts if b.ts <= now}  # as of now (see blast_window.early_warnings)
    warnings: list[Finding] = []
    for notice in pending_notices(data.blast_notices, fired, now):
        ahead = params.forecast(notice, data.site_law)
        if ahead is None or not ahead.warn or ahead.prediction is None:
            continue
        p, unit = ahead.prediction, params.units
        summary = (
            f"Blast {notice.id} planned for {local_stamp(notice.planned_ts, site.tz)}: "
            f"{ahead.text(unit).removeprefix(f'Blast {notice.id}: ')}: the upper bound reaches "
            f"{p.pi[1] / ahead.limit_mm_s:.0%} of the {params.curve} limit; reduce the charge per delay "
            f"or increase the distance ({citation_text(standard.section)})"
        )
        warnings.append(
            make_finding(
                site,
                standard,
                FindingKind.WARNING,
                notice.planned_ts,
                notice.planned_ts + timedelta(seconds=1),
                summary,
                measurements=(
                    Measurement(
                        f"predicted PPV, upper 95 % bound, at {params.forecast_hz:g} Hz",
                        round(params.shown(p.pi[1]), 4),
                        round(params.shown(ahead.fraction * ahead.limit_mm_s), 4),
                        unit,
                    ),
                ),
                refs=(f"notice:{notice.id}",),
                details={
                    "as_of": iso(now),
                    "scaled_distance_m_kg": round(ahead.sd, 3),
                    "charge_kg_per_delay": notice.charge_kg_per_delay,
                    "distance_m": notice.distance_m,
                    "events": ahead.events,
                    "predicted_mm_s": round(p.ppv, 4),
                    "ci_mm_s": [round(x, 4) for x in p.ci],
                    "pi_mm_s": [round(x, 4) for x in p.pi],
                    "limit_mm_s": round(ahead.limit_mm_s, 4),
                    "fraction": ahead.fraction,
                    "forecast_hz": ahead.hz,
                    "curve": params.curve,
                },
            )
        )
    return warnings


RULE: RuleSpec[GroundVibrationParams] = RuleSpec(
    name="ground_vibration",
    params_type=GroundVibrationParams,
    evaluate=evaluate,
    early_warnings=early_warnings,
    description="Blast ground vibration: each axis's PPV against a frequency-dependent limit curve.",
)
