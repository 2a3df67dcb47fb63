"""The store: its hot path (sound rows in multi-row statements, their chain digests, checkpoints),
savepoints and batches, duplicates and conflicts, finding revisions, layout migrations, and
the queries the daemon and `minewatch status` make."""

from __future__ import annotations

import fcntl
import os
import random
import sqlite3
import subprocess
import sys
import threading
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from monitor.errors import StoreError
from monitor.journal.store import (
    _SOUND_ROW,
    GENESIS,
    SCHEMA_VERSION,
    Checkpointer,
    Store,
    digest_of,
    next_head,
    sound_digest,
    sound_entry,
    sound_record,
    to_us,
)
from monitor.wire.canonical import from_us
from monitor.wire.codec import payload_of
from rules.model import (
    Finding,
    FindingKind,
    LightSummary,
    Measurement,
    SoundLevels,
    TurbidityReading,
    WeatherReading,
)
from tests.support.another_user import refused_to_this_user
from tests.support.paths import REPO

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


def test_the_usual_seconds_template_is_the_canonical_record_digest() -> None:
    """The usual second (no optional level) takes a template of its own, in sound_digest and in
    sound_entry: equal to json's text too, for floats, ints, -0.0, huge and non-finite values
    (which fall back to the general text) and names JSON must escape."""
    rng = random.Random(12)
    choices = [0.0, -0.0, 55.0, 61.25, 1e-7, 1.5e22, 1e308, 140, float("inf"), float("nan")]
    for _ in range(5000):
        duration, laeq, lafmax, lcpeak = (rng.choice([*choices, rng.uniform(-50, 200)]) for _ in range(4))
        site, sensor = rng.choice(["q", "sïte", 'a"b', "%s"]), rng.choice(["n1", "m\\2", "ü", "{0}"])
        ts_us, source = rng.randint(0, 2**53), rng.choice(["levels", "bands", "audio"])
        row = (site, sensor, ts_us, duration, laeq, lafmax, lcpeak, None, None, None, None, None, source)
        expected = digest_of(sound_record(dict(zip(_SOUND_ROW, row, strict=True))))
        assert sound_digest(row) == expected, row
        levels = SoundLevels(site, sensor, from_us(ts_us), duration, laeq, lafmax, lcpeak)
        assert sound_entry(levels, source).digest == expected, row


@pytest.mark.parametrize(
    "ahead", ["", "built", "staged"], ids=["built-by-the-store", "built-ahead", "staged-ahead"]
)
def test_many_sounds_with_duplicates_across_statements(tmp_path: Path, ahead: str) -> None:
    """The same rows and chain whether the store builds each record's entry or the caller did
    before the write lock (the pipeline: store.sound_entry, and its rows made and chained by
    store.stage_sounds), through the duplicates' slow path."""

    def append(items: list[tuple[SoundLevels, str, bool]]) -> list[bool]:
        entries = [sound_entry(lv, source) for lv, source, _ in items] if ahead else None
        staged = None
        if entries and ahead == "staged":
            staged = store.stage_sounds(entries, [late for *_, late in items], T0)
        return store.append_sounds(items, T0, entries, staged)

    store = Store(tmp_path / "s.db")
    # Rows with and without the optional levels (inserted by different statements), mixed.
    optional: dict[str, Any] = {"LASmax": 60.5, "LZeq": 66.0}
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
        assert append(first) == [True] * 5000
    # A resend of some, mixed with new ones and a duplicate inside the same call.
    again = first[100:300] + [
        (SoundLevels("q", "n9", T0 + timedelta(seconds=s), 1.0, 50.0, 51.0, 70.0), "levels", False)
        for s in range(2500)
    ]
    again.append(again[-1])
    with store.batch():
        stored = append(again)
    assert stored == [False] * 200 + [True] * 2500 + [False]
    count = store.conn.execute("SELECT COUNT(*) FROM sound").fetchone()[0]
    chained = store.conn.execute("SELECT COUNT(*) FROM chain WHERE kind = 'sound'").fetchone()[0]
    assert count == chained == 7500
    # Every chain entry carries the digest evidence will re-derive from the stored row.
    digests = dict(store.conn.execute("SELECT key, digest FROM chain WHERE kind = 'sound'").fetchall())
    rows = store.conn.execute("SELECT * FROM sound").fetchall()
    assert all(digests[f"{r['sensor']}|{r['ts_us']}"] == digest_of(sound_record(r)) for r in rows)
    assert sum(r["LASmax"] == 60.5 and r["LZeq"] == 66.0 and r["LCeq"] is None for r in rows) == 715
    assert_chain_links(store, "q")
    store.close()


