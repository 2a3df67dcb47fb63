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
sensor. What cannot be written waits in memory, in order, bounded like the queue (the oldest
dropped and reported first), and goes to disk before anything newer once the disk takes it:
acknowledged messages deleted from the queue free pages in its file, so a connected sensor
makes its own room. Acknowledged ids the disk would not let go of are deleted later (until then
a restart would send them again, which the daemon takes as duplicates).

No paho here: the queue is plain SQLite, used from one thread.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from monitor.failing_rounds import FailingRounds
from monitor.sqlite_files import refuses_writes, someone_elses

log = logging.getLogger("minewatch.sensors.queue")

# What waits in memory while the disk refuses writes: hours of levels, seconds of raw audio.
HELD_MAX_MESSAGES = 100_000
HELD_MAX_BYTES = 64 * 1024 * 1024

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


class ForwardQueue:
    """A bounded FIFO of (topic, payload) on SQLite; ``path=":memory:"`` for a throwaway one."""

    def __init__(self, path: str | Path, bounds: QueueBounds = QueueBounds()) -> None:
        self.path = str(path)
        self.bounds = bounds
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self.conn = sqlite3.connect(self.path, isolation_level=None)
        # Before anything writes: another program's database named by mistake is left as it is.
        foreign = someone_elses(self.conn, ("messages",))
        if foreign is not None:
            self.conn.close()
            raise ValueError(f"{foreign}, not a sensor's queue; name a new file for the queue")
        # WAL + NORMAL: a message survives a process crash once put() returns; a power cut
        # may lose the last fraction of a second, which the sensor's own clock gap shows.
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=NORMAL")
        self.conn.executescript(_SCHEMA)
        row = self.conn.execute("SELECT COUNT(*), COALESCE(SUM(size), 0) FROM messages").fetchone()
        self._count, self._bytes = int(row[0]), int(row[1])
        self._held: deque[tuple[str, bytes, int, float]] = deque()  # the disk refused them, oldest first
        self._held_bytes = 0
        self._held_drops = 0  # dropped from memory, not yet reported
        self._undeleted: list[int] = []  # acknowledged, the disk would not let go of them yet
        self._refusals = FailingRounds(log, f"Writing the queue {self.path}")

    # ------------------------------------------------------------------ writing

    def put(self, topic: str, payload: bytes, qos: int = 1) -> int:
        """Queue one message; returns its id (0 while the disk refuses writes and it waits in
        memory). May drop the oldest messages to stay in bounds."""
        self._held.append((topic, payload, qos, time.time()))
        self._held_bytes += len(topic) + len(payload)
        written = self._write_held()
        self._bound_held()
        return written

    def _write_held(self) -> int:
        """Write what waits in memory to disk, oldest first, until the disk refuses; the last id."""
        last = 0
        emptied_wal = False
        while self._held:
            topic, payload, qos, queued = self._held[0]
            size = len(topic) + len(payload)
            try:
                cur = self.conn.execute(
                    "INSERT INTO messages (topic, payload, qos, size, queued) VALUES (?,?,?,?,?)",
                    (topic, payload, qos, size, queued),
                )
            except sqlite3.Error as exc:
                if refuses_writes(exc) is None:
                    raise
                if not emptied_wal:  # once per call: the WAL's space may be what is missing
                    emptied_wal = True
                    if self._empty_wal():
                        continue
                self._refusals.failed(exc)
                return 0
            self._held.popleft()
            self._held_bytes -= size
            self._count += 1
            self._bytes += size
            assert cur.lastrowid is not None
            last = cur.lastrowid
        self._refusals.worked()
        self._enforce_bounds()
        return last

    def _empty_wal(self) -> bool:
        """Copy the WAL into the queue's file and cut it to nothing, giving its space back; whether
        that was done. SQLite checkpoints on its own only past 1,000 pages, so a disk that filled
        before then keeps the WAL at its size, and the file has room (acknowledged messages'
        pages) that only a checkpoint makes usable."""
        try:
            busy, _, _ = self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        except sqlite3.Error:
            return False
        return busy == 0

    def _bound_held(self) -> None:
        """Drop the oldest of what waits in memory beyond its bounds (always keeping the newest)."""
        while len(self._held) > 1 and (
            len(self._held) > HELD_MAX_MESSAGES or self._held_bytes > HELD_MAX_BYTES
        ):
            topic, payload, _, _ = self._held.popleft()
            self._held_bytes -= len(topic) + len(payload)
            self._held_drops += 1

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

    def delete(self, ids: list[int]) -> None:
        """Forget messages the broker has acknowledged (unknown ids are ignored)."""
        ids = self._undeleted + ids
        if not ids:
            return
        try:
            with self.conn:
                self.conn.execute("BEGIN")
                gone = [0, 0]
                for start in range(0, len(ids), 500):
                    chunk = ids[start : start + 500]
                    marks = ",".join("?" * len(chunk))
                    row = self.conn.execute(
                        f"SELECT COUNT(*), COALESCE(SUM(size), 0) FROM messages WHERE id IN ({marks})", chunk
                    ).fetchone()
                    self.conn.execute(f"DELETE FROM messages WHERE id IN ({marks})", chunk)
                    gone[0] += int(row[0])
                    gone[1] += int(row[1])
        except sqlite3.Error as exc:  # kept to delete on a later call
            if refuses_writes(exc) is None:
                raise
            self._refusals.failed(exc)
            self._undeleted = ids
            return
        self._undeleted = []
        self._count -= gone[0]
        self._bytes -= gone[1]
        if self._held:  # pages freed: what waits in memory may fit now
            self._write_held()

    # ------------------------------------------------------------------ reading

    def next_batch(self, after_id: int, limit: int) -> list[Queued]:
        """Up to ``limit`` messages with id > ``after_id``, oldest first (what waits in memory
        goes out once it is on disk: its order is after everything there)."""
        rows = self.conn.execute(
            "SELECT id, topic, payload, qos FROM messages WHERE id > ? ORDER BY id LIMIT ?", (after_id, limit)
        )
        return [Queued(int(r[0]), str(r[1]), bytes(r[2]), int(r[3])) for r in rows]

    def __len__(self) -> int:
        """Messages waiting: on disk and in memory."""
        return self._count + len(self._held)

    @property
    def held(self) -> int:
        """Messages waiting in memory because the disk refused them."""
        return len(self._held)

    @property
    def bytes(self) -> int:
        return self._bytes + self._held_bytes

    def dropped_total(self) -> int:
        row = self.conn.execute("SELECT COALESCE(SUM(count), 0) FROM drops").fetchone()
        return int(row[0]) + self._held_drops

    def take_unreported_drops(self) -> int:
        """Messages dropped since the last call (for the next status heartbeat); marks them reported."""
        held, self._held_drops = self._held_drops, 0
        try:
            with self.conn:
                self.conn.execute("BEGIN")
                unreported = "SELECT COALESCE(SUM(count), 0) FROM drops WHERE reported = 0"
                row = self.conn.execute(unreported).fetchone()
                self.conn.execute("UPDATE drops SET reported = 1 WHERE reported = 0")
        except sqlite3.Error as exc:  # those on disk are reported once it takes the mark
            if refuses_writes(exc) is None:
                raise
            return held
        return int(row[0]) + held

    def close(self) -> None:
        if self._held:  # a last try; what the disk still refuses is lost with the process
            self._write_held()
        if self._held:
            log.error(
                "%d message(s) waiting in memory are lost: the disk refused to queue them in %s",
                len(self._held),
                self.path,
            )
            self._held.clear()  # len() now counts what is left on disk
            self._held_bytes = 0
        self.conn.close()


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
