"""A store that refuses writes (a full disk): the real daemon against a real Mosquitto.

The disk is made "full" for the daemon's process alone with a file-size limit (RLIMIT_FSIZE):
the kernel refuses its writes past the limit, and SQLite reports them as it reports a full disk.
Lifting the limit is the space coming back. The daemon must neither die nor reject nor lose
anything meanwhile, and must judge every loud minute once when it carries on.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import NamedTuple

import pytest

from monitor.daemon.daemon_state import DaemonState
from monitor.daemon.store_outage import StoreOutage
from monitor.errors import StoreUnwritable
from monitor.journal.store import Store, unwritable
from monitor.wire.canonical import to_us
from tests.monitor.daemon.test_backlog import (
    SITE,
    config,
    evaluated_until,
    judged,
    noise_violations,
    publish_seconds,
)
from tests.support.another_user import refused_to_this_user
from tests.support.daemon import Client, Daemon, store_count, wait_until
from tests.support.paths import REPO
from tests.support.servers import Mosquitto
from tests.support.small_disk import on_a_small_disk

# What the minutes published below make of the store (~1 MB): the limit lies short of it, and past
# what making a new store takes (its WAL peaks at ~700 kB while the migrations run, and grows with
# each migration: measured, not written down), so the daemon starts and then the disk is full.
# Once the store file reaches the limit, the WAL cannot be copied into it and fills up to it too.
PUBLISHED = 1_000_000


def past_a_new_store(tmp_path: Path) -> int:
    """A file-size limit a page ahead of the largest file making a new store writes."""
    folder = tmp_path / "new-store"
    store = Store(folder / "store.db")
    largest = max(path.stat().st_size for path in folder.iterdir())  # the WAL, before close's checkpoint
    store.close()
    limit = largest + 64 * 1024
    assert limit < PUBLISHED * 0.85, f"a new store takes {largest} bytes: no room for the test's minutes"
    return limit


REFUSED = "Cannot write the store"


def stored(store: Path) -> int:
    return store_count(store, "SELECT COUNT(*) FROM sound")


def rejected(store: Path) -> int:
    return store_count(store, "SELECT COUNT(*) FROM rejections")


class Filled(NamedTuple):
    daemon: Daemon
    pub: Client
    base: datetime
    sent: int


def filled(tmp_path: Path, mosquitto: Mosquitto, loud: set[int]) -> Filled:
    """The daemon started with the file-size limit, 38 minutes published (2 meters, the ``loud``
    minutes at 86 dB(A)), until the store has refused a write."""
    base = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=40)
    pub = Client(mosquitto.port, "publisher", subscribe=(f"minewatch/{SITE}/daemon",))
    daemon = Daemon(config(tmp_path, mosquitto.url), file_size_limit=past_a_new_store(tmp_path)).start()
    try:
        daemon.wait_ready()
        sent = publish_seconds(pub, base, range(0, 38 * 60), loud)
        assert wait_until(lambda: REFUSED in daemon.logs(), 60), daemon.logs()
    except BaseException:
        daemon.stop(signal.SIGKILL)
        pub.close()
        raise
    return Filled(daemon, pub, base, sent)


def test_a_full_disk_holds_the_messages_until_space_comes_back_and_every_minute_is_judged_once(
    tmp_path: Path, mosquitto: Mosquitto
) -> None:
    store = tmp_path / "store.db"
    loud = {3, 17, 31}
    daemon, pub, base, sent = filled(tmp_path, mosquitto, loud)
    try:
        # Tries that fail (a small write may still fit now and then): alive, nothing rejected.
        threading.Event().wait(3)
        assert daemon.alive(), daemon.logs()
        assert stored(store) < sent and rejected(store) == 0
        daemon.lift_file_size_limit()
        assert wait_until(lambda: stored(store) == sent, 90), daemon.logs()
        assert wait_until(lambda: evaluated_until(store) >= to_us(base + timedelta(minutes=37)), 60), (
            daemon.logs()
        )
        # Said after the commit that ended the outage and the tick that followed it, which the
        # store shows first: under load the test read the log in between.
        assert wait_until(lambda: "takes writes again" in daemon.logs(), 10), daemon.logs()
        assert daemon.stop() == 0
        assert wait_until(lambda: told(pub)[-1:] == [("stopped", "writable")], 10), told(pub)
    finally:
        if daemon.alive():
            daemon.stop(signal.SIGKILL)
        pub.close()
    # The Town and the operator were told, though nothing could be stored: the retained
    # …/daemon said so while it lasted (the site's status, made from the store, only grew old).
    states = told(pub)
    assert states[0] == ("running", "writable") and states[-1] == ("stopped", "writable"), states
    assert ("running", "refusing writes") in states, states
    refusing = next(m for m in pub.received(f"{SITE}/daemon") if m["store"] == "refusing writes")
    # "the disk is full", or the file-size limit's EFBIG read as an I/O error
    assert refusing["site"] == SITE and str(refusing["reason"]).startswith("the disk")
    assert isinstance(refusing["held"], int) and refusing["held"] >= 0
    assert set(refusing) == {"site", "ts", "state", "store", "store_since", "reason", "held"}
    assert str(store) not in json.dumps(refusing)  # the path stays in the log
    logs = daemon.logs()
    # One line as each outage begins and one as it ends, not one per try. (The WAL file can
    # reach the limit first and be started over by a checkpoint: an outage of its own.)
    assert logs.count(REFUSED) == logs.count("takes writes again") >= 1, logs
    assert "Traceback" not in logs and "Internal error" not in logs, logs
    assert rejected(store) == 0
    assert noise_violations(store) == judged(base, loud)


def test_stopped_while_the_disk_is_full_it_leaves_the_rest_with_the_broker_for_the_next_start(
    tmp_path: Path, mosquitto: Mosquitto
) -> None:
    store = tmp_path / "store.db"
    daemon, pub, _, sent = filled(tmp_path, mosquitto, set())
    try:
        assert daemon.stop(timeout=10) == 0  # promptly, though its handoff from the network is full
        assert "what is in hand stays with the broker" in daemon.logs()
        assert stored(store) < sent
        assert wait_until(lambda: told(pub)[-1:] == [("stopped", "refusing writes")], 10), told(pub)
        daemon = Daemon(daemon.config).start()  # the space came back while it was stopped
        assert wait_until(lambda: stored(store) == sent, 90), daemon.logs()
        assert told(pub)[-1] == ("running", "writable")  # the retained message said again
        assert daemon.stop() == 0
    finally:
        if daemon.alive():
            daemon.stop(signal.SIGKILL)
        pub.close()
    assert rejected(store) == 0


def told(pub: Client) -> list[tuple[object, object]]:
    """(state, store) of each retained …/daemon the site's subscriber received, in order."""
    return [(m["state"], m["store"]) for m in pub.received(f"{SITE}/daemon")]


