"""A number read from TOML, checked one way for every reader (pure, standard library).

The configuration (monitor/config.py), the ordinance profiles (rules/profile.py) and the site
simulator's scenarios (sensors/scenario.py) each read numbers from TOML, which has more than a
limit wants: ``nan`` (every comparison with it is false, so a limit of nan is never met),
``inf``, booleans (``true`` is an ``int`` to Python) and strings that look like numbers. Each
reader asks ``number_problem`` why a value is not the number it needs and says the reason after
the key, so the same mistake reads the same in each:

    noise.limit_db: expected a number, got 'loud'
    noise.limit_db: expected a number, got True
    noise.limit_db: expected a finite number, got nan
    cure_remind_days: expected a whole number, got 2.5
    min_gap_s: must be at least 0 s, got -5

A rule's numeric params say what they can mean beside their default, as field metadata
(``within``); the profile loader checks a value given for one with ``number_problem``:

    limit_db: float = field(default=80.0, metadata=within(minimum=0, maximum=200, unit=" dB"))
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

RANGE = "range"  # the field metadata key ``within`` sets


def number_problem(
    value: Any,
    *,
    whole: bool = False,
    minimum: float | None = None,
    maximum: float | None = None,
    more_than: float | None = None,
    unit: str = "",
) -> str | None:
    """Why ``value`` is not the number asked for (one reason, without the key), or None.

    ``whole``: an integer (a float with a fraction, or 3.0, is not one); ``minimum``/``maximum``:
    inclusive bounds; ``more_than``: an exclusive lower bound; ``unit`` (" s", " days") follows a
    bound's number.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"expected {'a whole number' if whole else 'a number'}, got {value!r}"
    if isinstance(value, float) and not math.isfinite(value):  # an int always is (and may be too big for one)
        return f"expected a finite number, got {value}"
    if whole and not isinstance(value, int):
        return f"expected a whole number, got {value!r}"
    if more_than is not None and value <= more_than:
        return f"must be more than {_bound(more_than)}{unit}, got {shown_number(value)}"
    if minimum is not None and value < minimum:
        return f"must be at least {_bound(minimum)}{unit}, got {shown_number(value)}"
    if maximum is not None and value > maximum:
        return f"must be at most {_bound(maximum)}{unit}, got {shown_number(value)}"
    if not whole and abs(value) > sys.float_info.max:  # an integer no float holds: 1 and 400 zeros
        return f"must be at most {sys.float_info.max:g}, got {shown_number(value)}"
    return None


def too_many_digits(count: int, maximum: float, unit: str = "") -> str:
    """``number_problem``'s words for a number a person typed in ``count`` digits, past
    ``maximum``: refused unread (no need to read 5,000 digits to know they are too many)."""
    return f"must be at most {_bound(maximum)}{unit}, got a number of {count} digits"


def _bound(bound: float) -> str:
    """A bound as written: 0.001, 86400, 9223372036854775807 (an integer in full)."""
    return str(bound) if isinstance(bound, int) else f"{bound:.15g}"


# An integer of more digits than this is said by its count: a line that holds them all is not read.
MAX_SHOWN_DIGITS = 40


def shown_number(value: float) -> str:
    """``value`` as a message shows it: an integer as written, in digits (1234567 and 2**80's
    1208925819614629174706176, not 1.23457e+06 and 1.20893e+24), one of more than 40 digits by
    their count; a float as 1e+300 (its six significant digits)."""
    if isinstance(value, int) and not isinstance(value, bool):
        digits = str(abs(value))
        if len(digits) <= MAX_SHOWN_DIGITS:
            return str(value)
        return f"a {'negative ' if value < 0 else ''}number of {len(digits)} digits"
    return f"{value:g}"


@dataclass(frozen=True, slots=True)
class Range:
    """The numbers a param can mean: ``number_problem``'s bounds, kept with the param."""

    minimum: float | None = None
    maximum: float | None = None
    more_than: float | None = None
    unit: str = ""

    def problem(self, value: Any, *, whole: bool = False) -> str | None:
        return number_problem(
            value,
            whole=whole,
            minimum=self.minimum,
            maximum=self.maximum,
            more_than=self.more_than,
            unit=self.unit,
        )


def within(
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    more_than: float | None = None,
    unit: str = "",
) -> Mapping[str, Range]:
    """Field metadata giving a numeric param its range; for a list or a table of numbers, each
    number's (``rules.profile`` checks a value given in a profile or an override against it)."""
    return MappingProxyType({RANGE: Range(minimum, maximum, more_than, unit)})
