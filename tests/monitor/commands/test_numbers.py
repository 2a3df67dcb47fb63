"""Numeric options keep to what they can mean: a bad value is one line naming the option.

`minewatch sensor sound --source synthetic:1e308` once ended in an OverflowError, `--duration -5`
ran, `--trigger-lafmax 1e400` took infinity and `--queue-max-mb -1` was refused naming
max_messages. Every option of `minewatch sensor` typed by monitor.commands.numbers is walked
here, so a new one is covered without editing this file.
"""

from __future__ import annotations

import argparse

import pytest

from monitor.cli import build_parser
from monitor.commands.numbers import number, whole
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


def _bounded_options() -> list[tuple[str, str]]:
    sensor = build_parser()._subparsers._group_actions[0].choices["sensor"]  # type: ignore[union-attr]
    kinds = sensor._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    found = []
    for kind, parser in kinds.items():
        for action in parser._actions:
            if getattr(action.type, "__qualname__", "").startswith(("number.", "whole.")):
                found.append((kind, action.option_strings[0]))
    return found


BOUNDED = _bounded_options()


def test_the_walk_finds_the_bounded_options() -> None:
    assert {("sound", "--duration"), ("sound", "--trigger-lafmax"), ("light", "--rate")} <= set(BOUNDED)
    assert {("seismograph", "--poll"), ("sound", "--queue-max-mb"), ("sound", "--pre-trigger-s")} <= set(
        BOUNDED
    )


@pytest.mark.parametrize(("kind", "option"), BOUNDED, ids=[f"{k} {o}" for k, o in BOUNDED])
def test_a_bounded_sensor_option_refuses_what_it_cannot_mean(
    kind: str, option: str, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["sensor", kind, "--config", "site.toml", "--sensor", "x", "--source", "synthetic"]
    for bad in ("nan", "-inf", "-1e9", "1e12"):
        with pytest.raises(SystemExit) as exited:
            build_parser().parse_args([*base, f"{option}={bad}"])  # "-inf" would read as an option
        assert exited.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"minewatch sensor {kind}: argument {option}: "), err
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
