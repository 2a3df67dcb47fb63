"""Numeric options keep to what they can mean: a bad value is one line naming the option.

`minewatch sensor sound --source synthetic:1e308` once ended in an OverflowError, `--duration -5`
ran, `--trigger-lafmax 1e400` took infinity and `--queue-max-mb -1` was refused naming
max_messages. Every option of every command typed by monitor.commands.numbers is walked here, so a new
one is covered without editing this file (its command's required arguments go in REQUIRED).

The reason is worded as the TOML readers word the same mistake (rules.numbers): the options
said "-5 is outside 0 < S <= 315360000" and "'x' is not a number" in words of their own, and
`serve --port`, `influx requeue --id` and the `--seed`s read their numbers apart ("'0' is not a
TCP port (1 to 65535)", argparse's "invalid int value"); `influx requeue --id
99999999999999999999` ended in an OverflowError traceback from sqlite3.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable

import pytest

from monitor.cli import build_parser
from monitor.commands.numbers import number, speed_factor, speed_text, whole
from sensors import light, sound
from sensors.queue import QueueBounds
from sensors.sound import SourceUnavailable


def _refusal(parse: Callable[[str], float], text: str) -> str:
    with pytest.raises(argparse.ArgumentTypeError) as refused:
        parse(text)
    return str(refused.value)


def test_number_and_whole_take_their_ends_and_nothing_past_them() -> None:
    seconds = number(0, 3600, above=True, unit=" s")
    assert seconds("3600") == 3600.0 and seconds("0.5") == 0.5
    assert [_refusal(seconds, bad) for bad in ("0", "3600.1", "nan", "inf", "soon", "")] == [
        "must be more than 0 s, got 0",
        "must be at most 3600 s, got 3600.1",
        "expected a finite number, got nan",
        "expected a finite number, got inf",
        "expected a number, got 'soon'",
        "expected a number, got ''",
    ]
    assert number(0, 10)("0") == 0.0  # a closed low end
    count = whole(0, 10**9)
    assert count("0") == 0
    assert [_refusal(count, bad) for bad in ("-1", "1000000001", "1.5", "1e3", "nan")] == [
        "must be at least 0, got -1",
        "must be at most 1000000000, got 1000000001",
        "expected a whole number, got '1.5'",
        "expected a whole number, got '1e3'",
        "expected a whole number, got 'nan'",
    ]
    assert whole()("-12345678901234567890") == -12345678901234567890  # a seed: any whole number


def _leaves(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> list[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    groups = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not groups:
        return [(path, parser)]
    return [leaf for name, child in groups[0].choices.items() for leaf in _leaves(child, (*path, name))]


def _bounded_options() -> list[tuple[tuple[str, ...], str]]:
    """(command path, option) of every option typed by monitor.commands.numbers."""
    return [
        (path, action.option_strings[0])
        for path, parser in _leaves(build_parser())
        for action in parser._actions
        if getattr(action.type, "__qualname__", "").startswith(("number.", "whole."))
        or action.type is speed_factor
    ]


BOUNDED = _bounded_options()
# What each command needs besides the option tried (argparse checks required arguments last).
REQUIRED = {
    "sensor": ["--config", "site.toml", "--sensor", "x", "--source", "synthetic"],
    "simulate": ["--config", "site.toml"],
    "check-topics": ["--config", "site.toml"],
    "levels": ["recording.wav"],
    "demo": [],
    "serve": ["--config", "site.toml"],
    "influx": ["--config", "site.toml"],
}


def test_the_walk_finds_the_bounded_options() -> None:
    found = {(" ".join(path), option) for path, option in BOUNDED}
    assert {
        ("sensor sound", "--duration"),
        ("sensor sound", "--trigger-lafmax"),
        ("sensor light", "--rate"),
    } <= found
    assert {
        ("sensor seismograph", "--poll"),
        ("sensor sound", "--pre-trigger-s"),
        ("simulate", "--window"),
    } <= found
    # --speed: one reading for the three commands that replay or simulate (there were two parsers).
    assert {("sensor sound", "--speed"), ("simulate", "--speed"), ("demo", "--speed")} <= found
    # whole numbers read apart before (argparse's int, a port's own check)
    assert {
        ("serve", "--port"),
        ("influx requeue", "--id"),
        ("simulate", "--seed"),
        ("demo", "--seed"),
    } <= found


def test_a_speed_is_a_factor_or_max() -> None:
    assert [speed_factor(t) for t in ("max", "0", "inf", "1", "600", "0.001", "1000000")] == [
        0.0,
        0.0,
        0.0,
        1.0,
        600.0,
        0.001,
        1e6,
    ]
    for value in (0.0, 600.0, 0.25):
        assert speed_factor(speed_text(value)) == value  # demo hands its --speed on to simulate
    hint = ": give a factor (1 = real time), or 'max' for no pause"
    assert [_refusal(speed_factor, bad) for bad in ("1e-300", "-1", "2e6", "fast")] == [
        f"must be at least 0.001, got 1e-300{hint}",
        f"must be at least 0.001, got -1{hint}",
        f"must be at most 1000000, got 2e+06{hint}",
        f"expected a number, got 'fast'{hint}",
    ]


@pytest.mark.parametrize(("path", "option"), BOUNDED, ids=[f"{' '.join(p)} {o}" for p, o in BOUNDED])
def test_a_bounded_option_refuses_what_it_cannot_mean(
    path: tuple[str, ...], option: str, capsys: pytest.CaptureFixture[str]
) -> None:
    base = [*path, *REQUIRED[path[0]]]
    for bad in ("nan", "-inf", "-1e9", "1e12"):
        with pytest.raises(SystemExit) as exited:
            build_parser().parse_args([*base, f"{option}={bad}"])  # "-inf" would read as an option
        assert exited.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"minewatch {' '.join(path)}: argument {option}: "), err
        assert SHARED_REASON.search(err[0]), err


# The reasons of rules.numbers.number_problem, which the TOML readers give for the same mistakes.
SHARED_REASON = re.compile(
    r": argument --[a-z-]+: (expected a (finite |whole )?number"
    r"|must be (at least|at most|more than) [0-9.e+]+( [A-Za-z]+)?), got [^ ]+( \(see |: give a factor)"
)


# (command line, the line it is refused in) for each command's numeric options.
REFUSED = [
    (["sensor", "sound", "--duration=-5"], "argument --duration: must be more than 0 s, got -5"),
    (
        ["sensor", "sound", "--trigger-lafmax=1e400"],
        "argument --trigger-lafmax: expected a finite number, got inf",
    ),
    (["sensor", "sound", "--queue-max-mb=-1"], "argument --queue-max-mb: must be at least 0 MB, got -1"),
    (
        ["sensor", "sound", "--queue-max-messages=2.5"],
        "argument --queue-max-messages: expected a whole number, got '2.5'",
    ),
    (["sensor", "sound", "--pre-trigger-s=301"], "argument --pre-trigger-s: must be at most 300 s, got 301"),
    (["sensor", "light", "--rate=0"], "argument --rate: must be more than 0 Hz, got 0"),
    (["simulate", "--window=0"], "argument --window: must be at least 1, got 0"),
    (["simulate", "--seed=1.5"], "argument --seed: expected a whole number, got '1.5'"),
    (
        ["demo", "--speed=fast"],
        "argument --speed: expected a number, got 'fast': give a factor (1 = real time),"
        " or 'max' for no pause",
    ),
    (["demo", "--seed=x"], "argument --seed: expected a whole number, got 'x'"),
    (["check-topics", "--seconds=nan"], "argument --seconds: expected a finite number, got nan"),
    (["levels", "--calibration=300"], "argument --calibration: must be at most 200 dB, got 300"),
    (["serve", "--port=0"], "argument --port: must be at least 1, got 0"),
    (["serve", "--port=70000"], "argument --port: must be at most 65535, got 70000"),
    (
        ["influx", "requeue", "--id=99999999999999999999"],
        "argument --id: must be at most 9223372036854775807, got 99999999999999999999",
    ),
    (["influx", "requeue", "--id=x"], "argument --id: expected a whole number, got 'x'"),
]


@pytest.mark.parametrize(("line", "said"), REFUSED, ids=[" ".join(line) for line, _ in REFUSED])
def test_each_commands_numeric_options_say_the_shared_reason(
    line: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    command = [word for word in line if not word.startswith("--")]
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args([*command, *REQUIRED[command[0]], line[-1]])
    assert exited.value.code == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"minewatch {' '.join(command)}: {said} (see minewatch {' '.join(command)} --help)"
    ]


@pytest.mark.parametrize("spec", ["synthetic:1e308", "synthetic:nan", "synthetic:-1", "synthetic:200.5"])
def test_a_synthetic_sound_level_outside_the_wire_range_is_refused(spec: str) -> None:
    with pytest.raises(SourceUnavailable, match=r"the level must be from 0 to 200 dB"):
        sound.open_source(spec, 120.0)


@pytest.mark.parametrize("spec", ["synthetic:1e9", "synthetic:nan", "synthetic:5:6", "synthetic:5:-1"])
def test_a_synthetic_light_outside_its_range_is_refused(spec: str) -> None:
    with pytest.raises(light.SourceUnavailable, match=r"LUX must be from 0 to 200000 and HZ from 0 to half"):
        light.open_source(spec, 10.0)


def test_a_negative_queue_bound_names_its_own_field() -> None:
    with pytest.raises(
        ValueError, match=r"^max_bytes: a queue bound must not be negative \(0: unbounded\), got -1$"
    ):
        QueueBounds(5, -1)
    with pytest.raises(ValueError, match=r"^max_messages: "):
        QueueBounds(-1, 5)
