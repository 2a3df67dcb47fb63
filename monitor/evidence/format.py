"""The evidence bundle format: its files, columns, record kinds and anchors.

Shared by the exporter and the verifier; standard library and the store's record functions only.
"""

from __future__ import annotations

import csv
import hashlib
import json
import re
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from functools import lru_cache
from pathlib import Path
from typing import Any

from monitor.csv_cells import exact_value
from monitor.errors import MinewatchError
from monitor.journal.chain_kinds import KINDS, SOUND_FIELDS, ChainKind, sound_record
from monitor.named_file import NamedFileError, read_named_text
from monitor.wire.canonical import canonical_json, canonical_text, half_pair_at

# Format 2: the file set is closed (fixed by the format and the rows, not by the manifest),
# the profile and configuration are bound by a chained config record, and the segment ends
# at an anchor when the store has one. Format 3: the same, but chain.csv carries no heads (verify
# recomputes them) and, for a sound entry whose row is in the bundle, only a short tag of its
# digest (the row gives the digest); the sound rows come in parts of SOUND_PART_ROWS, so that
# they can be checked in parallel. Format 4: the same files, but config.toml is the site's
# allow-list (monitor/evidence/disclosure.py) and a record outside the window, or not for the
# reader, is a chain.csv entry with its digest alone (``seq,kind,,digest,``). Formats 1 to 3
# still verify (see verify_bundle).
FORMAT = "minewatch-evidence/4"
FORMAT_3 = "minewatch-evidence/3"
FORMAT_2 = "minewatch-evidence/2"
FORMAT_1 = "minewatch-evidence/1"
FORMATS = (FORMAT, FORMAT_3, FORMAT_2, FORMAT_1)
SOUND_PARTS_FORMATS = (FORMAT, FORMAT_3)  # sound rows in parts, chain.csv without heads
MANIFEST = "manifest.json"
CHAIN_FILE = "chain.csv"
ANCHORS_FILE = "anchors.json"
SOUND_FILE = "data/sound.csv"  # formats 1 and 2: every sound row in one file
SOUND_PART_ROWS = 1 << 18  # format 3: rows per data/sound/part-NNNNN.csv
CHAIN_COLUMNS = ("seq", "kind", "key", "digest", "head", "recorded_us")  # formats 1 and 2
CHAIN_COLUMNS_3 = ("seq", "kind", "key", "digest", "recorded_us")
TAG_HEX = 8  # format 3: hex digits of a sound row's digest kept in chain.csv, to name a changed row
# Format 4, a bundle for a time-scoped reader: a digest-only entry's line names no kind
# (``seq,,,digest,``), and the manifest and verify count those entries under this name. The link
# needs the digest alone (head = SHA-256(previous head + digest)); the kind told which records
# (a notice, an alert) were chained between the scope's end and the anchor closing the bundle.
DIGEST_KIND_NOT_STATED = "kind not stated"
# Zip deflate level: 1. Level 6 made a month's bundle ~11 % smaller but took 4 x the CPU
# (40 MB/s against 165 MB/s on the sound rows).
COMPRESS_LEVEL = 1


def sound_part(index: int) -> str:
    """The name of the index-th (from 1) part of a format-3 bundle's sound rows."""
    return f"data/sound/part-{index:05d}.csv"


SOUND_PART = re.compile(r"data/sound/part-(\d{5})\.csv")
READING_EXTRAS: dict[str, tuple[str, ...]] = {  # columns copied out of the reading's JSON, for reading
    "light": ("lux_mean", "lux_min", "lux_max"),
    "weather": ("wind_speed_ms", "rain"),
    "turbidity": ("ntu",),
    "status": ("battery_pct", "clock_offset_s"),
}


# The chain kinds exported row by row to records/<name>.json (monitor/journal/chain_kinds.py holds them all).
RECORD_KINDS: dict[str, ChainKind] = {k: v for k, v in KINDS.items() if v.source}
RECORD_FILES: dict[str, str] = {
    **{k: v.file for k, v in RECORD_KINDS.items()},
    "config": KINDS["config"].file,
}
# Record files a format-1 bundle never held (conflicting resends were first journaled in format 2).
_SINCE_FORMAT_2 = frozenset({RECORD_KINDS["conflict"].file})
# Kinds whose file a bundle holds only when its segment chains some: a bundle made before the
# kind existed is complete without it, and a segment's entries of the kind still need their rows.
OPTIONAL_RECORD_KINDS = frozenset(k for k, v in RECORD_KINDS.items() if v.optional)
# Kinds chained before a bundle carried their rows (waveforms: chained since issue 27, rows since
# its follow-up): a format-4 bundle whose manifest does not list the kind among those disclosed
# was exported before then, and its entries of the kind are links only, said so.
ROWS_SINCE: dict[str, str] = {"waveform": "seismograph waveform entries (exported before they were rows)"}
_OPTIONAL_FILES = frozenset(RECORD_KINDS[k].file for k in OPTIONAL_RECORD_KINDS)


