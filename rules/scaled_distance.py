"""Scaled distance and the site's own attenuation law, before a blast (issue 27).

Square-root scaled distance SD = D / sqrt(W): D the distance to the nearest structure, W the
charge weight per delay (ISEE Blasters' Handbook; 30 CFR 816.67(c)). A site law
PPV = K * SD^-beta is fitted to the site's recorded seismograph events by least squares on
log10(PPV) = log10(K) - beta * log10(SD); a planned blast's PPV is predicted with the fit's 95 %
confidence interval (of the law's mean) and prediction interval (of one more blast), the upper
prediction bound being what to hold against the limit curve.

Pure: numbers in, numbers out; the Student t quantiles are a table (no scipy in rules/).
:func:`forecast` is what the operator sees for a pending blast notice that carries its charge
per delay and distance (the ground_vibration rule's early warning, the portal's status and
events pages): the scaled distance, and the law's PPV with its upper prediction bound against
a fraction of the limit curve at the site's typical frequency, or why there is no prediction.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from rules.model import BlastNotice, SiteLawPoint

# Two-sided 95 % Student t quantiles (t_0.975) by degrees of freedom; 1.960 beyond 30.
_T975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip
MIN_EVENTS = 3  # a straight line through two points has no scatter to measure


def t975(dof: int) -> float:
    if dof < 1:
        raise ValueError("dof: at least one degree of freedom is needed")
    return _T975[dof - 1] if dof <= len(_T975) else 1.960


def scaled_distance(distance_m: float, charge_kg_per_delay: float) -> float:
    """D / sqrt(W) in m/kg^0.5 (multiply by 2.2624 for ft/lb^0.5)."""
    if distance_m <= 0:
        raise ValueError("distance_m: must be positive")
    if charge_kg_per_delay <= 0:
        raise ValueError("charge_kg_per_delay: must be positive")
    return distance_m / math.sqrt(charge_kg_per_delay)


FT_PER_M = 3.28084
LB_PER_KG = 2.20462
FT_LB_PER_M_KG = FT_PER_M / math.sqrt(LB_PER_KG)  # SD in ft/lb^0.5 per m/kg^0.5


@dataclass(frozen=True, slots=True)
class SiteLaw:
    """PPV = k * SD^-beta fitted on log10 axes to ``n`` events (SD in m/kg^0.5, PPV in mm/s)."""

    k: float
    beta: float
    n: int
    s: float  # residual standard deviation of log10(PPV)
    mean_log_sd: float
    sxx: float  # sum of squared deviations of log10(SD)


@dataclass(frozen=True, slots=True)
class Prediction:
    sd: float
    ppv: float  # the law's median PPV at sd (mm/s)
    ci: tuple[float, float]  # 95 % confidence interval of that median
    pi: tuple[float, float]  # 95 % prediction interval of one blast's PPV


def fit_site_law(events: Sequence[tuple[float, float]]) -> SiteLaw | None:
    """Least squares on log10 axes over (scaled distance, PPV mm/s) pairs; None with fewer than
    MIN_EVENTS usable events or a single scaled distance (no slope to fit)."""
    points = [(math.log10(sd), math.log10(ppv)) for sd, ppv in events if sd > 0 and ppv > 0]
    n = len(points)
    if n < MIN_EVENTS:
        return None
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    if sxx <= 1e-12:
        return None
    slope = sum((x - mx) * (y - my) for x, y in points) / sxx
    intercept = my - slope * mx
    residual = sum((y - intercept - slope * x) ** 2 for x, y in points)
    s = math.sqrt(residual / (n - 2))
    return SiteLaw(10**intercept, -slope, n, s, mx, sxx)


def predict(law: SiteLaw, sd: float) -> Prediction:
    """The law's PPV at ``sd`` with its 95 % confidence and prediction intervals."""
    if sd <= 0:
        raise ValueError("sd: must be positive")
    x = math.log10(sd)
    y = math.log10(law.k) - law.beta * x
    t = t975(law.n - 2)
    lever = 1 / law.n + (x - law.mean_log_sd) ** 2 / law.sxx
    half_ci = t * law.s * math.sqrt(lever)
    half_pi = t * law.s * math.sqrt(1 + lever)
    return Prediction(
        sd,
        10**y,
        (10 ** (y - half_ci), 10 ** (y + half_ci)),
        (10 ** (y - half_pi), 10 ** (y + half_pi)),
    )


