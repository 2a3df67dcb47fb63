"""A durable FIFO of items waiting to be forwarded, kept in the daemon's SQLite file.

Store first, then forward (docs/CONTRIBUTING.md): the store inserts a record and its
outbox items in ONE transaction (``put`` does not commit), so a record that is in
the journal is also queued, and a crash can lose neither alone. The forwarder
reads the oldest items (``peek``), sends them and then either removes them
(``ack``) or moves them to the rejected table, kept as evidence (``reject``);
``requeue`` moves them back (`minewatch influx requeue`). The last item a target
(a server and its database) took is kept (``taken``): after a restart the forwarder
sends it alone to learn whether the server takes points at all (``bisect_write``).

    store thread                         forwarder thread
    ────────────                         ────────────────
    BEGIN                                peek(n) ─► send ─► ack(ids)
    INSERT record                                       └─► reject(ids, reason)
    outbox.put(lines)                                   └─► attempted(ids) (kept)
    COMMIT

Threads: a ``sqlite3.Connection`` must not be used by two threads at once, so the
store and the forwarder each hold their own connection to the same file (WAL mode
lets the forwarder read while the store writes). ``Outbox.open`` makes the
forwarder's connection with ``check_same_thread=False`` because it is usually
created on the main thread and then used only by the forwarder thread; access is
serialised by that ownership, never shared.

Delivery is at least once: an item sent but not yet acked when the process dies
is sent again after a restart. Influx points carry their own timestamp, so a
replayed point overwrites itself instead of doubling.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from monitor.journal.migrations import outbox_tables, outbox_taken_table
from monitor.journal.store import open_patiently

__all__ = ["Outbox", "RejectedItem"]

_NAME = re.compile(r"[A-Za-z0-9_]{1,48}")
# Keep each statement under SQLite's host-parameter limit (999 before 3.32).
_CHUNK = 500


@dataclass(frozen=True, slots=True)
class RejectedItem:
    id: int
    item: str
    attempts: int
    reason: str
    rejected_at: str


class Outbox:
    """A FIFO table ``outbox_<name>`` plus ``outbox_<name>_rejected`` for evidence."""

    def __init__(self, conn: sqlite3.Connection, name: str = "influx") -> None:
        if not _NAME.fullmatch(name):
            # The name becomes part of a table name, so it must never need quoting.
            raise ValueError(f"outbox name {name!r} may hold only letters, digits and '_' (at most 48)")
        self.conn = conn
        self.name = name
        self.table = f"outbox_{name}"
        self.rejected_table = f"outbox_{name}_rejected"
        self.taken_table = f"outbox_{name}_taken"
        was_in_transaction = conn.in_transaction
        # The daemon's outbox ("influx") is a migration of the store; the same DDL for any other.
        for statement in (outbox_tables(name) + outbox_taken_table(name)).split(";\n"):
            if statement.strip():
                conn.execute(statement)
        if not was_in_transaction:
            conn.commit()  # a caller's open transaction is theirs to commit

    @classmethod
    def open(cls, path: str | Path, name: str = "influx", *, busy_timeout_s: float = 30.0) -> Outbox:
        """A connection of the forwarder's own to the store's file (see the module docstring),
        opened as the store is (``open_patiently``): tried again while the file is locked, for
        ``busy_timeout_s``; then StoreError, one line."""

        def attempt() -> Outbox:
            conn = sqlite3.connect(str(path), timeout=busy_timeout_s, check_same_thread=False)
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                return cls(conn, name)
            except BaseException:
                conn.close()
                raise

        return open_patiently(str(path), attempt, what=f"its {name} outbox", patience_s=busy_timeout_s)

    def close(self) -> None:
        self.conn.close()

    # ------------------------------------------------------------------ writer side

    def put(self, items: Iterable[str]) -> None:
        """Queue ``items`` in the caller's transaction; the caller commits (or rolls back)."""
        self.conn.executemany(f"INSERT INTO {self.table} (item) VALUES (?)", ((item,) for item in items))

    # ------------------------------------------------------------------ forwarder side

    def peek(self, limit: int, *, after: int = 0) -> list[tuple[int, str]]:
        """Up to ``limit`` items queued after the item ``after`` (0: from the first), oldest first,
        left in place until acked or rejected."""
        rows = self.conn.execute(
            f"SELECT id, item FROM {self.table} WHERE id > ? ORDER BY id LIMIT ?", (after, limit)
        )
        return [(int(row[0]), str(row[1])) for row in rows]

    def newest(self) -> tuple[int, str] | None:
        """The item queued last, left in place (the forwarder's probe: ``bisect_write``)."""
        row = self.conn.execute(f"SELECT id, item FROM {self.table} ORDER BY id DESC LIMIT 1").fetchone()
        return None if row is None else (int(row[0]), str(row[1]))

    def pending(self) -> int:
        return int(self.conn.execute(f"SELECT count(*) FROM {self.table}").fetchone()[0])

    def ack(self, ids: Iterable[int], *, taken: tuple[str, str] | None = None) -> None:
        """Delivered: remove them, and keep ``taken`` (target, item) as the last item that target
        took (``taken``). Commits."""
        with self._transaction():
            for chunk in _chunks(list(ids)):
                marks = ",".join("?" * len(chunk))
                self.conn.execute(f"DELETE FROM {self.table} WHERE id IN ({marks})", chunk)
            if taken is not None:
                self._keep_taken(*taken)

    def keep_taken(self, target: str, item: str) -> None:
        """``target`` took ``item`` (one that was not queued, or is kept queued). Commits."""
        with self._transaction():
            self._keep_taken(target, item)

    def taken(self, target: str) -> str | None:
        """The last item ``target`` took, kept across restarts; None if it took none yet."""
        row = self.conn.execute(f"SELECT item FROM {self.taken_table} WHERE target = ?", (target,)).fetchone()
        return None if row is None else str(row[0])

    def _keep_taken(self, target: str, item: str) -> None:
        self.conn.execute(
            f"INSERT OR REPLACE INTO {self.taken_table} (target, item) VALUES (?, ?)", (target, item)
        )

    def reject(self, ids: Iterable[int], reason: str) -> None:
        """Refused for good: move them to the rejected table with ``reason``. Commits."""
        with self._transaction():
            for chunk in _chunks(list(ids)):
                marks = ",".join("?" * len(chunk))
                self.conn.execute(
                    f"INSERT OR REPLACE INTO {self.rejected_table} (id, item, attempts, enqueued_at, reason)"
                    f" SELECT id, item, attempts + 1, enqueued_at, ? FROM {self.table} WHERE id IN ({marks})",
                    (reason, *chunk),
                )
                self.conn.execute(f"DELETE FROM {self.table} WHERE id IN ({marks})", chunk)

    def attempted(self, ids: Iterable[int]) -> None:
        """A send failed and will be retried: count the attempt (evidence only). Commits."""
        with self._transaction():
            for chunk in _chunks(list(ids)):
                marks = ",".join("?" * len(chunk))
                self.conn.execute(
                    f"UPDATE {self.table} SET attempts = attempts + 1 WHERE id IN ({marks})", chunk
                )

    def attempts(self, item_id: int) -> int:
        row = self.conn.execute(f"SELECT attempts FROM {self.table} WHERE id = ?", (item_id,)).fetchone()
        return int(row[0]) if row else 0

    def rejected(self, limit: int = 1000) -> list[RejectedItem]:
        """The rejected items, oldest first."""
        rows = self.conn.execute(
            f"SELECT id, item, attempts, reason, rejected_at FROM {self.rejected_table} ORDER BY id LIMIT ?",
            (limit,),
        )
        return [RejectedItem(int(r[0]), str(r[1]), int(r[2]), str(r[3]), str(r[4])) for r in rows]

    def rejected_reasons(self) -> list[tuple[str, int]]:
        """Each reason the rejected items were refused with, and how many, most first."""
        rows = self.conn.execute(
            f"SELECT reason, count(*) AS n FROM {self.rejected_table} GROUP BY reason ORDER BY n DESC, reason"
        )
        return [(str(r[0]), int(r[1])) for r in rows]

    def rejected_ids(self, reason: str) -> Iterator[int]:
        """The ids of the items rejected with ``reason``, in order (for ``influx requeue --id``)."""
        rows = self.conn.execute(
            f"SELECT id FROM {self.rejected_table} WHERE reason = ? ORDER BY id", (reason,)
        )
        return (int(r[0]) for r in rows)

    def requeue(self, ids: Iterable[int] | None = None) -> int:
        """Move rejected items (all, or those of ``ids``) back into the queue, behind what waits
        there (new ids); their attempts are kept. Returns how many. Commits."""
        moved = 0
        with self._transaction():
            if ids is None:
                ids = [int(r[0]) for r in self.conn.execute(f"SELECT id FROM {self.rejected_table}")]
            for chunk in _chunks(sorted(set(ids))):
                marks = ",".join("?" * len(chunk))
                moved += self.conn.execute(
                    f"INSERT INTO {self.table} (item, attempts, enqueued_at)"
                    f" SELECT item, attempts, enqueued_at FROM {self.rejected_table}"
                    f" WHERE id IN ({marks}) ORDER BY id",
                    chunk,
                ).rowcount
                self.conn.execute(f"DELETE FROM {self.rejected_table} WHERE id IN ({marks})", chunk)
        return moved

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        # Under isolation_level=None (autocommit) each statement would commit on its
        # own; a reject's copy and delete must happen together.
        if self.conn.isolation_level is None and not self.conn.in_transaction:
            self.conn.execute("BEGIN")
        try:
            yield
        except BaseException:
            self.conn.rollback()
            raise
        self.conn.commit()


def _chunks(ids: Sequence[int]) -> Iterator[list[int]]:
    for start in range(0, len(ids), _CHUNK):
        yield [int(i) for i in ids[start : start + _CHUNK]]
