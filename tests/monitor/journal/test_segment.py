"""The chain segment's reads for the evidence export (monitor/journal/segment.py), against a store
the daemon's way of writing fills (tests/support/evidence.py): its state, the segment's ends, what
a reader is shown, the rows each pass walks and the plots' minutes."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import pytest

from monitor.errors import StoreError
from monitor.journal import segment
from monitor.journal.chain_kinds import config_from_key
from monitor.wire.canonical import to_us
from tests.support.evidence import SITE, T0, WINDOW, Site, build_site
from tests.support.paths import REPO

FROM_US, TO_US = to_us(WINDOW[0]), to_us(WINDOW[1])


@dataclass(frozen=True)
class Scope:
    site: str = SITE
    from_us: int = FROM_US
    to_us: int = TO_US
    chained_from_us: int = FROM_US
    sensors: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Sight:
    kinds: frozenset[str] = frozenset({"event", "finding", "alert", "health", "calibration", "rejection"})
    audiences: frozenset[str] = field(default_factory=lambda: frozenset({"town", "inspector"}))


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Site:
    return build_site(tmp_path_factory.mktemp("segment"))


@pytest.fixture
def conn(site: Site) -> Iterator[sqlite3.Connection]:
    opened = segment.open_read_only(site.store)
    yield opened
    opened.close()


def whole_chain(conn: sqlite3.Connection) -> tuple[int, int]:
    return 1, conn.execute("SELECT MAX(seq) FROM chain WHERE site = ?", (SITE,)).fetchone()[0]


def kinds_of(conn: sqlite3.Connection) -> dict[int, str]:
    return dict(conn.execute("SELECT seq, kind FROM chain WHERE site = ?", (SITE,)))


def copy_of(site: Site, tmp_path: Path) -> Path:
    """A copy of the store to change (the module's site is shared)."""
    copy = tmp_path / "copy.db"
    with sqlite3.connect(site.store) as source, sqlite3.connect(copy) as target:
        source.backup(target)
    source.close()
    target.close()
    return copy


# --------------------------------------------------------------------------- opening


def test_the_module_imports_nothing_heavy_for_the_walking_workers() -> None:
    probe = (
        "import json, sys, monitor.journal.segment;"
        "print(json.dumps([m for m in sys.modules if m.split('.')[0] in ('monitor', 'rules', 'sensors')]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(REPO)},
    )
    loaded = set(json.loads(done.stdout))
    assert loaded <= {
        "monitor",
        "monitor.csv_cells",  # the bundle's inert cells: re alone
        "monitor.errors",
        "monitor.journal",
        "monitor.journal.chain_kinds",
        "monitor.journal.migrations",
        "monitor.journal.queries",
        "monitor.journal.segment",
        "monitor.wire",
        "monitor.wire.canonical",
    }, loaded


def test_open_read_only_reads_and_never_writes(conn: sqlite3.Connection) -> None:
    assert conn.execute("SELECT COUNT(*) FROM chain").fetchone()[0] > 0
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        conn.execute("DELETE FROM meta")
    assert conn.execute("SELECT pow(10, 2), log10(1000)").fetchone() == pytest.approx((100.0, 3.0))


def test_open_read_only_refuses_another_layout_and_a_file_that_is_no_store(
    site: Site, tmp_path: Path
) -> None:
    older = copy_of(site, tmp_path)
    with sqlite3.connect(older) as writable:
        writable.execute("PRAGMA user_version = 1")
    writable.close()
    with pytest.raises(StoreError, match=r"is an older minewatch's: open it once with `minewatch status"):
        segment.open_read_only(older)
    empty = tmp_path / "empty.db"
    sqlite3.connect(empty).close()
    with pytest.raises(StoreError, match=r"cannot read the store .*no such table: chain"):
        segment.open_read_only(empty)


def test_has_table_and_has_kind_table(conn: sqlite3.Connection) -> None:
    assert segment.has_table(conn, "sound")
    assert not segment.has_table(conn, "no_such_table")
    assert segment.has_kind_table(conn, "finding")  # findings t
    assert segment.has_kind_table(conn, "notice_change")  # notice_changes t JOIN notices n ...


# --------------------------------------------------------------------------- the site's state


def test_pruned_before_is_zero_until_pruning_sets_it(site: Site, tmp_path: Path) -> None:
    pruned = copy_of(site, tmp_path)
    with segment.open_read_only(pruned) as conn:
        assert segment.pruned_before_us(conn) == 0
    conn.close()
    with sqlite3.connect(pruned) as writable:
        writable.execute("INSERT INTO meta VALUES ('pruned_before_us', ?)", (str(FROM_US + 7),))
    writable.close()
    conn = segment.open_read_only(pruned)
    assert segment.pruned_before_us(conn) == FROM_US + 7
    conn.close()


def test_first_recorded_and_kept_texts(conn: sqlite3.Connection) -> None:
    recorded = conn.execute("SELECT recorded_us FROM chain WHERE site = ? AND seq = 1", (SITE,)).fetchone()[0]
    assert segment.first_recorded_us(conn, SITE) == recorded == to_us(T0 - timedelta(minutes=5))
    assert segment.first_recorded_us(conn, "elsewhere") is None
    first, last = whole_chain(conn)
    [(_, key), *_] = segment.config_entries(conn, SITE, first, last)
    record = config_from_key(key)
    profile = segment.kept_text(conn, record["profile_sha256"])
    config = segment.kept_text(conn, record["config_sha256"])
    assert profile is not None and config is not None and "[" in config
    assert segment.kept_text(conn, "0" * 64) is None


# --------------------------------------------------------------------------- the segment's ends


def test_spans_of_the_windows_rows(conn: sqlite3.Connection) -> None:
    kinds = kinds_of(conn)
    sound = segment.sound_span(conn, Scope())
    assert (sound.rows, sound.chained) == (480, 480)  # 240 s x n1, n2
    assert sound.first_seq is not None and sound.last_seq is not None
    assert kinds[sound.first_seq] == kinds[sound.last_seq] == "sound"
    assert segment.sound_span(conn, Scope(sensors=("n1",))).rows == 240
    assert segment.sound_span(conn, Scope(sensors=("nobody",))) == (None, None, 0, 0)
    readings = segment.reading_span(conn, Scope())
    assert (readings.rows, readings.chained) == (24 + 4, 28)  # light every 10 s, weather every minute
    event = segment.record_span(conn, "event", Scope())
    assert event.rows == event.chained == 1
    assert event.first_seq is not None and kinds[event.first_seq] == "event"
    assert segment.record_span(conn, "finding", Scope()).rows == 2  # two revisions


def test_anchors_and_heads_bound_the_segment(site: Site, conn: sqlite3.Connection) -> None:
    town = json.loads(site.anchors.read_text())
    seqs = [a["seq"] for a in town]
    assert [tuple(r) for r in segment.anchors(conn, SITE)] == [
        (SITE, a["seq"], a["head"], to_us(T0.fromisoformat(a["ts"]))) for a in town
    ]
    assert segment.last_anchor_before(conn, SITE, seqs[1]) == seqs[0]
    assert segment.last_anchor_before(conn, SITE, seqs[0]) is None
    assert segment.first_anchor_from(conn, SITE, seqs[0] + 1) == seqs[1]
    # the anchor published after the window, not the one inside it
    assert segment.first_anchor_published(conn, SITE, seqs[0] + 1, TO_US) == seqs[2]
    assert segment.first_anchor_published(conn, SITE, seqs[2] + 1, TO_US) is None
    assert segment.head_at(conn, SITE, seqs[1]) == town[1]["head"]
    assert segment.head_at(conn, SITE, seqs[-1] + 10_000) is None


def test_the_config_entry_in_force(conn: sqlite3.Connection) -> None:
    first, last = whole_chain(conn)
    configs = segment.config_entries(conn, SITE, first, last)
    assert [seq for seq, _ in configs] == [
        s for s, kind in sorted(kinds_of(conn).items()) if kind == "config"
    ]
    assert all("|" in key for _, key in configs)
    assert segment.last_config_entry(conn, SITE, last) == configs[-1][0]
    assert segment.last_config_entry(conn, SITE, configs[1][0] - 1) == configs[0][0]
    assert segment.last_config_entry(conn, SITE, configs[0][0] - 1) is None


def test_entry_counts_and_has_entries(conn: sqlite3.Connection) -> None:
    first, last = whole_chain(conn)
    counts = segment.entry_counts(conn, SITE, first, last)
    assert "sound" not in counts  # the walk counts those
    assert counts["reading"] == 28 and counts["event"] == 1 and counts["finding"] == 2
    assert segment.has_entries(conn, SITE, "event", first, last)
    assert not segment.has_entries(conn, SITE, "portal_action", first, last)
    assert not segment.has_entries(conn, "elsewhere", "event", first, last)


# --------------------------------------------------------------------------- what the reader sees


def test_an_alert_for_another_audience_is_withheld(conn: sqlite3.Connection) -> None:
    first, last = whole_chain(conn)
    town, operator = Sight(), Sight(audiences=frozenset({"operator"}))
    assert segment.withheld_seqs(conn, "alert", Scope(), town, first, last) == []
    [withheld] = segment.withheld_seqs(conn, "alert", Scope(), operator, first, last)
    assert kinds_of(conn)[withheld] == "alert"
    assert list(segment.record_rows(conn, "alert", Scope(), operator, first, last)) == []
    [shown] = segment.record_rows(conn, "alert", Scope(), town, first, last)
    assert shown[0] == withheld


def test_a_kind_the_reader_may_not_see_is_withheld_whole(conn: sqlite3.Connection) -> None:
    first, last = whole_chain(conn)
    no_findings = Sight(kinds=frozenset({"event"}))
    assert len(segment.withheld_seqs(conn, "finding", Scope(), no_findings, first, last)) == 2
    assert list(segment.record_rows(conn, "finding", Scope(), no_findings, first, last)) == []


def test_record_rows_name_their_columns_in_chain_order(conn: sqlite3.Connection) -> None:
    first, last = whole_chain(conn)
    cursor = segment.record_rows(conn, "finding", Scope(), Sight(), first, last)
    names = [d[0] for d in cursor.description]
    rows = [dict(zip(names, row, strict=True)) for row in cursor]
    assert names[:2] == ["seq", "key"] and "revision" in names
    assert [r["revision"] for r in rows] == [1, 2]
    assert rows[0]["seq"] < rows[1]["seq"]
    assert rows[1]["key"] == f"{rows[1]['id']}|2"


def test_rows_outside_the_window_are_not_shown(conn: sqlite3.Connection) -> None:
    first, last = whole_chain(conn)
    later = Scope(from_us=TO_US, to_us=TO_US + 60_000_000)
    assert list(segment.record_rows(conn, "event", later, Sight(), first, last)) == []
    assert len(segment.withheld_seqs(conn, "event", later, Sight(), first, last)) == 1


# --------------------------------------------------------------------------- the rows


def test_the_sound_walk_gives_every_entry_its_chain_line(conn: sqlite3.Connection) -> None:
    first, last = whole_chain(conn)
    kinds = kinds_of(conn)
    [alert] = segment.withheld_seqs(conn, "alert", Scope(), Sight(audiences=frozenset()), first, last)
    rows = segment.sound_walk(conn, Scope(), first, last, json.dumps([alert]), 8).fetchall()
    assert [r[12] for r in rows] == list(range(first, last + 1))
    by_seq = {r[12]: r for r in rows}
    digest = dict(conn.execute("SELECT seq, digest FROM chain WHERE site = ?", (SITE,)))
    sound = next(seq for seq in by_seq if kinds[seq] == "sound")
    sensor, ts_us, *_, source, _, tag, missing = by_seq[sound]
    key = conn.execute("SELECT key FROM chain WHERE site = ? AND seq = ?", (SITE, sound)).fetchone()[0]
    assert key == f"{sensor}|{ts_us}"
    assert (source, missing) == ("levels", None)
    assert tag == digest[sound][:8]  # the caller writes its line, f"{seq},sound,,{tag},"
    assert by_seq[alert][13] == f"{alert},alert,,{digest[alert]},"  # its digest alone
    [event] = [seq for seq, kind in kinds.items() if kind == "event"]
    assert by_seq[event][0] is None
    assert by_seq[event][13].startswith(f'{event},event,"truck|t1,""a"""')  # quoted for CSV
    assert sum(1 for r in rows if r[0] is not None) == 480


def test_the_sound_walk_of_named_sensors_and_a_lost_row(site: Site, tmp_path: Path) -> None:
    store = copy_of(site, tmp_path)
    with sqlite3.connect(store) as writable:
        lost = writable.execute(
            "SELECT chain_seq FROM sound WHERE sensor = 'n1' AND ts_us = ?", (FROM_US + 5_000_000,)
        ).fetchone()[0]
        writable.execute("DELETE FROM sound WHERE chain_seq = ?", (lost,))
    writable.close()
    conn = segment.open_read_only(store)
    first, last = whole_chain(conn)
    rows = segment.sound_walk(conn, Scope(sensors=("n1",)), first, last, "[]", 8).fetchall()
    conn.close()
    assert sum(1 for r in rows if r[0] is not None) == 239
    assert [r[12] for r in rows if r[14]] == [lost]
    assert all(r[0] == "n1" for r in rows if r[0] is not None)


def test_reading_rows_in_chain_order_and_a_lost_row(site: Site, tmp_path: Path) -> None:
    store = copy_of(site, tmp_path)
    with sqlite3.connect(store) as writable:
        writable.execute("DELETE FROM readings WHERE kind = 'light' AND ts_us = ?", (FROM_US,))
    writable.close()
    conn = segment.open_read_only(store)
    first, last = whole_chain(conn)
    light = segment.reading_rows(conn, "light", Scope(), first, last).fetchall()
    weather = segment.reading_rows(conn, "weather", Scope(sensors=("wx",)), first, last).fetchall()
    none = segment.reading_rows(conn, "light", Scope(sensors=("wx",)), first, last).fetchall()
    conn.close()
    assert len(light) == 24 and [r[1] for r in light].count(1) == 1
    assert [r[0] for r in light] == sorted(r[0] for r in light)
    _, absent, site_id, sensor, kind, ts_us, duration, data = light[1]
    assert (absent, site_id, sensor, kind, ts_us, duration) == (
        0,
        SITE,
        "l1",
        "light",
        FROM_US + 10_000_000,
        10.0,
    )
    assert json.loads(data)["lux_max"] == 0.7
    assert len(weather) == 4 and none == []


# --------------------------------------------------------------------------- the plots' minutes


def test_the_plots_minutes(conn: sqlite3.Connection) -> None:
    minute = FROM_US // 60_000_000
    sound = {
        (sensor, m): (n, peak) for sensor, m, _, n, peak in segment.sound_minutes(conn, SITE, FROM_US, TO_US)
    }
    assert sorted({m for _, m in sound}) == [minute, minute + 1, minute + 2, minute + 3]
    assert sound[("n1", minute)][0] == 60 and sound[("n2", minute)][1] == pytest.approx(79.0 + 12 * 0.37)
    light = {m: (n, peak) for m, _, n, peak in segment.light_minutes(conn, SITE, "l1", FROM_US, TO_US)}
    assert light == {minute + i: (6, 0.7) for i in range(4)}
    assert list(segment.light_minutes(conn, SITE, "n1", FROM_US, TO_US)) == []