def assert_chain_links(store: Store, site: str) -> None:
    """Every entry of ``site``'s chain follows the one before (seqs 1, 2, ...; head = SHA-256 of
    the previous head and its digest) and every sound row names its own entry."""
    previous = GENESIS
    entries = store.conn.execute(
        "SELECT seq, kind, key, digest, head FROM chain WHERE site = ? ORDER BY seq", (site,)
    )
    sound_seqs = {}
    for seq, (number, kind, key, digest, head) in enumerate(entries.fetchall(), start=1):
        assert (number, head) == (seq, next_head(previous, digest))
        previous = head
        if kind == "sound":
            sound_seqs[key] = number
    rows = store.conn.execute("SELECT sensor, ts_us, chain_seq FROM sound WHERE site = ?", (site,)).fetchall()
    assert {f"{r['sensor']}|{r['ts_us']}": r["chain_seq"] for r in rows} == sound_seqs


def test_sounds_staged_before_another_writer_chained_are_chained_after_its_entry(tmp_path: Path) -> None:
    """The pipeline stages a batch's sound rows and chain links before taking the write lock,
    continuing the head its store last committed; another process (the notices command) may
    chain a record of the site meanwhile. The batch is then chained after that record, not
    over it, and a batch staged while nobody else wrote is taken as staged."""

    def levels(first: int) -> list[tuple[SoundLevels, str, bool]]:
        return [
            (SoundLevels("q", "n1", T0 + timedelta(seconds=s), 1.0, 60.0, 61.0, 75.0), "levels", False)
            for s in range(first, first + 5)
        ]

    store, other = Store(tmp_path / "s.db"), Store(tmp_path / "s.db")
    for first in (0, 5):  # the second batch staged from the head the first one committed
        items = levels(first)
        entries = [sound_entry(lv, source) for lv, source, _ in items]
        staged = store.stage_sounds(entries, [False] * 5, T0)
        if first:
            other.chain("q", "event", "e1", {"t": "event", "id": "e1"}, T0)
        with store.batch():
            assert store.append_sounds(items, T0, entries, staged) == [True] * 5
        if not first:
            # nobody else wrote: the rows and links are those staged
            chained = store.conn.execute("SELECT site, seq, kind, key, digest, head, recorded_us FROM chain")
            assert [tuple(r) for r in chained.fetchall()] == staged.chain
    kinds = store.conn.execute("SELECT kind FROM chain WHERE site = 'q' ORDER BY seq").fetchall()
    assert [k[0] for k in kinds] == ["sound"] * 5 + ["event"] + ["sound"] * 5
    assert_chain_links(store, "q")
    other.close()
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


def _turn_is_free(path: Path) -> bool:
    """Whether a process could take its turn to write now (the lock Store.take_turns queues on)."""
    fd = os.open(str(path) + "-turns", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)  # closing lets go of a lock taken here
    return True


