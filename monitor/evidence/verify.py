"""Verify an evidence bundle: what a town runs.

Depends on the bundle format and the standard library's hashing only: no plotting, no
HTTP client, no numpy (tests/monitor/evidence/test_golden.py checks what it imports).
"""

from __future__ import annotations

import binascii
import csv
import hashlib
import io
import json
import re
import struct
import zipfile
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from monitor.csv_cells import exact_value
from monitor.evidence.format import (
    _MAX_LISTED,
    _OPTIONAL_FILES,
    _README,
    _README_1,
    _README_2,
    _README_3,
    _SINCE_FORMAT_2,
    ANCHORS_FILE,
    CHAIN_COLUMNS,
    CHAIN_COLUMNS_3,
    CHAIN_FILE,
    DIGEST_KIND_NOT_STATED,
    FORMAT,
    FORMAT_1,
    FORMAT_2,
    FORMAT_3,
    FORMATS,
    INFLUX_MEASUREMENT,
    JSON_CAP,
    MANIFEST,
    MAX_DIRECTORY,
    MAX_MEMBERS,
    MAX_RATIO,
    MEMBER_CAPS,
    PLOT_CAP,
    PROFILE_CAP,
    RATIO_FROM,
    READING_EXTRAS,
    RECORD_FILES,
    RECORD_KINDS,
    ROWS_SINCE,
    SOUND_COLUMNS,
    SOUND_FILE,
    SOUND_PART,
    SOUND_PARTS_FORMATS,
    Anchor,
    TimeFormat,
    TooLarge,
    _derived,
    _opt_float,
    _profile_file,
    _reading_extras,
    _reading_key,
    _Scope,
    _sound_key,
    bounded_lines,
    json_array_elements,
    reading_columns,
    reading_file,
    readme_text,
    site_agreement,
    sound_part,
)
from monitor.evidence.parts import (
    HashingReader,
    PartJob,
    PartResult,
    SoundRows,
    check_part,
    default_workers,
    part_results,
)
from monitor.evidence.progress import Progress
from monitor.journal.chain_kinds import (
    KINDS,
    SOUND_FIELDS,
    config_from_key,
    config_record,
    digest_of,
    next_head,
    reading_record,
    sound_record,
)
from monitor.shown_text import one_line
from monitor.times import FIRST_DAY, LAST_DAY
from monitor.wire.canonical import half_pair_at, to_us

# --------------------------------------------------------------------------- verify


@dataclass(frozen=True, slots=True)
class Problem:
    """One finding of verification. ``category``: bundle, file, row, order, config, chain, anchor or
    manifest (a count it states, or a readable form of its window, that the bundle contradicts)."""

    category: str
    message: str


# Most severe first. The manifest's counts last: a removed row or chain entry makes one differ too,
# and is the more telling of the two.
_RANK = {"bundle": 0, "file": 1, "row": 2, "order": 2, "config": 2, "chain": 3, "anchor": 4, "manifest": 5}


