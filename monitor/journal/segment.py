"""The chain segment's reads for the evidence export (monitor/evidence/export.py).

The exporter opens its own read-only connections (``open_read_only``), one in the exporting
process and one in each worker process that walks a stretch of the segment (``sound_walk``),
so this module imports only the standard library and light journal modules: a worker pays
for nothing else. Where the exporter iterates rows, these functions hand back the cursor
itself: a month's export walks 26 million rows, and a layer per row would cost seconds.

A ``Scope`` names what an export covers; its named SQL parameters are ``:site``, ``:from``,
``:to``, ``:cfrom`` (the window, the rows still chained from), ``:s0``... (the sensors) and
``:lo``/``:hi`` (the segment's first and last seq).
"""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from monitor.csv_cells import FORMULA_START, MARK
from monitor.errors import StoreError
from monitor.journal.chain_kinds import KINDS
from monitor.journal.migrations import SCHEMA_VERSION, newer_layout, older_layout
from monitor.journal.queries import KEYED

# A chain key that a CSV cell must quote (RFC 4180): a quote, comma or line break in it.
_CSV_SPECIAL = '*[",\r\n]*'
# The first characters of a text cell that monitor.csv_cells.inert_exact marks, as SQL literals.
_MARKED_SQL = ", ".join(f"char({ord(c)})" for c in sorted(FORMULA_START | {MARK}))

# The reading entries of the segment, their key split into sensor, reading kind and time.
_READING_KEY_SQL = (
    "SELECT seq, key, sensor, substr(rest, 1, instr(rest, '|') - 1) AS rkind,"
    " CAST(substr(rest, instr(rest, '|') + 1) AS INTEGER) AS ts_us FROM ("
    " SELECT seq, key, substr(key, 1, instr(key, '|') - 1) AS sensor,"
    " substr(key, instr(key, '|') + 1) AS rest"
    f" FROM chain INDEXED BY chain_lookup WHERE site = :site AND kind = 'reading' AND {KEYED}"
    " AND seq BETWEEN :lo AND :hi)"
)


class Scope(Protocol):
    """What an export covers: a site's [from_us, to_us), its rows chained from ``chained_from_us``
    on (earlier ones were pruned locally), of ``sensors`` (None: every sensor)."""

    @property
    def site(self) -> str: ...
    @property
    def from_us(self) -> int: ...
    @property
    def to_us(self) -> int: ...
    @property
    def chained_from_us(self) -> int: ...
    @property
    def sensors(self) -> tuple[str, ...] | None: ...


class Sight(Protocol):
    """The records a reader sees in clear: their kinds, and an alert when one of its audiences is theirs."""

    @property
    def kinds(self) -> frozenset[str]: ...
    @property
    def audiences(self) -> frozenset[str]: ...


class Span(NamedTuple):
    """The chain seqs of a table's rows in a window: ``chained`` of its ``rows`` have an entry."""

    first_seq: int | None
    last_seq: int | None
    chained: int
    rows: int


def open_read_only(path: str | Path, config: str = "FILE") -> sqlite3.Connection:
    """A read-only connection to the store at ``path``, which must exist and have this layout
    version (an older minewatch's tables it lacks are read as none: has_table).

    Read-only, it cannot migrate an older store: the daemon or `minewatch status` does, which
    its refusal names (with ``config``, the configuration naming the store).
    """
    try:
        conn = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True, timeout=30)
        conn.execute("SELECT 1 FROM chain LIMIT 1")
        version = conn.execute("PRAGMA user_version").fetchone()[0]
    except sqlite3.Error as exc:
        raise StoreError(f"cannot read the store {str(path)!r}: {exc}") from None
    if version > SCHEMA_VERSION:
        raise StoreError(newer_layout(str(path), version))
    if version < SCHEMA_VERSION:
        raise StoreError(older_layout(str(path), config, "export again"))
    try:
        conn.execute("SELECT pow(10, 1), log10(10)")
    except sqlite3.OperationalError:  # SQLite built without its math functions (the plots' minutes need them)
        conn.create_function("pow", 2, math.pow, deterministic=True)
        conn.create_function("log10", 1, math.log10, deterministic=True)
    return conn


def has_table(conn: sqlite3.Connection, name: str) -> bool:
    return (
        conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)).fetchone()
        is not None
    )


def has_kind_table(conn: sqlite3.Connection, kind: str) -> bool:
    """Whether the store holds an exported record kind's table (an older minewatch's may not)."""
    return has_table(conn, KINDS[kind].source.split()[0])


