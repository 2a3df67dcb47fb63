"""Store and forward for an edge publisher: an on-disk FIFO of encoded MQTT messages.

Every message goes into the queue first and leaves it only when the broker has
acknowledged it (PUBACK), so neither a broker outage nor a publisher restart loses
anything (Telegraf's disk buffer works the same way: write first, drop on accept).

    publisher ──put──► SQLite queue ──next_batch──► link (paho, QoS 1) ──PUBACK──► delete

The queue is bounded by a message count and a byte total. When a bound is hit the
*oldest* messages are dropped (the freshest data matters most for compliance, and a
gap at the start of an outage is easier to explain than a gap at its end); every drop
is recorded in the ``drops`` table and reported once in the next status heartbeat.

A disk that refuses writes (full, an I/O error: an edge device's card) does not stop the
sensor, and never keeps acknowledged messages in the file:

- Deleting needs disk too (the WAL takes the deleting transaction before the file does), so
  deletions come before any write, and a file of zeros beside the queue (``<queue>-reserve``,
  ``RESERVE_BYTES``) is given back to the filesystem when the disk refuses a deletion. It is
  made again, before anything else is written, once the disk has that room. Checkpoints never
  truncate the WAL: its space is reused from its start by the next transaction.
- What cannot be written waits in memory, in order, bounded like the queue (the oldest dropped,
  counted in the next heartbeat, said once in the log). It has its id already (the one it will
  have on disk), so the link sends it straight from memory; it goes to disk first whenever the
  disk takes it: into the file's free pages, which acknowledged messages leave, or with the
  whole reserve where the disk has room for it twice (in the WAL, then in the file). The WAL
  is copied into the file every few pages (``WAL_AUTOCHECKPOINT_PAGES``): what it holds beyond
  the file's end is what a checkpoint needs the disk for, and a WAL that cannot be copied into
  the file blocks every deletion.

A file found damaged (SQLite reads garbage: the card returned it, the file was overwritten or
cut short) is set aside under a new name, at the sensor's start as while it runs; running, the
queue goes on with a new file, keeping what waits in memory and the ids it gave, and says in
one line how many messages the damaged file held. A damaged file that cannot be set aside (its
folder read-only: a card the kernel remounted so after I/O errors) is left as it is; running,
the queue goes on without a disk, in memory and bounded like what waits there, so that what the
sensor measures is still sent while the broker takes it, and says so in one line with what to do
(at the start the sensor stops instead: the command's one line).

SQLite reads the file's first page (its header and the table of tables) when it opens it and
then keeps it in memory: damage to that page alone (the header zeroed, the tables' entries
overwritten) would be met only at the next start, with everything queued in the file set aside.
So the queue reads the whole first page back every ``FIRST_PAGE_CHECK_S`` while it writes, and
as it closes, right after copying the WAL into the file (the page on disk is then SQLite's own),
and compares it with the page as read back at open (``_first_page_sound`` says what of it is
judged how); a damaged first page is written again from SQLite's copy in memory, said in one
line, and nothing is lost; one the disk still returns damaged is met as any other damage.

No paho here: the queue is plain SQLite, used from one thread.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar

from monitor.claims import QueueClaim
from monitor.errors import StoreError
from monitor.failing_rounds import FailingRounds
from monitor.sqlite_files import refuses_writes, someone_elses

log = logging.getLogger("minewatch.sensors.queue")
_T = TypeVar("_T")

# What waits in memory while the disk refuses writes: hours of levels, seconds of raw audio.
HELD_MAX_MESSAGES = 100_000
HELD_MAX_BYTES = 64 * 1024 * 1024
# Room kept on the queue's disk for deleting acknowledged messages (a few transactions' WAL).
RESERVE_BYTES = 256 * 1024
DELETE_CHUNK = 100  # acknowledged ids deleted per transaction (each one's WAL stays small)
ROOM_MARGIN = 64 * 1024  # beyond twice a message's size, for a message written past the free pages
# How often the file's first page is read back (a page's read): SQLite reads it only at open.
FIRST_PAGE_CHECK_S = 60.0
SQLITE_MAGIC = b"SQLite format 3\x00"
# What to do about a damaged queue that cannot be set aside (said at the start and while running).
SET_ASIDE_REMEDY = "make its folder writable (a card remounted read-only?) or move the file away"
# SQLite copies the WAL into the file past this many pages (its default, 1,000, is 4 MiB): what
# the WAL holds beyond the file's end is what a checkpoint needs the disk for.
WAL_AUTOCHECKPOINT_PAGES = 16

_SCHEMA = """
CREATE TABLE IF NOT EXISTS messages (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,  -- publish order
    topic   TEXT NOT NULL,
    payload BLOB NOT NULL,
    qos     INTEGER NOT NULL DEFAULT 1,
    size    INTEGER NOT NULL,
    queued  REAL NOT NULL                        -- time.time() when queued
);
CREATE TABLE IF NOT EXISTS drops (
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    at        REAL NOT NULL,     -- when the bound was hit
    count     INTEGER NOT NULL,
    bytes     INTEGER NOT NULL,
    first_id  INTEGER NOT NULL,  -- oldest and newest message ids dropped
    last_id   INTEGER NOT NULL,
    reported  INTEGER NOT NULL DEFAULT 0
);
"""


@dataclass(frozen=True, slots=True)
class Queued:
    id: int
    topic: str
    payload: bytes
    qos: int


class MessageQueue(Protocol):
    """What sensors.link.Link drains: ForwardQueue on disk, MemoryQueue for the simulator."""

    def put(self, topic: str, payload: bytes, qos: int = 1) -> int: ...

    def delete(self, ids: list[int]) -> None: ...

    def next_batch(self, after_id: int, limit: int) -> list[Queued]: ...

    def __len__(self) -> int: ...


@dataclass(frozen=True, slots=True)
class QueueBounds:
    """At most this many messages and bytes wait on disk (0 = no bound of that kind)."""

    max_messages: int = 1_000_000
    max_bytes: int = 512 * 1024 * 1024

    def __post_init__(self) -> None:
        for name, value in (("max_messages", self.max_messages), ("max_bytes", self.max_bytes)):
            if value < 0:
                raise ValueError(f"{name}: a queue bound must not be negative (0: unbounded), got {value}")


class NoRoom(Exception):
    """The disk has not the room the queue keeps for deletions (said as a refusal of the disk's)."""


class _Reserve:
    """Room on the queue's disk kept for deleting acknowledged messages: a file of zeros beside
    the queue, given back to the filesystem when the disk refuses a deletion. Only the queue's
    publisher (claims.claim_queue) touches it, so its size is known without asking the disk."""

    def __init__(self, path: str, size: int) -> None:
        self.path, self.size = path, size
        try:
            self.have = os.path.getsize(path)
        except OSError:
            self.have = 0

    @property
    def whole(self) -> bool:
        return self.have >= self.size

    def make(self) -> bool:
        """Grow the file to its size while the disk has that room (never its last bytes for part of
        it); whether it is whole."""
        if self.whole:
            return True
        folder = os.path.dirname(os.path.abspath(self.path))
        try:
            st = os.statvfs(folder)
            if st.f_bavail * st.f_frsize < self.size - self.have:
                return False
            with open(self.path, "ab") as f:
                f.write(b"\0" * (self.size - self.have))  # written, not sparse: the blocks are taken now
                f.flush()
                os.fsync(f.fileno())
        except OSError:
            with contextlib.suppress(OSError):
                os.truncate(self.path, self.have)
            return False
        self.have = self.size
        return True

    def release(self) -> bool:
        """Give the room back to the filesystem; whether there was any."""
        if self.have == 0:
            return False
        try:
            os.truncate(self.path, 0)
        except OSError:
            return False
        self.have = 0
        return True


@dataclass(frozen=True, slots=True)
class _Held:
    topic: str
    payload: bytes
    qos: int
    queued: float

    @property
    def size(self) -> int:
        return len(self.topic) + len(self.payload)


class ForwardQueue:
    """A bounded FIFO of (topic, payload) on SQLite; ``path=":memory:"`` for a throwaway one."""

    def __init__(
        self, path: str | Path, bounds: QueueBounds = QueueBounds(), claim: QueueClaim | None = None
    ) -> None:
        """``claim``: this process's claim on the file (claims.claim_queue), taken before it is
        opened; the queue marks the file as a sensor's once it has read it as a queue, holds the
        claim from then on, and releases it when it closes."""
        self.path = str(path)
        self.bounds = bounds
        self.claim = claim
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._next_id = 1
        self._open()
        self._held: dict[int, _Held] = {}  # the disk refused them, oldest first
        self._held_bytes = 0
        self._held_drops = 0  # dropped from memory, not yet reported
        self.lost_from_memory = 0  # dropped from memory in this run
        self.dropped_from_disk = 0  # dropped from the file beyond its bounds in this run
        self.lost_to_damage = 0  # queued in a file found damaged in this run (set aside)
        self.lost_in_place = 0  # queued in a file found damaged that could not be set aside
        self.on_disk = self.path != ":memory:"  # False once a damaged file could not be set aside
        self._first_page_due = time.monotonic() + FIRST_PAGE_CHECK_S
        self._undeleted: list[int] = []  # acknowledged, still on disk
        self._reserve = None if self.path == ":memory:" else _Reserve(self.path + "-reserve", RESERVE_BYTES)
        if self._reserve is not None:
            self._reserve.make()
        self._refusals = FailingRounds(log, f"Writing the queue {self.path}")
        self._delete_refusals = FailingRounds(log, f"Deleting acknowledged messages from {self.path}")
        self.lost_at_close = 0  # what waited in memory when it closed

    def _open(self) -> None:
        """Connect to the file at the queue's path and read what it holds."""
        made = self.claim.made if self.claim is not None else not os.path.lexists(self.path)
        self.conn = sqlite3.connect(self.path, isolation_level=None)
        try:
            # Before anything writes: another program's database named by mistake is left as it is,
            # and so is a file with no tables (an empty one the user made) that no sensor made.
            foreign = someone_elses(self.conn, ("messages",))
            if foreign is None and not made and not self._a_sensors():
                foreign = (
                    "an empty file" if os.path.getsize(self.path) == 0 else "a SQLite database with no tables"
                )
            if foreign is not None:
                raise ValueError(f"{foreign}, not a sensor's queue; name a new file for the queue")
            # WAL + NORMAL: a message survives a process crash once put() returns; a power cut
            # may lose the last fraction of a second, which the sensor's own clock gap shows.
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=NORMAL")
            self.conn.execute(f"PRAGMA wal_autocheckpoint={WAL_AUTOCHECKPOINT_PAGES}")
            self.conn.executescript(_SCHEMA)
            row = self.conn.execute(
                "SELECT COUNT(*), COALESCE(SUM(size), 0), COALESCE(MAX(id), 0) FROM messages"
            )
            count, size, top = row.fetchone()
            seq = self.conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'messages'").fetchone()
        except BaseException:
            self.conn.close()
            raise
        if self.claim is not None:
            self.claim.mark_used()
        # The first page as SQLite read it at open, its table of tables and all: what the checks
        # compare the disk's with (None: the WAL could not be copied into the file yet).
        on_disk = self.path != ":memory:"
        self._first_page_kept = self._first_page_read() if on_disk and self._checkpoint() else None
        self._count, self._bytes = int(count), int(size)
        # Ids are given as messages are put, before the disk takes them: what waits in memory is
        # sent with the id it will have on disk. AUTOINCREMENT: never one a dropped message had;
        # after a damaged file, never one it had (the link sends only ids past those it sent).
        self._next_id = max(self._next_id, int(top) + 1, (int(seq[0]) if seq else 0) + 1)

    def _a_sensors(self) -> bool:
        """Whether a sensor made the file: it holds the queue's table, or was marked as a queue
        (``<queue>-owner``, claims.QueueClaim.mark_used) when a sensor first opened it."""
        listed = self.conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'messages'")
        return listed.fetchone() is not None or os.path.exists(self.path + "-owner")

    def _survive_damage(self, step: Callable[[], _T]) -> _T:
        """``step`` run; if it finds the file damaged (the disk returned garbage, the file was
        overwritten or cut short), the file is set aside as at the sensor's start, a new one
        started, and ``step`` run once more on it. What waits in memory stays there."""
        try:
            return step()
        except sqlite3.DatabaseError as exc:
            if not damaged(exc) or not self.on_disk:
                raise
            self._start_over(exc)
        return step()

    def _start_over(self, exc: sqlite3.DatabaseError) -> None:
        lost = self._count
        with contextlib.suppress(sqlite3.Error):
            self.conn.close()  # before its claim goes (the claim's file holds SQLite's locks)
        self._count = self._bytes = 0
        self._undeleted.clear()  # acknowledged rows of the damaged file: nothing left to delete
        try:
            aside = set_aside(Path(self.path))
        except OSError as refused:
            self.lost_in_place += lost
            self._go_on_in_memory(
                f"The queue {self.path} is damaged ({exc}) and cannot be set aside"
                f" ({refused.strerror or refused}): going on without a queue on disk; the {lost}"
                " message(s) queued in it are not sent from it (those already handed to the broker"
                " may still arrive)",
                SET_ASIDE_REMEDY,
            )
            return
        self.lost_to_damage += lost
        moved = (
            f"The queue {self.path} is damaged ({exc}): moved to {aside} with the {lost} message(s)"
            " queued in it, which are not sent from it (those already handed to the broker may"
            " still arrive)"
        )
        try:
            if self.claim is not None:
                self.claim = self.claim.renew()
            self._open()
        except (sqlite3.Error, OSError, StoreError) as refused:  # the disk full, failing
            self._go_on_in_memory(
                f"{moved}; a new queue cannot be started there ({refused}): going on without a queue on disk",
                "make room on its disk or name another one",
            )
            return
        log.error("%s; %d waiting in memory are kept; going on with a new queue", moved, len(self._held))

    def _go_on_in_memory(self, said: str, remedy: str) -> None:
        """No queue on disk to go on with (a damaged file that cannot be moved, left as it is
        with its claim held until close so that no other sensor opens it; or a new file refused):
        the queue goes on in memory, bounded like what waits there, so that what waits is sent,
        and what is measured from now on, while the broker takes it."""
        self.on_disk = False
        self._reserve = None  # no disk to keep room on
        self.bounds = QueueBounds(HELD_MAX_MESSAGES, HELD_MAX_BYTES)
        self.conn = sqlite3.connect(":memory:", isolation_level=None)
        self.conn.executescript(_SCHEMA)
        log.error(
            "%s, %d waiting in memory are kept and sent, and what is measured from now on waits in"
            " memory only (at most %d messages, %d MiB; lost if the sensor stops before the broker"
            " takes it): %s, then restart the sensor",
            said,
            len(self._held),
            HELD_MAX_MESSAGES,
            HELD_MAX_BYTES // (1024 * 1024),
            remedy,
        )

    # ------------------------------------------------------------------ writing

    def put(self, topic: str, payload: bytes, qos: int = 1) -> int:
        """Queue one message; returns its id (on disk, or waiting in memory while the disk refuses
        writes). May drop the oldest messages to stay in bounds."""
        msg_id = self._next_id
        self._next_id += 1
        held = _Held(topic, payload, qos, time.time())
        self._held[msg_id] = held
        self._held_bytes += held.size
        self._survive_damage(self._settle)
        self._bound_held()
        return msg_id

    def _settle(self) -> None:
        """Acknowledged messages deleted first, then the reserve made whole, then what waits in
        memory written: nothing written may take the room a deletion needs."""
        if time.monotonic() >= self._first_page_due:
            self._first_page_due = time.monotonic() + FIRST_PAGE_CHECK_S
            self._check_first_page()
        if self._undeleted and not self._delete_undeleted():
            return
        whole = self._reserve is None or self._reserve.make()
        if self._held:
            self._write_held(whole)

    def _check_first_page(self) -> None:
        """Read the file's first page back from the disk; if it is damaged, write it again from
        SQLite's copy in memory (whole: SQLite refuses a damaged first page when it reads one), so
        that the next start opens the file with all it holds. A first page that cannot be written
        (the disk full) or that the disk still returns damaged is met as any other damage (set
        aside), as the next open would meet it."""
        if not self.on_disk or self._first_page_sound():
            return
        try:
            # The queue keeps nothing in user_version: changing it writes the first page, whole,
            # to the WAL, and the checkpoint copies it over the damaged one. A write the disk
            # refuses (full) is rolled back and SQLite lets its copy go: the damage is met below.
            version = int(self.conn.execute("PRAGMA user_version").fetchone()[0])
            self.conn.execute(f"PRAGMA user_version = {version ^ 1}")
            rewritten = self._checkpoint()
        except sqlite3.Error as exc:
            if damaged(exc) or refuses_writes(exc) is None:
                raise
            rewritten = False
        if rewritten and self._first_page_sound():
            log.warning(
                "The queue %s's first page read back damaged from the disk: written again from the"
                " copy in memory, and the %d message(s) queued in it kept (the disk may be failing:"
                " if this is said again, replace it)",
                self.path,
                self._count,
            )
            return
        found = sqlite3.DatabaseError(
            "file is not a database: its first page reads back damaged from the disk"
        )
        found.sqlite_errorcode = sqlite3.SQLITE_NOTADB  # damaged(): met as the next open would meet it
        raise found

    def _first_page_sound(self) -> bool:
        """Whether the file's first page, read back from the disk right after the WAL was copied
        into the file (it is then SQLite's own), is the queue's. The queue's tables never change,
        so neither do most of its bytes: the header's fixed fields and the table of tables (bytes
        100 to the page's end, unused room included) must be as read back at open. The header's
        counts must be what SQLite counts (the file's pages at 28, its free pages at 36, the
        user_version at 60, which the repair changes), the first free-list page at 32 none with no
        free page and a page of the file with some (SQLite gives no other way to read it), and the
        change counter at 24 the same as its copy at 92 (SQLite writes both at once). The number of
        the SQLite that wrote the file last (at 96) is not judged: nothing reads it. Where the WAL
        could not be copied whole, the counts are not judged (the disk's may be older); where no
        page was read back at open, the header's fixed fields are (the format's text, the page
        size, the type of the page's table). A file not yet written beyond its header (a new
        queue: its pages in the WAL), or one that cannot be read (what SQLite meets next says
        why), is not judged here."""
        current = self._checkpoint()
        page = self._first_page_read()
        if page is None:
            return True
        kept = self._first_page_kept
        if kept is None or len(page) != len(kept):
            page_size = int.from_bytes(page[16:18], "big")
            sound = (
                page[:16] == SQLITE_MAGIC
                and (page_size if page_size != 1 else 65536) == self._page_size()
                and page[100] in (0x0D, 0x05)  # a table's leaf or interior page
            )
            if sound and current and len(page) == self._page_size():
                self._first_page_kept = page  # the WAL could not be copied at open: from now on
            return sound
        fixed = ((0, 24), (40, 60), (64, 92), (100, len(page)))
        if any(page[start:end] != kept[start:end] for start, end in fixed) or page[24:28] != page[92:96]:
            return False
        if not current:
            return True

        def word(offset: int) -> int:
            return int.from_bytes(page[offset : offset + 4], "big")

        pages, free, version = (
            int(self.conn.execute(f"PRAGMA {name}").fetchone()[0])
            for name in ("page_count", "freelist_count", "user_version")
        )
        trunk = word(32)
        return (word(28), word(36), word(60)) == (pages, free, version) and (
            trunk == 0 if free == 0 else 1 < trunk <= pages
        )

    def _first_page_read(self) -> bytes | None:
        """The file's first page as the disk returns it (shorter if the file is), or None: the
        file cannot be read, or holds no more than its header."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            first = os.pread(fd, self._page_size(), 0)
        except OSError:
            return None
        finally:
            os.close(fd)
        return first if len(first) > 100 else None

    def _write_held(self, reserve_whole: bool) -> None:
        """Write what waits in memory to disk, oldest first, until the disk refuses or lacks room.

        A message goes into the file's free pages (what acknowledged messages left), or, with the
        whole reserve, where the disk has room for it twice over: once in the WAL and once more
        when a checkpoint copies it into the file. A WAL that cannot be copied into the file
        blocks every deletion for good."""
        retried = False
        page = self._page_size()
        while self._held:
            msg_id = next(iter(self._held))
            held = self._held[msg_id]
            need = held.size + 2 * page  # its pages, and the index page it may split
            if self._free_bytes() < need and not (
                reserve_whole and self._disk_room() >= 2 * need + ROOM_MARGIN
            ):
                self._refusals.failed(
                    NoRoom(f"the disk is full (kept: {RESERVE_BYTES // 1024} KiB for deletions)")
                )
                return
            try:
                self.conn.execute(
                    "INSERT INTO messages (id, topic, payload, qos, size, queued) VALUES (?,?,?,?,?,?)",
                    (msg_id, held.topic, held.payload, held.qos, held.size, held.queued),
                )
            except sqlite3.Error as exc:
                if refuses_writes(exc) is None:
                    raise
                if not retried:  # once per call: the WAL's frames may be what is missing
                    retried = True
                    if self._checkpoint():
                        continue
                self._refusals.failed(exc)
                return
            del self._held[msg_id]
            self._held_bytes -= held.size
            self._count += 1
            self._bytes += held.size
        self._refusals.worked()
        self._enforce_bounds()

    def _disk_room(self) -> int:
        """Bytes free on the queue's disk (for this user)."""
        if self._reserve is None:
            return 1 << 62
        try:
            st = os.statvfs(os.path.dirname(os.path.abspath(self.path)))
        except OSError:
            return 0
        return st.f_bavail * st.f_frsize

    def _checkpoint(self) -> bool:
        """Copy the WAL into the queue's file, so that the next transaction writes the WAL from its
        start again (reusing its space: the WAL is never truncated); whether all of it was copied.
        SQLite checkpoints on its own only past 1,000 pages."""
        try:
            busy, frames, copied = self.conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        except sqlite3.Error:
            return False
        return bool(busy == 0 and frames == copied)

    def _page_size(self) -> int:
        return int(self.conn.execute("PRAGMA page_size").fetchone()[0])

    def _free_bytes(self) -> int:
        """Room in the queue's file that no message holds (what acknowledged messages left)."""
        try:
            pages = int(self.conn.execute("PRAGMA freelist_count").fetchone()[0])
        except sqlite3.Error as exc:
            if damaged(exc):
                raise
            return 0
        return pages * self._page_size()

    def _bound_held(self) -> None:
        """Drop the oldest of what waits in memory beyond its bounds (always keeping the newest)."""
        while len(self._held) > 1 and (
            len(self._held) > HELD_MAX_MESSAGES or self._held_bytes > HELD_MAX_BYTES
        ):
            msg_id = next(iter(self._held))
            self._held_bytes -= self._held.pop(msg_id).size
            self._held_drops += 1
            if not self.lost_from_memory:
                log.error(
                    "The disk still refuses the queue %s and %d messages (%d MiB) wait in memory, its"
                    " bound: the oldest are dropped from now on (each heartbeat's 'dropped' counts them)",
                    self.path,
                    len(self._held),
                    self._held_bytes // (1024 * 1024),
                )
            self.lost_from_memory += 1

    def _over(self) -> tuple[int, int]:
        """(messages, bytes) above the bounds."""
        b = self.bounds
        extra_n = max(0, self._count - b.max_messages) if b.max_messages else 0
        extra_b = max(0, self._bytes - b.max_bytes) if b.max_bytes else 0
        return extra_n, extra_b

    def _enforce_bounds(self) -> None:
        extra_n, extra_b = self._over()
        if not extra_n and not extra_b:
            return
        # Oldest first, until both bounds hold (always keep the newest message).
        dropped_ids: list[int] = []
        freed = 0
        for msg_id, size in self.conn.execute("SELECT id, size FROM messages ORDER BY id"):
            if len(dropped_ids) >= extra_n and freed >= extra_b:
                break
            if len(dropped_ids) + 1 >= self._count:
                break
            dropped_ids.append(msg_id)
            freed += size
        if not dropped_ids:
            return
        try:
            with self.conn:
                self.conn.execute("BEGIN")
                self.conn.execute("DELETE FROM messages WHERE id <= ?", (dropped_ids[-1],))
                self.conn.execute(
                    "INSERT INTO drops (at, count, bytes, first_id, last_id) VALUES (?,?,?,?,?)",
                    (time.time(), len(dropped_ids), freed, dropped_ids[0], dropped_ids[-1]),
                )
        except sqlite3.Error as exc:  # over its bounds a little longer: the next put tries again
            if refuses_writes(exc) is None:
                raise
            self._refusals.failed(exc)
            return
        self._count -= len(dropped_ids)
        self._bytes -= freed
        self.dropped_from_disk += len(dropped_ids)

    def delete(self, ids: list[int]) -> None:
        """Forget messages the broker has acknowledged (unknown ids are ignored)."""
        for msg_id in ids:
            held = self._held.pop(msg_id, None)
            if held is None:
                self._undeleted.append(msg_id)
            else:  # sent from memory: it never needs the disk
                self._held_bytes -= held.size
        self._survive_damage(self._settle)

    def _delete_undeleted(self) -> bool:
        """Delete the acknowledged messages still on disk; whether all are gone. A refusal is met
        with a checkpoint (the WAL reused from its start), then with the reserve given back, then
        with fewer at a time (a deletion of one message needs a few pages of WAL)."""
        chunk_size = DELETE_CHUNK
        checkpointed = False
        while self._undeleted:
            chunk = self._undeleted[:chunk_size]
            try:
                self._delete_rows(chunk)
            except sqlite3.Error as exc:
                if refuses_writes(exc) is None:
                    raise
                if not checkpointed:
                    checkpointed = True
                    self._checkpoint()
                elif self._reserve is not None and self._reserve.release():
                    log.warning(
                        "The disk of the queue %s is full: its reserve (%d KiB) is given back to"
                        " delete what the broker acknowledged",
                        self.path,
                        RESERVE_BYTES // 1024,
                    )
                    self._checkpoint()
                elif chunk_size > 1:
                    chunk_size //= 2
                else:
                    self._delete_refusals.failed(exc)
                    return False
                continue
            del self._undeleted[: len(chunk)]
        self._delete_refusals.worked()
        if self._held or (self._reserve is not None and not self._reserve.whole):
            self._checkpoint()  # the disk is tight: the next transaction reuses the WAL's space
        return True

    def _delete_rows(self, ids: list[int]) -> None:
        marks = ",".join("?" * len(ids))
        with self.conn:
            self.conn.execute("BEGIN")
            row = self.conn.execute(
                f"SELECT COUNT(*), COALESCE(SUM(size), 0) FROM messages WHERE id IN ({marks})", ids
            ).fetchone()
            self.conn.execute(f"DELETE FROM messages WHERE id IN ({marks})", ids)
        self._count -= int(row[0])
        self._bytes -= int(row[1])

    # ------------------------------------------------------------------ reading

    def next_batch(self, after_id: int, limit: int) -> list[Queued]:
        """Up to ``limit`` messages with id > ``after_id``, oldest first: those on disk, then those
        waiting in memory (all newer), so that a disk that refuses writes delays nothing."""

        def on_disk() -> list[Queued]:
            rows = self.conn.execute(
                "SELECT id, topic, payload, qos FROM messages WHERE id > ? ORDER BY id LIMIT ?",
                (after_id, limit),
            )
            return [Queued(int(r[0]), str(r[1]), bytes(r[2]), int(r[3])) for r in rows]

        out = self._survive_damage(on_disk)
        for msg_id, held in self._held.items():
            if len(out) >= limit:
                break
            if msg_id > after_id:
                out.append(Queued(msg_id, held.topic, held.payload, held.qos))
        return out

    def __len__(self) -> int:
        """Messages waiting: on disk and in memory."""
        return self._count + len(self._held)

    @property
    def held(self) -> int:
        """Messages waiting in memory because the disk refused them."""
        return len(self._held)

    @property
    def undeleted(self) -> int:
        """Acknowledged messages the disk has not let go of yet (a restart would send them again)."""
        return len(self._undeleted)

    @property
    def bytes(self) -> int:
        return self._bytes + self._held_bytes

    def dropped_total(self) -> int:
        def on_disk() -> int:
            return int(self.conn.execute("SELECT COALESCE(SUM(count), 0) FROM drops").fetchone()[0])

        return self._survive_damage(on_disk) + self._held_drops

    def take_unreported_drops(self) -> int:
        """Messages dropped since the last call (for the next status heartbeat); marks them reported."""
        held, self._held_drops = self._held_drops, 0

        def mark_reported() -> int:
            with self.conn:
                self.conn.execute("BEGIN")
                unreported = "SELECT COALESCE(SUM(count), 0) FROM drops WHERE reported = 0"
                row = self.conn.execute(unreported).fetchone()
                self.conn.execute("UPDATE drops SET reported = 1 WHERE reported = 0")
            return int(row[0])

        try:
            return self._survive_damage(mark_reported) + held
        except sqlite3.Error as exc:  # those on disk are reported once it takes the mark
            if refuses_writes(exc) is None:
                raise
            return held

    def close(self) -> None:
        self._first_page_due = 0.0  # read back before the next start opens it
        self._survive_damage(self._settle)  # a last try; what the disk still refuses is lost
        if self._undeleted:
            log.error(
                "%d acknowledged message(s) stay in %s: the disk refused to delete them; the next"
                " start sends them again (the daemon keeps the first copy)",
                len(self._undeleted),
                self.path,
            )
        self.lost_at_close = len(self._held)
        if self._held:
            log.error(
                "%d message(s) waiting in memory are lost: the disk refused to queue them in %s",
                len(self._held),
                self.path,
            )
            self._held.clear()  # len() now counts what is left on disk
            self._held_bytes = 0
        if not self.on_disk and self.path != ":memory:" and self._count:
            log.error(
                "%d message(s) waiting in memory are lost: the damaged queue %s could not be set aside",
                self._count,
                self.path,
            )
            self.lost_at_close += self._count
            self._count = self._bytes = 0  # nothing of them is on disk
        self.conn.close()
        if self.claim is not None:
            self.claim.release()  # after the connection: closing the claim's file drops its locks


def damaged(exc: BaseException) -> bool:
    """Whether ``exc`` says the file is no readable SQLite database any more (what a power cut
    while an SD card writes can leave): malformed, or not a database at all."""
    code = getattr(exc, "sqlite_errorcode", None)
    return (
        isinstance(exc, sqlite3.DatabaseError)
        and isinstance(code, int)
        and code & 0xFF in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)
    )