@dataclass(slots=True)
class Report:
    bundle: str
    problems: list[Problem] = field(default_factory=list)
    more_problems: int = 0  # beyond those listed
    format: str = ""
    files_checked: int = 0
    plots: int = 0  # drawings of the rows: hashed like every file, their pixels not compared with the rows
    rows_checked: dict[str, int] = field(default_factory=dict)
    chain_links: int = 0
    first_seq: int = 0
    last_seq: int = 0
    links_only: dict[str, int] = field(
        default_factory=dict
    )  # chain entries with no row in the bundle, by reason
    # Format 4: record entries carried as their digests alone (outside the window, or not for the
    # reader the bundle was made for), by kind; the links through them are recomputed all the same.
    digest_only: dict[str, int] = field(default_factory=dict)
    disclosure: str = ""  # whose view the manifest says the bundle was made for
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
        return self.ranked[0] if self.problems else None

    @property
    def ranked(self) -> list[Problem]:
        """The problems, the most severe first (in the order found within a rank): the first is
        the one the verdict names."""
        return sorted(self.problems, key=lambda p: _RANK.get(p.category, 9))

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
        """What to print, a line each; the bundle's own text (a forger's) as escapes where it
        could steer a terminal (monitor/shown_text.py)."""
        return [one_line(line) for line in self._lines()]

    def _lines(self) -> list[str]:
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
        if self.format == FORMAT_1:
            out.append(f"  format: {self.format} (earlier); {_OLD_FORMAT_GUARANTEES}")
        elif self.format == FORMAT_2:
            out.append(f"  format: {self.format} (earlier); {_FORMAT_2_GUARANTEES}")
        elif self.format == FORMAT_3:
            out.append(f"  format: {self.format} (earlier); {_FORMAT_3_GUARANTEES}")
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
        if self.plots:
            out.append(
                f"  plots: {self.plots} drawings of the rows, checked against the manifest's SHA-256 only;"
                " nothing compares their pixels with the rows, so read the values from data/"
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
        if self.digest_only:
            detail = ", ".join(f"{n} {kind}" for kind, n in sorted(self.digest_only.items()))
            out.append(
                f"  digest only: {sum(self.digest_only.values())} entries are present only as their digests"
                f" ({detail}): records outside the window or not for the reader the bundle was made for"
                f" (the manifest: {self.disclosure or 'not stated'}); the links through them are recomputed,"
                " their content is not in the bundle"
            )
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
            out.extend(f"    - [{p.category}] {p.message}" for p in self.ranked[:50])
            hidden = len(self.problems) - 50 + self.more_problems
            if hidden > 0:
                out.append(f"    ... and {hidden} more")
        return out


_FORMAT_2_GUARANTEES = (
    "the same checks and guarantees as the current format; its chain.csv states every digest and head,"
    " which are checked link by link"
)
_FORMAT_3_GUARANTEES = (
    "the same checks and guarantees as the current format; its config.toml is the configuration file"
    " chained then (secret values masked) and its records are every one of its chain segment"
)
_OLD_FORMAT_GUARANTEES = (
    "its rows, chain and anchors are checked as for the current format and its files must be those the"
    " format calls for, but its profile and configuration files are bound by nothing but the manifest"
    " (format 1 did not chain them)"
)


class _Hashed:
    """One zip member opened as text lines, hashed as it is read."""

    def __init__(self, zf: zipfile.ZipFile, name: str) -> None:
        self.name = name
        self._reader = HashingReader(zf.open(name))
        self._buffered = io.BufferedReader(self._reader, 1 << 20)
        self.text = io.TextIOWrapper(self._buffered, encoding="utf-8", newline="")
        self.rows = 0  # a CSV's lines after its header, a JSON array's elements, as read

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
    reader = csv.reader(bounded_lines(source.text, source.name))
    header = next(reader, None)
    if header is None or tuple(header) != tuple(columns):
        report.add("row", f"{source.name}: unexpected columns {header!r}; expected {list(columns)!r}")
        source.rows = sum(1 for _ in reader)
        return
    for line, cells in enumerate(reader, start=2):
        source.rows += 1
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
    spec = KINDS[kind]
    for line, text in enumerate(bounded_lines(source.text, source.name), start=1):
        text = text.strip().removesuffix(",")
        if text in ("[", "]", ""):
            continue
        source.rows += 1  # the exporter writes an element a line
        try:
            element = json.loads(text)
            _refuse_half_pairs(element, "")
            seq = int(element["chain_seq"])
            row = element["row"]
            record = spec.record(spec.stored_row(row))  # a BLOB carried as base64 is hashed here
        except (ValueError, TypeError, KeyError, binascii.Error) as exc:
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


def verify_bundle(
    path: str | Path,
    anchors: Sequence[Anchor] | None = None,
    *,
    workers: int | None = None,
    progress: Progress | None = None,
) -> Report:
    """Check a bundle; ``anchors`` are the heads the town holds (None: none given).

    ``workers``: processes checking format 3's sound parts (default: every core; 1 checks
    them in this process, with the same report). ``progress`` shows the chain entries walked.
    """
    report = Report(str(path), town_anchors_given=anchors is not None)
    try:
        members, directory_bytes = _zip_directory(path)
        if directory_bytes > MAX_DIRECTORY:
            report.add(
                "bundle",
                f"refused: the zip's list of members takes {directory_bytes:,} bytes,"
                f" more than {MAX_DIRECTORY:,}",
            )
            return report
        if members > MAX_MEMBERS:
            report.add("bundle", f"refused: the zip holds more than {MAX_MEMBERS:,} members")
            return report
        zf = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as exc:
        report.add("bundle", f"not a readable zip file: {exc}")
        return report
    with zf:
        twice = _named_twice(zf)
        if twice is not None:
            report.add(
                "bundle",
                f"refused: {twice} is in the zip more than once: which copy is the bundle's cannot be"
                " told (tools that unzip it differ)",
            )
            return report
        try:
            manifest = _manifest(zf)
            _refuse_half_pairs(manifest, f"{MANIFEST}: ")
            if manifest.get("format") not in FORMATS:
                found = manifest.get("format")
                raise ValueError(f"format {found!r}, this verifier reads {', '.join(map(repr, FORMATS))}")
            report.format = str(manifest["format"])
            _check_sizes(zf, manifest)
            verifier = _Verifier(zf, manifest, report, anchors)
            verifier.path = str(path)
            verifier.workers = workers if workers is not None else default_workers()
            verifier.progress = progress
            verifier.run()
        except TooLarge as exc:
            report.problems.clear()  # nothing else was (or could be) checked
            report.add("bundle", f"refused: {exc}: beyond the limits of a bundle (docs/EVIDENCE.md)")
        except KeyError as exc:
            report.add("bundle", f"not an evidence bundle: {_missing(exc)} is missing")
        except _UNREADABLE as exc:
            report.add("bundle", f"unreadable bundle: {exc}")
    return report


# What reading a damaged bundle raises. RuntimeError: an encrypted member, or an unknown
# compression method (NotImplementedError); zlib.error: deflated data that is not.
_UNREADABLE = (
    ValueError,
    TypeError,
    zipfile.BadZipFile,
    EOFError,
    OSError,
    csv.Error,
    RuntimeError,
    zlib.error,
)


def _manifest(zf: zipfile.ZipFile) -> dict[str, Any]:
    """manifest.json read; ValueError naming it when it is not a JSON object (json's own words
    named neither the file nor what was expected of it)."""
    data = _read_capped(zf, MANIFEST)  # TooLarge (a ValueError too) refuses the bundle as it says
    try:
        manifest = json.loads(data)
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
        raise ValueError(f"{MANIFEST} is not JSON ({exc})") from None
    if not isinstance(manifest, dict):
        raise ValueError(f"{MANIFEST} is not a JSON object")
    return manifest


# zipfile's KeyError for a member the zip does not hold: 'There is no item named %r in the archive'.
_NO_MEMBER = re.compile(r"There is no item named (.+) in the archive")


def _missing(exc: KeyError) -> str:
    """What is missing, as a KeyError names it: a member of the zip, or a key of the manifest."""
    key = exc.args[0] if exc.args else None
    if isinstance(key, str) and (member := _NO_MEMBER.fullmatch(key)):
        return member.group(1)  # already quoted as repr
    return repr(key)


def _named_twice(zf: zipfile.ZipFile) -> str | None:
    """A member name the zip holds more than once (zipfile reads the last, `unzip -n` the first)."""
    seen: set[str] = set()
    for info in zf.infolist():
        if info.filename in seen:
            return info.filename
        seen.add(info.filename)
    return None


# The times a manifest may name, in microseconds (monitor.times: FIRST_DAY to LAST_DAY, UTC).
_FIRST_US = to_us(datetime.combine(FIRST_DAY, datetime.min.time(), UTC))
_AFTER_LAST_US = to_us(datetime.combine(LAST_DAY + timedelta(days=1), datetime.min.time(), UTC))


def _manifest_time(value: Any, name: str) -> int:
    """A time of the manifest's window or scope (microseconds since 1970); ValueError naming it
    when it is none a record can carry: one of 10**30 ended in an OverflowError's traceback as the
    window was printed."""
    us = int(value)
    if not _FIRST_US <= us < _AFTER_LAST_US:
        raise ValueError(
            f"{MANIFEST}: {name}: {us} is not a time from {FIRST_DAY} to {LAST_DAY} (UTC, microseconds)"
        )
    return us


def _refuse_half_pairs(value: Any, name: str) -> None:
    """ValueError where parsed JSON holds a string that is not text (it could not be printed)."""
    found = half_pair_at(value)
    if found is not None:
        raise ValueError(f"{name}{found[0] or 'the value'}: {found[1]}")


def _zip_directory(path: str | Path) -> tuple[int, int]:
    """(members, bytes) of the zip's central directory, its entries counted one by one (up to
    MAX_MEMBERS + 1) before zipfile lists them: zipfile reads the whole directory by its size
    whatever member count the end record states, so a stated count bounds nothing (a directory of
    millions of entries under a count of 1 took gigabytes). A directory over MAX_DIRECTORY bytes
    is not read at all. (0, 0): no end record, not a zip (zipfile says so)."""
    with open(path, "rb") as f:
        size = f.seek(0, io.SEEK_END)
        start = max(0, size - (22 + 0xFFFF))
        f.seek(start)
        tail = f.read()
        at = tail.rfind(b"PK\x05\x06")
        if at < 0 or len(tail) < at + 22:
            return 0, 0
        directory_bytes = int.from_bytes(tail[at + 12 : at + 16], "little")
        directory_end = start + at
        locator = at - 20
        if locator >= 0 and tail[locator : locator + 4] == b"PK\x06\x07":  # zip64
            record_at = int.from_bytes(tail[locator + 8 : locator + 16], "little")
            f.seek(record_at)
            record = f.read(56)
            if record[:4] == b"PK\x06\x06" and len(record) == 56:
                directory_bytes = int.from_bytes(record[40:48], "little")
                directory_end = record_at
        if directory_bytes > MAX_DIRECTORY:
            return 0, directory_bytes
        f.seek(max(0, directory_end - directory_bytes))
        directory = f.read(directory_bytes)
    members = at = 0
    while members <= MAX_MEMBERS and directory[at : at + 4] == b"PK\x01\x02" and at + 46 <= len(directory):
        name, extra, comment = struct.unpack_from("<HHH", directory, at + 28)
        at += 46 + name + extra + comment
        members += 1
    return members, directory_bytes


def _member_cap(name: str) -> int | None:
    """The most a member may inflate to whatever the manifest says (None: what the manifest says)."""
    if name in MEMBER_CAPS:
        return MEMBER_CAPS[name]
    if name.startswith("profile/"):
        return PROFILE_CAP
    if name.startswith("records/") and name.endswith(".json"):
        return JSON_CAP
    if name.startswith("plots/"):
        return PLOT_CAP
    return None


def _refuse_size(info: zipfile.ZipInfo, cap: int | None) -> None:
    size = info.file_size
    if cap is not None and size > cap:
        raise TooLarge(f"{info.filename} inflates to {size:,} bytes, more than {cap:,}")
    if size > RATIO_FROM and size > MAX_RATIO * max(info.compress_size, 1):
        raise TooLarge(
            f"{info.filename} inflates {size // max(info.compress_size, 1):,} times its compressed size"
            f" ({size:,} bytes), more than {MAX_RATIO} times"
        )


def _read_capped(zf: zipfile.ZipFile, name: str) -> bytes:
    """A small member read whole, once its size is known to be within its cap."""
    info = zf.getinfo(name)
    cap = MEMBER_CAPS[name]
    _refuse_size(info, cap)
    with zf.open(info) as f:
        data = f.read(cap + 1)
    if len(data) > cap:
        raise TooLarge(f"{name} inflates to more than {cap:,} bytes")
    return data


def _check_sizes(zf: zipfile.ZipFile, manifest: Mapping[str, Any]) -> None:
    """Every member against the limits, before any is read: what it inflates to (its zip header,
    which bounds what zipfile hands out) against the manifest's size for it, a cap of its own and
    a ratio. Anything beyond them refuses the bundle (TooLarge)."""
    listed: dict[str, int] = {}
    for entry in manifest.get("files", []):
        if isinstance(entry, dict) and isinstance(entry.get("bytes"), int):
            listed[str(entry.get("name"))] = entry["bytes"]
    for info in zf.infolist():
        if info.is_dir() and info.file_size == 0:
            continue
        name = info.filename
        _refuse_size(info, _member_cap(name))
        # An edited member is a hash problem (reported as such); one far beyond its listed size is
        # not read at all.
        if name in listed and info.file_size > 2 * listed[name] + RATIO_FROM:
            raise TooLarge(
                f"{name} inflates to {info.file_size:,} bytes, the manifest lists {listed[name]:,}"
            )


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
            _manifest_time(window["from_us"], "window.from_us"),
            _manifest_time(window["to_us"], "window.to_us"),
            _manifest_time(scope["chained_from_us"], "scope.chained_from_us"),
            tuple(sensors) if sensors is not None else None,
        )
        self.hashes = {f["name"]: f["sha256"] for f in manifest["files"]}
        # Every SHA-256 the manifest states for a file (a file listed twice has two), and the ones
        # its members hash to.
        self.listed: dict[str, set[str]] = {}
        for f in manifest["files"]:
            self.listed.setdefault(f["name"], set()).add(f["sha256"])
        self.actual: dict[str, str] = {}
        self._last_ts, self._last_times = -1, ("", "")
        self.days: set[tuple[str, str, str]] = set()  # (plot measurement, sensor, local day) with rows
        self.sound_overload = False  # a sound part has the overload column (README.txt describes it)
        self.configs: list[tuple[int, dict[str, Any]]] = []  # config records of the segment
        self.files: dict[str, _RowFile] = {}
        # Rows (CSV lines after the header, JSON elements, chain entries, anchors) of each member
        # as read, and the anchors of anchors.json inside the segment: held against the manifest's
        # counts (_check_counts).
        self.counted: dict[str, int] = {}
        self.segment_anchors: int | None = None
        # anchors.json's elements inside the segment, by seq (None: not read): what the manifest's
        # anchors repeat, and where the segment ends (chain.extended_to_anchor).
        self.anchor_elements: dict[int, Mapping[str, Any]] | None = None
        # Per file read from InfluxDB: the first and last ts_us of its rows (the pruned part's times).
        self.influx_span: dict[str, tuple[int, int]] = {}
        self.rows_at_anchor = 0
        self.path = ""
        self.workers = 1
        self.progress: Progress | None = None
        self.sound: SoundRows | None = None  # format 3's sound rows
        self.hashed: set[str] = set()  # members hashed by the part workers
        self._labels: tuple[str, dict[int, str]] = ("", {})
        # The record kinds the manifest says the bundle discloses (format 4; ROWS_SINCE).
        self.disclosed_kinds: frozenset[str] = frozenset(RECORD_KINDS)

    def run(self) -> None:
        r = self.report
        s = self.scope
        sensors = ", ".join(s.sensors) if s.sensors is not None else "all sensors"
        disclosure = self.m.get("disclosure")
        if isinstance(disclosure, dict) and isinstance(disclosure.get("kinds"), list):
            self.disclosed_kinds = frozenset(map(str, disclosure["kinds"]))
        if isinstance(disclosure, dict):
            audiences = ", ".join(map(str, disclosure.get("alert_audiences", []))) or "none"
            r.disclosure = f"records of the window, alerts for {audiences}"
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
        for name in sorted(set(self.hashes) & names - set(opened) - self.hashed):
            sha = hashlib.sha256()
            with self.zf.open(name) as f:
                while chunk := f.read(1 << 20):
                    sha.update(chunk)
            self._check_hash(name, sha.hexdigest())
            if name.endswith("_influxdb.csv"):
                r.outside_chain_rows[name] = self.counted[name] = self._influx_days(name)
        r.files_checked = len(set(self.hashes) & names)
        r.plots = sum(1 for name in names if _PLOT.fullmatch(name))
        self._check_config(names)
        self._check_file_set(names)
        self.counted.update((name, source.rows) for name, source in opened.items())
        self._check_counts(names)
        self._check_statements(names)

    # ------------------------------------------------------------------ files

    def _check_hash(self, name: str, actual: str) -> None:
        self.actual[name] = actual
        if any(expected != actual for expected in self.listed.get(name, ())):
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
            reader = csv.reader(bounded_lines(io.TextIOWrapper(f, encoding="utf-8", newline=""), name))
            header = next(reader, [])
            try:
                sensor_at, local_at = header.index("sensor"), header.index("time_local")
            except ValueError:
                return 0
            ts_at = header.index("ts_us") if "ts_us" in header else None
            first: int | None = None
            last: int | None = None
            for cells in reader:
                rows += 1
                if len(cells) > max(sensor_at, local_at):
                    self.days.add((measurement, exact_value(cells[sensor_at]), cells[local_at][:10]))
                if ts_at is not None and len(cells) > ts_at and cells[ts_at].lstrip("-").isdigit():
                    ts = int(cells[ts_at])
                    first = ts if first is None else min(first, ts)
                    last = ts if last is None else max(last, ts)
            if first is not None and last is not None:
                self.influx_span[name] = (first, last)
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
            *(reading_file(kind) for kind in READING_EXTRAS),
            *RECORD_FILES.values(),
            self.profile_file,
        }
        if self.report.format == FORMAT_1:
            required -= _SINCE_FORMAT_2
        required -= _OPTIONAL_FILES - names  # held only when the segment chains such records
        if self.report.format in SOUND_PARTS_FORMATS:
            # the sound parts: numbered from 1 without a gap (the chain says whether rows are missing)
            count = max((int(m[1]) for n in names if (m := SOUND_PART.fullmatch(n))), default=1)
            required |= {sound_part(i) for i in range(1, count + 1)}
        else:
            required.add(SOUND_FILE)
        for name in sorted(required - names):
            r.add("file", f"file missing: {name} is part of every evidence bundle")
        influx = {f"data/{m}_influxdb.csv" for m in set(INFLUX_MEASUREMENT.values())}
        pruned = self.scope.chained_from_us > self.scope.from_us
        for name in sorted(names - required):
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
            readmes = {FORMAT: _README, FORMAT_3: _README_3, FORMAT_2: _README_2}
            texts = {readmes.get(self.report.format, _README_1)}
            if self.report.format == FORMAT and self.sound_overload:
                # It describes the overload column where the parts have it (a bundle exported
                # before the README did has the text without it, and verifies as it did).
                texts.add(readme_text(overload=True))
            readme = self.zf.read("README.txt")
            if readme == readme_text(overload=True).encode("utf-8") and not self.sound_overload:
                r.add(
                    "file",
                    "file changed: README.txt describes an overload column that no part of data/sound/ has",
                )
            elif readme not in {t.encode("utf-8") for t in texts}:
                r.add("file", "file changed: README.txt is not the text every bundle of its format holds")

    # ------------------------------------------------------------------ the manifest's counts

    def _check_counts(self, names: set[str]) -> None:
        """Every count the manifest states, and the readable forms of its window, against what the
        bundle holds and verify counted: an inspector reads the manifest, and no hash covers
        manifest.json (it lists every other file's SHA-256), so an edited count is caught here alone.
        """
        m, r, counted = self.m, self.report, self.counted
        differs, disagree = _differs, self._disagree

        for field_, name, stated in _stated_rows(m):
            if name in counted:
                if differs(stated, counted[name]):
                    disagree(field_, stated, f"{name} holds {counted[name]} {_UNITS.get(name, 'rows')}")
            elif name in names:
                disagree(field_, stated, f"{name} is no file of rows")
            elif name not in self.hashes:  # one listed there and missing is a file problem already
                disagree(field_, stated, f"the bundle holds no {name}")
        for entry in m.get("files", []):
            name = str(entry.get("name")) if isinstance(entry, dict) else ""
            if name in names and "bytes" in entry:
                size = self.zf.getinfo(name).file_size
                if differs(entry["bytes"], size):
                    disagree(f"files[{name}].bytes", entry["bytes"], f"{name} holds {size} bytes")
        chain = m["chain"]
        if isinstance(chain, dict) and "entries" in chain and CHAIN_FILE in counted:
            held = counted[CHAIN_FILE]
            if differs(chain["entries"], held):
                disagree("chain.entries", chain["entries"], f"{CHAIN_FILE} holds {held} entries")
        disclosure = m.get("disclosure")
        if (
            r.format == FORMAT
            and isinstance(disclosure, dict)
            and "digest_only" in disclosure
            and CHAIN_FILE in counted
        ):
            said, alone_by_kind = disclosure["digest_only"], r.digest_only
            alone = f"{CHAIN_FILE} holds {sum(alone_by_kind.values())} entries as their digests alone"
            if not isinstance(said, dict):
                disagree("disclosure.digest_only", said, alone)
            else:
                for kind in sorted({*map(str, said), *alone_by_kind}):
                    n = alone_by_kind.get(kind, 0)
                    if differs(said.get(kind, 0), n):
                        held_alone = f"{CHAIN_FILE} holds {n} entries as their digests alone ({kind})"
                        disagree(f"disclosure.digest_only[{kind}]", said.get(kind, 0), held_alone)
        listed = m.get("anchors")
        if isinstance(listed, list) and self.segment_anchors not in (None, len(listed)):
            r.add(
                "manifest",
                f"manifest not matching: its anchors lists {len(listed)} anchors, {ANCHORS_FILE} holds"
                f" {self.segment_anchors} inside the segment (seq {r.first_seq - 1} to {r.last_seq})",
            )
        for part in ("config", "profile"):  # their SHA-256 again, beside the file's entry
            stated_of = m.get(part)
            if isinstance(stated_of, dict) and "sha256" in stated_of:
                name = str(stated_of.get("file", "config.toml"))
                actual = self.actual.get(name)
                if actual is not None and differs(stated_of["sha256"], actual):
                    disagree(f"{part}.sha256", stated_of["sha256"], f"{name}'s SHA-256 is {actual}")
        if m.get("plots") is False and r.plots:
            disagree("plots", False, f"the bundle holds {r.plots} plots")
        window = m.get("window")
        if isinstance(window, dict):
            s = self.scope
            for field_, text in (
                ("from_utc", self.utc(s.from_us)),
                ("to_utc", self.utc(s.to_us)),
                ("from_local", self.local(s.from_us)),
                ("to_local", self.local(s.to_us)),
            ):
                if field_ in window and differs(window[field_], text):
                    edge = "from_us" if field_.startswith("from") else "to_us"
                    said_us = f"its window.{edge} ({window[edge]}) is {text}"
                    disagree(f"window.{field_}", window[field_], said_us)

    def _disagree(self, field_: str, stated: Any, held: str) -> None:
        """One line naming the manifest's field, what it says and what the bundle holds."""
        said = json.dumps(stated)
        said = said if len(said) <= 80 else said[:77] + "..."
        self.report.add("manifest", f"manifest not matching: its {field_} is {said}, {held}")

    def _check_statements(self, names: set[str]) -> None:
        """What the manifest says beside its counts, against what the bundle holds: its anchors'
        readable times and their elements in anchors.json, the anchor the segment was extended to,
        the pruned part's times, the config entry it names for config.toml and the profile, the
        files it names for them and the agreement it repeats. Like the counts, nothing but this
        check covers them (no hash covers manifest.json)."""
        self._check_anchor_statements()
        self._check_pruned_statements(names)
        self._check_config_statements(names)

    def _check_anchor_statements(self) -> None:
        m, elements = self.m, self.anchor_elements
        for anchor in m.get("anchors", []) if isinstance(m.get("anchors"), list) else ():
            if not isinstance(anchor, dict) or type(anchor.get("seq")) is not int:
                continue  # the anchors' seqs and heads are held to anchors.json already
            seq = anchor["seq"]
            if "published_utc" in anchor:
                published = self._utc_of(anchor.get("published_us"))
                if _differs(anchor["published_utc"], published):
                    said = json.dumps(anchor.get("published_us"))
                    self._disagree(
                        f"anchors[seq {seq}].published_utc",
                        anchor["published_utc"],
                        f"its published_us ({said}) is {published}",
                    )
            element = elements.get(seq) if elements is not None else None
            for field_ in ("site", "published_us"):
                if element is not None and field_ in anchor and anchor[field_] != element.get(field_):
                    held = json.dumps(element.get(field_))
                    self._disagree(
                        f"anchors[seq {seq}].{field_}",
                        anchor[field_],
                        f"{ANCHORS_FILE}'s anchor at seq {seq} has {held}",
                    )
        chain = m["chain"]
        if elements is None or not isinstance(chain, dict) or "extended_to_anchor" not in chain:
            return  # anchors.json unread: a file problem already
        r = self.report
        first, last = r.first_seq, r.last_seq
        stated = chain["extended_to_anchor"]
        if last < first:
            if stated is not None:
                self._disagree("chain.extended_to_anchor", stated, "the segment holds no entry")
        elif last in elements:
            if _differs(stated, last):
                self._disagree(
                    "chain.extended_to_anchor",
                    stated,
                    f"the segment ends at seq {last}, the anchor {ANCHORS_FILE} holds there",
                )
        elif stated is not None:
            self._disagree(
                "chain.extended_to_anchor",
                stated,
                f"the segment ends at seq {last}, where {ANCHORS_FILE} holds no anchor",
            )

    def _check_pruned_statements(self, names: set[str]) -> None:
        """pruned_locally: the part of the window before the chained rows (scope.chained_from_us),
        read from InfluxDB. Whether the store was in fact pruned then is not in the bundle."""
        m, s = self.m, self.scope
        if "pruned_locally" not in m:
            return
        pruned = m["pruned_locally"]
        read = sorted(n for n in names if n.endswith("_influxdb.csv"))
        if not isinstance(pruned, dict):
            if s.chained_from_us > s.from_us:
                self._disagree(
                    "pruned_locally",
                    pruned,
                    f"its scope.chained_from_us ({s.chained_from_us}) is after its window.from_us"
                    f" ({s.from_us}): the part before was pruned locally",
                )
            return
        if s.chained_from_us <= s.from_us:
            self._disagree(
                "pruned_locally",
                pruned,
                f"its scope.chained_from_us ({s.chained_from_us}) is not after its window.from_us"
                f" ({s.from_us}): no part of the window was pruned",
            )
            return
        edges = (
            ("from", s.from_us, f"its window.from_us is {s.from_us}"),
            ("to", s.chained_from_us, f"its scope.chained_from_us is {s.chained_from_us}"),
        )
        for edge, us, held in edges:
            if f"{edge}_us" in pruned and _differs(pruned[f"{edge}_us"], us):
                self._disagree(f"pruned_locally.{edge}_us", pruned[f"{edge}_us"], held)
            if f"{edge}_utc" in pruned and _differs(pruned[f"{edge}_utc"], self.utc(us)):
                self._disagree(f"pruned_locally.{edge}_utc", pruned[f"{edge}_utc"], f"{held}, {self.utc(us)}")
        for name in read:  # the rows read from InfluxDB lie in the part it says was pruned
            first, last = self.influx_span.get(name, (s.from_us, s.from_us))
            if first < s.from_us:
                said = pruned.get("from_us", s.from_us)
                self._disagree("pruned_locally.from_us", said, f"{name} holds a row at {first}, before it")
            if last >= s.chained_from_us:
                said = pruned.get("to_us", s.chained_from_us)
                self._disagree("pruned_locally.to_us", said, f"{name} holds a row at {last}, not before it")
        if pruned.get("read") is False and read:
            self._disagree("pruned_locally.read", False, f"the bundle holds {', '.join(read)}")
        rows = pruned.get("rows")
        if pruned.get("read") is True and isinstance(rows, dict):
            for name in read:
                if name not in rows:
                    self._disagree(
                        "pruned_locally.rows",
                        rows,
                        f"the bundle holds {name}, which it does not name",
                    )

    def _check_config_statements(self, names: set[str]) -> None:
        """The config entry the manifest names for config.toml and the profile, the files it names
        and the agreement it repeats, against the entry verify binds them by (the segment's first
        naming a profile) and config.toml."""
        m = self.m
        bound = next(iter(self._naming_profile()), None)
        binding = (
            f"config.toml and {_profile_file(str(bound[1]['profile']))} are bound by the config entry"
            f" at seq {bound[0]}, the segment's first naming a profile"
            if bound is not None
            else "the segment holds no config entry naming a profile"
        )
        for part in ("config", "profile"):
            stated = m.get(part)
            if not isinstance(stated, dict) or "chain_seq" not in stated:
                continue  # format 1 names none
            said = stated["chain_seq"]
            if (bound is None and said is not None) or (bound is not None and _differs(said, bound[0])):
                self._disagree(f"{part}.chain_seq", said, binding)
        for part, fixed, what in (
            ("config", "config.toml", "the configuration"),
            ("chain", CHAIN_FILE, "the chain"),
        ):
            stated = m.get(part)
            if isinstance(stated, dict) and "file" in stated and stated["file"] != fixed:
                self._disagree(f"{part}.file", stated["file"], f"{what} is {fixed} in every bundle")
        profile = m.get("profile")
        if not isinstance(profile, dict):
            return
        if bound is not None and "file" in profile:
            held = _profile_file(str(bound[1]["profile"]))
            if _differs(profile["file"], held):
                self._disagree("profile.file", profile["file"], f"the profile bound is {held} ({binding})")
        if "agreement" in profile and "config.toml" in names:
            text = self.zf.read("config.toml").decode("utf-8", errors="replace")  # its size is capped
            agreement = site_agreement(text, self.site)
            if agreement is None:
                self.report.notes.append(
                    "the manifest's profile.agreement cannot be checked: config.toml holds no site"
                    f" {self.site} this verifier can read"
                )
            elif profile["agreement"] != agreement:
                self._disagree(
                    "profile.agreement",
                    profile["agreement"],
                    f"config.toml gives site {self.site} the agreement {json.dumps(agreement)}",
                )

    def _utc_of(self, value: Any) -> str:
        """A time the manifest states in microseconds, as the exporter renders it (or why not)."""
        if type(value) is not int or not _FIRST_US <= value < _AFTER_LAST_US:
            return "no time"
        return self.utc(value)

    # ------------------------------------------------------------------ configuration

    def _naming_profile(self) -> list[tuple[int, dict[str, Any]]]:
        """The segment's config entries naming a profile, in order: the first binds config.toml and
        the profile; those after it are the changes in the window."""
        return [(seq, rec) for seq, rec in self.configs if "profile_sha256" in rec]

    @property
    def profile_file(self) -> str:
        entries = self._naming_profile()
        if entries:
            return _profile_file(str(entries[0][1]["profile"]))
        return str(self.m["profile"]["file"])

    def _check_config(self, names: set[str]) -> None:
        """The bundle's profile and configuration against the segment's config records."""
        r = self.report
        current = self._naming_profile()
        if not current:
            self._config_format_1(names)
            if r.format != FORMAT_1 and r.chain_links:
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
        # Format 4: a configuration chained as the whole file (before the allow-list) is not shipped;
        # config.toml is then its allow-list, which the manifest says and nothing binds.
        form = str(self.m.get("config", {}).get("form", "chained")) if r.format == FORMAT else "chained"
        unbound = ""
        for name, digest in stated.items():
            if name not in names:
                continue  # reported as missing
            cap = MEMBER_CAPS["config.toml"] if name == "config.toml" else PROFILE_CAP
            if _sha256_of(self.zf, name, cap) != digest:
                if name == "config.toml" and form in ("extract", "current"):
                    unbound = (
                        "the allow-list of the configuration chained then, which held settings a bundle does"
                        " not disclose"
                        if form == "extract"
                        else "the allow-list of the configuration at export time"
                    )
                    continue
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
        settings = "the site's allow-list" if r.format == FORMAT else "secrets left out"
        files = (
            f"{profile_file} is that file; config.toml is not bound by the chain: it is {unbound}"
            if unbound
            else f"{profile_file} and config.toml are those files"
        )
        proven = ""
        if r.town_anchors_given:
            anchored = r.anchored_to is not None and r.anchored_to >= seq
            proven = " (anchored)" if anchored else " (not yet anchored: internal consistency only)"
        # How far the record is proven: after the files it names, or after the record where
        # config.toml is not one of them.
        r.config = (
            f"profile {record['profile']} {str(record['profile_sha256'])[:12]} and configuration"
            f" {str(record['config_sha256'])[:12]} ({settings}), recorded at {since} and in force for"
            " every record judged after it,"
            + (
                f" chained at seq {seq}{proven}: {files}"
                if unbound
                else f" chained at seq {seq}: {files}{proven}"
            )
        )
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
        config_sha = _sha256_of(self.zf, "config.toml", MEMBER_CAPS["config.toml"])
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
            "site": exact_value(cells[1]),
            "sensor": exact_value(cells[2]),
            "ts_us": ts,
            "duration_s": float(cells[6]),
            "source": exact_value(cells[-1]),
        }
        for name, text in zip(SOUND_FIELDS, cells[7:-1], strict=True):
            row[name] = _opt_float(text)
        self.days.add(("sound", row["sensor"], cells[5][:10]))
        return sound_record(row), f"sensor {cells[2]} at {cells[4]}"

    def _reading_rebuild(self, kind: str) -> Callable[[list[str]], tuple[dict[str, Any], str]]:
        extras = len(READING_EXTRAS[kind])

        def rebuild(cells: list[str]) -> tuple[dict[str, Any], str]:
            ts = int(cells[4])
            if (cells[5], cells[6]) != self._times(ts):
                raise ValueError(f"time_utc/time_local {cells[5]!r}/{cells[6]!r} do not match ts_us {ts}")
            # Text cells are read back exactly (the exporter marks one a spreadsheet would run).
            data = exact_value(cells[-1])
            if [exact_value(c) for c in cells[8 : 8 + extras]] != _reading_extras(kind, data):
                raise ValueError(f"columns {', '.join(READING_EXTRAS[kind])} do not match its data")
            sensor = exact_value(cells[2])
            row = {
                "site": exact_value(cells[1]),
                "sensor": sensor,
                "kind": exact_value(cells[3]),
                "ts_us": ts,
                "duration_s": float(cells[7]),
                "data": data,
            }
            if kind == "light":
                self.days.add(("light", sensor, cells[6][:10]))
            return reading_record(row), f"{kind} {cells[2]} at {cells[5]}"

        return rebuild

    def _bundle_anchors(self, names: set[str], first: int, last: int) -> list[tuple[int, str]]:
        """The daemon's anchors inside the segment: anchors.json, which the manifest must repeat."""
        listed = {(int(a["seq"]), str(a["head"])) for a in self.m.get("anchors", [])}
        if ANCHORS_FILE not in names:
            return sorted(listed)
        elements = 0
        within: list[tuple[int, str]] = []
        kept: dict[int, Mapping[str, Any]] = {}
        try:
            for seq, head, element in self._anchors_file():
                elements += 1
                if "published_utc" in element:  # its readable time, as the exporter renders it
                    published = self._utc_of(element.get("published_us"))
                    if _differs(element["published_utc"], published):
                        self.report.add(
                            "anchor",
                            f"anchor not matching: {ANCHORS_FILE}'s anchor at seq {seq} says published_utc"
                            f" {json.dumps(element['published_utc'])}, its published_us"
                            f" ({json.dumps(element.get('published_us'))}) is {published}",
                        )
                if first - 1 <= seq <= last:
                    within.append((seq, head))
                    kept[seq] = element
        except TooLarge:
            raise
        except (ValueError, TypeError, KeyError):
            self.report.add("file", f"{ANCHORS_FILE} is not a list of anchors")
            return sorted(listed)
        self.counted[ANCHORS_FILE], self.segment_anchors = elements, len(within)
        self.anchor_elements = kept
        inside = set(within)
        if inside != listed:
            self.report.add(
                "anchor", f"the manifest's anchors are not those of {ANCHORS_FILE} inside the segment"
            )
        return sorted(inside | listed)

    def _anchors_file(self) -> Iterator[tuple[int, str, Mapping[str, Any]]]:
        """anchors.json's (seq, head, element)s, streamed: a site's anchors grow by 35,000 a year."""
        with self.zf.open(ANCHORS_FILE) as f:
            for anchor in json_array_elements(io.TextIOWrapper(f, encoding="utf-8"), ANCHORS_FILE):
                yield int(anchor["seq"]), str(anchor["head"]), anchor

    def _walk(self, opened: dict[str, _Hashed], names: set[str]) -> None:
        r = self.report
        files = self.files
        if r.format in SOUND_PARTS_FORMATS:
            self.sound = self._sound_parts(names)
        else:
            source = self._open(opened, names, SOUND_FILE)
            if source is not None:
                files["sound"] = _RowFile(
                    SOUND_FILE, _csv_rows(source, SOUND_COLUMNS, self._sound_rebuild, r), r
                )
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
            if self.sound is not None:
                self.sound.finish()  # its parts are still read and hashed
            for rows in files.values():  # and the other files' rows read (counted), with none to match
                for _ in rows.rows:
                    pass
            return
        if self.progress is not None:
            self.progress.start(max(0, last - first + 1))
        reader = _counted(csv.reader(bounded_lines(source.text, CHAIN_FILE)), source)
        if r.format in SOUND_PARTS_FORMATS:
            expected_seq, walked = self._chain_3(reader, files, wanted, head)
            if walked is not None:
                head = walked
            elif last >= first:
                head = str(chain["last_head"])  # not recomputable: a row problem says why
        else:
            expected_seq, head = self._chain_2(reader, files, wanted, head)
        if expected_seq != last + 1:
            r.add("chain", f"chain segment ends at seq {expected_seq - 1}; the manifest says {last}")
        if last >= first and head != chain["last_head"]:
            r.add("chain", "chain broken: the last head differs from the manifest's")
        if self.sound is not None:
            self.sound.finish()
            r.rows_checked[self.sound.name] = self.sound.checked
        for rows in files.values():
            rows.finish()
            r.rows_checked[rows.name] = rows.checked
        r.unanchored_rows = self._rows_checked() - self.rows_at_anchor
        if self.progress is not None:
            self.progress.finish()
        for seq in sorted(s for s in wanted if not first - 1 <= s <= last):
            for who, _ in wanted[seq]:
                if who == "bundle":
                    r.add("anchor", f"the manifest lists an anchor at seq {seq}, outside its own segment")
        self._coverage(first, last)

    def _rows_checked(self) -> int:
        return sum(f.checked for f in self.files.values()) + (self.sound.checked if self.sound else 0)

    def _chain_2(
        self,
        reader: Iterator[list[str]],
        files: Mapping[str, _RowFile],
        wanted: Mapping[int, list[tuple[str, str]]],
        head: str,
    ) -> tuple[int, str]:
        """Formats 1 and 2: chain.csv states every digest and head; each link is checked."""
        r = self.report
        if next(reader, None) != list(CHAIN_COLUMNS):
            r.add("chain", f"{CHAIN_FILE}: unexpected columns")
        expected_seq = r.first_seq
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
            if self.progress is not None and not line & 0xFFFF:
                self.progress.update(r.chain_links)
        return expected_seq, head

    def _chain_3(
        self,
        reader: Iterator[list[str]],
        files: Mapping[str, _RowFile],
        wanted: Mapping[int, list[tuple[str, str]]],
        head: str,
    ) -> tuple[int, str | None]:
        """Format 3: the heads are recomputed, from the rows' digests where the chain keeps a tag.

        Where a digest cannot be known (a row altered, missing or out of place: reported as
        such), the walk goes on from the next head the bundle records (its anchors), so that
        one such row is one problem; town-held heads are compared only with recomputed heads.
        """
        r = self.report
        if next(reader, None) != list(CHAIN_COLUMNS_3):
            r.add("chain", f"{CHAIN_FILE}: unexpected columns")
        sound = self.sound
        assert sound is not None
        expected_seq = r.first_seq
        known: str | None = head
        since = r.first_seq - 1  # the last seq whose head was known from the bundle's statements
        progress = self.progress
        for line, cells in enumerate(reader, start=2):
            try:
                seq_text, kind, key, digest, _ = cells
                seq = int(seq_text)
            except ValueError:
                r.add("chain", f"{CHAIN_FILE} line {line} is malformed")
                known = None
                continue
            if seq != expected_seq:
                r.add(
                    "chain",
                    f"chain broken: {CHAIN_FILE} line {line} has seq {seq} where {expected_seq} follows",
                )
            expected_seq = seq + 1
            r.chain_links += 1
            full: str | None
            if kind == "sound" and not key:
                full = sound.expect(seq, digest)
            elif not key and r.format == FORMAT and (kind in RECORD_KINDS or not kind) and len(digest) == 64:
                full = digest  # a record the bundle does not disclose: its link, not its row
                named = kind or DIGEST_KIND_NOT_STATED  # a time-scoped reader's bundle names none
                r.digest_only[named] = r.digest_only.get(named, 0) + 1
            else:
                full = digest
                if len(digest) != 64:
                    r.add("chain", f"chain entry seq {seq}: {digest!r} is not a SHA-256 digest")
                    full = None
                self._route(files, seq, kind, key, digest)
            known = next_head(known, full) if known is not None and full is not None else None
            for who, expected in wanted.get(seq, ()):
                if who == "town":
                    if known is not None:
                        self._anchor_check({seq: [(who, expected)]}, seq, known)
                    continue
                r.bundle_anchors += 1
                if known is None:
                    known = expected  # go on from the head the bundle records here
                elif known != expected:
                    r.add(
                        "chain",
                        f"chain broken between seq {since + 1} and {seq}: the rows and entries there do"
                        f" not lead to the head the bundle records at seq {seq} (a row changed together"
                        " with its tag in chain.csv, or an entry changed)",
                    )
                    known = expected
                since = seq
            if progress is not None and not line & 0xFFFF:
                progress.update(r.chain_links)
        return expected_seq, known

    def _sound_parts(self, names: set[str]) -> SoundRows:
        """Format 3's sound parts, checked by worker processes, met in chain order."""
        parts = sorted(n for n in names if SOUND_PART.fullmatch(n))
        s = self.scope
        jobs = [
            PartJob(
                self.path, name, str(self.zone), (s.site, s.from_us, s.to_us, s.chained_from_us, s.sensors)
            )
            for name in parts
        ]
        self.hashed.update(parts)

        def on_part(part: PartResult) -> None:
            self._check_hash(part.name, part.sha256)
            for message in part.problems:
                self.report.add("row", message)
            self.days.update(("sound", sensor, day) for sensor, day in part.days)
            self.sound_overload |= part.overload
            self.counted[part.name] = part.rows

        def canonical(name: str) -> PartResult:
            job = next(j for j in jobs if j.name == name)
            return check_part(replace(job, canonical=True))

        return SoundRows(part_results(jobs, self.workers), self.report.add, on_part, self._label, canonical)

    def _label(self, name: str, line: int) -> str:
        """'sensor n1 at <time>' of a sound part's line (read again: only for rows with a problem)."""
        if self._labels[0] != name:
            labels: dict[int, str] = {}
            with self.zf.open(name) as f:
                text = io.TextIOWrapper(f, encoding="utf-8", newline="")
                reader = csv.reader(bounded_lines(text, name))
                for number, cells in enumerate(reader, start=1):
                    if len(cells) > 4:
                        labels[number] = f"sensor {exact_value(cells[2])} at {cells[4]}"
            self._labels = (name, labels)
        return self._labels[1].get(line, "")

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
                    self.rows_at_anchor = self._rows_checked()
            else:
                self.report.add(
                    "anchor",
                    f"anchor not matching: the town holds head {expected[:16]}... for seq"
                    f" {seq}, the bundle's chain has {head[:16]}... there: the record was"
                    " rewritten after that head was published",
                )

    def _route(self, files: Mapping[str, _RowFile], seq: int, kind: str, key: str, digest: str) -> None:
        r = self.report
        key = exact_value(key)  # a key a spreadsheet would run is written marked (csv_cells.inert_exact)
        target: _RowFile | None = None
        if kind == "sound":
            parsed = _sound_key(key)
            if parsed is None:
                r.add("chain", f"chain entry seq {seq}: malformed sound key {key!r}")
                return
            if not self.scope.holds(*parsed):
                self._links_only("per-second rows outside the window/sensors", seq)
                return
            if self.report.format in SOUND_PARTS_FORMATS:  # its row would be in a part, its entry a tag
                r.add(
                    "row", f"row removed: chain seq {seq} ({key}) belongs in data/sound/ but has no row there"
                )
                return
            target = files.get("sound")
            name = SOUND_FILE
        elif kind == "reading":
            reading = _reading_key(key)
            if reading is None:
                r.add("chain", f"chain entry seq {seq}: malformed reading key {key!r}")
                return
            if reading[1] not in READING_EXTRAS:  # seismograph summaries: their waveforms are rows
                self._links_only(f"{reading[1]} readings (chain links only)", seq)
                return
            if not self.scope.holds(reading[0], reading[2]):
                self._links_only("per-second rows outside the window/sensors", seq)
                return
            target = files.get(f"reading:{reading[1]}")
            name = reading_file(reading[1])
        elif kind in ROWS_SINCE and self.report.format == FORMAT and kind not in self.disclosed_kinds:
            self._links_only(ROWS_SINCE[kind], seq)
            return
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


