"""A blasting seismograph at the edge: an event's waveforms (synthetic from a site law, or a
vendor's export) split under the packet cap, with the summary computed at the edge.

    sensors.seismograph.site_law_event (or HotFolder: monitor.seismic.vendor_csv.read_event)
        ──► monitor.seismic.summary.summarize (the edge's summary)
        ──► event_messages: SeismicSummary + WaveformChunks (monitor.seismic.chunks.split)
        (HotFolder: each checked with monitor.wire.codec.decode, the daemon's own rules)
        ──► sensors.publisher.Publisher (monitor.wire.codec.encode) ──► broker

The synthetic event is a decaying multi-frequency waveform whose PPV follows the common site
law PPV = K (D / sqrt(W))^-beta (square-root scaled distance: D feet, W pounds per delay,
ISEE Blasters' Handbook); its peak per axis is exact, so a scenario knows the answer.
"""

from __future__ import annotations

import itertools
import logging
import math
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from stat import S_ISREG
from typing import Any

import numpy as np

from monitor.config import SensorConfig, SiteConfig
from monitor.errors import DecodeError
from monitor.seismic.chunks import split
from monitor.seismic.summary import MM_PER_IN, Waveform, pa_from_db, summarize
from monitor.wire.codec import SeismicSummary, WaveformChunk, decode, encode
from monitor.wire.protocol import KIND_MAX_BYTES, SEISMIC_RATE_RANGE, Limits, format_ts
from sensors.publisher import signing_key

log = logging.getLogger("minewatch.sensors.seismograph")

FT_PER_M = 3.28084
LB_PER_KG = 2.20462


@dataclass(frozen=True, slots=True)
class SiteLaw:
    """PPV (in/s) = k * SD^-beta with SD = D(ft) / sqrt(W(lb)); airblast (dB) = a - b log10(D / W^(1/3))."""

    k: float = 160.0
    beta: float = 1.6
    airblast_a: float = 165.0
    airblast_b: float = 24.0

    def ppv_in_s(self, distance_m: float, charge_kg: float) -> float:
        return float(self.k * scaled_distance(distance_m, charge_kg) ** -self.beta)

    def airblast_db(self, distance_m: float, charge_kg: float) -> float:
        cube = distance_m * FT_PER_M / (charge_kg * LB_PER_KG) ** (1 / 3)
        return self.airblast_a - self.airblast_b * math.log10(cube)


def scaled_distance(distance_m: float, charge_kg: float) -> float:
    """Square-root scaled distance in ft/lb^0.5 (the unit US rules state it in)."""
    return distance_m * FT_PER_M / math.sqrt(charge_kg * LB_PER_KG)


def decaying(
    n: int, rate: float, start_s: float, freqs: tuple[float, ...], peak: float, seed: int
) -> np.ndarray[Any, np.dtype[np.float64]]:
    """A sum of exponentially decaying sines from ``start_s``, scaled so its largest |sample| is ``peak``."""
    rng = np.random.default_rng(seed)
    t = np.arange(n) / rate - start_s
    on = t >= 0
    wave = np.zeros(n)
    for i, f in enumerate(freqs):
        weight = 1.0 / (i + 1)
        tau = 3.0 / f  # a few cycles
        phase = rng.uniform(0, 2 * np.pi)
        wave += np.where(
            on, weight * np.exp(-np.where(on, t, 0) / tau) * np.sin(2 * np.pi * f * t + phase), 0.0
        )
    largest = float(np.abs(wave).max())
    return wave * (peak / largest) if largest > 0 else wave


def site_law_event(
    distance_m: float,
    charge_kg: float,
    *,
    law: SiteLaw = SiteLaw(),
    rate: int = 1024,
    record_s: float = 5.0,
    pretrigger_s: float = 0.5,
    freqs: tuple[float, float, float] = (8.0, 12.0, 25.0),
    ppv_in_s: float | None = None,
    mic_low_hz: float = 2.0,
    seed: int = 1,
) -> Waveform:
    """A blast as the seismograph at ``distance_m`` records it: the vertical axis at the site
    law's PPV (or ``ppv_in_s``), the other two a little lower, each led by its own frequency."""
    n = int(rate * record_s)
    ppv = (ppv_in_s if ppv_in_s is not None else law.ppv_in_s(distance_m, charge_kg)) * MM_PER_IN
    arrival = pretrigger_s + distance_m / 3000.0  # ground wave ~3 km/s
    axes = [
        decaying(n, rate, arrival, (freqs[i], freqs[(i + 1) % 3] * 1.7), ppv * share, seed + i)
        for i, share in enumerate((0.8, 1.0, 0.6))
    ]
    air_arrival = pretrigger_s + distance_m / 343.0
    mic = decaying(
        n,
        rate,
        min(air_arrival, record_s * 0.8),
        (5.0, 15.0),
        pa_from_db(law.airblast_db(distance_m, charge_kg)),
        seed + 9,
    )
    ranges = (254.0, 254.0, 254.0, 500.0)  # 10 in/s geophone, 500 Pa (148 dB) microphone
    return Waveform(float(rate), np.vstack([*axes, mic]), ranges, mic_low_hz)


