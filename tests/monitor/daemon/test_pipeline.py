"""The pipeline in-process with a controlled clock: lateness, health, drift, status, alerts.

The broker is replaced by a list that records what would be published (the MQTT path
itself is covered against a real Mosquitto in test_daemon.py); the store is real SQLite.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import pytest

import rules
from monitor.cli import main
from monitor.config import parse_config
from monitor.daemon import announcer
from monitor.daemon.clock import Clock
from monitor.daemon.ingest import Inbound
from monitor.daemon.pipeline import QUIET_S, Pipeline
from monitor.daemon.site_state import SiteState
from monitor.daemon.site_status import site_status
from monitor.journal.chain_kinds import GENESIS, next_head
from monitor.journal.store import Store, to_us
from monitor.wire.codec import encode, payload_of
from monitor.wire.protocol import format_ts
from rules.model import Finding, LightSummary, SensorStatus, SoundLevels
from rules.times import stored_time
from tests.support.configs import quarry_config, sensor
from tests.support.pipeline_world import World, in_time_order

T0 = datetime(2026, 6, 15, 17, 0, tzinfo=UTC)  # 12:00 in Dovre (CDT)


def config_text(store: str | Path) -> str:
    return quarry_config(
        store,
        retention_days=1,
        daemon={
            "lateness_s": 300,
            "offline_after_periods": 10,
            "town_offline_alert_s": 600,
            "clock_drift_limit_s": 2,
            "status_interval_s": 60,
            "anchor_interval_s": 900,
        },
        alerts={"min_gap_s": 600},
        sensors=[sensor("n1", "sound", expected_period_s=1)],
    )


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    w = World(tmp_path, config_text(tmp_path / "store.db"), T0)
    yield w
    w.close()


def test_minute_is_judged_once_data_has_moved_past_it(world: World) -> None:
    world.levels(T0, 60, 90.0)  # a loud minute
    world.advance(70)
    assert world.findings() == []  # the site's data has not moved past the minute yet
    world.levels(T0 + timedelta(minutes=1), 6, 60.0)
    world.advance(1)
    assert len(world.findings()) == 1
    # A resend of the same seconds (even with other values) changes nothing: a reading is
    # identified by site, sensor and time.
    world.levels(T0, 60, 50.0)
    world.advance(10)
    assert len(world.findings()) == 1 and world.pipeline.counters.duplicates == 60


def test_late_seconds_are_placed_and_their_minute_re_judged(world: World) -> None:
    minute = T0 + timedelta(minutes=1)
    world.advance(90)
    world.levels(minute, 30, 70.0)  # only half of the minute arrives in time
    world.advance(40)
    world.levels(minute + timedelta(minutes=1), 6, 60.0)
    world.advance(1)
    assert world.pipeline.sites["q"].evaluated_until == minute + timedelta(minutes=1)
    assert world.findings() == []  # judged on what is there: 30 s at 70 dB(A)
    world.levels(minute + timedelta(seconds=30), 30, 99.0)  # the rest, 2 minutes late (< 300 s)
    world.advance(10)
    assert len(world.findings()) == 1


def test_recent_sound_in_memory_mirrors_the_store(world: World) -> None:
    """Evaluation reads sound from memory; it must be exactly what the store holds."""
    state = world.pipeline.sites["q"]
    for m in range(6):
        world.levels(T0 + timedelta(minutes=m), 60, 60.0 + m)
        world.advance(60)
    world.levels(T0 + timedelta(minutes=2), 60, 40.0)  # duplicates: ignored
    world.advance(1)
    # Late seconds into minutes already judged and already let go of (re-read from the store).
    world.pipeline.handle_batch(
        [
            Inbound(
                *encode(SoundLevels("q", "n1", T0 + timedelta(minutes=m, seconds=0.5), 0.5, 90, 91, 99)),
                1,
                1,
                0.0,
            )
            for m in (0, 4)
        ]
    )
    world.advance(10)
    held = len(state.recent)
    assert 0 < held < 6 * 60  # older minutes are let go once their final look is done
    for start, end in [
        (T0, T0 + timedelta(minutes=7)),
        (T0 + timedelta(seconds=30), T0 + timedelta(minutes=4, seconds=1)),
    ]:
        assert in_time_order(state.recent.by_sensor(start, end)) == world.store.sound_between("q", start, end)
    assert len(in_time_order(state.recent.by_sensor(T0, T0 + timedelta(minutes=7)))) == 6 * 60 + 2


def test_a_bug_on_one_message_rejects_it_and_keeps_the_rest(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad_ts = T0 + timedelta(seconds=7)
    accept_sound = Pipeline._accept_sound

    def buggy(self: Pipeline, state: SiteState, levels: SoundLevels, *args: Any) -> None:
        if levels.ts == bad_ts:
            raise RuntimeError("a bug")
        accept_sound(self, state, levels, *args)

    monkeypatch.setattr(Pipeline, "_accept_sound", buggy)
    world.levels(T0, 20, 60.0)
    rejected = world.store.conn.execute("SELECT reason FROM rejections").fetchall()
    assert [r[0] for r in rejected] == ["internal error (RuntimeError); logged for the maintainers"]
    assert world.store.conn.execute("SELECT COUNT(*) FROM sound").fetchone()[0] == 19
    # Memory holds what the store holds, not the rolled-back reading.
    state = world.pipeline.sites["q"]
    window = (T0, T0 + timedelta(minutes=1))
    assert in_time_order(state.recent.by_sensor(*window)) == world.store.sound_between("q", *window)
    assert len(in_time_order(state.recent.by_sensor(*window))) == 19


def test_a_bug_taking_in_a_committed_batch_keeps_its_readings_and_the_rest_are_taken_in(
    world: World, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Taking in a usual batch runs after its COMMIT: a bug there loses nothing stored, is not
    counted as a duplicate on a retry, and leaves memory reading what the store holds."""
    bad_ts = T0 + timedelta(seconds=7)
    heard_from = Pipeline._heard_from

    def buggy(self: Pipeline, state: SiteState, sensor: str, ts: datetime, now: datetime) -> None:
        if ts == bad_ts:
            raise RuntimeError("a bug")
        heard_from(self, state, sensor, ts, now)

    monkeypatch.setattr(Pipeline, "_heard_from", buggy)
    world.levels(T0, 20, 60.0)
    assert world.count("SELECT COUNT(*) FROM sound") == 20
    assert world.count("SELECT COUNT(*) FROM rejections") == 0
    counters = world.pipeline.counters
    assert (counters.accepted, counters.duplicates, counters.rejected) == (20, 0, 0)
    assert "taking in the stored reading of q/n1 at 2026-06-15T17:00:07Z" in caplog.text
    state = world.pipeline.sites["q"]
    assert state.health["n1"].last_seen == T0 + timedelta(seconds=19)  # the rest were taken in
    window = (T0, T0 + timedelta(minutes=1))
    assert in_time_order(state.recent.by_sensor(*window)) == world.store.sound_between("q", *window)
    assert len(in_time_order(state.recent.by_sensor(*window))) == 20
    world.levels(T0 + timedelta(minutes=1), 6, 60.0)  # and the daemon goes on
    assert counters.accepted == 26


