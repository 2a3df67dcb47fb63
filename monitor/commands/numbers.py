"""Numeric command-line options with their bounds, as argparse types.

A value that is not a finite number, or lies outside what the option can mean, is refused by
argparse in one line naming the option (``argument --duration: -5 is outside 0 < S <= 315360000``),
before anything starts.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def number(low: float, high: float, *, above: bool = False, name: str = "x") -> Callable[[str], float]:
    """A finite float from ``low`` (excluded when ``above``) to ``high``; ``name`` is what the
    range calls it (the option's metavar)."""
    span = f"{_text(low)} {'<' if above else '<='} {name} <= {_text(high)}"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not math.isfinite(value) or value < low or value > high or (above and value == low):
            raise argparse.ArgumentTypeError(f"{text} is outside {span}")
        return value

    return parse


def whole(low: int, high: int, *, name: str = "N") -> Callable[[str], int]:
    """A whole number from ``low`` to ``high``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text} is outside {low} <= {name} <= {high}")
        return value

    return parse


# A replay or simulation speed: times faster than real time. Below, a day would take years;
# above, a pause between minutes would be under a microsecond, which is what 'max' says.
SPEED_RANGE = (0.001, 1_000_000.0)
NO_PAUSE = ("max", "0", "inf")  # the spellings of 'as fast as it goes', returned as 0.0


def speed_factor(text: str) -> float:
    """--speed of the sensor, simulate and demo commands: a factor in SPEED_RANGE (1 = real
    time), or 0.0 for 'max'."""
    if text in NO_PAUSE:
        return 0.0
    try:
        return _factor(text)
    except argparse.ArgumentTypeError as exc:
        hint = "give a factor (1 = real time), or 'max' for no pause"
        raise argparse.ArgumentTypeError(f"{exc}: {hint}") from None


def speed_text(value: float) -> str:
    """What ``speed_factor`` reads back as ``value``."""
    return "max" if value == 0 else repr(value)


def _text(value: float) -> str:
    """315360000, not 3.1536e+08; 0.5 as 0.5."""
    return f"{value:.0f}" if float(value).is_integer() else f"{value:g}"


_factor = number(*SPEED_RANGE, name="X")
