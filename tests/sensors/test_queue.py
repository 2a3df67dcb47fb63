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
