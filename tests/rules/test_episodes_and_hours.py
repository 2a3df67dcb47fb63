"""Episodes of consecutive violations, and haul hours (5.A.6)."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from rules.episodes import Episode, update_episodes
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