def _params(scope: Scope) -> dict[str, Any]:
    return {
        "site": scope.site,
        "from": scope.from_us,
        "to": scope.to_us,
        "cfrom": scope.chained_from_us,
        **{f"s{i}": s for i, s in enumerate(scope.sensors or ())},
    }


def _segment_params(scope: Scope, lo: int, hi: int) -> dict[str, Any]:
    return {**_params(scope), "lo": lo, "hi": hi}


def _named_sensors(column: str, scope: Scope) -> str:
    if scope.sensors is None:
        return ""
    return f" AND {column} IN ({','.join(f':s{i}' for i in range(len(scope.sensors)))})"


# --------------------------------------------------------------------------- the site's state


def pruned_before_us(conn: sqlite3.Connection) -> int:
    """Where local pruning last cut the store (0: never pruned)."""
    pruned = conn.execute("SELECT value FROM meta WHERE key = 'pruned_before_us'").fetchone()
    return int(pruned[0]) if pruned else 0


def first_recorded_us(conn: sqlite3.Connection, site: str) -> int | None:
    """When the site's first chain entry was recorded (None: the site has no chain)."""
    began = conn.execute("SELECT recorded_us FROM chain WHERE site = ? AND seq = 1", (site,)).fetchone()
    return None if began is None else int(began[0])


def kept_text(conn: sqlite3.Connection, sha256: str) -> str | None:
    """A text the daemon kept by its SHA-256 (the chained configuration's and profile's)."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (f"text:{sha256}",)).fetchone()
    return None if row is None else str(row[0])


# --------------------------------------------------------------------------- the segment's ends


def sound_span(conn: sqlite3.Connection, scope: Scope) -> Span:
    # Sound rows carry their chain entry's seq: a range scan, no join (the walk checks each
    # entry against its row).
    return Span(
        *conn.execute(
            "SELECT MIN(t.chain_seq), MAX(t.chain_seq), COUNT(t.chain_seq), COUNT(*) FROM sound t"
            " WHERE t.site = :site AND t.ts_us >= :cfrom AND t.ts_us < :to"
            f"{_named_sensors('t.sensor', scope)}",
            _params(scope),
        ).fetchone()
    )


def reading_span(conn: sqlite3.Connection, scope: Scope) -> Span:
    return Span(
        *conn.execute(
            "SELECT MIN(c.seq), MAX(c.seq), COUNT(c.seq), COUNT(*) FROM readings t LEFT JOIN chain c"
            f" ON c.site = t.site AND c.kind = 'reading' AND c.{KEYED}"
            " AND c.key = t.sensor || '|' || t.kind || '|' || t.ts_us"
            " WHERE t.site = :site AND t.ts_us >= :cfrom AND t.ts_us < :to"
            f"{_named_sensors('t.sensor', scope)}",
            _params(scope),
        ).fetchone()
    )


def record_span(conn: sqlite3.Connection, kind: str, scope: Scope) -> Span:
    """The span of an exported record kind's rows of the window (its table must exist: ``has_kind_table``)."""
    spec = KINDS[kind]
    return Span(
        *conn.execute(
            "SELECT MIN(c.seq), MAX(c.seq), COUNT(c.seq), COUNT(*)"
            f" FROM {spec.source} LEFT JOIN chain c"
            f" ON c.site = {spec.site} AND c.kind = '{kind}' AND c.{KEYED} AND c.key = {spec.key}"
            f" WHERE {spec.site} = :site AND {spec.window}",
            _params(scope),
        ).fetchone()
    )


def _seq(cursor: sqlite3.Cursor) -> int | None:
    """The seq a MIN or MAX query found (None: no such row)."""
    seq = cursor.fetchone()[0]
    return None if seq is None else int(seq)


def last_anchor_before(conn: sqlite3.Connection, site: str, seq: int) -> int | None:
    return _seq(conn.execute("SELECT MAX(seq) FROM anchors WHERE site = ? AND seq < ?", (site, seq)))


def last_config_entry(conn: sqlite3.Connection, site: str, seq: int) -> int | None:
    """The seq of the last record of the profile and configuration in force at ``seq``.

    Its key holds '|': a store written before minewatch chained the profile has none.
    """
    return _seq(
        conn.execute(
            "SELECT MAX(seq) FROM chain INDEXED BY chain_lookup WHERE site = ? AND kind = 'config'"
            f" AND {KEYED} AND instr(key, '|') > 0 AND seq <= ?",
            (site, seq),
        )
    )