def test_workers_taking_turns_hold_the_turn_for_each_batch_and_let_go_after_it(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = Store(path)
    store.take_turns()
    assert (path.parent / "s.db-turns").stat().st_mode & 0o777 == 0o600
    assert _turn_is_free(path)
    with store.batch():
        store.append_sounds([(levels("n1", 0), "levels", False)], T0)
        assert not _turn_is_free(path)  # another worker waits in the queue, not in SQLite's sleeps
        with store.batch():  # nested: the same transaction, the same turn
            assert not _turn_is_free(path)
        assert not _turn_is_free(path)
    assert _turn_is_free(path)
    with pytest.raises(RuntimeError), store.batch():  # rolled back: the turn is given up too
        store.append_sounds([(levels("n1", 1), "levels", False)], T0)
        raise RuntimeError("a bug in the batch")
    assert _turn_is_free(path)
    assert store.conn.execute("SELECT COUNT(*) FROM sound").fetchone()[0] == 1
    store.close()


def test_a_writer_not_taking_turns_still_waits_for_the_store(tmp_path: Path) -> None:
    """The turn only orders the workers: SQLite's own lock still keeps the CLI's writes apart."""
    path = tmp_path / "s.db"
    worker, cli = Store(path), Store(path)
    worker.take_turns()
    cli.conn.execute("PRAGMA busy_timeout=0")
    with worker.batch(), pytest.raises(sqlite3.OperationalError, match="locked"), cli.batch():
        pass
    with cli.batch():  # the worker's turn is over
        cli.append_sounds([(levels("n1", 0), "levels", False)], T0)
    worker.close()
    cli.close()


def test_a_worker_that_cannot_queue_says_so_and_writes_as_before(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "s.db"
    (tmp_path / "s.db-turns").mkdir()  # not a file it can lock
    store = Store(path)
    store.take_turns()
    assert "cannot queue for the store's write lock on" in caplog.text
    with store.batch():
        store.append_sounds([(levels("n1", 0), "levels", False)], T0)
    assert store.conn.execute("SELECT COUNT(*) FROM sound").fetchone()[0] == 1
    store.close()


def _wal_restarts(path: Path) -> int:
    """How many times the WAL has started over: its header's checkpoint sequence number
    (sqlite.org/fileformat2.html#walformat), read without checkpointing."""
    with open(str(path) + "-wal", "rb") as wal:
        return int.from_bytes(wal.read(16)[12:16], "big")


def _write_seconds(store: Store, first: int, count: int) -> None:
    with store.batch():
        store.append_sounds(
            [(levels(f"n{n}", s), "levels", False) for s in range(first, first + count) for n in range(20)],
            T0,
        )


def _worker_writing(path: Path) -> Store:
    """A worker taking turns, with 100 seconds of 20 meters written and SQLite's own checkpoint off."""
    worker = Store(path)
    worker.take_turns()
    worker.conn.execute("PRAGMA wal_autocheckpoint=0")
    _write_seconds(worker, 0, 100)
    return worker


def test_the_checkpointer_starts_the_wal_over_once_it_has_the_writers_turn(tmp_path: Path) -> None:
    """Workers that take turns begin back to back, so the WAL never started over by itself."""
    path = tmp_path / "s.db"
    worker = _worker_writing(path)
    restarts = _wal_restarts(path)
    for b in range(1, 5):
        _write_seconds(worker, 100 * b, 100)
    assert _wal_restarts(path) == restarts  # nothing copied the WAL: it only grows
    checkpointer = Checkpointer(str(path), interval_s=3600)  # not started: its step is called here
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other = os.open(str(path) + "-turns", os.O_RDWR)
    fcntl.flock(other, fcntl.LOCK_EX)  # another worker's turn
    restarted: list[bool] = []
    waiting = threading.Thread(
        target=lambda: restarted.append(checkpointer.restart_in_turn(conn, str(path) + "-turns"))
    )
    waiting.start()
    waiting.join(0.3)
    assert waiting.is_alive() and not restarted  # it waits in the queue like a worker
    os.close(other)
    waiting.join(10)
    assert restarted == [True] and checkpointer.restarts == 1
    assert _turn_is_free(path)
    _write_seconds(worker, 1000, 1)
    assert _wal_restarts(path) == restarts + 1  # the next commit wrote at the WAL's start
    conn.close()
    worker.close()
    with sqlite3.connect(path) as check:
        assert check.execute("SELECT COUNT(*) FROM sound").fetchone()[0] == 20 * 501


def test_a_reader_in_the_wal_makes_the_checkpointer_give_up_its_turn_and_try_later(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    worker = _worker_writing(path)
    reader = sqlite3.connect(path, isolation_level=None)
    reader.execute("BEGIN")
    assert reader.execute("SELECT COUNT(*) FROM sound").fetchone()[0] == 2000  # a snapshot in the WAL
    _write_seconds(worker, 100, 100)
    checkpointer = Checkpointer(str(path), interval_s=3600)
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    patience = conn.execute("PRAGMA busy_timeout").fetchone()[0]
    assert checkpointer.restart_in_turn(conn, str(path) + "-turns") is False
    assert checkpointer.restarts == 0
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == patience  # its 0.1 s was for the RESTART only
    assert _turn_is_free(path)  # the workers are not held up by the reader
    restarts = _wal_restarts(path)
    _write_seconds(worker, 200, 1)
    assert _wal_restarts(path) == restarts  # the reader kept the WAL
    reader.execute("COMMIT")
    assert checkpointer.restart_in_turn(conn, str(path) + "-turns") is True
    _write_seconds(worker, 201, 1)
    assert _wal_restarts(path) == restarts + 1
    conn.close()
    reader.close()
    worker.close()


@pytest.mark.parametrize("checkpoint_first", [True, False])
def test_a_store_taking_turns_has_its_checkpointer_start_the_wal_over(
    tmp_path: Path, checkpoint_first: bool
) -> None:
    """The daemon's order (checkpoint_in_background, then take_turns) and the reverse both arm it."""
    path = tmp_path / "s.db"
    worker = Store(path)
    if not checkpoint_first:
        worker.take_turns()
    worker.checkpoint_in_background(interval_s=0.02, restart_frames=32)
    worker.take_turns()
    checkpointer = worker._checkpointer
    assert checkpointer is not None and checkpointer.turns == str(path) + "-turns"
    deadline = time.monotonic() + 20
    second = 0
    while checkpointer.restarts == 0 and time.monotonic() < deadline:
        _write_seconds(worker, second, 20)
        second += 20
        time.sleep(0.01)
    assert checkpointer.restarts >= 1
    worker.close()


# --------------------------------------------------------------------------- direct tests of the Store API


def levels(sensor: str, second: int, laeq: float = 60.0) -> SoundLevels:
    return SoundLevels("q", sensor, T0 + timedelta(seconds=second), 1.0, laeq, laeq + 1.0, 75.0)


def finding(summary: str = "LAeq 66 dB over the 65 dB limit", minute: int = 0) -> Finding:
    start = T0 + timedelta(minutes=minute)
    return Finding(
        "q",
        "noise",
        "6.B",
        FindingKind.VIOLATION,
        start,
        start + timedelta(minutes=1),
        "America/Chicago",
        summary,
        ("n1",),
        (Measurement("LAeq", 66.0, 65.0, "dB"),),
        refs=("sound:n1:2026-06-15T17:00:00Z",),
        details={"window_s": 60},
    )


def chain_of(store: Store, site: str = "q") -> list[sqlite3.Row]:
    return store.conn.execute("SELECT * FROM chain WHERE site = ? ORDER BY seq", (site,)).fetchall()


def assert_chain_intact(store: Store, site: str = "q") -> None:
    """Sequence numbers without gaps, each head the hash of the previous head and the digest."""
    head = GENESIS
    for expected_seq, entry in enumerate(chain_of(store, site), start=1):
        assert entry["seq"] == expected_seq
        head = next_head(head, entry["digest"])
        assert entry["head"] == head
    assert store.head(site) == (len(chain_of(store, site)), head)


def test_a_failed_savepoint_undoes_only_its_own_writes_and_the_chain_continues(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    with store.batch():
        store.append_sounds([(levels("n1", 0), "levels", False)], T0)
        with pytest.raises(RuntimeError), store.savepoint():
            store.append_sounds([(levels("n1", 1), "levels", False)], T0)
            store.append_finding(finding(), T0)
            raise RuntimeError("a bug on this message")
        with store.savepoint():  # a unit that succeeds keeps its writes
            store.append_sounds([(levels("n1", 2), "levels", False)], T0)
    kept = [r["ts_us"] for r in store.conn.execute("SELECT ts_us FROM sound ORDER BY ts_us")]
    assert kept == [to_us(T0), to_us(T0 + timedelta(seconds=2))]
    assert store.conn.execute("SELECT COUNT(*) FROM findings").fetchone()[0] == 0
    assert [e["kind"] for e in chain_of(store)] == ["sound", "sound"]
    assert_chain_intact(store)
    # The rolled-back second can be stored afterwards: nothing of it was left behind.
    with store.batch():
        assert store.append_sounds([(levels("n1", 1), "levels", False)], T0) == [True]
    assert_chain_intact(store)
    store.close()


def test_a_failed_batch_stores_nothing_and_leaves_the_head_where_it_was(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    with store.batch():
        store.append_sounds([(levels("n1", 0), "levels", False)], T0)
    head = store.head("q")
    with pytest.raises(RuntimeError), store.batch():
        store.append_sounds([(levels("n1", 1), "levels", False)], T0)
        store.append_finding(finding(), T0)
        raise RuntimeError("the batch fails")
    assert store.head("q") == head
    assert store.conn.execute("SELECT COUNT(*) FROM sound").fetchone()[0] == 1
    assert_chain_intact(store)
    store.close()


def test_a_resend_is_a_duplicate_and_a_different_resend_a_conflict_journaled_once(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    first = levels("n1", 0, 60.0)
    with store.batch():
        assert store.append_sounds([(first, "levels", False)], T0) == [True]
        # The same content again: a duplicate, nothing journaled.
        assert store.append_sounds([(first, "levels", False)], T0) == [False]
        assert store.sound_conflict(first, "levels", T0) is False
        # Other content for the same second: the first is kept, the conflict journaled and chained.
        other = levels("n1", 0, 71.0)
        assert store.append_sounds([(other, "levels", False)], T0) == [False]
        assert store.sound_conflict(other, "levels", T0) is True
        assert store.sound_conflict(other, "levels", T0) is True  # still a conflict, journaled once
        third = levels("n1", 0, 55.0)
        assert store.sound_conflict(third, "levels", T0) is True
        # A conflict of another sensor is counted under it.
        store.append_sounds([(levels("n2", 0), "levels", False)], T0)
        assert store.sound_conflict(levels("n2", 0, 80.0), "levels", T0) is True
    assert store.conn.execute("SELECT LAeq FROM sound WHERE sensor = 'n1'").fetchone()[0] == 60.0
    conflicts = store.conn.execute("SELECT * FROM conflicts WHERE sensor = 'n1'").fetchall()
    assert len(conflicts) == 2 and len({c["first_digest"] for c in conflicts}) == 1
    assert store.conflict_counts("q") == {"n1": 2, "n2": 1}
    assert store.conflict_counts("elsewhere") == {}
    assert [e["kind"] for e in chain_of(store)].count("conflict") == 3
    assert_chain_intact(store)
    store.close()


def test_a_reading_resent_with_other_content_is_a_conflict(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    light = LightSummary("q", "l1", T0, 60.0, 2.0, 1.0, 3.0)
    brighter = LightSummary("q", "l1", T0, 60.0, 20.0, 10.0, 30.0)
    with store.batch():
        assert store.append_reading(light, payload_of(light), late=False, now=T0).stored
        assert not store.append_reading(light, payload_of(light), late=False, now=T0).stored
        assert store.reading_conflict(light, payload_of(light), T0) is False
        assert not store.append_reading(brighter, payload_of(brighter), late=False, now=T0).stored
        assert store.reading_conflict(brighter, payload_of(brighter), T0) is True
    assert store.conflict_counts("q") == {"l1": 1}
    assert store.light_between("q", T0, T0 + timedelta(minutes=1)) == [light]  # the first is kept
    store.close()


def test_a_changed_finding_is_a_new_revision_and_a_retraction_another(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    first = finding("LAeq 66 dB over the 65 dB limit")
    revised = replace(first, summary="LAeq 67 dB over the 65 dB limit")
    assert first.id == revised.id  # same standard, sensors and start: the same finding
    with store.batch():
        assert store.append_finding(first, T0) is True
        assert store.append_finding(first, T0) is False  # unchanged: no revision
        assert store.append_finding(revised, T0) is True
        assert store.append_finding(revised, T0, retracted=True) is True
        assert store.append_finding(revised, T0, retracted=True) is False  # retracted already
        assert store.append_finding(finding(minute=5), T0, retracted=True) is False  # never stored
    revisions = store.conn.execute(
        "SELECT revision, retracted FROM findings WHERE id = ? ORDER BY revision", (first.id,)
    ).fetchall()
    assert [tuple(r) for r in revisions] == [(1, 0), (2, 0), (3, 1)]
    assert store.latest_finding(first.id) == revised
    assert store.latest_finding("no-such-finding") is None
    assert store.current_findings("q", T0, T0 + timedelta(hours=1)) == []  # retracted: not current
    keys = [e["key"] for e in chain_of(store) if e["kind"] == "finding"]
    assert keys == [f"{first.id}|1", f"{first.id}|2", f"{first.id}|3"]
    assert_chain_intact(store)
    store.close()


def test_a_finding_reads_back_as_stored(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    stored = finding()
    with store.batch():
        store.append_finding(stored, T0)
    assert store.latest_finding(stored.id) == stored
    [row] = store.current_findings("q", T0, T0 + timedelta(hours=1))
    assert row["id"] == stored.id and row["revision"] == 1
    store.close()


# The store layout before version 2 (sound keyed by sensor first, no chain_seq, a key index
# over every chain entry), as the earlier daemon created it (the same as in test_evidence).
_LAYOUT_1 = """
CREATE TABLE sound_v1 (
    site TEXT NOT NULL, sensor TEXT NOT NULL, ts_us INTEGER NOT NULL, duration_s REAL NOT NULL,
    LAeq REAL NOT NULL, LAFmax REAL NOT NULL, LASmax REAL, LAFmin REAL, LCeq REAL,
    LCpeak REAL NOT NULL, LZpeak REAL, LZeq REAL,
    source TEXT NOT NULL, late INTEGER NOT NULL, received_us INTEGER NOT NULL,
    PRIMARY KEY (site, sensor, ts_us)
) WITHOUT ROWID;
INSERT INTO sound_v1 SELECT site, sensor, ts_us, duration_s, LAeq, LAFmax, LASmax, LAFmin, LCeq,
    LCpeak, LZpeak, LZeq, source, late, received_us FROM sound;
DROP TABLE sound;
ALTER TABLE sound_v1 RENAME TO sound;
CREATE INDEX sound_time ON sound (site, ts_us);
DROP INDEX chain_lookup;
CREATE INDEX chain_key ON chain (site, kind, key);
PRAGMA user_version = 0;
"""


def test_a_new_store_has_the_current_layout_version(tmp_path: Path) -> None:
    Store(tmp_path / "s.db").close()
    with sqlite3.connect(tmp_path / "s.db") as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_a_store_of_layout_1_is_migrated_with_its_rows_and_chain_links(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = Store(path)
    with store.batch():
        store.append_sounds([(levels(f"n{s % 2}", s), "levels", False) for s in range(20)], T0)
        store.append_finding(finding(), T0)
    before = store.sound_between("q", T0, T0 + timedelta(minutes=1))
    head = store.head("q")
    store.close()
    with sqlite3.connect(path) as conn:
        conn.executescript(_LAYOUT_1)
        assert "chain_seq" not in {r[1] for r in conn.execute("PRAGMA table_info(sound)")}

    store = Store(path)  # migrates on open
    assert store.conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert store.sound_between("q", T0, T0 + timedelta(minutes=1)) == before
    assert store.head("q") == head
    unlinked = store.conn.execute(
        "SELECT COUNT(*) FROM sound t LEFT JOIN chain c ON c.site = t.site AND c.seq = t.chain_seq"
        " AND c.key = t.sensor || '|' || t.ts_us WHERE c.seq IS NULL"
    ).fetchone()[0]
    assert unlinked == 0
    # Appending continues the same chain after the migration.
    with store.batch():
        assert store.append_sounds([(levels("n1", 30), "levels", False)], T0) == [True]
    assert_chain_intact(store)
    store.close()
    Store(path).close()  # opening a migrated store again is a no-op
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT COUNT(*) FROM sound").fetchone()[0] == 21


def test_a_store_of_a_newer_layout_is_refused_naming_the_versions(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    Store(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(StoreError, match=rf"layout version {SCHEMA_VERSION + 1}.*\({SCHEMA_VERSION}\)"):
        Store(path)


# --------------------------------------------------------------------------- the daemon's queries


def test_typed_readings_read_back_through_their_payload(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    light = LightSummary("q", "l1", T0, 60.0, 2.0, 1.0, 3.0, (1.0, 3.0, 1.0), 2.0)
    dry = WeatherReading("q", "w1", T0, 60.0, 3.5, False)
    rain = WeatherReading("q", "w1", T0 + timedelta(minutes=1), 60.0, 3.5, True, 2.5)
    water = TurbidityReading("q", "t1", T0, 60.0, 12.5)
    with store.batch():
        for reading in (light, dry, rain, water):
            store.append_reading(reading, payload_of(reading), late=False, now=T0)
    window = (T0, T0 + timedelta(minutes=5))
    assert store.light_between("q", *window) == [light]
    assert store.weather_between("q", *window) == [dry, rain]
    assert store.turbidity_between("q", *window) == [water]
    assert store.weather_between("q", T0 + timedelta(minutes=1), window[1]) == [rain]  # [start, end)
    store.close()


def test_status_queries_and_anchors(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    assert store.last_data_us("q", "n1") is None
    with store.batch():
        store.append_sounds([(levels("n1", s, 60.0 + s), "levels", False) for s in range(3)], T0)
        light = LightSummary("q", "n1", T0 + timedelta(seconds=90), 60.0, 2.0, 1.0, 3.0)
        store.append_reading(light, payload_of(light), late=False, now=T0)
    # The newest of a sensor's sound seconds and readings.
    assert store.last_data_us("q", "n1") == to_us(T0 + timedelta(seconds=90))
    assert store.last_data_us("q", "n2") is None
    assert store.sound_laeq_between("q", T0 + timedelta(seconds=1), T0 + timedelta(seconds=3)) == [
        ("n1", 61.0, 1.0),
        ("n1", 62.0, 1.0),
    ]
    seq, head = store.head("q")
    with store.batch():
        store.record_anchor("q", seq, head, T0)
        store.record_anchor("q", seq, head, T0 + timedelta(minutes=5))  # a republish is ignored
    rows = store.conn.execute("SELECT site, seq, head, published_us FROM anchors").fetchall()
    assert [tuple(r) for r in rows] == [("q", seq, head, to_us(T0))]
    store.close()


def test_a_folder_named_as_the_store_is_said_to_be_one(tmp_path: Path) -> None:
    """SQLite says "unable to open database file" of a folder: the user is told what it is."""
    from monitor.errors import StoreError

    with pytest.raises(StoreError) as refused:
        Store(tmp_path)
    assert str(refused.value) == (
        f"cannot open the store {str(tmp_path)!r}: it is a folder:"
        f" name a file in it (e.g. {tmp_path / 'minewatch.db'})"
    )


def test_an_open_that_sqlite_refuses_at_once_for_a_lock_is_tried_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two daemons of other sites opening one new store at one moment: under a loaded CI run the
    second was refused "database is locked" at once and exited 2. SQLite answers so without
    waiting on paths this test cannot provoke on demand (WAL recovery, a lock it would deadlock
    on), so the refusal is injected into the open: a lock is tried again; any other fault is not."""

    calls: list[int] = []
    real_open = Store._open

    def refused_twice(self: Store, synchronous: str) -> None:
        calls.append(1)
        if len(calls) <= 2:
            self.conn = sqlite3.connect(":memory:")
            raise sqlite3.OperationalError("database is locked")
        real_open(self, synchronous)

    monkeypatch.setattr(Store, "_open", refused_twice)
    store = Store(tmp_path / "s.db")
    store.close()
    assert len(calls) == 3

    def broken(self: Store, synchronous: str) -> None:
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(Store, "_open", broken)
    with pytest.raises(StoreError, match=r"cannot open the store .*disk I/O error"):
        Store(tmp_path / "t.db")


CHECKPOINT_ON_A_READ_ONLY_STORE = """
import sys, time
from monitor.journal.store import Checkpointer

checkpointer = Checkpointer(sys.argv[1], interval_s=0.05)
checkpointer.start()
time.sleep(0.3)  # rounds that fail, logged
checkpointer.stop()
print("stopped" if not checkpointer.is_alive() else "running")
"""


def test_the_checkpointer_stops_without_a_traceback_on_a_store_refusing_writes(tmp_path: Path) -> None:
    """The daemon stopped (SIGTERM) while its store's file was read-only to it: its rounds of
    WAL checkpoints had failed and said so, and the last one, as it stopped, raised out of the
    thread ("Exception in thread minewatch-checkpoint", a traceback). It is said in one line.
    Read-only for real: another user's file, the process without root's powers over files; the
    WAL holds frames to copy, written by a connection of this test's (the store's owner's)."""
    path = tmp_path / "s.db"
    Store(path).close()
    prefix = refused_to_this_user(path, 0o644)
    writer = sqlite3.connect(path, isolation_level=None)
    try:
        writer.execute("PRAGMA wal_autocheckpoint=0")
        writer.execute("CREATE TABLE kept (x)")
        done = subprocess.run(
            [*prefix, sys.executable, "-c", CHECKPOINT_ON_A_READ_ONLY_STORE, str(path)],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        writer.close()
    assert done.returncode == 0 and done.stdout == "stopped\n", (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    assert "attempt to write a readonly database" in done.stderr, done.stderr