def event_messages(
    wave: Waveform,
    site: str,
    sensor: str,
    event_id: str,
    ts: datetime,
    *,
    blast_id: str | None = None,
    instrument: dict[str, Any] | None = None,
    max_bytes: int = KIND_MAX_BYTES["waveform"],
) -> list[SeismicSummary | WaveformChunk]:
    """The edge's summary of the event, then its waveform chunks (what the seismograph sends)."""
    chunks = split(wave, site, sensor, event_id, ts, max_bytes)
    return [summary_message(wave, chunks, blast_id=blast_id, instrument=instrument), *chunks]


def summary_message(
    wave: Waveform,
    chunks: list[WaveformChunk],
    *,
    blast_id: str | None = None,
    instrument: dict[str, Any] | None = None,
) -> SeismicSummary:
    """The edge's summary of the event ``chunks`` (``split``) carry."""
    first = chunks[0]
    payload: dict[str, Any] = {
        "ts": format_ts(first.ts),
        "event_id": first.event_id,
        "duration_s": wave.duration_s,
        "sample_rate": int(wave.sample_rate),
        "chunks": len(chunks),
        "summary": summarize(wave).to_json(),
    }
    if blast_id:
        payload["blast_id"] = blast_id
    if instrument:
        payload["instrument"] = instrument
    return SeismicSummary(first.site, first.sensor, first.event_id, first.ts, wave.duration_s, payload)


# --------------------------------------------------------------------------- the hot folder

DONE = "done"
REJECTED = "rejected"
# How long an export must keep its size and modification time before it is read: longer than
# an exporter's pause between writes (a file copied over a network share comes in bursts), short
# against the minutes a blast's record may take to matter. docs/DEPLOY.md, "A seismograph's hot folder".
DEFAULT_SETTLE_S = 5.0
# Names an exporter or an editor gives a file while it writes it (rsync's ".a.csv.XYZ", Excel's
# lock file "~$a.csv", "a.csv~", "a.csv.part"): never an export to read.
WRITING_SUFFIXES = (".tmp", ".part", ".partial", ".crdownload", "~")


def is_export_name(name: str) -> bool:
    """``name`` is a vendor CSV export's (``a.csv``, ``A.CSV``), not one a writer uses meanwhile."""
    lower = name.lower()
    return lower.endswith(".csv") and not name.startswith((".", "~")) and not lower.endswith(WRITING_SUFFIXES)


def check_hot_folder(folder: Path) -> None:
    """Make ``folder``'s done/ and rejected/ if missing and check that files can be made in all
    three (each published export is moved out of the folder; one that could not be would be
    published again on every start). ValueError: one line, what to do."""
    for place in (folder, folder / DONE, folder / REJECTED):
        if place.exists() and not place.is_dir():
            raise ValueError(f"{place}: is a file where the hot folder keeps its {place.name}/; move it away")
        try:
            place.mkdir(exist_ok=True)
            handle, probe = tempfile.mkstemp(prefix=".minewatch-write-check-", dir=place)
            os.close(handle)
            os.unlink(probe)
        except OSError as exc:
            raise ValueError(
                f"{place}: cannot write there ({exc.strerror or exc}); each published export is moved to"
                f" {DONE}/ and each refused one to {REJECTED}/: make the folder writable for this user"
                " (a read-only mount: mount it read-write)"
            ) from None


# Every time passes here (the daemon judges it against its clock on arrival); the size is the
# protocol's own limit (each kind's cap applies too).
ANY_TIME = Limits(max_future_s=math.inf, max_past_s=math.inf)


@dataclass(frozen=True, slots=True)
class Handled:
    """What became of one export: published (and moved to done/, unless ``problem`` says why
    not) or set aside in rejected/ for ``problem``."""

    name: str
    published: bool
    problem: str = ""


