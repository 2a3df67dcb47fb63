"""A blasting seismograph at the edge: an event's waveforms (synthetic from a site law, or a
vendor's export) split under the packet cap, with the summary computed at the edge.

    sensors.seismograph.site_law_event (or monitor.seismic.vendor_csv.read_event)
        ──► monitor.seismic.summary.summarize (the edge's summary)
        ──► event_messages: SeismicSummary + WaveformChunks (monitor.seismic.chunks.split)
        ──► sensors.publisher.Publisher (monitor.wire.codec.encode) ──► broker

The synthetic event is a decaying multi-frequency waveform whose PPV follows the common site
law PPV = K (D / sqrt(W))^-beta (square-root scaled distance: D feet, W pounds per delay,
ISEE Blasters' Handbook); its peak per axis is exact, so a scenario knows the answer.
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from monitor.config import SensorConfig
from monitor.seismic.chunks import split
from monitor.seismic.summary import MM_PER_IN, Waveform, pa_from_db, summarize
from monitor.wire.codec import SeismicSummary, WaveformChunk
from monitor.wire.protocol import KIND_MAX_BYTES, format_ts

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
    payload: dict[str, Any] = {
        "ts": format_ts(ts),
        "event_id": event_id,
        "duration_s": wave.duration_s,
        "sample_rate": int(wave.sample_rate),
        "chunks": len(chunks),
        "summary": summarize(wave).to_json(),
    }
    if blast_id:
        payload["blast_id"] = blast_id
    if instrument:
        payload["instrument"] = instrument
    return [SeismicSummary(site, sensor, event_id, ts, wave.duration_s, payload), *chunks]


def publish_folder(
    folder: Path, site: str, sensor: SensorConfig, publish: Callable[[Any], None]
) -> list[tuple[str, str]]:
    """Publish every vendor CSV export in ``folder`` (oldest name first) and move it to
    ``done/``; one that cannot be read goes to ``rejected/`` beside a ``.reason`` file.
    Returns (file name, problem or "") for each file handled."""
    from monitor.seismic.vendor_csv import read_event

    handled = []
    for path in sorted(folder.glob("*.csv")):
        try:
            event = read_event(path)
        except (ValueError, OSError) as exc:
            kept = _set_aside(path, folder / "rejected")
            # "x": a reason file of the same name (made by someone else) is never written over
            with open(kept.with_name(f"{kept.name}.reason"), "x", encoding="utf-8") as reason:
                reason.write(f"{exc}\n")
            handled.append((path.name, str(exc)))
            continue
        instrument = {"location": sensor.location, **event.instrument}
        for message in event_messages(
            event.wave, site, sensor.id, event.event_id, event.start, instrument=instrument
        ):
            publish(message)
        _set_aside(path, folder / "done")
        handled.append((path.name, ""))
    return handled


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
