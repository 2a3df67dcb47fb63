"""Hostile and contradictory input at the pipeline and through the daemon (issue 16).

In process: the pipeline with a controlled clock and a real SQLite store, its publishes
recorded in a list. Through the daemon: `minewatch run` against a real Mosquitto.
"""

from __future__ import annotations

import gc
import json
import logging
import sqlite3
import tracemalloc
import zipfile
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from monitor.cli import main
from monitor.config import load_config
from monitor.daemon.pipeline import MAX_REASON_KEYS
from monitor.daemon.rejections import MAX_GATES_PER_SENSOR, MAX_LOG_GATES
from monitor.evidence import export_bundle, load_anchors, verify_bundle
from monitor.journal.store import Store, digest_of, sound_record, to_us
from monitor.wire.codec import AudioBlock, encode
from monitor.wire.protocol import format_ts
from rules.model import LightSummary, SoundLevels
from tests.support.configs import quarry_config, sensor
from tests.support.daemon import Client, Daemon, store_count, wait_until, write_config
from tests.support.pipeline_world import World
from tests.support.servers import Mosquitto

T0 = datetime(2026, 6, 15, 17, 0, tzinfo=UTC)


def config_text(store: str | Path) -> str:
    sensors = [sensor("n1", "sound"), sensor("l1", "light")]
    return quarry_config(store, daemon={"lateness_s": 300}, sensors=sensors)


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    w = World(tmp_path, config_text(tmp_path / "store.db"), T0)
    yield w
    w.close()


LEVELS = {"ts": format_ts(T0), "duration_s": 1.0, "LAeq": 60.0, "LAFmax": 61.0, "LCpeak": 75.0}


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


# --------------------------------------------------------------------------- unknown sensors


def test_a_thousand_invented_sensor_names_make_one_log_line(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="minewatch.pipeline")
    body = json.dumps(LEVELS).encode()
    world.send_raw(*[(f"minewatch/q/sensors/fake{i}/levels", body) for i in range(1000)])
    assert world.pipeline.counters.rejected == 1000
    assert world.count("SELECT COUNT(*) FROM rejections WHERE site = 'q'") == 1000  # all journaled
    lines = warnings(caplog)
    assert len(lines) == 1, lines
    assert "sensor fake0: not configured for site q" in lines[0] and "of site q" in lines[0]
    assert len(world.pipeline.log_gate) == 1  # one key for the site, not one per name
    # A configured sensor's own rejections keep their own line.
    world.send_raw(("minewatch/q/sensors/n1/levels", json.dumps({**LEVELS, "LAeq": "x"}).encode()))
    assert len(warnings(caplog)) == 2 and "LAeq: not a number" in warnings(caplog)[1]


def test_log_gate_and_reason_tables_stay_bounded(world: World, caplog: pytest.LogCaptureFixture) -> None:
    """Field names come from the payload: a configured sensor sending ever new unknown
    fields must not grow the pipeline's tables, nor the log, without end."""
    caplog.set_level(logging.WARNING, logger="minewatch.pipeline")
    messages = [
        ("minewatch/q/sensors/n1/levels", json.dumps({**LEVELS, f"f{i}": 1}).encode())
        for i in range(MAX_LOG_GATES + 500)
    ]
    world.send_raw(*messages)
    assert world.pipeline.counters.rejected == len(messages)
    assert len(world.pipeline.log_gate) <= MAX_LOG_GATES
    assert len(world.pipeline.counters.by_reason) <= MAX_REASON_KEYS + 1
    assert sum(world.pipeline.counters.by_reason.values()) == len(messages)
    assert len(warnings(caplog)) == MAX_GATES_PER_SENSOR + 1  # the first reasons, then one shared line


