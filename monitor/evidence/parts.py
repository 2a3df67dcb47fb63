"""Format 3's sound rows, checked part by part in worker processes (standard library only).

A month of per-second rows is 26 million canonical records to rebuild and hash: that work
is independent per row, so each part (data/sound/part-NNNNN.csv) is parsed, checked and
hashed by a worker, which returns each row's chain seq and digest. The chain is sequential,
but folding the heads from those digests is cheap: the verifier's own process walks
chain.csv in order and takes the rows' digests as they come (``SoundRows``).
"""

from __future__ import annotations

import csv
import hashlib
import io
import multiprocessing
import os
import re
import signal
import sys
import zipfile
from array import array
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC
from typing import Any
from zoneinfo import ZoneInfo

from monitor.csv_cells import exact_value
from monitor.evidence.format import (
    SOUND_COLUMNS,
    SOUND_OVERLOAD_COLUMNS,
    TAG_HEX,
    TimeFormat,
    _Scope,
    bounded_lines,
    sound_canonical_cells,
    sound_text_cells,
)

_sha256 = hashlib.sha256
# A row whose numbers are written with these characters alone is hashed as its text stands
# (format.sound_text_cells); any other (inf, nan, garbage) goes through the float round trip,
# which also names a malformed number.
_PLAIN_NUMBERS = re.compile(r"[0-9.e+\-]*")


@dataclass(slots=True)
class PartResult:
    """What a worker found in one part: per row its line, chain seq and SHA-256 digest (raw)."""

    name: str
    sha256: str  # of the member's bytes, for the manifest check
    lines: array  # type: ignore[type-arg]
    seqs: array  # type: ignore[type-arg]
    digests: bytes  # 32 bytes per row
    problems: list[str] = field(default_factory=list)  # malformed rows, rows outside the scope
    days: set[tuple[str, str]] = field(default_factory=set)  # (sensor, site-local day) with rows
    overload: bool = False  # its header has the overload column (SOUND_OVERLOAD_COLUMNS)
    rows: int = 0  # its lines after the header, malformed ones too (the manifest states the number)


@dataclass(frozen=True, slots=True)
class PartJob:
    bundle: str
    name: str
    zone: str
    scope: tuple[str, int, int, int, tuple[str, ...] | None]
    # Every row's digest through the float round trip (format.sound_canonical_cells): the
    # check of a part some of whose rows' texts did not give the chained digest (SoundRows).
    canonical: bool = False


class HashingReader(io.RawIOBase):
    """Reads a zip member and hashes every byte read (the member's SHA-256 checked in one pass)."""

    def __init__(self, raw: Any) -> None:
        self.raw = raw
        self.sha = hashlib.sha256()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self.raw.read(len(buffer))
        buffer[: len(data)] = data
        self.sha.update(data)
        return len(data)


