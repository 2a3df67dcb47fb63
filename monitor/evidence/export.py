"""Export a window of the store as an evidence bundle (see monitor/evidence/__init__.py)."""

from __future__ import annotations

import bisect
import contextlib
import csv
import hashlib
import importlib.metadata
import io
import itertools
import json
import os
import queue
import sqlite3
import tempfile
import threading
import weakref
import zipfile
import zlib
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import orjson

try:
    from isal import isal_zlib as _isal
except ImportError:  # a platform without its wheel: zlib deflates
    _isal = None  # type: ignore[assignment]

from monitor.config import Config, SiteConfig, parse_config
from monitor.csv_cells import FORMULA_START, MARK, inert_exact
from monitor.errors import ConfigError, OutputError, StoreError
from monitor.evidence.disclosure import TOWN_VIEW, Disclosure
from monitor.evidence.format import (
    _FLUSH_BYTES,
    ANCHORS_FILE,
    CHAIN_COLUMNS_3,
    CHAIN_FILE,
    COMPRESS_LEVEL,
    DIGEST_KIND_NOT_STATED,
    FORMAT,
    INFLUX_MEASUREMENT,
    MANIFEST,
    OPTIONAL_RECORD_KINDS,
    READING_EXTRAS,
    RECORD_FILES,
    RECORD_KINDS,
    SOUND_COLUMNS,
    SOUND_OVERLOAD_COLUMNS,
    SOUND_PART_ROWS,
    TAG_HEX,
    EvidenceError,
    TimeFormat,
    _cell,
    _derived,
    _profile_file,
    _reading_extras,
    _Scope,
    reading_columns,
    reading_file,
    readme_text,
    site_agreement,
    sound_part,
)
from monitor.evidence.parts import default_workers, forking_is_safe, leave_interrupts_to_parent, ordered_map
from monitor.evidence.progress import Progress
from monitor.influx.client import InfluxReader, SeriesRead
from monitor.influx.schema import MEASUREMENTS
from monitor.journal import segment
from monitor.journal.chain_kinds import (
    GENESIS,
    KINDS,
    SOUND_FIELDS,
    config_from_key,
    config_record,
)
from monitor.journal.config_record import config_record_texts, site_config_text
from monitor.unfinished import unfinished_file
from monitor.wire.canonical import to_us

# --------------------------------------------------------------------------- export


class _Member:
    """A zip member being written; bytes are hashed and counted on their way in.

    ``threaded``: deflate, CRC and SHA-256 (which release the interpreter lock) run in a thread
    of their own, on the other core, while this one builds the next rows.
    """

    def __init__(
        self, zf: zipfile.ZipFile, name: str, files: list[dict[str, Any]], *, threaded: bool = False
    ) -> None:
        self.name = name
        self._sha = hashlib.sha256()
        self._size = 0
        self._files = files
        self._text = io.StringIO()
        self.rows = 0
        self._queue: queue.Queue[bytes | memoryview | None] | None = None
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._zip = zf
        # Listed as soon as it is open, and with all it has set: what abandon_members finds (a
        # Ctrl-C may land on any line) it can abandon.
        self._raw = zf.open(name, "w", force_zip64=True)
        with _OPEN_LOCK:
            _OPEN_MEMBERS.setdefault(self._zip, set()).add(self)
        _deflate_with_isal(self._raw)
        if threaded:
            self._queue = queue.Queue(maxsize=8)
            self._thread = threading.Thread(target=self._drain, name=f"zip {name}", daemon=True)
            self._thread.start()

    def _drain(self) -> None:
        assert self._queue is not None
        while (data := self._queue.get()) is not None:
            if self._error is None:
                try:
                    self._sha.update(data)
                    self._raw.write(data)
                except BaseException as exc:  # raised again in close(), in the exporting thread
                    self._error = exc

    def write(self, data: bytes | memoryview) -> None:
        self._size += len(data)
        if self._queue is not None:
            if self._error is not None:
                raise self._error
            self._queue.put(data)
            return
        self._sha.update(data)
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
        if self._queue is not None and self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            if self._error is not None:
                raise self._error
        self._raw.close()
        self._forget()
        self._files.append({"name": self.name, "sha256": self._sha.hexdigest(), "bytes": self._size, **extra})

    def abandon(self) -> None:
        """Stop writing (the export failed or was interrupted): its thread ends and its handle
        closes, so that the zip can close on the way out; what it holds is thrown away."""
        if self._queue is not None and self._thread is not None and self._thread.is_alive():
            self._error = self._error or EvidenceError("abandoned")  # the thread writes no more
            self._queue.put(None)
            self._thread.join(timeout=30)
        with contextlib.suppress(Exception):
            self._raw.close()
        self._forget()

    def _forget(self) -> None:
        with _OPEN_LOCK:
            members = _OPEN_MEMBERS.get(self._zip)
            if members is not None:
                members.discard(self)
                if not members:
                    del _OPEN_MEMBERS[self._zip]


