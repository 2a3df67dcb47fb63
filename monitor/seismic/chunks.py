"""An event's waveforms split into chunks under the packet cap, and joined back (pure).

The edge splits (``split``), the daemon joins what it stored (``join``) and recomputes the
summary from it. A chunk holds whole 4-channel samples, interleaved T, V, L, MIC.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import numpy as np

from monitor.seismic.summary import CHANNELS, Waveform
from monitor.wire.codec import WaveformChunk
from monitor.wire.protocol import AUDIO_FORMATS, KIND_MAX_BYTES

HEADER_ROOM = 1024  # bytes a chunk's frame keeps for its magic, length and JSON header


def split(
    wave: Waveform,
    site: str,
    sensor: str,
    event_id: str,
    ts: datetime,
    max_bytes: int = KIND_MAX_BYTES["waveform"],
    sample_format: str = "f32le",
) -> list[WaveformChunk]:
    """``wave`` as chunks of at most ``max_bytes`` each on the wire (float32 samples: scale 1)."""
    dtype, width = AUDIO_FORMATS[sample_format]
    frame = width * len(CHANNELS)
    per_chunk = max(1, (max_bytes - HEADER_ROOM) // frame)
    n = wave.data.shape[1]
    if sample_format == "f32le":
        scale = (1.0,) * len(CHANNELS)
        counts = wave.data.T.astype(dtype)
    else:  # integers: full scale of each channel's range at the format's largest count
        top = float(np.iinfo(np.dtype(dtype)).max)
        scale = tuple((r / top) if r > 0 else 1.0 for r in wave.ranges)
        counts = np.round(wave.data.T / np.asarray(scale)).clip(-top - 1, top).astype(dtype)
    starts = range(0, n, per_chunk)
    chunks = len(starts)
    return [
        WaveformChunk(
            site,
            sensor,
            event_id,
            ts,
            i,
            chunks,
            start,
            n,
            int(wave.sample_rate),
            sample_format,
            scale,
            tuple(wave.ranges),
            wave.mic_low_hz,
            counts[start : start + per_chunk].tobytes(),
        )
        for i, start in enumerate(starts)
    ]


# What every chunk of one event says alike (their offsets and samples differ).
EVENT_KEYS = ("ts", "event_id", "chunks", "samples_total", "sample_rate", "format", "range", "mic_low_hz")


def disagreement(header: Mapping[str, Any], other: Mapping[str, Any]) -> tuple[str, str] | None:
    """(field, reason) where two chunks' headers do not describe the same event; None if they do."""
    for key in EVENT_KEYS:
        if header[key] != other[key]:
            return key, f"chunk {header['chunk']} says {header[key]!r}, chunk {other['chunk']} {other[key]!r}"
    return None


def join(rows: Sequence[tuple[str | dict[str, Any], bytes]]) -> Waveform:
    """The waveform from its chunks' (header, samples), in any order; ValueError("field: reason")
    when they are not one whole event (a missing or overlapping chunk, differing headers)."""
    headers = [json.loads(h) if isinstance(h, str) else h for h, _ in rows]
    if not headers:
        raise ValueError("chunks: none")
    first = headers[0]
    for h in headers[1:]:
        if (differs := disagreement(h, first)) is not None:
            raise ValueError(f"{differs[0]}: {differs[1]}")
    if len(headers) != first["chunks"]:
        raise ValueError(f"chunks: {len(headers)} of {first['chunks']} arrived")
    total = int(first["samples_total"])
    dtype, _ = AUDIO_FORMATS[first["format"]]
    data = np.full((total, len(CHANNELS)), np.nan)
    filled = np.zeros(total, dtype=bool)
    for h, (_, samples) in zip(headers, rows, strict=True):
        counts = np.frombuffer(samples, dtype=dtype).reshape(-1, len(CHANNELS))
        start = int(h["offset"])
        stop = start + counts.shape[0]
        if stop > total or filled[start:stop].any():
            raise ValueError(f"offset: chunk {h['chunk']} overlaps another or runs past samples_total")
        data[start:stop] = counts * np.asarray(h["scale"], dtype=np.float64)
        filled[start:stop] = True
    if not filled.all():
        raise ValueError(f"offset: samples {int(np.argmin(filled))} onwards are in no chunk")
    ranges = tuple(float(r) for r in first["range"])
    return Waveform(
        float(first["sample_rate"]), np.ascontiguousarray(data.T), ranges, float(first["mic_low_hz"])
    )
