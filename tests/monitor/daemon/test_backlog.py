"""Every minute judged after an outage: the real daemon against a real Mosquitto.

The daemon's persistent session makes the broker queue what is published while the
daemon is down; on restart the daemon reads that backlog oldest first, faster than real
time. Each loud minute in it must get its violation exactly once, with its data: none
judged before its data was read, none skipped, none judged twice.
"""

from __future__ import annotations

import signal
import sqlite3
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

from monitor.journal.store import to_us
from monitor.wire.codec import encode
from rules.model import SoundLevels
from tests.support.daemon import Client, Daemon, store_count, wait_until, write_config
from tests.support.servers import Mosquitto

SITE = "quarry"
LATENESS_S = 30  # short, so that the outages below are longer than the lateness
QUIET_DB = 60.0
LOUD_DB = 86.0  # Dovre 6.D: 80 dB(A) over a minute


def config(tmp_path: Path, broker_url: str, extra: str = "") -> Path:
    path = write_config(tmp_path / "minewatch.toml", broker_url, daemon_extra=extra)
    path.write_text(path.read_text().replace("lateness_s = 600", f"lateness_s = {LATENESS_S}"))
    return path


def publish_seconds(pub: Client, base: datetime, seconds: range, loud: set[int]) -> int:
    """n1 quiet, n2 loud in the ``loud`` minutes; the sensors' seconds interleaved as sent live."""
    sent = 0
    for s in seconds:
        ts = base + timedelta(seconds=s)
        for sensor in ("n1", "n2"):
            level = LOUD_DB if sensor == "n2" and s // 60 in loud else QUIET_DB
            pub.publish(*encode(SoundLevels(SITE, sensor, ts, 1.0, level, level + 1.5, level + 15)))
            sent += 1
    return sent


def evaluated_until(store: Path) -> int:
    return store_count(
        store, "SELECT COALESCE(MAX(evaluated_until_us), 0) FROM progress WHERE site = ?", SITE
    )


def noise_violations(store: Path) -> dict[datetime, int]:
    """Minute judged (the one its windows end in) -> revisions of its noise violation (1: judged once)."""
    conn = sqlite3.connect(store, timeout=30)
    try:
        rows = conn.execute(
            "SELECT id, end_us FROM findings WHERE site = ? AND kind = 'violation' AND standard = 'noise'",
            (SITE,),
        ).fetchall()
    finally:
        conn.close()
    revisions = Counter(r[0] for r in rows)
    minutes = {r[0]: (r[1] - 1) // 60_000_000 * 60 for r in rows}
    return {datetime.fromtimestamp(minutes[i], UTC): n for i, n in revisions.items()}


def judged(base: datetime, loud: set[int]) -> dict[datetime, int]:
    """Each loud minute, and the next (its sliding 60 s windows reach back into the loud one),
    judged to a violation exactly once."""
    return {base + timedelta(minutes=m): 1 for n in loud for m in (n, n + 1)}


def test_wall_clock_outage_longer_than_the_lateness_judges_every_loud_minute_once(
    tmp_path: Path, mosquitto: Mosquitto
) -> None:
    path = config(tmp_path, mosquitto.url)
    store = tmp_path / "store.db"
    base = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=8)
    loud = {2, 5}
    watcher = Client(mosquitto.port, "watcher", (f"minewatch/{SITE}/violations",))
    pub = Client(mosquitto.port, "publisher")
    daemon = Daemon(path).start()
    try:
        daemon.wait_ready()
        # Minute 0 live and judged (the data moved 6 s past it); then the daemon stops and the
        # broker queues the rest up to minute 7: seven minutes of outage, lateness 30 s.
        sent = publish_seconds(pub, base, range(0, 66), loud)
        assert wait_until(lambda: evaluated_until(store) >= to_us(base + timedelta(minutes=1)), 30), (
            daemon.logs()
        )
        assert daemon.stop() == 0
        sent += publish_seconds(pub, base, range(66, 8 * 60), loud)
        daemon = Daemon(path).start()
        assert wait_until(lambda: store_count(store, "SELECT COUNT(*) FROM sound") == sent, 60), daemon.logs()
        assert wait_until(lambda: evaluated_until(store) >= to_us(base + timedelta(minutes=7)), 30), (
            daemon.logs()
        )
        assert wait_until(lambda: len(watcher.received("/violations")) >= 2 * len(loud), 10), daemon.logs()
    finally:
        if daemon.alive():
            daemon.stop()
        pub.close()
    watcher.close()
    assert noise_violations(store) == judged(base, loud)
    published = Counter(str(v["start"]) for v in watcher.received("/violations"))
    assert sorted(published.values()) == [1] * 2 * len(loud)  # each announced once
    # A backlog read in order is not late data.
    assert store_count(store, "SELECT COUNT(*) FROM sound WHERE late = 1") == 0
    # The judged windows (the reports' "judged"): one, from the first minute to the final front,
    # across the restart (the daemon continues its judging where the store says it was).
    conn = sqlite3.connect(store)
    windows = conn.execute("SELECT start_us, end_us FROM judged WHERE site = ?", (SITE,)).fetchall()
    (final,) = conn.execute("SELECT final_until_us FROM progress WHERE site = ?", (SITE,)).fetchone()
    conn.close()
    assert windows == [(to_us(base), final)] and final > to_us(base + timedelta(minutes=5))


def test_data_clock_sigkill_while_draining_a_backlog_judges_every_loud_minute_once(
    tmp_path: Path, mosquitto: Mosquitto
) -> None:
    path = config(tmp_path, mosquitto.url, 'clock = "data"')
    store = tmp_path / "store.db"
    # Hours behind the wall clock, as a replayed or long-queued stream is.
    base = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(hours=6)
    minutes = 150
    loud = {2, 19, 40, 63, 88, 111, 130, 146}
    pub = Client(mosquitto.port, "publisher")
    daemon = Daemon(path).start()
    try:
        daemon.wait_ready()
        sent = publish_seconds(pub, base, range(0, 66), loud)
        assert wait_until(lambda: evaluated_until(store) >= to_us(base + timedelta(minutes=1)), 30), (
            daemon.logs()
        )
        assert daemon.stop() == 0
        sent += publish_seconds(pub, base, range(66, minutes * 60), loud)  # queued by the broker
        daemon = Daemon(path).start()
        # Killed once it has read part of the backlog, while the rest is still coming.
        assert wait_until(lambda: store_count(store, "SELECT COUNT(*) FROM sound") > sent // 5, 60, 0.02)
        daemon.stop(signal.SIGKILL)
        at_kill = store_count(store, "SELECT COUNT(*) FROM sound")
        assert at_kill < sent, "the backlog was drained before the kill: make it longer"
        judged_at_kill = evaluated_until(store)
        daemon = Daemon(path).start()
        assert wait_until(lambda: store_count(store, "SELECT COUNT(*) FROM sound") == sent, 90), daemon.logs()
        last = to_us(base + timedelta(minutes=minutes - 1))
        assert wait_until(lambda: evaluated_until(store) >= last, 30), daemon.logs()
    finally:
        if daemon.alive():
            daemon.stop()
        pub.close()
    assert judged_at_kill < last  # evaluation too was under way when the daemon was killed
    assert noise_violations(store) == judged(base, loud)
    assert store_count(store, "SELECT COUNT(*) FROM sound WHERE late = 1") == 0