@dataclass(frozen=True, slots=True)
class Forecast:
    """A pending blast's scaled distance and, with a site law, its predicted PPV (mm/s)."""

    blast_id: str
    sd: float  # m/kg^0.5
    events: int  # the site's recorded events usable for the law
    law: SiteLaw | None
    prediction: Prediction | None  # None: too few events (or one scaled distance) to fit
    hz: float  # the site's typical frequency the limit is read at
    limit_mm_s: float  # the limit curve at hz
    fraction: float  # of the limit the upper prediction bound may reach before a warning

    @property
    def warn(self) -> bool:
        return self.prediction is not None and self.prediction.pi[1] >= self.fraction * self.limit_mm_s

    def text(self, units: str) -> str:
        """One sentence in the profile's units ("in/s": ft/lb^0.5; "mm/s": m/kg^0.5)."""
        imperial = units == "in/s"
        per = 25.4 if imperial else 1.0
        sd = f"{self.sd * FT_LB_PER_M_KG:.1f} ft/lb^0.5" if imperial else f"{self.sd:.1f} m/kg^0.5"
        head = f"Blast {self.blast_id}: scaled distance {sd}"
        if self.prediction is None:
            return (
                f"{head}; no PPV predicted: the site law needs at least {MIN_EVENTS} recorded seismograph "
                f"events at different scaled distances with their blast's charge per delay and distance, "
                f"and {self.events} {'is' if self.events == 1 else 'are'} recorded"
            )
        p = self.prediction

        def v(mm_s: float) -> str:
            return f"{mm_s / per:.3g} {units}"

        return (
            f"{head}; the site law from {self.events} recorded events predicts {v(p.ppv)} "
            f"(95 % confidence {v(p.ci[0])} to {v(p.ci[1])}; one blast's 95 % prediction bound "
            f"{v(p.pi[1])}), against {self.fraction:.0%} of the limit at {self.hz:g} Hz "
            f"({v(self.fraction * self.limit_mm_s)} of {v(self.limit_mm_s)})"
        )


def forecast(
    notice: BlastNotice,
    points: Sequence[SiteLawPoint],
    limit_mm_s: float,
    fraction: float,
    hz: float,
) -> Forecast | None:
    """The forecast of a notice that carries its charge per delay and distance, else None."""
    if notice.charge_kg_per_delay is None or notice.distance_m is None:
        return None
    sd = scaled_distance(notice.distance_m, notice.charge_kg_per_delay)
    pairs = [(p.sd, p.ppv_mm_s) for p in points if p.ppv_mm_s > 0 and p.sd > 0]
    law = fit_site_law(pairs)
    prediction = predict(law, sd) if law is not None else None
    return Forecast(notice.id, sd, len(pairs), law, prediction, hz, limit_mm_s, fraction)


def pending_notices(notices: Sequence[BlastNotice], fired: set[str], now: datetime) -> list[BlastNotice]:
    """Each unfired blast's latest notice carrying charge and distance, planned at or after ``now``."""
    latest: dict[str, BlastNotice] = {}
    for n in notices:
        designed = n.charge_kg_per_delay is not None and n.distance_m is not None
        if designed and (n.id not in latest or n.issued_ts >= latest[n.id].issued_ts):
            latest[n.id] = n
    return [n for n in latest.values() if n.id not in fired and n.planned_ts >= now]