def check_part(job: PartJob) -> PartResult:
    """Parse, check and hash the rows of one part (runs in a worker process, or in line)."""
    scope = _Scope(*job.scope)
    utc, local = TimeFormat(UTC), TimeFormat(ZoneInfo(job.zone))
    lines: array = array("l")  # type: ignore[type-arg]
    seqs: array = array("q")  # type: ignore[type-arg]
    digests = bytearray()
    problems: list[str] = []
    by_day: dict[str, set[str]] = {}  # site-local day -> sensors with rows
    sensors_of_day: set[str] = set()
    site, cfrom, to, sensors = scope.site, scope.chained_from_us, scope.to_us, scope.sensors
    last_ts, times = -1, ("", "")
    rows = 0
    canonical, plain = job.canonical, _PLAIN_NUMBERS.fullmatch
    with zipfile.ZipFile(job.bundle) as zf, zf.open(job.name) as member:
        hashed = HashingReader(member)
        text = io.TextIOWrapper(io.BufferedReader(hashed, 1 << 20), encoding="utf-8", newline="")
        reader = csv.reader(bounded_lines(text, job.name))
        header = next(reader, None)
        if header is None or tuple(header) not in (SOUND_COLUMNS, SOUND_OVERLOAD_COLUMNS):
            problems.append(f"{job.name}: unexpected columns {header!r}; expected {list(SOUND_COLUMNS)!r}")
            rows = sum(1 for _ in reader)
        else:
            width = len(header)  # with the overload column where the window has an overloaded second
            line = 1  # the header's: the lines after it are the part's rows (the hot loop counts none)
            for line, cells in enumerate(reader, start=2):
                try:
                    if len(cells) != width:
                        raise ValueError(f"{len(cells)} cells, expected {width}")
                    seq = int(cells[0])
                    ts = int(cells[3])
                    if ts != last_ts:  # rows of one second come together
                        last_ts, times = ts, (utc(ts), local(ts))
                        sensors_of_day = by_day.setdefault(times[1][:10], set())
                    if cells[4] != times[0] or cells[5] != times[1]:
                        raise ValueError(
                            f"time_utc/time_local {cells[4]!r}/{cells[5]!r} do not match ts_us {ts}"
                        )
                    if canonical or not plain("".join(cells[6:15])):
                        record = sound_canonical_cells(cells)
                    else:
                        record = sound_text_cells(cells)
                except (ValueError, TypeError, KeyError) as exc:
                    problems.append(f"row malformed: {job.name} line {line}: {exc}")
                    continue
                if (  # an id a spreadsheet would run is written marked (csv_cells.inert_exact)
                    (cells[1] != site and exact_value(cells[1]) != site)
                    or not cfrom <= ts < to
                    or (sensors is not None and exact_value(cells[2]) not in sensors)
                ):
                    problems.append(
                        f"row outside the bundle's scope: {job.name} line {line} (sensor {cells[2]} of site"
                        f" {cells[1]} at {cells[4]}, chain seq {seq}): the manifest's window and sensors"
                        " do not include it"
                    )
                    continue
                lines.append(line)
                seqs.append(seq)
                digests += _sha256(record).digest()
                sensors_of_day.add(cells[2])
            rows = line - 1
        while text.read(1 << 20):  # what the parser did not read still counts
            pass
    days = {(exact_value(sensor), day) for day, sensors_ in by_day.items() for sensor in sensors_}
    overload = header is not None and tuple(header) == SOUND_OVERLOAD_COLUMNS
    return PartResult(
        job.name, hashed.sha.hexdigest(), lines, seqs, bytes(digests), problems, days, overload, rows
    )


def part_results(jobs: Sequence[PartJob], workers: int) -> Iterator[PartResult]:
    """The parts' results in order; ``workers`` processes, at most a few results ahead (memory)."""
    return ordered_map(check_part, jobs, workers)


def ordered_map(work: Callable[[Any], Any], jobs: Sequence[Any], workers: int) -> Iterator[Any]:
    """``work(job)`` for each job, in order, by ``workers`` processes, at most two results per
    worker ahead of the consumer (memory); in this process for one worker or one job."""
    if workers <= 1 or len(jobs) <= 1:
        for job in jobs:
            yield work(job)
        return
    # fork is quick, but forking a process that runs other threads (a web portal) can leave a
    # lock held in the child: then a clean server process forks the workers.
    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and forking_is_safe():
        method = "fork"
    else:
        method = "forkserver" if "forkserver" in methods else "spawn"
    with multiprocessing.get_context(method).Pool(workers, initializer=leave_interrupts_to_parent) as pool:
        pending: deque[Any] = deque()
        queued = iter(jobs)
        for job in queued:
            pending.append(pool.apply_async(work, (job,)))
            if len(pending) >= 2 * workers:
                break
        while pending:
            result = pending.popleft().get()
            following = next(queued, None)
            if following is not None:
                pending.append(pool.apply_async(work, (following,)))
            yield result


