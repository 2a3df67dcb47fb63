"""The outbox: a durable FIFO in the daemon's SQLite file (real SQLite, WAL mode, on disk)."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from monitor.errors import StoreError
from monitor.influx.outbox import Outbox


def connect(path: Path) -> sqlite3.Connection:
    """The store's side: its own connection, WAL mode, as the store opens it."""
    conn = sqlite3.connect(str(path))
    conn.execute("PRAGMA journal_mode=WAL")
    return conn


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "minewatch.db"


@pytest.fixture
def store_conn(db: Path) -> Iterator[sqlite3.Connection]:
    conn = connect(db)
    yield conn
    conn.close()


def test_fifo_order_and_peek_leaves_items(store_conn: sqlite3.Connection) -> None:
    outbox = Outbox(store_conn)
    outbox.put(f"item {i}" for i in range(10))
    store_conn.commit()
    assert outbox.pending() == 10
    first = outbox.peek(4)
    assert [item for _, item in first] == ["item 0", "item 1", "item 2", "item 3"]
    assert [i for i, _ in first] == sorted(i for i, _ in first)
    assert outbox.peek(4) == first  # peeking takes nothing
    outbox.ack([i for i, _ in first])
    assert [item for _, item in outbox.peek(100)] == [f"item {i}" for i in range(4, 10)]


def test_put_in_rolled_back_transaction_leaves_nothing(store_conn: sqlite3.Connection) -> None:
    store_conn.execute("CREATE TABLE records (id INTEGER PRIMARY KEY, body TEXT)")
    store_conn.commit()
    outbox = Outbox(store_conn)
    store_conn.execute("INSERT INTO records (body) VALUES ('r1')")
    outbox.put(["sound LAeq=50.0 1"])
    assert store_conn.in_transaction  # put did not commit: the store decides
    store_conn.rollback()
    assert outbox.pending() == 0
    assert store_conn.execute("SELECT count(*) FROM records").fetchone()[0] == 0

    # And committed together, both are there.
    store_conn.execute("INSERT INTO records (body) VALUES ('r2')")
    outbox.put(["sound LAeq=51.0 2"])
    store_conn.commit()
    assert outbox.pending() == 1


def test_put_inside_explicit_transaction_with_autocommit_connection(db: Path) -> None:
    conn = sqlite3.connect(str(db), isolation_level=None)
    outbox = Outbox(conn)
    conn.execute("BEGIN")
    outbox.put(["a", "b"])
    conn.execute("ROLLBACK")
    assert outbox.pending() == 0
    outbox.put(["c"])  # autocommit: each statement commits
    ids = [i for i, _ in outbox.peek(10)]
    outbox.reject(ids, "bad")  # copy and delete still happen together
    assert outbox.pending() == 0
    assert [r.item for r in outbox.rejected()] == ["c"]
    conn.close()


def test_creating_inside_callers_transaction_does_not_commit_it(store_conn: sqlite3.Connection) -> None:
    store_conn.execute("CREATE TABLE records (id INTEGER PRIMARY KEY)")
    store_conn.commit()
    store_conn.execute("INSERT INTO records DEFAULT VALUES")
    Outbox(store_conn, "other")
    assert store_conn.in_transaction
    store_conn.rollback()
    assert store_conn.execute("SELECT count(*) FROM records").fetchone()[0] == 0


def test_ack_and_reject(store_conn: sqlite3.Connection) -> None:
    outbox = Outbox(store_conn)
    outbox.put(["good 1", "bad", "good 2"])
    store_conn.commit()
    (a, _), (b, _), (c, _) = outbox.peek(3)
    outbox.attempted([b])
    outbox.reject([b], "field type conflict")
    outbox.ack([a, c])
    assert outbox.pending() == 0
    [rejected] = outbox.rejected()
    assert (rejected.id, rejected.item, rejected.reason) == (b, "bad", "field type conflict")
    assert rejected.attempts == 2  # one failed attempt, then the rejecting one
    assert rejected.rejected_at.endswith("Z")


def test_ack_and_reject_commit_themselves(db: Path, store_conn: sqlite3.Connection) -> None:
    outbox = Outbox(store_conn)
    outbox.put(["x", "y"])
    store_conn.commit()
    forwarder = Outbox.open(db)
    (x, _), (y, _) = forwarder.peek(2)
    forwarder.ack([x])
    forwarder.reject([y], "no")
    assert not forwarder.conn.in_transaction
    # Another connection sees the result at once.
    assert outbox.pending() == 0
    assert [r.item for r in outbox.rejected()] == ["y"]
    forwarder.close()


