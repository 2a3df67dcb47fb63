"""The daemon on several cores (daemon.workers): real Mosquitto, the real daemon as a subprocess.

Four sites, two workers: every message stored exactly once, each site's chain in order and
verifiable by `minewatch evidence` + `minewatch verify`, through a worker killed mid-stream
(SIGKILL: restarted by the supervisor, its session redelivers) and a SIGTERM to the
supervisor mid-stream (every worker drains and stops).
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from monitor.config import load_config
from monitor.daemon.workers import Partition, Supervisor, parse_partition
from monitor.errors import UsageError
from monitor.wire.codec import encode
from rules.model import SoundLevels
from tests.support.cli import run_minewatch
from tests.support.configs import quarry_config
from tests.support.configs import sensor as sensor_settings
from tests.support.daemon import Client, Daemon, store_count, wait_until, write_config
from tests.support.pipeline_world import World
from tests.support.servers import Mosquitto

SITES = ("quarry", "s2", "s3", "s4")
SENSORS = ("n1", "n2")
EXTRA_SITE = """
[[sites]]
id = "{site}"
name = "Quarry {site}"
timezone = "America/Chicago"
latitude = 45.27
longitude = -91.62
[[sites.sensors]]
id = "n1"
kind = "sound"
[[sites.sensors]]
id = "n2"
kind = "sound"
"""


def four_sites(tmp_path: Path, broker_url: str, workers: str = "2") -> Path:
    return write_config(
        tmp_path / "minewatch.toml",
        broker_url,
        daemon_extra=f"workers = {workers}",
        extra_sites="".join(EXTRA_SITE.format(site=s) for s in SITES[1:]),
    )


def publish(pub: Client, base: datetime, seconds: range, pause_every: int = 0) -> int:
    """Each second, every sensor of every site (as sent live); waits for the broker's PUBACKs."""
    sent = []
    for s in seconds:
        ts = base + timedelta(seconds=s)
        for site in SITES:
            for sensor in SENSORS:
                sent.append(pub.publish(*encode(SoundLevels(site, sensor, ts, 1.0, 60.0, 61.5, 75.0))))
        if pause_every and s % pause_every == 0:
            time.sleep(0.02)  # a stream, not one burst: the kill lands in the middle of it
    for info in sent:
        info.wait_for_publish(30)
    return len(sent)


def worker_pids(daemon: Daemon) -> dict[int, int]:
    """Worker index -> pid of its latest start, from the supervisor's log."""
    return {int(i): int(pid) for i, pid in re.findall(r"worker (\d)/2 started \(pid (\d+)\)", daemon.logs())}


def zulu(ts: datetime) -> str:
    return ts.strftime("%Y-%m-%dT%H:%M:%SZ")


def sound_rows(store: Path) -> int:
    return store_count(store, "SELECT COUNT(*) FROM sound")


def connected(daemon: Daemon, times: int) -> bool:
    return daemon.logs().count("Connected to") >= times


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped) counts as gone.
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split()[2] != "Z"


def test_partition_round_robin_and_own_session(tmp_path: Path) -> None:
    config = load_config(four_sites(tmp_path, "mqtt://127.0.0.1:1"), secrets="defer")
    assert config.daemon.workers == 2
    first, second = Partition(1, 2), Partition(2, 2)
    assert first.sites(config) == ("quarry", "s3") and second.sites(config) == ("s2", "s4")
    worker = second.apply(config)
    assert [s.id for s in worker.owned_sites] == ["s2", "s4"]
    assert worker.broker.client_id == "minewatch-test-w2of2"
    assert worker.broker.username == ""  # none configured: none made up
    account = replace(config, broker=replace(config.broker, username="minewatch-daemon"))
    assert second.apply(account).broker.username == "minewatch-daemon-w2of2"
    assert first.leader and not second.leader
    assert parse_partition("2/2", config) == second
    for bad in ("x", "0/2", "3/2", "1/5"):
        with pytest.raises(UsageError, match="--partition"):
            parse_partition(bad, config)


def test_workers_setting(tmp_path: Path) -> None:
    auto = load_config(four_sites(tmp_path, "mqtt://127.0.0.1:1", '"auto"'), secrets="defer")
    assert auto.daemon.workers == (os.cpu_count() or 1)
    assert (
        load_config(write_config(tmp_path / "one.toml", "mqtt://127.0.0.1:1"), secrets="defer").daemon.workers
        == 1
    )
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "monitor.cli",
            "check-config",
            "--config",
            str(four_sites(tmp_path, "x", "0")),
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2 and 'daemon.workers: must be "auto" or an integer of at least 1' in (
        result.stdout + result.stderr
    )