def first_anchor_published(conn: sqlite3.Connection, site: str, seq: int, published_us: int) -> int | None:
    """The first anchor at or after ``seq`` that was published at ``published_us`` or later."""
    return _seq(
        conn.execute(
            "SELECT MIN(seq) FROM anchors WHERE site = ? AND seq >= ? AND published_us >= ?",
            (site, seq, published_us),
        )
    )


def first_anchor_from(conn: sqlite3.Connection, site: str, seq: int) -> int | None:
    return _seq(conn.execute("SELECT MIN(seq) FROM anchors WHERE site = ? AND seq >= ?", (site, seq)))


def head_at(conn: sqlite3.Connection, site: str, seq: int) -> str | None:
    """The chain head after entry ``seq`` (None: no such entry)."""
    row = conn.execute("SELECT head FROM chain WHERE site = ? AND seq = ?", (site, seq)).fetchone()
    return None if row is None else str(row[0])


# --------------------------------------------------------------------------- what the reader sees


def _shown(kind: str, sight: Sight) -> tuple[str, dict[str, str]]:
    """SQL over a record's row ``t``: 1 when the reader sees it in clear (in the window, for
    them), and the parameters it names."""
    if kind not in sight.kinds:
        return "0", {}
    shown = KINDS[kind].window  # bracketed (chain_kinds._exported)
    params: dict[str, str] = {}
    if kind == "alert":  # audience: one or more of operator, town, inspector, comma-separated
        audiences = sorted(sight.audiences)
        params = {f"aud{i}": a for i, a in enumerate(audiences)}
        listed = " OR ".join(
            f"instr(',' || t.audience || ',', ',' || :aud{i} || ',') > 0" for i in range(len(audiences))
        )
        shown += f" AND ({listed or '0'})"
    return f"COALESCE({shown}, 0)", params


def withheld_seqs(
    conn: sqlite3.Connection, kind: str, scope: Scope, sight: Sight, lo: int, hi: int
) -> list[int]:
    """The seqs of the segment's ``kind`` entries the reader does not see (its table must exist)."""
    spec = KINDS[kind]
    shown, params = _shown(kind, sight)
    return [
        seq
        for (seq,) in conn.execute(
            f"SELECT c.seq FROM {spec.source} CROSS JOIN chain c ON c.site = {spec.site}"
            f" AND c.kind = '{kind}' AND c.{KEYED} AND c.key = {spec.key}"
            f" WHERE {spec.site} = :site AND c.seq BETWEEN :lo AND :hi AND NOT {shown}",
            {**_segment_params(scope, lo, hi), **params},
        )
    ]


# --------------------------------------------------------------------------- the rows


def has_overloads(conn: sqlite3.Connection, scope: Scope) -> bool:
    """Whether a sound row of the scope was measured overloaded (migration "sound-overload": a
    store without the column has none). One look in the partial index of such rows."""
    if "overload" not in {row[1] for row in conn.execute("PRAGMA table_info(sound)")}:
        return False
    found = conn.execute(
        # The index named: without statistics SQLite would walk the window's rows by the key.
        "SELECT 1 FROM sound INDEXED BY sound_overloaded"
        " WHERE site = :site AND ts_us >= :cfrom AND ts_us < :to AND overload"
        f"{_named_sensors('sensor', scope)} LIMIT 1",
        _params(scope),
    ).fetchone()
    return found is not None


# a sound row's source and its overload cell (SOUND_OVERLOAD_COLUMNS' last: "1" or empty)
_SOURCE_AND_OVERLOAD = "t.source || CASE WHEN t.overload THEN ',1' ELSE ',' END"