def test_a_full_store_is_named_so_and_other_errors_are_not(tmp_path: Path) -> None:
    store = Store(str(tmp_path / "store.db"))
    try:
        # SQLite's own limit on the file's pages: a real SQLITE_FULL, with no disk to fill.
        pages = store.conn.execute("PRAGMA page_count").fetchone()[0]
        store.conn.execute(f"PRAGMA max_page_count = {pages}")
        with pytest.raises(sqlite3.OperationalError) as full, store.batch():
            store.set_meta("filler", "x" * 100_000)
        outage = unwritable(full.value, store.path, stored=7)
        assert outage is not None and outage.stored == 7
        assert str(outage).startswith(f"cannot write the store {store.path}: the disk is full")
        # SQLite may have rolled the transaction back, and a savepoint's ROLLBACK TO then fails.
        with pytest.raises(sqlite3.OperationalError) as after:
            try:
                raise full.value
            except sqlite3.OperationalError:
                store.conn.execute("ROLLBACK TO no_such_savepoint")
        assert unwritable(after.value, store.path) is not None
        with pytest.raises(sqlite3.OperationalError) as mistake:
            store.conn.execute("SELECT nothing FROM nowhere")
        assert unwritable(mistake.value, store.path) is None
        assert unwritable(ValueError("a bug"), store.path) is None
    finally:
        store.close()


def disk_full(path: str) -> StoreUnwritable:
    return StoreUnwritable(path, "the disk is full", code=sqlite3.SQLITE_FULL)


class Remake:
    """Refuses ``refusals`` times, then makes "pipeline"."""

    def __init__(self, refusals: int) -> None:
        self.refusals = refusals
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.calls <= self.refusals:
            raise disk_full("store.db")
        return "pipeline"


def outage_waiting(remake: Callable[[], str], stop: threading.Event) -> StoreOutage[str]:
    return StoreOutage(stop, remake, pauses_s=(0.001, 0.002))


