"""Numeric options keep to what they can mean: a bad value is one line naming the option.

`minewatch sensor sound --source synthetic:1e308` once ended in an OverflowError, `--duration -5`
ran, `--trigger-lafmax 1e400` took infinity and `--queue-max-mb -1` was refused naming
max_messages. Every option of every command typed by monitor.commands.numbers is walked here, so a new
one is covered without editing this file (its command's required arguments go in REQUIRED).
"""

from __future__ import annotations

import argparse

import pytest

from monitor.cli import build_parser
from monitor.commands.numbers import number, speed_factor, speed_text, whole
from sensors import light, sound
from sensors.queue import QueueBounds
from sensors.sound import SourceUnavailable


def test_number_and_whole_take_their_ends_and_nothing_past_them() -> None:
    seconds = number(0, 3600, above=True, name="S")
    assert seconds("3600") == 3600.0 and seconds("0.5") == 0.5
    for bad, why in (
        ("0", "outside 0 < S <= 3600"),
        ("3600.1", "outside"),
        ("nan", "outside"),
        ("inf", "outside"),
    ):
        with pytest.raises(argparse.ArgumentTypeError, match=why):
            seconds(bad)
    with pytest.raises(argparse.ArgumentTypeError, match="'soon' is not a number"):
        seconds("soon")
    assert number(0, 10)("0") == 0.0  # a closed low end
    count = whole(0, 10**9)
    assert count("0") == 0
    with pytest.raises(argparse.ArgumentTypeError, match="-1 is outside 0 <= N <= 1000000000"):
        count("-1")
    with pytest.raises(argparse.ArgumentTypeError, match=r"'1\.5' is not a whole number"):
        count("1.5")


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
    for bad, why in (
        ("1e-300", "outside 0.001 <= X <= 1000000"),
        ("-1", "outside"),
        ("fast", "not a number"),
    ):
        with pytest.raises(argparse.ArgumentTypeError, match=why):
            speed_factor(bad)


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
        assert f"{bad} is outside " in err[0] or f"{bad!r} is not a whole number" in err[0], err


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