def sound_walk(
    conn: sqlite3.Connection,
    scope: Scope,
    lo: int,
    hi: int,
    withheld: str,
    tag_hex: int,
    overload: bool = False,
    kinds_withheld: bool = False,
) -> sqlite3.Cursor:
    """Every entry lo..hi of the segment in seq order, each sound entry of the scope joined to its row.

    A row: (sensor, ts_us, duration_s, the eight levels, source, seq, text, gap). Where
    ``overload`` (the scope has such rows: has_overloads), ``source`` is followed by the row's
    overload cell, ",1" or ",": SQLite joins it, so no bundle's rows cost a column more. For a sound
    entry of the scope with its row, ``text`` is the tag of its digest (its first ``tag_hex``
    hex digits) and ``gap`` is NULL; the caller writes the row and the chain.csv line
    ``seq,sound,,tag,``. For any other entry the row columns are NULL, ``text`` is the entry's
    whole chain.csv line and ``gap`` is 1 when it is a sound entry of the scope whose row the
    store lacks. ``withheld``: a JSON array of the seqs whose records the reader does not see
    (their line is the digest alone; with ``kinds_withheld``, a time-scoped reader's, not even
    its kind: ``seq,,,digest,``). Floats and times are left to the caller (repr() is the exact
    round trip the digests need).
    """
    in_scope = f"k.kind = 'sound' AND k.ts_us >= :cfrom AND k.ts_us < :to{_named_sensors('k.sensor', scope)}"
    # A sound row's text (26 million of them in a month) is built by the caller: joining text
    # column by column here cost a third of this query. The rare other entries' lines are
    # built here, only for them (CASE evaluates the branch taken): no heads (verify recomputes
    # them); ids are [A-Za-z0-9_-], a key with a quote, comma or line break is quoted.
    # A key beginning as a spreadsheet formula would (or with the apostrophe that marks text) is
    # written after an apostrophe, which verify drops (monitor.csv_cells.inert_exact).
    key = f"CASE WHEN substr(k.key, 1, 1) IN ({_MARKED_SQL}) THEN '''' || k.key ELSE k.key END"
    full = (
        f"k.seq || ',' || k.kind || ',' || CASE WHEN k.key GLOB :special"
        f" THEN '\"' || replace({key}, '\"', '\"\"') || '\"' ELSE {key} END"
        " || ',' || k.digest || ',' || k.recorded_us"
    )
    # A record the reader does not see: its digest alone (no key, no time), so the link recomputes.
    digest_only = "k.seq || ',' || " + ("''" if kinds_withheld else "k.kind") + " || ',,' || k.digest || ','"
    return conn.execute(
        "SELECT t.sensor, t.ts_us, t.duration_s,"
        " t.LAeq, t.LAFmax, t.LASmax, t.LAFmin, t.LCeq, t.LCpeak, t.LZpeak, t.LZeq,"
        f" {_SOURCE_AND_OVERLOAD if overload else 't.source'}, k.seq,"
        f" CASE WHEN t.site IS NOT NULL THEN substr(k.digest, 1, {tag_hex})"
        f" WHEN k.seq IN (SELECT value FROM json_each(:withheld)) THEN {digest_only} ELSE {full} END,"
        f" CASE WHEN t.site IS NULL THEN {in_scope} END"
        " FROM (SELECT seq, kind, key, digest, recorded_us,"
        " CASE WHEN kind = 'sound' THEN substr(key, 1, instr(key, '|') - 1) END AS sensor,"
        " CASE WHEN kind = 'sound' THEN CAST(substr(key, instr(key, '|') + 1) AS INTEGER) END AS ts_us"
        " FROM chain WHERE site = :site AND seq BETWEEN :lo AND :hi) k"
        f" LEFT JOIN sound t ON {in_scope}"
        " AND t.site = :site AND t.sensor = k.sensor AND t.ts_us = k.ts_us"
        " ORDER BY k.seq",
        {**_segment_params(scope, lo, hi), "special": _CSV_SPECIAL, "withheld": withheld},
    )


def reading_rows(conn: sqlite3.Connection, kind: str, scope: Scope, lo: int, hi: int) -> sqlite3.Cursor:
    """The segment's ``kind`` reading entries of the scope in seq order, each joined to its row:
    (seq, 1 when the store lacks the row, site, sensor, kind, ts_us, duration_s, data)."""
    return conn.execute(
        "SELECT k.seq, t.site IS NULL, t.site, t.sensor, t.kind, t.ts_us, t.duration_s, t.data"
        f" FROM ({_READING_KEY_SQL}) k LEFT JOIN readings t ON t.site = :site AND t.sensor = k.sensor"
        " AND t.kind = k.rkind AND t.ts_us = k.ts_us"
        " WHERE k.rkind = :rkind AND k.ts_us >= :cfrom AND k.ts_us < :to"
        f"{_named_sensors('k.sensor', scope)}"
        " ORDER BY k.seq",
        {**_segment_params(scope, lo, hi), "rkind": kind},
    )


def has_entries(conn: sqlite3.Connection, site: str, kind: str, lo: int, hi: int) -> bool:
    """Whether entries lo..hi of the site's chain hold one of ``kind`` (not sound: KEYED)."""
    return (
        conn.execute(
            "SELECT 1 FROM chain INDEXED BY chain_lookup WHERE site = :site AND kind = :kind"
            f" AND {KEYED} AND seq BETWEEN :lo AND :hi LIMIT 1",
            {"site": site, "kind": kind, "lo": lo, "hi": hi},
        ).fetchone()
        is not None
    )


