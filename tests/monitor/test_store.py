"""The store's hot path: sound rows in multi-row statements, their chain digests, checkpoints."""

from __future__ import annotations

import random
import sqlite3
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from monitor.store import _SOUND_ROW, Store, digest_of, sound_digest, sound_record
from rules.model import SoundLevels

T0 = datetime(2026, 6, 15, 17, 0, tzinfo=UTC)


def test_sound_digest_is_the_canonical_record_digest() -> None:
    """The hand-built canonical text equals json's, byte for byte (evidence re-derives it)."""
    rng = random.Random(11)
    choices = [None, 0.0, -0.0, 55.0, 61.25, 1e-7, 1.5e22, 140, float("inf"), float("nan")]
    for _ in range(5000):
        levels = [rng.choice([*choices, rng.uniform(-50, 200)]) for _ in range(8)]
        row = (
            rng.choice(["q", "sïte", 'a"b', "%s"]),
            rng.choice(["n1", "m\\2", "ü", "{0}"]),
            rng.randint(0, 2**53),
            rng.choice([1.0, 0.125, 1]),
            *levels,
            rng.choice(["levels", "bands", "audio"]),
        )
        expected = digest_of(sound_record(dict(zip(_SOUND_ROW, row, strict=True))))
        assert sound_digest(row) == expected, row


def test_many_sounds_with_duplicates_across_statements(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    # Rows with and without the optional levels (inserted by different statements), mixed.
    optional = {"LASmax": 60.5, "LZeq": 66.0}
    first = [
        (
            SoundLevels("q", f"n{i % 3}", T0 + timedelta(seconds=i // 3), 1.0, 60.0, 61.0, 75.0)._replace(
                **(optional if i % 7 == 0 else {})
            ),
            "levels",
            False,
        )
        for i in range(5000)  # more rows than one statement takes
    ]
    with store.batch():
        assert store.append_sounds(first, T0) == [True] * 5000
    # A resend of some, mixed with new ones and a duplicate inside the same call.
    again = first[100:300] + [
        (SoundLevels("q", "n9", T0 + timedelta(seconds=s), 1.0, 50.0, 51.0, 70.0), "levels", False)
        for s in range(2500)
    ]
    again.append(again[-1])
    with store.batch():
        stored = store.append_sounds(again, T0)
    assert stored == [False] * 200 + [True] * 2500 + [False]
    count = store.conn.execute("SELECT COUNT(*) FROM sound").fetchone()[0]
    chained = store.conn.execute("SELECT COUNT(*) FROM chain WHERE kind = 'sound'").fetchone()[0]
    assert count == chained == 7500
    # Every chain entry carries the digest evidence will re-derive from the stored row.
    digests = dict(store.conn.execute("SELECT key, digest FROM chain WHERE kind = 'sound'").fetchall())
    rows = store.conn.execute("SELECT * FROM sound").fetchall()
    assert all(digests[f"{r['sensor']}|{r['ts_us']}"] == digest_of(sound_record(r)) for r in rows)
    assert sum(r["LASmax"] == 60.5 and r["LZeq"] == 66.0 and r["LCeq"] is None for r in rows) == 715
    store.close()


def test_wal_is_checkpointed_in_the_background(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = Store(path)
    store.checkpoint_in_background(interval_s=0.1)
    assert store.conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0
    size_before = path.stat().st_size
    with store.batch():
        store.append_sounds(
            [
                (SoundLevels("q", "n1", T0 + timedelta(seconds=s), 1.0, 60.0, 61.0, 75.0), "levels", False)
                for s in range(500)  # far below SQLite's own 1000-page checkpoint threshold
            ],
            T0,
        )
    deadline = time.monotonic() + 10
    while path.stat().st_size <= size_before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert path.stat().st_size > size_before  # the pages reached the database file
    store.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT COUNT(*) FROM sound").fetchone()[0] == 500
