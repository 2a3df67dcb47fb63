"""Early warnings for the operator: noise near or certain to exceed (6.D), blasts running late (6.F)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from rules import early_warnings
from rules.model import FindingKind, SiteData
from tests.support.rule_builders import DOVRE, SITE, at, notice, seconds

MINUTE = at("2026-06-15 11:31")
case = pytest.param


# fmt: off
NOISE_WARNINGS_CASES = [
    case(70.0, 30, [], id="6.D-quiet"),
    case(78.0, 30, ["approaching_limit"], id="6.D-within-3-dB"),
    case(90.0, 30, ["cannot_end_below_limit"], id="6.D-30s-at-90-cannot-end-below-80"),
    case(84.0, 20, ["approaching_limit"], id="6.D-20s-at-84-could-still-end-below"),
]
# fmt: on


@pytest.mark.parametrize(("level", "elapsed_s", "expected"), NOISE_WARNINGS_CASES)
def test_noise_warnings(level: float, elapsed_s: int, expected: list[str]) -> None:
    data = SiteData(sound=tuple(seconds("n1", MINUTE, elapsed_s, level)))
    warnings = early_warnings(SITE, DOVRE, data, MINUTE + timedelta(seconds=elapsed_s))
    assert [w.details["warning"] for w in warnings] == expected
    assert all(w.kind == FindingKind.WARNING and w.section == "6.D" and w.start == MINUTE for w in warnings)


def test_an_overloaded_meter_is_an_early_warning_and_its_levels_lower_bounds() -> None:
    """The operator heard nothing of a meter clipping (its levels read low) until the minute was
    judged "not judged"; now it is warned at once, and a level near the limit says "at least"."""
    clipped = [r._replace(overload=i in (3, 4)) for i, r in enumerate(seconds("n1", MINUTE, 30, 70.0))]
    [warning] = early_warnings(SITE, DOVRE, SiteData(sound=tuple(clipped)), MINUTE + timedelta(seconds=30))
    assert warning.details["warning"] == "meter_overloaded"
    assert "overloaded the meter for 2 seconds of 11:31-11:32 local" in warning.summary
    assert "it reads at least 70.0 dB(A), a lower bound" in warning.summary
    assert all(m.lower_bound for m in warning.measurements)
    near = [r._replace(overload=i == 0) for i, r in enumerate(seconds("n1", MINUTE, 30, 78.0))]
    [warning] = early_warnings(SITE, DOVRE, SiteData(sound=tuple(near)), MINUTE + timedelta(seconds=30))
    assert warning.details["warning"] == "approaching_limit"
    assert (
        "reads at least 78.0 dB(A) (the meter was overloaded for 1 second: a lower bound)" in warning.summary
    )


CLOSING = "the blasting window closes at 15:00, in 20 minutes"
SUNSET = "sunset is at 20:55, in 25 minutes"

# fmt: off
BLAST_WARNINGS_CASES = [
    case("2026-06-15 14:50", "2026-06-15 14:40", CLOSING, id="6.F-window-closing"),
    case("2026-06-15 16:00", "2026-06-15 09:00", "after blasting hours (10:00-15:00)", id="6.F-planned-late"),
    case("2026-06-15 20:40", "2026-06-15 20:30", SUNSET, id="6.F-sunset-approaching"),
    case("2026-06-15 12:00", "2026-06-15 09:00", None, id="6.F-planned-in-window-no-warning"),
]
# fmt: on


@pytest.mark.parametrize(("planned", "now", "words"), BLAST_WARNINGS_CASES)
def test_blast_warnings(planned: str, now: str, words: str | None) -> None:
    planned_ts = at(planned)
    data = SiteData(blast_notices=(notice("b9", planned_ts - timedelta(days=2), planned_ts),))
    warnings = [w for w in early_warnings(SITE, DOVRE, data, at(now)) if w.standard == "blast_window"]
    if words is None:
        assert warnings == []
    else:
        [warning] = warnings
        assert words in warning.summary and warning.refs == ("notice:b9",)


def test_short_notice_warns_before_the_blast() -> None:
    planned = at("2026-06-16 11:00")
    data = SiteData(blast_notices=(notice("b9", planned - timedelta(hours=20), planned),))
    [warning] = [
        w for w in early_warnings(SITE, DOVRE, data, at("2026-06-15 16:00")) if w.standard == "blast_notice"
    ]
    assert "may not be fired before 2026-06-16 15:00 CDT" in warning.summary
