"""The daemon end to end, against a real Mosquitto and a real influxd (fixtures start both)."""

from __future__ import annotations

import json
import random
import signal
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from monitor.cli import main
from monitor.influx.forwarder_record import STOPPED
from monitor.wire.codec import AudioBlock, encode
from monitor.wire.protocol import format_ts
from rules.model import SoundLevels
from tests.support.daemon import Client, Daemon, store_count, wait_until, write_config
from tests.support.servers import Influxd, Mosquitto

SITE = "quarry"


def recent_minute(minutes_ago: int = 3) -> datetime:
    return datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=minutes_ago)


def levels(sensor: str, ts: datetime, laeq: float) -> tuple[str, bytes]:
    return encode(
        SoundLevels(SITE, sensor, ts, 1.0, laeq, laeq + 1.5, laeq + 15, LASmax=laeq + 1, LZpeak=laeq + 18)
    )


def test_end_to_end(tmp_path: Path, mosquitto: Mosquitto, influxd: Influxd) -> None:
    influx = (
        f'[storage.influxdb]\nversion = 1\nurl = "{influxd.url}"\n'
        'database = "minewatch"\nflush_interval_s = 0.2'
    )
    config = write_config(tmp_path / "minewatch.toml", mosquitto.url, influx=influx)
    store = tmp_path / "store.db"
    daemon = Daemon(config).start()
    daemon.wait_ready()
    watcher = Client(mosquitto.port, "watcher", (f"minewatch/{SITE}/#",))
    pub = Client(mosquitto.port, "publisher")
    try:
        minute = recent_minute(3)
        # A violating minute at n2: 85 dB(A) for 60 s (no exemption applies).
        for s in range(60):
            pub.publish(*levels("n2", minute + timedelta(seconds=s), 85.0))
        # A quiet minute at n1.
        for s in range(60):
            pub.publish(*levels("n1", minute + timedelta(seconds=s), 60.0))
        # Raw audio for n1 in the next minute: 2 s of a 1 kHz tone.
        fs = 16000
        t = np.arange(2 * fs) / fs
        pcm = (0.1 * np.sin(2 * np.pi * 1000 * t) * 32767).astype("<i2")
        start = minute + timedelta(minutes=1)
        for i in range(2):
            block = AudioBlock(
                SITE, "n1", start + timedelta(seconds=i), i, fs, "s16le", pcm[i * fs : (i + 1) * fs].tobytes()
            )
            pub.publish(*encode(block))
        pub.publish(
            f"minewatch/{SITE}/sensors/l1/light",
            {"ts": format_ts(minute), "duration_s": 10, "lux_mean": 0.2, "lux_min": 0.1, "lux_max": 0.3},
        )
        pub.publish(
            f"minewatch/{SITE}/sensors/wx/weather",
            {"ts": format_ts(minute), "wind_speed_ms": 2.0, "rain": False},
        )
        pub.publish(
            f"minewatch/{SITE}/events/truck",
            {"id": "t1", "ts": format_ts(minute + timedelta(seconds=30)), "gate": "g1", "direction": "in"},
        )
        pub.publish(
            f"minewatch/{SITE}/sensors/n1/levels",
            {"ts": format_ts(minute), "duration_s": 1, "LAeq": "loud", "LAFmax": 70, "LCpeak": 90},
        )

        assert wait_until(lambda: store_count(store, "SELECT COUNT(*) FROM sound") >= 122, 30), daemon.logs()
        assert store_count(store, "SELECT COUNT(*) FROM sound WHERE source = 'audio'") == 2
        # Published after the audio, they may come in the daemon's next batch: waited for too.
        assert wait_until(lambda: store_count(store, "SELECT COUNT(*) FROM readings") == 2, 10)
        assert wait_until(lambda: store_count(store, "SELECT COUNT(*) FROM events") == 1, 10)
        assert wait_until(lambda: store_count(store, "SELECT COUNT(*) FROM rejections") == 1, 10)
        assert wait_until(lambda: watcher.received("/violations") != [], 30), daemon.logs()
        violation = watcher.received("/violations")[0]
        assert violation["standard"] == "noise" and violation["sensors"] == ["n2"]
        assert violation["section"] == "6.D"
        # The violation episode opened a notice of violation (section 13.3.A), announced on …/notices.
        assert wait_until(lambda: watcher.received("/notices") != [], 15), daemon.logs()
        notice = watcher.received("/notices")[0]
        assert str(notice["notice_id"]).startswith("DOV-") and notice["change"] == "opened"
        assert store_count(store, "SELECT COUNT(*) FROM notices WHERE status = 'open'") == 1
        rejected = watcher.received("/rejected")
        assert rejected and rejected[0]["reason"] == "LAeq: not a number"
        assert wait_until(lambda: influxd.count("minewatch", "sound", "LAeq") >= 122, 30), daemon.logs()
        assert influxd.count("minewatch", "light", "lux_mean") == 1
        assert wait_until(lambda: influxd.count("minewatch", "findings", "summary") >= 1, 10)
        assert wait_until(lambda: watcher.received("/status") != [], 15)
        # The audio path went through acoustics: a 0.1 FS tone at 120 dB full scale reads ~100 dB(A).
        audio_laeq = store_count(store, "SELECT CAST(ROUND(LAeq) AS INTEGER) FROM sound WHERE source='audio'")
        assert 99 <= audio_laeq <= 101
        assert daemon.alive()
    finally:
        code = daemon.stop()
        watcher.close()
        pub.close()
    assert code == 0, daemon.logs()


