"""Evidence for inspectors: export a window of the record as a self-verifying zip, and verify one.

    store (SQLite + hash chain) ──► export_bundle ──► bundle.zip
        data/sound.csv, data/<light|weather|turbidity|status>.csv
                          per-second rows of the window, in chain order, floats as repr()
        records/<kind>.json events, findings (all revisions), alerts, health, calibration,
                          rejections, config: every one whose chain entry lies in the segment
        chain.csv         the chain segment: seq, kind, key, digest, head, recorded_us
        anchors.json      every chain head the daemon published for the site
        records/notice*.json  notices, their change history and the episodes they cite
        plots/, config.toml, profile/<name>.toml, README.txt
        manifest.json     SHA-256 of every file, the scope, the segment's ends, the anchors
    InfluxDB ──► data/<measurement>_influxdb.csv   the part of the window pruned locally;
                                                   outside the chain, said so in the manifest

    bundle.zip [+ anchors the town holds] ──► verify_bundle ──► Report

Verification rebuilds every exported row's canonical record with the store's own
functions (``monitor.store.RECORDS``), hashes it and matches it to the chain entry
the row names (``chain_seq``), walking the chain once in order. The manifest is
checked, not trusted: the files a bundle may hold are fixed by the format and the
rows, config.toml and the profile by the chain's config record. The chain itself
could be rewritten end to end by whoever holds the store: only heads held by the
town (``--anchors``) tell such a rewrite apart from the original, and a head proves
the entries up to it and nothing after it, so the report's first line says how far
the town's heads reach (``Report.verdict``).

Everything streams: rows go from SQLite cursors into the zip members and are
hashed on the way, and verification reads them back the same way, so a month of
per-second data never sits in memory.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import importlib.metadata
import io
import json
import os
import re
import sqlite3
import tomllib
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from importlib import resources
from pathlib import Path
from typing import IO, Any
from zoneinfo import ZoneInfo

from monitor.config import Config, InfluxConfig, SiteConfig
from monitor.errors import MinewatchError
from monitor.schema import MEASUREMENTS
from monitor.store import (
    GENESIS,
    KEYED,
    RECORDS,
    SCHEMA_VERSION,
    SOUND_FIELDS,
    config_from_key,
    config_record,
    digest_of,
    next_head,
)

__all__ = [
    "FORMAT",
    "Anchor",
    "EvidenceError",
    "ExportSummary",
    "Problem",
    "Report",
    "TimeFormat",
    "evidence_texts",
    "export_bundle",
    "load_anchors",
    "parse_when",
    "verify_bundle",
]

# Format 2: the file set is closed (fixed by the format and the rows, not by the manifest),
# the profile and configuration are bound by a chained config record, and the segment ends
# at an anchor when the store has one. Format 1 bundles still verify (see verify_bundle).
FORMAT = "minewatch-evidence/2"
FORMAT_1 = "minewatch-evidence/1"
MANIFEST = "manifest.json"
CHAIN_FILE = "chain.csv"
ANCHORS_FILE = "anchors.json"
SOUND_FILE = "data/sound.csv"
READING_EXTRAS: dict[str, tuple[str, ...]] = {  # columns copied out of the reading's JSON, for reading
    "light": ("lux_mean", "lux_min", "lux_max"),
    "weather": ("wind_speed_ms", "rain"),
    "turbidity": ("ntu",),
    "status": ("battery_pct", "clock_offset_s"),
}


@dataclass(frozen=True, slots=True)
class _Kind:
    """A chain kind exported row by row to records/<name>.json.

    ``source`` is the FROM clause (the row is ``t``), ``site`` the column holding its
    site, ``key`` the chain key as SQL (the keys monitor/store.py and monitor/notices.py
    chain the kind under) and ``window`` what makes a row belong to [:from, :to).
    """

    file: str
    source: str
    key: str
    window: str
    site: str = "t.site"


RECORD_KINDS: dict[str, _Kind] = {
    "event": _Kind(
        "records/events.json",
        "events t",
        "t.kind || '|' || t.id",
        "t.ts_us < :to AND COALESCE(t.end_us, t.ts_us) >= :from",
    ),
    "finding": _Kind(
        "records/findings.json",
        "findings t",
        "t.id || '|' || t.revision",
        "t.start_us < :to AND t.end_us >= :from",
    ),
    "alert": _Kind("records/alerts.json", "alerts t", "t.id", "t.created_us >= :from AND t.created_us < :to"),
    "health": _Kind(
        "records/health.json",
        "health t",
        "t.sensor || '|' || t.ts_us || '|' || t.state",
        "t.ts_us >= :from AND t.ts_us < :to",
    ),
    "calibration": _Kind(
        "records/calibration.json",
        "calibration t",
        "t.sensor || '|' || t.ts_us",
        "t.ts_us >= :from AND t.ts_us < :to",
    ),
    "rejection": _Kind(
        "records/rejections.json",
        "rejections t",
        "CAST(t.id AS TEXT)",
        "t.received_us >= :from AND t.received_us < :to",
    ),
    # a reading resent with other content: the kept one's and the resend's digests
    "conflict": _Kind(
        "records/conflicts.json",
        "conflicts t",
        "t.sensor || '|' || t.kind || '|' || t.ts_us || '|' || t.second_digest",
        "t.ts_us >= :from AND t.ts_us < :to",
    ),
    # monitor/portal: what a person did through the web portal (who, what, when, from where)
    "portal_action": _Kind(
        "records/portal_actions.json",
        "portal_actions t",
        "CAST(t.id AS TEXT)",
        "t.ts_us >= :from AND t.ts_us < :to",
    ),
    # monitor/notices.py: a notice, its change history and the episodes it cites
    "notice": _Kind(
        "records/notices.json", "notices t", "t.id", "t.opened_us < :to AND t.updated_us >= :from"
    ),
    "notice_change": _Kind(
        "records/notice_changes.json",
        "notice_changes t JOIN notices n ON n.id = t.notice_id",
        "t.notice_id || '|' || t.seq",
        "t.at_us >= :from AND t.at_us < :to",
        "n.site",
    ),
    "notice_episode": _Kind(
        "records/notice_episodes.json",
        "notice_episodes t JOIN notices n ON n.id = t.notice_id",
        "t.notice_id || '|' || t.episode_id || '|' || t.revision",
        "t.start_us < :to AND t.end_us >= :from",
        "n.site",
    ),
}
RECORD_FILES: dict[str, str] = {
    **{k: v.file for k, v in RECORD_KINDS.items()},
    "config": "records/config.json",
}
# Record files a format-1 bundle never held (conflicting resends were first journaled in format 2).
_SINCE_FORMAT_2 = frozenset({RECORD_KINDS["conflict"].file})
# Record files added later in format 2: a bundle exported before them is still complete.
_OPTIONAL_FILES = frozenset({RECORD_KINDS["portal_action"].file})


def record_builders() -> dict[str, Callable[[Mapping[str, Any]], dict[str, Any]]]:
    """Chain kind -> the function its records were chained with (the store's, and the notices')."""
    from monitor.notices import change_record, episode_record, notice_record

    return {
        **RECORDS,
        "notice": notice_record,
        "notice_change": change_record,
        "notice_episode": episode_record,
    }


INFLUX_MEASUREMENT = {
    "sound": "sound",
    "light": "light",
    "sky": "light",
    "weather": "weather",
    "turbidity": "turbidity",
}
_FLUSH_BYTES = 1 << 20
_MAX_LISTED = 1000  # problems and missing rows kept in detail; the rest are counted


class EvidenceError(MinewatchError):
    """The request cannot be served as asked (unknown site or sensor, bad window, unreadable file)."""


# --------------------------------------------------------------------------- time columns


class TimeFormat:
    """Microseconds since the epoch -> ISO 8601 in one zone ("Z" for UTC).

    The zone is consulted once per minute, not per row: a month of per-second rows
    is 26 million lookups otherwise. Minutes that contain an offset change are
    formatted row by row.
    """

    def __init__(self, zone: tzinfo) -> None:
        self.zone = zone
        self.utc = zone is UTC
        self._minutes: dict[int, tuple[str, str] | None] = {}

    def exact(self, ts_us: int) -> str:
        text = (
            (datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=ts_us))
            .astimezone(self.zone)
            .isoformat()
        )
        return text[:-6] + "Z" if self.utc else text

    def _minute(self, minute: int) -> tuple[str, str] | None:
        start = datetime.fromtimestamp(minute * 60, self.zone)
        if start.utcoffset() != datetime.fromtimestamp(minute * 60 + 59, self.zone).utcoffset():
            return None
        text = start.isoformat()  # YYYY-MM-DDTHH:MM:SS+HH:MM
        return text[:17], "Z" if self.utc else text[19:]

    def __call__(self, ts_us: int) -> str:
        minute, rest = divmod(ts_us, 60_000_000)
        try:
            parts = self._minutes[minute]
        except KeyError:
            if len(self._minutes) > 4096:
                self._minutes.clear()
            parts = self._minutes[minute] = self._minute(minute)
        if parts is None:
            return self.exact(ts_us)
        second, micro = divmod(rest, 1_000_000)
        return (
            f"{parts[0]}{second:02d}.{micro:06d}{parts[1]}" if micro else f"{parts[0]}{second:02d}{parts[1]}"
        )


def parse_when(text: str, zone: tzinfo) -> datetime:
    """RFC 3339 / ISO 8601; a date alone is local midnight, a time without offset is site-local."""
    value = text.strip()
    try:
        if len(value) == 10:
            return datetime.combine(date.fromisoformat(value), time(0), zone)
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise EvidenceError(
            f"not a date or time: {text!r} (use e.g. 2024-05-01 or 2024-05-01T06:00:00Z)"
        ) from None
    return parsed.replace(tzinfo=zone) if parsed.tzinfo is None else parsed


def _us(ts: datetime) -> int:
    return (ts - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)


# --------------------------------------------------------------------------- row shapes (export and verify)


def _cell(value: Any) -> str:
    """One CSV cell: floats as repr() (exact round trip), booleans as JSON does."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | str):
        return repr(value) if isinstance(value, float) else str(value)
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _opt_float(text: str) -> float | None:
    return None if text == "" else float(text)


SOUND_COLUMNS = (
    "chain_seq",
    "site",
    "sensor",
    "ts_us",
    "time_utc",
    "time_local",
    "duration_s",
    *SOUND_FIELDS,
    "source",
)


def reading_columns(kind: str) -> tuple[str, ...]:
    return (
        "chain_seq",
        "site",
        "sensor",
        "kind",
        "ts_us",
        "time_utc",
        "time_local",
        "duration_s",
        *READING_EXTRAS[kind],
        "data",
    )


def reading_file(kind: str) -> str:
    return f"data/{kind}.csv"


def _reading_extras(kind: str, data: str) -> list[str]:
    try:
        decoded = json.loads(data)
    except ValueError:
        decoded = {}
    if not isinstance(decoded, dict):
        decoded = {}
    return [_cell(decoded.get(name)) for name in READING_EXTRAS[kind]]


