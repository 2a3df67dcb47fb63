"""Limit curves for blasting ground vibration, as data: peak particle velocity against frequency.

A curve is a list of corner points ``(frequency Hz, PPV)`` in the profile's unit, joined by
straight lines on log-log axes, which is what the published criteria are: a constant
displacement d is PPV = 2 pi f d, a straight line of slope 1 on log-log paper, and a constant
velocity is a horizontal one. Below the first corner and above the last the end segments are
extended (a curve that starts on a displacement line keeps that displacement below it; one
that ends flat stays flat). Pure: no I/O, no clock.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence

from rules.numbers import number_problem

MM_PER_IN = 25.4
UNITS = {"in/s": MM_PER_IN, "mm/s": 1.0}  # the unit -> mm/s per unit


def check_curve(name: str, points: Sequence[Sequence[float]]) -> None:
    """ValueError("curves: reason") for a curve that is not increasing positive (Hz, PPV) pairs."""
    if len(points) < 2:
        raise ValueError(f"curves: curve {name!r} needs at least two corner points [Hz, PPV]")
    for i, point in enumerate(points):
        if len(point) != 2:
            raise ValueError(f"curves: curve {name!r} point {i} is not a pair [Hz, PPV]")
        for what, value in zip(("Hz", "PPV"), point, strict=True):
            if (problem := number_problem(value, more_than=0)) is not None:
                raise ValueError(f"curves: curve {name!r} point {i} {what}: {problem}")
        if i and point[0] <= points[i - 1][0]:
            raise ValueError(f"curves: curve {name!r} frequencies must increase (point {i})")


def limit_at(points: Sequence[Sequence[float]], hz: float) -> float:
    """The curve's PPV limit at ``hz`` (log-log interpolation, end segments extended)."""
    if hz <= 0 or not math.isfinite(hz):
        return min(p[1] for p in points)  # no frequency: the curve's lowest limit, conservatively
    freqs = [p[0] for p in points]
    i = bisect.bisect_right(freqs, hz) - 1
    i = min(max(i, 0), len(points) - 2)
    (f0, v0), (f1, v1) = points[i], points[i + 1]
    slope = (math.log(v1) - math.log(v0)) / (math.log(f1) - math.log(f0))
    return float(math.exp(math.log(v0) + slope * (math.log(hz) - math.log(f0))))


def airblast_limit(limits_db: Mapping[str, float], mic_low_hz: float | None) -> tuple[float, float] | None:
    """(instrument limit Hz, peak dB limit) for a microphone flat down to ``mic_low_hz``.

    30 CFR 816.67(b)(1): a limit applies to a system whose lower frequency limit is at or below
    the one it names, so the tightest row that the microphone still qualifies for is the least
    demanding row at or above its limit: a 1 Hz microphone is judged on the "2 Hz or lower"
    row. None: the microphone qualifies for no row (a sound level meter flat to 10 Hz).
    """
    if mic_low_hz is None:
        return None
    rows = sorted((float(hz), db) for hz, db in limits_db.items())
    for hz, db in rows:
        if mic_low_hz <= hz + 1e-9:
            return hz, db
    return None
