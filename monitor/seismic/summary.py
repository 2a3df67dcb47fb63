"""The summary of a seismograph event, computed from its waveforms (numpy, vectorised; scipy's
filters for the C weighting).

A blasting seismograph records three orthogonal geophone channels (transverse, vertical,
longitudinal particle velocity) and a linear microphone (air overpressure). Its event report
gives, per axis, the peak particle velocity (PPV), the zero-crossing frequency of that peak (the
inverse of twice the half-period that holds it, ISEE Field Practice Guidelines for Blasting
Seismographs, 2015), the peak acceleration and displacement and the dominant frequency of the
spectrum; across the axes the peak vector sum (PVS), the largest sqrt(T^2 + V^2 + L^2) of one
sample, which is not the sum (nor the vector sum) of the three axes' peaks, which fall at
different times. Airblast is the largest absolute pressure, in Pa and in dB(L) re 20 uPa, with
the low-frequency limit of the microphone recorded (30 CFR 816.67(b) states its limits by it),
and the largest C-weighted, slow-response (1 s exponential) level of the microphone's pressure,
what a C-weighted instrument would read (816.67(b)(1)'s 105 dBC row): the IEC 61672 C weighting
and time weighting of monitor/acoustics/iec61672.py.

Velocity is in mm/s and pressure in Pa throughout (SI on the wire); the profile chooses how a
finding shows them (in/s or mm/s: ``MM_PER_IN``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from monitor.acoustics.iec61672 import SLOW_TAU_S, c_weighting_sos, exponential_time_weighting

AXES = ("T", "V", "L")  # transverse, vertical, longitudinal (the seismograph's own order)
MIC = "MIC"
CHANNELS = (*AXES, MIC)
MM_PER_IN = 25.4
G_MM_S2 = 9806.65  # standard gravity in mm/s^2 (acceleration is reported in g)
P_REF_PA = 20e-6
CLIP_FRACTION = 0.999  # a sample at 99.9 % of the channel's range or beyond is clipped
MIN_SAMPLE_RATE = 1024


def db_from_pa(pa: float) -> float:
    """Sound pressure level of a peak pressure: 20 log10(p / 20 uPa), dB(L) for a linear microphone."""
    return -math.inf if pa <= 0 else 20.0 * math.log10(pa / P_REF_PA)


def pa_from_db(db: float) -> float:
    return float(P_REF_PA * 10.0 ** (db / 20.0))


@dataclass(frozen=True)
class Waveform:
    """One event's samples: ``data`` is (4, n) float64, channels T, V, L (mm/s) and MIC (Pa).

    ``ranges``: each channel's full scale in its unit (clipping is judged against it; 0: unknown).
    """

    sample_rate: float
    data: NDArray[np.float64] = field(repr=False)
    ranges: tuple[float, ...] = (0.0, 0.0, 0.0, 0.0)
    mic_low_hz: float = 2.0  # the microphone's low-frequency limit (-3 dB)

    def __post_init__(self) -> None:
        if self.data.ndim != 2 or self.data.shape[0] != len(CHANNELS):
            raise ValueError(f"data: expected 4 channels (T, V, L, MIC) by samples, got {self.data.shape}")
        if self.data.shape[1] < 4:
            raise ValueError("data: fewer than 4 samples")
        if len(self.ranges) != len(CHANNELS):
            raise ValueError(f"ranges: expected 4 (T, V, L, MIC), got {len(self.ranges)}")
        if not self.sample_rate > 0:
            raise ValueError("sample_rate: must be positive")

    @property
    def duration_s(self) -> float:
        return float(self.data.shape[1] / self.sample_rate)


@dataclass(frozen=True, slots=True)
class AxisSummary:
    axis: str
    ppv_mm_s: float
    ppv_time_s: float  # from the record's first sample
    zc_hz: float | None  # zero-crossing frequency of the half-cycle holding the peak (None: no crossing)
    fft_hz: float  # dominant frequency of the spectrum
    accel_g: float
    disp_mm: float
    clipped: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "axis": self.axis,
            "ppv_mm_s": round(self.ppv_mm_s, 6),
            "ppv_time_s": round(self.ppv_time_s, 6),
            "zc_hz": None if self.zc_hz is None else round(self.zc_hz, 4),
            "fft_hz": round(self.fft_hz, 4),
            "accel_g": round(self.accel_g, 6),
            "disp_mm": round(self.disp_mm, 6),
            "clipped": self.clipped,
        }


@dataclass(frozen=True, slots=True)
class EventSummary:
    sample_rate: float
    duration_s: float
    axes: tuple[AxisSummary, ...]
    pvs_mm_s: float
    pvs_time_s: float
    airblast_pa: float
    airblast_db: float
    airblast_time_s: float
    airblast_zc_hz: float | None
    mic_low_hz: float
    mic_clipped: bool
    airblast_dbc_slow: float | None = None  # largest C-weighted slow level (None: silent microphone)

    @property
    def clipped(self) -> tuple[str, ...]:
        return tuple(a.axis for a in self.axes if a.clipped) + ((MIC,) if self.mic_clipped else ())

    def axis(self, name: str) -> AxisSummary:
        return next(a for a in self.axes if a.axis == name)

    def to_json(self) -> dict[str, Any]:
        return {
            "sample_rate": self.sample_rate,
            "duration_s": round(self.duration_s, 6),
            "axes": [a.to_json() for a in self.axes],
            "pvs_mm_s": round(self.pvs_mm_s, 6),
            "pvs_time_s": round(self.pvs_time_s, 6),
            "airblast_pa": round(self.airblast_pa, 6),
            "airblast_db": round(self.airblast_db, 3) if math.isfinite(self.airblast_db) else None,
            "airblast_time_s": round(self.airblast_time_s, 6),
            "airblast_zc_hz": None if self.airblast_zc_hz is None else round(self.airblast_zc_hz, 4),
            "mic_low_hz": self.mic_low_hz,
            "airblast_dbc_slow": None if self.airblast_dbc_slow is None else round(self.airblast_dbc_slow, 3),
            "clipped": list(self.clipped),
        }


def c_slow_max_db(pressure_pa: NDArray[np.float64], rate: float) -> float | None:
    """The largest C-weighted, slow-response level of a pressure record in dB(C) re 20 uPa
    (LCSmax): the C weighting, then the 1 s exponential mean square from rest. None when silent."""
    # Imported here: this module's units and waveform type are read by the portal and reports,
    # which would otherwise load scipy.signal (~1 s) on their first blast report or status page.
    from scipy import signal as sps

    weighted = sps.sosfilt(c_weighting_sos(round(rate)), pressure_pa)
    slow, _ = exponential_time_weighting(np.square(weighted), rate, SLOW_TAU_S)
    largest = float(slow.max())
    return 10.0 * math.log10(largest / (P_REF_PA * P_REF_PA)) if largest > 0 else None


def _zero_crossing_hz(x: NDArray[np.float64], peak: int, rate: float) -> float | None:
    """1 / (2 x the half-period around sample ``peak``): the crossings either side of it,
    placed between samples by linear interpolation (a 30 Hz wave at 1,024 samples/s has 17
    samples a half-period: a whole-sample estimate would be off by up to 12 %).

    A sample that is exactly 0 is a crossing at that sample: a record at rest before the motion
    arrives (or an integer channel reading 0) starts its first half-cycle there. Taking only
    changes between negative and non-negative, as this did before, found no crossing before a
    peak in the first half-cycle after rest when that half-cycle is positive (issue 27: the
    intake test's V and L axes; tests/monitor/seismic/test_summary.py).
    """
    sign = np.sign(x)
    between = np.flatnonzero(sign[:-1] * sign[1:] < 0)  # strictly opposite signs at i and i+1
    times = np.concatenate(
        [between + x[between] / (x[between] - x[between + 1]), np.flatnonzero(sign == 0).astype(np.float64)]
    )
    before, after = times[times < peak], times[times > peak]
    if before.size == 0 or after.size == 0:
        return None
    half = (float(after.min()) - float(before.max())) / rate
    return None if half <= 0 else float(1.0 / (2.0 * half))


def _detrended(y: NDArray[np.float64]) -> NDArray[np.float64]:
    """``y`` less its least-squares straight line (the integration's drift), per row."""
    n = y.shape[-1]
    t = np.arange(n, dtype=np.float64) - (n - 1) / 2.0
    slope = (y @ t) / float(t @ t)
    detrended: NDArray[np.float64] = y - y.mean(axis=-1, keepdims=True) - slope[..., None] * t
    return detrended


def summarize(wave: Waveform) -> EventSummary:
    """The event's summary (module docstring); deterministic for the same samples."""
    rate = float(wave.sample_rate)
    data = wave.data
    velocity = data[:3]
    mic = data[3]
    absolute = np.abs(data)
    peak_index = absolute.argmax(axis=1)
    peaks = absolute[np.arange(4), peak_index]
    # acceleration: central differences (np.gradient), mm/s^2 -> g
    accel = np.abs(np.gradient(velocity, 1.0 / rate, axis=1)).max(axis=1) / G_MM_S2
    # displacement: the integral of velocity less its mean (the record starts mid-motion at
    # the pre-trigger), then less its drift
    displacement = np.cumsum(velocity - velocity.mean(axis=1, keepdims=True), axis=1) / rate
    disp = np.abs(_detrended(displacement)).max(axis=1)
    # dominant frequency: the largest bin of each axis's spectrum, DC left out
    spectrum = np.abs(np.fft.rfft(velocity - velocity.mean(axis=1, keepdims=True), axis=1))
    spectrum[:, 0] = 0.0
    freqs = np.fft.rfftfreq(data.shape[1], 1.0 / rate)
    dominant = freqs[spectrum.argmax(axis=1)]
    vector = np.sqrt(np.einsum("ij,ij->j", velocity, velocity))
    pvs_index = int(vector.argmax())
    ranges = np.asarray(wave.ranges, dtype=np.float64)
    clipped = (ranges > 0) & (peaks >= CLIP_FRACTION * ranges)
    axes = tuple(
        AxisSummary(
            axis=name,
            ppv_mm_s=float(peaks[i]),
            ppv_time_s=float(peak_index[i] / rate),
            zc_hz=_zero_crossing_hz(velocity[i], int(peak_index[i]), rate),
            fft_hz=float(dominant[i]),
            accel_g=float(accel[i]),
            disp_mm=float(disp[i]),
            clipped=bool(clipped[i]),
        )
        for i, name in enumerate(AXES)
    )
    airblast = float(peaks[3])
    return EventSummary(
        sample_rate=rate,
        duration_s=wave.duration_s,
        axes=axes,
        pvs_mm_s=float(vector[pvs_index]),
        pvs_time_s=pvs_index / rate,
        airblast_pa=airblast,
        airblast_db=db_from_pa(airblast),
        airblast_time_s=float(peak_index[3] / rate),
        airblast_zc_hz=_zero_crossing_hz(mic, int(peak_index[3]), rate),
        mic_low_hz=float(wave.mic_low_hz),
        mic_clipped=bool(clipped[3]),
        airblast_dbc_slow=c_slow_max_db(mic, rate),
    )
