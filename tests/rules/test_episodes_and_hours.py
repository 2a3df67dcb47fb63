"""Episodes of consecutive violations, and haul hours (5.A.6)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime, timedelta

import pytest

from rules.episodes import Episode, EpisodeFold, episode_facts, episodes_of, update_episodes
from rules.model import Finding, FindingKind, Measurement, SiteData
from rules.profile import load_profile
from tests.support.rule_builders import at, kinds, run, truck

T0 = at("2026-06-15 11:00")
GAP = timedelta(seconds=300)
case = pytest.param


def violation(minute: int, sensor: str = "n1", value: float = 83.0, kind=FindingKind.VIOLATION) -> Finding:
    start = T0 + timedelta(minutes=minute)
    return Finding(
        site="pit1",
        standard="noise",
        section="6.D",
        kind=kind,
        start=start,
        end=start + timedelta(minutes=1),
        timezone="America/Chicago",
        summary="x",
        sensors=(sensor,),
        measurements=(Measurement("LAeq,1min", value, 80.0, "dB(A)"),),
    )


def spans(episodes: list[Episode]) -> list[tuple[int, int, tuple[str, ...]]]:
    def minute(ts: datetime) -> int:
        return int((ts - T0).total_seconds() // 60)

    return [(minute(e.start), minute(e.end), e.sensors) for e in episodes]


# fmt: off
MERGE_AND_SPLIT_BY_GAP_CASES = [
    case([0, 1, 2], [(0, 3, ("n1",))], id="13-consecutive-minutes-one-episode"),
    case([0, 6], [(0, 7, ("n1",))], id="13-gap-of-exactly-5-minutes-merges"),
    case([0, 7], [(0, 1, ("n1",)), (7, 8, ("n1",))], id="13-gap-of-6-minutes-splits"),
    case([10, 0, 5], [(0, 11, ("n1",))], id="13-late-finding-bridges-two-episodes"),
]
# fmt: on


@pytest.mark.parametrize(("minutes", "expected"), MERGE_AND_SPLIT_BY_GAP_CASES)
def test_merge_and_split_by_gap(minutes: list[int], expected) -> None:
    episodes: list[Episode] = []
    for minute in minutes:  # one call per closed minute, as the daemon does
        episodes = update_episodes(episodes, [violation(minute)], GAP)
    assert spans(episodes) == expected


def test_sensors_and_kinds_keep_episodes_apart() -> None:
    findings = [
        violation(0, "n1"),
        violation(1, "n2"),
        violation(2, "n1", kind=FindingKind.EXEMPT_EXCEEDANCE),
        violation(3, "n1", kind=FindingKind.UNRELIABLE),
    ]
    assert spans(update_episodes([], findings, GAP)) == [(0, 1, ("n1",)), (1, 2, ("n2",))]


def test_episode_keeps_worst_measurement_and_ids_once() -> None:
    first, loud = violation(0, value=82.0), violation(1, value=91.5)
    episodes = update_episodes([], [first, loud], GAP)
    episodes = update_episodes(episodes, [loud], GAP)  # re-evaluation of the same minute
    [episode] = episodes
    assert episode.finding_ids == tuple(sorted([first.id, loud.id]))
    assert episode.worst is not None and episode.worst.value == 91.5
    assert episode.section == "6.D" and episode.kind == FindingKind.VIOLATION


def test_an_episode_s_finding_ids_are_sorted_whatever_order_its_findings_came_in() -> None:
    """Merging puts each new id in its place (rules.episodes._sorted_union) instead of sorting the
    episode's ids again: the same ids in the same order as sorting them all, in any arrival order,
    one at a time or in batches, with repeats, and after two episodes are bridged."""
    import random

    rng = random.Random(31)
    findings = [violation(minute) for minute in range(0, 90, 1)] + [violation(95), violation(96)]
    for _ in range(20):
        order = rng.sample(findings, len(findings))
        episodes: list[Episode] = []
        at = 0
        while at < len(order):
            size = rng.choice([1, 1, 1, 3, 10])
            batch = order[at : at + size] + rng.sample(findings, 1)  # a re-evaluated minute too
            episodes = update_episodes(episodes, batch, GAP)
            at += size
        [episode] = episodes
        assert episode.finding_ids == tuple(sorted({f.id for f in findings}))


def test_id_is_deterministic_and_backward_growth_is_reported() -> None:
    later = update_episodes([], [violation(5)], GAP)
    again = update_episodes([], [violation(5)], GAP)
    assert later[0].id == again[0].id
    [grown] = update_episodes(later, [violation(3)], GAP)
    assert grown.id != later[0].id and grown.replaces == (later[0].id,)
    assert grown.is_closed(T0 + timedelta(minutes=12), GAP) and not grown.is_closed(
        T0 + timedelta(minutes=8), GAP
    )


HAUL_HOURS = load_profile("dovre", {"haul_hours": {"windows": ["06:00-19:00"], "gates": ["north"]}})


# fmt: off
HAUL_HOURS_CASES = [
    case("2026-06-15 05:59:59", "north", ["violation"], id="5.A.6-before-hours"),
    case("2026-06-15 06:00:00", "north", [], id="5.A.6-opening-inclusive"),
    case("2026-06-15 19:00:00", "north", [], id="5.A.6-closing-inclusive"),
    case("2026-06-15 19:00:30", "north", ["violation"], id="5.A.6-after-hours"),
    case("2026-06-15 22:00:00", "south", [], id="5.A.6-other-gate-not-restricted"),
]
# fmt: on


@pytest.mark.parametrize(("local_time", "gate", "expected"), HAUL_HOURS_CASES)
def test_haul_hours(local_time: str, gate: str, expected: list[str]) -> None:
    ts = at(local_time)
    findings = run(
        "haul_hours",
        SiteData(trucks=(truck(ts, gate=gate),)),
        ts,
        ts + timedelta(minutes=1),
        profile=HAUL_HOURS,
    )
    assert kinds(findings) == expected
    assert all(f.section == "5.A.6" and f.refs == ("truck:t1",) for f in findings)


def test_haul_hours_idle_without_an_agreement() -> None:
    ts = at("2026-06-15 03:00")
    assert run("haul_hours", SiteData(trucks=(truck(ts),)), ts, ts + timedelta(minutes=1)) == []


# --------------------------------------------------------------------------- episode facts (issue 25)


def _at(minute: float) -> datetime:
    return T0 + timedelta(minutes=minute)


def window_finding(
    first: float,
    last: float,
    value: float = 83.0,
    kind: FindingKind = FindingKind.VIOLATION,
    **details: object,
) -> Finding:
    """A finding over [first, last) minutes after T0 whose worst 60-s window ends at ``last``."""
    return Finding(
        site="pit1",
        standard="noise",
        section="6.D",
        kind=kind,
        start=_at(first),
        end=_at(last),
        timezone="America/Chicago",
        summary=f"noise {value}",
        sensors=("n1",),
        measurements=(Measurement("LAeq,1min", value, 80.0, "dB(A)"),),
        exemptions=("haul truck T-1 entering at gate g1",) if kind is FindingKind.EXEMPT_EXCEEDANCE else (),
        details={"window_start": _at(last - 1).isoformat(), "window_end": _at(last).isoformat(), **details},
    )


def test_touching_windows_are_one_episode() -> None:
    [episode] = episodes_of([window_finding(0, 1), window_finding(1, 2)], GAP)
    assert (episode.start, episode.end, episode.windows) == (_at(0), _at(2), 2)


def test_a_gap_of_exactly_the_profiles_gap_joins_one_second_more_splits() -> None:
    joined = episodes_of([window_finding(0, 1), window_finding(6, 7)], GAP)
    split = episodes_of([window_finding(0, 1), window_finding(6 + 1 / 60, 7)], GAP)
    assert len(joined) == 1 and len(split) == 2


def test_an_exempt_window_inside_does_not_split_and_is_not_counted_as_a_violation() -> None:
    exempt = window_finding(1, 2, 95.0, FindingKind.EXEMPT_EXCEEDANCE)
    [episode] = episodes_of([window_finding(0, 1), exempt, window_finding(2, 3, 84.0)], GAP)
    assert episode.windows == 2 and exempt.id not in episode.finding_ids
    assert episode.peak is not None and episode.peak.value == 84.0  # the exempt 95 is not the peak


def test_the_peak_is_the_worst_window_with_its_own_span() -> None:
    findings = [
        window_finding(0, 1, 83.6),
        window_finding(1, 2, 84.2, exempt_s=12.0),
        window_finding(2, 3, 84.1),
    ]
    [episode] = episodes_of(findings, GAP)
    assert episode.peak is not None and episode.peak.value == 84.2
    assert (episode.peak_start, episode.peak_end, episode.peak_exempt_s) == (_at(1), _at(2), 12.0)
    assert episode.summary == "noise 84.2"


def test_a_late_window_bridging_two_episodes_makes_one_whatever_the_order() -> None:
    parts = [window_finding(0, 1), window_finding(12, 13), window_finding(6, 7)]
    for order in (parts, parts[::-1], [parts[2], parts[0], parts[1]]):
        [episode] = episodes_of(order, GAP)
        assert (episode.start, episode.end, episode.windows) == (_at(0), _at(13), 3)


def test_a_late_revision_that_withdraws_the_bridge_splits_the_episode() -> None:
    first, bridge, last = window_finding(0, 1), window_finding(5, 6), window_finding(10, 11)
    assert len(episodes_of([first, bridge, last], GAP)) == 1
    revised = window_finding(5, 6, 95.0, FindingKind.EXEMPT_EXCEEDANCE)
    assert [(e.start, e.end) for e in episodes_of([first, revised, last], GAP)] == [
        (_at(0), _at(1)),
        (_at(10), _at(11)),
    ]


def test_a_sustained_condition_starts_when_the_condition_began() -> None:
    flagged = window_finding(5, 6, run_start=_at(0).isoformat())
    [episode] = episodes_of([flagged], GAP)
    assert (episode.start, episode.flagged_start, episode.duration_s) == (_at(0), _at(5), 360.0)


def test_the_facts_folded_minute_by_minute_are_those_of_the_findings_at_once() -> None:
    # The notices carry an episode's facts from one minute to the next as JSON and add the new
    # minute (EpisodeFold, issue 31); episode_facts folds every finding at once. Both must tell
    # the same facts: peaks of equal excess (the first wins), a measurement without a limit, a
    # condition that began before its first flagged minute, weather and completeness sums.
    findings = [
        window_finding(0, 1, 83.6, weather_affected_s=1.5, considered=["p1", "p2"]),
        window_finding(1, 2, 84.2, exempt_s=12.0, weather_affected_s=0.1, run_start=_at(-3).isoformat()),
        window_finding(2, 3, 84.2, considered=["p2", "p3"], weather_affected_s=0.2),
        window_finding(3, 4, 81.0, run_start=_at(-4).isoformat()),
    ]
    findings[3] = replace(
        findings[3],
        measurements=(Measurement("Lmax", 101.0, None, "dB(A)"), *findings[3].measurements),
        completeness=1 / 3,
        refs=("sound:n1:1", "truck:t-1", "weather:w-1"),
    )
    [episode] = update_episodes([], findings, GAP)
    fold = EpisodeFold()
    for finding in findings:  # through the store's JSON after every minute, as the notices keep it
        fold = EpisodeFold.from_json(json.loads(json.dumps(fold.to_json())))
        assert fold.extends([finding])
        fold.add(finding)
    assert fold.facts(episode) == episode_facts(episode, findings)
    facts = fold.facts(episode)
    assert facts.peak == Measurement("LAeq,1min", 84.2, 80.0, "dB(A)") and facts.summary == "noise 84.2"
    assert (facts.peak_start, facts.peak_end, facts.peak_exempt_s) == (_at(1), _at(2), 12.0)
    assert facts.start == _at(-4) and facts.flagged_start == _at(0)
    assert facts.weather_affected_s == 1.5 + 0.1 + 0.2
    assert (facts.completeness_min, facts.completeness_mean) == (0.3333, round((3 + 1 / 3) / 4, 4))
    assert facts.considered == ("p1", "p2", "p3") and facts.refs == ("truck:t-1", "weather:w-1")
    assert [m.name for m in facts.measurements] == ["LAeq,1min", "Lmax"]

    # A revised minute (same id) or one before the last cannot be added: fold again.
    revised = window_finding(1, 2, 90.0)
    assert revised.id == findings[1].id and not fold.extends([revised])
    with pytest.raises(ValueError, match="comes before the last one folded"):
        fold.add(window_finding(-2, -1))
    # A late minute bridging two episodes: the merged episode's facts are the fold of all its
    # findings as they are now (the revision included), in whatever order they come.
    later = window_finding(12, 13, 86.0)
    episodes = update_episodes([episode], [later], GAP)
    assert len(episodes) == 2
    [merged] = update_episodes(episodes, [window_finding(8, 9, 85.0)], GAP)
    assert len(merged.finding_ids) == 6 and merged.replaces == (episodes[1].id,)
    current = [findings[0], revised, *findings[2:], later, window_finding(8, 9, 85.0)]
    facts = EpisodeFold.of(current[::-1]).facts(merged)
    assert facts == episode_facts(merged, current)
    assert facts.peak == Measurement("LAeq,1min", 90.0, 80.0, "dB(A)") and facts.end == _at(13)