INFLUX_MEASUREMENT = {
    "sound": "sound",
    "light": "light",
    "sky": "light",
    "weather": "weather",
    "turbidity": "turbidity",
}
_FLUSH_BYTES = 1 << 20
_MAX_LISTED = 1000  # problems and missing rows kept in detail; the rest are counted

# --------------------------------------------------------------------------- limits (verify)
# A bundle comes from elsewhere (an upload to the portal): verify reads no member beyond these,
# so a zip bomb is refused by a problem line, never by running out of memory. A member is only
# ever read streaming, except those with a cap of a few MB (read whole).
_MiB = 1 << 20
MEMBER_CAPS = {  # inflated bytes, whatever the manifest says
    "manifest.json": 16 * _MiB,  # read whole: a month's bundle lists ~1,000 files (~200 KB)
    "README.txt": 16 * 1024,  # a fixed text of ~2 KB
    "config.toml": 1 * _MiB,  # read whole; the allow-list is a few KB
    "anchors.json": 256 * _MiB,  # streamed; ~35,000 anchors (7 MB) a year
}
PROFILE_CAP = 4 * _MiB  # profile/<name>.toml, read whole (Dovre's is 22 KB)
JSON_CAP = 1 << 30  # records/*.json, streamed
PLOT_CAP = 16 * _MiB  # a PNG of a day
MAX_RATIO = 200  # inflated / compressed bytes of a member over 1 MiB (evidence deflates 3-10 x)
RATIO_FROM = 1 * _MiB
MAX_MEMBERS = 100_000  # a month's bundle has ~1,000
MAX_DIRECTORY = 32 * _MiB  # the zip's list of members: MAX_MEMBERS entries of ~100 bytes, with room
MAX_LINE = 8 * _MiB  # a CSV or JSON line (a reading's data is at most 1 MiB, escaped)
# A CSV field may be as long as a line: a light reading's burst of 100,000 samples is a 400 KB
# data cell, past csv's default 131,072, and a genuine bundle failed to verify. (Process-wide:
# every reader of bundles and parts imports this module, in each process that checks them.)
csv.field_size_limit(MAX_LINE)


class TooLarge(ValueError):
    """A member, or a line of one, beyond the limits above."""


def json_array_elements(text: Any, name: str, limit: int = MAX_LINE) -> Iterator[Any]:
    """The elements of a JSON array read from a text stream one by one, however it is laid out,
    none longer than ``limit`` characters (ValueError for what is not such an array)."""
    decoder = json.JSONDecoder()
    buffer, at, eof = "", 0, False

    def more() -> bool:
        nonlocal buffer, at, eof
        chunk = "" if eof else text.read(1 << 16)
        eof = not chunk
        buffer, at = buffer[at:] + chunk, 0
        return bool(chunk)

    def skip(chars: str) -> str:
        """The next character not in ``chars`` ("" at the end), not consumed."""
        nonlocal at
        while True:
            while at < len(buffer) and buffer[at] in chars:
                at += 1
            if at < len(buffer) or not more():
                return buffer[at : at + 1]

    if skip(" \t\r\n") != "[":
        raise ValueError(f"{name} is not a JSON list")
    at += 1
    while (following := skip(" \t\r\n")) != "]":
        if not following:
            raise ValueError(f"{name} ends inside its list")
        while True:
            try:
                element, end = decoder.raw_decode(buffer, at)
                break
            except ValueError:
                if len(buffer) - at > limit:
                    raise TooLarge(f"{name} has an element longer than {limit:,} characters") from None
                if not more():
                    raise
        at = end
        yield element
        if skip(" \t\r\n") == ",":
            at += 1
    if skip(" \t\r\n]") != "":
        raise ValueError(f"{name} holds more than its list")


