"""The store-and-forward queue on its own: order, bounds, drop reporting, restart."""

from __future__ import annotations

from pathlib import Path

import pytest

from sensors.queue import ForwardQueue, QueueBounds


def test_fifo_and_delete(tmp_path: Path) -> None:
    q = ForwardQueue(tmp_path / "q.db")
    ids = [q.put(f"t/{i}", f"p{i}".encode()) for i in range(5)]
    batch = q.next_batch(0, 3)
    assert [m.topic for m in batch] == ["t/0", "t/1", "t/2"]
    assert [m.topic for m in q.next_batch(batch[-1].id, 10)] == ["t/3", "t/4"]
    q.delete(ids[:2])
    assert len(q) == 3 and [m.payload for m in q.next_batch(0, 10)] == [b"p2", b"p3", b"p4"]
    q.delete(ids[:2])  # acknowledging twice is harmless
    assert len(q) == 3


def test_survives_a_restart(tmp_path: Path) -> None:
    q = ForwardQueue(tmp_path / "q.db")
    for i in range(3):
        q.put("t", bytes([i]))
    q.close()
    again = ForwardQueue(tmp_path / "q.db")
    assert len(again) == 3 and again.bytes == 3 * 2
    assert [m.payload for m in again.next_batch(0, 10)] == [b"\x00", b"\x01", b"\x02"]


@pytest.mark.parametrize(
    ("bounds", "kept"),
    [
        (QueueBounds(max_messages=4, max_bytes=0), ["m6", "m7", "m8", "m9"]),
        # Each message is 1 (topic) + 2 (payload) bytes: 9 bytes hold three.
        (QueueBounds(max_messages=0, max_bytes=9), ["m7", "m8", "m9"]),
    ],
)
def test_bound_drops_the_oldest_and_reports_once(
    tmp_path: Path, bounds: QueueBounds, kept: list[str]
) -> None:
    q = ForwardQueue(tmp_path / "q.db", bounds)
    for i in range(10):
        q.put("t", f"m{i}".encode())
    assert [m.payload.decode() for m in q.next_batch(0, 100)] == kept
    assert q.dropped_total() == 10 - len(kept)
    assert q.take_unreported_drops() == 10 - len(kept)
    assert q.take_unreported_drops() == 0  # reported once
    first, last = q.conn.execute("SELECT MIN(first_id), MAX(last_id) FROM drops").fetchone()
    assert (first, last) == (1, 10 - len(kept))  # oldest first


def test_bounds_are_checked() -> None:
    with pytest.raises(ValueError, match="negative"):
        QueueBounds(max_messages=-1)


def full_queue(tmp_path: Path) -> ForwardQueue:
    """A queue whose file may not grow (SQLite's own page limit: a real SQLITE_FULL, as from a
    full disk) after a few messages; the WAL emptied first so that its pages count."""
    q = ForwardQueue(tmp_path / "q.db")
    q.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    pages = q.conn.execute("PRAGMA page_count").fetchone()[0]
    q.conn.execute(f"PRAGMA max_page_count = {pages + 2}")
    return q


def test_a_full_disk_keeps_messages_in_memory_in_order_until_acknowledged_ones_make_room(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    q = full_queue(tmp_path)
    sent = [f"m{i:03d}".encode() * 500 for i in range(40)]  # 2 kB each: a page holds one
    ids = [q.put("t", payload) for payload in sent]
    assert q.held > 0  # the disk refused some; they wait in memory, with the ids they will have
    assert ids == list(range(1, 41))
    assert len(q) == 40  # nothing lost
    on_disk = q.next_batch(0, 100)
    assert [m.payload for m in on_disk] == sent[: len(on_disk)]
    refused = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert len(refused) == 1 and "failed: database or disk is full" in refused[0]  # once, not per put
    # What waits in memory is sent from there after what is on disk (the link needs no disk).
    assert [m.payload for m in q.next_batch(0, 100)] == sent
    # The broker acknowledges what was on disk, a little at a time: its pages take what waited,
    # oldest first.
    taken: list[bytes] = []
    while len(q):
        batch = q.next_batch(0, 2)
        assert batch, "what waits in memory reaches the disk as acknowledged rows make room"
        taken += [m.payload for m in batch]
        q.delete([m.id for m in batch])
    assert taken == sent
    assert q.held == 0 and q.take_unreported_drops() == 0
    assert "works again" in caplog.records[-1].getMessage(), [r.getMessage() for r in caplog.records]
    q.close()


def test_what_waits_in_memory_is_bounded_dropping_the_oldest_and_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sensors.queue.HELD_MAX_MESSAGES", 5)
    q = full_queue(tmp_path)
    for i in range(60):
        q.put("t", f"m{i:03d}".encode() * 500)
    assert q.held == 5
    on_disk = len(q) - q.held
    assert q.take_unreported_drops() == 60 - on_disk - 5
    assert q.take_unreported_drops() == 0  # reported once
    q.conn.execute("PRAGMA max_page_count = 100000")  # space again
    q.put("t", b"last")
    assert q.held == 0
    payloads = [m.payload for m in q.next_batch(0, 100)]
    assert payloads[-6:] == [f"m{i:03d}".encode() * 500 for i in range(55, 60)] + [b"last"]
    q.close()
