"""Scenarios as data, and the simulator's core, without a broker."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from monitor.config import load_config
from monitor.wire.codec import AudioBlock, decode, encode
from rules.model import LightSummary, SoundLevels
from sensors.scenario import (
    MAX_DURATION,
    Scenario,
    ScenarioError,
    builtin_names,
    load_scenario,
    parse_duration,
    parse_scenario,
    resolve_clock,
    resolve_period,
)
from sensors.simulate import Simulation
from tests.support.sensors import site_config

TZ = ZoneInfo("America/Chicago")
START = datetime(2026, 6, 15, 6, 0, tzinfo=TZ)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("11:30", datetime(2026, 6, 15, 11, 30, tzinfo=TZ)),
        ("06:00", datetime(2026, 6, 15, 6, 0, tzinfo=TZ)),
        ("02:10:05", datetime(2026, 6, 16, 2, 10, 5, tzinfo=TZ)),  # before the start: the night after
        ("-1d 10:00", datetime(2026, 6, 14, 10, 0, tzinfo=TZ)),
        ("+0d 05:00", datetime(2026, 6, 15, 5, 0, tzinfo=TZ)),
    ],
)
def test_clock_times_are_relative_to_the_start(text: str, expected: datetime) -> None:
    assert resolve_clock(text, START) == expected


def test_periods_cross_midnight() -> None:
    period = resolve_period("22:15-01:30", START)
    assert period.start == datetime(2026, 6, 15, 22, 15, tzinfo=TZ)
    assert period.end == datetime(2026, 6, 16, 1, 30, tzinfo=TZ)
    assert parse_duration("2h30m") == timedelta(hours=2, minutes=30)
    assert parse_duration("45s") == timedelta(seconds=45)


def test_a_period_in_the_repeated_hour_ends_at_the_next_showing_of_its_end() -> None:
    """From the first 01:45 (CDT) of 2026-11-01, the hour the clocks go back, "01:45-01:15" ended
    a day and a half hour later: its end, 01:15 CST, was compared with its start on the clock's
    face (01:15 before 01:45) and a day added. It ends at the next 01:15 the clocks show, 30
    minutes later in elapsed time."""
    first = datetime(2026, 11, 1, 6, 30, tzinfo=UTC).astimezone(TZ)  # 01:30 CDT
    period = resolve_period("01:45-01:15", first)
    assert period.start.astimezone(UTC) == datetime(2026, 11, 1, 6, 45, tzinfo=UTC)
    assert period.end.astimezone(UTC) - period.start.astimezone(UTC) == timedelta(minutes=30)


@pytest.mark.parametrize("text", ["0m", "0", "745h", "99999999h", "9" * 40, "31d"])
def test_a_duration_is_more_than_nothing_and_at_most_a_month(text: str) -> None:
    """'simulate --duration 99999999h' once overflowed the date arithmetic (a traceback)."""
    with pytest.raises(ValueError, match=r"more than 0 s and at most 31 days \(744h\)|is not a duration"):
        parse_duration(text)
    assert parse_duration("744h") == MAX_DURATION == timedelta(days=31)


def test_every_problem_is_reported() -> None:
    text = """