def test_the_wait_retries_until_the_store_takes_a_new_pipeline(caplog: pytest.LogCaptureFixture) -> None:
    remake = Remake(refusals=3)
    outages = outage_waiting(remake, threading.Event())
    assert outages.wait(disk_full("store.db"), held=12) == "pipeline"
    assert remake.calls == 4
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert errors == [
        "Cannot write the store store.db: the disk is full. 12 message(s) in hand stay unacknowledged,"
        " and the broker keeps what follows; trying again in 0.001 s, nothing lost meanwhile. Free space"
        " on the store's disk."
    ]
    # Refused again right after (a nearly full disk took the small write): the same outage, no
    # second line, and the pauses go on growing until something is committed.
    assert outages.wait(disk_full("store.db"), held=12) == "pipeline"
    assert len([r for r in caplog.records if r.levelname == "ERROR"]) == 1
    assert outages._pause() == 0.002
    outages.stored("store.db")
    assert outages.began is None and outages._pause() == 0.001
    assert "takes writes again" in caplog.records[-1].getMessage()


def test_the_wait_ends_when_the_daemon_is_stopped() -> None:
    stop = threading.Event()
    stop.set()
    remake = Remake(refusals=1000)
    assert outage_waiting(remake, stop).wait(disk_full("store.db"), 3) is None
    assert remake.calls == 0


def test_the_daemon_state_says_when_the_store_refuses_writes_and_when_it_takes_them_again() -> None:
    sent: list[tuple[str, dict[str, object], bool]] = []
    wall = iter(range(1_780_000_000, 1_780_000_100))
    state = DaemonState(
        lambda topic, payload, retain: sent.append((topic, json.loads(payload), retain)),
        "minewatch",
        ["north", "south"],
        wall=lambda: float(next(wall)),
    )
    outages = StoreOutage(threading.Event(), Remake(refusals=1), pauses_s=(0.001,), told=state)
    # Refused before the link exists (a full disk at the start): nothing published yet.
    full = disk_full("/var/lib/minewatch/store.db")
    assert outages.wait(full, held=0) == "pipeline"
    assert sent == []
    state.started()
    assert [(t, m["state"], m["store"], r) for t, m, r in sent] == [
        ("minewatch/north/daemon", "running", "refusing writes", True),
        ("minewatch/south/daemon", "running", "refusing writes", True),
    ]
    outages.stored("/var/lib/minewatch/store.db")
    outages.stored("/var/lib/minewatch/store.db")  # no outage: nothing to say
    assert [(m["site"], m["store"]) for _, m, _ in sent[2:]] == [("north", "writable"), ("south", "writable")]
    outages.wait(full, held=7)
    refusing = sent[-1][1]
    assert refusing == {
        "site": "south",
        "ts": refusing["ts"],
        "state": "running",
        "store": "refusing writes",
        "store_since": refusing["store_since"],
        "reason": "the disk is full",
        "held": 7,
    }
    state.stopped()
    assert [(m["state"], m["store"]) for _, m, _ in sent[-2:]] == [("stopped", "refusing writes")] * 2


# The store at argv[1] made to refuse a write, for real, in the way argv[2] names, and the line the
# daemon logs as the outage begins (on stderr). "io": a limit on the size of this process's files
# set at the WAL's size, the kernel refusing the next write there (EFBIG), which SQLite reports as
# an I/O error; "busy": another connection holding the write lock past a short busy timeout;
# "full" (on a small tmpfs) and "read-only" (another user's file): as they are made by the test.
REFUSED_WRITE = """
import logging, os, resource, sqlite3, sys, threading
from monitor.daemon.store_outage import StoreOutage
from monitor.journal.store import Store, unwritable

logging.basicConfig(level=logging.ERROR, format="%(levelname)s %(message)s")
path, how = sys.argv[1], sys.argv[2]
store = Store(path)
if how == "io":
    store.set_meta("first", "x")
    size = os.path.getsize(path + "-wal")
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, resource.RLIM_INFINITY))
if how == "busy":
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    store.conn.execute("PRAGMA busy_timeout=50")
try:
    for n in range(100):
        with store.batch():
            store.set_meta(f"filler {n}", "x" * 100_000)
    sys.exit("every write taken")
except sqlite3.Error as exc:
    outage = unwritable(exc, path)
assert outage is not None, "not a refusal"
resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
stop = threading.Event()
stop.set()
StoreOutage(stop, lambda: None).wait(outage, held=3)
"""