# The members being written, by their zip (the object, not its id, which a later zip may be given
# once this one is gone): what a failed export abandons (abandon_members).
_OPEN_MEMBERS: weakref.WeakKeyDictionary[zipfile.ZipFile, set[_Member]] = weakref.WeakKeyDictionary()
_OPEN_LOCK = threading.Lock()


def abandon_members(zf: zipfile.ZipFile) -> None:
    """Abandon the members of ``zf`` still being written. zipfile cannot close a zip while one is
    open: a Ctrl-C mid-row turned into "ValueError: Can't close the ZIP file while there is an
    open writing handle" and a traceback, in place of the interruption."""
    with _OPEN_LOCK:
        members = list(_OPEN_MEMBERS.get(zf, ()))
    for member in members:
        member.abandon()


_ZLIB_COMPRESSOR = type(zlib.compressobj())  # what zipfile deflates with


def _deflate_with_isal(member: Any) -> None:
    """Deflate a zip member being written with ISA-L instead of zlib: the same format (any
    unzip, and verify, read it), ~3 x zlib's speed at level 1 and a smaller output (a month's
    sound rows: 290 against 99 MB/s, 27 % against 30 % of the text; chain lines 308 against 71
    MB/s). Deflating was the exporter's largest share of CPU. zipfile takes no compressor: its
    own (a zlib compressobj, the same private attribute since Python 3.6) is swapped before
    anything is written; zipfile still counts the sizes and the CRC. Without isal, or with a
    zipfile made otherwise, the member is deflated by zlib as before."""
    if _isal is None or getattr(member, "_file_size", None) != 0:
        return
    if type(getattr(member, "_compressor", None)) is _ZLIB_COMPRESSOR:
        member._compressor = _isal.compressobj(COMPRESS_LEVEL, _isal.DEFLATED, -15)


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
    # The window exported, [start, end) in UTC: records outside it are in the bundle as digests only.
    window: tuple[datetime, datetime]
    digest_only: dict[str, int]  # chain entries carried as their digests alone, by kind


def _open_store(path: str, config: str = "FILE") -> sqlite3.Connection:
    if not Path(path).is_file():
        raise EvidenceError(f"no store at {path!r} (storage.path in the configuration)")
    try:
        return segment.open_read_only(path, config)
    except StoreError as exc:
        raise EvidenceError(str(exc)) from None