def _derived(row: Mapping[str, Any], utc: TimeFormat, local: TimeFormat) -> dict[str, Any]:
    """Readable companions of a JSON record's fields; verify recomputes and compares them."""
    out: dict[str, Any] = {}
    for name, value in row.items():
        if name.endswith("_us") and isinstance(value, int) and not isinstance(value, bool):
            out[f"{name[:-3]}_utc"] = utc(value)
            out[f"{name[:-3]}_local"] = local(value)
        elif name == "data" and isinstance(value, str):
            try:
                out["data_decoded"] = json.loads(value)
            except ValueError:
                out["data_decoded"] = None
    return out


def _sound_key(key: str) -> tuple[str, int] | None:
    sensor, _, ts = key.rpartition("|")
    try:
        return sensor, int(ts)
    except ValueError:
        return None


def _reading_key(key: str) -> tuple[str, str, int] | None:
    parts = key.split("|")
    if len(parts) != 3:
        return None
    try:
        return parts[0], parts[1], int(parts[2])
    except ValueError:
        return None


# --------------------------------------------------------------------------- anchors


@dataclass(frozen=True, slots=True)
class Anchor:
    """A chain head published on minewatch/{site}/anchors: after record ``seq`` the chain was ``head``."""

    site: str
    seq: int
    head: str
    ts: str = ""  # when it was published, as received (may be empty)


def load_anchors(path: str | Path) -> list[Anchor]:
    """The anchors the town holds: a JSON list of {site, seq, head[, ts]}, or one such object per line."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise EvidenceError(f"cannot read anchors file {str(path)!r}: {exc}") from None
    try:
        data = json.loads(text)
        items = data if isinstance(data, list) else [data]
    except ValueError:
        try:
            items = [json.loads(line) for line in text.splitlines() if line.strip()]
        except ValueError as exc:
            raise EvidenceError(f"{path}: neither a JSON list nor JSON lines: {exc}") from None
    anchors = []
    for i, item in enumerate(items):
        try:
            anchors.append(
                Anchor(
                    str(item["site"]), int(item["seq"]), str(item["head"]).lower(), str(item.get("ts", ""))
                )
            )
        except (TypeError, KeyError, ValueError):
            raise EvidenceError(
                f"{path}: entry {i} is not an object with site, seq and head: {item!r}"
            ) from None
    return anchors


# --------------------------------------------------------------------------- export


class _Member:
    """A zip member being written; bytes are hashed and counted on their way in."""

    def __init__(self, zf: zipfile.ZipFile, name: str, files: list[dict[str, Any]]) -> None:
        self.name = name
        self._raw = zf.open(name, "w", force_zip64=True)
        self._sha = hashlib.sha256()
        self._size = 0
        self._files = files
        self._text = io.StringIO()
        self.rows = 0

    def write(self, data: bytes) -> None:
        self._sha.update(data)
        self._size += len(data)
        self._raw.write(data)

    def text(self) -> io.StringIO:
        """A text buffer; call ``spill`` now and then and ``close`` at the end."""
        return self._text

    def spill(self, force: bool = False) -> None:
        if force or self._text.tell() >= _FLUSH_BYTES:
            self.write(self._text.getvalue().encode("utf-8"))
            self._text.seek(0)
            self._text.truncate()

    def close(self, **extra: Any) -> None:
        self.spill(force=True)
        self._raw.close()
        self._files.append({"name": self.name, "sha256": self._sha.hexdigest(), "bytes": self._size, **extra})


@dataclass(slots=True)
class ExportSummary:
    path: Path
    rows: dict[str, int]  # file -> rows written
    chain_entries: int
    first_seq: int
    last_seq: int
    anchors_in_segment: int
    influx_rows: dict[str, int]
    warnings: list[str]
    files: int


@dataclass(slots=True)
class _Scope:
    site: str
    from_us: int
    to_us: int
    chained_from_us: int  # rows before this were pruned locally
    sensors: tuple[str, ...] | None  # None: every sensor

    def holds(self, sensor: str, ts_us: int) -> bool:
        return self.chained_from_us <= ts_us < self.to_us and (self.sensors is None or sensor in self.sensors)


_SOUND_KEY_SQL = (
    "SELECT seq, key, substr(key, 1, instr(key, '|') - 1) AS sensor,"
    " CAST(substr(key, instr(key, '|') + 1) AS INTEGER) AS ts_us"
    " FROM chain WHERE site = :site AND kind = 'sound' AND seq BETWEEN :lo AND :hi"
)
_READING_KEY_SQL = (
    "SELECT seq, key, sensor, substr(rest, 1, instr(rest, '|') - 1) AS rkind,"
    " CAST(substr(rest, instr(rest, '|') + 1) AS INTEGER) AS ts_us FROM ("
    " SELECT seq, key, substr(key, 1, instr(key, '|') - 1) AS sensor,"
    " substr(key, instr(key, '|') + 1) AS rest"
    " FROM chain WHERE site = :site AND kind = 'reading' AND seq BETWEEN :lo AND :hi)"
)


def _open_store(path: str) -> sqlite3.Connection:
    if not Path(path).is_file():
        raise EvidenceError(f"no store at {path!r} (storage.path in the configuration)")
    try:
        conn = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True, timeout=30)
        conn.execute("SELECT 1 FROM chain LIMIT 1")
        version = conn.execute("PRAGMA user_version").fetchone()[0]
    except sqlite3.Error as exc:
        raise EvidenceError(f"cannot read the store {path!r}: {exc}") from None
    if version != SCHEMA_VERSION:  # read-only here: the daemon or `minewatch status` migrates it
        raise EvidenceError(
            f"the store {path!r} has layout version {version}, this minewatch reads {SCHEMA_VERSION}:"
            " open it once with `minewatch status --config FILE` (which migrates it) or upgrade minewatch"
        )
    try:
        conn.execute("SELECT pow(10, 1), log10(10)")
    except sqlite3.OperationalError:  # SQLite built without its math functions
        import math

        conn.create_function("pow", 2, math.pow, deterministic=True)
        conn.create_function("log10", 1, math.log10, deterministic=True)
    return conn


def _table_exists(conn: sqlite3.Connection, name: str) -> bool:
    return (
        conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)).fetchone()
        is not None
    )


def _columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]


def profile_text(site: SiteConfig) -> tuple[str, str]:
    """(file name, TOML text) of the ordinance profile the site runs under."""
    if site.profile.endswith(".toml"):
        return Path(site.profile).name, Path(site.profile).read_text(encoding="utf-8")
    return f"{site.profile}.toml", resources.files("rules.profiles").joinpath(
        f"{site.profile}.toml"
    ).read_text(encoding="utf-8")


# The keys monitor/config.py reads with ``secret(...)``: their values never leave the machine.
SECRET_KEYS = ("password", "token", "signing_key", "secret", "smtp_password")
SECRET_MARK = "(secret: left out of the evidence)"
_SECRET_LINE = re.compile(
    r"^(\s*(?:" + "|".join(SECRET_KEYS) + r""")\s*=\s*)(?:"(?:[^"\\\n]|\\.)*"|'[^'\n]*')""", re.MULTILINE
)


def _secret_values(data: Any) -> Iterator[str]:
    if isinstance(data, dict):
        for key, value in data.items():
            if key in SECRET_KEYS and isinstance(value, str) and value and value != SECRET_MARK:
                yield value
            else:
                yield from _secret_values(value)
    elif isinstance(data, list):
        for item in data:
            yield from _secret_values(item)


def redact_secrets(text: str) -> str:
    """The configuration text with the value of every inline secret replaced by SECRET_MARK.

    References (``password_env``, ``password_file``) stay: they name a secret, not hold it.
    """
    out = _SECRET_LINE.sub(lambda m: m.group(1) + json.dumps(SECRET_MARK), text)
    try:
        left = list(_secret_values(tomllib.loads(out)))
    except tomllib.TOMLDecodeError:
        left = []
    for value in left:  # written some other way (an inline table, a multi-line string)
        for literal in (json.dumps(value), f"'{value}'", f"'''{value}'''", '"""' + value + '"""'):
            out = out.replace(literal, json.dumps(SECRET_MARK))
    return out


def evidence_texts(config: Config, site: SiteConfig) -> tuple[str, str, str]:
    """(profile name, profile text, configuration text without secrets): what a config record binds."""
    _, text = profile_text(site)
    return site.profile, text, redact_secrets(config.raw_text)


def _profile_file(profile: str) -> str:
    """The bundle's file for a profile given by name (``dovre``) or by path (``/etc/x.toml``)."""
    return f"profile/{Path(profile).name if profile.endswith('.toml') else profile + '.toml'}"


def export_bundle(
    config: Config,
    site_id: str,
    start: datetime,
    end: datetime,
    out: str | Path,
    *,
    sensors: Sequence[str] = (),
    plots: bool = True,
    now: datetime | None = None,
    overwrite: bool = True,
) -> ExportSummary:
    """Write the evidence bundle for ``site_id`` over [start, end) to ``out`` (a zip file).

    With ``overwrite`` false an existing ``out`` is left alone (EvidenceError), checked
    again at the very end so that a file created meanwhile is not replaced either.
    """
    site = config.site(site_id)
    if site is None:
        known = ", ".join(s.id for s in config.sites)
        raise EvidenceError(f"unknown site {site_id!r}; the configuration has: {known}")
    for sensor in sensors:
        if site.sensor(sensor) is None:
            known = ", ".join(s.id for s in site.sensors)
            raise EvidenceError(f"site {site_id!r} has no sensor {sensor!r}; it has: {known}")
    if start.tzinfo is None or end.tzinfo is None:
        raise EvidenceError("the window needs time zones")
    if not start < end:
        raise EvidenceError(
            f"the window is empty: --from {start.isoformat()} is not before --to {end.isoformat()}"
        )
    out = Path(out)
    if out.is_dir():
        raise EvidenceError(f"{str(out)!r} is a directory: give the path of the zip file to write")
    if not overwrite and out.exists():
        raise EvidenceError(f"{str(out)!r} exists; choose another name or use --force to overwrite it")
    partial = out.with_name(out.name + ".partial")
    zone = ZoneInfo(site.timezone)
    conn = _open_store(config.storage.path)
    try:
        # One read transaction: every pass sees the same snapshot while the daemon goes on appending.
        conn.execute("BEGIN")
        pruned = conn.execute("SELECT value FROM meta WHERE key = 'pruned_before_us'").fetchone()
        pruned_us = int(pruned[0]) if pruned else 0
        from_us, to_us = _us(start), _us(end)
        # Pruning sets its cut-off whether or not there was anything to remove: the part of the
        # window before the site's first record was never in the store, not pruned from it.
        began = conn.execute(
            "SELECT recorded_us FROM chain WHERE site = ? AND seq = 1", (site.id,)
        ).fetchone()
        if began is None or began[0] >= min(pruned_us, to_us):
            pruned_us = 0
        scope = _Scope(
            site.id,
            from_us,
            to_us,
            max(from_us, min(pruned_us, to_us)),
            tuple(dict.fromkeys(sensors)) if sensors else None,
        )
        try:
            zf = zipfile.ZipFile(
                partial, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1, allowZip64=True
            )
        except OSError as exc:
            raise EvidenceError(f"cannot write {str(out)!r}: {exc.strerror or exc}") from None
        with zf:
            summary = _Exporter(conn, zf, config, site, scope, zone, now or datetime.now(UTC)).run(plots)
        _publish(partial, out, overwrite)
    finally:
        conn.close()
        partial.unlink(missing_ok=True)
    summary.path = out
    return summary


