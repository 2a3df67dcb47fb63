"""A seismograph event exported by the vendor's software as CSV (the hot-folder source).

Vendors' exports differ in their headers; minewatch reads one plain layout (docs/PROTOCOL.md,
"Seismographs"), to which each vendor's ASCII export maps line for line::

    # event_id: 2026-06-15-1130
    # start: 2026-06-15T16:29:59.5Z
    # sample_rate: 1024
    # velocity_unit: in/s            (or mm/s)
    # pressure_unit: Pa              (or psi)
    # range: 10, 10, 10, 0.0725      (each channel's full scale, in its unit)
    # mic_low_hz: 2
    # calibrated: 2026-03-02         (any further "# key: value" goes to the instrument record)
    T,V,L,MIC
    0.0012,-0.0004,0.0007,0.0001
    ...

UTF-8, with or without the byte order mark Excel writes. ValueError("<file>:<line>: field:
reason") for anything else: one line, naming what is wrong in the words of whoever exported it.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from monitor.seismic.summary import CHANNELS, MM_PER_IN, Waveform

PA_PER_PSI = 6894.757
VELOCITY = {"in/s": MM_PER_IN, "mm/s": 1.0}
PRESSURE = {"pa": 1.0, "psi": PA_PER_PSI}
REQUIRED = ("event_id", "start", "sample_rate")


@dataclass(frozen=True)
class VendorEvent:
    event_id: str
    start: datetime
    wave: Waveform
    instrument: dict[str, Any] = field(default_factory=dict)


def read_event(path: Path) -> VendorEvent:
    meta: dict[str, str] = {}
    header_line = 0
    # utf-8-sig: Excel saves a CSV "UTF-8" with a byte order mark before the first line
    try:
        with path.open(encoding="utf-8-sig") as lines:
            for number, line in enumerate(lines, 1):
                if line.startswith("#"):
                    key, sep, value = line[1:].partition(":")
                    if not sep:
                        raise ValueError(f"{path.name}:{number}: header: expected '# key: value'")
                    meta[key.strip().lower()] = value.strip()
                    continue
                columns = [c.strip().upper() for c in line.split(",")]
                if columns != list(CHANNELS):
                    raise ValueError(
                        f"{path.name}:{number}: columns: expected T,V,L,MIC, got {line.strip()!r}"
                    )
                header_line = number
                break
    except UnicodeDecodeError as exc:
        raise _not_utf8(path, exc) from None
    for key in REQUIRED:
        if key not in meta:
            raise ValueError(f"{path.name}: {key}: missing from the header")
    if not header_line:
        raise ValueError(f"{path.name}: columns: no T,V,L,MIC line after the header")
    try:
        start = datetime.fromisoformat(meta["start"].replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{path.name}: start: {meta['start']!r} is not an ISO time") from None
    if start.tzinfo is None:
        raise ValueError(f"{path.name}: start: {meta['start']!r} has no UTC offset")
    try:
        rate = float(meta["sample_rate"])
        velocity = VELOCITY[meta.get("velocity_unit", "mm/s").lower()]
        pressure = PRESSURE[meta.get("pressure_unit", "Pa").lower()]
        ranges = [float(x) for x in meta.get("range", "0,0,0,0").split(",")]
        mic_low = float(meta.get("mic_low_hz", "2"))
    except (KeyError, ValueError) as exc:
        raise ValueError(f"{path.name}: header: {exc}") from None
    # The wire carries a whole number of samples a second: 1024.5 would be sent as 1024.
    if not (math.isfinite(rate) and rate > 0 and rate.is_integer()):
        raise ValueError(
            f"{path.name}: sample_rate: {meta['sample_rate']!r} is not a positive whole number"
            " of samples a second"
        )
    data = _samples(path, header_line)
    scale = np.array([velocity, velocity, velocity, pressure])
    try:
        wave = Waveform(
            rate,
            np.ascontiguousarray((data * scale).T),
            tuple(float(r) for r in np.array(ranges) * scale),
            mic_low,
        )
    except ValueError as exc:
        raise ValueError(f"{path.name}: {exc}") from None
    instrument = {k: v for k, v in meta.items() if k not in (*REQUIRED, "velocity_unit", "pressure_unit")}
    return VendorEvent(meta["event_id"], start, wave, instrument)


def _samples(path: Path, header_line: int) -> NDArray[np.float64]:
    """The rows after line ``header_line`` (the T,V,L,MIC line) as (n, 4) float64."""
    try:
        with warnings.catch_warnings():
            # a header-only file: said below in one line, not as numpy's warning on stderr
            warnings.filterwarnings("ignore", "loadtxt: input contained no data", UserWarning)
            data: NDArray[np.float64] = np.loadtxt(
                path, delimiter=",", skiprows=header_line, ndmin=2, encoding="utf-8-sig"
            )
    except UnicodeDecodeError as exc:
        raise _not_utf8(path, exc) from None
    except ValueError as exc:
        # numpy's words ("use `usecols` to select a subset") are not the technician's
        raise ValueError(_bad_row(path, header_line) or f"{path.name}: samples: {exc}") from None
    if data.size == 0:
        raise ValueError(f"{path.name}: samples: none after the T,V,L,MIC line (line {header_line})")
    if data.shape[1] != len(CHANNELS):
        raise ValueError(f"{path.name}: samples: expected 4 columns, got {data.shape[1]}")
    return data


def _not_utf8(path: Path, exc: UnicodeDecodeError) -> ValueError:
    return ValueError(
        f"{path.name}: not UTF-8 text (a byte 0x{exc.object[exc.start]:02x}): export it as UTF-8"
    )


def _bad_row(path: Path, header_line: int) -> str | None:
    """The first row numpy could not read, said for whoever exported the file; None if none is found."""
    with path.open(encoding="utf-8-sig", newline="") as lines:
        rows = lines.read().splitlines(keepends=True)
    for number, row in enumerate(rows[header_line:], header_line + 1):
        values = row.strip().split(",")
        if values == [""]:
            continue
        if len(values) != len(CHANNELS):
            if number == len(rows) and len(values) < len(CHANNELS):
                return (
                    f"{path.name}:{number}: samples: the last row has {len(values)} of the 4 values"
                    " T,V,L,MIC: the file is cut short (read while still being written?); export it"
                    " again, written under another name and renamed once complete"
                )
            return f"{path.name}:{number}: samples: {len(values)} values, expected 4 (T,V,L,MIC)"
        for value in values:
            try:
                float(value)
            except ValueError:
                return f"{path.name}:{number}: samples: {value.strip()[:40]!r} is not a number"
    return None


def write_event(path: Path, event: VendorEvent, velocity_unit: str = "in/s") -> None:
    """The event as the vendor layout (the bench's and the tests' event file)."""
    scale = np.array([VELOCITY[velocity_unit]] * 3 + [1.0])
    ranges = np.array(event.wave.ranges) / scale
    head = [
        f"# event_id: {event.event_id}",
        f"# start: {event.start.isoformat()}",
        f"# sample_rate: {event.wave.sample_rate:g}",
        f"# velocity_unit: {velocity_unit}",
        "# pressure_unit: Pa",
        f"# range: {', '.join(f'{r:g}' for r in ranges)}",
        f"# mic_low_hz: {event.wave.mic_low_hz:g}",
        *(f"# {k}: {v}" for k, v in event.instrument.items()),
        "T,V,L,MIC",
    ]
    with path.open("w", encoding="utf-8") as out:
        out.write("\n".join(head) + "\n")
        np.savetxt(out, (event.wave.data.T / scale), delimiter=",", fmt="%.7g")
