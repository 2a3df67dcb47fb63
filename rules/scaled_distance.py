"""Scaled distance and the site's own attenuation law, before a blast (issue 27).

Square-root scaled distance SD = D / sqrt(W): D the distance to the nearest structure, W the
charge weight per delay (ISEE Blasters' Handbook; 30 CFR 816.67(c)). A site law
PPV = K * SD^-beta is fitted to the site's recorded seismograph events by least squares on
log10(PPV) = log10(K) - beta * log10(SD); a planned blast's PPV is predicted with the fit's 95 %
confidence interval (of the law's mean) and prediction interval (of one more blast), the upper
prediction bound being what to hold against the limit curve.

Pure: numbers in, numbers out; the Student t quantiles are a table (no scipy in rules/).
Not yet wired (see the issue's remaining work): the blast notice's charge and distance fields,
the operator's early warning and the portal's status page.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

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


FT_LB_PER_M_KG = 3.28084 / math.sqrt(2.20462)  # SD in ft/lb^0.5 per m/kg^0.5


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