def bounded_lines(text: Any, name: str, limit: int = MAX_LINE) -> Iterator[str]:
    """The lines of a text stream, refusing one longer than ``limit`` before it is all in memory
    (ValueError naming the member for bytes that are not UTF-8: the codec's words named neither)."""
    try:
        while line := text.readline(limit + 1):
            if len(line) > limit:
                raise TooLarge(f"{name} has a line longer than {limit:,} characters")
            yield line
    except UnicodeDecodeError as exc:
        raise ValueError(f"{name} is not UTF-8 text ({exc.reason})") from None


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


# --------------------------------------------------------------------------- row shapes (export and verify)


def _cell(value: Any) -> str:
    """One CSV cell: floats as repr() (exact round trip), booleans as JSON does."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | str):
        return repr(value) if isinstance(value, float) else str(value)
    return canonical_text(value, ascii=True)


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
# A bundle whose window holds a second the meter was overloaded in has one more column: "1" for
# such a row, empty for the others (a bundle without one is as it always was).
SOUND_OVERLOAD_COLUMNS = (*SOUND_COLUMNS, "overload")
_PLAIN_WIDTH = len(SOUND_COLUMNS)


def _overload_cell(cells: Sequence[str]) -> bool:
    """A row's overload flag: its 17th cell, '1' or empty (a row of 16 cells has none)."""
    if len(cells) <= _PLAIN_WIDTH:
        return False
    flag = cells[_PLAIN_WIDTH]
    if flag not in ("", "1"):
        raise ValueError(f"overload {flag!r} is neither 1 nor empty")
    return flag == "1"


@lru_cache(maxsize=4096)
def _json_string(cell: str) -> str:
    """A text cell's value (``exact_value``: without the apostrophe that keeps a spreadsheet
    from running it) as a JSON string; a row's few distinct ids are looked up, not rebuilt."""
    return json.dumps(exact_value(cell), ensure_ascii=False)


def sound_canonical_cells(cells: Sequence[str]) -> bytes:
    """canonical_json(sound_record(row)) of a sound.csv row, without building the dict.

    Each number written as repr() writes it, then the row's text (``sound_text_cells``). The
    verifier's check of a row whose text as it stands did not give the chained digest;
    tests/monitor/evidence/test_scale.py checks it against the general path.
    """
    plain = cells[:_PLAIN_WIDTH]
    _, site, sensor, ts, _, _, duration, la, fmax, smax, fmin, ceq, cpeak, zpeak, zeq, source = plain
    overload = _overload_cell(cells)
    la = repr(float(la)) if la else "null"
    fmax = repr(float(fmax)) if fmax else "null"
    smax = repr(float(smax)) if smax else "null"
    fmin = repr(float(fmin)) if fmin else "null"
    ceq = repr(float(ceq)) if ceq else "null"
    cpeak = repr(float(cpeak)) if cpeak else "null"
    zpeak = repr(float(zpeak)) if zpeak else "null"
    zeq = repr(float(zeq)) if zeq else "null"
    duration = repr(float(duration))
    numbers = la + fmax + smax + fmin + ceq + cpeak + zpeak + zeq + duration
    if "i" in numbers or "a" in numbers:  # inf or nan, which canonical_json spells Infinity / NaN
        row: dict[str, Any] = {
            "site": exact_value(site),
            "sensor": exact_value(sensor),
            "ts_us": int(ts),
            "duration_s": float(duration),
            "source": exact_value(source),
            "overload": overload,
        }
        for name, value in zip(SOUND_FIELDS, cells[7:15], strict=True):
            row[name] = _opt_float(value)
        return canonical_json(sound_record(row))
    normalised = (site, sensor, ts, duration, la, fmax, smax, fmin, ceq, cpeak, zpeak, zeq, source)
    return sound_text_cells((cells[0], *normalised[:3], "", "", *normalised[3:], "1" if overload else ""))


