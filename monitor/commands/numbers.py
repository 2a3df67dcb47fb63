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


def _text(value: float) -> str:
    """315360000, not 3.1536e+08; 0.5 as 0.5."""
    return f"{value:.0f}" if float(value).is_integer() else f"{value:g}"