def leave_interrupts_to_parent() -> None:
    """A pool worker's start: Ctrl-C is the parent's to handle (it stops the pool). The
    terminal sends SIGINT to the whole process group, and each worker printed a traceback."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def forking_is_safe() -> bool:
    """Whether no other thread of this process runs Python, so a forked child cannot start with
    a lock such a thread held. Counted from the interpreter's thread states, not
    ``threading.active_count()``: threads started below ``threading`` (pytest-xdist's execnet
    receiver) are not in that count, and a fork beside one was seen to hang an export. Threads
    that run no Python (OpenBLAS's, made safe across fork by the library) do not count."""
    return len(sys._current_frames()) == 1


def default_workers() -> int:
    """Every core this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


class SoundRows:
    """Format 3's sound rows, met in chain order by the chain walk.

    ``expect(seq, tag)`` is called for each sound entry the chain says has its row here and
    returns the row's digest (the chain keeps only its first TAG_HEX hex digits): the head is
    recomputed from it. A row with another tag is named as altered, a row that names an entry
    already passed as reordered (or not in the chain), and an entry with no row as removed;
    for those the digest is unknown (None) and the walk cannot recompute the heads until the
    next head the bundle records.
    """

    name = "data/sound/part-*.csv"

    def __init__(
        self,
        results: Iterator[PartResult],
        add: Callable[[str, str], None],
        on_part: Callable[[PartResult], None],
        label: Callable[[str, int], str],
        canonical: Callable[[str], PartResult],
    ) -> None:
        self._rows = self._iterate(results)
        self._add = add
        self._on_part = on_part
        self._label = label
        self._canonical = canonical
        self._rechecked: tuple[str, dict[int, bytes]] = ("", {})  # a part's digests by line, canonical
        self.peeked: tuple[int, bytes, str, int] | None = None
        self.done = False
        self.missing: dict[int, str] = {}  # seq -> tag: expected, no row yet
        self.missing_overflow = 0
        self.checked = 0

    def _iterate(self, results: Iterator[PartResult]) -> Iterator[tuple[int, bytes, str, int]]:
        for part in results:
            self._on_part(part)
            name, digests, lines = part.name, part.digests, part.lines
            for i, seq in enumerate(part.seqs):
                yield seq, digests[32 * i : 32 * i + 32], name, lines[i]

    def _peek(self) -> tuple[int, bytes, str, int] | None:
        if self.peeked is None and not self.done:
            self.peeked = next(self._rows, None)
            self.done = self.peeked is None
        return self.peeked

    def _where(self, name: str, line: int, seq: int) -> str:
        return f"{name} line {line} ({self._label(name, line)}, chain seq {seq})"

    def _recheck(self, name: str, line: int) -> bytes | None:
        """The row's digest through the float round trip (its part checked again, once)."""
        if self._rechecked[0] != name:
            part = self._canonical(name)
            digests = part.digests
            self._rechecked = (name, {n: digests[32 * i : 32 * i + 32] for i, n in enumerate(part.lines)})
        return self._rechecked[1].get(line)

    def _compare(self, row: tuple[int, bytes, str, int], tag: str) -> str | None:
        self.checked += 1
        digest = row[1].hex()
        if digest[:TAG_HEX] != tag:  # a changed row, or its numbers written another way (sound_text_cells)
            canonical = self._recheck(row[2], row[3])
            if canonical is not None:
                digest = canonical.hex()
        if digest[:TAG_HEX] != tag:
            self._add(
                "row",
                f"row altered: {self._where(row[2], row[3], row[0])}: its record hashes to"
                f" {digest[:16]}..., the chain's entry begins {tag}",
            )
            return None
        return digest

    def _late(self, row: tuple[int, bytes, str, int]) -> None:
        tag = self.missing.pop(row[0], None)
        if tag is not None:
            self._add(
                "order",
                f"rows reordered: {self._where(row[2], row[3], row[0])} comes after rows that follow it"
                " in the chain",
            )
            self._compare(row, tag)
        else:
            self._add(
                "row",
                f"row not in the chain: {row[2]} line {row[3]} ({self._label(row[2], row[3])}) names"
                f" chain seq {row[0]}, which is not a sound entry of the segment with its row here"
                " (a duplicate, an added row, or an altered chain_seq)",
            )

    def expect(self, seq: int, tag: str) -> str | None:
        while True:
            row = self._peek()
            if row is None or row[0] > seq:
                if len(self.missing) < 100_000:
                    self.missing[seq] = tag
                else:
                    self.missing_overflow += 1
                return None
            self.peeked = None
            if row[0] == seq:
                return self._compare(row, tag)
            self._late(row)

    def finish(self) -> None:
        while (row := self._peek()) is not None:
            self.peeked = None
            self._late(row)
        for seq in sorted(self.missing):
            self._add(
                "row",
                f"row removed: chain seq {seq} (a sound entry) belongs in data/sound/ but has no row there",
            )
        for _ in range(self.missing_overflow):
            self._add("row", "row removed from data/sound/ (beyond the first 100000 listed)")
