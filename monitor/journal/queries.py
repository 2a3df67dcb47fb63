"""Reads of the journal's tables for code that holds a plain ``sqlite3.Connection``.

The notice renderers, the `minewatch demo` report and the delivery worker each open their
own connection to the store file rather than a ``Store`` (which migrates and takes the
pipeline's role); they read the journal here, and ``Store`` answers the same questions
through these functions, so each query is written once. Every function reads only and
returns ``sqlite3.Row`` (by name or by position) whatever the connection's row factory.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

from monitor.wire.canonical import from_us, to_us

# The condition a query that looks chain entries up by key adds, so that SQLite uses the
# partial index chain_lookup (monitor/journal/migrations.py): it only holds kinds but sound.
KEYED = "kind <> 'sound'"

# Tables of the records `minewatch demo` counts as stored by the daemon.
_RECORD_TABLES = ("sound", "readings", "events", "audio")


class ChainEntry(NamedTuple):
    """A record's entry in its site's hash chain."""

    seq: int
    digest: str
    head: str


class Anchor(NamedTuple):
    """A chain head the daemon published on ``<prefix>/<site>/anchors``."""

    site: str
    seq: int
    head: str
    published: datetime


def _rows(conn: sqlite3.Connection, sql: str, params: Sequence[Any]) -> list[sqlite3.Row]:
    cursor = conn.cursor()
    cursor.row_factory = sqlite3.Row  # the caller's connection may have no row factory
    return list(cursor.execute(sql, params))


def current_findings(
    conn: sqlite3.Connection,
    *,
    site: str | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
    standards: Sequence[str] | None = None,
    ids: Sequence[str] | None = None,
) -> list[sqlite3.Row]:
    """The latest revision of each finding, when it is not retracted, ordered by start.

    The filters (each optional) choose the findings: of ``site``, starting in [start, end),
    judged under one of ``standards``, or named in ``ids`` (at most SQLite's variable limit).
    They apply inside the choice of the latest revision, as they always have for a window: a
    finding's id fixes its site, standard and start, so no revision falls outside them.
    """
    terms: list[str] = []
    params: list[Any] = []
    if site is not None:
        terms.append("site = ?")
        params.append(site)
    if start is not None:
        terms.append("start_us >= ?")
        params.append(to_us(start))
    if end is not None:
        terms.append("start_us < ?")
        params.append(to_us(end))
    if standards is not None:
        terms.append(f"standard IN ({','.join('?' * len(standards))})")
        params.extend(standards)
    if ids is not None:
        terms.append(f"id IN ({','.join('?' * len(ids))})")
        params.extend(ids)
    where = f" WHERE {' AND '.join(terms)}" if terms else ""
    return _rows(
        conn,
        "SELECT f.* FROM findings f JOIN (SELECT id, MAX(revision) AS revision FROM findings"
        f"{where} GROUP BY id) last ON f.id = last.id AND f.revision = last.revision"
        " WHERE f.retracted = 0 ORDER BY f.start_us",
        params,
    )


def chain_entry(conn: sqlite3.Connection, site: str, kind: str, key: str) -> ChainEntry | None:
    """The first chain entry of a record of ``kind`` (any but sound, which is not keyed) under ``key``."""
    if kind == "sound":
        raise ValueError("sound entries are found through the sound row's chain_seq, not by key")
    row = conn.execute(
        f"SELECT seq, digest, head FROM chain WHERE site = ? AND kind = ? AND {KEYED} AND key = ?"
        " ORDER BY seq LIMIT 1",
        (site, kind, key),
    ).fetchone()
    return None if row is None else ChainEntry(int(row[0]), str(row[1]), str(row[2]))


def event_data(conn: sqlite3.Connection, site: str, kind: str, event_id: str) -> str | None:
    """The stored JSON text of one event (as it arrived, canonical), None if there is none."""
    row = conn.execute(
        "SELECT data FROM events WHERE site = ? AND kind = ? AND id = ?", (site, kind, event_id)
    ).fetchone()
    return None if row is None else str(row[0])


def events_overlapping(
    conn: sqlite3.Connection, site: str, start: datetime, end: datetime
) -> list[sqlite3.Row]:
    """Events of ``site`` on record in [start, end): their (kind, id, ts_us, end_us, data), by start.

    An event without an end (an instant) overlaps where its time falls on or after ``start``.
    """
    return _rows(
        conn,
        "SELECT kind, id, ts_us, end_us, data FROM events WHERE site = ? AND ts_us < ?"
        " AND COALESCE(end_us, ts_us) >= ? ORDER BY ts_us",
        (site, to_us(end), to_us(start)),
    )


def sound_laeq(
    conn: sqlite3.Connection, site: str, sensors: Sequence[str], start: datetime, end: datetime
) -> list[sqlite3.Row]:
    """(sensor, ts_us, LAeq) of the sound periods of ``sensors`` starting in [start, end), by time."""
    marks = ",".join("?" * len(sensors))
    return _rows(
        conn,
        f"SELECT sensor, ts_us, LAeq FROM sound WHERE site = ? AND sensor IN ({marks}) AND ts_us >= ?"
        " AND ts_us < ? ORDER BY ts_us",
        (site, *sensors, to_us(start), to_us(end)),
    )


def readings_of(
    conn: sqlite3.Connection, site: str, kind: str, sensors: Sequence[str], start: datetime, end: datetime
) -> list[sqlite3.Row]:
    """(sensor, ts_us, duration_s, data) of the ``kind`` readings of ``sensors`` starting in
    [start, end), by time."""
    marks = ",".join("?" * len(sensors))
    return _rows(
        conn,
        f"SELECT sensor, ts_us, duration_s, data FROM readings WHERE site = ? AND kind = ?"
        f" AND sensor IN ({marks}) AND ts_us >= ? AND ts_us < ? ORDER BY ts_us",
        (site, kind, *sensors, to_us(start), to_us(end)),
    )


def sound_span(conn: sqlite3.Connection, site: str) -> tuple[datetime, datetime] | None:
    """The first and the last stored second of the site's sound, None without any."""
    row = conn.execute("SELECT MIN(ts_us), MAX(ts_us) FROM sound WHERE site = ?", (site,)).fetchone()
    return None if row is None or row[0] is None else (from_us(row[0]), from_us(row[1]))


def progress(conn: sqlite3.Connection, site: str) -> tuple[datetime, datetime] | None:
    """(evaluated until, final until) of the site's judging, None before its first minute."""
    row = conn.execute(
        "SELECT evaluated_until_us, final_until_us FROM progress WHERE site = ?", (site,)
    ).fetchone()
    return (from_us(row[0]), from_us(row[1])) if row else None


def stored_records(conn: sqlite3.Connection) -> int:
    """How many sound periods, readings, events and audio blocks the store holds (all sites)."""
    return sum(int(conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]) for t in _RECORD_TABLES)


def alert_counts(conn: sqlite3.Connection) -> dict[str, int]:
    """Alerts raised, per audience (as stored: a comma-separated list), over all sites."""
    return {
        str(audience): int(n)
        for audience, n in conn.execute("SELECT audience, COUNT(*) FROM alerts GROUP BY audience")
    }


def anchors(conn: sqlite3.Connection, site: str) -> list[Anchor]:
    """The chain heads published for ``site``, in chain order."""
    return [
        Anchor(str(s), int(q), str(h), from_us(t))
        for s, q, h, t in conn.execute(
            "SELECT site, seq, head, published_us FROM anchors WHERE site = ? ORDER BY seq", (site,)
        )
    ]
