"""The hourly histograms the store keeps (sound_hours, kept by triggers) against the hourly
levels counted from the seconds themselves: the same LAeq, L10, L90 and seconds, whatever the
order the seconds came in, duplicates, pruning, and a store that had seconds before the table."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from monitor.journal import queries
from monitor.journal.store import Store
from monitor.wire.canonical import to_us
from rules.model import SoundLevels

START = datetime(2026, 11, 2, 5, 0, tzinfo=UTC)
HOUR = 3_600_000_000


def fill(store: Store, seconds: list[int], rng: random.Random) -> None:
    items = [
        (SoundLevels("s1", sensor, START + timedelta(seconds=s), 1.0, db, db + 2, db + 15), "levels", False)
        for s in seconds
        for sensor, db in (("n1", round(rng.uniform(35, 105), 2)), ("n2", round(rng.gauss(60, 8), 1)))
    ]
    with store.batch():
        store.append_sounds(items, START + timedelta(days=1))


def assert_same(store: Store, start_us: int, end_us: int) -> int:
    kept = [dict(r) for r in queries.hourly_levels_of_site(store.conn, "s1", start_us, end_us)]
    counted = [dict(r) for r in queries.hourly_levels_from_seconds(store.conn, "s1", start_us, end_us)]
    assert [(r["sensor"], r["hour"], r["seconds"], r["l10"], r["l90"]) for r in kept] == [
        (r["sensor"], r["hour"], r["seconds"], r["l10"], r["l90"]) for r in counted
    ]
    assert [r["laeq"] for r in kept] == pytest.approx([r["laeq"] for r in counted], abs=1e-9)
    return len(kept)


def test_kept_hours_equal_the_seconds(tmp_path: Path) -> None:
    rng = random.Random(26)
    store = Store(tmp_path / "store.db")
    everything = list(range(0, 5 * 3600 + 1234))
    late = set(rng.sample(everything, 3000))  # stored later, out of order: as late data arrives
    fill(store, [s for s in everything if s not in late], rng)
    fill(store, sorted(late, reverse=True), rng)
    fill(store, everything[:500], rng)  # resent seconds: kept once (INSERT OR IGNORE), not counted again
    start_us, end_us = to_us(START), to_us(START + timedelta(hours=6))
    assert assert_same(store, start_us, end_us) == 2 * 6  # five whole hours and a part, two meters
    # Windows with parts of hours at either end, and within one hour.
    assert assert_same(store, start_us + 1_234_567_890, end_us - 987_654_321) == 2 * 6
    assert assert_same(store, start_us + HOUR + 60_000_000, start_us + HOUR + 600_000_000) == 2
    total = store.conn.execute("SELECT SUM(n) FROM sound_hours").fetchone()[0]
    assert total == 2 * len(everything)
    # Pruning the first 90 minutes takes their seconds out of the kept hours too.
    store.prune(START + timedelta(minutes=90))
    assert assert_same(store, start_us, end_us) == 2 * 5
    assert store.conn.execute("SELECT SUM(n) FROM sound_hours").fetchone()[0] == 2 * (len(everything) - 5400)
    assert store.conn.execute("SELECT COUNT(*) FROM sound_hours WHERE n <= 0").fetchone()[0] == 0
    store.close()


def test_a_store_with_seconds_before_the_table_is_filled_when_opened(tmp_path: Path) -> None:
    rng = random.Random(7)
    db = tmp_path / "store.db"
    store = Store(db)
    # As a store made before the migration: no table, no triggers, no record of it.
    store.conn.executescript(
        "DROP TRIGGER sound_hours_insert; DROP TRIGGER sound_hours_delete; DROP TRIGGER sound_hours_update;"
        " DROP TABLE sound_hours; DELETE FROM migrations WHERE name = 'sound-hours';"
    )
    fill(store, list(range(0, 7200, 3)), rng)
    store.close()
    store = Store(db)
    assert assert_same(store, to_us(START), to_us(START + timedelta(hours=2))) == 2 * 2
    assert store.conn.execute("SELECT SUM(n) FROM sound_hours").fetchone()[0] == 2 * 2400
    store.close()


def test_a_batch_without_duplicates_is_stored_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The triggers' rows do not make append_sounds think a batch held a duplicate (it would redo
    the batch row by row, chaining each with Store.link: here made to fail)."""
    store = Store(tmp_path / "store.db")

    def row_by_row(*args: object, **kwargs: object) -> None:
        raise AssertionError("the batch was redone row by row")

    fill(store, [0, 1, 2], random.Random(1))
    monkeypatch.setattr(store, "link", row_by_row)
    fill(store, list(range(3, 400)), random.Random(2))
    assert store.conn.execute("SELECT SUM(n) FROM sound_hours").fetchone()[0] == 2 * 400
    store.close()
