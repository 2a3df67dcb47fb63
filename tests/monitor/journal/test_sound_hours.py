"""The hourly histograms the store keeps (sound_hours: counted by Store.keep_sound_hours as each
hour of data ends, the seconds stored later in a counted hour by triggers) against the hourly
levels counted from the seconds themselves: the same LAeq, L10, L90 and seconds, whatever the
order the seconds came in, duplicates, pruning, hours not counted yet, and a store that had
seconds before the table."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from monitor.journal import migrations, queries
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


def kept_seconds(store: Store) -> int:
    return store.conn.execute("SELECT COALESCE(SUM(n), 0) FROM sound_hours").fetchone()[0]


def keep(store: Store, until_hour: int) -> int:
    with store.batch():
        return store.keep_sound_hours("s1", until_hour)


def test_kept_hours_equal_the_seconds(tmp_path: Path) -> None:
    rng = random.Random(26)
    store = Store(tmp_path / "store.db")
    first_hour = to_us(START) // HOUR
    everything = list(range(0, 5 * 3600 + 1234))
    late = set(rng.sample(everything, 3000))  # stored later, out of order: as late data arrives
    fill(store, [s for s in everything if s not in late], rng)
    start_us, end_us = to_us(START), to_us(START + timedelta(hours=6))
    assert kept_seconds(store) == 0  # nothing counted yet: every hour read from its seconds
    assert assert_same(store, start_us, end_us) == 2 * 6
    assert keep(store, first_hour + 3) == first_hour + 3  # three hours counted, once
    assert kept_seconds(store) == 2 * sum(1 for s in everything if s < 3 * 3600 and s not in late)
    assert keep(store, first_hour + 2) == first_hour + 3  # an earlier hour: nothing to do
    fill(store, sorted(late, reverse=True), rng)  # late seconds in counted hours: the triggers
    fill(store, everything[:500], rng)  # resent seconds: kept once (INSERT OR IGNORE), not counted again
    assert kept_seconds(store) == 2 * 3 * 3600
    assert assert_same(store, start_us, end_us) == 2 * 6  # three hours kept, three from the seconds
    keep(store, first_hour + 6)
    assert kept_seconds(store) == 2 * len(everything)
    assert assert_same(store, start_us, end_us) == 2 * 6  # five whole hours and a part, two meters
    # Windows with parts of hours at either end, and within one hour.
    assert assert_same(store, start_us + 1_234_567_890, end_us - 987_654_321) == 2 * 6
    assert assert_same(store, start_us + HOUR + 60_000_000, start_us + HOUR + 600_000_000) == 2
    # Pruning the first 90 minutes takes their seconds out of the kept hours too.
    store.prune(START + timedelta(minutes=90))
    assert assert_same(store, start_us, end_us) == 2 * 5
    assert kept_seconds(store) == 2 * (len(everything) - 5400)
    assert store.conn.execute("SELECT COUNT(*) FROM sound_hours WHERE n <= 0").fetchone()[0] == 0
    store.close()


def test_seconds_moved_between_counted_and_uncounted_hours(tmp_path: Path) -> None:
    """An UPDATE of a second's time or level (none of minewatch's own writes makes one, a
    repair may) moves it out of its kept hour's histogram and into the other's if counted."""
    store = Store(tmp_path / "store.db")
    fill(store, list(range(0, 7200, 10)), random.Random(3))
    first_hour = to_us(START) // HOUR
    keep(store, first_hour + 1)
    moved = to_us(START + timedelta(seconds=100))
    with store.batch():  # from the counted hour into the next, not counted yet
        store.conn.execute("UPDATE sound SET ts_us = ts_us + ? WHERE ts_us = ?", (HOUR + 1, moved))
    assert kept_seconds(store) == 2 * 359
    with store.batch():  # and back, with another level
        store.conn.execute(
            "UPDATE sound SET ts_us = ?, LAeq = 99.9 WHERE ts_us = ?", (moved, moved + HOUR + 1)
        )
    assert kept_seconds(store) == 2 * 360
    keep(store, first_hour + 2)
    assert assert_same(store, to_us(START), to_us(START + timedelta(hours=2))) == 2 * 2
    store.close()


def test_a_site_without_seconds_is_counted_from_its_first(tmp_path: Path) -> None:
    """Keeping hours of a site with no seconds yet records the hour (none to count); seconds
    stored before it later, and after it, are counted each once."""
    store = Store(tmp_path / "store.db")
    first_hour = to_us(START) // HOUR
    assert keep(store, first_hour + 1) == first_hour + 1
    fill(store, list(range(0, 7200, 60)), random.Random(4))
    assert kept_seconds(store) == 2 * 60  # the first hour's, by the triggers
    keep(store, first_hour + 2)
    assert kept_seconds(store) == 2 * 120
    assert assert_same(store, to_us(START), to_us(START + timedelta(hours=2))) == 2 * 2
    store.close()


def test_a_store_with_seconds_before_the_table_is_filled_when_opened(tmp_path: Path) -> None:
    rng = random.Random(7)
    db = tmp_path / "store.db"
    store = Store(db)
    # As a store made before the migrations: no tables, no triggers, no record of them.
    store.conn.executescript(
        "DROP TRIGGER sound_hours_insert; DROP TRIGGER sound_hours_delete; DROP TRIGGER sound_hours_update;"
        " DROP TABLE sound_hours; DROP TABLE sound_hours_kept;"
        " DELETE FROM migrations WHERE name IN ('sound-hours', 'sound-hours-kept');"
    )
    fill(store, list(range(0, 7200, 3)), rng)
    store.close()
    store = Store(db)
    assert assert_same(store, to_us(START), to_us(START + timedelta(hours=2))) == 2 * 2
    assert kept_seconds(store) == 2 * 2400
    # Every hour it had seconds of is counted; a second stored in one later goes through the triggers.
    first_hour = to_us(START) // HOUR
    kept = store.conn.execute("SELECT site, until_hour FROM sound_hours_kept").fetchall()
    assert [tuple(r) for r in kept] == [("s1", first_hour + 2)]
    fill(store, [7199, 7201], rng)  # the last second of a counted hour, and one of the next
    assert kept_seconds(store) == 2 * 2401
    assert keep(store, first_hour + 3) == first_hour + 3
    assert kept_seconds(store) == 2 * 2402
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
    keep(store, to_us(START) // HOUR + 1)  # the hour counted: its later seconds go through the triggers
    monkeypatch.setattr(store, "link", row_by_row)
    fill(store, list(range(3, 400)), random.Random(2))
    assert kept_seconds(store) == 2 * 400
    store.close()


def test_a_store_kept_by_the_former_triggers_keeps_its_hours_when_opened(tmp_path: Path) -> None:
    """A store whose triggers counted every second as it was stored (before sound-hours-kept):
    every hour it has seconds of stays counted; later hours are counted as the daemon keeps them."""
    db = tmp_path / "store.db"
    store = Store(db)
    store.conn.executescript(
        "DROP TRIGGER sound_hours_insert; DROP TRIGGER sound_hours_delete; DROP TRIGGER sound_hours_update;"
        " DROP TABLE sound_hours_kept; DELETE FROM migrations WHERE name = 'sound-hours-kept';"
        + migrations.SOUND_HOURS
    )
    fill(store, list(range(0, 5400, 2)), random.Random(5))  # 16:00 to 17:30, each counted by a trigger
    assert kept_seconds(store) == 2 * 2700
    store.close()
    store = Store(db)
    first_hour = to_us(START) // HOUR
    kept = store.conn.execute("SELECT site, until_hour FROM sound_hours_kept").fetchall()
    assert [tuple(r) for r in kept] == [("s1", first_hour + 2)]
    fill(store, [5401, 7201], random.Random(6))  # the rest of a counted hour; the next, not yet
    assert kept_seconds(store) == 2 * 2701
    assert keep(store, first_hour + 3) == first_hour + 3
    assert kept_seconds(store) == 2 * 2702
    assert assert_same(store, to_us(START), to_us(START + timedelta(hours=3))) == 2 * 3
    store.close()


def test_hours_are_counted_one_statement_an_hour_with_seconds(tmp_path: Path) -> None:
    """Seconds a month apart: each hour with seconds counted by a statement of its own (its sort
    holds one hour of the site's seconds), the empty hours between found by index seeks, not
    visited one by one."""
    store = Store(tmp_path / "store.db")
    month = 30 * 24 * 3600
    fill(store, [0, 1, 3599, 3600, month, month + 7200], random.Random(8))
    statements: list[str] = []
    store.conn.set_trace_callback(statements.append)
    until = to_us(START) // HOUR + 30 * 24 + 3  # 3 hours past the last second's
    assert keep(store, until) == until
    store.conn.set_trace_callback(None)
    counted = [s for s in statements if s.startswith("INSERT INTO sound_hours SELECT")]
    assert len(counted) == 4  # hours 0, 1, 720 and 722 of the fill
    assert len(statements) < 20
    assert kept_seconds(store) == 2 * 6
    assert assert_same(store, to_us(START), to_us(START) + (until - to_us(START) // HOUR) * HOUR) == 2 * 4
    store.close()
