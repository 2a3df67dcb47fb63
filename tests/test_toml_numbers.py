"""The three TOML readers (configuration, ordinance profile, simulator scenario) say the same
mistake in a number the same way: one line naming the key, the reason from rules.numbers.

Before, the configuration called nan "expected a number", the others "expected a finite
number"; a negative value was "must be at least 0", "expected more than 0 and at most ...
seconds" or "-5 is outside 0..200" by reader; and an integer past a float's range (a 1 and 400
zeros, which TOML reads) ended each in an OverflowError traceback.
"""

from __future__ import annotations

import tomllib
from zoneinfo import ZoneInfo

import pytest

from monitor.config import parse_config
from monitor.errors import ConfigError
from rules.numbers import number_problem
from rules.profile import ProfileError, build_profile
from sensors.scenario import ScenarioError, parse_scenario
from tests.rules.test_profile import minimal
from tests.support.config_samples import MINIMAL

HUGE = "1" + "0" * 400  # a TOML integer no float holds

# (TOML literal, the reason each reader gives after the key)
MISTAKES = [
    ("nan", "expected a finite number, got nan"),
    ("-inf", "expected a finite number, got -inf"),
    ("true", "expected a number, got True"),
    ('"80"', "expected a number, got '80'"),
]


def _config_problems(key: str, literal: str) -> list[str]:
    table, name = key.rsplit(".", 1)
    with pytest.raises(ConfigError) as caught:
        parse_config(f"[{table}]\n{name} = {literal}\n" + MINIMAL)
    return [p for p in caught.value.problems if p.startswith(f"{key}:")]


def _profile_problems(key: str, literal: str) -> list[str]:
    value = tomllib.loads(f"v = {literal}")["v"]
    with pytest.raises(ProfileError) as caught:
        build_profile(minimal(**{key.replace(".", "__"): value}), source="test")
    return [p for p in caught.value.problems if p.startswith(f"{key}:")]


def _scenario_problems(key: str, literal: str) -> list[str]:
    text = (
        'start = "2026-06-15T06:00"\n[[sources]]\nkind = "activity"\nlevel_db = 80.0\n'
        'distance_m = { n1 = 100.0 }\nperiods = ["08:00-09:00"]\n[audio]\n'
    )
    text = text.replace("level_db = 80.0", f"level_db = {literal}") if key == "sources[0].level_db" else text
    if key.startswith("audio."):
        text += f"{key.split('.', 1)[1]} = {literal}\n"
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(text, ZoneInfo("America/Chicago"), source="s.toml")
    return [p.removeprefix("s.toml: ") for p in caught.value.problems if f" {key}:" in f" {p}"]


def test_the_same_mistake_reads_the_same_in_each_reader() -> None:
    for literal, reason in MISTAKES:
        assert _config_problems("alerts.min_gap_s", literal) == [f"alerts.min_gap_s: {reason}"]
        assert _profile_problems("standards.noise.params.limit_db", literal) == [
            f"standards.noise.params.limit_db: {reason}"
        ]
        assert _profile_problems("episode_gap_s", literal) == [f"episode_gap_s: {reason}"]
        assert _scenario_problems("sources[0].level_db", literal) == [f"sources[0].level_db: {reason}"]


def test_a_whole_number_given_a_fraction_or_a_bool_reads_the_same_in_each_reader() -> None:
    assert _config_problems("alerts.max_attempts", "2.5") == [
        "alerts.max_attempts: expected a whole number, got 2.5"
    ]
    assert _profile_problems("cure_remind_days", "2.5") == [
        "cure_remind_days: expected a whole number, got 2.5"
    ]
    assert _scenario_problems("audio.minutes_per_hour", "2.5") == [
        "audio.minutes_per_hour: expected a whole number, got 2.5"
    ]
    assert _config_problems("alerts.max_attempts", "true") == [
        "alerts.max_attempts: expected a whole number, got True"
    ]
    assert _profile_problems("cure_remind_days", "true") == [
        "cure_remind_days: expected a whole number, got True"
    ]
    assert _scenario_problems("audio.minutes_per_hour", "true") == [
        "audio.minutes_per_hour: expected a whole number, got True"
    ]