def outage_line(path: Path, how: str, prefix: Sequence[str] = ()) -> str:
    """The ERROR line the daemon logs as an outage of the store at ``path`` begins, ``how`` it was
    made (REFUSED_WRITE), run by ``prefix`` (setpriv, unshare)."""
    done = subprocess.run(
        [*prefix, sys.executable, "-c", REFUSED_WRITE, str(path), how],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and "Traceback" not in done.stderr, (done.returncode, done.stderr)
    errors = [line.removeprefix("ERROR ") for line in done.stderr.splitlines() if line.startswith("ERROR ")]
    assert len(errors) == 1, done.stderr
    return errors[0]


def began(path: Path, reason: str) -> str:
    """How the outage's line begins, before what to do."""
    return (
        f"Cannot write the store {path}: {reason}. 3 message(s) in hand stay unacknowledged, and the"
        " broker keeps what follows; trying again in 1 s, nothing lost meanwhile. "
    )


def test_a_read_only_store_file_is_named_with_what_to_do_not_told_to_free_space(tmp_path: Path) -> None:
    """A store whose file is read-only to the daemon was logged as "Free space on the store's
    disk", whatever the reason; the line names the file, its owner and mode, and says to restore
    them. Read-only for real: another user's file, the process without root's powers over files."""
    path = tmp_path / "store.db"
    Store(path).close()
    prefix = refused_to_this_user(path, 0o644)
    line = outage_line(path, "read-only", prefix)
    assert line == began(path, "the files are read-only (attempt to write a readonly database)") + (
        f"The file {path} is not writable by this user ({path.owner()!r} owns it, mode 0644): restore"
        " its owner and permissions for the user minewatch runs as."
    ), line


def test_an_io_error_is_said_so_not_told_to_free_space(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    line = outage_line(path, "io")
    assert line == began(path, "the disk reported an I/O error (disk I/O error)") + (
        "Check the store's disk (the kernel's log: dmesg) and any limit on the size of the daemon's"
        " files (ulimit -f, LimitFSIZE=)."
    ), line


def test_a_write_lock_held_too_long_is_said_so_not_told_to_free_space(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    line = outage_line(path, "busy")
    assert line == began(
        path, "another process held the write lock past the busy timeout (database is locked)"
    ) + ("Find what holds the store's write lock (a command or another daemon writing to it)."), line


def test_a_full_disk_is_told_to_free_space(tmp_path: Path) -> None:
    """A real full disk: a tmpfs of 2 MiB, mounted in a mount namespace of the process's own
    (root's, where the tests run so; skipped elsewhere)."""
    disk = tmp_path / "disk"
    mounted = on_a_small_disk(disk)
    line = outage_line(disk / "store.db", "full", mounted)
    assert line == began(disk / "store.db", "the disk is full (database or disk is full)") + (
        "Free space on the store's disk."
    ), line


# What the daemon's log advises for a store at argv[1] refusing writes with each code a write on a
# file system mounted read-only may fail with, one line each.
ADVICE_ON_EACH_CODE = """
import sqlite3, sys
from monitor.errors import StoreUnwritable
from monitor.journal.store import what_to_do

for code in (sqlite3.SQLITE_IOERR, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN):
    print(what_to_do(StoreUnwritable(sys.argv[1], "refused", code=code)))
"""


def test_a_file_system_mounted_read_only_is_said_so_not_told_to_free_space(tmp_path: Path) -> None:
    """A store whose file system the kernel remounted read-only after a disk's errors: its
    writes fail as an I/O error (or read-only files, or files that cannot be opened), and the
    advice says the mount, not the disk's space or the file's permissions. The mount is real (a
    tmpfs remounted read-only, in a mount namespace of the process's own); the outage is given
    its code by hand, as a running daemon's store cannot be remounted read-only while it holds
    it open for writing (the kernel refuses: busy), nor opened on one for writing."""
    disk = tmp_path / "disk"
    store = disk / "store.db"
    prefix = on_a_small_disk(disk, store=store, read_only=True)
    done = subprocess.run(
        [*prefix, sys.executable, "-c", ADVICE_ON_EACH_CODE, str(store)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    advice = (
        f"The store's file system ({disk}) is mounted read-only: check the disk (the kernel mounts one so"
        " after its errors: dmesg), then remount it read-write"
    )
    assert done.stdout.splitlines() == [advice] * 3, done.stdout