def test_gates_open_again_after_a_minute_and_the_table_is_capped(
    world: World, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.WARNING, logger="minewatch.pipeline")
    wall = [1000.0]
    monkeypatch.setattr("monitor.daemon.pipeline.time.monotonic", lambda: wall[0])
    body = json.dumps(LEVELS).encode()
    world.send_raw(*[(f"minewatch/q/sensors/fake{i}/levels", body) for i in range(5)])
    wall[0] += 61
    world.send_raw(("minewatch/q/sensors/other/levels", body))
    lines = warnings(caplog)
    assert len(lines) == 2 and "(4 more like it in the last minute not logged)" in lines[1]
    # Past MAX_LOG_GATES live keys, new ones share their site's key; expired keys are dropped.
    monkeypatch.setattr("monitor.daemon.rejections.MAX_LOG_GATES", 4)
    monkeypatch.setattr("monitor.daemon.rejections.MAX_GATES_PER_SENSOR", 100)
    bad = [("minewatch/q/sensors/n1/levels", json.dumps({**LEVELS, f"f{i}": 1}).encode()) for i in range(10)]
    world.send_raw(*bad)
    assert len(world.pipeline.log_gate) <= 5
    wall[0] += 61
    world.send_raw(("minewatch/q/sensors/n1/levels", json.dumps({**LEVELS, "g": 1}).encode()))
    assert list(world.pipeline.log_gate) == [("q", "n1", "g")]


def test_hostile_times_through_the_pipeline_leave_no_memory_behind(world: World) -> None:
    """150 levels messages whose ts is a valid time after ~1 MB of spaces (the reported
    attack) are refused on their size, and as many light messages (no small cap) on their
    time; nothing of them stays allocated, not even until the cyclic collector runs: the
    daemon runs it rarely (monitor/process_settings.py), so the memory is measured before it."""
    padded = [" " * (1_000_000 + i) + format_ts(T0) for i in range(150)]
    light = {"duration_s": 10.0, "lux_mean": 1.0, "lux_min": 1.0, "lux_max": 1.0}
    messages = [("minewatch/q/sensors/n1/levels", json.dumps({**LEVELS, "ts": ts}).encode()) for ts in padded]
    messages += [("minewatch/q/sensors/l1/light", json.dumps({**light, "ts": ts}).encode()) for ts in padded]
    world.send_raw(messages[0], messages[-1])  # warm up the statements
    gc.collect()
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        for i in range(1, 149):  # batches of both kinds, as the handoff delivers them
            world.send_raw(messages[i], messages[150 + i])
        world.published.clear()
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert world.count("SELECT COUNT(*) FROM sound") == 0
    rows = world.store.conn.execute("SELECT topic, reason FROM rejections").fetchall()
    assert len(rows) == 2 + 2 * 148
    levels = [r for t, r in rows if t.endswith("/levels")]
    assert all(
        r.startswith("payload: ") and r.endswith("4096-byte limit of a levels message") for r in levels
    )
    times = [r for t, r in rows if t.endswith("/light")]
    assert all(r.startswith("ts: ") and "is not an RFC 3339 time" in r and len(r) < 200 for r in times)
    # Was ~117 MB (each padded text kept as a cache key), then ~2 MB a batch (the batch held
    # by its rejections' tracebacks until the cyclic collector ran).
    assert after - before < 1_000_000


# --------------------------------------------------------------------------- topics of the wrong shape


def test_rejections_of_wrong_shaped_topics_are_published(world: World) -> None:
    body = json.dumps(LEVELS).encode()
    world.send_raw(
        ("minewatch/q/sensors/n1", body),  # a configured site's topic, wrong shape
        ("minewatch/q/sensors/n1/levels/extra", body),
        ("minewatch/q/whatever", body),
        ("minewatch/elsewhere/sensors/n1/levels", body),  # no configured site
        ("other/q/sensors/n1/levels", body),
    )
    own = world.published_on("minewatch/q/rejected")
    assert [b["topic"] for b in own] == [
        "minewatch/q/sensors/n1",
        "minewatch/q/sensors/n1/levels/extra",
        "minewatch/q/whatever",
    ]
    assert all("is not a minewatch topic" in str(b["reason"]) for b in own)
    unattributed = world.published_on("minewatch/_/rejected")
    assert [b["topic"] for b in unattributed] == [
        "minewatch/elsewhere/sensors/n1/levels",
        "other/q/sensors/n1/levels",
    ]
    assert set(unattributed[0]) == {"ts", "topic", "reason", "excerpt"}  # the …/rejected payload
    sites = [r[0] for r in world.store.conn.execute("SELECT site FROM rejections ORDER BY id")]
    assert sites == ["q", "q", "q", "*", "*"]


