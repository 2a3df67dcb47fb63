"""Numeric command-line options with their bounds, as argparse types.

A value that is not a finite number, or lies outside what the option can mean, is refused by
argparse in one line naming the option, in the words every TOML reader uses for the same
mistake (rules.numbers): ``argument --duration: must be more than 0 s, got -5``,
``argument --window: expected a whole number, got '2.5'``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from rules.numbers import number_problem


def number(low: float, high: float, *, above: bool = False, unit: str = "") -> Callable[[str], float]:
    """A finite float from ``low`` (excluded when ``above``) to ``high``; ``unit`` (" s", " dB")
    follows a bound's number in the reason."""

    def parse(text: str) -> float:
        try:
            value: float | str = float(text)
        except ValueError:
            value = text  # said as typed: expected a number, got 'soon'
        lowest, more_than = (None, low) if above else (low, None)
        problem = number_problem(value, minimum=lowest, more_than=more_than, maximum=high, unit=unit)
        if problem is not None:
            raise argparse.ArgumentTypeError(problem)
        return float(value)

    return parse


def whole(low: int | None = None, high: int | None = None, *, unit: str = "") -> Callable[[str], int]:
    """A whole number from ``low`` to ``high`` (None: no bound), in digits: '2.5' and '1e3' are
    refused as typed, not cut or read as a float."""

    def parse(text: str) -> int:
        try:
            value: int | str = int(text)
        except ValueError:
            value = text
        if (problem := number_problem(value, whole=True, minimum=low, maximum=high, unit=unit)) is not None:
            raise argparse.ArgumentTypeError(problem)
        return int(value)

    return parse


SQLITE_INTEGER_MAX = 2**63 - 1  # the largest id a store's row has (sqlite3 refuses larger)


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


_factor = number(*SPEED_RANGE)
