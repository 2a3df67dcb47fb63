"""The daemon on the data clock (`clock = "data"`, as `minewatch demo` runs it) given one
message stamped far in the future: the real daemon against a real Mosquitto.

On the data clock "now" is the newest accepted time, and nothing was in the future: one levels
message stamped 3026 was taken, the daemon set out to do its periodic work at every data step
(30 s) up to it, and read no other message and heeded no SIGTERM again. A scenario may be dated
ahead of the wall clock (dovre-short's own start is), up to max_age_s and no further. So with
a store an older minewatch left holding such a reading, and with a first reading from 1970; a
jump of days in the data (a walk of its data steps) heeds a SIGTERM.
"""

from __future__ import annotations

import signal
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from monitor.config import parse_config
from monitor.daemon.clock import Clock
from monitor.daemon.ingest import Inbound
from monitor.daemon.pipeline import Pipeline
from monitor.journal.store import Store
from monitor.wire.codec import encode
from monitor.wire.protocol import format_ts
from rules.model import SoundLevels
from tests.support.daemon import Client, Daemon, store_count, wait_until, write_config
from tests.support.servers import Mosquitto


def levels(ts: datetime) -> tuple[str, bytes]:
    return encode(SoundLevels("quarry", "n1", ts, 1.0, 60.0, 61.5, 75.0))


def test_a_time_beyond_max_age_ahead_of_the_wall_clock_is_refused_and_the_daemon_reads_on(
    tmp_path: Path, mosquitto: Mosquitto
) -> None:
    path = write_config(tmp_path / "minewatch.toml", mosquitto.url, daemon_extra='clock = "data"')
    store = tmp_path / "store.db"
    base = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1)  # a replay: past data
    pub = Client(mosquitto.port, "publisher")
    daemon = Daemon(path).start()
    try:
        daemon.wait_ready()
        pub.publish(*levels(base)).wait_for_publish(5)
        pub.publish(*levels(datetime(3026, 12, 6, 23, 30, tzinfo=UTC))).wait_for_publish(5)
        pub.publish(*levels(base + timedelta(seconds=1))).wait_for_publish(5)
        ahead = base + timedelta(hours=2)  # dated ahead of this machine's clock, within max_age_s
        pub.publish(*levels(ahead)).wait_for_publish(5)
        assert wait_until(lambda: store_count(store, "SELECT COUNT(*) FROM sound") == 3, 30), daemon.logs()
        reasons = store_count(store, "SELECT COUNT(*) FROM rejections WHERE reason LIKE ?", "ts: 3026-%")
        assert reasons == 1, daemon.logs()
        assert "ts: 3026-12-06T23:30:00Z is after " in daemon.logs()
        assert "the latest time the data clock takes (this machine's clock plus daemon.max_age_s)" in (
            daemon.logs()
        )
        assert daemon.stop(timeout=20) == 0
    finally:
        if daemon.alive():  # one spinning to 3026 heeds no SIGTERM
            daemon.stop(signal.SIGKILL)
        pub.close()


def test_a_store_holding_a_reading_from_3026_sets_no_clock_there_and_the_daemon_reads_on(
    tmp_path: Path, mosquitto: Mosquitto
) -> None:
    """An older minewatch took the 3026 reading (it refused no time on the data clock). Such a
    store set the data clock to 3026 at every start: every real reading was refused as 1000 years
    in the past. The clock starts from the newest data before this machine's clock plus max_age_s."""
    path = write_config(tmp_path / "minewatch.toml", mosquitto.url, daemon_extra='clock = "data"')
    store = tmp_path / "store.db"
    base = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1)
    far = datetime(3026, 12, 6, 23, 30, tzinfo=UTC)
    config = parse_config(path.read_text(), str(path))
    wall = [datetime.now(UTC)]
    older = Store(str(store))  # the older daemon, as if it took any time: its clock let 3026 in
    taking = Pipeline(config, older, lambda topic, payload, retain: None, Clock("data", lambda: wall[0]))
    taking.handle_batch([Inbound(*levels(base), 1, 1, 0.0)])
    wall[0] = far
    taking.handle_batch([Inbound(*levels(far), 2, 1, 0.0)])
    older.close()
    assert store_count(store, "SELECT COUNT(*) FROM sound") == 2
    pub = Client(mosquitto.port, "publisher")
    daemon = Daemon(path).start()
    try:
        daemon.wait_ready()
        pub.publish(*levels(base + timedelta(seconds=1))).wait_for_publish(5)
        assert wait_until(lambda: store_count(store, "SELECT COUNT(*) FROM sound") == 3, 30), daemon.logs()
        assert store_count(store, "SELECT COUNT(*) FROM rejections") == 0, daemon.logs()
        assert (
            "Site quarry: the store holds a reading ending 3026-12-06T23:30:01Z, after " in daemon.logs()
        ), daemon.logs()
        assert f"the data clock starts from {format_ts(base + timedelta(seconds=1))} instead" in daemon.logs()
        assert daemon.stop(timeout=20) == 0
    finally:
        if daemon.alive():
            daemon.stop(signal.SIGKILL)
        pub.close()