def test_two_workers_store_every_message_once_through_a_killed_worker_and_a_stop(
    tmp_path: Path, mosquitto: Mosquitto
) -> None:
    path = four_sites(tmp_path, mosquitto.url)
    store = tmp_path / "store.db"
    base = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=9)
    daemon = Daemon(path).start()
    assert wait_until(lambda: connected(daemon, 2), 60), daemon.logs()
    time.sleep(0.5)  # the SUBACKs follow the log lines
    pids = worker_pids(daemon)
    assert set(pids) == {1, 2}
    assert "worker 1/2 minewatch.pipeline: minewatch running for quarry, s3" in daemon.logs()
    assert (tmp_path / "store.db-turns").exists()  # the workers queue for the write lock on it
    assert "worker 2/2 minewatch.pipeline: minewatch running for s2, s4" in daemon.logs()
    pub = Client(mosquitto.port, "workers-pub")
    sent = 0
    try:
        # A worker killed mid-stream: the supervisor restarts it, its session redelivers.
        stream = threading.Thread(target=lambda: publish(pub, base, range(0, 150), pause_every=5))
        stream.start()
        assert wait_until(lambda: sound_rows(store) > 100, 30)
        os.kill(pids[2], signal.SIGKILL)
        stream.join(60)
        sent += 150 * len(SITES) * len(SENSORS)
        assert wait_until(lambda: daemon.logs().count("worker 2/2 started") == 2, 30), daemon.logs()
        assert f"worker 2/2 (pid {pids[2]}) exited (signal 9); restarting it" in daemon.logs()
        assert wait_until(lambda: sound_rows(store) == sent, 90), (sound_rows(store), sent, daemon.logs())

        # SIGTERM to the supervisor mid-stream: every worker drains and stops; the rest waits
        # in the sessions for the next start.
        stream = threading.Thread(target=lambda: publish(pub, base, range(150, 300), pause_every=5))
        stream.start()
        assert wait_until(lambda: sound_rows(store) > sent + 100, 30)
        workers = list(worker_pids(daemon).values())
        assert daemon.stop(signal.SIGTERM, timeout=60) == 0
        assert not any(alive(pid) for pid in workers)
        assert "all 2 workers stopped" in daemon.logs()
        stream.join(60)
        sent += 150 * len(SITES) * len(SENSORS)
        daemon = Daemon(path).start()
        assert wait_until(lambda: sound_rows(store) == sent, 90), (sound_rows(store), sent, daemon.logs())
        time.sleep(1.0)  # nothing more arrives (a duplicate would be ignored by key, but counted)
        status = run_minewatch("status", "--config", path, timeout=60)
        assert status.returncode == 0, status.stderr
        assert re.search(r"^worker 1/2 \(quarry, s3\): broker .*: connected since", status.stdout, re.M)
        assert re.search(r"^worker 2/2 \(s2, s4\): broker .*: connected since", status.stdout, re.M)
        as_json = run_minewatch("status", "--config", path, "--format", "json", timeout=60)
        by_site = {s["site"]: s for s in json.loads(as_json.stdout)}
        assert {site: s["worker"] for site, s in by_site.items()} == {
            "quarry": "1/2",
            "s2": "2/2",
            "s3": "1/2",
            "s4": "2/2",
        }
        assert all(s["broker_link"]["connected"] for s in by_site.values())
        assert daemon.stop(signal.SIGTERM, timeout=60) == 0
    finally:
        pub.close()
        if daemon.alive():
            daemon.stop(signal.SIGKILL)
    assert sound_rows(store) == sent == 300 * len(SITES) * len(SENSORS)
    conn = sqlite3.connect(store)
    try:
        for site in SITES:
            # Exactly once: one row per second and sensor, one chain entry per row.
            rows = conn.execute(
                "SELECT sensor, ts_us, chain_seq FROM sound WHERE site = ? ORDER BY sensor, ts_us", (site,)
            ).fetchall()
            assert len(rows) == 300 * len(SENSORS)
            chained = conn.execute(
                "SELECT COUNT(*) FROM chain WHERE site = ?"
                " AND seq IN (SELECT chain_seq FROM sound WHERE site = ?)",
                (site, site),
            ).fetchone()[0]
            assert chained == len(rows) == len({r[2] for r in rows})
            for sensor in SENSORS:  # the site's order kept: chain position follows time, per sensor
                seqs = [seq for s, _, seq in rows if s == sensor]
                assert seqs == sorted(seqs)
    finally:
        conn.close()
    for site in SITES:
        bundle = tmp_path / f"{site}.zip"
        cli = [sys.executable, "-m", "monitor.cli"]
        window = ["--from", zulu(base - timedelta(minutes=1)), "--to", zulu(base + timedelta(minutes=6))]
        made = subprocess.run(
            [
                *cli,
                "evidence",
                "--config",
                str(path),
                "--site",
                site,
                *window,
                "--no-plots",
                "--out",
                str(bundle),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert made.returncode == 0, made.stdout + made.stderr
        checked = subprocess.run([*cli, "verify", str(bundle)], capture_output=True, text=True, timeout=120)
        assert checked.returncode == 0, checked.stdout + checked.stderr
        # "600 in data/sound.csv" (format 2) or "... data/sound/" (format 3's parts)
        assert "no problem found" in checked.stdout and "600 in data/sound" in checked.stdout


class _Exits(Supervisor):
    """A supervisor whose workers are stand-ins exiting with ``code`` (the supervisor's own logic
    under test; the real workers run in the daemon tests above and below)."""

    def __init__(self, code: int) -> None:
        super().__init__("unused.toml", 2, "INFO", threading.Event())
        self.code = code

    def command(self, index: int) -> list[str]:
        return [sys.executable, "-c", f"import sys; sys.exit({self.code})"]


def test_a_worker_refused_its_login_stops_them_all_with_its_status() -> None:
    supervisor = _Exits(3)  # commands/run.py EXIT_LOGIN_REFUSED: no restart can fix a password
    assert supervisor.run() == 3
    assert supervisor.stop.is_set() and not supervisor.restart_at


def test_a_crashing_worker_is_restarted_later_each_time(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "minewatch.workers")
    supervisor = _Exits(1)
    timer = threading.Timer(2.5, supervisor.stop.set)
    timer.start()
    try:
        assert supervisor.run() == 0
    finally:
        timer.cancel()
    # Restarted after 0.5 s, then 1 s, ...: a few starts each in 2.5 s, not hundreds.
    starts = [r.getMessage() for r in caplog.records if "started (pid" in r.getMessage()]
    assert 4 <= len(starts) <= 8
    assert supervisor.failures[1] >= 2
    assert "restarting it in 1.0 s" in caplog.text


def test_workers_stop_when_the_supervisor_is_killed(tmp_path: Path, mosquitto: Mosquitto) -> None:
    daemon = Daemon(four_sites(tmp_path, mosquitto.url)).start()
    try:
        assert wait_until(lambda: connected(daemon, 2), 60), daemon.logs()
        workers = list(worker_pids(daemon).values())
        assert daemon.proc is not None
        # The supervisor runs no pipeline and loads none (numpy's extension, paho): it stays small.
        maps = Path(f"/proc/{daemon.proc.pid}/maps").read_text()
        assert (
            "_multiarray_umath" not in maps
            and "_multiarray_umath" in Path(f"/proc/{workers[0]}/maps").read_text()
        )
        assert daemon.stop(signal.SIGKILL) == -signal.SIGKILL
        assert wait_until(lambda: not any(alive(pid) for pid in workers), 30), daemon.logs()
        assert daemon.logs().count("has gone; stopping") == 2
    finally:
        if daemon.alive():
            daemon.stop(signal.SIGKILL)


OPERATOR = """
[[recipients]]
name = "Operations"
role = "operator"
[[recipients.channels]]
type = "mqtt"
topic = "ops/{site}/alerts"
"""


def test_alerts_of_every_worker_delivered_once_by_the_leader(tmp_path: Path, mosquitto: Mosquitto) -> None:
    """Worker 1 sends every worker's deliveries; each alert reaches the recipient once."""
    path = four_sites(tmp_path, mosquitto.url)
    path.write_text(path.read_text() + OPERATOR)
    base = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=9)
    daemon = Daemon(path).start()
    ops = Client(mosquitto.port, "workers-ops", subscribe=("ops/#",))
    pub = Client(mosquitto.port, "workers-pub")
    try:
        assert wait_until(lambda: connected(daemon, 2), 60), daemon.logs()
        time.sleep(0.5)
        sent = []
        for s in range(240):  # s3 (worker 1) and s2 (worker 2) loud in their second minute
            ts = base + timedelta(seconds=s)
            for site in ("s2", "s3"):
                for sensor in SENSORS:
                    level = 86.0 if sensor == "n2" and s // 60 == 1 else 60.0
                    body = encode(SoundLevels(site, sensor, ts, 1.0, level, level + 1.5, level + 15))
                    sent.append(pub.publish(*body))
        for info in sent:
            info.wait_for_publish(30)

        def noise_alerts() -> list[tuple[str, bytes]]:
            with ops.lock:
                return [(t, p) for t, p in ops.messages if b"noise" in p]

        assert wait_until(lambda: {t for t, _ in noise_alerts()} == {"ops/s2/alerts", "ops/s3/alerts"}, 60), (
            ops.messages,
            daemon.logs(),
        )
        time.sleep(3.0)  # a second sender would have sent its copy by now (deliveries poll every second)
        payloads = [p for _, p in noise_alerts()]
        assert len(payloads) == len(set(payloads))
        delivered = store_count(
            tmp_path / "store.db", "SELECT COUNT(*) FROM deliveries WHERE status = 'delivered'"
        )
        assert delivered >= 2
    finally:
        pub.close()
        ops.close()
        daemon.stop(signal.SIGTERM, timeout=60)


def test_a_worker_announces_only_its_own_sites_notice_changes(tmp_path: Path) -> None:
    """A change made with `minewatch notices` is announced by the worker owning the notice's site."""
    from monitor.journal.store import Store
    from monitor.notify.notices import NoticeBook
    from tests.support.notices import (
        SITE,
        local,
        make_config,
        site_and_profile,
        store_findings,
        violation,
    )

    db = tmp_path / "minewatch.db"
    site, profile = site_and_profile(make_config(db))
    t = local(2026, 6, 15, 11, 30)
    store = Store(db)
    try:
        book = NoticeBook(store)
        book.on_findings(site, profile, store_findings(store, [violation(t)], t), t + timedelta(minutes=2))
        book.close("DOV-2026-0001", "Corrected on inspection", "Inspector Lee", t + timedelta(days=3))
        assert book.take_announcements(t + timedelta(days=3, seconds=1), frozenset({"elsewhere"})) == []
        events = book.take_announcements(t + timedelta(days=3, seconds=2), frozenset({SITE}))
        assert [e.change for e in events] == ["corrected"]
        assert book.take_announcements(t + timedelta(days=3, seconds=3)) == []
    finally:
        store.close()


def test_the_wait_for_the_stores_write_lock_is_counted(tmp_path: Path) -> None:
    """Workers take turns on the one store: how long a batch or a tick waited for its turn is
    counted (and logged when the daemon stops), the measure of their contention."""
    t0 = datetime(2026, 6, 15, 17, 0, tzinfo=UTC)
    config = quarry_config(tmp_path / "store.db", sensors=[sensor_settings("n1", "sound")])
    world = World(tmp_path, config, t0)
    other = sqlite3.connect(world.config.storage.path, isolation_level=None, check_same_thread=False)
    try:
        world.levels(t0, 5, 60.0)
        assert world.pipeline.counters.lock_wait_s < 0.3
        other.execute("BEGIN IMMEDIATE")  # another worker's batch holds the write lock
        threading.Timer(0.5, lambda: other.execute("COMMIT")).start()
        world.levels(t0 + timedelta(seconds=5), 5, 60.0)
        assert world.pipeline.counters.lock_wait_s >= 0.4
        assert world.pipeline.counters.tick_lock_wait_s == 0.0  # no tick yet
        assert world.pipeline.counters.accepted == 10
        # A tick records its judgements in a transaction of its own: its wait is counted too,
        # and apart, since it comes on top of the batch's.
        other.execute("BEGIN IMMEDIATE")
        threading.Timer(0.5, lambda: other.execute("COMMIT")).start()
        before = world.pipeline.counters.lock_wait_s
        world.advance(1)
        assert world.pipeline.counters.tick_lock_wait_s >= 0.4
        assert world.pipeline.counters.lock_wait_s - before >= 0.4
    finally:
        other.close()
        world.close()