def _publish(partial: Path, out: Path, overwrite: bool) -> None:
    """Move the finished bundle into place; without ``overwrite`` never over an existing file."""
    if overwrite:
        os.replace(partial, out)
        return
    try:
        os.link(partial, out)  # fails if ``out`` exists, atomically
    except FileExistsError:
        raise EvidenceError(
            f"{str(out)!r} exists; choose another name or use --force to overwrite it"
        ) from None
    except OSError:  # a file system without hard links
        if out.exists():
            raise EvidenceError(
                f"{str(out)!r} exists; choose another name or use --force to overwrite it"
            ) from None
        os.replace(partial, out)


class _Exporter:
    def __init__(
        self,
        conn: sqlite3.Connection,
        zf: zipfile.ZipFile,
        config: Config,
        site: SiteConfig,
        scope: _Scope,
        zone: ZoneInfo,
        now: datetime,
    ) -> None:
        self.conn = conn
        self.zf = zf
        self.config = config
        self.site = site
        self.scope = scope
        self.zone = zone
        self.now = now
        self.utc = TimeFormat(UTC)
        self.local = TimeFormat(zone)
        self.files: list[dict[str, Any]] = []
        self.rows: dict[str, int] = {}
        self.warnings: list[str] = []
        self.influx_rows: dict[str, int] = {}
        self.args = {
            "site": site.id,
            "from": scope.from_us,
            "to": scope.to_us,
            "cfrom": scope.chained_from_us,
        }

    # ------------------------------------------------------------------ the segment

    def _bounds(self) -> tuple[int, int] | None:
        """Lowest and highest chain seq of any record that belongs to the window."""
        lows: list[int] = []
        highs: list[int] = []
        unchained = 0

        def take(row: Sequence[Any]) -> None:
            nonlocal unchained
            if row[0] is not None:
                lows.append(row[0])
                highs.append(row[1])
            unchained += row[3] - row[2]

        take(
            self.conn.execute(
                "SELECT MIN(c.seq), MAX(c.seq), COUNT(c.seq), COUNT(*) FROM sound t LEFT JOIN chain c"
                " ON c.site = t.site AND c.seq = t.chain_seq"
                " AND c.kind = 'sound' AND c.key = t.sensor || '|' || t.ts_us"
                " WHERE t.site = :site AND t.ts_us >= :cfrom AND t.ts_us < :to"
                f"{self._named_sensors('t.sensor')}",
                self._sensor_args(),
            ).fetchone()
        )
        take(
            self.conn.execute(
                "SELECT MIN(c.seq), MAX(c.seq), COUNT(c.seq), COUNT(*) FROM readings t LEFT JOIN chain c"
                f" ON c.site = t.site AND c.kind = 'reading' AND c.{KEYED}"
                " AND c.key = t.sensor || '|' || t.kind || '|' || t.ts_us"
                " WHERE t.site = :site AND t.ts_us >= :cfrom AND t.ts_us < :to"
                f"{self._named_sensors('t.sensor')}",
                self._sensor_args(),
            ).fetchone()
        )
        for kind, spec in RECORD_KINDS.items():
            if not _table_exists(self.conn, spec.source.split()[0]):
                continue
            take(
                self.conn.execute(
                    "SELECT MIN(c.seq), MAX(c.seq), COUNT(c.seq), COUNT(*)"
                    f" FROM {spec.source} LEFT JOIN chain c"
                    f" ON c.site = {spec.site} AND c.kind = '{kind}' AND c.{KEYED} AND c.key = {spec.key}"
                    f" WHERE {spec.site} = :site AND {spec.window}",
                    self.args,
                ).fetchone()
            )
        if unchained:
            self.warnings.append(
                f"{unchained} row(s) of the window in the store have no chain entry "
                "(written outside the daemon?); they are not in the bundle"
            )
        if not lows:
            return None
        return min(lows), max(highs)

    def _segment(self) -> tuple[int, int, str, int | None]:
        """(first seq, last seq, head before first, the anchor it was extended to)."""
        bounds = self._bounds()
        if bounds is None:
            return 1, 0, GENESIS, None
        lo, hi = bounds
        site = self.site.id
        # Back to just after the previous anchor, so the segment starts from a head the town holds,
        before = self.conn.execute(
            "SELECT MAX(seq) FROM anchors WHERE site = ? AND seq < ?", (site, lo)
        ).fetchone()[0]
        first = before + 1 if before is not None else lo
        # ... and to the record of the profile and configuration in force (the daemon restates
        # it right after each anchor, so this is normally ``first`` itself),
        config = self.conn.execute(
            f"SELECT MAX(seq) FROM chain WHERE site = ? AND kind = 'config' AND {KEYED}"
            " AND instr(key, '|') > 0 AND seq <= ?",
            (site, first),
        ).fetchone()[0]
        if config is not None:
            first = config
        else:
            self.warnings.append(
                "the store holds no record of the profile and configuration in force before this"
                " window (written by an earlier minewatch): the bundle cannot prove which profile applied"
            )
        # ... and on to the first anchor published after the window that covers the last record,
        # or failing that any later anchor: a tail after the last anchor is proven by nothing.
        after = self.conn.execute(
            "SELECT MIN(seq) FROM anchors WHERE site = ? AND seq >= ? AND published_us >= ?",
            (site, hi, self.scope.to_us),
        ).fetchone()[0]
        if after is None:
            after = self.conn.execute(
                "SELECT MIN(seq) FROM anchors WHERE site = ? AND seq >= ?", (site, hi)
            ).fetchone()[0]
        if after is None:
            self.warnings.append(
                f"no anchor has been published since the window's last record (seq {hi}): records"
                " after the last anchor are not yet anchored; export again after the next anchor"
            )
        last = after if after is not None else hi
        row = self.conn.execute(
            "SELECT head FROM chain WHERE site = ? AND seq = ?", (site, first - 1)
        ).fetchone()
        prev = row[0] if row else GENESIS
        return first, last, prev, after

    # ------------------------------------------------------------------ members

    def run(self, plots: bool) -> ExportSummary:
        first, last, prev_head, anchored_to = self._segment()
        self.plots = plots
        self.args.update(lo=first, hi=last)
        self._sound(first, last)
        for kind in READING_EXTRAS:
            self._readings(kind, first, last)
        exported = {kind: self._records(kind, first, last) for kind in RECORD_KINDS}
        counts, configs, last_head = self._chain(first, last)
        exported["config"] = self._configs(configs)
        for kind, n in exported.items():
            if counts.get(kind, 0) > n:
                self.warnings.append(
                    f"{counts[kind] - n} {kind} chain entr(y/ies) of the segment have no row "
                    "in the store (deleted?)"
                )
        anchors = self._anchors(first, last)
        influx = self._influx() if self.scope.chained_from_us > self.scope.from_us else None
        if last < first and not any(self.influx_rows.values()):
            s = self.scope
            sensors = f" (sensors {', '.join(s.sensors)})" if s.sensors is not None else ""
            self.warnings.append(
                f"no records of site {s.site}{sensors} in the window {self.utc(s.from_us)} to"
                f" {self.utc(s.to_us)}: the bundle is empty"
            )
        if plots:
            self._plots()
        self._static(configs)
        manifest = self._manifest(first, last, prev_head, last_head, anchored_to, anchors, influx)
        self.zf.writestr(MANIFEST, json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
        return ExportSummary(
            Path(),
            dict(self.rows),
            max(0, last - first + 1),
            first,
            last,
            len(anchors),
            dict(self.influx_rows),
            list(self.warnings),
            len(self.files) + 1,
        )

    def _sound(self, first: int, last: int) -> None:
        # The hot loop of a month's export (26 million rows): SQLite joins the text of the
        # integer and identifier columns (ids are [A-Za-z0-9_-], never quoted), Python adds
        # the floats as repr() (the exact round trip the digests need) and the times.
        assert SOUND_FIELDS == ("LAeq", "LAFmax", "LASmax", "LAFmin", "LCeq", "LCpeak", "LZpeak", "LZeq")
        cursor = self.conn.execute(
            "SELECT k.seq || ',' || t.site || ',' || t.sensor || ',' || t.ts_us, t.ts_us, t.duration_s,"
            f" t.LAeq, t.LAFmax, t.LASmax, t.LAFmin, t.LCeq, t.LCpeak, t.LZpeak, t.LZeq, t.source"
            f" FROM ({_SOUND_KEY_SQL}) k"
            " LEFT JOIN sound t ON t.site = :site AND t.sensor = k.sensor AND t.ts_us = k.ts_us"
            f" WHERE k.ts_us >= :cfrom AND k.ts_us < :to{self._named_sensors('k.sensor')} ORDER BY k.seq",
            self._sensor_args(),
        )
        member = _Member(self.zf, SOUND_FILE, self.files)
        member.write((",".join(SOUND_COLUMNS) + "\n").encode())
        utc, local = self.utc, self.local
        missing = rows = 0
        last_ts, times = -1, ""

        def opt(value: float | None) -> str:
            return "" if value is None else repr(value)

        while batch := cursor.fetchmany(4096):
            lines = []
            for (
                prefix,
                ts,
                duration,
                laeq,
                lafmax,
                lasmax,
                lafmin,
                lceq,
                lcpeak,
                lzpeak,
                lzeq,
                source,
            ) in batch:
                if prefix is None:
                    missing += 1
                    continue
                if ts != last_ts:  # the sensors of one second share their time columns
                    last_ts, times = ts, f"{utc(ts)},{local(ts)}"
                lines.append(
                    f"{prefix},{times},{duration!r},{laeq!r},{lafmax!r},{opt(lasmax)},{opt(lafmin)},"
                    f"{opt(lceq)},{lcpeak!r},{opt(lzpeak)},{opt(lzeq)},{source}\n"
                )
            rows += len(lines)
            member.write("".join(lines).encode())
        member.rows = rows
        member.close(rows=rows)
        self.rows[SOUND_FILE] = member.rows
        if missing:
            self.warnings.append(
                f"{missing} sound chain entr(y/ies) of the window have no row in the store (deleted?)"
            )

    def _named_sensors(self, column: str) -> str:
        if self.scope.sensors is None:
            return ""
        return f" AND {column} IN ({','.join(f':s{i}' for i in range(len(self.scope.sensors)))})"

    def _sensor_args(self) -> dict[str, Any]:
        return {**self.args, **{f"s{i}": s for i, s in enumerate(self.scope.sensors or ())}}

    def _readings(self, kind: str, first: int, last: int) -> None:
        cursor = self.conn.execute(
            "SELECT k.seq, t.site IS NULL, t.site, t.sensor, t.kind, t.ts_us, t.duration_s, t.data"
            f" FROM ({_READING_KEY_SQL}) k LEFT JOIN readings t ON t.site = :site AND t.sensor = k.sensor"
            " AND t.kind = k.rkind AND t.ts_us = k.ts_us"
            " WHERE k.rkind = :rkind AND k.ts_us >= :cfrom AND k.ts_us < :to"
            f"{self._named_sensors('k.sensor')}"
            " ORDER BY k.seq",
            {**self._sensor_args(), "rkind": kind},
        )
        name = reading_file(kind)
        member = _Member(self.zf, name, self.files)
        writer = csv.writer(member.text(), lineterminator="\n")
        writer.writerow(reading_columns(kind))
        missing = 0
        for seq, absent, site, sensor, rkind, ts, duration, data in cursor:
            if absent:
                missing += 1
                continue
            writer.writerow(
                (
                    seq,
                    site,
                    sensor,
                    rkind,
                    ts,
                    self.utc(ts),
                    self.local(ts),
                    duration,
                    *_reading_extras(kind, data),
                    data,
                )
            )
            member.rows += 1
            if member.rows % 4096 == 0:
                member.spill()
        member.close(rows=member.rows)
        self.rows[name] = member.rows
        if missing:
            self.warnings.append(
                f"{missing} {kind} reading chain entr(y/ies) of the window have no row in the "
                "store (deleted?)"
            )

    def _json_member(self, name: str, elements: Iterable[Mapping[str, Any]]) -> int:
        """A JSON array, one element per line (so it streams both ways)."""
        member = _Member(self.zf, name, self.files)
        out = member.text()
        out.write("[")
        for element in elements:
            out.write(",\n" if member.rows else "\n")
            out.write(json.dumps(element, ensure_ascii=False))
            member.rows += 1
            member.spill()
        out.write("\n]\n")
        member.close(rows=member.rows)
        self.rows[name] = member.rows
        return member.rows

    def _records(self, kind: str, first: int, last: int) -> int:
        spec = RECORD_KINDS[kind]
        if not _table_exists(self.conn, spec.source.split()[0]):
            return self._json_member(spec.file, ())
        cursor = self.conn.execute(
            f"SELECT c.seq, c.key, t.* FROM {spec.source} JOIN chain c ON c.site = {spec.site}"
            f" AND c.kind = '{kind}' AND c.{KEYED} AND c.key = {spec.key}"
            f" WHERE {spec.site} = :site AND c.seq BETWEEN :lo AND :hi ORDER BY c.seq",
            self.args,
        )
        names = [d[0] for d in cursor.description]
        build = record_builders()[kind]

        def elements() -> Iterator[dict[str, Any]]:
            for values in cursor:
                row = dict(zip(names[2:], values[2:], strict=True))
                chained = build(row)
                chained.pop("t")
                yield {
                    "chain_seq": values[0],
                    "key": values[1],
                    "row": chained,
                    "derived": _derived(chained, self.utc, self.local),
                }

        return self._json_member(RECORD_FILES[kind], elements())

    def _chain(self, first: int, last: int) -> tuple[dict[str, int], list[tuple[int, str]], str]:
        site = self.site.id
        # Whole CSV lines from SQLite: a key with a comma, quote or line break is quoted as csv does.
        cursor = self.conn.execute(
            "SELECT seq || ',' || kind || ',' || CASE WHEN key GLOB :special"
            " THEN '\"' || replace(key, '\"', '\"\"') || '\"' ELSE key END"
            " || ',' || digest || ',' || head || ',' || recorded_us"
            " FROM chain WHERE site = :site AND seq BETWEEN :lo AND :hi ORDER BY seq",
            {"site": site, "lo": first, "hi": last, "special": '*[",\r\n]*'},
        )
        member = _Member(self.zf, CHAIN_FILE, self.files)
        member.write(b"seq,kind,key,digest,head,recorded_us\n")
        while batch := cursor.fetchmany(8192):
            member.rows += len(batch)
            member.write(("\n".join(line for (line,) in batch) + "\n").encode())
        member.close(rows=member.rows)
        self.rows[CHAIN_FILE] = member.rows
        counts = dict(
            self.conn.execute(
                "SELECT kind, COUNT(*) FROM chain WHERE site = ? AND seq BETWEEN ? AND ? GROUP BY kind",
                (site, first, last),
            ).fetchall()
        )
        configs = self.conn.execute(
            "SELECT seq, key FROM chain WHERE site = ? AND kind = 'config' AND seq BETWEEN ? AND ?"
            " ORDER BY seq",
            (site, first, last),
        ).fetchall()
        row = self.conn.execute("SELECT head FROM chain WHERE site = ? AND seq = ?", (site, last)).fetchone()
        return counts, configs, row[0] if row else ""

    def _configs(self, configs: list[tuple[int, str]]) -> int:
        elements = []
        for seq, key in configs:  # a config record is its key (it has no table of its own)
            chained = config_record(config_from_key(key))
            chained.pop("t")
            elements.append(
                {
                    "chain_seq": seq,
                    "key": key,
                    "row": chained,
                    "derived": _derived(chained, self.utc, self.local),
                }
            )
        return self._json_member(RECORD_FILES["config"], elements)

    def _anchors(self, first: int, last: int) -> list[dict[str, Any]]:
        rows = [
            {"site": r[0], "seq": r[1], "head": r[2], "published_us": r[3], "published_utc": self.utc(r[3])}
            for r in self.conn.execute(
                "SELECT site, seq, head, published_us FROM anchors WHERE site = ? ORDER BY seq",
                (self.site.id,),
            )
        ]
        self._json_member(ANCHORS_FILE, rows)
        return [a for a in rows if first - 1 <= a["seq"] <= last]

    # ------------------------------------------------------------------ InfluxDB (pruned part)

    def _influx(self) -> dict[str, Any]:
        s = self.scope
        influx = self.config.storage.influxdb
        note = {
            "from_us": s.from_us,
            "to_us": s.chained_from_us,
            "from_utc": self.utc(s.from_us),
            "to_utc": self.utc(s.chained_from_us),
        }
        if influx is None:
            self.warnings.append(
                f"the store was pruned before {self.utc(s.chained_from_us)} and no InfluxDB is "
                "configured: per-second data before then is not in the bundle"
            )
            return {**note, "read": False}
        reader = _InfluxReader(influx)
        by_measurement: dict[str, list[str]] = {}
        for sensor in self.site.sensors:
            if s.sensors is not None and sensor.id not in s.sensors:
                continue
            measurement = INFLUX_MEASUREMENT.get(sensor.kind.value)
            if measurement:
                by_measurement.setdefault(measurement, []).append(sensor.id)
        self._minutes: dict[tuple[str, str], dict[int, list[float]]] = {}
        for measurement, sensor_ids in by_measurement.items():
            name = f"data/{measurement}_influxdb.csv"
            fields = MEASUREMENTS[measurement].fields
            member = _Member(self.zf, name, self.files)
            writer = csv.writer(member.text(), lineterminator="\n")
            writer.writerow(("site", "sensor", "ts_us", "time_utc", "time_local", *fields))
            for sensor_id in sensor_ids:
                for ts, values in reader.rows(
                    measurement, s.site, sensor_id, s.from_us, s.chained_from_us, fields
                ):
                    writer.writerow(
                        (
                            s.site,
                            sensor_id,
                            ts,
                            self.utc(ts),
                            self.local(ts),
                            *(_cell(values.get(f)) for f in fields),
                        )
                    )
                    self._aggregate(measurement, sensor_id, ts, values)
                    member.rows += 1
                    if member.rows % 4096 == 0:
                        member.spill()
            member.close(rows=member.rows, outside_chain=True)
            self.rows[name] = member.rows
            self.influx_rows[name] = member.rows
        return {
            **note,
            "read": True,
            "version": influx.version,
            "url": influx.url,
            "database": influx.database if influx.version == 1 else influx.bucket,
            "rows": dict(self.influx_rows),
            "note": "rows read from InfluxDB are outside the hash chain: nothing in this bundle proves them",
        }

    def _aggregate(self, measurement: str, sensor: str, ts: int, values: Mapping[str, Any]) -> None:
        value = values.get("LAeq" if measurement == "sound" else "lux_mean")
        if not isinstance(value, int | float) or isinstance(value, bool):
            return
        minute = ts // 60_000_000
        bucket = self._minutes.setdefault((measurement, sensor), {}).get(minute)
        power = 10 ** (value / 10) if measurement == "sound" else float(value)
        if bucket is None:
            self._minutes[(measurement, sensor)][minute] = [power, 1.0, float(value)]
        else:
            bucket[0] += power
            bucket[1] += 1
            bucket[2] = max(bucket[2], float(value))

    # ------------------------------------------------------------------ plots

    def _days(self) -> Iterator[tuple[date, int, int]]:
        s = self.scope
        day = datetime.fromtimestamp(s.from_us / 1e6, self.zone).date()
        while True:
            start = _us(datetime.combine(day, time(0), self.zone))
            if start >= s.to_us:
                return
            end = _us(datetime.combine(day + timedelta(days=1), time(0), self.zone))
            yield day, max(start, s.from_us), min(end, s.to_us)
            day += timedelta(days=1)

    def _plots(self) -> None:
        from monitor.render import day_plot, figure_png, plot_limits  # one figure set-up with the notices

        limits = plot_limits(self.site)
        influx_minutes = getattr(self, "_minutes", {})
        for sensor in self.site.sensors:
            if self.scope.sensors is not None and sensor.id not in self.scope.sensors:
                continue
            kind = sensor.kind.value
            if kind not in ("sound", "light", "sky"):
                continue
            measurement = "sound" if kind == "sound" else "light"
            pruned = influx_minutes.get((measurement, sensor.id), {})
            for day, lo, hi in self._days():
                minutes = self._day_minutes(measurement, sensor.id, lo, hi)
                for minute, (total, n, peak) in pruned.items():
                    if lo // 60_000_000 <= minute < (hi + 59_999_999) // 60_000_000 and minute not in minutes:
                        minutes[minute] = (total, n, peak)
                if not minutes:
                    continue
                png = figure_png(
                    day_plot(
                        measurement,
                        sensor.id,
                        self.site.name,
                        day,
                        self.zone,
                        minutes,
                        limits.get(sensor.id, []),
                    )
                )
                member = _Member(
                    self.zf, f"plots/{measurement}/{sensor.id}/{day.isoformat()}.png", self.files
                )
                member.write(png)
                member.close()

    def _day_minutes(
        self, measurement: str, sensor: str, lo: int, hi: int
    ) -> dict[int, tuple[float, float, float]]:
        """Per minute: (sum of energies or lux, count, max), from SQL: a day never goes through Python."""
        lo = max(lo, self.scope.chained_from_us)
        if lo >= hi:
            return {}
        if measurement == "sound":
            sql = (
                "SELECT ts_us / 60000000, SUM(pow(10, LAeq / 10.0)), COUNT(*), MAX(LAeq) FROM sound"
                " WHERE site = ? AND sensor = ? AND ts_us >= ? AND ts_us < ? GROUP BY 1"
            )
        else:
            sql = (
                "SELECT ts_us / 60000000, SUM(json_extract(data, '$.lux_mean')), COUNT(*),"
                " MAX(json_extract(data, '$.lux_max')) FROM readings"
                " WHERE site = ? AND sensor = ? AND kind = 'light' AND ts_us >= ? AND ts_us < ? GROUP BY 1"
            )
        return {
            r[0]: (r[1], r[2], r[3])
            for r in self.conn.execute(sql, (self.site.id, sensor, lo, hi))
            if r[1] is not None
        }

    # ------------------------------------------------------------------ the rest

    def _static(self, configs: list[tuple[int, str]]) -> None:
        """config.toml and the profile: the files of the segment's first config record."""
        profile, profile_text_, config_text = evidence_texts(self.config, self.site)
        self.config_seq: int | None = None
        for seq, key in configs:
            record = config_from_key(key)
            if "profile_sha256" not in record:
                continue
            kept = [
                self.conn.execute("SELECT value FROM meta WHERE key = ?", (f"text:{record[k]}",)).fetchone()
                for k in ("profile_sha256", "config_sha256")
            ]
            if kept[0] is None or kept[1] is None:
                self.warnings.append(
                    f"the store does not keep the texts of the configuration chained at seq {seq}:"
                    " the bundle holds the current ones"
                )
            else:
                profile, profile_text_, config_text = record["profile"], kept[0][0], kept[1][0]
            self.config_seq = seq
            break
        self.profile = profile
        member = _Member(self.zf, "config.toml", self.files)
        member.write(config_text.encode("utf-8"))
        member.close()
        member = _Member(self.zf, _profile_file(profile), self.files)
        member.write(profile_text_.encode("utf-8"))
        member.close()
        member = _Member(self.zf, "README.txt", self.files)
        member.write(_README.encode("utf-8"))
        member.close()

    def _manifest(
        self,
        first: int,
        last: int,
        prev_head: str,
        last_head: str,
        anchored_to: int | None,
        anchors: list[dict[str, Any]],
        influx: dict[str, Any] | None,
    ) -> dict[str, Any]:
        s = self.scope
        sha = {f["name"]: f["sha256"] for f in self.files}
        return {
            "format": FORMAT,
            "software": {"name": "minewatch", "version": _version()},
            "created_utc": self.utc(_us(self.now)),
            "site": {
                "id": self.site.id,
                "name": self.site.name,
                "operator": self.site.operator,
                "timezone": self.site.timezone,
            },
            "window": {
                "from_us": s.from_us,
                "to_us": s.to_us,
                "from_utc": self.utc(s.from_us),
                "to_utc": self.utc(s.to_us),
                "from_local": self.local(s.from_us),
                "to_local": self.local(s.to_us),
            },
            "scope": {
                "sensors": list(s.sensors) if s.sensors is not None else None,
                "chained_from_us": s.chained_from_us,
                "rule": (
                    "every chain entry of the segment whose record belongs here has its row, in chain order:"
                    " sound and readings of the window's sensors from chained_from_us to to_us;"
                    " events, findings, alerts, health, calibration, rejections and config entries"
                    " wherever they fall in the segment. Audio and other kinds are chain links only."
                ),
            },
            "chain": {
                "file": CHAIN_FILE,
                "first_seq": first,
                "last_seq": last,
                "entries": max(0, last - first + 1),
                "prev_head": prev_head,
                "last_head": last_head or prev_head,
                "extended_to_anchor": anchored_to,
            },
            "anchors": anchors,
            "pruned_locally": influx,
            "config": {
                "file": "config.toml",
                "sha256": sha["config.toml"],
                "source": self.config.source,
                "secrets": "values left out",
                "chain_seq": self.config_seq,
            },
            "profile": {
                "name": self.profile,
                "file": _profile_file(self.profile),
                "sha256": sha[_profile_file(self.profile)],
                "agreement": dict(self.site.agreement),
                "chain_seq": self.config_seq,
            },
            "plots": self.plots,
            "rows": dict(self.rows),
            "warnings": list(self.warnings),
            "files": list(self.files),
        }


def _version() -> str:
    try:
        return importlib.metadata.version("minewatch")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


class _InfluxReader:
    """Reads one series at a time back out of InfluxDB: v1 /query (chunked InfluxQL), v2 Flux."""

    def __init__(self, config: InfluxConfig) -> None:
        self.config = config

    def rows(
        self, measurement: str, site: str, sensor: str, from_us: int, to_us: int, fields: Sequence[str]
    ) -> Iterator[tuple[int, dict[str, Any]]]:
        try:
            if self.config.version == 1:
                yield from self._v1(measurement, site, sensor, from_us, to_us, fields)
            else:
                yield from self._v2(measurement, site, sensor, from_us, to_us, fields)
        except (OSError, ValueError) as exc:
            raise EvidenceError(
                f"cannot read {measurement} of {sensor!r} from InfluxDB at {self.config.url}: {exc}"
            ) from exc

    def _v1(
        self, measurement: str, site: str, sensor: str, from_us: int, to_us: int, fields: Sequence[str]
    ) -> Iterator[tuple[int, dict[str, Any]]]:
        def quote(text: str) -> str:
            return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"

        source = f'"{measurement}"'
        if self.config.retention_policy:
            source = f'"{self.config.retention_policy}".{source}'
        query = (
            f"SELECT {', '.join(chr(34) + f + chr(34) for f in fields)} FROM {source}"
            f' WHERE "site" = {quote(site)} AND "sensor" = {quote(sensor)}'
            f" AND time >= {from_us * 1000} AND time < {to_us * 1000}"
        )
        params = {
            "db": self.config.database,
            "q": query,
            "epoch": "u",
            "chunked": "true",
            "chunk_size": "10000",
        }
        headers = {"Content-Type": "application/x-www-form-urlencoded"}
        if self.config.username:
            token = f"{self.config.username}:{self.config.password.value}".encode()
            headers["Authorization"] = "Basic " + base64.b64encode(token).decode("ascii")
        request = urllib.request.Request(
            f"{self.config.url.rstrip('/')}/query",
            data=urllib.parse.urlencode(params).encode(),
            headers=headers,
            method="POST",
        )
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(request, timeout=self.config.timeout_s) as response:
            # chunked=true: one JSON object per line, each holding part of the series
            for line in response:
                if not line.strip():
                    continue
                chunk = json.loads(line)
                for result in chunk.get("results", []):
                    if "error" in result:
                        raise ValueError(result["error"])
                    for series in result.get("series", []):
                        columns = series["columns"]
                        for values in series["values"]:
                            row = dict(zip(columns, values, strict=True))
                            yield int(row.pop("time")), {k: _influx_value(k, v) for k, v in row.items()}

    def _v2(
        self, measurement: str, site: str, sensor: str, from_us: int, to_us: int, fields: Sequence[str]
    ) -> Iterator[tuple[int, dict[str, Any]]]:
        from influxdb_client.client.influxdb_client import InfluxDBClient

        def flux_time(us: int) -> str:
            return (
                (datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=us))
                .isoformat()
                .replace("+00:00", "Z")
            )

        query = (
            f"from(bucket: {json.dumps(self.config.bucket)})"
            f" |> range(start: {flux_time(from_us)}, stop: {flux_time(to_us)})"
            f" |> filter(fn: (r) => r._measurement == {json.dumps(measurement)}"
            f" and r.site == {json.dumps(site)} and r.sensor == {json.dumps(sensor)})"
            ' |> pivot(rowKey: ["_time"], columnKey: ["_field"], valueColumn: "_value")'
            ' |> sort(columns: ["_time"])'
        )
        with InfluxDBClient(
            url=self.config.url,
            token=self.config.token.value,
            org=self.config.org,
            timeout=int(self.config.timeout_s * 1000),
        ) as client:
            for record in client.query_api().query_stream(query):
                values = record.values
                yield _us(values["_time"]), {f: _influx_value(f, values.get(f)) for f in fields}