def sound_text_cells(cells: Sequence[str]) -> bytes:
    """The canonical record text a sound.csv row's cells spell as they stand: numbers not re-formatted.

    The exporter writes every number as repr() writes it, which is how the record's canonical
    text writes it too, so for an exported row this equals ``sound_canonical_cells`` without
    the float round trips (most of the verifier's CPU a row). A row whose text gives the
    chained digest is therefore exactly the record chained; any other (a number written
    another way, inf, a changed value) is checked again with ``sound_canonical_cells``. The text
    cells (site, sensor, source) are read back with ``monitor.csv_cells.exact_value``.
    """
    # A row of the overload column's bundles is sliced; the common one is not (a verify's every row).
    flagged = len(cells) != _PLAIN_WIDTH
    _, site, sensor, ts, _, _, duration, la, fmax, smax, fmin, ceq, cpeak, zpeak, zeq, source = (
        cells[:_PLAIN_WIDTH] if flagged else cells
    )
    # "overload" sorts between "duration_s" and "sensor"; only an overloaded row has it.
    overload = ',"overload":true' if flagged and _overload_cell(cells) else ""
    return (
        f'{{"LAFmax":{fmax or "null"},"LAFmin":{fmin or "null"},"LASmax":{smax or "null"},'
        f'"LAeq":{la or "null"},"LCeq":{ceq or "null"},"LCpeak":{cpeak or "null"},'
        f'"LZeq":{zeq or "null"},"LZpeak":{zpeak or "null"},"duration_s":{duration or "null"}{overload},'
        f'"sensor":{_json_string(sensor)},"site":{_json_string(site)},'
        f'"source":{_json_string(source)},"t":"sound","ts_us":{int(ts)}}}'
    ).encode()


def sound_digest_cells(cells: Sequence[str]) -> str:
    """digest_of(sound_record(row)) of a sound.csv row (see sound_canonical_cells)."""
    return hashlib.sha256(sound_canonical_cells(cells)).hexdigest()


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
    """The columns a reading's row copies out of its data, as values (the exporter writes each
    with ``inert_exact``; verify compares them with the cells' ``exact_value``)."""
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


@dataclass(slots=True)
class _Scope:
    site: str
    from_us: int
    to_us: int
    chained_from_us: int  # rows before this were pruned locally
    sensors: tuple[str, ...] | None  # None: every sensor

    def holds(self, sensor: str, ts_us: int) -> bool:
        return self.chained_from_us <= ts_us < self.to_us and (self.sensors is None or sensor in self.sensors)


def exported_window(bundle: str | Path) -> dict[str, str]:
    """{"from", "to"}: the window a bundle this minewatch just exported discloses (its manifest's),
    which an account's time scope may have cut from the one requested."""
    import zipfile

    with zipfile.ZipFile(bundle) as zf:
        window = json.loads(zf.read(MANIFEST))["window"]
    return {"from": str(window["from_utc"]), "to": str(window["to_utc"])}


def _profile_file(profile: str) -> str:
    """The bundle's file for a profile given by name (``dovre``) or by path (``/etc/x.toml``)."""
    return f"profile/{Path(profile).name if profile.endswith('.toml') else profile + '.toml'}"


def site_agreement(config_text: str, site_id: str) -> dict[str, Any] | None:
    """The agreement overrides a bundle's config.toml gives ``site_id`` (its ``[[sites]]`` table's
    ``agreement``; none written is none made), which the manifest repeats (``profile.agreement``);
    None where the text is no TOML or holds no such site. The exporter states them from the very
    text it ships and verify reads them back the same way."""
    try:
        document = tomllib.loads(config_text)
    # tomllib's own errors, a bare ValueError for an integer of over 4,300 digits, a RecursionError
    # for arrays nested thousands deep (rules.toml_text says which; verify imports nothing of rules)
    except (ValueError, RecursionError):
        return None
    sites = document.get("sites")
    for site in sites if isinstance(sites, list) else ():
        if isinstance(site, dict) and site.get("id") == site_id:
            agreement = site.get("agreement", {})
            return dict(agreement) if isinstance(agreement, dict) else None
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
        text = read_named_text(path, "anchors file")
    except NamedFileError as exc:
        raise EvidenceError(f"anchors: {exc}") from None
    try:
        try:
            data = json.loads(text)
            items = data if isinstance(data, list) else [data]
        except ValueError:
            try:
                items = [json.loads(line) for line in text.splitlines() if line.strip()]
            except ValueError as exc:
                raise EvidenceError(f"{path}: neither a JSON list nor JSON lines: {exc}") from None
    except RecursionError:  # json's decoder recurses per bracket: "[" * 100000 ended in a traceback
        raise EvidenceError(
            f"{path}: lists or objects nested too deeply to be anchors (a list of {{site, seq, head}})"
        ) from None
    anchors = []
    for i, item in enumerate(items):
        found = half_pair_at(item)
        if found is not None:
            raise EvidenceError(f"{path}: entry {i}: {found[0] or 'the entry'}: {found[1]}")
        if not isinstance(item, dict):
            raise EvidenceError(
                f"{path}: entry {i} is not an object with site, seq and head: {_shown_start(item)}"
            )
        # Another file's objects (the demo's summary.json) were printed whole: 12 KB of one line.
        if lacking := next((key for key in ("site", "seq", "head") if key not in item), None):
            raise EvidenceError(
                f"{path}: entry {i} has no {lacking!r} (an anchor is an object with site, seq and head)"
            )
        site, seq, head = str(item["site"]), item["seq"], str(item["head"]).lower()
        ts = str(item.get("ts", ""))
        anchors.append(Anchor(site, _anchor_seq(seq, f"{path}: entry {i}: seq"), head, ts))
    return anchors