# --------------------------------------------------------------------------- conflicting resends


def test_a_resend_with_other_values_is_kept_first_and_journaled(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="minewatch.pipeline")
    first = SoundLevels("q", "n1", T0, 1.0, 60.0, 61.0, 75.0)
    world.send(first)
    world.send(first)  # a true duplicate: nothing journaled
    assert world.count("SELECT COUNT(*) FROM conflicts") == 0
    other = SoundLevels("q", "n1", T0, 1.0, 95.0, 96.0, 110.0)
    world.send(other)
    world.send(other)  # the same second version again: counted, journaled once
    assert world.store.sound_between("q", T0, T0 + timedelta(seconds=1)) == [first]
    [row] = world.store.conn.execute("SELECT * FROM conflicts").fetchall()
    kept = world.store.conn.execute(
        "SELECT s.*, c.digest FROM sound s JOIN chain c ON c.site = s.site AND c.seq = s.chain_seq"
    ).fetchone()
    resent = {**dict(kept), "LAeq": 95.0, "LAFmax": 96.0, "LCpeak": 110.0}
    assert (row["sensor"], row["kind"], row["ts_us"]) == ("n1", "sound", to_us(T0))
    assert row["first_digest"] == kept["digest"] == digest_of(sound_record(kept))
    assert row["second_digest"] == digest_of(sound_record(resent))
    # ... as a record of the chain
    [entry] = world.store.conn.execute("SELECT * FROM chain WHERE kind = 'conflict'").fetchall()
    assert entry["key"] == f"n1|sound|{to_us(T0)}|{row['second_digest']}"
    c = world.pipeline.counters
    assert (c.duplicates, c.conflicts) == (3, 2)
    assert [line for line in warnings(caplog) if "other content" in line] == [
        "Sensor q/n1 resent its sound of 2026-06-15T17:00:00Z with other content: the first is kept,"
        " the conflict journaled"
    ]


def test_conflicting_light_and_audio_resends_are_journaled(world: World) -> None:
    light = LightSummary("q", "l1", T0, 10.0, 1.0, 0.5, 2.0)
    world.send(light, light)
    world.send(LightSummary("q", "l1", T0, 10.0, 5.0, 0.5, 9.0))
    pcm = (0.1 * np.sin(np.arange(1600) / 3)).astype("<f4")
    block = AudioBlock("q", "n1", T0 + timedelta(seconds=30), 1, 16000, "f32le", pcm.tobytes())
    world.send(block, block)
    world.send(AudioBlock("q", "n1", block.ts, 1, 16000, "f32le", (pcm * 2).tobytes()))
    kinds = [r[0] for r in world.store.conn.execute("SELECT kind FROM conflicts ORDER BY kind")]
    assert kinds == ["audio", "light"]
    assert world.store.conflict_counts("q") == {"l1": 1, "n1": 1}
    # Within one batch (the kept one's chain entry not yet written): found all the same.
    later = T0 + timedelta(minutes=1)
    world.send(
        LightSummary("q", "l1", later, 10.0, 1.0, 0.5, 2.0),
        LightSummary("q", "l1", later, 10.0, 3.0, 0.5, 4.0),
    )
    other = AudioBlock("q", "n1", later, 2, 16000, "f32le", pcm.tobytes())
    world.send(other, AudioBlock("q", "n1", later, 2, 16000, "f32le", (pcm / 2).tobytes()))
    world.send(
        SoundLevels("q", "n1", later, 1.0, 60.0, 61.0, 75.0),
        SoundLevels("q", "n1", later, 1.0, 61.0, 62.0, 75.0),
    )
    assert world.store.conflict_counts("q") == {"l1": 2, "n1": 3}
    # ... and the digests are those the chain holds for the kept records.
    for kind, key, table, where in [
        ("reading", f"l1|light|{to_us(later)}", "conflicts", "kind = 'light'"),
        ("audio", f"n1|{to_us(later)}", "conflicts", "kind = 'audio'"),
    ]:
        chained = world.store.conn.execute(
            "SELECT digest FROM chain WHERE kind = ? AND key = ?", (kind, key)
        ).fetchone()[0]
        firsts = [r[0] for r in world.store.conn.execute(f"SELECT first_digest FROM {table} WHERE {where}")]
        assert chained in firsts