def _influx_value(name: str, value: Any) -> Any:
    # InfluxDB's JSON writes 55.0 as 55; the schema's numeric fields are floats.
    if isinstance(value, int) and not isinstance(value, bool) and name != "late":
        return float(value)
    return value


_README = """\
minewatch evidence bundle
=========================

This zip is a window of a mine's monitoring record, exported from the monitor's
own store. Every record the monitor stores is chained: its canonical JSON is
hashed (digest) and each chain entry's head is SHA-256(previous head + digest).
The monitor publishes chain heads (anchors) to the town as it runs.

Check it with:   minewatch verify bundle.zip --anchors town-anchors.json

manifest.json    the window, the chain segment's ends, the anchors within it,
                 the SHA-256 of every file (the set of files is fixed by the
                 format and the rows: verify refuses any other)
data/*.csv       per-second sound levels and light/weather/... readings,
                 in chain order; time_utc and time_local (site time, with offset)
records/*.json   events, findings (every revision), alerts, sensor health,
                 calibration checks, rejected messages, notices, and the
                 config records: the profile and configuration in force
chain.csv        the chain segment the rows are checked against
anchors.json     every chain head the monitor published for the site
plots/           one PNG per sensor and local day (drawings of the rows)
config.toml      the configuration (secret values left out) and profile/ the
                 ordinance profile named by the chain's config record
data/*_influxdb.csv  (if present) rows read from InfluxDB because the store had
                 pruned them: they are NOT covered by the chain

Without anchors held by the town, verification shows only that the bundle is
consistent with itself: whoever controls the store could rebuild a consistent
bundle. With them, rows up to the last head the town holds are proven; rows
chained after it are not yet anchored. See docs/EVIDENCE.md in the minewatch
sources.
"""