def _shown_start(value: Any, limit: int = 80) -> str:
    """The start of a value's repr, for a line that must stay one short line."""
    shown = repr(value)
    return shown if len(shown) <= limit else f"{shown[:limit]}... ({len(shown):,} characters)"


def _anchor_seq(value: Any, name: str) -> int:
    """A chain position: a whole number (or its digits). JSON's 1e400 is read as infinity, whose
    int() ended verify in an OverflowError's traceback; 2.5 was taken as seq 2."""
    whole = type(value) is int or (type(value) is float and value.is_integer())
    try:
        if whole or type(value) is str:
            return int(value)
    except ValueError:
        pass
    raise EvidenceError(f"{name}: {_shown_start(value)} is not a whole number (a chain entry's seq)")


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
data/sound/part-*.csv  per-second sound levels, in chain order, in parts of
                 262144 rows; time_utc and time_local (site time, with offset)
data/*.csv       light/weather/... readings, in chain order
records/*.json   events, findings (every revision), alerts, sensor health,
                 calibration checks, rejected messages, notices, and the
                 config records: the profile and configuration in force
chain.csv        the chain segment the rows are checked against; the heads are
                 not written but recomputed from the rows and the entries,
                 and a sound entry whose row is here keeps only the first
                 8 hex digits of its digest (the row gives the digest); a
                 record outside the window, or not for the reader the bundle
                 was made for, is there as its digest alone
anchors.json     every chain head the monitor published for the site
plots/           one PNG per sensor and local day (drawings of the rows)
config.toml      the site's settings the findings depend on (an allow-list: no
                 secret, no other site) and profile/ the ordinance profile,
                 both named by the chain's config record
data/*_influxdb.csv  (if present) rows read from InfluxDB because the store had
                 pruned them: they are NOT covered by the chain

Without anchors held by the town, verification shows only that the bundle is
consistent with itself: whoever controls the store could rebuild a consistent
bundle. With them, rows up to the last head the town holds are proven; rows
chained after it are not yet anchored. See docs/EVIDENCE.md in the minewatch
sources.
"""


# README.txt's line of the sound parts, and what a bundle whose parts have the overload column
# (SOUND_OVERLOAD_COLUMNS) says below it; a bundle without the column has _README as it always was.
_README_SOUND_LINES = """\
data/sound/part-*.csv  per-second sound levels, in chain order, in parts of
                 262144 rows; time_utc and time_local (site time, with offset)
"""
_README_OVERLOAD = """\
                 overload (their last column, only where the window holds a
                 second the meter was overloaded in): 1 for such a second
                 (its input reached full scale, IEC 61672-1 5.11: its levels
                 read low, each is at least the value given, no proof that a
                 limit was kept), empty for the others
"""


def readme_text(overload: bool) -> str:
    """README.txt of a bundle of this format; ``overload``: its sound parts have the overload column."""
    if not overload:
        return _README
    head, _, tail = _README.partition(_README_SOUND_LINES)
    return head + _README_SOUND_LINES + _README_OVERLOAD + tail


# The README of format 3 bundles, word for word (verify compares it).
_README_3 = """\
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
data/sound/part-*.csv  per-second sound levels, in chain order, in parts of
                 262144 rows; time_utc and time_local (site time, with offset)
data/*.csv       light/weather/... readings, in chain order
records/*.json   events, findings (every revision), alerts, sensor health,
                 calibration checks, rejected messages, notices, and the
                 config records: the profile and configuration in force
chain.csv        the chain segment the rows are checked against; the heads are
                 not written but recomputed from the rows and the entries,
                 and a sound entry whose row is here keeps only the first
                 8 hex digits of its digest (the row gives the digest)
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


# The README of format 2 bundles, word for word (verify compares it).
_README_2 = """\
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
