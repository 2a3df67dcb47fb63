"""The daemon on several cores (daemon.workers): real Mosquitto, the real daemon as a subprocess.

Four sites, two workers: every message stored exactly once, each site's chain in order and
verifiable by `minewatch evidence` + `minewatch verify`, through a worker killed mid-stream
(SIGKILL: restarted by the supervisor, its session redelivers) and a SIGTERM to the
supervisor mid-stream (every worker drains and stops).
"""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from monitor.config import load_config
from monitor.errors import UsageError
from monitor.wire import encode
from monitor.workers import Partition, parse_partition
from rules.model import SoundLevels
from tests.daemon_harness import Client, Daemon, store_count, wait_until, write_config
from tests.servers import Mosquitto

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
        status = subprocess.run(
            [sys.executable, "-m", "monitor.cli", "status", "--config", str(path)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert status.returncode == 0, status.stderr
        assert re.search(r"^worker 1/2 \(quarry, s3\): broker .*: connected since", status.stdout, re.M)
        assert re.search(r"^worker 2/2 \(s2, s4\): broker .*: connected since", status.stdout, re.M)
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
        assert "no problem found" in checked.stdout and "600 in data/sound.csv" in checked.stdout