# The README of format 1 bundles, word for word (verify compares it).
_README_1 = """\
minewatch evidence bundle
=========================

This zip is a window of a mine's monitoring record, exported from the monitor's
own store. Every record the monitor stores is chained: its canonical JSON is
hashed (digest) and each chain entry's head is SHA-256(previous head + digest).
The monitor publishes chain heads (anchors) to the town as it runs.

Check it with:   minewatch verify bundle.zip --anchors town-anchors.json

manifest.json    what the bundle holds, the SHA-256 of every file, the window,
                 the chain segment's ends and the anchors within it
data/*.csv       per-second sound levels and light/weather/... readings,
                 in chain order; time_utc and time_local (site time, with offset)
records/*.json   events, findings (every revision), alerts, sensor health,
                 calibration checks, rejected messages, configuration changes
chain.csv        the chain segment the rows are checked against
anchors.json     every chain head the monitor published for the site
plots/           one PNG per sensor and local day (per-minute summaries)
config.toml      the monitor's configuration; profile/ the ordinance profile
data/*_influxdb.csv  (if present) rows read from InfluxDB because the store had
                 pruned them: they are NOT covered by the chain

Without anchors held by the town, verification shows only that the bundle is
consistent with itself: whoever controls the store could rebuild a consistent
bundle. See docs/EVIDENCE.md in the minewatch sources.
"""


# --------------------------------------------------------------------------- verify


@dataclass(frozen=True, slots=True)
class Problem:
    """One finding of verification. ``category``: bundle, file, row, order, config, chain or anchor."""

    category: str
    message: str


_RANK = {"bundle": 0, "file": 1, "row": 2, "order": 2, "config": 2, "chain": 3, "anchor": 4}