# What the manifest's rows of a member count, where they are not rows.
_UNITS = {CHAIN_FILE: "entries", ANCHORS_FILE: "anchors"}


def _differs(stated: Any, held: int | str) -> bool:
    """Whether the manifest's value is not the bundle's: a count neither 24.0 nor "24" nor true."""
    if isinstance(held, str):
        return bool(stated != held)
    return type(stated) is not int or stated != held


def _stated_rows(manifest: Mapping[str, Any]) -> Iterator[tuple[str, str, Any]]:
    """(the manifest's field, the member, the rows it states) for every row count it states: a file
    entry's, the summary's (rows) and the pruned part's (pruned_locally.rows)."""
    for entry in manifest.get("files", []):
        if isinstance(entry, dict) and "rows" in entry:
            name = str(entry.get("name"))
            yield f"files[{name}].rows", name, entry["rows"]
    for field_, counts in (("rows", manifest.get("rows")), ("pruned_locally.rows", _rows_read(manifest))):
        if isinstance(counts, dict):
            for name, rows in counts.items():
                yield f"{field_}[{name}]", str(name), rows


def _rows_read(manifest: Mapping[str, Any]) -> Any:
    pruned = manifest.get("pruned_locally")
    return pruned.get("rows") if isinstance(pruned, dict) else None


def _counted(rows: Iterator[list[str]], source: _Hashed) -> Iterator[list[str]]:
    """A CSV member's lines as they come, those after the header counted in ``source.rows``."""
    for number, row in enumerate(rows):
        source.rows = number
        yield row


def _sha256_of(zf: zipfile.ZipFile, name: str, cap: int) -> str:
    """SHA-256 of a member, read streaming (its size was checked against ``cap`` up front)."""
    sha = hashlib.sha256()
    read = 0
    with zf.open(name) as f:
        while chunk := f.read(1 << 20):
            read += len(chunk)
            if read > cap:
                raise TooLarge(f"{name} inflates to more than {cap:,} bytes")
            sha.update(chunk)
    return sha.hexdigest()


def _parse_us(text: str) -> int | None:
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return to_us(parsed) if parsed.tzinfo is not None else None
