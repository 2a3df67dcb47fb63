"""Every rule's numeric params have a range of what they can mean (rules.numbers.within), and
the profile loader says a value outside it, or not a number at all, in one line naming the key:
``standards.<name>.params.<key>: <reason>``, the reason worded as every TOML reader words it.

Before, each params class worded its own checks ("limits and durations must not be negative",
"need 0 < min_hz < max_hz"), named another field than the one wrong (light_trespass's
max_gap_s was reported as limit_lux), stopped at the first mistake of a standard, named a table
for a wrong entry of it ("limits_db: 2.0 dB is not a plausible airblast limit"), and accepted
nonsense: a noise limit of -5 dB(A), an unreported-blast threshold of -5 dB, an airblast's
blast_after_s of -60 s, and an upward-light baseline of 1e300 h (loaded, then an OverflowError
traceback from rules.data_margins).
"""

from __future__ import annotations

import copy
import dataclasses
import tomllib
import types
import typing
from collections.abc import Iterator, Mapping
from importlib import resources
from typing import Any

import pytest

from rules import RULES
from rules.numbers import RANGE, Range
from rules.profile import ProfileError, build_profile, load_profile
from tests.support.paths import DATA, REPO

SHIPPED = ("dovre", "land-disturbing")


def _raw(profile: str) -> dict[str, Any]:
    text = resources.files("rules.profiles").joinpath(f"{profile}.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)


def _numeric(hint: Any) -> type | None:
    """int or float for a number, a number that may be absent, or a list or table of numbers."""
    if hint in (int, float):
        return typing.cast(type, hint)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (types.UnionType, typing.Union):
        return next((n for a in args if a is not type(None) and (n := _numeric(a))), None)
    if origin is tuple:
        return _numeric(args[0])
    if origin in (Mapping, dict):
        return _numeric(args[1])
    return None


def _number_fields() -> Iterator[tuple[str, str, type, Range | None]]:
    """(rule, field, int or float, its range) for every numeric param of every rule."""
    for rule, spec in RULES.items():
        hints = typing.get_type_hints(spec.params_type)
        for f in dataclasses.fields(spec.params_type):
            if "linked" in f.metadata:  # filled from another standard, never set in a profile
                continue
            if (kind := _numeric(hints[f.name])) is not None:
                yield rule, f.name, kind, f.metadata.get(RANGE)


NUMBER_FIELDS = list(_number_fields())
# The plain numbers (not lists or tables of them): each is set alone in a shipped profile below.
PLAIN = [
    (rule, name, kind, bounds)
    for rule, name, kind, bounds in NUMBER_FIELDS
    if typing.get_origin(typing.get_type_hints(RULES[rule].params_type)[name]) not in (tuple, Mapping)
]


def _standard_of(rule: str) -> tuple[str, str]:
    """(shipped profile, standard key) of the first standard of ``rule``."""
    for profile in SHIPPED:
        for key, standard in _raw(profile)["standards"].items():
            if standard["rule"] == rule:
                return profile, key
    raise AssertionError(f"no shipped profile has a standard of rule {rule!r}")


def _problems(rule: str, name: str, value: Any) -> tuple[str, list[str]]:
    """The path of ``name`` in a shipped profile's standard of ``rule``, and the problems of the
    profile with that param set to ``value``."""
    profile, key = _standard_of(rule)
    raw = copy.deepcopy(_raw(profile))
    raw["standards"][key].setdefault("params", {})[name] = value
    path = f"standards.{key}.params.{name}"
    try:
        build_profile(raw, source=profile)
    except ProfileError as exc:
        return path, exc.problems
    return path, []


def test_every_numeric_param_of_every_rule_has_a_range_its_default_is_in() -> None:
    missing = [f"{rule}.{name}" for rule, name, _, bounds in NUMBER_FIELDS if bounds is None]
    assert missing == []
    for rule, name, kind, bounds in PLAIN:
        default = getattr(RULES[rule].params_type(), name)
        if default is not None:
            assert bounds is not None and bounds.problem(default, whole=kind is int) is None, (rule, name)
        # a lower bound at least 0 for each: no count, duration, level or fraction here is negative
        assert bounds is not None and (bounds.minimum is not None or bounds.more_than is not None), name
        assert bounds.maximum is not None, f"{rule}.{name} has no upper bound"


@pytest.mark.parametrize(
    ("rule", "name", "kind", "bounds"), PLAIN, ids=[f"{rule}.{name}" for rule, name, *_ in PLAIN]
)
def test_a_wrong_number_is_one_line_naming_the_param(rule: str, name: str, kind: type, bounds: Range) -> None:
    number = "a whole number" if kind is int else "a number"
    assert bounds.maximum is not None
    above = int(bounds.maximum) + 1 if kind is int else bounds.maximum * 2 + 1
    lowest = bounds.minimum if bounds.minimum is not None else bounds.more_than
    lower_words = "at least" if bounds.minimum is not None else "more than"
    mistakes: list[tuple[Any, str]] = [
        (float("nan"), "expected a finite number, got nan"),
        (float("-inf"), "expected a finite number, got -inf"),
        (float("inf"), "expected a finite number, got inf"),
        (True, f"expected {number}, got True"),
        ("80", f"expected {number}, got '80'"),
        (-1, f"must be {lower_words} {lowest:g}{bounds.unit}, got -1"),
        (above, f"must be at most {bounds.maximum:.15g}{bounds.unit}, got {above:g}"),
    ]
    if kind is int:
        mistakes.append((2.5, "expected a whole number, got 2.5"))
    for value, reason in mistakes:
        path, problems = _problems(rule, name, value)
        assert problems == [f"{path}: {reason}"], (value, problems)


def test_the_noise_limit_is_a_level_in_db() -> None:
    path, problems = _problems("noise", "limit_db", -5)
    assert problems == [f"{path}: must be at least 0 dB, got -5"]
    path, problems = _problems("noise", "limit_db", 300.0)
    assert problems == [f"{path}: must be at most 200 dB, got 300"]


def test_each_number_of_a_table_or_a_list_is_checked_where_it_stands() -> None:
    raw = copy.deepcopy(_raw("dovre"))
    params = raw["standards"]["airblast"]["params"]
    params["limits_db"] = {**params["limits_db"], "2": 2.0}
    curves = raw["standards"]["ground_vibration"]["params"]["curves"]
    curves["rhode-island"] = [[2.5, 0.5], [10.0, -0.5], [40.0, float("nan")]]
    with pytest.raises(ProfileError) as caught:
        build_profile(raw, source="dovre")
    assert caught.value.problems == [
        "standards.ground_vibration.params.curves.rhode-island[1][1]: must be more than 0, got -0.5",
        "standards.airblast.params.limits_db.2: must be at least 60 dB, got 2",
    ]


def test_every_mistake_of_a_standard_is_its_own_line() -> None:
    raw = copy.deepcopy(_raw("dovre"))
    raw["standards"]["noise"]["params"].update(limit_db=-5, wind_limit_ms=-1.0, interval_s=0)
    raw["standards"]["flashing_light"]["params"].update(min_modulation_depth=1.5, vehicle_margin_s=-300.0)
    with pytest.raises(ProfileError) as caught:
        build_profile(raw, source="dovre")
    assert caught.value.problems == [
        "standards.noise.params.limit_db: must be at least 0 dB, got -5",
        "standards.noise.params.interval_s: must be at least 1 s, got 0",
        "standards.noise.params.wind_limit_ms: must be at least 0 m/s, got -1",
        "standards.flashing_light.params.min_modulation_depth: must be at most 1, got 1.5",
        "standards.flashing_light.params.vehicle_margin_s: must be at least 0 s, got -300",
    ]


def test_an_operations_agreement_is_held_to_the_same_ranges() -> None:
    with pytest.raises(ProfileError) as caught:
        load_profile("dovre", {"noise.limit_db": -5, "blast_notice": {"min_notice_h": 1e300}})
    assert caught.value.problems == [
        "noise.limit_db: must be at least 0 dB, got -5",
        "blast_notice.min_notice_h: must be at most 8760 h, got 1e+300",
    ]
    assert load_profile("dovre", {"noise.limit_db": 85}).params("noise").limit_db == 85.0


def test_a_comparison_of_two_params_names_the_one_said_wrong() -> None:
    path, problems = _problems("flashing_light", "max_hz", 0.05)
    assert problems == [f"{path}: must be more than min_hz (0.1 Hz), got 0.05"]


@pytest.mark.parametrize(
    "profile",
    [*SHIPPED, str(DATA / "profiles" / "fernhill.toml"), str(REPO / "tests/rules/profiles/otherton.toml")],
)
def test_shipped_and_test_profiles_load(profile: str) -> None:
    assert load_profile(profile).standards


def _temporary_days(**fields: Any) -> None:
    from rules.lighting import TemporaryDays

    TemporaryDays(**fields)


def _curve(points: list[list[float]]) -> None:
    from rules.seismic_limits import check_curve

    check_curve("quarry", points)


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda: _temporary_days(max_days_per_year=-1), "max_days_per_year: must be at least 0 days, got -1"),
        (lambda: _temporary_days(same_use_gap_s=-5.0), "same_use_gap_s: must be at least 0 s, got -5"),
        (
            lambda: _curve([[1.0, 1.0], [2.0, -0.5]]),
            "curves: curve 'quarry' point 1 PPV: must be more than 0, got -0.5",
        ),
        (
            lambda: _curve([[0.0, 1.0], [2.0, 1.0]]),
            "curves: curve 'quarry' point 0 Hz: must be more than 0, got 0",
        ),
        (
            lambda: _curve([[1.0, float("nan")], [2.0, 1.0]]),
            "curves: curve 'quarry' point 0 PPV: expected a finite number, got nan",
        ),
    ],
    ids=["temporary-days-negative", "same-use-gap-negative", "curve-ppv", "curve-hz", "curve-nan"],
)
def test_the_checks_past_the_loaders_ranges_word_a_number_as_every_reader_does(make: Any, said: str) -> None:
    """TemporaryDays (built by the temporary_lighting standard for every lighting rule) and a
    ground-vibration curve's points are checked where they are made too; each worded its own
    reason ("day counts must not be negative", "must be positive numbers"), and says rules.numbers'."""
    with pytest.raises(ValueError) as caught:
        make()
    assert str(caught.value) == said