@dataclass(slots=True)
class Report:
    bundle: str
    problems: list[Problem] = field(default_factory=list)
    more_problems: int = 0  # beyond those listed
    format: str = ""
    files_checked: int = 0
    rows_checked: dict[str, int] = field(default_factory=dict)
    chain_links: int = 0
    first_seq: int = 0
    last_seq: int = 0
    links_only: dict[str, int] = field(
        default_factory=dict
    )  # chain entries with no row in the bundle, by reason
    bundle_anchors: int = 0
    town_anchors_matched: list[int] = field(default_factory=list)  # seqs, from first_seq - 1 to last_seq
    town_anchors_outside: list[int] = field(default_factory=list)  # seqs the segment does not reach
    town_anchors_given: bool = False
    # The highest seq of the segment whose head the town holds: entries up to it are proven.
    anchored_to: int | None = None
    unanchored_rows: int = 0  # rows of the bundle chained after anchored_to
    later_town_anchor: int | None = None  # the first town-held head beyond the segment's end
    # When the town received the head the segment ends at, if that was before the window's end:
    # records of the window chained after it are beyond what the bundle shows.
    ends_before_window_end: str = ""
    ends_at_bundle_anchor: bool = False
    outside_chain_rows: dict[str, int] = field(default_factory=dict)
    config: str = ""  # the profile and configuration the chain binds, said in one line
    scope: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def empty(self) -> bool:
        """No chain entry, no row: the bundle says there was nothing in its window."""
        return (
            self.chain_links == 0
            and not any(self.rows_checked.values())
            and not any(self.outside_chain_rows.values())
        )

    @property
    def anchored(self) -> bool:
        """Every entry of the segment leads to a head the town holds (and nothing failed)."""
        return (
            self.ok
            and self.chain_links > 0
            and self.anchored_to == self.last_seq
            and not self.ends_before_window_end
        )

    @property
    def first_problem(self) -> Problem | None:
        if not self.problems:
            return None
        return min(self.problems, key=lambda p: _RANK.get(p.category, 9))  # min keeps detection order on ties

    def add(self, category: str, message: str) -> None:
        if len(self.problems) < _MAX_LISTED:
            self.problems.append(Problem(category, message))
        else:
            self.more_problems += 1

    def verdict(self) -> str:
        """The first line: what the check proves, and no more."""
        first = self.first_problem
        if first is not None:
            return f"{self.bundle}: FAILED: {first.message}"
        if self.empty:
            return (
                f"{self.bundle}: EMPTY: the bundle holds no records (no row, no chain entry)"
                " for its window and sensors; there is nothing to prove"
            )
        if not self.town_anchors_given:
            return (
                f"{self.bundle}: internal consistency only: no problem found, but without the heads the"
                " town holds (--anchors) nothing shows that this bundle was not rebuilt from an altered store"
            )
        start, end = self.first_seq, self.last_seq
        if self.anchored:
            return (
                f"{self.bundle}: OK, anchored: every entry of the segment (seq {start} to {end}) leads to"
                f" the head the town holds for seq {end}"
            )
        if self.anchored_to == end:
            return (
                f"{self.bundle}: OK up to seq {end}, anchored by the head the town received at"
                f" {self.ends_before_window_end}, before the window ended: records of the window chained"
                f" after seq {end} are not in this bundle, so they are not anchored either"
            )
        if self.anchored_to is not None:
            return (
                f"{self.bundle}: OK up to seq {self.anchored_to}, anchored by the head the town holds there;"
                f" rows after seq {self.anchored_to} are not yet anchored (seq {self.anchored_to + 1} to"
                f" {end}, {self.unanchored_rows} row(s): internal consistency only)"
            )
        return (
            f"{self.bundle}: NOT ANCHORED: the town holds no head at or after any entry of the segment"
            f" (seq {start} to {end}); rows after seq {start - 1} are not yet anchored:"
            " internal consistency only"
        )

    def lines(self) -> list[str]:
        out = [self.verdict()]
        first = self.first_problem
        if first is not None and first.category == "bundle":
            return out  # nothing was checked: no statistics
        if self.town_anchors_given and not self.anchored and self.ok and not self.empty:
            if self.later_town_anchor is not None:
                out.append(
                    f"  the town holds a later head (seq {self.later_town_anchor}) than this segment reaches:"
                    " export the window again so that the segment ends there and the tail is proven"
                )
            else:
                out.append(
                    f"  no head the town holds lies beyond seq {self.anchored_to or self.first_seq - 1}:"
                    " nothing proves the rest yet; export again after the next anchor is published"
                )
            if self.ends_at_bundle_anchor:
                out.append(
                    f"  the segment ends at seq {self.last_seq}, a head the daemon recorded as published,"
                    " which the town's anchors do not include"
                )
        if self.format and self.format != FORMAT:
            out.append(f"  format: {self.format} (earlier); {_OLD_FORMAT_GUARANTEES}")
        if self.scope:
            out.append(f"  scope: {self.scope}")
        out.append(
            f"  files: {self.files_checked} checked against their SHA-256 in the manifest; the file set is"
            " the one the format and the rows call for"
        )
        rows = ", ".join(f"{n} in {name}" for name, n in self.rows_checked.items() if n) or "none"
        out.append(
            f"  rows: {sum(self.rows_checked.values())} rebuilt, hashed and matched to their chain entries"
            f" in chain order ({rows})"
        )
        if self.last_seq >= self.first_seq and self.chain_links:
            out.append(
                f"  chain: {self.chain_links} links recomputed, seq {self.first_seq} to {self.last_seq}"
            )
        else:
            out.append("  chain: empty segment (nothing in the window is chained)")
        if self.config:
            out.append(f"  profile and configuration: {self.config}")
        if self.links_only:
            detail = ", ".join(f"{n} {reason}" for reason, n in sorted(self.links_only.items()))
            out.append(f"  chain entries without rows here (links only): {detail}")
        out.append(f"  bundle anchors: {self.bundle_anchors} checked against the chain")
        if self.town_anchors_matched:
            seqs = ", ".join(str(s) for s in self.town_anchors_matched)
            out.append(
                f"  town-held anchors matching the chain: {len(self.town_anchors_matched)} (seq {seqs})"
            )
        elif self.town_anchors_given:
            out.append("  no town-held anchor falls inside the segment")
        if self.town_anchors_outside:
            out.append(
                "  town-held anchors outside the segment, not checkable here:"
                f" {len(self.town_anchors_outside)}"
            )
        for name, n in self.outside_chain_rows.items():
            out.append(
                f"  outside the chain: {n} rows in {name} were read from InfluxDB (pruned locally);"
                " only their file hash is checked, nothing proves their values"
            )
        out.extend(f"  note: {note}" for note in self.notes)
        if len(self.problems) > 1 or self.more_problems:
            out.append(f"  problems ({len(self.problems) + self.more_problems}):")
            out.extend(f"    - [{p.category}] {p.message}" for p in self.problems[:50])
            hidden = len(self.problems) - 50 + self.more_problems
            if hidden > 0:
                out.append(f"    ... and {hidden} more")
        return out


_OLD_FORMAT_GUARANTEES = (
    "its rows, chain and anchors are checked as for the current format and its files must be those the"
    " format calls for, but its profile and configuration files are bound by nothing but the manifest"
    " (format 1 did not chain them)"
)


class _HashingReader(io.RawIOBase):
    """Reads a zip member and hashes every byte read."""

    def __init__(self, raw: IO[bytes]) -> None:
        self.raw = raw
        self.sha = hashlib.sha256()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self.raw.read(len(buffer))
        n = len(data)
        buffer[:n] = data
        self.sha.update(data)
        return n


class _Hashed:
    """One zip member opened as text lines, hashed as it is read."""

    def __init__(self, zf: zipfile.ZipFile, name: str) -> None:
        self.name = name
        self._reader = _HashingReader(zf.open(name))
        self._buffered = io.BufferedReader(self._reader, 1 << 20)
        self.text = io.TextIOWrapper(self._buffered, encoding="utf-8", newline="")

    def sha256(self) -> str:
        # whatever the parser did not read (after an error) still counts
        while self.text.read(1 << 20):
            pass
        return self._reader.sha.hexdigest()


@dataclass(slots=True)
class _Row:
    line: int
    seq: int
    digest: str
    label: str


class _RowFile:
    """The rows of one exported file, matched against the chain entries that belong to it.

    Rows name their entry (``chain_seq``) and must come in chain order; walking the
    chain in order, a row that names an entry already passed is out of order, and an
    entry with no row by the time its successors are matched was removed.
    """

    def __init__(self, name: str, rows: Iterator[_Row], report: Report) -> None:
        self.name = name
        self.rows = rows
        self.report = report
        self.peeked: _Row | None = None
        self.done = False
        self.missing: dict[int, tuple[str, str]] = {}  # seq -> (key, digest): expected, no row yet
        self.missing_overflow = 0
        self.checked = 0

    def _peek(self) -> _Row | None:
        if self.peeked is None and not self.done:
            self.peeked = next(self.rows, None)
            self.done = self.peeked is None
        return self.peeked

    def _take(self) -> _Row:
        row = self._peek()
        assert row is not None
        self.peeked = None
        return row

    def _compare(self, row: _Row, digest: str) -> None:
        self.checked += 1
        if row.digest != digest:
            self.report.add(
                "row",
                f"row altered: {self.name} line {row.line} ({row.label}, chain seq {row.seq}):"
                f" its record hashes to {row.digest[:16]}..., the chain holds {digest[:16]}...",
            )

    def _late(self, row: _Row) -> None:
        entry = self.missing.pop(row.seq, None)
        if entry is not None:
            self.report.add(
                "order",
                f"rows reordered: {self.name} line {row.line} ({row.label}, chain seq {row.seq})"
                " comes after rows that follow it in the chain",
            )
            self._compare(row, entry[1])
        else:
            self.report.add(
                "row",
                f"row not in the chain: {self.name} line {row.line} ({row.label}) names chain seq"
                f" {row.seq}, which is not an entry of this file in the segment"
                " (a duplicate, an added row, or an altered chain_seq)",
            )

    def expect(self, seq: int, key: str, digest: str) -> None:
        while True:
            row = self._peek()
            if row is None or row.seq > seq:
                if len(self.missing) < 100_000:
                    self.missing[seq] = (key, digest)
                else:
                    self.missing_overflow += 1
                return
            self._take()
            if row.seq == seq:
                self._compare(row, digest)
                return
            self._late(row)

    def finish(self) -> None:
        while self._peek() is not None:
            self._late(self._take())
        for seq, (key, _) in sorted(self.missing.items()):
            self.report.add(
                "row", f"row removed: chain seq {seq} ({key}) belongs in {self.name} but has no row there"
            )
        for _ in range(self.missing_overflow):
            self.report.add("row", f"row removed from {self.name} (beyond the first 100000 listed)")


def _csv_rows(
    source: _Hashed,
    columns: Sequence[str],
    rebuild: Callable[[list[str]], tuple[dict[str, Any], str]],
    report: Report,
) -> Iterator[_Row]:
    reader = csv.reader(source.text)
    header = next(reader, None)
    if header is None or tuple(header) != tuple(columns):
        report.add("row", f"{source.name}: unexpected columns {header!r}; expected {list(columns)!r}")
        return
    for line, cells in enumerate(reader, start=2):
        try:
            if len(cells) != len(columns):
                raise ValueError(f"{len(cells)} cells, expected {len(columns)}")
            seq = int(cells[0])
            record, label = rebuild(cells)
        except (ValueError, TypeError, KeyError) as exc:
            report.add("row", f"row malformed: {source.name} line {line}: {exc}")
            continue
        yield _Row(line, seq, digest_of(record), label)