def set_aside(path: Path) -> Path:
    """Move a damaged queue (and its WAL and shared memory) to ``NAME.damaged-TIME[-N]``, a name no
    file has: nothing is written over. Returns the new name of the queue's file."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    n = 1
    while True:
        target = path.with_name(f"{path.name}.damaged-{stamp}" + (f"-{n}" if n > 1 else ""))
        if not any(Path(f"{target}{end}").exists() for end in ("", "-wal", "-shm")):
            break
        n += 1
    for end in ("", "-wal", "-shm"):  # the file first: a WAL left behind alone is ignored
        source, dest = Path(f"{path}{end}"), Path(f"{target}{end}")
        if not source.exists():
            continue
        try:
            os.link(source, dest)  # fails rather than replacing a file that appeared meanwhile
        except OSError as exc:
            if exc.errno == errno.EEXIST:
                raise
            source.rename(dest)  # a filesystem without hard links (vfat): checked just above
        else:
            source.unlink()
    return target


class MemoryQueue:
    """The ForwardQueue interface in memory, unbounded: for the simulator, which is no edge device
    (nothing to keep across a restart) and publishes hundreds of thousands of messages a run."""

    def __init__(self) -> None:
        self._messages: dict[int, Queued] = {}
        self._next_id = 0
        self._bytes = 0

    def put(self, topic: str, payload: bytes, qos: int = 1) -> int:
        self._next_id += 1
        self._messages[self._next_id] = Queued(self._next_id, topic, payload, qos)
        self._bytes += len(topic) + len(payload)
        return self._next_id

    def delete(self, ids: list[int]) -> None:
        for msg_id in ids:
            gone = self._messages.pop(msg_id, None)
            if gone is not None:
                self._bytes -= len(gone.topic) + len(gone.payload)

    def next_batch(self, after_id: int, limit: int) -> list[Queued]:
        # Ids only grow and are inserted in order, so the dict is already sorted by id.
        out: list[Queued] = []
        for msg_id, message in self._messages.items():
            if msg_id > after_id:
                out.append(message)
                if len(out) >= limit:
                    break
        return out

    def __len__(self) -> int:
        return len(self._messages)

    @property
    def bytes(self) -> int:
        return self._bytes

    def take_unreported_drops(self) -> int:
        return 0

    def close(self) -> None:
        self._messages.clear()