def test_a_negative_value_below_each_keys_bound_is_said_by_the_bound() -> None:
    assert _config_problems("alerts.min_gap_s", "-5") == ["alerts.min_gap_s: must be at least 0 s, got -5"]
    assert _profile_problems("cure_remind_days", "-5") == [
        "cure_remind_days: must be at least 0 days, got -5"
    ]
    assert _profile_problems("episode_gap_s", "-5") == ["episode_gap_s: must be more than 0 s, got -5"]
    assert _scenario_problems("sources[0].level_db", "-5") == [
        "sources[0].level_db: must be at least 0, got -5"
    ]
    assert _scenario_problems("audio.minutes_per_hour", "-5") == [
        "audio.minutes_per_hour: must be at least 0, got -5"
    ]


def test_an_integer_past_a_floats_range_is_a_problem_not_a_traceback() -> None:
    digits = "a number of 401 digits"
    assert _config_problems("alerts.min_gap_s", HUGE) == [
        f"alerts.min_gap_s: must be at most 316224000 s, got {digits}"
    ]
    assert _profile_problems("standards.noise.params.limit_db", HUGE) == [
        f"standards.noise.params.limit_db: must be at most 200 dB, got {digits}"
    ]
    assert _profile_problems("cure_remind_days", HUGE) == [
        f"cure_remind_days: must be at most 365 days, got {digits}"
    ]
    assert _scenario_problems("sources[0].level_db", HUGE) == [
        f"sources[0].level_db: must be at most 200, got {digits}"
    ]
    assert _scenario_problems("sources[0].level_db", "-" + HUGE) == [
        "sources[0].level_db: must be at least 0, got a negative number of 401 digits"
    ]


@pytest.mark.parametrize(
    ("value", "asked", "reason"),
    [
        (float("nan"), {}, "expected a finite number, got nan"),
        (float("inf"), {"maximum": 5}, "expected a finite number, got inf"),
        (True, {}, "expected a number, got True"),
        (False, {"whole": True}, "expected a whole number, got False"),
        ("80", {}, "expected a number, got '80'"),
        ([80], {}, "expected a number, got [80]"),
        (3.0, {"whole": True}, "expected a whole number, got 3.0"),
        (-1, {"minimum": 0, "unit": " s"}, "must be at least 0 s, got -1"),
        (0, {"more_than": 0}, "must be more than 0, got 0"),
        (1e300, {"maximum": 86400, "unit": " s"}, "must be at most 86400 s, got 1e+300"),
        (10**400, {}, "must be at most 1.79769e+308, got a number of 401 digits"),
        (10**400, {"whole": True}, None),  # a whole number as Python holds it (a seed)
        # a whole number and a bound said in full, not rounded to six digits (1.23457e+06)
        (1234567, {"whole": True, "maximum": 365, "unit": " days"}, "must be at most 365 days, got 1234567"),
        (-1234567, {"whole": True, "minimum": 0}, "must be at least 0, got -1234567"),
        (10**20, {"maximum": 2**63 - 1}, "must be at most 9223372036854775807, got 100000000000000000000"),
        (10**25, {"maximum": 5}, "must be at most 5, got 10000000000000000000000000"),
        (10**39, {"maximum": 5}, f"must be at most 5, got 1{'0' * 39}"),
        (-(10**40), {"minimum": 0}, "must be at least 0, got a negative number of 41 digits"),
        (-0.0, {"minimum": 0}, None),
        (80, {"minimum": 0, "maximum": 200}, None),
    ],
)
def test_number_problem(value: object, asked: dict[str, object], reason: str | None) -> None:
    assert number_problem(value, **asked) == reason  # type: ignore[arg-type]
