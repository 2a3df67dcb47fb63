"""The levels of the benches' backlogs (bench/ingest.py, bench/drain.py)."""

from __future__ import annotations

import random
from collections.abc import Callable


def backlog_levels(varied: bool, seed: int = 31) -> Callable[[int], float]:
    """LAeq of meter ``n``'s next second: 60 + n % 20 dB(A) every second (every figure of
    docs/PERFORMANCE.md before stop 62), or ``varied``: drawn anew each second, N(65, 5) to 0.1 dB
    within 40-79, as real meters' levels move (each second then falls in a 0.1 dB bin of its own
    more often than not, which is what the store's hourly histograms cost per second)."""
    if not varied:
        return lambda n: 60.0 + (n % 20)
    rng = random.Random(seed)
    return lambda n: round(min(79.0, max(40.0, rng.gauss(65.0, 5.0))), 1)