def record_rows(
    conn: sqlite3.Connection, kind: str, scope: Scope, sight: Sight, lo: int, hi: int
) -> sqlite3.Cursor:
    """The rows of an exported record kind the reader sees, in seq order: (seq, key, the row's
    columns, named in ``description``). Its table must exist (``has_kind_table``)."""
    spec = KINDS[kind]
    shown, params = _shown(kind, sight)
    return conn.execute(
        f"SELECT c.seq, c.key, t.* FROM {spec.source} CROSS JOIN chain c ON c.site = {spec.site}"
        f" AND c.kind = '{kind}' AND c.{KEYED} AND c.key = {spec.key}"
        f" WHERE {spec.site} = :site AND c.seq BETWEEN :lo AND :hi AND {shown}"
        " ORDER BY c.seq",
        {**_segment_params(scope, lo, hi), **params},
    )


def entry_counts(conn: sqlite3.Connection, site: str, lo: int, hi: int) -> dict[str, int]:
    """Entries lo..hi by kind, sound left out (KEYED: the walk counts those)."""
    return dict(
        conn.execute(
            "SELECT kind, COUNT(*) FROM chain INDEXED BY chain_lookup"
            f" WHERE site = ? AND {KEYED} AND seq BETWEEN ? AND ? GROUP BY kind",
            (site, lo, hi),
        ).fetchall()
    )


def config_entries(conn: sqlite3.Connection, site: str, lo: int, hi: int) -> list[tuple[int, str]]:
    """(seq, key) of the config entries lo..hi, in order: a config record is its key."""
    return conn.execute(
        "SELECT seq, key FROM chain INDEXED BY chain_lookup WHERE site = ? AND kind = 'config'"
        f" AND {KEYED} AND seq BETWEEN ? AND ? ORDER BY seq",
        (site, lo, hi),
    ).fetchall()


def config_entries_recorded_from(
    conn: sqlite3.Connection, site: str, lo: int, hi: int, from_us: int
) -> list[int]:
    """The seqs of the config entries lo..hi chained at or after ``from_us``, in order."""
    return [
        seq
        for (seq,) in conn.execute(
            "SELECT seq FROM chain INDEXED BY chain_lookup WHERE site = ? AND kind = 'config'"
            f" AND {KEYED} AND seq BETWEEN ? AND ? AND recorded_us >= ? ORDER BY seq",
            (site, lo, hi, from_us),
        )
    ]


def anchors(conn: sqlite3.Connection, site: str) -> sqlite3.Cursor:
    """Every anchor of the site in seq order: (site, seq, head, published_us)."""
    return conn.execute(
        "SELECT site, seq, head, published_us FROM anchors WHERE site = ? ORDER BY seq", (site,)
    )


# --------------------------------------------------------------------------- the plots' minutes


def sound_minutes(conn: sqlite3.Connection, site: str, lo: int, hi: int) -> sqlite3.Cursor:
    """Per sound sensor and minute of [lo, hi): (sensor, minute, sum of energies, count, max LAeq)."""
    return conn.execute(
        "SELECT sensor, ts_us / 60000000, SUM(pow(10, LAeq / 10.0)), COUNT(*), MAX(LAeq) FROM sound"
        " WHERE site = ? AND ts_us >= ? AND ts_us < ? GROUP BY 1, 2",
        (site, lo, hi),
    )


def plotted_span(conn: sqlite3.Connection, site: str, lo: int, hi: int) -> tuple[int, int] | None:
    """The first and last ts_us in [lo, hi) of the rows the day plots draw (sound, light), or None.
    Each end a query of its own: SQLite finds a MIN or a MAX alone by the key, both at once by a scan."""
    ends: list[int] = []
    for table, kind in (("sound", ""), ("readings", " AND kind = 'light'")):
        for pick in ("MIN", "MAX"):
            row = conn.execute(
                f"SELECT {pick}(ts_us) FROM {table} WHERE site = ?{kind} AND ts_us >= ? AND ts_us < ?",
                (site, lo, hi),
            ).fetchone()
            if row[0] is not None:
                ends.append(int(row[0]))
    return (min(ends), max(ends)) if ends else None


def light_minutes(conn: sqlite3.Connection, site: str, sensor: str, lo: int, hi: int) -> sqlite3.Cursor:
    """Per minute of [lo, hi) of a light sensor: (minute, sum of mean lux, count, max lux)."""
    return conn.execute(
        "SELECT ts_us / 60000000, SUM(json_extract(data, '$.lux_mean')), COUNT(*),"
        " MAX(json_extract(data, '$.lux_max')) FROM readings"
        " WHERE site = ? AND sensor = ? AND kind = 'light' AND ts_us >= ? AND ts_us < ? GROUP BY 1",
        (site, sensor, lo, hi),
    )