def test_an_audio_seq_past_the_stores_integers_is_refused_by_its_field(world: World) -> None:
    """seq 2**63 passed the codec's bound and ended in the store: 'internal error (OverflowError)'."""
    pcm = np.zeros(1600, dtype="<f4").tobytes()
    world.send_raw(encode(AudioBlock("q", "n1", T0, 2**63, 16000, "f32le", pcm)))
    [refused] = [b["reason"] for b in world.published_on("minewatch/q/rejected")]
    assert refused == "seq: 9223372036854775808 is above the plausible maximum 9007199254740991"
    assert world.store.conn.execute("SELECT COUNT(*) FROM audio").fetchone()[0] == 0


def test_status_shows_conflicts_per_sensor(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    world.send(SoundLevels("q", "n1", T0, 1.0, 60.0, 61.0, 75.0))
    for level in (70.0, 80.0):
        world.send(SoundLevels("q", "n1", T0, 1.0, level, level + 1, level + 15))
    world.store.close()
    world.store = Store(world.config.storage.path)
    at = format_ts(T0 + timedelta(seconds=30))
    assert main(["status", "--config", str(world.config_path), "--at", at]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line for line in lines if "conflicts" in line and "n1" in line] != []
    assert not [line for line in lines if "conflicts" in line and "l1" in line]
    assert main(["status", "--config", str(world.config_path), "--at", at, "--format", "json"]) == 0
    [status] = json.loads(capsys.readouterr().out)
    assert status["sensors"]["n1"]["conflicts"] == 2 and status["sensors"]["l1"]["conflicts"] == 0


# --------------------------------------------------------------------------- through the daemon


def test_daemon_publishes_wrong_shaped_rejections_and_journals_conflicts(
    tmp_path: Path, mosquitto: Mosquitto, capsys: pytest.CaptureFixture[str]
) -> None:
    """The town, subscribed to every …/rejected, sees a topic of the wrong shape rejected; a
    reading resent with other values is kept first, journaled, shown by `minewatch status`,
    and exported and verified with its bundle (`minewatch evidence`, `minewatch verify`)."""
    config_path = write_config(tmp_path / "minewatch.toml", mosquitto.url)
    config_path.write_text(config_path.read_text().replace("anchor_interval_s = 30", "anchor_interval_s = 1"))
    store = tmp_path / "store.db"
    daemon = Daemon(config_path).start()
    daemon.wait_ready()
    town = Client(mosquitto.port, "town", ("minewatch/+/rejected", "minewatch/quarry/anchors"))
    pub = Client(mosquitto.port, "publisher")
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=3)
    try:
        for s in range(10):
            pub.publish(
                *encode(SoundLevels("quarry", "n1", start + timedelta(seconds=s), 1.0, 60.0, 61.0, 75.0))
            )
        assert wait_until(lambda: store_count(store, "SELECT COUNT(*) FROM sound") == 10, 30), daemon.logs()
        pub.publish(*encode(SoundLevels("quarry", "n1", start + timedelta(seconds=4), 1.0, 88.0, 89.0, 99.0)))
        pub.publish(*encode(SoundLevels("quarry", "n1", start + timedelta(seconds=5), 1.0, 60.0, 61.0, 75.0)))
        pub.publish("minewatch/quarry/sensors/n1", json.dumps(LEVELS).encode())
        assert wait_until(lambda: town.received("/rejected") != [], 15), daemon.logs()
        [rejection] = [(t, json.loads(p)) for t, p in town.messages if t.endswith("/rejected")]
        assert rejection[0] == "minewatch/quarry/rejected"
        assert rejection[1]["topic"] == "minewatch/quarry/sensors/n1"
        assert "is not a minewatch topic" in str(rejection[1]["reason"])
        assert wait_until(lambda: store_count(store, "SELECT COUNT(*) FROM conflicts") == 1, 15), (
            daemon.logs()
        )
        assert store_count(store, "SELECT COUNT(*) FROM sound WHERE LAeq = 60.0") == 10  # the first kept
        chained = store_count(store, "SELECT MAX(seq) FROM chain WHERE site = 'quarry'")
        anchored = lambda: any(int(str(a["seq"])) >= chained for a in town.received("/anchors"))  # noqa: E731
        assert wait_until(anchored, 30), daemon.logs()
        assert "resent its sound of" in daemon.logs()
    finally:
        code = daemon.stop()
        pub.close()
        town.close()
    assert code == 0, daemon.logs()

    assert main(["status", "--config", str(config_path), "--format", "json"]) == 0
    [status] = json.loads(capsys.readouterr().out)
    assert status["sensors"]["n1"]["conflicts"] == 1 and status["sensors"]["n2"]["conflicts"] == 0

    anchors = tmp_path / "town.json"
    anchors.write_text(json.dumps(town.received("/anchors")))
    bundle = tmp_path / "bundle.zip"
    window = ["--from", format_ts(start), "--to", format_ts(start + timedelta(seconds=10))]
    args = ["evidence", "--config", str(config_path), "--site", "quarry", *window, "--no-plots"]
    assert main([*args, "--out", str(bundle)]) == 0
    capsys.readouterr()
    with zipfile.ZipFile(bundle) as zf:
        [conflict] = json.loads(zf.read("records/conflicts.json"))
        chain = zf.read("chain.csv").decode()
    conn = sqlite3.connect(store)
    conn.row_factory = sqlite3.Row
    kept = conn.execute(
        "SELECT s.*, c.digest FROM sound s JOIN chain c ON c.site = s.site AND c.seq = s.chain_seq"
        " WHERE s.ts_us = ?",
        (to_us(start + timedelta(seconds=4)),),
    ).fetchone()
    conn.close()
    assert conflict["row"]["first_digest"] == kept["digest"]
    assert conflict["row"]["second_digest"] == digest_of(
        sound_record({**dict(kept), "LAeq": 88.0, "LAFmax": 89.0, "LCpeak": 99.0})
    )
    assert f",conflict,{conflict['key']}," in chain
    assert main(["verify", str(bundle), "--anchors", str(anchors)]) == 0, capsys.readouterr().out
    assert main(["verify", str(bundle)]) == 0, capsys.readouterr().out
    # The conflict is checked like every record: its digests edited in the bundle fail verify.
    forged = tmp_path / "forged.zip"
    with zipfile.ZipFile(bundle) as src, zipfile.ZipFile(forged, "w") as dst:
        for item in src.infolist():
            data = src.read(item.filename)
            if item.filename == "records/conflicts.json":
                data = data.replace(conflict["row"]["second_digest"].encode(), b"0" * 64)
            dst.writestr(item, data)
    report = verify_bundle(forged, load_anchors(anchors))
    assert not report.ok
    assert any("conflicts.json" in p.message or "conflict" in p.message for p in report.problems)
    # Exported in process too, the same way (the API the CLI calls).
    again = tmp_path / "again.zip"
    config = load_config(config_path)
    export_bundle(config, "quarry", start, start + timedelta(seconds=10), again, plots=False)
    assert verify_bundle(again, load_anchors(anchors)).ok
