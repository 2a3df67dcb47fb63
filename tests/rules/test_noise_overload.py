"""Noise judged on seconds the meter was overloaded in (IEC 61672-1 5.11): lower bounds only.

A clipped 95 dB(A) reads 78: below the limit it proves nothing ("not judged: the meter was
overloaded"), above it it is still a violation, of at least the level read.
"""

from __future__ import annotations

from datetime import timedelta

from rules.model import FindingKind, SiteData, SoundLevels
from tests.support.rule_builders import DOVRE, at, blast, run, seconds, with_overrides

MINUTE = at("2026-06-15 11:31")  # 16:31 UTC
NEXT = MINUTE + timedelta(minutes=1)
CLOCK = with_overrides(noise__window_step_s=60)  # one window: the clock minute


def flagged(records: list[SoundLevels], overloaded: range) -> list[SoundLevels]:
    return [r._replace(overload=i in overloaded) for i, r in enumerate(records)]


def noise(sound: list[SoundLevels], profile=CLOCK, **events: object) -> list:
    data = SiteData(sound=tuple(sound), **events)  # type: ignore[arg-type]
    return [f for f in run("noise", data, MINUTE, NEXT, profile=profile) if f.sensors == ("n2",)]


def test_an_overloaded_minute_at_or_below_the_limit_is_not_judged_compliant() -> None:
    minute = seconds("n2", MINUTE, 60, 78.0)
    assert noise(minute) == []  # the same levels from a meter not overloaded: compliant
    [finding] = noise(flagged(minute, range(20, 25)))
    assert finding.kind == FindingKind.INFO
    assert finding.summary == (
        "Noise at boundary meter n2 (south fence) not judged over 11:31-11:32 local: the meter was"
        " overloaded for 5 seconds (its input reached full scale, IEC 61672-1 5.11), so it averaged"
        " at least 78.0 dB(A), a lower bound that cannot show the 80 dB limit was kept (section 6.D)"
    )
    assert finding.details["judged"] is False
    assert finding.details["overloaded_s"] == 5.0 and finding.details["lower_bound"] is True


def test_an_overloaded_minute_above_the_limit_is_a_violation_of_at_least_its_level() -> None:
    [finding] = noise(flagged(seconds("n2", MINUTE, 60, 83.4), range(0, 60)))
    assert finding.kind == FindingKind.VIOLATION
    assert finding.summary.startswith(
        "Noise at boundary meter n2 (south fence) averaged at least 83.4 dB(A) over 11:31-11:32 local"
        " (the meter was overloaded for 60 seconds, its input at full scale: the true level was higher),"
        " above the 80 dB limit"
    )
    assert finding.details["lower_bound"] is True


def test_an_overloaded_second_that_is_exempt_leaves_the_judgement_as_it_was() -> None:
    minute = flagged(seconds("n2", MINUTE, 60, 70.0), range(10, 12))
    assert noise(minute, blasts=(blast(MINUTE + timedelta(seconds=10)),)) == []
    assert [f.kind for f in noise(minute)] == [FindingKind.INFO]  # not exempt: not judged


def test_sliding_windows_and_the_slow_maximum_do_not_clear_an_overloaded_second() -> None:
    minute = flagged(seconds("n2", MINUTE, 60, 70.0), range(30, 31))
    [sliding] = noise(minute, profile=DOVRE)
    assert sliding.kind == FindingKind.INFO and "not judged" in sliding.summary
    [slow] = noise(minute, profile=with_overrides(noise__metric="LASmax"))
    assert slow.kind == FindingKind.INFO
    assert "not judged at 11:31:30 local: the meter was overloaded for 1 second" in slow.summary
    assert "reached a slow maximum of at least 71.0 dB(A)" in slow.summary


def test_an_overloaded_violations_measurement_is_a_lower_bound_on_every_surface() -> None:
    """The finding's summary said "at least", and its measurement, which the notice's facts, the
    alert and the episode text state, read as a measured 83.4 dB(A)."""
    from monitor.wire.codec import finding_from_json, finding_to_json
    from rules.episodes import measurement_json
    from rules.quantities import measurement_text

    [finding] = noise(flagged(seconds("n2", MINUTE, 60, 83.4), range(0, 60)))
    [level] = finding.measurements[:1]
    assert level.lower_bound
    assert measurement_text(measurement_json(level)) == "LAeq,1min at least 83.4 dB(A) (limit 80 dB(A))"
    assert finding_from_json(finding_to_json(finding)) == finding  # kept through the wire and store
    [plain] = noise(seconds("n2", MINUTE, 60, 83.4))
    assert "lower_bound" not in finding_to_json(plain)["measurements"][0]  # others as before
