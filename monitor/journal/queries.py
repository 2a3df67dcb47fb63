"""Reads of the journal's tables for code that holds a plain ``sqlite3.Connection``.

The notice renderers, the `minewatch demo` report and the delivery worker each open their
own connection to the store file rather than a ``Store`` (which migrates and takes the
pipeline's role); they read the journal here, and ``Store`` answers the same questions
through these functions, so each query is written once. The portal reads here too, through
its Store's connection, and its caches (monitor/portal/data.py) rely on these exact queries.
Every function reads only; rows come as ``sqlite3.Row`` (by name or by position) whatever
the connection's row factory.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Iterator, Mapping, Sequence
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


def _rows(conn: sqlite3.Connection, sql: str, params: Sequence[Any] | Mapping[str, Any]) -> list[sqlite3.Row]:
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
    kinds: Sequence[str] | None = None,
    without_data: bool = False,
) -> list[sqlite3.Row]:
    """The latest revision of each finding, when it is not retracted, ordered by start.

    The filters (each optional) choose the findings: of ``site``, starting in [start, end),
    judged under one of ``standards``, or named in ``ids`` (at most SQLite's variable limit).
    ``kinds`` chooses among the latest revisions (a violation revised to exempt is not one).
    They apply inside the choice of the latest revision, as they always have for a window: a
    finding's id fixes its site, standard and start, so no revision falls outside them.

    ``without_data``: instead of every column, only (id, kind, standard, section, start_us,
    end_us, summary, sensors, window_start, window_end), the last four taken out of the data as
    JSON values (NULL where absent; the window is the one the summary tells, e.g. noise's worst
    60-s window). A listing needs no more, and the data also carries every reading the finding
    used (60 refs for a minute), which is then neither returned nor decoded.
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
    columns = _FINDING_LISTING if without_data else "f.*"
    of_kinds = f" AND f.kind IN ({','.join('?' * len(kinds))})" if kinds is not None else ""
    return _rows(
        conn,
        f"SELECT {columns} FROM findings f JOIN (SELECT id, MAX(revision) AS revision FROM findings"
        f"{where} GROUP BY id) last ON f.id = last.id AND f.revision = last.revision"
        f" WHERE f.retracted = 0{of_kinds} ORDER BY f.start_us",
        [*params, *(kinds or ())],
    )


def notice_row(conn: sqlite3.Connection, site: str, notice_id: str) -> dict[str, Any] | None:
    """A notice's stored row by its column names (None: no such notice of the site)."""
    cursor = conn.execute("SELECT * FROM notices WHERE site = ? AND id = ?", (site, notice_id))
    values = cursor.fetchone()
    if values is None:
        return None
    return dict(zip([d[0] for d in cursor.description], values, strict=True))


def notice_of_episode(conn: sqlite3.Connection, episode_id: str) -> str | None:
    """The notice an episode was told in (its latest record), if any."""
    row = conn.execute(
        "SELECT notice_id FROM notice_episodes WHERE episode_id = ? ORDER BY revision DESC LIMIT 1",
        (episode_id,),
    ).fetchone()
    return None if row is None else str(row[0])


def notices_in_procedure(conn: sqlite3.Connection, site: str, at: datetime) -> list[sqlite3.Row]:
    """The site's notices in the cure procedure or escalated at ``at``, as their changes up to
    then left them: ``id, standard, section, status, deadline_us``, oldest first. A notice issued
    later, or closed by then, is not among them."""
    return _rows(
        conn,
        "SELECT n.id, n.standard, n.section, c.status, c.deadline_us FROM notices n"
        " JOIN notice_changes c ON c.notice_id = n.id AND c.seq = ("
        "  SELECT MAX(seq) FROM notice_changes WHERE notice_id = n.id AND at_us <= :at)"
        " WHERE n.site = :site AND n.opened_us <= :at"
        " AND c.status IN ('open', 'extension_requested', 'extended', 'escalated')"
        " ORDER BY n.opened_us, n.id",
        {"site": site, "at": to_us(at)},
    )


_FINDING_LISTING = (
    "f.id, f.kind, f.standard, f.section, f.start_us, f.end_us,"
    " json_extract(f.data, '$.summary') AS summary, json_extract(f.data, '$.sensors') AS sensors,"
    " json_extract(f.data, '$.details.window_start') AS window_start,"
    " json_extract(f.data, '$.details.window_end') AS window_end"
)


def findings_version(conn: sqlite3.Connection) -> int:
    """A number that grows whenever a finding is stored, at any site (0 before the first).

    Findings are only ever inserted (a change is a new revision row), so the table's largest
    rowid names its state: one O(1) lookup tells a cache whether findings it read still stand.
    """
    return int(conn.execute("SELECT MAX(rowid) FROM findings").fetchone()[0] or 0)


def findings_stored_between(
    conn: sqlite3.Connection, site: str, after: int, through: int
) -> list[sqlite3.Row]:
    """The finding rows (revisions and retractions) of ``site`` stored after version ``after``
    through ``through`` (``findings_version``), in the order they were stored, with ``rowid``:
    a seek on the rowid, as many rows as were stored meanwhile, whatever the table holds."""
    return _rows(
        conn,
        "SELECT rowid, id, revision, kind, start_us, end_us, retracted, data FROM findings"
        # "+site": not by the index on (site, start_us), which reads every row of the site.
        " WHERE rowid > ? AND rowid <= ? AND +site = ? ORDER BY rowid",
        (after, through, site),
    )


def finding_stored_as(conn: sqlite3.Connection, version: int) -> tuple[str, int] | None:
    """The (id, revision) of the finding row stored as ``version`` (its rowid), if any."""
    row = conn.execute("SELECT id, revision FROM findings WHERE rowid = ?", (version,)).fetchone()
    return None if row is None else (str(row[0]), int(row[1]))


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


def audio_blocks(
    conn: sqlite3.Connection, site: str, sensor: str, start_us: int, end_us: int
) -> list[sqlite3.Row]:
    """The audio blocks of ``sensor`` starting in [start_us, end_us), all columns, in time order."""
    return _rows(
        conn,
        "SELECT * FROM audio WHERE site = ? AND sensor = ? AND ts_us >= ? AND ts_us < ? ORDER BY ts_us",
        (site, sensor, start_us, end_us),
    )


def first_audio_block(
    conn: sqlite3.Connection, site: str, sensor: str, start_us: int, end_us: int
) -> int | None:
    """The start (ts_us) of ``sensor``'s first audio block starting in [start_us, end_us), None
    without any: one lookup in the table's key, the samples not read."""
    row = conn.execute(
        "SELECT MIN(ts_us) FROM audio WHERE site = ? AND sensor = ? AND ts_us >= ? AND ts_us < ?",
        (site, sensor, start_us, end_us),
    ).fetchone()
    return None if row is None or row[0] is None else int(row[0])


def chain_head_seq(conn: sqlite3.Connection, site: str) -> int:
    """The seq of the site's newest chain entry, 0 before any.

    Every record stored for the site advances it: while it is unchanged, nothing of the site
    changed (an indexed lookup, read afresh each time, unlike ``Store.head``'s own cache).
    """
    row = conn.execute("SELECT MAX(seq) FROM chain WHERE site = ?", (site,)).fetchone()
    return int(row[0] or 0)


def sound_seconds_chained(
    conn: sqlite3.Connection, site: str, after_seq: int, through_seq: int
) -> Iterator[tuple[str, int]]:
    """(sensor, ts_us) of each sound second whose chain entry has a seq in (after_seq, through_seq].

    Streamed from the cursor, as there may be hundreds of thousands: read it to its end, so
    that no statement stays open on the connection.
    """
    for (key,) in conn.execute(
        "SELECT key FROM chain WHERE site = ? AND seq > ? AND seq <= ? AND kind = 'sound'",
        (site, after_seq, through_seq),
    ):
        # A sound entry's key is "sensor|ts_us" (Store.append_sounds); a sensor id may hold "|".
        sensor, _, ts_us = str(key).rpartition("|")
        yield sensor, int(ts_us)


def portal_actions(
    conn: sqlite3.Connection, site: str, limit: int, roles: Collection[str]
) -> list[sqlite3.Row]:
    """The site's newest ``limit`` portal actions by accounts of ``roles``, newest first: every
    column of the row and the ``seq`` of its chain entry (None without one)."""
    wanted = sorted(roles)
    if not wanted:
        return []
    return _rows(
        conn,
        "SELECT p.*, c.seq FROM portal_actions p LEFT JOIN chain c ON c.site = p.site"
        " AND c.kind = 'portal_action' AND c.key = CAST(p.id AS TEXT) WHERE p.site = ?"
        f" AND p.role IN ({', '.join('?' * len(wanted))}) ORDER BY p.id DESC LIMIT ?",
        (site, *wanted, limit),
    )


def event_data(conn: sqlite3.Connection, site: str, kind: str, event_id: str) -> str | None:
    """The stored JSON text of one event (as it arrived, canonical), None if there is none."""
    row = conn.execute(
        "SELECT data FROM events WHERE site = ? AND kind = ? AND id = ?", (site, kind, event_id)
    ).fetchone()
    return None if row is None else str(row[0])


def event_rows(conn: sqlite3.Connection, site: str, kind: str, event_id: str) -> list[sqlite3.Row]:
    """The stored rows (kind, id, ts_us, end_us, data) of the events of ``site`` of ``kind`` with id
    ``event_id``, earliest first: a blast's notices, by the blast's id."""
    return _rows(
        conn,
        "SELECT kind, id, ts_us, end_us, data FROM events WHERE site = ? AND kind = ? AND id = ?"
        " ORDER BY ts_us",
        (site, kind, event_id),
    )


def event_times(
    conn: sqlite3.Connection, site: str, event_id: str, kind: str | None = None
) -> list[tuple[int, int | None]]:
    """(ts_us, end_us) of the events of ``site`` with id ``event_id`` of ``kind`` (None: any kind)."""
    if kind is None:
        rows = conn.execute("SELECT ts_us, end_us FROM events WHERE site = ? AND id = ?", (site, event_id))
    else:
        rows = conn.execute(
            "SELECT ts_us, end_us FROM events WHERE site = ? AND kind = ? AND id = ?", (site, kind, event_id)
        )
    return [(int(ts), None if end is None else int(end)) for ts, end in rows]


def blast_times(conn: sqlite3.Connection, site: str, blast_id: str) -> list[tuple[int, int | None]]:
    """(ts_us, end_us) of the blast events of ``site`` whose blast_id is ``blast_id``."""
    rows = conn.execute(
        "SELECT ts_us, end_us FROM events WHERE site = ? AND kind = 'blast'"
        " AND json_extract(data, '$.blast_id') = ?",
        (site, blast_id),
    )
    return [(int(ts), None if end is None else int(end)) for ts, end in rows]


def finding_revisions(conn: sqlite3.Connection, site: str, ids: Sequence[str]) -> list[sqlite3.Row]:
    """(start_us, end_us, data) of every stored revision of the findings ``ids`` of ``site``."""
    rows: list[sqlite3.Row] = []
    for i in range(0, len(ids), 500):
        chunk = list(ids[i : i + 500])
        marks = ",".join("?" * len(chunk))
        rows += _rows(
            conn,
            f"SELECT start_us, end_us, data FROM findings WHERE site = ? AND id IN ({marks})",
            (site, *chunk),
        )
    return rows


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


def linear_peaks(
    conn: sqlite3.Connection, site: str, sensors: Sequence[str], start: datetime, end: datetime
) -> list[sqlite3.Row]:
    """(sensor, ts_us, LZpeak) of the sound periods of ``sensors`` starting in [start, end) that
    carry a linear peak, loudest first: the rows an evidence bundle's sound.csv holds."""
    marks = ",".join("?" * len(sensors))
    return _rows(
        conn,
        f"SELECT sensor, ts_us, LZpeak FROM sound WHERE site = ? AND sensor IN ({marks}) AND ts_us >= ?"
        " AND ts_us < ? AND LZpeak IS NOT NULL ORDER BY LZpeak DESC, sensor, ts_us",
        (site, *sensors, to_us(start), to_us(end)),
    )


# Minutes are numbered from the epoch (ts_us // 60_000_000); a minute's LAeq is the energy mean
# of its seconds, computed in SQLite so that a day of a meter (86,400 rows) never reaches Python.
# Windows are in microseconds, as the portal's minute cache keys and splits them.


def minute_laeq_of_site(conn: sqlite3.Connection, site: str, start_us: int, end_us: int) -> list[sqlite3.Row]:
    """(sensor, minute, LAeq) of every minute of every sound meter of ``site`` with seconds in
    [start_us, end_us), in no particular order.

    One pass over the window for all meters: the rows are keyed (site, ts_us, sensor), so a
    query per sensor would read every meter's rows once per meter.
    """
    return _rows(
        conn,
        "SELECT sensor, ts_us / 60000000 AS m, 10 * log10(avg(power(10, LAeq / 10.0))) FROM sound"
        " WHERE site = ? AND ts_us >= ? AND ts_us < ? GROUP BY m, sensor",
        (site, start_us, end_us),
    )


def minute_laeq_of_sensor(
    conn: sqlite3.Connection, site: str, sensor: str, start_us: int, end_us: int
) -> float | None:
    """The LAeq of ``sensor``'s seconds in [start_us, end_us), a span within one minute; None
    without any."""
    row = conn.execute(
        "SELECT ts_us / 60000000 AS m, 10 * log10(avg(power(10, LAeq / 10.0))) FROM sound"
        " WHERE site = ? AND sensor = ? AND ts_us >= ? AND ts_us < ? GROUP BY m",
        (site, sensor, start_us, end_us),
    ).fetchone()
    return None if row is None else float(row[1])


# Hours are numbered from the epoch (ts_us // 3_600_000_000): the site's local hours wherever its
# zone is a whole number of hours from UTC. Lx is the per-second LAeq of the ceil(x % of n)-th
# loudest second of the hour, to 0.1 dB (the bin round(LAeq x 10)): the definition the monthly
# report uses (monitor/reports/content.py, level_statistics), here computed in SQLite from each
# hour's 0.1 dB histogram, so that a month of a meter (2.6 million seconds) never reaches Python.
# The histograms of whole hours are kept in sound_hours (migrations.SOUND_HOURS_KEPT: counted as
# each hour of data ends, late seconds by triggers): a month of a meter is then 744 hours of a few
# dozen bins each; a part of an hour at either end of a window, and the hours not counted yet,
# are counted from their seconds.
HOUR_US = 3_600_000_000
_SECOND_BINS = (
    "SELECT sensor, ts_us / 3600000000 AS hour, CAST(round(LAeq * 10) AS INTEGER) AS bin,"
    " COUNT(*) AS n, SUM(power(10, LAeq / 10.0)) AS energy"
    " FROM sound WHERE site = ? AND ts_us >= ? AND ts_us < ? GROUP BY sensor, hour, bin"
)
_HOUR_BINS = "SELECT sensor, hour, bin, n, energy FROM sound_hours WHERE site = ? AND hour >= ? AND hour < ?"
_HOURLY_LEVELS = """
WITH bins AS ({bins}), ranked AS (
    SELECT sensor, hour, bin, energy,
           SUM(n) OVER (PARTITION BY sensor, hour ORDER BY bin DESC ROWS UNBOUNDED PRECEDING) AS louder,
           SUM(n) OVER (PARTITION BY sensor, hour) AS seconds
    FROM bins
)
SELECT sensor, hour, seconds, 10 * log10(SUM(energy) / seconds) AS laeq,
       MAX(CASE WHEN louder >= ceil(seconds * 0.10) THEN bin END) / 10.0 AS l10,
       MAX(CASE WHEN louder >= ceil(seconds * 0.90) THEN bin END) / 10.0 AS l90
FROM ranked GROUP BY sensor, hour ORDER BY sensor, hour
"""


def sound_hours_until(conn: sqlite3.Connection, site: str) -> int | None:
    """The hour (from the epoch) before which sound_hours holds every second of ``site``
    (Store.keep_sound_hours); None before its first count."""
    row = conn.execute("SELECT until_hour FROM sound_hours_kept WHERE site = ?", (site,)).fetchone()
    return None if row is None else int(row[0])


def hourly_levels_of_site(
    conn: sqlite3.Connection, site: str, start_us: int, end_us: int
) -> list[sqlite3.Row]:
    """(``sensor``, ``hour``, ``seconds``, ``laeq``, ``l10``, ``l90``) of every clock hour of every
    sound meter of ``site`` with seconds in [start_us, end_us), by sensor and hour. LAeq: the
    energy average of the seconds' LAeq, 10 log10(mean(10^(L/10))); L10/L90: see above. Whole
    hours the store has counted from sound_hours (``sound_hours_kept``), the rest from the seconds:
    the parts of hours at the ends, and the hours since the last counted (the daemon counts each
    hour once its data has moved on: Store.keep_sound_hours)."""
    first, last = -(-start_us // HOUR_US), end_us // HOUR_US  # the whole hours: [first, last)
    kept = sound_hours_until(conn, site)
    last = min(last, kept) if kept is not None else first  # the whole hours counted
    if first >= last:
        return hourly_levels_from_seconds(conn, site, start_us, end_us)
    parts: list[str] = [_HOUR_BINS]
    params: list[Any] = [site, first, last]
    if start_us < first * HOUR_US:
        parts.append(_SECOND_BINS)
        params += [site, start_us, first * HOUR_US]
    if last * HOUR_US < end_us:
        parts.append(_SECOND_BINS)
        params += [site, last * HOUR_US, end_us]
    return _rows(conn, _HOURLY_LEVELS.format(bins=" UNION ALL ".join(parts)), params)


def hourly_levels_from_seconds(
    conn: sqlite3.Connection, site: str, start_us: int, end_us: int
) -> list[sqlite3.Row]:
    """As :func:`hourly_levels_of_site`, every hour counted from its seconds (the definition the
    kept histograms must equal)."""
    return _rows(conn, _HOURLY_LEVELS.format(bins=_SECOND_BINS), (site, start_us, end_us))


def light_levels(
    conn: sqlite3.Connection, site: str, kind: str, sensor: str, start_us: int, end_us: int, step_s: int
) -> list[sqlite3.Row]:
    """(``slot``, ``lux_mean``, ``lux_max``) of the ``kind`` readings (light or sky) of ``sensor``
    starting in [start_us, end_us), per ``step_s`` slot numbered from the epoch: the mean of the
    readings' means and the highest of their maxima, aggregated in SQLite."""
    return _rows(
        conn,
        "SELECT ts_us / ? AS slot, avg(json_extract(data, '$.lux_mean')) AS lux_mean,"
        " max(json_extract(data, '$.lux_max')) AS lux_max FROM readings"
        " WHERE site = ? AND sensor = ? AND kind = ? AND ts_us >= ? AND ts_us < ?"
        " GROUP BY slot ORDER BY slot",
        (step_s * 1_000_000, site, sensor, kind, start_us, end_us),
    )


def record_bounds(
    conn: sqlite3.Connection, site: str, readings: Sequence[tuple[str, str]], start_us: int, end_us: int
) -> tuple[int, int] | None:
    """(first, last) ts_us of the site's sound seconds and of the (sensor, kind) ``readings`` in
    [start_us, end_us), None without any: each bound an index lookup (no scan of the window)."""
    # One MIN or MAX per statement: SQLite answers each from the key's end alone.
    tables = [("sound", "site = ?", (site,))] + [
        ("readings", "site = ? AND sensor = ? AND kind = ?", (site, sensor, kind))
        for sensor, kind in readings
    ]
    firsts: list[int] = []
    lasts: list[int] = []
    for table, where, params in tables:
        for fn, out in (("MIN", firsts), ("MAX", lasts)):
            row = conn.execute(
                f"SELECT {fn}(ts_us) FROM {table} WHERE {where} AND ts_us >= ? AND ts_us < ?",
                (*params, start_us, end_us),
            ).fetchone()
            if row[0] is not None:
                out.append(int(row[0]))
    return (min(firsts), max(lasts)) if firsts else None


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


def readings_chained(
    conn: sqlite3.Connection, site: str, kinds: Collection[str], after_seq: int, through_seq: int
) -> Iterator[tuple[str, int]]:
    """(sensor, ts_us) of each reading of ``kinds`` (light, weather, ...) whose chain entry has a
    seq in (after_seq, through_seq]. Streamed from the cursor, as ``sound_seconds_chained``: read
    it to its end."""
    for (key,) in conn.execute(
        "SELECT key FROM chain WHERE site = ? AND seq > ? AND seq <= ? AND kind = 'reading'",
        (site, after_seq, through_seq),
    ):
        # A reading's key is "sensor|kind|ts_us" (chain_kinds.KINDS["reading"]); a sensor id may hold "|".
        rest, _, ts_us = str(key).rpartition("|")
        sensor, _, of_kind = rest.rpartition("|")
        if of_kind in kinds:
            yield sensor, int(ts_us)


def latest_reading_data(conn: sqlite3.Connection, site: str, sensor: str, kind: str) -> str | None:
    """The stored JSON text of the sensor's newest ``kind`` reading, None if it never sent one."""
    row = conn.execute(
        "SELECT data FROM readings WHERE site = ? AND sensor = ? AND kind = ? ORDER BY ts_us DESC LIMIT 1",
        (site, sensor, kind),
    ).fetchone()
    return None if row is None else str(row[0])


def sound_seconds_of(
    conn: sqlite3.Connection, site: str, sensors: Sequence[str], start_us: int, end_us: int
) -> sqlite3.Cursor:
    """(sensor, ts_us, duration_s, *SOUND_FIELDS, source, overload) of ``sensors``' stored sound
    periods starting in [start_us, end_us), by time then sensor: a cursor, to be read as it goes.
    ``overload``: 1 for a second the meter was overloaded in, NULL (or 0) for the others."""
    from monitor.journal.chain_kinds import SOUND_FIELDS

    marks = ",".join("?" * len(sensors))
    return conn.execute(
        f"SELECT sensor, ts_us, duration_s, {', '.join(SOUND_FIELDS)}, source, overload FROM sound"
        f" WHERE site = ? AND sensor IN ({marks}) AND ts_us >= ? AND ts_us < ? ORDER BY ts_us, sensor",
        (site, *sensors, start_us, end_us),
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


def alerts_for_audience(
    conn: sqlite3.Connection,
    site: str,
    audience: str,
    start: datetime,
    end: datetime,
    limit: int,
    *,
    kind: str | None = None,
    not_kind: str | None = None,
    offset: int = 0,
) -> list[sqlite3.Row]:
    """The site's newest ``limit`` alerts raised in [start, end) for ``audience``, newest first
    (those raised in one microsecond by id), of ``kind`` only or all but ``not_kind`` when given,
    after the ``offset`` newer ones.

    An alert's audience is stored as a comma-separated list (``town,inspector``): this matches
    one whole name of it, not a part of one.
    """
    terms, params = "", []
    if kind is not None:
        terms, params = " AND kind = ?", [kind]
    elif not_kind is not None:
        terms, params = " AND kind <> ?", [not_kind]
    return _rows(
        conn,
        "SELECT * FROM alerts WHERE site = ? AND ',' || audience || ',' LIKE ? AND created_us >= ?"
        f" AND created_us < ?{terms} ORDER BY created_us DESC, id DESC LIMIT ? OFFSET ?",
        (site, f"%,{audience},%", to_us(start), to_us(end), *params, limit, offset),
    )


def alert_kinds_for_audience(conn: sqlite3.Connection, site: str, audience: str) -> list[str]:
    """The kinds of the site's alerts for ``audience``, sorted."""
    rows = conn.execute(
        "SELECT DISTINCT kind FROM alerts WHERE site = ? AND ',' || audience || ',' LIKE ? ORDER BY kind",
        (site, f"%,{audience},%"),
    ).fetchall()
    return [str(r[0]) for r in rows]


def sensors_alerted(
    conn: sqlite3.Connection, site: str, kind: str, audience: str, start: datetime, end: datetime
) -> set[str]:
    """The sensors named (in their data's ``sensors``) by the site's alerts of ``kind`` for
    ``audience`` raised in [start, end), each once, however many alerts name it."""
    rows = conn.execute(
        "SELECT DISTINCT CAST(s.value AS TEXT) FROM alerts AS a, json_each(a.data, '$.sensors') AS s"
        " WHERE a.site = ? AND a.kind = ? AND ',' || a.audience || ',' LIKE ? AND a.created_us >= ?"
        " AND a.created_us < ?",
        (site, kind, f"%,{audience},%", to_us(start), to_us(end)),
    ).fetchall()
    return {str(r[0]) for r in rows}


def anchors(conn: sqlite3.Connection, site: str) -> list[Anchor]:
    """The chain heads published for ``site``, in chain order."""
    return [
        Anchor(str(s), int(q), str(h), from_us(t))
        for s, q, h, t in conn.execute(
            "SELECT site, seq, head, published_us FROM anchors WHERE site = ? ORDER BY seq", (site,)
        )
    ]


# --------------------------------------------------------------------------- complaints and reports
# The record around a resident's complaint (monitor/complaints/check.py) and a period's figures
# for a compliance report (monitor/reports/content.py): aggregated here, in SQLite, so that a
# month of per-second rows never reaches Python.


def last_alert_us(conn: sqlite3.Connection, site: str, kind: str, condition: str) -> int | None:
    """When an alert of ``kind`` about ``condition`` was last raised for the site (None: never)."""
    row = conn.execute(
        "SELECT MAX(created_us) FROM alerts WHERE site = ? AND kind = ? AND condition = ?",
        (site, kind, condition),
    ).fetchone()
    return None if row is None or row[0] is None else int(row[0])


def alert_words(conn: sqlite3.Connection, alert_id: str) -> tuple[str, str] | None:
    """The message and data (canonical JSON) of the alert ``alert_id`` as it was chained (None:
    not stored, an alert raised outside AlertBook)."""
    row = conn.execute("SELECT message, data FROM alerts WHERE id = ?", (alert_id,)).fetchone()
    return None if row is None else (str(row[0]), str(row[1]))


def reports_with_sha256(conn: sqlite3.Connection, digest: str) -> list[sqlite3.Row]:
    """The recorded reports (table ``reports``) whose PDF or CSV has this SHA-256, oldest first."""
    return _rows(
        conn,
        "SELECT * FROM reports WHERE pdf_sha256 = ? OR csv_sha256 = ? ORDER BY made_us, id",
        (digest, digest),
    )


def report_row(conn: sqlite3.Connection, report_id: str) -> sqlite3.Row | None:
    """The recorded report ``report_id`` (table ``reports``), or None."""
    rows = _rows(conn, "SELECT * FROM reports WHERE id = ?", (report_id,))
    return rows[0] if rows else None


def chain_head_at(conn: sqlite3.Connection, site: str, seq: int) -> str | None:
    """The head of the site's chain entry ``seq`` (None: no such entry)."""
    row = conn.execute("SELECT head FROM chain WHERE site = ? AND seq = ?", (site, seq)).fetchone()
    return None if row is None else str(row[0])


def chain_head(conn: sqlite3.Connection, site: str) -> tuple[int, str]:
    """(seq, head) of the site's newest chain entry: (0, '') before any."""
    sql = "SELECT seq, head FROM chain WHERE site = ? ORDER BY seq DESC LIMIT 1"
    row = conn.execute(sql, (site,)).fetchone()
    return (0, "") if row is None else (int(row[0]), str(row[1]))


def sound_minutes(conn: sqlite3.Connection, site: str, start_us: int, end_us: int) -> list[sqlite3.Row]:
    """Per sound sensor and clock minute of ``site`` with seconds in [start_us, end_us):
    ``sensor``, ``minute`` (numbered from the epoch), ``seconds`` (covered by the rows received), ``laeq``
    (energy average of the seconds' LAeq, dB(A)) and ``lafmax`` (their highest LAFmax)."""
    return _rows(
        conn,
        "SELECT sensor, ts_us / 60000000 AS minute, SUM(duration_s) AS seconds,"
        " 10 * log10(avg(power(10, LAeq / 10.0))) AS laeq, MAX(LAFmax) AS lafmax FROM sound"
        " WHERE site = ? AND ts_us >= ? AND ts_us < ? GROUP BY minute, sensor ORDER BY sensor, minute",
        (site, start_us, end_us),
    )


def overloaded_seconds(conn: sqlite3.Connection, site: str, start_us: int, end_us: int) -> dict[str, float]:
    """Per sensor, the seconds of its sound periods starting in [start_us, end_us) measured with
    the meter overloaded (none: not listed), read from the partial index of such rows alone
    (named: without statistics SQLite walks the window's rows by the key to find none)."""
    rows = conn.execute(
        "SELECT sensor, SUM(duration_s) FROM sound INDEXED BY sound_overloaded"
        " WHERE site = ? AND ts_us >= ? AND ts_us < ? AND overload GROUP BY sensor",
        (site, start_us, end_us),
    )
    return {str(r[0]): float(r[1]) for r in rows}


def sound_histogram(conn: sqlite3.Connection, site: str, start_us: int, end_us: int) -> list[sqlite3.Row]:
    """The per-second LAeq of every sound sensor of ``site`` in [start_us, end_us) as a 0.1 dB
    histogram, one pass over the rows: (``sensor``, ``bin`` = round(LAeq x 10), ``seconds``,
    ``energy`` = the sum of 10^(LAeq/10) of its rows, ``lafmax`` = their highest LAFmax).

    The energy sums give LAeq exactly; the bins give L10, L50 and L90 to 0.1 dB; a day of ten
    meters (864,000 rows) comes back as a few thousand rows.
    """
    return _rows(
        conn,
        "SELECT sensor, CAST(round(LAeq * 10) AS INTEGER) AS bin, COUNT(*) AS seconds,"
        " SUM(power(10, LAeq / 10.0)) AS energy, MAX(LAFmax) AS lafmax FROM sound"
        " WHERE site = ? AND ts_us >= ? AND ts_us < ? GROUP BY sensor, bin",
        (site, start_us, end_us),
    )


# The parts of [:a, :b) outside the site's judged windows (table judged), as rows (s, e): the
# windows clipped to the period, ordered; a gap before each that starts after every earlier
# one has ended, and one after the last.
_JUDGING_GAPS = """
WITH spans AS (
    SELECT MAX(start_us, :a) AS s, MIN(end_us, :b) AS e FROM judged
    WHERE site = :site AND end_us > :a AND start_us < :b),
ordered AS (
    SELECT s, COALESCE(MAX(e) OVER (ORDER BY s ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), :a)
        AS before FROM spans),
gaps AS (
    SELECT before AS s, s AS e FROM ordered WHERE s > before
    UNION ALL
    SELECT s, e FROM (SELECT COALESCE(MAX(e), :a) AS s, :b AS e FROM spans) WHERE s < e)
"""


def judging_gaps(conn: sqlite3.Connection, site: str, start_us: int, end_us: int) -> list[tuple[int, int]]:
    """The spans of [start_us, end_us) the site's judging has not covered (table judged), by time."""
    rows = conn.execute(
        _JUDGING_GAPS + "SELECT s, e FROM gaps ORDER BY s", {"site": site, "a": start_us, "b": end_us}
    )
    return [(int(s), int(e)) for s, e in rows]


def unjudged_counts(conn: sqlite3.Connection, site: str, start_us: int, end_us: int) -> list[sqlite3.Row]:
    """(``sensor``, ``kind``, ``rows``, ``seconds``) of the site's sound rows and readings in
    [start_us, end_us) that lie outside its judged windows: counted over the gaps only (each a
    key range of the sound table), so a fully judged month costs no pass over its rows."""
    return _rows(
        conn,
        _JUDGING_GAPS
        + "SELECT x.sensor AS sensor, 'sound' AS kind, COUNT(*) AS rows, SUM(x.duration_s) AS seconds"
        " FROM gaps CROSS JOIN sound x WHERE x.site = :site AND x.ts_us >= gaps.s AND x.ts_us < gaps.e"
        " GROUP BY x.sensor"
        " UNION ALL"
        " SELECT r.sensor, r.kind, COUNT(*), SUM(r.duration_s) FROM gaps CROSS JOIN readings r"
        " WHERE r.site = :site AND r.ts_us >= gaps.s AND r.ts_us < gaps.e GROUP BY r.sensor, r.kind",
        {"site": site, "a": start_us, "b": end_us},
    )


def reading_counts(conn: sqlite3.Connection, site: str, start_us: int, end_us: int) -> list[sqlite3.Row]:
    """(``sensor``, ``kind``, ``readings``, ``seconds`` covered) of the site's light, weather,
    turbidity and status readings starting in [start_us, end_us)."""
    return _rows(
        conn,
        "SELECT sensor, kind, COUNT(*) AS readings, SUM(duration_s) AS seconds FROM readings"
        " WHERE site = ? AND ts_us >= ? AND ts_us < ? GROUP BY sensor, kind ORDER BY sensor, kind",
        (site, start_us, end_us),
    )


def hourly_reading_counts(
    conn: sqlite3.Connection, site: str, kinds: Sequence[str], start_us: int, end_us: int
) -> list[sqlite3.Row]:
    """(``sensor``, ``hour``, ``readings``) of the site's readings of ``kinds`` starting in
    [start_us, end_us), per sensor and clock hour (numbered from the epoch): what
    :func:`reading_counts` counts, in hours that can be counted again one at a time."""
    marks = ", ".join("?" * len(kinds))
    return _rows(
        conn,
        f"SELECT sensor, ts_us / {HOUR_US} AS hour, COUNT(*) AS readings FROM readings"
        f" INDEXED BY readings_by_kind WHERE site = ? AND kind IN ({marks}) AND ts_us >= ? AND ts_us < ?"
        " GROUP BY sensor, hour",
        (site, *kinds, start_us, end_us),
    )


def health_between(conn: sqlite3.Connection, site: str, start_us: int, end_us: int) -> list[sqlite3.Row]:
    """(sensor, ts_us, state, gap_s, detail) of the site's health changes in [start_us, end_us), by time."""
    return _rows(
        conn,
        "SELECT sensor, ts_us, state, gap_s, detail FROM health WHERE site = ? AND ts_us >= ? AND ts_us < ?"
        " ORDER BY ts_us, sensor",
        (site, start_us, end_us),
    )


def calibration_between(conn: sqlite3.Connection, site: str, start_us: int, end_us: int) -> list[sqlite3.Row]:
    """(sensor, ts_us, reference_db, measured_db, drift_db, flagged) of the site's calibration
    checks in [start_us, end_us), by time."""
    return _rows(
        conn,
        "SELECT sensor, ts_us, reference_db, measured_db, drift_db, flagged FROM calibration"
        " WHERE site = ? AND ts_us >= ? AND ts_us < ? ORDER BY ts_us, sensor",
        (site, start_us, end_us),
    )


# --------------------------------------------------------------------------- outputs (`minewatch status`)


class DeliveryCounts(NamedTuple):
    pending: int  # not sent yet, failing ones included
    failing: int  # pending after one failed attempt or more
    undeliverable: int  # given up since the time asked about


def delivery_counts(conn: sqlite3.Connection, site: str, since_us: int) -> DeliveryCounts:
    """A site's deliveries waiting (and of those, failing) and given up since ``since_us``."""
    row = conn.execute(
        "SELECT COALESCE(SUM(status = 'pending'), 0), COALESCE(SUM(status = 'pending' AND attempts > 0), 0),"
        " COALESCE(SUM(status = 'undeliverable' AND done_us >= ?), 0) FROM deliveries WHERE site = ?",
        (since_us, site),
    ).fetchone()
    return DeliveryCounts(int(row[0]), int(row[1]), int(row[2]))


def failing_deliveries(conn: sqlite3.Connection, site: str, limit: int) -> list[sqlite3.Row]:
    """A site's pending deliveries with a failed attempt, the next due first: recipient,
    channel_type, target (as stored: shown with ``delivery.shown_target``), attempts, next_us,
    last_error, claim_owner and claim_until_us (a sender holding it)."""
    return _rows(
        conn,
        "SELECT id, recipient, channel_type, target, attempts, next_us, last_error, claim_owner,"
        " claim_until_us FROM deliveries WHERE site = ? AND status = 'pending' AND attempts > 0"
        " ORDER BY next_us, id LIMIT ?",
        (site, limit),
    )


class OutboxState(NamedTuple):
    queued: int  # points waiting to be written
    oldest_queued: str | None  # when the oldest of them was queued (UTC, as stored)
    rejected: int  # points the server refused for good


def influx_outbox(conn: sqlite3.Connection) -> OutboxState:
    """The InfluxDB outbox (monitor/influx/outbox.py): its backlog and what was rejected."""
    queued, oldest = conn.execute("SELECT COUNT(*), MIN(enqueued_at) FROM outbox_influx").fetchone()
    rejected = conn.execute("SELECT COUNT(*) FROM outbox_influx_rejected").fetchone()[0]
    return OutboxState(int(queued), oldest, int(rejected))
