"""How a measured value reads (pure): one rounding per unit for every surface.

The notice's facts table and sentences, its plot's legend, alerts, `status`, the portal and
the demo's summary all print a level through these, so 84.05 dB(A) is "84.1 dB(A)" everywhere.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from decimal import ROUND_HALF_UP, Context, Decimal
from typing import Any

# One rounding for every number a notice prints, chosen by unit: the same value reads the same
# in the facts table, the sentence and the plot's legend. Decimal half-up, so a stored 84.05 is
# 84.1 (as the rule that measured it wrote it), not the binary float's 84.0.
_DECIMALS = {"dB": 1, "dB(A)": 1, "dB(C)": 1, "dB(Z)": 1, "Hz": 1, "": 2, "h": 1, "m/s": 1, "NTU": 1}
_UNIT_NAMES = {"lx": "lux"}
_EVERY_DOUBLE = Context(prec=400)


def unit_text(unit: str) -> str:
    return _UNIT_NAMES.get(unit, unit)


def number_text(value: float, unit: str, limit: float | None = None) -> str:
    """A measured value as a notice prints it (no unit). Given its limit, a value that is not the
    limit never reads as it, or as past it on the other side: 80.04 against 80 is "80.04", not
    the "80.0" that sat beside "above the 80 dB limit"."""
    if not math.isfinite(value):
        return str(value)
    exact = Decimal(repr(float(value)))
    if unit in ("lx", "lux"):
        # Illuminance spans 0.01 to 10,000 lux: three significant digits at any level.
        if value == 0:
            return "0"
        places = max(0, 2 - math.floor(math.log10(abs(value))))
    elif unit == "s":
        places = 0
    else:
        places = _DECIMALS.get(unit, 2)
    # Precision for every finite double (up to 309 integer digits and the places): with the
    # default 28 digits a sensor's 1e38 raised InvalidOperation and stopped its site's judging.
    if limit is not None and math.isfinite(limit):
        places = places_apart(exact, Decimal(repr(float(limit))), places)
    return f"{_rounded(exact, places):f}"


def _rounded(exact: Decimal, places: int) -> Decimal:
    return exact.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP, context=_EVERY_DOUBLE)


def places_apart(exact: Decimal, limit: Decimal, places: int) -> int:
    """The fewest places, from ``places`` up, at which ``exact`` rounds to its own side of ``limit``
    (a double has at most 1074 places, so this ends)."""
    side = exact.compare(limit)
    while _rounded(exact, places).compare(limit) != side:
        places += 1
    return places


def stored_value(value: float, limit: float, places: int = 2) -> float:
    """A measurement rounded to ``places`` for its finding, or finer where that rounding would put
    it on the limit or past it: 80.004 against 80 is stored as 80.004, not 80.0."""
    if not (math.isfinite(value) and math.isfinite(limit)):
        return value
    return float(
        _rounded(Decimal(repr(value)), places_apart(Decimal(repr(value)), Decimal(repr(limit)), places))
    )


def limit_text(value: float, unit: str) -> str:
    """A limit as set (80, 1, 0.3): the number the ordinance or the profile wrote, with its unit."""
    shown = f"{float(value):g}"
    return f"{shown} {unit_text(unit)}".strip()


def quantity_text(value: float, unit: str, limit: float | None = None) -> str:
    return f"{number_text(value, unit, limit)} {unit_text(unit)}".strip()


def measurement_text(m: Mapping[str, Any] | None) -> str:
    """'LAeq,1min 84.1 dB(A) (limit 80 dB(A))': the one way every surface states a measurement."""
    if not m:
        return ""
    unit = str(m.get("unit") or "")
    bound = None if m.get("limit") is None else float(m["limit"])
    limit = "" if bound is None else f" (limit {limit_text(bound, unit)})"
    at_least = "at least " if m.get("lower_bound") else ""  # a reading of an overloaded meter
    return f"{m['name']} {at_least}{quantity_text(float(m['value']), unit, bound)}{limit}"