class HotFolder:
    """The vendor CSV exports a seismograph's software writes into ``folder``, each read once it
    has settled (the same size and modification time for ``settle_s``), checked against the
    daemon's own decoder, published and moved to ``done/``; one that cannot be read, summarized
    or sent goes to ``rejected/`` beside a ``.reason`` file, and nothing of it is published.

        scan ──settled?──► read_event ──► split ──► summary_message ──► wire check
             ──► publish (every message) ──► done/      (any problem: rejected/ + .reason)
    """

    def __init__(
        self,
        folder: Path,
        site: SiteConfig,
        sensor: SensorConfig,
        settle_s: float = DEFAULT_SETTLE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.folder = folder
        self.site = site
        self.sensor = sensor
        self.settle_s = settle_s
        self.clock = clock
        self._seen: dict[str, tuple[tuple[int, int], float]] = {}  # name -> (size, mtime_ns), since
        self._stuck: dict[str, tuple[int, int]] = {}  # handled, but could not be moved out
        self.missing: str | None = None  # why the folder cannot be listed, said once until it can

    def scan(self, publish: Callable[[Any], None]) -> list[Handled]:
        """Handle every settled export (by name); returns what became of each."""
        now = self.clock()
        try:
            entries = sorted(self.folder.iterdir())
        except OSError as exc:  # unmounted, removed, renamed: the exports may come back
            why = exc.strerror or str(exc)
            if why != self.missing:
                log.warning("Hot folder %s cannot be read (%s); waiting for it", self.folder, why)
                self.missing = why
            return []
        if self.missing is not None:
            log.info("Hot folder %s can be read again", self.folder)
            self.missing = None
        present: set[str] = set()
        handled = []
        for path in entries:
            if not is_export_name(path.name):
                continue
            try:
                stat = path.stat()
            except OSError:  # gone meanwhile (renamed by its writer)
                continue
            if not S_ISREG(stat.st_mode):
                continue
            present.add(path.name)
            key = (stat.st_size, stat.st_mtime_ns)
            if self._stuck.get(path.name) == key:
                continue
            seen = self._seen.get(path.name)
            if seen is None or seen[0] != key:
                seen = self._seen[path.name] = (key, now)
            if now - seen[1] < self.settle_s:
                continue
            del self._seen[path.name]
            self._stuck.pop(path.name, None)
            result = self._handle(path, publish)
            if result.problem and (result.published or path.exists()):
                self._stuck[path.name] = key
            handled.append(result)
        for gone in (self._seen.keys() | self._stuck.keys()) - present:
            self._seen.pop(gone, None)
            self._stuck.pop(gone, None)
        return handled

    def _handle(self, path: Path, publish: Callable[[Any], None]) -> Handled:
        try:
            messages = self._prepare(path)
        except Exception as exc:  # any file's fault is that file's: the folder goes on
            reason = str(exc) if isinstance(exc, ValueError | OSError) else f"{type(exc).__name__}: {exc}"
            reason = " ".join(reason.splitlines())  # a .reason file and a log line: one line
            if not reason.startswith(path.name):
                reason = f"{path.name}: {reason}"
            log.debug("Export %r refused", path.name, exc_info=True)
            try:
                kept = _set_aside(path, self.folder / REJECTED)
                # "x": a reason file of the same name (made by someone else) is never written over
                with open(kept.with_name(f"{kept.name}.reason"), "x", encoding="utf-8") as out:
                    out.write(f"{reason}\n")
            except OSError as exc:
                return Handled(path.name, False, f"{reason} (and not moved to {REJECTED}/: {exc})")
            return Handled(path.name, False, reason)
        for message in messages:
            publish(message)
        try:
            _set_aside(path, self.folder / DONE)
        except OSError as exc:
            return Handled(path.name, True, f"not moved to {DONE}/ ({exc}): move it by hand")
        return Handled(path.name, True)

    def _prepare(self, path: Path) -> list[SeismicSummary | WaveformChunk]:
        """The export's messages, each one the daemon's decoder accepts; ValueError otherwise."""
        from monitor.seismic.vendor_csv import read_event

        event = read_event(path)
        chunks = split(event.wave, self.site.id, self.sensor.id, event.event_id, event.start)
        # The chunks first: a rate the daemon refuses is said as such, before the summary's filters
        for number, chunk in enumerate(chunks):
            self._check(path, chunk, f"waveform chunk {number} of {len(chunks)}")
        instrument = {"location": self.sensor.location, **event.instrument}
        summary = summary_message(event.wave, chunks, instrument=instrument)
        self._check(path, summary, "summary")
        return [summary, *chunks]

    def _check(self, path: Path, message: SeismicSummary | WaveformChunk, what: str) -> None:
        """ValueError unless the daemon's decoder (monitor.wire.codec.decode, the one place of the
        rules) accepts ``message``. Its time is the daemon's to judge when it arrives: not here."""
        topic, payload = encode(message, signing_key(self.sensor))
        try:
            decode(topic, payload, {self.site.id: self.site}, message.ts, ANY_TIME)
        except DecodeError as exc:
            hint = ""
            if exc.field == "sample_rate":
                low, high = SEISMIC_RATE_RANGE
                hint = f" (minewatch takes {low:.0f} to {high:.0f} samples a second: record at one of them)"
            raise ValueError(f"{path.name}: the daemon would refuse its {what}: {exc}{hint}") from None


def _set_aside(path: Path, into: Path) -> Path:
    """Move ``path`` into the folder ``into`` under a name nothing there has (``a.csv``, else
    ``a-2.csv``, ...): an earlier export of the same name, or a file someone put there, is never
    replaced. Returns where it went."""
    into.mkdir(exist_ok=True)
    for n in itertools.count(1):
        name = path.name if n == 1 else f"{path.stem}-{n}{path.suffix}"
        target = into / name
        if target.exists() or target.with_name(f"{name}.reason").exists():
            continue
        try:
            os.link(path, target)  # fails if the name was taken meanwhile; replace() would not
        except FileExistsError:
            continue
        except OSError:  # no hard links (a FAT stick): checked just above, then moved
            path.rename(target)
            return target
        path.unlink()
        return target
    raise AssertionError("unreachable")