def _walk_left_at_stop(tmp_path: Path, mosquitto: Mosquitto) -> Path:
    """A daemon on the data clock given a reading, then one 8 days on, stopped during the walk
    of data steps between them (~23,000 steps of ~3 ms): the stop must leave the walk to the next
    start at once. Its configuration file."""
    path = write_config(tmp_path / "minewatch.toml", mosquitto.url, daemon_extra='clock = "data"')
    store = tmp_path / "store.db"
    base = datetime.now(UTC).replace(microsecond=0) - timedelta(days=9)
    pub = Client(mosquitto.port, "publisher")
    daemon = Daemon(path).start()
    try:
        daemon.wait_ready()
        pub.publish(*levels(base)).wait_for_publish(5)
        assert wait_until(lambda: store_count(store, "SELECT COUNT(*) FROM sound") == 1, 30), daemon.logs()
        pub.publish(*levels(base + timedelta(days=8))).wait_for_publish(5)
        assert wait_until(lambda: store_count(store, "SELECT COUNT(*) FROM sound") == 2, 30), daemon.logs()
        time.sleep(1.0)  # the walk under way (a tick follows the batch)
        stopping = time.monotonic()
        assert daemon.stop(timeout=60) == 0
        assert time.monotonic() - stopping < 5, daemon.logs()
        assert "Stopping: the data clock's periodic work from " in daemon.logs()
        assert "is left to the next start" in daemon.logs()
    finally:
        if daemon.alive():
            daemon.stop(signal.SIGKILL)
        pub.close()
    return path


def test_sigterm_during_a_walk_of_days_of_data_steps_stops_the_daemon_at_once(
    tmp_path: Path, mosquitto: Mosquitto
) -> None:
    """Data 8 days on from the last: some 23,000 data steps of periodic work (~3 ms each) that
    heeded no SIGTERM, a stop took over a minute. A stop leaves the walk to the next start."""
    _walk_left_at_stop(tmp_path, mosquitto)


def test_sigterm_while_the_next_start_judges_the_days_left_stops_it_at_once(
    tmp_path: Path, mosquitto: Mosquitto
) -> None:
    """The start after such a stop judged the 8 days' minutes left in one tick (~18 s of one
    meter), heeding no SIGTERM. A tick takes an hour of minutes at most (LOOKS_PER_TICK), so the
    stop is heeded between ticks, and what is left is the next start's again."""
    path = _walk_left_at_stop(tmp_path, mosquitto)
    store = tmp_path / "store.db"
    progress = "SELECT evaluated_until_us FROM progress WHERE site = 'quarry'"
    left_at = store_count(store, progress)
    daemon = Daemon(path).start()
    try:
        daemon.wait_ready()
        assert wait_until(lambda: store_count(store, progress) > left_at, 30), daemon.logs()
        stopping = time.monotonic()
        assert daemon.stop(timeout=60) == 0
        assert time.monotonic() - stopping < 5, daemon.logs()
        assert "Stopping: closed minutes not judged yet are the next start's" in daemon.logs()
        judged_to = store_count(store, progress)
        assert left_at < judged_to < left_at + 7 * 86_400_000_000, daemon.logs()  # days still left
    finally:
        if daemon.alive():
            daemon.stop(signal.SIGKILL)