def _chained_config_text(kept: str, site_id: str) -> tuple[str, str]:
    """(text to ship, form) for a configuration text an earlier minewatch chained.

    Before the allow-list the whole file was chained (secrets masked by a deny-list). A kept text
    that is its own allow-list is shipped as chained ("chained"); any other is never shipped:
    the bundle holds the allow-list derived from it ("extract"), which the chain cannot bind, or,
    when that text no longer parses, today's allow-list ("current").
    """
    try:
        earlier = parse_config(kept, secrets="defer", profiles=False)
    except ConfigError:
        return "", "current"
    site = earlier.site(site_id)
    if site is None:
        return "", "current"
    extract = site_config_text(earlier, site)
    return extract, "chained" if extract == kept else "extract"


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
    progress: Progress | None = None,
    disclosure: Disclosure = TOWN_VIEW,
) -> ExportSummary:
    """Write the evidence bundle for ``site_id`` over [start, end) to ``out`` (a zip file).

    ``disclosure``: the records the reader may see (default: the Town's and its inspectors'
    view); records outside [start, end) or not for the reader are carried as digests only.
    With ``overwrite`` false an existing ``out`` is left alone (EvidenceError), checked
    again at the very end so that a file created meanwhile is not replaced either.
    ``progress`` (``Progress.on_terminal``) shows the rows written so far.
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
    conn = _open_store(config.storage.path, config.source or "FILE")
    try:
        # One read transaction: every pass sees the same snapshot while the daemon goes on appending.
        conn.execute("BEGIN")
        pruned_us = segment.pruned_before_us(conn)
        start_us, end_us = to_us(start), to_us(end)
        # Pruning sets its cut-off whether or not there was anything to remove: the part of the
        # window before the site's first record was never in the store, not pruned from it.
        began = segment.first_recorded_us(conn, site.id)
        if began is None or began >= min(pruned_us, end_us):
            pruned_us = 0
        scope = _Scope(
            site.id,
            start_us,
            end_us,
            max(start_us, min(pruned_us, end_us)),
            tuple(dict.fromkeys(sensors)) if sensors else None,
        )
        with contextlib.ExitStack() as stack:
            try:
                handle = stack.enter_context(unfinished_file(partial))
            except FileExistsError:
                raise EvidenceError(
                    f"{str(partial)!r} exists: another export to {str(out)!r} is running, or one was"
                    " cut short; remove it once none is running, or choose another name"
                ) from None
            except OSError as exc:
                raise EvidenceError(f"cannot write {str(out)!r}: {exc.strerror or exc}") from None
            zf = zipfile.ZipFile(
                handle, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=COMPRESS_LEVEL, allowZip64=True
            )
            try:
                exporter = _Exporter(
                    conn, zf, config, site, scope, zone, now or datetime.now(UTC), disclosure, progress
                )
                summary = exporter.run(plots)
            except BaseException:
                # Nothing of this zip is kept (the partial goes), so what closing it finds (a
                # member cut mid-row) is not news: the first exception is the one that tells.
                with contextlib.suppress(Exception):
                    abandon_members(zf)
                with contextlib.suppress(Exception):
                    zf.close()
                raise
            zf.close()
            _publish(partial, out, overwrite)
    finally:
        conn.close()
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
        disclosure: Disclosure,
        progress: Progress | None = None,
    ) -> None:
        self.disclosure = disclosure
        self.withheld: dict[str, list[int]] = {}  # kind -> seqs carried as digests only (_withhold)
        self.not_shown: dict[str, set[int]] = {}  # of those, the ones Disclosure.shows leaves out
        self.progress = progress
        self.done = 0  # rows and chain entries written, for the progress line
        self.missing_sound: set[int] = set()  # sound chain entries of the window without a row
        self.unnamed = 0  # entries keyed by time outside the window, as digests alone (_unnamed_outside)
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
        self.overload = False  # the sound parts have the overload column (_sound), README says so

    # ------------------------------------------------------------------ the segment

    def _bounds(self) -> tuple[int, int] | None:
        """Lowest and highest chain seq of any record that belongs to the window."""
        lows: list[int] = []
        highs: list[int] = []
        unchained = 0

        def take(span: segment.Span) -> None:
            nonlocal unchained
            if span.first_seq is not None and span.last_seq is not None:
                lows.append(span.first_seq)
                highs.append(span.last_seq)
            unchained += span.rows - span.chained

        take(segment.sound_span(self.conn, self.scope))
        take(segment.reading_span(self.conn, self.scope))
        for kind in RECORD_KINDS:
            if segment.has_kind_table(self.conn, kind):
                take(segment.record_span(self.conn, kind, self.scope))
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
        before = segment.last_anchor_before(self.conn, site, lo)
        first = before + 1 if before is not None else lo
        # ... and to the record of the profile and configuration in force (the daemon restates
        # it right after each anchor, so this is normally ``first`` itself),
        config = segment.last_config_entry(self.conn, site, first)
        if config is not None:
            first = config
        else:
            self.warnings.append(
                "the store holds no record of the profile and configuration in force before this"
                " window (written by an earlier minewatch): the bundle cannot prove which profile applied"
            )
        # ... and on to the first anchor published after the window that covers the last record,
        # or failing that any later anchor: a tail after the last anchor is proven by nothing.
        after = segment.first_anchor_published(self.conn, site, hi, self.scope.to_us)
        if after is None:
            after = segment.first_anchor_from(self.conn, site, hi)
        if after is None:
            self.warnings.append(
                f"no anchor has been published since the window's last record (seq {hi}): records"
                " after the last anchor are not yet anchored; export again after the next anchor"
            )
        last = after if after is not None else hi
        prev = segment.head_at(self.conn, site, first - 1)
        return first, last, GENESIS if prev is None else prev, after

    # ------------------------------------------------------------------ members

    def run(self, plots: bool) -> ExportSummary:
        first, last, prev_head, anchored_to = self._segment()
        self.plots = plots
        self._withhold(first, last)
        # Plots of a window read wholly from the store are drawn meanwhile by another process.
        started = self._start_plots() if plots and self.scope.chained_from_us <= self.scope.from_us else None
        if self.progress is not None:
            self.progress.start(max(0, last - first + 1))  # the chain entries walked
        self._sound(first, last)
        for kind in READING_EXTRAS:
            self._readings(kind, first, last)
        exported = {kind: self._records(kind, first, last) for kind in RECORD_KINDS}
        counts, configs, last_head = self._chain(first, last)
        if self.progress is not None:
            self.progress.finish()
        exported["config"] = self._configs(configs)
        for kind, n in exported.items():
            if counts.get(kind, 0) - len(self.withheld.get(kind, ())) > n:
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
            self._plots(started)
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
            window=(_utc(self.scope.from_us), _utc(self.scope.to_us)),
            digest_only=self._digest_only(),
        )

    # ------------------------------------------------------------------ disclosure

    def _withhold(self, first: int, last: int) -> None:
        """The segment's record entries the reader does not see: chain.csv carries their digests only."""
        for kind in RECORD_KINDS:
            if not segment.has_kind_table(self.conn, kind):
                continue
            seqs = segment.withheld_seqs(self.conn, kind, self.scope, self.disclosure, first, last)
            hidden = self._not_shown(kind, first, last)
            if hidden:
                self.not_shown[kind] = hidden
                seqs = sorted({*seqs, *hidden})
            if seqs:
                self.withheld[kind] = seqs
        late = self._configs_after_window(first, last)
        if late:
            self.withheld["config"] = late

    def _configs_after_window(self, first: int, last: int) -> list[int]:
        """A time-scoped reader's config entries chained at or after the window's end (a restart
        between the scope's end and the anchor closing the bundle: its key tells when, and by its
        digests whether the settings or profile changed), but the one config.toml and the profile
        are (the first naming a profile: verify binds them by its key) and those before it. Those
        before the window's end say what was in force in it, and stay."""
        if self.disclosure.time_scope is None:
            return []
        configs = segment.config_entries(self.conn, self.site.id, first, last)
        bound = next((seq for seq, key in configs if "profile_sha256" in config_from_key(key)), None)
        if bound is None and configs:
            bound = configs[0][0]
        late = segment.config_entries_recorded_from(self.conn, self.site.id, first, last, self.scope.to_us)
        return [seq for seq in late if bound is None or seq > bound]

    def _not_shown(self, kind: str, first: int, last: int) -> set[int]:
        """The seqs of the rows of ``kind`` the window and audiences show that the reader does not
        (``Disclosure.shows``: an alert whose data names more than READER_ALERT_DATA, a finding or
        what tells one reporting a time outside a time-scoped reader's scope)."""
        if not self.disclosure.judges(kind):
            return set()
        cursor = segment.record_rows(self.conn, kind, self.scope, self.disclosure, first, last)
        names = [d[0] for d in cursor.description]
        return {
            values[0]
            for values in cursor.fetchall()
            if not self.disclosure.shows(
                self.conn, self.site.id, kind, dict(zip(names[2:], values[2:], strict=True)), self.zone
            )
        }

    def _digest_only(self) -> dict[str, int]:
        """The entries carried as digests alone, by kind; for a time-scoped reader their number
        alone (DIGEST_KIND_NOT_STATED): which kinds lie past the scope's end is not theirs."""
        if self.disclosure.time_scope is not None:
            withheld = sum(len(seqs) for seqs in self.withheld.values()) + self.unnamed
            return {DIGEST_KIND_NOT_STATED: withheld} if withheld else {}
        return {kind: len(seqs) for kind, seqs in sorted(self.withheld.items())}

    def _sound(self, first: int, last: int) -> None:
        # The hot loop of a month's export (26 million rows): one walk over the chain segment in
        # seq order, each sound entry of the window joined to its row. The segment is cut into
        # stretches that worker processes (one per core) walk and format (_walk); this process
        # takes their text in order, cuts it into parts and hands it to the zip members'
        # threads (deflate and SHA-256 release the interpreter lock). The chain lines wait in
        # a temporary file until chain.csv is written (_chain), so that the chain is read once.
        # SQLite builds every entry's chain.csv line (segment.sound_walk); _walk adds the floats
        # as repr() (the exact round trip the digests need) and the times.
        assert SOUND_FIELDS == ("LAeq", "LAFmax", "LASmax", "LAFmin", "LCeq", "LCpeak", "LZpeak", "LZeq")
        withheld = sorted(seq for seqs in self.withheld.values() for seq in seqs)
        # The overload column only in a bundle with an overloaded second: every other is as before.
        overload = self.overload = segment.has_overloads(self.conn, self.scope)

        def stretch(lo: int) -> _Stretch:
            hi = min(lo + _STRETCH_ENTRIES - 1, last)
            inside = withheld[bisect.bisect_left(withheld, lo) : bisect.bisect_right(withheld, hi)]
            return _Stretch(
                self.config.storage.path,
                self.scope,
                lo,
                hi,
                json.dumps(inside),
                self.zone.key,
                overload,
                self.disclosure.time_scope is not None,
            )

        stretches = [stretch(lo) for lo in range(first, last + 1, _STRETCH_ENTRIES)]
        chain = self.chain_lines = tempfile.TemporaryFile()  # noqa: SIM115 (closed by _chain)
        header = (",".join(SOUND_OVERLOAD_COLUMNS if overload else SOUND_COLUMNS) + "\n").encode()
        part: _Member | None = None
        parts = 0

        def close(part: _Member) -> None:
            part.close(rows=part.rows)
            self.rows[part.name] = part.rows

        for walked in ordered_map(_walk, stretches, default_workers()):
            chain.write(walked.chain)
            self.unnamed += walked.unnamed
            self.missing_sound.update(walked.missing)
            text, ends = memoryview(walked.sound), walked.ends
            at = 0
            while at < len(ends):  # parts of SOUND_PART_ROWS rows
                if part is None:
                    parts += 1
                    part = _Member(self.zf, sound_part(parts), self.files, threaded=True)
                    part.write(header)
                take = min(len(ends) - at, SOUND_PART_ROWS - part.rows)
                part.write(text[ends[at - 1] if at else 0 : ends[at + take - 1]])
                part.rows += take
                at += take
                if part.rows == SOUND_PART_ROWS:
                    close(part)
                    part = None
            self.done += walked.entries
            if self.progress is not None:
                self.progress.update(self.done)
        if part is None and parts == 0:  # an empty window still has its (empty) first part
            part = _Member(self.zf, sound_part(1), self.files)
            part.write(header)
        if part is not None:
            close(part)
        if self.missing_sound:
            self.warnings.append(
                f"{len(self.missing_sound)} sound chain entr(y/ies) of the window have no row in the store"
                " (deleted?)"
            )

    def _readings(self, kind: str, first: int, last: int) -> None:
        cursor = segment.reading_rows(self.conn, kind, self.scope, first, last)
        name = reading_file(kind)
        member = _Member(self.zf, name, self.files)
        writer = csv.writer(member.text(), lineterminator="\n")
        writer.writerow(reading_columns(kind))
        missing = 0
        for seq, absent, site, sensor, rkind, ts, duration, data in cursor:
            if absent:
                missing += 1
                continue
            # Text cells (ids, the sensor's JSON, values copied from it) are written so that a
            # spreadsheet runs none, and verify reads each back exactly (csv_cells.inert_exact).
            writer.writerow(
                (
                    seq,
                    inert_exact(site),
                    inert_exact(sensor),
                    inert_exact(rkind),
                    ts,
                    self.utc(ts),
                    self.local(ts),
                    duration,
                    *map(inert_exact, _reading_extras(kind, data)),
                    inert_exact(data),
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
        optional = kind in OPTIONAL_RECORD_KINDS
        if optional and not segment.has_entries(self.conn, self.site.id, kind, first, last):
            return 0  # no such entry in the segment: no file (see format.OPTIONAL_RECORD_KINDS)
        if not segment.has_kind_table(self.conn, kind):
            return self._json_member(RECORD_KINDS[kind].file, ())
        cursor = segment.record_rows(self.conn, kind, self.scope, self.disclosure, first, last)
        names = [d[0] for d in cursor.description]
        carried = KINDS[kind].bundle_row

        hidden = self.not_shown.get(kind, set())

        def elements() -> Iterator[dict[str, Any]]:
            for values in cursor:
                if values[0] in hidden:
                    continue
                chained = carried(dict(zip(names[2:], values[2:], strict=True)))
                yield {
                    "chain_seq": values[0],
                    "key": values[1],
                    "row": chained,
                    "derived": _derived(chained, self.utc, self.local),
                }

        return self._json_member(RECORD_FILES[kind], elements())

    def _chain(self, first: int, last: int) -> tuple[dict[str, int], list[tuple[int, str]], str]:
        """chain.csv, from the lines the sound pass built (one walk over the chain)."""
        site = self.site.id
        member = _Member(self.zf, CHAIN_FILE, self.files, threaded=True)
        member.write((",".join(CHAIN_COLUMNS_3) + "\n").encode())
        with self.chain_lines as lines:
            lines.seek(0)
            while block := lines.read(1 << 20):
                member.rows += block.count(b"\n")
                member.write(block)
        member.close(rows=member.rows)
        self.rows[CHAIN_FILE] = member.rows
        counts = segment.entry_counts(self.conn, site, first, last)
        configs = segment.config_entries(self.conn, site, first, last)
        return counts, configs, segment.head_at(self.conn, site, last) or ""

    def _configs(self, configs: list[tuple[int, str]]) -> int:
        elements = []
        withheld = set(self.withheld.get("config", ()))  # _configs_after_window
        for seq, key in configs:  # a config record is its key (it has no table of its own)
            if seq in withheld:
                continue
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
        """anchors.json: every head published for the site, or for a time-scoped reader those its
        scope allows (TimeScope.anchors) and the segment's own, which the manifest states anyway;
        returns the segment's (the manifest's)."""
        rows = [
            {"site": r[0], "seq": r[1], "head": r[2], "published_us": r[3], "published_utc": self.utc(r[3])}
            for r in segment.anchors(self.conn, self.site.id)
        ]
        within = [a for a in rows if first - 1 <= a["seq"] <= last]
        time_scope = self.disclosure.time_scope
        if time_scope is not None:
            allowed = {a["seq"] for a in time_scope.anchors(rows, lambda a: int(a["published_us"]))}
            rows = [a for a in rows if a["seq"] in allowed or first - 1 <= a["seq"] <= last]
        self._json_member(ANCHORS_FILE, rows)
        return within

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
        reader = InfluxReader(influx)
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
                read = SeriesRead(measurement, s.site, sensor_id, s.from_us, s.chained_from_us, tuple(fields))
                for ts, values in _influx_rows(reader, read):
                    writer.writerow(  # InfluxDB's values are text from outside the chain
                        (
                            inert_exact(s.site),
                            inert_exact(sensor_id),
                            ts,
                            self.utc(ts),
                            self.local(ts),
                            *(inert_exact(_cell(values.get(f))) for f in fields),
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
        """The window's days from the first to the last with something to plot: a day without
        data has no plot, and a window of centuries (1970 to 9998) was walked day by day, an
        export that did not end."""
        s = self.scope
        ends = [
            *(
                segment.plotted_span(self.conn, self.site.id, max(s.from_us, s.chained_from_us), s.to_us)
                or ()
            ),
            *(m * 60_000_000 for minutes in getattr(self, "_minutes", {}).values() for m in minutes),
        ]
        if not ends:
            return
        first, last = max(s.from_us, min(ends)), min(s.to_us - 1, max(ends))
        day = datetime.fromtimestamp(first / 1e6, self.zone).date()
        while True:
            start = to_us(datetime.combine(day, time(0), self.zone))
            if start > last or start >= s.to_us:
                return
            end = to_us(datetime.combine(day + timedelta(days=1), time(0), self.zone))
            yield day, max(start, s.from_us), min(end, s.to_us)
            day += timedelta(days=1)

    def _plot_jobs(self) -> Iterator[tuple[str, tuple[Any, ...]]]:
        """(member name, day_plot arguments) of every plot: the minutes come from SQL, by day."""
        from monitor.notify.plots import plot_limits  # one figure set-up with the notices

        limits = plot_limits(self.site)
        influx_minutes = getattr(self, "_minutes", {})
        wanted = [
            sensor
            for sensor in self.site.sensors
            if (self.scope.sensors is None or sensor.id in self.scope.sensors)
            and sensor.kind.value in ("sound", "light", "sky")
        ]
        for day, lo, hi in self._days():
            sound = self._day_sound_minutes(lo, hi)  # every sensor's day in one pass over the rows
            for sensor in wanted:
                measurement = "sound" if sensor.kind.value == "sound" else "light"
                if measurement == "sound":
                    minutes = sound.get(sensor.id, {})
                else:
                    minutes = self._day_minutes(measurement, sensor.id, lo, hi)
                pruned = influx_minutes.get((measurement, sensor.id), {})
                for minute, (total, n, peak) in pruned.items():
                    if lo // 60_000_000 <= minute < (hi + 59_999_999) // 60_000_000 and minute not in minutes:
                        minutes[minute] = (total, n, peak)
                if not minutes:
                    continue
                yield (
                    f"plots/{measurement}/{sensor.id}/{day.isoformat()}.png",
                    (
                        measurement,
                        sensor.id,
                        self.site.name,
                        day,
                        self.site.timezone,
                        minutes,
                        limits.get(sensor.id, []),
                    ),
                )

    def _start_plots(self) -> Any:
        """Plots drawn by a forked process while this one writes the rows (results: _plots).

        Forked here, before any thread of the export exists; it only draws from the minutes
        it is sent. None where processes cannot be forked, or the caller runs other threads:
        _plots draws them in line then.
        """
        import multiprocessing

        if "fork" not in multiprocessing.get_all_start_methods() or not forking_is_safe():
            return None  # forking a process that runs other threads (a web portal) is not safe
        pool = multiprocessing.get_context("fork").Pool(1, initializer=leave_interrupts_to_parent)
        return pool, [(name, pool.apply_async(_draw, (args,))) for name, args in self._plot_jobs()]

    def _plots(self, started: Any = None) -> None:
        if started is None:
            drawn = [(name, _draw(args)) for name, args in self._plot_jobs()]
        else:
            pool, pending = started
            with pool:
                drawn = [(name, result.get()) for name, result in pending]
        for name, png in sorted(drawn):  # by sensor, then day
            member = _Member(self.zf, name, self.files)
            member.write(png)
            member.close()

    def _day_sound_minutes(self, lo: int, hi: int) -> dict[str, dict[int, tuple[float, float, float]]]:
        """Per sound sensor and minute of [lo, hi): (sum of energies, count, max LAeq), from SQL."""
        lo = max(lo, self.scope.chained_from_us)
        out: dict[str, dict[int, tuple[float, float, float]]] = {}
        if lo >= hi:
            return out
        for sensor, minute, total, n, peak in segment.sound_minutes(self.conn, self.site.id, lo, hi):
            if total is not None:
                out.setdefault(sensor, {})[minute] = (total, n, peak)
        return out

    def _day_minutes(
        self, measurement: str, sensor: str, lo: int, hi: int
    ) -> dict[int, tuple[float, float, float]]:
        """Per minute: (sum of lux, count, max), from SQL: a day never goes through Python."""
        lo = max(lo, self.scope.chained_from_us)
        if lo >= hi:
            return {}
        return {
            r[0]: (r[1], r[2], r[3])
            for r in segment.light_minutes(self.conn, self.site.id, sensor, lo, hi)
            if r[1] is not None
        }

    # ------------------------------------------------------------------ the rest

    def _static(self, configs: list[tuple[int, str]]) -> None:
        """config.toml and the profile: the files of the segment's first config record.

        A configuration chained before the allow-list (the whole file) is never shipped as it
        was: the bundle holds its allow-list (``_chained_config_text``), said so in the manifest.
        """
        profile, profile_text_, config_text = config_record_texts(self.config, self.site)
        self.config_seq: int | None = None
        self.config_form = "current"
        for seq, key in configs:
            record = config_from_key(key)
            if "profile_sha256" not in record:
                continue
            kept_profile = segment.kept_text(self.conn, record["profile_sha256"])
            kept_config = segment.kept_text(self.conn, record["config_sha256"])
            if kept_profile is None or kept_config is None:
                self.warnings.append(
                    f"the store does not keep the texts of the configuration chained at seq {seq}:"
                    " the bundle holds the current ones"
                )
            else:
                profile, profile_text_ = record["profile"], kept_profile
                extract, self.config_form = _chained_config_text(kept_config, self.site.id)
                if self.config_form == "current":
                    self.warnings.append(
                        f"the configuration chained at seq {seq} no longer reads as a configuration:"
                        " config.toml is the current one's allow-list, which the chain does not bind"
                    )
                else:
                    config_text = extract
                if self.config_form == "extract":
                    self.warnings.append(
                        f"the configuration chained at seq {seq} was the whole file (before the"
                        " allow-list): config.toml is its allow-list, which the chain does not bind"
                    )
            self.config_seq = seq
            break
        self.profile = profile
        # The overrides config.toml gives, which the manifest repeats: the chained text's where it
        # is shipped, not today's configuration's (verify holds the two together).
        shipped = site_agreement(config_text, self.site.id)
        self.agreement = dict(self.site.agreement) if shipped is None else shipped
        member = _Member(self.zf, "config.toml", self.files)
        member.write(config_text.encode("utf-8"))
        member.close()
        member = _Member(self.zf, _profile_file(profile), self.files)
        member.write(profile_text_.encode("utf-8"))
        member.close()
        member = _Member(self.zf, "README.txt", self.files)
        member.write(readme_text(self.overload).encode("utf-8"))  # the overload column described where it is
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
            "created_utc": self.utc(to_us(self.now)),
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
                    " events, findings, alerts, health, calibration, rejections, notices, portal"
                    " actions and seismograph waveforms (samples as base64) of the window that the"
                    " disclosure lets the reader see; config entries"
                    " wherever they fall in the segment. Every other record entry is in chain.csv as its"
                    " digest alone (no key); audio and other kinds are chain links only."
                ),
            },
            "disclosure": {
                **self.disclosure.manifest(),
                "window": "from_us to to_us",
                "digest_only": self._digest_only(),
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
                "disclosed": "the exported site's settings its findings depend on (allow-list)",
                # chained: the text the config record names; extract: the allow-list of an earlier,
                # whole-file text; current: today's (the chained text is not at hand)
                "form": self.config_form,
                "chain_seq": self.config_seq,
            },
            "profile": {
                "name": self.profile,
                "file": _profile_file(self.profile),
                "sha256": sha[_profile_file(self.profile)],
                "agreement": self.agreement,
                "chain_seq": self.config_seq,
            },
            "plots": self.plots,
            "rows": dict(self.rows),
            "warnings": list(self.warnings),
            "files": list(self.files),
        }


def _draw(args: tuple[Any, ...]) -> bytes:
    """One day's plot as PNG bytes (in the plotting process, or in line)."""
    from monitor.notify.plots import day_plot, figure_png

    measurement, sensor, site_name, day, zone, minutes, limits = args
    fig = day_plot(measurement, sensor, site_name, day, ZoneInfo(zone), minutes, limits)
    return figure_png(fig, fitted=False, compress_level=1)


# Chain entries a worker walks at a time: ~13 MB of text for sound entries, a few in flight.
_STRETCH_ENTRIES = 1 << 16


@dataclass(frozen=True, slots=True)
class _Stretch:
    """Entries lo..hi (in ``args``) of the chain segment, for a worker to walk (``_walk``)."""

    store: str
    scope: _Scope
    lo: int
    hi: int
    withheld: str  # JSON array of the stretch's entries carried as digests only
    zone: str
    overload: bool = False  # the rows carry the overload column (SOUND_OVERLOAD_COLUMNS)
    kinds_withheld: bool = False  # a digest-only line names no kind (a time-scoped reader's bundle)


@dataclass(slots=True)
class _Walked:
    sound: bytes  # the stretch's sound.csv lines
    ends: array  # type: ignore[type-arg]  # each line's end in ``sound``
    chain: bytes  # the chain.csv line of every entry of the stretch
    missing: list[int]  # sound entries of the window whose row the store lacks
    entries: int
    unnamed: int = 0  # entries outside the window written as their digests alone (_unnamed_outside)


_MARKED = FORMULA_START | {MARK}  # a text cell beginning so is written by inert_exact


def _walk(stretch: _Stretch) -> _Walked:
    """Walk one stretch of the chain segment: its sound rows and chain lines as text (a worker)."""
    conn = _open_store(stretch.store)
    try:
        cursor = segment.sound_walk(
            conn,
            stretch.scope,
            stretch.lo,
            stretch.hi,
            stretch.withheld,
            TAG_HEX,
            stretch.overload,
            stretch.kinds_withheld,
        )
        utc, local = TimeFormat(UTC), TimeFormat(ZoneInfo(stretch.zone))
        sound: list[str] = []
        chain: list[str] = []
        missing: list[int] = []
        entries = 0
        unnamed = 0
        last_ts, times = -1, ""
        site = inert_exact(stretch.scope.site)
        while batch := cursor.fetchmany(4096):
            entries += len(batch)
            columns = list(zip(*batch, strict=True))
            # The text cells (sensor, source) a spreadsheet would run: rare (ids begin with a
            # letter, a digit or '_'), so looked for once a batch, among its few distinct values.
            for text_column in (0, 11):
                if any(v is not None and v[:1] in _MARKED for v in set(columns[text_column])):
                    columns[text_column] = tuple(
                        v if v is None else inert_exact(v) for v in columns[text_column]
                    )
            # The floats as repr() spells them, a column at a time (float_texts); '' for NULL.
            floats = [float_texts(columns[i]) for i in range(2, 11)]
            for (
                sensor,
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
                seq,
                entry_text,
                gap,
            ) in zip(columns[0], columns[1], *floats, *columns[11:], strict=True):
                if sensor is None:  # not a sound row of the window: SQLite built its chain line
                    if stretch.kinds_withheld and not gap:
                        line = _unnamed_outside(entry_text, stretch.scope)
                        unnamed += line is not entry_text
                        entry_text = line
                    chain.append(entry_text)
                    if gap:  # ... though its entry is one: the store lost the row
                        missing.append(seq)
                    continue
                chain.append(f"{seq},sound,,{entry_text},")  # its row gives the digest: a tag, no key
                if ts != last_ts:  # the sensors of one second share their time columns
                    last_ts, times = ts, f"{utc(ts)},{local(ts)}"
                # ``source`` carries the overload cell where the bundle has the column (sound_walk)
                sound.append(
                    f"{seq},{site},{sensor},{ts},{times},{duration},{laeq},{lafmax},{lasmax},{lafmin},"
                    f"{lceq},{lcpeak},{lzpeak},{lzeq},{source}\n"
                )
    finally:
        conn.close()
    text = "".join(sound).encode()
    ends = array("q", itertools.accumulate(map(len, sound)))
    if ends and ends[-1] != len(text):  # not ASCII throughout (ids are, so this is rare)
        ends = array("q", itertools.accumulate(len(line.encode()) for line in sound))
    lines = "\n".join(chain) + "\n" if chain else ""
    return _Walked(text, ends, lines.encode(), missing, entries, unnamed)


# Kinds whose key names a sensor and a time (sensor|ts_us, sensor|kind|ts_us): per-second rows,
# readings and audio blocks, chain links with their keys in the Town's bundles.
_KEYED_BY_TIME = frozenset({"sound", "reading", "audio"})


def _unnamed_outside(line: str, scope: _Scope) -> str:
    """A time-scoped reader's chain.csv line of an entry keyed by sensor and time (_KEYED_BY_TIME):
    as it stands inside the window, else its digest alone (``seq,,,digest,``), as a record not
    shown. Its key told which sensor measured what when after the scope (a seismograph's event
    just after it: ``sg1|seismic|...``); the link needs the digest alone. Any other line as it is."""
    seq, kind, rest = line.split(",", 2)
    if kind not in _KEYED_BY_TIME:
        return line
    key, digest, _ = rest.rsplit(",", 2)
    parts = key.removeprefix("'").split("|")  # a marked key (csv_cells.inert_exact) read as stored
    try:
        ts_us = int(parts[-1])
    except ValueError:
        return f"{seq},,,{digest},"
    if scope.from_us <= ts_us < scope.to_us and (scope.sensors is None or parts[0] in scope.sensors):
        return line
    return f"{seq},,,{digest},"


def float_texts(values: Sequence[float | None]) -> list[str]:
    """``repr()`` of each value, ``''`` for None: a column of a stretch at once.

    A sound row's text must spell its floats exactly as ``repr()`` does (the digests are of that
    text, and verify hashes the row as it stands). orjson writes the same shortest round-trip
    digits ~8 x faster for a whole column, in the same positional form for 1e-4 <= |x| < 1e16 and
    zero; elsewhere it writes exponents its own way (``1e16``, ``0.00009999``) and NaN or
    infinity as null, so a column with any of those is spelled by ``repr()``
    (tests/monitor/evidence/test_float_texts.py compares them over millions of values).
    """
    if values.count(None) == len(values):  # an optional level the meter does not send
        return [""] * len(values)
    text = orjson.dumps(values).decode()
    if "e" in text or "0.0000" in text:  # an exponent, or |x| < 1e-4 written positionally
        return ["" if value is None else repr(value) for value in values]
    texts = text[1:-1].split(",")
    if "null" in text:  # None, or a NaN or infinity, which only repr() spells
        return [
            t if t != "null" else "" if v is None else repr(v) for t, v in zip(texts, values, strict=True)
        ]
    return texts


def _utc(ts_us: int) -> datetime:
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=ts_us)


def _version() -> str:
    try:
        return importlib.metadata.version("minewatch")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _influx_rows(reader: InfluxReader, read: SeriesRead) -> Iterator[tuple[int, dict[str, Any]]]:
    try:
        yield from reader.rows(read)
    except OutputError as exc:  # the message names the series and the server
        raise EvidenceError(str(exc)) from exc