def test_sigkill_and_restart_lose_nothing(tmp_path: Path, mosquitto: Mosquitto) -> None:
    config = write_config(tmp_path / "minewatch.toml", mosquitto.url)
    store = tmp_path / "store.db"
    daemon = Daemon(config).start()
    daemon.wait_ready()
    pub = Client(mosquitto.port, "publisher")
    try:
        assert wait_until(lambda: store.exists(), 10)
        base = recent_minute(30)
        total = 3000
        for i in range(total):
            pub.publish(*levels("n1" if i % 2 else "n2", base + timedelta(seconds=i // 2), 60.0 + (i % 7)))
            if i == total // 3:
                wait_until(lambda: store_count(store, "SELECT COUNT(*) FROM sound") > 100, 10)
                daemon.stop(signal.SIGKILL)
                daemon = Daemon(config).start()
        # Resend a slice of the backlog, as a sensor draining its queue would: duplicates change nothing.
        for i in range(0, 500):
            pub.publish(*levels("n1" if i % 2 else "n2", base + timedelta(seconds=i // 2), 60.0 + (i % 7)))
        assert wait_until(lambda: store_count(store, "SELECT COUNT(*) FROM sound") == total, 60), (
            daemon.logs()
        )
    finally:
        code = daemon.stop()
        pub.close()
    assert code == 0
    assert store_count(store, "SELECT COUNT(*) FROM sound") == total
    chain_sound = store_count(store, "SELECT COUNT(*) FROM chain WHERE kind = 'sound'")
    assert chain_sound == total  # each reading chained once: nothing counted twice


def test_broker_restart_mid_stream(tmp_path: Path, mosquitto: Mosquitto) -> None:
    config = write_config(tmp_path / "minewatch.toml", mosquitto.url)
    store = tmp_path / "store.db"
    daemon = Daemon(config).start()
    daemon.wait_ready()
    try:
        assert wait_until(lambda: store.exists(), 10)
        base = recent_minute(6)
        pub = Client(mosquitto.port, "publisher")
        for i in range(500):
            pub.publish(*levels("n1", base + timedelta(seconds=i * 0.5), 60.0))
        pub.close()
        assert wait_until(lambda: store_count(store, "SELECT COUNT(*) FROM sound") == 500, 30)
        mosquitto.restart(pause_s=0.5)
        pub = Client(mosquitto.port, "publisher2")
        infos = [pub.publish(*levels("n2", base + timedelta(seconds=i * 0.5), 61.0)) for i in range(500)]
        for info in infos:
            info.wait_for_publish(10)
        pub.close()
        assert wait_until(lambda: store_count(store, "SELECT COUNT(*) FROM sound") == 1000, 60), daemon.logs()
    finally:
        daemon.stop()


def test_malformed_flood_interleaved(tmp_path: Path, mosquitto: Mosquitto) -> None:
    config = write_config(tmp_path / "minewatch.toml", mosquitto.url)
    store = tmp_path / "store.db"
    daemon = Daemon(config).start()
    daemon.wait_ready()
    pub = Client(mosquitto.port, "publisher")
    rng = random.Random(7)
    base = recent_minute(9)
    good = 0
    bad = 0
    try:
        assert wait_until(lambda: store.exists(), 10)
        for i in range(10_000):
            kind = i % 5
            topic = f"minewatch/{SITE}/sensors/n1/levels"
            if kind == 0:
                payload = bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 300)))
            elif kind == 1:
                payload = json.dumps(
                    {"ts": format_ts(base), "LAeq": [1], "LAFmax": 1, "LCpeak": 1, "duration_s": 1}
                ).encode()
            elif kind == 2:
                payload = (
                    b'{"ts": "2026-06-15T00:00:00Z", "duration_s": 1, "LAeq": NaN, "LAFmax": 1, "LCpeak": 1}'
                )
            elif kind == 3:
                payload = b'{"x": "' + b"a" * 1_100_000 + b'"}' if i % 500 == 3 else b'{"ts": 5e20}'
            else:
                payload = b""
            pub.publish(topic, payload)
            bad += 1
            if i % 10 == 0:
                pub.publish(*levels("n2", base + timedelta(seconds=good * 0.2), 62.0))
                good += 1
        assert wait_until(lambda: store_count(store, "SELECT COUNT(*) FROM rejections") == bad, 90), (
            daemon.logs()
        )
        assert wait_until(lambda: store_count(store, "SELECT COUNT(*) FROM sound") == good, 30)
        assert store_count(store, "SELECT COUNT(*) FROM rejections WHERE reason = ''") == 0
        assert daemon.alive()
        # Log lines are rate limited: one per sensor and reason per minute, not one per message.
        assert daemon.logs().count("Rejected message") < 50
    finally:
        code = daemon.stop()
        pub.close()
    assert code == 0


def test_influxdb_outage_backlog_written_after_it_returns(
    tmp_path: Path, mosquitto: Mosquitto, influxd: Influxd
) -> None:
    influx = (
        f'[storage.influxdb]\nversion = 1\nurl = "{influxd.url}"\n'
        'database = "minewatch"\nflush_interval_s = 0.2\ntimeout_s = 2'
    )
    config = write_config(tmp_path / "minewatch.toml", mosquitto.url, influx=influx)
    store = tmp_path / "store.db"
    daemon = Daemon(config).start()
    daemon.wait_ready()
    pub = Client(mosquitto.port, "publisher")
    base = recent_minute(9)
    try:
        for i in range(200):
            pub.publish(*levels("n1", base + timedelta(seconds=i), 60.0))
        assert wait_until(lambda: influxd.count("minewatch", "sound", "LAeq") == 200, 30), daemon.logs()
        influxd.stop()
        for i in range(200, 500):
            pub.publish(*levels("n1", base + timedelta(seconds=i), 61.0))
        assert wait_until(lambda: store_count(store, "SELECT COUNT(*) FROM sound") == 500, 30)
        pending = store_count(store, "SELECT COUNT(*) FROM outbox_influx")
        assert pending >= 300  # held in the outbox while InfluxDB is down
        influxd.start()
        assert wait_until(lambda: influxd.count("minewatch", "sound", "LAeq") == 500, 60), daemon.logs()
        assert wait_until(lambda: store_count(store, "SELECT COUNT(*) FROM outbox_influx") == 0, 30)
        assert daemon.alive()
    finally:
        code = daemon.stop()
        pub.close()
    assert code == 0
    assert influxd.count("minewatch", "sound", "LAeq") == 500  # nothing missing, nothing doubled


def test_status_says_influxdb_holds_the_points_and_since_when(
    tmp_path: Path, mosquitto: Mosquitto, capsys: pytest.CaptureFixture[str]
) -> None:
    """influxd 1.6.7 with ``[data] max-series-per-database = 1`` takes the first series the daemon
    writes and holds the other points ("max-series-per-database limit exceeded"). The daemon said so
    only in its log; `minewatch status` showed the points queued and not why. The daemon records
    the forwarder's state in the store once per change, and status shows it (since when, why)."""
    server = Influxd(tmp_path / "influxd", limits={"max-series-per-database": 1}).start()
    influx = (
        f'[storage.influxdb]\nversion = 1\nurl = "{server.url}"\n'
        'database = "minewatch"\nflush_interval_s = 0.2\ntimeout_s = 2'
    )
    config = write_config(tmp_path / "minewatch.toml", mosquitto.url, influx=influx)
    daemon = Daemon(config).start()
    daemon.wait_ready()
    pub = Client(mosquitto.port, "publisher")
    base = recent_minute(5)

    def forwarder_state() -> dict[str, object]:
        assert main(["status", "--config", str(config), "--format", "json"]) == 0
        [status] = json.loads(capsys.readouterr().out)
        return dict(status.get("influx_forwarder", {}))

    try:
        pub.publish(*levels("n1", base, 60.0))
        pub.publish(*levels("n2", base, 61.0))
        assert wait_until(lambda: forwarder_state().get("up") is False, 30), daemon.logs()
        state = forwarder_state()
        assert "max-series-per-database is reached" in str(state["state"]), state
        since = datetime.fromisoformat(str(state["since"]))
        assert abs(since - datetime.now(UTC)) < timedelta(minutes=1)
        assert main(["status", "--config", str(config)]) == 0
        lines = capsys.readouterr().out.splitlines()
        [said] = [x for x in lines if x.startswith("InfluxDB forwarder:")]
        assert said.startswith(f"InfluxDB forwarder: not writing since {since:%Y-%m-%d %H:%M:%S}Z: InfluxDB")
        assert "max-series-per-database limit exceeded" in said
        assert daemon.logs().count("refuses points for a state of its own") == 1  # said once
    finally:
        code = daemon.stop()
        pub.close()
        server.stop()
    assert code == 0
    state = forwarder_state()  # nothing is written while the daemon is down: status says so
    assert (state["up"], state["state"]) == (False, STOPPED)


def test_status_says_the_forwarders_state_is_old_when_the_daemon_was_killed(
    tmp_path: Path,
    mosquitto: Mosquitto,
    influxd: Influxd,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A daemon writing to influxd 1.6.7 is killed with SIGKILL: it records nothing as it dies,
    and `minewatch status` went on saying "InfluxDB forwarder: writing since ..." as if it were.
    Status tells a daemon that reports by the broker link's record (written every 30 s, stale
    after 90 s: ``link_state.STALE_AFTER_S``, made 1 s here so that the test need not wait 90 s
    for the same answer) and says how old the forwarder's state is and that no daemon has
    reported since. While the daemon runs, the line is as before."""
    influx = (
        f'[storage.influxdb]\nversion = 1\nurl = "{influxd.url}"\n'
        'database = "minewatch"\nflush_interval_s = 0.2\ntimeout_s = 2'
    )
    config = write_config(tmp_path / "minewatch.toml", mosquitto.url, influx=influx)
    daemon = Daemon(config).start()
    daemon.wait_ready()
    pub = Client(mosquitto.port, "publisher")

    def status(*options: str) -> str:
        assert main(["status", "--config", str(config), *options]) == 0
        return capsys.readouterr().out

    try:
        pub.publish(*levels("n1", recent_minute(5), 60.0))
        assert wait_until(lambda: influxd.count("minewatch", "sound", "LAeq") > 0, 30), daemon.logs()
        [running] = [x for x in status().splitlines() if x.startswith("InfluxDB forwarder:")]
        assert running.startswith("InfluxDB forwarder: writing since "), running
        assert "no daemon" not in running
    finally:
        code = daemon.stop(signal.SIGKILL)
        pub.close()
    assert code == -signal.SIGKILL
    monkeypatch.setattr("monitor.wire.link_state.STALE_AFTER_S", 1.0)
    time.sleep(1.5)
    [report] = json.loads(status("--format", "json"))
    forwarder, link = report["influx_forwarder"], report["broker_link"]
    assert (forwarder["up"], forwarder["current"]) == (True, False), forwarder
    assert forwarder["daemon_silent_since"] == link["as_of"]
    last = datetime.fromisoformat(link["as_of"])
    [said] = [x for x in status().splitlines() if x.startswith("InfluxDB forwarder:")]
    assert said.startswith(f"{running} (as the daemon left it: no daemon has reported since "), said
    assert f"reported since {last:%Y-%m-%d %H:%M:%S}Z, " in said and said.endswith(" s ago)"), said