def _json_rows(
    source: _Hashed, kind: str, utc: TimeFormat, local: TimeFormat, report: Report
) -> Iterator[_Row]:
    build = record_builders()[kind]
    for line, text in enumerate(source.text, start=1):
        text = text.strip().removesuffix(",")
        if text in ("[", "]", ""):
            continue
        try:
            element = json.loads(text)
            seq = int(element["chain_seq"])
            row = element["row"]
            record = build(row)
        except (ValueError, TypeError, KeyError) as exc:
            report.add("row", f"row malformed: {source.name} line {line}: {exc!r}")
            continue
        label = str(element.get("key", ""))
        if element.get("derived") != _derived(row, utc, local):
            report.add(
                "row",
                f"row altered: {source.name} line {line} ({label}, chain seq {seq}):"
                " its readable fields (derived) do not match its record",
            )
        yield _Row(line, seq, digest_of(record), label)


def verify_bundle(path: str | Path, anchors: Sequence[Anchor] | None = None) -> Report:
    """Check a bundle; ``anchors`` are the heads the town holds (None: none given)."""
    report = Report(str(path), town_anchors_given=anchors is not None)
    try:
        zf = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as exc:
        report.add("bundle", f"not a readable zip file: {exc}")
        return report
    with zf:
        try:
            manifest = json.loads(zf.read(MANIFEST))
            if not isinstance(manifest, dict) or manifest.get("format") not in (FORMAT, FORMAT_1):
                found = manifest.get("format") if isinstance(manifest, dict) else None
                raise ValueError(f"format {found!r}, this verifier reads {FORMAT!r} and {FORMAT_1!r}")
            report.format = str(manifest["format"])
            _Verifier(zf, manifest, report, anchors).run()
        except KeyError as exc:
            report.add("bundle", f"not an evidence bundle: {exc} is missing")
        except (ValueError, TypeError, zipfile.BadZipFile, EOFError, OSError) as exc:
            report.add("bundle", f"unreadable bundle: {exc}")
    return report


_PLOT = re.compile(r"plots/(sound|light)/([^/]+)/(\d{4}-\d{2}-\d{2})\.png")