def test_many_ids_in_one_ack(store_conn: sqlite3.Connection) -> None:
    outbox = Outbox(store_conn)
    outbox.put(str(i) for i in range(2500))  # more than SQLite's host-parameter limit
    store_conn.commit()
    outbox.ack(i for i, _ in outbox.peek(2400))
    assert [item for _, item in outbox.peek(200)] == [str(i) for i in range(2400, 2500)]


def test_survives_reopening_the_file(db: Path) -> None:
    conn = connect(db)
    outbox = Outbox(conn)
    outbox.put(["one", "two", "three"])
    conn.commit()
    first_id = outbox.peek(1)[0][0]
    outbox.ack([first_id])
    outbox.reject([outbox.peek(1)[0][0]], "why")
    conn.close()

    reopened = Outbox(connect(db))
    assert reopened.pending() == 1
    assert [item for _, item in reopened.peek(10)] == ["three"]
    assert [r.reason for r in reopened.rejected()] == ["why"]
    # AUTOINCREMENT: ids are never reused, so a new item still sorts after old ones.
    reopened.put(["four"])
    reopened.conn.commit()
    ids = [i for i, _ in reopened.peek(10)]
    assert ids == sorted(ids) and ids[0] > first_id
    reopened.close()


def test_writer_thread_with_own_connection_sees_store_commits(
    db: Path, store_conn: sqlite3.Connection
) -> None:
    outbox = Outbox(store_conn)
    forwarder = Outbox.open(db)  # created here, used only by the thread below
    seen: list[str] = []
    done = threading.Event()

    def drain() -> None:
        while len(seen) < 50:
            batch = forwarder.peek(7)
            seen.extend(item for _, item in batch)
            forwarder.ack(i for i, _ in batch)
        done.set()

    thread = threading.Thread(target=drain)
    thread.start()
    for i in range(50):
        outbox.put([f"p{i}"])
        store_conn.commit()
    assert done.wait(10)
    thread.join()
    assert seen == [f"p{i}" for i in range(50)]
    forwarder.close()


@pytest.mark.parametrize("name", ["", "a b", "x;DROP TABLE t", "é"])
def test_bad_names_are_refused(store_conn: sqlite3.Connection, name: str) -> None:
    with pytest.raises(ValueError, match="outbox name"):
        Outbox(store_conn, name)


def test_the_last_item_a_target_took_is_kept_across_connections(
    db: Path, store_conn: sqlite3.Connection
) -> None:
    """The forwarder's probe after a restart (monitor/influx/client.py): the last item each
    target took, kept in the file with the ack that removed it, one per target."""
    outbox = Outbox(store_conn)
    outbox.put(["a", "b", "c"])
    store_conn.commit()
    assert outbox.taken("v1 http://x db=mw rp=") is None
    ids = [i for i, _ in outbox.peek(2)]
    outbox.ack(ids, taken=("v1 http://x db=mw rp=", "b"))
    outbox.keep_taken("v2 http://y org=o bucket=b", "c")

    reopened = Outbox.open(db)
    try:
        assert reopened.taken("v1 http://x db=mw rp=") == "b"
        assert reopened.taken("v2 http://y org=o bucket=b") == "c"
        assert reopened.taken("v1 http://elsewhere db=mw rp=") is None
        assert [item for _, item in reopened.peek(10)] == ["c"]  # kept queued
    finally:
        reopened.close()


def test_a_store_locked_past_the_wait_is_said_in_one_line(db: Path, store_conn: sqlite3.Connection) -> None:
    """Another connection holding the store (``locking_mode=EXCLUSIVE``: no one else reads it)
    past the outbox's wait ended the daemon's start with sqlite3's bare "database is locked" and a
    traceback. The outbox is opened as the store is (journal.store.open_patiently): a StoreError
    of one line, which the command line prints alone. The lock is real; the wait 0.3 s, not 30."""
    Outbox(store_conn)
    store_conn.close()
    holder = sqlite3.connect(str(db), isolation_level=None)
    holder.execute("PRAGMA locking_mode=EXCLUSIVE")
    holder.execute("BEGIN IMMEDIATE")
    holder.execute("DELETE FROM outbox_influx")  # the exclusive lock, held
    holder.execute("COMMIT")
    try:
        with pytest.raises(StoreError) as refused:
            Outbox.open(db, busy_timeout_s=0.3)
    finally:
        holder.close()
    assert str(refused.value) == (
        f"cannot open the store {str(db)!r} (its influx outbox):"
        " database is locked: another connection holds it (waited 0.3 s)"
    )
    Outbox.open(db).close()  # the lock gone