def test_a_usual_batch_is_taken_in_after_its_commit_and_one_that_writes_within_it(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The memory-only part of storing sound runs out of the write lock; when taking a batch
    in writes (a duplicate's conflict check, a sensor back online, an InfluxDB point in the
    outbox), it stays in the batch's transaction."""
    in_transaction: list[bool] = []
    take_in = Pipeline._take_in_sound

    def watched(self: Pipeline, *args: Any) -> None:
        in_transaction.append(self.store.conn.in_transaction)
        take_in(self, *args)

    monkeypatch.setattr(Pipeline, "_take_in_sound", watched)
    world.levels(T0, 5, 60.0)
    assert in_transaction == [False] * 5
    in_transaction.clear()
    world.levels(T0 + timedelta(seconds=4), 2, 61.0)  # one resent second, one new
    assert in_transaction == [True]  # the new one; the resent one is checked for a conflict
    assert world.pipeline.counters.duplicates == 1
    in_transaction.clear()
    world.advance(60)  # silent: offline
    assert not world.pipeline.sites["q"].health["n1"].online
    world.levels(world.now - timedelta(seconds=1), 1, 60.0)
    assert in_transaction == [True] and world.alerts("cleared")
    in_transaction.clear()
    made: list[str] = []
    world.pipeline.outbox_put = made.extend
    world.levels(world.now, 2, 60.0)
    assert in_transaction == [True, True] and len(made) == 2


def test_a_batch_of_sound_records_is_accepted_made_rows_and_chained_before_its_write_transaction(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two workers' drain is bound by the time each holds the store's write lock: a part of a
    batch that is all sound records is accepted (lateness, the pending list) and its rows made
    and chained (Store.stage_sounds) before BEGIN; inside, only the inserts. A part holding
    anything else is done in the transaction, as it comes."""
    seen: list[tuple[str, bool]] = []

    def watch(cls: type, name: str) -> None:
        original = getattr(cls, name)

        def watched(self: Any, *args: Any, **kwargs: Any) -> Any:
            store = self if isinstance(self, Store) else self.store
            seen.append((name, store.conn.in_transaction))
            return original(self, *args, **kwargs)

        monkeypatch.setattr(cls, name, watched)

    watch(Pipeline, "_accept_sound")
    watch(Store, "stage_sounds")
    watch(Store, "link_all")
    watch(Store, "_chain_sounds")
    watch(Store, "append_sounds")
    world.levels(T0, 3, 60.0)
    assert seen == [("_accept_sound", False)] * 3 + [
        ("stage_sounds", False),
        ("_chain_sounds", False),
        ("append_sounds", True),
    ]
    chain = world.store.conn.execute("SELECT seq, digest, head FROM chain WHERE site = 'q' ORDER BY seq")
    previous = GENESIS
    for seq, (number, digest, head) in enumerate(chain.fetchall(), start=1):
        assert (number, head) == (seq, next_head(previous, digest))
        previous = head
    seen.clear()
    heartbeat = SensorStatus("q", "n1", T0 + timedelta(seconds=3), battery_pct=80)
    sounds = [SoundLevels("q", "n1", T0 + timedelta(seconds=4), 1.0, 60.0, 61.0, 75.0)]
    world.pipeline.handle_batch([Inbound(*encode(m), 1, 1, 0.0) for m in [heartbeat, *sounds]])
    # the heartbeat chained, then the sound record accepted, stored and chained, all inside
    assert seen == [
        ("link_all", True),
        ("_accept_sound", True),
        ("append_sounds", True),
        ("_chain_sounds", True),
    ]


def test_a_site_that_stops_sending_is_judged_once_quiet_with_the_input_up(world: World) -> None:
    world.levels(T0, 60, 90.0)
    world.pipeline.set_input(False, 0)  # the broker is unreachable: it may still hold the data
    world.advance(120)
    world.quiet(QUIET_S + 1)
    world.advance(600)  # far past the lateness, in wall time: nothing is judged without the data
    assert world.findings() == []
    world.pipeline.set_input(True, 5)  # connected, messages in hand: not quiet yet
    world.quiet(QUIET_S + 1)
    world.advance(1)
    assert world.findings() == []
    world.pipeline.set_input(True, 0)
    world.quiet(QUIET_S + 1)  # connected, nothing in hand, nothing for the site: as complete as it gets
    world.advance(1)
    assert len(world.findings()) == 2  # the loud minute, and the next (its windows reach back into it)


def test_data_older_than_lateness_is_stored_marked_late_and_re_judges_its_minute(world: World) -> None:
    world.levels(T0, 5, 70.0)
    world.advance(900)
    world.levels(T0 + timedelta(minutes=14), 6, 60.0)  # the site's data has moved on 14 minutes
    world.advance(1)
    assert world.pipeline.sites["q"].evaluated_until == T0 + timedelta(minutes=14)
    assert world.findings() == []
    world.levels(T0 + timedelta(seconds=5), 55, 99.0)  # resent by the sensor 14 minutes late
    late = world.store.conn.execute("SELECT COUNT(*) FROM sound WHERE late = 1").fetchone()[0]
    assert late == 55 and world.pipeline.counters.late == 55
    world.advance(10)
    # Late, but judged with its data all the same: its minute, and the next (whose sliding
    # windows reach back into it).
    assert len(world.findings()) == 2


def test_a_backlog_read_in_order_is_not_late(world: World) -> None:
    """Fifteen minutes of data arriving at once, oldest first (a daemon outage): each minute
    is judged once with all its data, nothing is late, whatever the wall clock says."""
    world.levels(T0, 60, 60.0)
    world.advance(60 * 16)  # the daemon was away; the broker queued what follows
    for m in range(1, 15):
        world.levels(T0 + timedelta(minutes=m), 60, 90.0 if m in (3, 11) else 60.0)
        world.advance(0.5)
    world.levels(T0 + timedelta(minutes=15), 6, 60.0)
    world.advance(1)
    assert world.pipeline.counters.late == 0
    assert world.store.conn.execute("SELECT COUNT(*) FROM sound WHERE late = 1").fetchone()[0] == 0
    assert len(world.findings()) == 4  # minutes 3 and 11, and the next of each (windows reaching back)
    revisions = world.store.conn.execute("SELECT COUNT(*) FROM findings WHERE kind = 'violation'").fetchone()
    assert revisions[0] == 4  # each judged once, with all its seconds: no revision
    assert world.pipeline.sites["q"].evaluated_until == T0 + timedelta(minutes=15)


def test_far_future_is_rejected_with_reason(world: World) -> None:
    world.levels(T0 + timedelta(minutes=10), 1, 70.0)
    reasons = [b["reason"] for t, b in world.published if t.endswith("/rejected")]
    assert reasons == ["ts: 2026-06-15T17:10:00Z is 10.0 minutes in the future"]


def test_levels_decoded_ahead_in_the_network_thread_are_still_time_checked(world: World) -> None:
    """The network thread decodes levels without a clock; the pipeline checks the time."""
    soon = SoundLevels("q", "n1", T0, 1.0, 70.0, 71.0, 85.0)
    later = SoundLevels("q", "n1", T0 + timedelta(minutes=10), 1.0, 70.0, 71.0, 85.0)
    messages = []
    for record in (soon, later):
        topic, payload = encode(record)
        decoded = world.pipeline.predecode(topic, payload)
        assert decoded == record
        messages.append(Inbound(topic, payload, 1, 1, 0.0, decoded))
    world.pipeline.handle_batch(messages)
    reasons = [b["reason"] for t, b in world.published if t.endswith("/rejected")]
    assert reasons == ["ts: 2026-06-15T17:10:00Z is 10.0 minutes in the future"]
    assert world.store.sound_between("q", T0, T0 + timedelta(hours=1)) == [soon]


def test_sensor_offline_then_online_alerts_and_gap_recorded(world: World) -> None:
    world.levels(T0, 5, 60.0)
    world.advance(30)  # silent 25 s > 10 expected periods
    offline = world.alerts("sensor_offline")
    assert len(offline) == 1 and offline[0]["audiences"] == ["operator"]
    world.advance(700)  # offline longer than town_offline_alert_s: the town hears of it too
    town = [a for a in world.alerts("sensor_offline") if a["audiences"] == ["town"]]
    assert len(town) == 1
    world.levels(world.now - timedelta(seconds=2), 1, 60.0)
    back = world.alerts("cleared")
    assert back and "back online" in str(back[0]["message"]) and back[0]["audiences"] == ["operator", "town"]
    health = world.store.conn.execute("SELECT state, gap_s FROM health ORDER BY ts_us").fetchall()
    assert [h[0] for h in health] == ["offline", "online"]
    assert health[1][1] == pytest.approx(731, abs=5)  # the gap, in seconds, is evidence too


def test_clock_drift_alert_once(world: World) -> None:
    world.send(SensorStatus("q", "n1", T0, battery_pct=80, clock_offset_s=3.5))
    world.send(SensorStatus("q", "n1", T0 + timedelta(seconds=10), battery_pct=80, clock_offset_s=3.6))
    drift = world.alerts("clock_drift")
    assert len(drift) == 1 and "+3.5 s" in str(drift[0]["message"])


def test_calibration_drift_flagged(world: World) -> None:
    world.send(SensorStatus("q", "n1", T0, calibration_reference_db=94.0, calibration_measured_db=94.0))
    world.send(
        SensorStatus(
            "q", "n1", T0 + timedelta(seconds=5), calibration_reference_db=94.0, calibration_measured_db=94.7
        )
    )
    rows = world.store.conn.execute("SELECT flagged FROM calibration ORDER BY ts_us").fetchall()
    assert [r[0] for r in rows] == [0, 1]
    assert len(world.alerts("calibration_drift")) == 1


def test_violation_alerts_are_deduplicated(world: World) -> None:
    for minute in range(5):  # five loud minutes in a row: five findings, one alert
        world.levels(T0 + timedelta(minutes=minute), 60, 88.0)
        world.advance(60)
    world.levels(T0 + timedelta(minutes=5), 6, 60.0)
    world.advance(10)
    assert len(world.findings()) == 5
    assert len([a for a in world.alerts("violation") if "town" in cast(list[str], a["audiences"])]) == 1


def test_status_retained_and_status_command(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    world.levels(T0, 60, 72.0)
    world.advance(1)
    statuses = [b for t, b in world.published if t == "minewatch/q/status"]
    sensors = cast(dict[str, dict[str, float]], statuses[-1]["sensors"]) if statuses else {}
    assert sensors["n1"]["LAeq_1min"] == pytest.approx(72.0, abs=0.1)
    config = Path(world.config.storage.path).parent / "c.toml"
    config.write_text(config_text(world.config.storage.path))
    assert main(["status", "--config", str(config), "--at", format_ts(T0 + timedelta(seconds=61))]) == 0
    out = capsys.readouterr().out
    assert "n1" in out and "LAeq,1min 72.0 dB(A)" in out


def test_anchor_published(world: World) -> None:
    world.levels(T0, 3, 60.0)
    world.advance(1)
    anchors = [b for t, b in world.published if t == "minewatch/q/anchors"]
    assert anchors
    row = world.store.conn.execute(
        "SELECT head FROM chain WHERE site = 'q' AND seq = ?", (anchors[-1]["seq"],)
    )
    assert row.fetchone()[0] == anchors[-1]["head"]  # the head the town holds is in the chain


def test_readings_older_than_retention_are_pruned_but_the_chain_kept(world: World) -> None:
    world.levels(T0, 30, 70.0)
    world.advance(1)
    chained = world.store.conn.execute("SELECT COUNT(*) FROM chain WHERE kind = 'sound'").fetchone()[0]
    assert chained == 30
    world.pipeline.last_prune = world.now  # as if pruned just now; next prune an hour later
    world.now += timedelta(days=2)
    world.levels(world.now - timedelta(seconds=5), 1, 70.0)
    world.advance(1)
    remaining = world.store.conn.execute("SELECT COUNT(*) FROM sound").fetchone()[0]
    assert remaining == 1  # the two-day-old seconds are gone, the new one stays
    assert world.store.conn.execute("SELECT COUNT(*) FROM chain WHERE kind = 'sound'").fetchone()[0] == 31
    assert world.store.meta("pruned_before_us") is not None


def test_re_judging_a_minute_revises_its_finding_without_new_notices_or_alerts(world: World) -> None:
    def finding_alerts() -> list[tuple[str, int]]:
        rows = world.store.conn.execute(
            "SELECT kind, COUNT(*) FROM alerts WHERE kind NOT IN ('sensor_offline', 'cleared', 'anchor')"
            " GROUP BY kind ORDER BY kind"
        )
        return [(r[0], r[1]) for r in rows]

    minute = T0 + timedelta(minutes=1)
    world.advance(130)
    world.levels(minute, 40, 90.0)  # the minute is judged on 40 loud seconds ...
    world.levels(minute + timedelta(minutes=1), 6, 60.0)
    world.advance(1)
    assert len(world.findings()) == 1
    alerts = finding_alerts()
    assert ("violation", 1) in alerts and len(alerts) >= 2  # the violation and the notice it opened
    assert world.store.conn.execute("SELECT COUNT(*) FROM notices").fetchone()[0] == 1
    world.advance(700)  # longer than alerts.min_gap_s: the violation's alert condition has lapsed
    world.levels(minute + timedelta(seconds=40), 20, 99.0)  # ... then its last 20 s arrive
    world.advance(10)
    revisions = world.store.conn.execute("SELECT COUNT(*) FROM findings WHERE kind = 'violation'")
    assert len(world.findings()) == 1 and revisions.fetchone()[0] == 2  # one finding, revised
    assert finding_alerts() == alerts
    assert world.store.conn.execute("SELECT COUNT(*) FROM notices").fetchone()[0] == 1
    violations = [b for t, b in world.published if t.endswith("/violations")]
    assert len(violations) == 2 and len({str(v["id"]) for v in violations}) == 1


def test_data_clock_restart_continues_where_the_data_was(tmp_path: Path) -> None:
    """With clock = "data", a restart takes "now" from the stored data, not from the wall clock."""
    config = parse_config(config_text(tmp_path / "store.db") + "\n")
    config = replace(config, daemon=replace(config.daemon, clock="data"))
    past = datetime(2026, 1, 10, 3, 0, tzinfo=UTC)  # months behind the wall clock
    loud = {2, 5}

    def pipeline() -> tuple[Pipeline, Store]:
        store = Store(config.storage.path)
        return Pipeline(config, store, lambda t, p, r: None, Clock("data")), store

    def send(p: Pipeline, minutes: range) -> None:
        records = [
            SoundLevels(
                "q",
                "n1",
                past + timedelta(minutes=m, seconds=s),
                1.0,
                90.0 if m in loud else 60.0,
                91.0,
                105.0,
            )
            for m in minutes
            for s in range(60)
        ]
        p.handle_batch([Inbound(*encode(r), 1, 1, 0.0) for r in records])
        p.tick()

    first, store = pipeline()
    send(first, range(0, 4))
    assert first.sites["q"].evaluated_until == past + timedelta(minutes=3)
    store.close()  # stopped (as by SIGKILL: everything committed is in the store)
    second, store = pipeline()
    assert second.clock.data_now == past + timedelta(minutes=4)  # not the wall clock
    second.tick()  # before any message: nothing may move to the wall clock
    assert second.sites["q"].evaluated_until == past + timedelta(minutes=3)
    send(second, range(4, 8))
    violations = store.conn.execute(
        "SELECT (end_us - 1) / 60000000 * 60, COUNT(*) FROM findings WHERE kind = 'violation' GROUP BY id"
    ).fetchall()
    # Each loud minute and the next (its sliding windows reach back into the loud one), judged once.
    assert sorted((datetime.fromtimestamp(r[0], UTC), r[1]) for r in violations) == [
        (past + timedelta(minutes=m), 1) for n in sorted(loud) for m in (n, n + 1)
    ]
    assert store.conn.execute("SELECT COUNT(*) FROM sound WHERE late = 1").fetchone()[0] == 0
    store.close()


def test_a_restart_before_any_judging_was_recorded_judges_what_was_stored(tmp_path: Path) -> None:
    """Stored, then stopped before a tick recorded the site's progress (a stop a moment after the
    first start, or a store that refused that tick's write): the next pipeline judges from the
    first stored minute, not from the first reading it takes in itself."""
    config = parse_config(config_text(tmp_path / "store.db") + "\n")
    past = datetime(2026, 1, 10, 3, 0, tzinfo=UTC)
    clock = Clock("wall", lambda: past + timedelta(hours=1))  # a wall clock: no tick in a batch

    def batch(minutes: range, loud: int) -> list[Inbound]:
        return [
            Inbound(
                *encode(
                    SoundLevels("q", "n1", past + timedelta(minutes=m, seconds=s), 1.0, level, 91.0, 105.0)
                ),
                1,
                1,
                0.0,
            )
            for m in minutes
            for s in range(60)
            for level in [90.0 if m == loud else 60.0]
        ]

    store = Store(config.storage.path)
    first = Pipeline(config, store, lambda t, p, r: None, clock)
    first.handle_batch(batch(range(0, 3), loud=1))  # no tick: no progress recorded
    assert store.progress("q") is None
    store.close()
    store = Store(config.storage.path)
    assert store.first_data_start("q") == past
    second = Pipeline(config, store, lambda t, p, r: None, clock)
    assert second.sites["q"].evaluated_until == past
    second.handle_batch(batch(range(3, 6), loud=-1))
    second.tick()
    violations = store.conn.execute(
        "SELECT DISTINCT (end_us - 1) / 60000000 * 60 FROM findings WHERE kind = 'violation'"
    ).fetchall()
    assert sorted(datetime.fromtimestamp(r[0], UTC) for r in violations) == [
        past + timedelta(minutes=1),
        past + timedelta(minutes=2),
    ]
    store.close()


def test_newest_data_end_is_where_the_sites_data_had_got_to(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    assert store.newest_data_end("q", ["n1", "l1"]) is None
    with store.batch():
        store.append_sound(SoundLevels("q", "n1", T0, 1.0, 60, 61, 75), source="levels", late=False, now=T0)
        store.append_sound(
            SoundLevels("q", "n1", T0 - timedelta(hours=1), 1.0, 60, 61, 75),
            source="levels",
            late=False,
            now=T0,
        )
    assert store.newest_data_end("q", ["n1", "l1"]) == T0 + timedelta(seconds=1)
    light = LightSummary("q", "l1", T0 + timedelta(seconds=30), 10.0, 0.2, 0.1, 0.3)
    status = SensorStatus("q", "l1", T0 + timedelta(hours=1), battery_pct=80)  # a heartbeat is no data
    with store.batch():
        for reading in (light, status):
            store.append_reading(reading, payload_of(reading), late=False, now=T0)
    assert store.newest_data_end("q", ["n1", "l1"]) == T0 + timedelta(seconds=40)
    assert store.newest_data_end("other", ["n1", "l1"]) is None
    store.close()


def test_late_sound_re_judges_the_next_minute_whose_windows_reach_back_into_it(world: World) -> None:
    """A sliding noise window ending in minute M+1 reads the end of minute M: late seconds of M
    re-judge M+1 as well."""
    world.levels(T0, 20, 60.0)  # the last 40 s of the first minute are missing for now
    world.advance(60)
    for m in range(1, 6):
        world.levels(T0 + timedelta(minutes=m), 60, 60.0)
        world.advance(60)
    assert world.pipeline.sites["q"].evaluated_until is not None
    assert world.pipeline.sites["q"].evaluated_until > T0 + timedelta(minutes=2)
    assert world.findings() == []
    world.levels(T0 + timedelta(seconds=20), 40, 90.0)  # they arrive, loud
    world.advance(10)
    minutes = {
        r[0]
        for r in world.store.conn.execute(
            "SELECT DISTINCT (end_us - 1) / 60000000 FROM findings WHERE kind = 'violation'"
        )
    }
    t0 = int(T0.timestamp()) // 60
    assert minutes == {t0, t0 + 1}, minutes  # without the reach, only minute t0


def work_of_one_tick(tmp_path: Path, history_s: int, level: float) -> dict[str, int]:
    """After ``history_s`` seconds of meter n1 at ``level``, judged as they came: what the tick that
    judges the next minute does, counted, not timed.

    ``sqlite_steps``: the virtual-machine instructions SQLite runs for the tick (a read or write that
    scanned the history would grow with it; an index seek does not), the retained status aside;
    ``status_steps``: those of the retained status (every ``status_interval_s``, 60 s here: the
    counted tick is one that publishes it); ``judged``: the minute looks (rules.evaluate_site
    calls); ``handed``: the readings given to the rules over them (a spy around the real
    rules.evaluate_site); ``held``: the readings the site keeps in memory after the tick.
    """
    tmp_path.mkdir()
    world = World(tmp_path, config_text(tmp_path / "store.db"), T0)
    state = world.pipeline.sites["q"]
    handed: list[int] = []
    real = rules.evaluate_site

    def counted(*args: Any) -> list[Finding]:
        handed.append(len(args[2].sound))  # (context, profile, data, start, end, now)
        return real(*args)

    steps = {"tick": 0, "status": 0}
    counting = ["tick"]

    def step() -> int:
        steps[counting[0]] += 1
        return 0  # 0: go on

    real_status = world.pipeline.announcer.status

    def status(*args: Any) -> None:  # the real status, its instructions counted apart
        counting[0] = "status"
        try:
            real_status(*args)
        finally:
            counting[0] = "tick"

    try:
        for start in range(0, history_s + 60, 10):  # the history, judged as it comes; then one more minute
            world.now = T0 + timedelta(seconds=start + 10)
            world.levels(T0 + timedelta(seconds=start), 10, level)
            if start < history_s:
                world.pipeline.tick()
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(rules, "evaluate_site", counted)
            patch.setattr(world.pipeline.announcer, "status", status)
            world.store.conn.set_progress_handler(step, 1)
            world.pipeline.tick()
            world.store.conn.set_progress_handler(None, 1)
        held = len(state.recent)
        return {
            "sqlite_steps": steps["tick"],
            "status_steps": steps["status"],
            "judged": len(handed),
            "handed": sum(handed),
            "held": held,
        }
    finally:
        world.close()


def test_the_work_of_a_tick_is_bounded_by_the_new_data_not_the_history(tmp_path: Path) -> None:
    # The tick that judges a new minute does the same work after 200 or 2,000 seconds of a meter
    # (a backlog drained in order is such a run): the same SQLite instructions (no read or write of
    # the store scans what came before), the same minute looks and the same readings handed to the
    # rules (issue 31).
    short = work_of_one_tick(tmp_path / "short", 200, 55.0)
    long = work_of_one_tick(tmp_path / "long", 2000, 55.0)
    assert short == long, (short, long)
    assert long["judged"] == 2  # the new minute's first look and the previous minute's final one
    assert long["handed"] == 2 * 160  # each look: its minute with a minute either side, as far as data goes
    assert long["held"] == 200
    assert long["sqlite_steps"] > 0 and long["status_steps"] > 0  # the counted tick publishes the status


def test_the_rules_work_in_a_loud_tick_is_bounded_by_the_new_data_not_the_history(tmp_path: Path) -> None:
    # Loud: every minute is a violation. The rules judge the same looks and readings after 200 or
    # 2,000 seconds of it (the noise rule's windows are bisected to the minute's, issue 31).
    short = work_of_one_tick(tmp_path / "short", 200, 90.0)
    long = work_of_one_tick(tmp_path / "long", 2000, 90.0)
    assert {k: v for k, v in short.items() if not k.endswith("_steps")} == {
        k: v for k, v in long.items() if not k.endswith("_steps")
    }
    assert long["judged"] == 2 and long["handed"] == 2 * 160 and long["held"] == 200


def test_a_loud_tick_s_store_work_is_bounded_by_the_new_data_not_the_episode(tmp_path: Path) -> None:
    # Loud: one violation episode growing a minute each tick. Its notice is told from the facts
    # carried from the last minute plus the new finding (rules.episodes.EpisodeFold, kept in
    # notice_open_episodes), not from every finding of the episode read back (issue 31).
    short = work_of_one_tick(tmp_path / "short", 200, 90.0)
    long = work_of_one_tick(tmp_path / "long", 2000, 90.0)
    assert short["sqlite_steps"] == long["sqlite_steps"], (short, long)
    assert long["status_steps"] > 0  # the counted tick publishes the status, counted apart


def test_the_loud_status_s_store_work_is_bounded_by_the_new_data_not_the_episode(tmp_path: Path) -> None:
    # The retained status follows the site's findings in memory (monitor.daemon.status_findings):
    # it reads the finding rows stored since its last publish, not the 24 hours' back (issue 31).
    short = work_of_one_tick(tmp_path / "short", 200, 90.0)
    long = work_of_one_tick(tmp_path / "long", 2000, 90.0)
    assert short["status_steps"] == long["status_steps"], (short, long)
    assert long["status_steps"] > 0


def test_the_published_status_is_the_status_read_from_scratch(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every retained status the daemon publishes (its findings followed in memory) equals
    `site_status` read from scratch at the same time, as `minewatch status` and the portal read
    it: through quiet and loud minutes, late data that revises one finding and withdraws another,
    a rolled-back publish, a daemon restart on the same store and an episode sliding out of the
    24 hours."""
    # ts -> (the status the daemon computed, the status from scratch), as published (JSON). Kept,
    # not asserted here: the daemon logs an exception in its periodic work and goes on.
    computed: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}

    def compared(*args: Any, **kwargs: Any) -> dict[str, Any]:
        kept = site_status(*args, **kwargs)
        followed = kwargs.pop("findings")  # the daemon's path: its findings followed in memory
        fresh = json.loads(json.dumps(site_status(*args, **kwargs), default=str))
        computed[fresh["ts"]] = (json.loads(json.dumps(kept, default=str)), fresh if followed else {})
        return kept

    monkeypatch.setattr(announcer, "site_status", compared)

    def play(start_s: int, seconds: int, level: float) -> None:
        """Meter n1 at ``level`` for ``seconds`` from T0 + ``start_s``, 10 s a tick, as it comes."""
        for s in range(start_s, start_s + seconds, 10):
            world.levels(T0 + timedelta(seconds=s), min(10, start_s + seconds - s), level)
            world.now = T0 + timedelta(seconds=s + 10)
            world.pipeline.tick()

    play(0, 120, 55.0)
    play(120, 300, 90.0)  # minutes 2-6: an episode
    play(420, 20, 90.0)  # minute 7: its first 20 s now ...
    play(480, 30, 55.0)
    world.levels(T0 + timedelta(seconds=440), 40, 99.0)  # ... the rest late: the minute revised
    play(510, 30, 55.0)
    play(540, 10, 86.0)  # minute 9: 10 s loud, judged a violation on what is there ...
    play(600, 60, 55.0)
    world.levels(T0 + timedelta(seconds=550), 50, 30.0)  # ... the rest quiet, late: withdrawn
    play(660, 60, 55.0)
    anchor = world.pipeline.announcer.anchor
    failed: list[datetime] = []

    def fails_once(state: Any, now: datetime, interval_s: float) -> None:
        if not failed:
            failed.append(now)
            raise RuntimeError("the anchor failed: the tick's savepoint, status included, rolls back")
        anchor(state, now, interval_s)

    monkeypatch.setattr(world.pipeline.announcer, "anchor", fails_once)
    play(720, 120, 90.0)  # minutes 12-13: loud again
    followed = world.pipeline.announcer.status_findings["q"]
    assert failed and followed.loads == 2  # the first publish and the one after the rollback
    # A restart: a new daemon on the same store, its findings read once, then followed.
    world.pipeline = Pipeline(
        world.config,
        world.store,
        lambda t, p, r: world.published.append((t, json.loads(p))),
        Clock("wall", lambda: world.now),
    )
    play(840, 180, 90.0)  # minutes 14-16
    play(1020, 120, 55.0)
    for _ in range(24 * 6 - 4):  # a day without data, 10 minutes a tick
        world.advance(600)
    for _ in range(45):  # the episodes slide out of the 24 hours, a minute a tick
        world.advance(60)
    assert world.pipeline.announcer.status_findings["q"].loads == 1

    published = world.published_on("minewatch/q/status")
    assert [ts for ts, (kept, fresh) in computed.items() if kept != fresh] == []
    assert len(published) > 60 and all(body == computed[str(body["ts"])][1] for body in published)
    assert format_ts(failed[0]) in computed and format_ts(failed[0]) not in {b["ts"] for b in published}
    revised = world.count("SELECT COUNT(*) FROM findings WHERE revision > 1 AND retracted = 0")
    withdrawn = world.count("SELECT COUNT(*) FROM findings WHERE retracted = 1")
    assert revised >= 1 and withdrawn >= 1, (revised, withdrawn)
    straddling = [
        b
        for b in published
        for e in cast(list[dict[str, str]], b["episodes_24h"])
        if e["start"] < format_ts(stored_time(str(b["ts"])) - timedelta(hours=24)) < e["end"]
    ]
    assert straddling  # an episode told whole across the 24 hours' edge
    assert published[-1]["episodes_24h"] == [] and published[-1]["findings_24h"] == {}


def test_a_site_whose_periodic_work_fails_every_tick_is_logged_once_then_said_when_it_works(
    world: World, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A record the tick could not read failed every tick: a traceback a second in the journal.
    Now the first failure with its traceback, reminders every 10 minutes, and its end."""
    world.levels(T0, 120, 60.0)
    world.advance(1)
    broken = RuntimeError("a record it cannot read")

    def fail(*_: object) -> None:
        raise broken

    monkeypatch.setattr(world.pipeline.announcer, "status", fail)
    with caplog.at_level("WARNING", "minewatch.pipeline"):
        for _ in range(30):
            world.advance(1)
        monkeypatch.undo()
        world.advance(1)
    said = [(r.levelname, r.getMessage(), r.exc_info is not None) for r in caplog.records]
    site = next(iter(world.pipeline.sites))
    assert [(level, traced) for level, _, traced in said] == [("ERROR", True), ("WARNING", False)], said
    assert said[0][1] == f"Periodic work for site {site!r} failed: {broken} (tried again every round)"
    assert said[1][1].startswith(f"Periodic work for site {site!r} works again, after ")


def test_a_flood_of_bad_messages_is_journaled_whole_and_published_60_a_minute(world: World) -> None:
    """300,000 bad messages from one sensor filled the MQTT client's queue with …/rejected, and
    the violations and alerts of that minute were never published. Every rejection is journaled;
    …/rejected carries 60 a minute per sender, the next one saying how many were held back."""
    from monitor.daemon.rejections import PUBLISHED_PER_MINUTE, LogGate

    clock = [0.0]
    world.pipeline.publish_gate = LogGate(PUBLISHED_PER_MINUTE, clock=lambda: clock[0])
    bad = [("minewatch/q/sensors/n1/levels", b'{"ts":"x%d"}' % i) for i in range(200)]
    world.send_raw(*bad)
    world.send_raw(("minewatch/q/sensors/n9/levels", b"{}"))  # another sender: a gate of its own
    assert world.count("SELECT COUNT(*) FROM rejections") == 201
    published = world.published_on("minewatch/q/rejected")
    assert len(published) == 61 and not any("held_back" in p for p in published)
    clock[0] = 60.0
    world.send_raw(bad[0])
    last = world.published_on("minewatch/q/rejected")[-1]
    assert last["held_back"] == 140 and last["topic"] == "minewatch/q/sensors/n1/levels"


def test_a_notice_nobody_closes_is_reminded_of_on_the_ticks(world: World) -> None:
    """The daemon's tick reminds the operator as the cure deadline nears and tells the Town once
    it has passed (NoticeBook.remind); each alert and `…/notices` message goes out once."""
    for minute in range(2):
        world.levels(T0 + timedelta(minutes=minute), 60, 88.0)
        world.advance(60)
    world.levels(T0 + timedelta(minutes=2), 6, 60.0)
    world.advance(10)
    [opened] = world.alerts("notice_opened")
    notice_id = str(opened["data"]["notice_id"])  # type: ignore[index]
    # Issued 15 June (CDT): the deadline is the end of 29 June; reminded from 26 June.
    world.now = datetime(2026, 6, 26, 5, 0, tzinfo=UTC)  # 00:00 CDT
    world.advance(1)
    world.advance(1)
    [near] = world.alerts("notice_deadline_near")
    assert near["audiences"] == ["operator"]
    assert "the cure deadline is 2026-06-29 23:59 CDT, in 3 days" in str(near["message"])
    world.now = datetime(2026, 6, 30, 5, 0, 1, tzinfo=UTC)
    world.advance(1)
    world.advance(1)
    [passed] = world.alerts("notice_deadline_passed")
    assert passed["audiences"] == ["town", "operator"]
    changes = [m["change"] for m in world.published_on("minewatch/q/notices")]
    assert changes == ["opened", "deadline_near", "deadline_passed"]
    assert world.count(f"SELECT count(*) FROM notice_changes WHERE notice_id = '{notice_id}'") == 3


def test_each_hour_of_sound_is_counted_once_the_data_has_moved_on(world: World) -> None:
    """The hourly histograms the week and month views read (sound_hours) are counted by the
    daemon as each hour of a site's data ends (Store.keep_sound_hours), not second by second;
    a late second into a counted hour is counted by the store's triggers."""

    def kept() -> tuple[int, int]:
        hour = world.count("SELECT until_hour FROM sound_hours_kept WHERE site = 'q'")
        return hour - to_us(T0) // 3_600_000_000, world.count("SELECT SUM(n) FROM sound_hours")

    world.levels(T0 - timedelta(minutes=2), 120, 60.0)  # 16:58-17:00 UTC
    world.advance(1)
    assert kept() == (0, 120)  # the hour before the one the data reached
    world.advance(180)
    world.levels(T0, 180, 60.0)  # 17:00-17:03: the hour still receiving seconds
    world.levels(T0 - timedelta(seconds=30), 1, 95.0)  # a resend (a conflict): not counted again
    world.advance(1)
    assert kept() == (0, 120)
    world.advance(3600)
    world.levels(T0 + timedelta(hours=1), 1, 60.0)  # the data moves into 18:00
    world.advance(1)
    assert kept() == (1, 300)
    world.levels(T0 + timedelta(minutes=30), 1, 70.0)  # late, into a counted hour: the triggers
    world.advance(1)
    assert kept() == (1, 301)
    seconds = world.store.conn.execute(
        "SELECT COUNT(*) FROM sound WHERE ts_us < ?", (to_us(T0) + 3_600_000_000,)
    )
    assert seconds.fetchone()[0] == 301  # the seconds before 18:00, each counted once


def test_a_failing_count_of_the_hourly_levels_leaves_judging_alone(
    world: World, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The hourly histograms are derived (the week and month views read them): counting them
    failing is logged once, and the minutes are judged and recorded as ever."""

    def broken(site: str, until_hour: int) -> int:
        raise sqlite3.IntegrityError("UNIQUE constraint failed: sound_hours.site")

    monkeypatch.setattr(world.store, "keep_sound_hours", broken)
    world.levels(T0, 60, 90.0)  # a loud minute
    world.advance(70)
    world.levels(T0 + timedelta(minutes=1), 6, 60.0)
    world.advance(1)
    world.advance(1)
    assert world.pipeline.sites["q"].evaluated_until == T0 + timedelta(minutes=1)
    assert len(world.findings()) == 1
    failures = [r for r in caplog.records if "Counting the hourly sound levels" in r.getMessage()]
    assert len(failures) == 1 and "UNIQUE constraint failed" in failures[0].getMessage()
    assert world.count("SELECT COUNT(*) FROM sound_hours_kept") == 0