class _Verifier:
    def __init__(
        self,
        zf: zipfile.ZipFile,
        manifest: Mapping[str, Any],
        report: Report,
        anchors: Sequence[Anchor] | None,
    ) -> None:
        self.zf = zf
        self.m = manifest
        self.report = report
        self.town = [a for a in anchors or () if a.site == str(manifest["site"]["id"])]
        self.site = str(manifest["site"]["id"])
        self.zone = ZoneInfo(manifest["site"]["timezone"])
        self.utc = TimeFormat(UTC)
        self.local = TimeFormat(self.zone)
        scope = manifest["scope"]
        window = manifest["window"]
        sensors = scope["sensors"]
        self.scope = _Scope(
            self.site,
            int(window["from_us"]),
            int(window["to_us"]),
            int(scope["chained_from_us"]),
            tuple(sensors) if sensors is not None else None,
        )
        self.hashes = {f["name"]: f["sha256"] for f in manifest["files"]}
        self._last_ts, self._last_times = -1, ("", "")
        self.days: set[tuple[str, str, str]] = set()  # (plot measurement, sensor, local day) with rows
        self.configs: list[tuple[int, dict[str, Any]]] = []  # config records of the segment
        self.files: dict[str, _RowFile] = {}
        self.rows_at_anchor = 0

    def run(self) -> None:
        r = self.report
        s = self.scope
        sensors = ", ".join(s.sensors) if s.sensors is not None else "all sensors"
        r.scope = (
            f"site {self.site}, {self.utc(s.from_us)} to {self.utc(s.to_us)}"
            f" ({self.local(s.from_us)} to {self.local(s.to_us)} site time), {sensors}"
        )
        if s.chained_from_us > s.from_us:
            r.scope += f"; chained rows from {self.utc(s.chained_from_us)} (pruned locally before)"
        # Directory entries (a bundle unzipped and zipped again has them) carry no content.
        names = {n for n in self.zf.namelist() if not (n.endswith("/") and self.zf.getinfo(n).file_size == 0)}
        for name in self.hashes:
            if name not in names:
                r.add("file", f"file missing: {name} is listed in the manifest but not in the bundle")
        for name in sorted(names - set(self.hashes) - {MANIFEST}):
            r.add("file", f"file not in the manifest: {name}")
        opened: dict[str, _Hashed] = {}
        try:
            self._walk(opened, names)
        finally:
            for name, source in opened.items():
                self._check_hash(name, source.sha256())
        for name in sorted(set(self.hashes) & names - set(opened)):
            sha = hashlib.sha256()
            with self.zf.open(name) as f:
                while chunk := f.read(1 << 20):
                    sha.update(chunk)
            self._check_hash(name, sha.hexdigest())
            if name.endswith("_influxdb.csv"):
                r.outside_chain_rows[name] = self._influx_days(name)
        r.files_checked = len(set(self.hashes) & names)
        self._check_config(names)
        self._check_file_set(names)

    # ------------------------------------------------------------------ files

    def _check_hash(self, name: str, actual: str) -> None:
        expected = self.hashes.get(name)
        if expected is not None and expected != actual:
            self.report.add("file", f"file changed: {name} does not match its SHA-256 in the manifest")

    def _open(self, opened: dict[str, _Hashed], names: set[str], name: str) -> _Hashed | None:
        if name not in names:
            return None
        opened[name] = _Hashed(self.zf, name)
        return opened[name]

    def _influx_days(self, name: str) -> int:
        """Rows of a file read from InfluxDB; their sensors and days may have plots."""
        measurement = name.removeprefix("data/").removesuffix("_influxdb.csv")
        rows = 0
        with self.zf.open(name) as f:
            reader = csv.reader(io.TextIOWrapper(f, encoding="utf-8", newline=""))
            header = next(reader, [])
            try:
                sensor_at, local_at = header.index("sensor"), header.index("time_local")
            except ValueError:
                return 0
            for cells in reader:
                rows += 1
                if len(cells) > max(sensor_at, local_at):
                    self.days.add((measurement, cells[sensor_at], cells[local_at][:10]))
        return rows

    def _check_file_set(self, names: set[str]) -> None:
        """The format fixes which files a bundle holds; the manifest cannot add or drop one.

        Every file is either required (the rows, records, chain, anchors, configuration,
        profile, README), a plot of a sensor and day the rows cover, or (for a window
        pruned locally) a file read from InfluxDB. Anything else is refused, listed in
        the manifest or not.
        """
        r = self.report
        required = {
            MANIFEST,
            CHAIN_FILE,
            ANCHORS_FILE,
            "config.toml",
            "README.txt",
            SOUND_FILE,
            *(reading_file(kind) for kind in READING_EXTRAS),
            *RECORD_FILES.values(),
            self.profile_file,
        }
        optional = _OPTIONAL_FILES & names
        required -= _OPTIONAL_FILES
        if self.report.format != FORMAT:
            required -= _SINCE_FORMAT_2
        for name in sorted(required - names):
            r.add("file", f"file missing: {name} is part of every evidence bundle")
        influx = {f"data/{m}_influxdb.csv" for m in set(INFLUX_MEASUREMENT.values())}
        pruned = self.scope.chained_from_us > self.scope.from_us
        for name in sorted(names - required - optional):
            plot = _PLOT.fullmatch(name)
            if plot is not None and (plot[1], plot[2], plot[3]) in self.days:
                continue
            if pruned and name in influx:
                continue
            why = (
                "a plot of a sensor and day with no rows in the bundle"
                if plot is not None
                else "not a file of the evidence format"
            )
            r.add("file", f"file not part of the bundle: {name} ({why})")
        if "README.txt" in names:
            text = _README if self.report.format == FORMAT else _README_1
            if self.zf.read("README.txt") != text.encode("utf-8"):
                r.add("file", "file changed: README.txt is not the text every bundle of its format holds")

    # ------------------------------------------------------------------ configuration

    @property
    def profile_file(self) -> str:
        for _, record in self.configs:
            if "profile_sha256" in record:
                return _profile_file(str(record["profile"]))
        return str(self.m["profile"]["file"])

    def _check_config(self, names: set[str]) -> None:
        """The bundle's profile and configuration against the segment's config records."""
        r = self.report
        current = [(seq, rec) for seq, rec in self.configs if "profile_sha256" in rec]
        if not current:
            self._config_format_1(names)
            if r.format == FORMAT and r.chain_links:
                # Every segment cut since the daemon chains config records starts with one (it is
                # restated after each anchor), so only a window recorded before that has none: it
                # gets format 1's guarantee, said plainly, rather than failing honest evidence.
                r.config = (
                    "not bound: the segment holds no configuration record (recorded before minewatch"
                    " chained them); profile/ and config.toml are the files at export time, unchecked"
                )
            return
        seq, record = current[0]
        profile_file = _profile_file(str(record["profile"]))
        stated = {
            "config.toml": str(record["config_sha256"]),
            profile_file: str(record["profile_sha256"]),
        }
        for name, digest in stated.items():
            if name not in names:
                continue  # reported as missing
            if hashlib.sha256(self.zf.read(name)).hexdigest() != digest:
                what = "profile" if name == profile_file else "configuration"
                r.add(
                    "config",
                    f"{what} changed: {name} is not the {what} chained at seq {seq}"
                    f" (SHA-256 {digest[:12]}...): the findings were judged under that one",
                )
        if self.m.get("profile", {}).get("name") != record["profile"]:
            r.add(
                "config",
                f"the manifest names profile {self.m['profile'].get('name')!r},"
                f" the chain's config record {record['profile']!r}",
            )
        since = self.utc(int(record["since_us"]))
        r.config = (
            f"profile {record['profile']} {str(record['profile_sha256'])[:12]} and configuration"
            f" {str(record['config_sha256'])[:12]} (secrets left out), in force since {since},"
            f" chained at seq {seq}: {profile_file} and config.toml are those files"
        )
        if r.town_anchors_given:
            proven = r.anchored_to is not None and r.anchored_to >= seq
            r.config += " (anchored)" if proven else " (not yet anchored: internal consistency only)"
        for later_seq, later in current[1:]:
            if (later["profile_sha256"], later["config_sha256"]) != (
                record["profile_sha256"],
                record["config_sha256"],
            ):
                r.notes.append(
                    f"the profile or configuration changed at seq {later_seq} (profile"
                    f" {later['profile']} {str(later['profile_sha256'])[:12]}, configuration"
                    f" {str(later['config_sha256'])[:12]}); records after it were judged under that one,"
                    " whose files are not in this bundle"
                )
                break

    def _config_format_1(self, names: set[str]) -> None:
        """Format 1 chained the configuration file's SHA-256 only (and no profile)."""
        if "config.toml" not in names:
            return
        config_sha = hashlib.sha256(self.zf.read("config.toml")).hexdigest()
        matches = [seq for seq, rec in self.configs if rec.get("sha256") == config_sha]
        if matches:
            self.report.notes.append(f"config.toml is the configuration chained at seq {matches[-1]}")
        else:
            self.report.notes.append(
                "config.toml (the configuration at export time) was not chained inside the"
                " segment; the one in force may have been chained earlier"
            )

    # ------------------------------------------------------------------ rows

    def _times(self, ts: int) -> tuple[str, str]:
        if ts != self._last_ts:  # rows of one second come together
            self._last_ts, self._last_times = ts, (self.utc(ts), self.local(ts))
        return self._last_times

    def _sound_rebuild(self, cells: list[str]) -> tuple[dict[str, Any], str]:
        ts = int(cells[3])
        if (cells[4], cells[5]) != self._times(ts):
            raise ValueError(f"time_utc/time_local {cells[4]!r}/{cells[5]!r} do not match ts_us {ts}")
        row: dict[str, Any] = {
            "site": cells[1],
            "sensor": cells[2],
            "ts_us": ts,
            "duration_s": float(cells[6]),
            "source": cells[-1],
        }
        for name, text in zip(SOUND_FIELDS, cells[7:-1], strict=True):
            row[name] = _opt_float(text)
        self.days.add(("sound", cells[2], cells[5][:10]))
        return RECORDS["sound"](row), f"sensor {cells[2]} at {cells[4]}"

    def _reading_rebuild(self, kind: str) -> Callable[[list[str]], tuple[dict[str, Any], str]]:
        extras = len(READING_EXTRAS[kind])

        def rebuild(cells: list[str]) -> tuple[dict[str, Any], str]:
            ts = int(cells[4])
            if (cells[5], cells[6]) != self._times(ts):
                raise ValueError(f"time_utc/time_local {cells[5]!r}/{cells[6]!r} do not match ts_us {ts}")
            data = cells[-1]
            if cells[8 : 8 + extras] != _reading_extras(kind, data):
                raise ValueError(f"columns {', '.join(READING_EXTRAS[kind])} do not match its data")
            row = {
                "site": cells[1],
                "sensor": cells[2],
                "kind": cells[3],
                "ts_us": ts,
                "duration_s": float(cells[7]),
                "data": data,
            }
            if kind == "light":
                self.days.add(("light", cells[2], cells[6][:10]))
            return RECORDS["reading"](row), f"{kind} {cells[2]} at {cells[5]}"

        return rebuild

    def _bundle_anchors(self, names: set[str], first: int, last: int) -> list[tuple[int, str]]:
        """The daemon's anchors inside the segment: anchors.json, which the manifest must repeat."""
        listed = {(int(a["seq"]), str(a["head"])) for a in self.m.get("anchors", [])}
        if ANCHORS_FILE not in names:
            return sorted(listed)
        try:
            own = json.loads(self.zf.read(ANCHORS_FILE))
            inside = {(int(a["seq"]), str(a["head"])) for a in own if first - 1 <= int(a["seq"]) <= last}
        except (ValueError, TypeError, KeyError):
            self.report.add("file", f"{ANCHORS_FILE} is not a list of anchors")
            return sorted(listed)
        if inside != listed:
            self.report.add(
                "anchor", f"the manifest's anchors are not those of {ANCHORS_FILE} inside the segment"
            )
        return sorted(inside | listed)

    def _walk(self, opened: dict[str, _Hashed], names: set[str]) -> None:
        r = self.report
        files = self.files
        source = self._open(opened, names, SOUND_FILE)
        if source is not None:
            files["sound"] = _RowFile(SOUND_FILE, _csv_rows(source, SOUND_COLUMNS, self._sound_rebuild, r), r)
        for kind in READING_EXTRAS:
            name = reading_file(kind)
            source = self._open(opened, names, name)
            if source is not None:
                files[f"reading:{kind}"] = _RowFile(
                    name, _csv_rows(source, reading_columns(kind), self._reading_rebuild(kind), r), r
                )
        for kind, name in RECORD_FILES.items():
            source = self._open(opened, names, name)
            if source is not None:
                files[kind] = _RowFile(name, _json_rows(source, kind, self.utc, self.local, r), r)

        chain = self.m["chain"]
        first, last = int(chain["first_seq"]), int(chain["last_seq"])
        r.first_seq, r.last_seq = first, last
        wanted: dict[int, list[tuple[str, str]]] = {}  # seq -> [(who, head)]
        own = self._bundle_anchors(names, first, last)
        for seq, head_ in own:
            wanted.setdefault(seq, []).append(("bundle", head_))
        r.ends_at_bundle_anchor = last >= first and any(seq == last for seq, _ in own)
        for a in self.town:
            if first - 1 <= a.seq <= last and last >= first:
                wanted.setdefault(a.seq, []).append(("town", a.head))
            else:
                r.town_anchors_outside.append(a.seq)
        head = str(chain["prev_head"])
        self._anchor_check(wanted, first - 1, head)

        source = self._open(opened, names, CHAIN_FILE)
        if source is None:
            r.add("chain", f"{CHAIN_FILE} is missing: nothing can be checked against the chain")
            return
        reader = csv.reader(source.text)
        if next(reader, None) != ["seq", "kind", "key", "digest", "head", "recorded_us"]:
            r.add("chain", f"{CHAIN_FILE}: unexpected columns")
        expected_seq = first
        for line, cells in enumerate(reader, start=2):
            try:
                seq_text, kind, key, digest, stated, _ = cells
                seq = int(seq_text)
            except ValueError:
                r.add("chain", f"{CHAIN_FILE} line {line} is malformed")
                continue
            if seq != expected_seq:
                r.add(
                    "chain",
                    f"chain broken: {CHAIN_FILE} line {line} has seq {seq} where {expected_seq} follows",
                )
            expected_seq = seq + 1
            computed = next_head(head, digest)
            if computed != stated:
                r.add("chain", f"chain broken at seq {seq}: its head is not SHA-256(previous head + digest)")
            head = stated  # go on from what the bundle states, so one break is reported once
            r.chain_links += 1
            self._route(files, seq, kind, key, digest)
            self._anchor_check(wanted, seq, computed)  # after the row: an anchor at seq covers it
        if expected_seq != last + 1:
            r.add("chain", f"chain segment ends at seq {expected_seq - 1}; the manifest says {last}")
        if last >= first and head != chain["last_head"]:
            r.add("chain", "chain broken: the last head differs from the manifest's")
        for rows in files.values():
            rows.finish()
            r.rows_checked[rows.name] = rows.checked
        r.unanchored_rows = sum(f.checked for f in files.values()) - self.rows_at_anchor
        for seq in sorted(s for s in wanted if not first - 1 <= s <= last):
            for who, _ in wanted[seq]:
                if who == "bundle":
                    r.add("anchor", f"the manifest lists an anchor at seq {seq}, outside its own segment")
        self._coverage(first, last)

    def _anchor_check(self, wanted: Mapping[int, list[tuple[str, str]]], seq: int, head: str) -> None:
        for who, expected in wanted.get(seq, ()):
            if who == "bundle":
                self.report.bundle_anchors += 1
                if expected != head:
                    self.report.add(
                        "anchor",
                        f"anchor not matching: the bundle's anchor at seq {seq} is not the"
                        " chain's head there",
                    )
            elif expected.lower() == head:
                self.report.town_anchors_matched.append(seq)
                if seq >= self.report.first_seq:  # the head before the segment proves none of it
                    self.report.anchored_to = seq
                    self.rows_at_anchor = sum(f.checked for f in self.files.values())
            else:
                self.report.add(
                    "anchor",
                    f"anchor not matching: the town holds head {expected[:16]}... for seq"
                    f" {seq}, the bundle's chain has {head[:16]}... there: the record was"
                    " rewritten after that head was published",
                )

    def _route(self, files: Mapping[str, _RowFile], seq: int, kind: str, key: str, digest: str) -> None:
        r = self.report
        target: _RowFile | None = None
        if kind == "sound":
            parsed = _sound_key(key)
            if parsed is None:
                r.add("chain", f"chain entry seq {seq}: malformed sound key {key!r}")
                return
            if not self.scope.holds(*parsed):
                self._links_only("per-second rows outside the window/sensors", seq)
                return
            target = files.get("sound")
            name = SOUND_FILE
        elif kind == "reading":
            reading = _reading_key(key)
            if reading is None:
                r.add("chain", f"chain entry seq {seq}: malformed reading key {key!r}")
                return
            if reading[1] not in READING_EXTRAS or not self.scope.holds(reading[0], reading[2]):
                self._links_only("per-second rows outside the window/sensors", seq)
                return
            target = files.get(f"reading:{reading[1]}")
            name = reading_file(reading[1])
        elif kind in RECORD_FILES:
            if kind == "config":
                self._config_entry(seq, key, digest)
            target = files.get(kind)
            name = RECORD_FILES[kind]
        else:
            self._links_only(f"{kind} entries", seq)
            return
        if target is None:
            r.add(
                "row", f"row removed: chain seq {seq} ({key}) belongs in {name}, which is not in the bundle"
            )
            return
        target.expect(seq, key, digest)

    def _config_entry(self, seq: int, key: str, digest: str) -> None:
        """A config record is its key: read it from there, once the digest vouches for it."""
        try:
            record = config_from_key(key)
            matches = digest_of(config_record(record)) == digest
        except (ValueError, KeyError):
            matches = False
        if not matches:
            self.report.add("chain", f"chain entry seq {seq}: its key does not name its config record")
            return
        self.configs.append((seq, record))

    def _links_only(self, reason: str, seq: int) -> None:
        self.report.links_only[reason] = self.report.links_only.get(reason, 0) + 1

    def _coverage(self, first: int, last: int) -> None:
        """How far the town's heads reach, and whether the segment stops short of one it should reach.

        An honest export ends at the first anchor published after the window that covers
        the window's last record, or failing that at any later anchor. A town-held head
        beyond the end that was published before the bundle was made therefore means the
        segment was cut short, unless it ends at the first anchor published after the
        window, or at a recorded anchor the town's file happens not to hold.
        """
        r = self.report
        if last < first:
            return
        beyond = sorted(a.seq for a in self.town if a.seq > last)
        r.later_town_anchor = beyond[0] if beyond else None
        if r.anchored_to == last:
            end_ts = [_parse_us(a.ts) for a in self.town if a.seq == last]
            end_us = min((t for t in end_ts if t is not None), default=None)
            if end_us is not None and end_us < self.scope.to_us:
                r.ends_before_window_end = self.utc(end_us)
        created = _parse_us(str(self.m.get("created_utc", "")))
        if created is None:
            return
        if created < self.scope.to_us:
            r.notes.append(
                f"the manifest says the bundle was made at {self.utc(created)}, before its window ended:"
                " records of the window chained later cannot be in it"
            )
        known = [(a.seq, _parse_us(a.ts)) for a in self.town]
        had = [(seq, ts) for seq, ts in known if ts is not None and ts <= created]  # the exporter had these
        after_window = [seq for seq, ts in had if ts >= self.scope.to_us]
        if after_window and last < min(after_window):
            r.add(
                "anchor",
                f"segment cut short: it ends at seq {last}, before the first anchor the town"
                f" received after the window (seq {min(after_window)}); records of the window"
                " chained after that could be missing",
            )
        elif r.anchored_to != last and not r.ends_at_bundle_anchor:
            later = [seq for seq, _ in had if seq > last]
            if later:
                r.add(
                    "anchor",
                    f"segment cut short: it ends at seq {last}, which is no anchor, while the town had"
                    f" received the head of seq {min(later)} before this bundle was made; an export"
                    " then reaches that head, so rows after"
                    f" seq {r.anchored_to if r.anchored_to is not None else first - 1} could be missing"
                    " or altered",
                )


def _parse_us(text: str) -> int | None:
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return _us(parsed) if parsed.tzinfo is not None else None