start = "2026-06-15T06:00"
colour = "red"
[[sources]]
kind = "volcano"
[[sources]]
kind = "activity"
level_db = "loud"
distance_m = { n1 = -3 }
periods = ["25:00-26:00"]
[[events]]
kind = "work"
id = "w"
work = "picnic"
period = "08:00-09:00"
"""
    assert_problems(
        text,
        "colour: unknown key",
        "sources[0].kind: unknown source kind 'volcano'",
        "sources[1].level_db: expected a number",
        "sources[1].distance_m.n1",
        "sources[1].periods",
        "events[0].work: must be one of",
    )


def assert_problems(text: str, *expected: str) -> None:
    """The scenario is refused, and every expected problem is among those it names."""
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(text, TZ, source="bad.toml")
    problems = "\n".join(caught.value.problems)
    for problem in expected:
        assert problem in problems, problems


def test_builtin_scenarios_load() -> None:
    assert {"dovre-day", "dovre-short"} <= set(builtin_names())
    day = load_scenario("dovre-day", TZ)
    assert day.start == START and day.duration == timedelta(hours=24)
    with pytest.raises(ScenarioError, match="no built-in scenario"):
        load_scenario("nope", TZ)


def test_a_file_that_is_no_toml_is_named_as_a_file(tmp_path: Path) -> None:
    """`--scenario garbage.wav` said "no built-in scenario 'garbage.wav'"."""
    with pytest.raises(ScenarioError) as refused:
        load_scenario("garbage.wav", TZ)
    assert refused.value.problems == [
        "garbage.wav: a scenario is a TOML file (its name ends in .toml) or a built-in one"
        " (dovre-day, dovre-short)"
    ]
    wav = tmp_path / "garbage.wav"  # given by its path: read, and found no TOML
    wav.write_bytes(b"RIFF")
    with pytest.raises(ScenarioError, match=r"garbage\.wav: not valid TOML"):
        load_scenario(str(wav), TZ)


def _first(sim: Simulation, n: int) -> list[tuple[datetime, object]]:
    return list(itertools.islice(sim.messages(), n))


def test_deterministic_for_a_seed_and_decodable(tmp_path: Path) -> None:
    config = load_config(site_config(tmp_path, "mqtt://127.0.0.1:1"))
    site = config.sites[0]
    scenario = load_scenario("dovre-short", TZ, duration=timedelta(minutes=12))
    one, two = Simulation(scenario, site), Simulation(scenario, site)
    first = _first(one, 3000)
    assert first == _first(two, 3000)
    assert first != _first(Simulation(scenario, site, seed=99), 3000)
    # In publish-time order, and every record passes the daemon's codec.
    times = [at for at, _ in first]
    assert times == sorted(times)
    now = datetime(2026, 12, 15, 23, 0, tzinfo=UTC)
    sites = {site.id: site}
    kinds = set()
    for _, record in first:
        topic, payload = encode(record)  # type: ignore[arg-type]
        decoded = decode(topic, payload, sites, now)
        kinds.add(type(decoded).__name__)
        if isinstance(record, LightSummary):
            assert record.burst_rate_hz == 10.0 and len(record.burst) == 100
    assert {
        "SoundLevels",
        "LightSummary",
        "WeatherReading",
        "SensorStatus",
        "BlastNotice",
        "AudioBlock",
    } <= kinds


def test_audio_replaces_levels_for_the_audio_sensor(tmp_path: Path) -> None:
    config = load_config(site_config(tmp_path, "mqtt://127.0.0.1:1"))
    scenario = load_scenario("dovre-short", TZ, duration=timedelta(minutes=12))
    records = [r for _, r in Simulation(scenario, config.sites[0]).messages()]
    audio = [r for r in records if isinstance(r, AudioBlock)]
    n3_levels = {r.ts for r in records if isinstance(r, SoundLevels) and r.sensor == "n3"}
    # Clips: 30 s around the 14:58 blast and the first minute of 15:00.
    assert len(audio) == 90 and all(a.sensor == "n3" and a.sample_rate == 16000 for a in audio)
    assert not n3_levels & {a.ts for a in audio}
    assert len(n3_levels) + len(audio) == 12 * 60


def test_nan_and_infinity_are_no_numbers_of_a_scenario() -> None:
    """TOML spells nan and inf, and nan passes every range check: an ambient level of nan was
    taken, and the simulation made 9,000 seconds of NaN levels of one meter."""
    text = """
start = "2026-06-15T06:00"
[sound.n1]
ambient_day_db = nan
bearing_deg = -nan
[[sources]]
kind = "activity"
level_db = inf
distance_m = { n1 = nan, n2 = inf }
periods = ["08:00-09:00"]
[[sources]]
kind = "trucks"
gate = "g1"
peak_db = [nan, 88.0]
periods = ["08:00-09:00"]
"""
    assert_problems(
        text,
        "sound.n1.ambient_day_db: expected a finite number, got nan",
        "sound.n1.bearing_deg: expected a finite number, got nan",
        "sources[0].level_db: expected a finite number, got inf",
        "sources[0].distance_m.n1: expected a finite number, got nan",
        "sources[0].distance_m.n2: expected a finite number, got inf",
        "sources[1].peak_db: expected [low, high] in dB(A), 0 to 200",
    )


def test_blast_ids_name_the_day_the_scenario_is_replayed_on() -> None:
    """The demo's blasts were "b-1215-1" on any --date: two days replayed into one store shared
    blast ids, and a notice of one day matched the other day's blast."""
    default = load_scenario("dovre-short", TZ)
    moved = load_scenario("dovre-short", TZ, start=default.start + timedelta(days=5))

    def ids(scenario: Scenario) -> list[str]:
        return [str(e.fields["blast_id"]) for e in scenario.events if "blast_id" in e.fields]

    assert ids(default) == ["b-1215-1", "b-1215-2", "b-1215-1", "b-1215-2", "b-1217-1"]
    assert ids(moved) == ["b-1220-1", "b-1220-2", "b-1220-1", "b-1220-2", "b-1222-1"]
