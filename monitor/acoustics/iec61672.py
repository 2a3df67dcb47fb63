"""Sound level metrics per IEC 61672-1:2013 (frequency weightings A/C/Z, time weightings F/S).

Pure functions plus one streaming meter; numpy/scipy only, no I/O and no clock. The meter
filters with monitor.acoustics.iir (numpy alone); scipy designs the filters and serves the whole-signal
functions (apply_weighting, exponential_time_weighting, laeq_per_period).

Levels are expressed against a *calibration offset*: the level in dB that a full-scale sine
(peak amplitude 1.0, mean square 0.5) represents.  A recording's mean square ``ms`` therefore reads
``calibration_db + 10*log10(ms / 0.5)`` and a peak amplitude ``p`` reads
``calibration_db + 20*log10(p * sqrt(2))``.

See docs/ACOUSTICS.md for how the digital weighting filters were designed and verified.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Literal, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, DTypeLike, NDArray

from monitor.acoustics.iir import StreamingFilter
from monitor.acoustics.overload import UNKNOWN_FORMAT_CLIP_LEVEL, OverloadDetector
from rules.lazy import lazy_import

if TYPE_CHECKING:
    from scipy import optimize
    from scipy import signal as sps
else:
    # scipy.signal costs several times numpy's import and scipy.optimize is only for designing
    # filters (which monitor.acoustics.filter_cache usually reads instead) and for the whole-signal
    # reference functions: imported at first use. The meter filters with monitor.acoustics.iir.
    optimize = lazy_import("scipy.optimize")
    sps = lazy_import("scipy.signal")

FloatArray = NDArray[np.float64]
Weighting = Literal["A", "C", "Z"]

# IEC 61672-1:2013 clause E.2/E.3: pole frequencies and the 1 kHz normalisation constants.
IEC_F1_HZ = 20.598997
IEC_F2_HZ = 107.65265
IEC_F3_HZ = 737.86223
IEC_F4_HZ = 12194.217
A1000_DB = -2.000
C1000_DB = -0.062

# Exponential time constants, IEC 61672-1 clause 5.7.
FAST_TAU_S = 0.125
SLOW_TAU_S = 1.0

# Mean square of a full-scale sine: the signal that reads exactly ``calibration_db``.
FULL_SCALE_SINE_MS = 0.5

# Nominal one-third-octave mid-band frequencies 10 Hz ... 20 kHz (IEC 61672-1 Table 3).
NOMINAL_THIRD_OCTAVE_HZ: tuple[float, ...] = (
    10,
    12.5,
    16,
    20,
    25,
    31.5,
    40,
    50,
    63,
    80,
    100,
    125,
    160,
    200,
    250,
    315,
    400,
    500,
    630,
    800,
    1000,
    1250,
    1600,
    2000,
    2500,
    3150,
    4000,
    5000,
    6300,
    8000,
    10000,
    12500,
    16000,
    20000,
)

# The weighting fit covers 10 Hz up to 0.45 fs, but never beyond the upper edge of the 20 kHz band:
# no nominal frequency lies above it, and fitting further would trade in-band accuracy away.
_FIT_LOW_HZ = 10.0
_FIT_CAP_HZ = 22_400.0
_FIT_FRACTION_OF_FS = 0.45
# Pole radius bound of the fitted section, so the design can never end up marginally stable.
_MAX_POLE_RADIUS = 0.99
# Digital silence (mean square 0) reads this far below the calibration level instead of -inf:
# 200 dB under a full-scale sine, well below the quantisation noise of even 32-bit integer audio.
SILENCE_BELOW_CALIBRATION_DB = 200.0
# Settling excluded from LAFmin: after 5 tau the Fast detector is within 0.03 dB of its final value.
_FAST_SETTLING_S = 5 * FAST_TAU_S
# Samples per internal processing chunk: 1 MiB float64 temporaries, reused by the allocator
# (whole 10 s blocks cost more in page faults; much smaller chunks in per-call overhead).
_CHUNK_SAMPLES = 131072
# Time-weighted values are evaluated on a grid no coarser than this (see SoundLevelMeter).
_TIME_WEIGHTING_GRID_S = 0.0005


# --------------------------------------------------------------------------------------------
# Analytic weightings (IEC 61672-1 equations E.1 ... E.6)
# --------------------------------------------------------------------------------------------


def a_weighting_db(frequency_hz: ArrayLike) -> FloatArray:
    """A-weighting design goal in dB at ``frequency_hz`` (IEC 61672-1 eq. E.6), 0 dB at 1 kHz."""
    f2 = np.square(np.asarray(frequency_hz, dtype=np.float64))
    with np.errstate(divide="ignore"):
        ratio = (IEC_F4_HZ**2 * f2**2) / (
            (f2 + IEC_F1_HZ**2) * np.sqrt((f2 + IEC_F2_HZ**2) * (f2 + IEC_F3_HZ**2)) * (f2 + IEC_F4_HZ**2)
        )
        return np.asarray(20.0 * np.log10(ratio) - A1000_DB, dtype=np.float64)


def c_weighting_db(frequency_hz: ArrayLike) -> FloatArray:
    """C-weighting design goal in dB at ``frequency_hz`` (IEC 61672-1 eq. E.1), 0 dB at 1 kHz."""
    f2 = np.square(np.asarray(frequency_hz, dtype=np.float64))
    with np.errstate(divide="ignore"):
        ratio = (IEC_F4_HZ**2 * f2) / ((f2 + IEC_F1_HZ**2) * (f2 + IEC_F4_HZ**2))
        return np.asarray(20.0 * np.log10(ratio) - C1000_DB, dtype=np.float64)


def weighting_db(weighting: Weighting, frequency_hz: ArrayLike) -> FloatArray:
    """Analytic design goal of ``weighting`` ('A', 'C' or 'Z') in dB."""
    if weighting == "A":
        return a_weighting_db(frequency_hz)
    if weighting == "C":
        return c_weighting_db(frequency_hz)
    if weighting == "Z":
        return np.zeros(np.shape(frequency_hz), dtype=np.float64)
    raise ValueError(f"unknown frequency weighting {weighting!r} (expected 'A', 'C' or 'Z')")


# --------------------------------------------------------------------------------------------
# Digital weighting filters
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WeightingFilters:
    """Digital A and C weighting filters for one sample rate, as second-order sections.

    ``sos_a = sos_c + sos_a_from_c``: the A filter is the C filter followed by one extra section
    (the f2/f3 poles and two zeros at DC), so a meter needing both runs three sections, not five.
    """

    sample_rate: int
    sos_a: FloatArray
    sos_c: FloatArray
    sos_a_from_c: FloatArray
    fit_upper_hz: float
    max_error_a_db: float
    max_error_c_db: float


def _bilinear_section(zeros: Sequence[float], poles: Sequence[float], fs: float) -> FloatArray:
    z, p, k = sps.bilinear_zpk(np.asarray(zeros), np.asarray(poles), 1.0, fs)
    return np.asarray(sps.zpk2sos(z, p, k), dtype=np.float64)


def _section_db(sos: FloatArray, frequency_hz: FloatArray, fs: float) -> FloatArray:
    _, response = sps.sosfreqz(sos, worN=2 * np.pi * frequency_hz / fs)
    return np.asarray(20.0 * np.log10(np.abs(response)), dtype=np.float64)


def _biquad_coefficients(params: FloatArray) -> tuple[float, float, float, float]:
    """Map unconstrained parameters to a biquad with poles inside radius 0.99 and zeros inside
    the unit circle (minimum phase, like the analog weighting), via the stability triangle."""
    u, v, p, q = (float(x) for x in params)
    r = _MAX_POLE_RADIUS
    a2 = r * r * math.tanh(u)
    a1 = (r + a2 / r) * math.tanh(v)
    b2 = math.tanh(p)
    b1 = (1.0 + b2) * math.tanh(q)
    return a1, a2, b1, b2


def _fit_grid(fs: float) -> tuple[FloatArray, float]:
    upper = min(_FIT_FRACTION_OF_FS * fs, _FIT_CAP_HZ)
    # Log spacing resolves the low end, linear spacing the top of the band where bilinear errs.
    grid = np.unique(np.concatenate([np.geomspace(_FIT_LOW_HZ, upper, 300), np.linspace(1000.0, upper, 300)]))
    return grid, upper


def check_sample_rate(sample_rate: int) -> None:
    """ValueError unless the meter's filters can be designed for ``sample_rate``."""
    if not 8000 <= sample_rate <= 400_000:
        raise ValueError(f"sample rate {sample_rate} Hz outside the supported 8 kHz ... 400 kHz")


@lru_cache(maxsize=16)
def design_weighting_filters(sample_rate: int) -> WeightingFilters:
    """Design A and C weighting filters for ``sample_rate`` (cached; deterministic).

    The low-frequency poles (f1 double, f2, f3) and the zeros at DC are mapped with the bilinear
    transform, which is exact enough far below Nyquist.  The f4 double pole, whose bilinear image
    is what makes the plain design fall ~6 dB short near Nyquist, is replaced by one biquad fitted
    jointly to the A and C design goals: Levenberg-Marquardt least squares on the dB error over a
    dense log+linear grid from 10 Hz to min(0.45 fs, 22.4 kHz), then a few Lawson reweightings
    towards the minimax error.  Overall gains are finally normalised to exactly 0 dB at 1 kHz.
    """
    fs = float(sample_rate)
    check_sample_rate(sample_rate)
    w1, w2, w3 = (2 * np.pi * f for f in (IEC_F1_HZ, IEC_F2_HZ, IEC_F3_HZ))
    section_f1 = _bilinear_section([0.0, 0.0], [-w1, -w1], fs)
    section_f23 = _bilinear_section([0.0, 0.0], [-w2, -w3], fs)

    grid, upper = _fit_grid(fs)
    residual_c = c_weighting_db(grid) - _section_db(section_f1, grid, fs)
    residual_a = a_weighting_db(grid) - _section_db(section_f1, grid, fs) - _section_db(section_f23, grid, fs)
    ez = np.exp(-1j * 2 * np.pi * grid / fs)
    n = grid.size

    def fitted_db(params: FloatArray) -> FloatArray:
        a1, a2, b1, b2 = _biquad_coefficients(params[2:])
        h = (1.0 + b1 * ez + b2 * ez**2) / (1.0 + a1 * ez + a2 * ez**2)
        return np.asarray(20.0 * np.log10(np.abs(h)), dtype=np.float64)

    def errors(params: FloatArray) -> FloatArray:
        shape = fitted_db(params)
        return np.concatenate([params[0] + shape - residual_c, params[1] + shape - residual_a])

    weights = np.ones(2 * n)

    def weighted(params: FloatArray) -> FloatArray:
        return errors(params) * weights

    # Start from the matched-z image of the f4 double pole and flat zeros.
    r4 = math.exp(-2 * np.pi * IEC_F4_HZ / fs)
    start = np.array(
        [
            residual_c[0],
            residual_a[0],
            math.atanh(r4 * r4 / _MAX_POLE_RADIUS**2),
            math.atanh(-2 * r4 / (_MAX_POLE_RADIUS + r4 * r4 / _MAX_POLE_RADIUS)),
            0.0,
            0.0,
        ]
    )
    solution = optimize.least_squares(weighted, start, method="lm", xtol=1e-12, ftol=1e-12).x
    best, best_max = solution, float(np.max(np.abs(errors(solution))))
    for _ in range(8):
        e = np.abs(errors(solution))
        weights = weights * np.sqrt(e / e.max() + 1e-3)
        weights /= weights.max()
        solution = optimize.least_squares(weighted, solution, method="lm", xtol=1e-12, ftol=1e-12).x
        current = float(np.max(np.abs(errors(solution))))
        if current < best_max:
            best, best_max = solution, current

    a1, a2, b1, b2 = _biquad_coefficients(best[2:])
    section_f4 = np.array([[1.0, b1, b2, 1.0, a1, a2]])
    sos_c = np.vstack([section_f1, section_f4])
    sos_a = np.vstack([section_f1, section_f23, section_f4])
    # Normalise at the 1 kHz reference frequency (IEC 61672-1 clause 5.5.9), so calibration is exact.
    one_khz = np.array([1000.0])
    gain_c = 10 ** (-_section_db(sos_c, one_khz, fs)[0] / 20)
    gain_a = 10 ** (-_section_db(sos_a, one_khz, fs)[0] / 20)
    sos_c[0, :3] *= gain_c
    sos_a[0, :3] *= gain_a
    sos_a_from_c = section_f23.copy()
    sos_a_from_c[0, :3] *= gain_a / gain_c

    for sos in (sos_a, sos_c):
        if np.max(np.abs(sps.sos2zpk(sos)[1])) >= 1.0:
            raise RuntimeError(f"weighting design for {sample_rate} Hz is unstable")  # pragma: no cover
    error_a = float(np.max(np.abs(_section_db(sos_a, grid, fs) - a_weighting_db(grid))))
    error_c = float(np.max(np.abs(_section_db(sos_c, grid, fs) - c_weighting_db(grid))))
    for array in (sos_a, sos_c, sos_a_from_c):
        array.setflags(write=False)
    return WeightingFilters(sample_rate, sos_a, sos_c, sos_a_from_c, upper, error_a, error_c)


def weighting_sos(sample_rate: int, weighting: Weighting) -> FloatArray:
    """Second-order sections of the digital ``weighting`` filter; Z is an identity section."""
    if weighting == "Z":
        return np.array([[1.0, 0.0, 0.0, 1.0, 0.0, 0.0]])
    filters = design_weighting_filters(sample_rate)
    # Copies: the cached arrays are read-only, which scipy's sosfilt rejects.
    if weighting == "A":
        return filters.sos_a.copy()
    if weighting == "C":
        return filters.sos_c.copy()
    raise ValueError(f"unknown frequency weighting {weighting!r} (expected 'A', 'C' or 'Z')")


# The lowest audio rate design_weighting_filters serves; below it (a blasting seismograph's
# microphone, 1,024 samples/s and up) c_weighting_sos keeps the C weighting's f1 double pole alone.
_AUDIO_RATE_MIN = 8000


@lru_cache(maxsize=16)
def _c_weighting_sos_low_rate(sample_rate: int) -> FloatArray:
    # The f4 double pole (12.2 kHz) lies so far above the band of a blast's airblast (below a few
    # hundred Hz) that leaving it out errs by under 0.05 dB up to 500 Hz (and within class 1
    # tolerances up to 0.45 fs): the same bilinear f1 section as design_weighting_filters, with
    # the analog C weighting's gain at 1 kHz.
    w1 = 2 * np.pi * IEC_F1_HZ
    sos = _bilinear_section([0.0, 0.0], [-w1, -w1], float(sample_rate))
    sos[0, :3] *= 10 ** (-C1000_DB / 20)
    sos.setflags(write=False)
    return sos


def c_weighting_sos(sample_rate: int) -> FloatArray:
    """Second-order sections of the C weighting at any rate from 1,024 samples/s: the audio design
    (``weighting_sos``) from 8 kHz, below it the f1 high-pass alone (``_c_weighting_sos_low_rate``;
    tests/monitor/acoustics/test_iec61672.py bounds its error against the design goal)."""
    if sample_rate >= _AUDIO_RATE_MIN:
        return weighting_sos(sample_rate, "C")
    if sample_rate < 1024:  # a seismograph's least (monitor/wire/protocol.py SEISMIC_RATE_RANGE)
        raise ValueError(f"sample rate {sample_rate} Hz below the 1024 Hz a C weighting is designed for")
    return _c_weighting_sos_low_rate(sample_rate).copy()


def weighting_response_db(sample_rate: int, weighting: Weighting, frequency_hz: ArrayLike) -> FloatArray:
    """Magnitude response in dB of the digital ``weighting`` filter at ``frequency_hz``."""
    f = np.atleast_1d(np.asarray(frequency_hz, dtype=np.float64))
    return _section_db(weighting_sos(sample_rate, weighting), f, float(sample_rate))


def apply_weighting(samples: ArrayLike, sample_rate: int, weighting: Weighting) -> FloatArray:
    """Frequency-weight a whole signal (zero initial state), in float64."""
    x = np.asarray(samples, dtype=np.float64)
    if weighting == "Z":
        return x.copy()
    return np.asarray(sps.sosfilt(weighting_sos(sample_rate, weighting), x), dtype=np.float64)


# --------------------------------------------------------------------------------------------
# Time weighting
# --------------------------------------------------------------------------------------------


def time_weighting_pole(sample_rate: float, tau_s: float) -> float:
    """Pole of the one-pole exponential averager with time constant ``tau_s``."""
    return math.exp(-1.0 / (sample_rate * tau_s))


def exponential_time_weighting(
    squared: ArrayLike, sample_rate: float, tau_s: float, state: float = 0.0
) -> tuple[FloatArray, float]:
    """Exponentially time-weighted mean square (IEC 61672-1 eq. 2), sample by sample.

    ``squared`` is the squared frequency-weighted signal; ``state`` the previous output.  Returns
    the output and the state to carry into the next call.
    """
    pole = time_weighting_pole(sample_rate, tau_s)
    x = np.asarray(squared, dtype=np.float64)
    # lfilter's zi for y[n] = pole*y[n-1] + (1-pole)*x[n] is pole * y[-1].
    y, _ = sps.lfilter([1.0 - pole], [1.0, -pole], x, zi=np.array([pole * state]))
    last = float(y[-1]) if y.size else state
    return np.asarray(y, dtype=np.float64), last


# --------------------------------------------------------------------------------------------
# Level conversion
# --------------------------------------------------------------------------------------------


def mean_square_to_db(mean_square: float, calibration_db: float, floor_db: float | None = None) -> float:
    """Level of a mean square (full scale = amplitude 1.0), never below ``floor_db``
    (default: calibration_db - 200 dB, see SILENCE_BELOW_CALIBRATION_DB)."""
    floor = calibration_db - SILENCE_BELOW_CALIBRATION_DB if floor_db is None else floor_db
    if math.isnan(mean_square):
        return math.nan
    if mean_square <= 0.0:  # digital silence: log10(0) would be -inf
        return floor
    return max(floor, calibration_db + 10.0 * math.log10(mean_square / FULL_SCALE_SINE_MS))


def peak_to_db(peak: float, calibration_db: float, floor_db: float | None = None) -> float:
    """Level of a peak amplitude; a full-scale sine peak reads calibration + 3.01 dB."""
    return mean_square_to_db(peak * peak, calibration_db, floor_db)


# --------------------------------------------------------------------------------------------
# Streaming meter
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PeriodLevels:
    """Levels of one measurement period, in dB.  ``LAFmin`` is NaN while the Fast detector is
    still settling after the start of the stream (first 0.625 s)."""

    start_s: float
    duration_s: float
    LAeq: float
    LAFmax: float
    LASmax: float
    LAFmin: float
    LCeq: float
    LCpeak: float
    LZpeak: float
    LZeq: float
    overload: bool = False  # the signal reached full scale in the period (monitor.acoustics.overload)

    def as_dict(self) -> dict[str, float]:
        return {name: getattr(self, name) for name in PERIOD_FIELDS}


PERIOD_FIELDS: tuple[str, ...] = (
    "start_s",
    "LAeq",
    "LAFmax",
    "LASmax",
    "LAFmin",
    "LCeq",
    "LCpeak",
    "LZpeak",
    "LZeq",
)


def _time_weighting_step(period_samples: int, sample_rate: int) -> int:
    """Largest divisor of the period length not above a 0.5 ms grid (see SoundLevelMeter)."""
    limit = max(1, int(sample_rate * _TIME_WEIGHTING_GRID_S))
    return next(d for d in range(min(limit, period_samples), 0, -1) if period_samples % d == 0)


class SoundLevelMeter:
    """Streaming integrating-averaging sound level meter (IEC 61672-1 class 1 design goals).

    Feed blocks of any length to :meth:`process`; filter and detector states carry across blocks,
    so the split into blocks does not change the output beyond rounding.  One
    :class:`PeriodLevels` is emitted per complete period; :meth:`flush` emits the partial last one.

    The F and S detectors are exact one-pole exponential averagers of the squared A-weighted
    signal, but to save two full-rate recursive passes they are evaluated on a grid of ``step``
    samples (<= 0.5 ms, a divisor of the period length): the energy of each grid cell is
    exponentially weighted with a small matrix product and the recursion
    ``y[k] = pole**step * y[k-1] + (1 - pole) * cell[k]`` runs at the grid rate (monitor.acoustics.iir,
    state carried).  The values on the grid are exactly those of the sample-rate detector; only
    the max/min search is restricted to the grid, which can miss a peak by at most the decay over
    one step (0.017 dB for Fast at 0.5 ms).

    ``dtype`` (float32 or float64) is the processing precision of the filters; energies are
    accumulated in float64.  No level is reported below ``level_floor_db`` (default: calibration
    minus 200 dB), so digital silence reads that floor instead of -inf.  ``filters``: the
    weighting filters for ``sample_rate`` when the caller has them already (monitor.acoustics.filter_cache
    keeps them on disk); designed here otherwise. ``clip_level``: the magnitude from which a
    sample of the source's format is at full scale (monitor.acoustics.overload.clip_level); a
    period holding a run of such samples is ``overload``.
    """

    def __init__(
        self,
        sample_rate: int,
        period_s: float = 1.0,
        calibration_db: float = 94.0,
        dtype: DTypeLike = np.float64,
        level_floor_db: float | None = None,
        filters: WeightingFilters | None = None,
        clip_level: float = UNKNOWN_FORMAT_CLIP_LEVEL,
    ) -> None:
        if period_s < 0.1 - 1e-9:
            raise ValueError(f"period {period_s} s is shorter than the 0.1 s minimum")
        self.sample_rate = int(sample_rate)
        requested = np.dtype(dtype)
        if requested not in (np.dtype(np.float32), np.dtype(np.float64)):
            raise ValueError(f"dtype must be float32 or float64, not {requested}")
        self.dtype: np.dtype[np.floating] = np.dtype(np.float32 if requested == np.float32 else np.float64)
        self.calibration_db = float(calibration_db)
        self.level_floor_db = (
            self.calibration_db - SILENCE_BELOW_CALIBRATION_DB if level_floor_db is None else level_floor_db
        )
        self.period_samples = round(period_s * self.sample_rate)
        if filters is None:
            filters = design_weighting_filters(self.sample_rate)
        elif filters.sample_rate != self.sample_rate:
            raise ValueError(f"filters designed for {filters.sample_rate} Hz, not {self.sample_rate} Hz")
        # One system, two outputs: the C-weighted signal and (one more section) the A-weighted.
        self._weighting = StreamingFilter.from_sections(filters.sos_c, filters.sos_a_from_c, dtype=self.dtype)

        self.step = _time_weighting_step(self.period_samples, self.sample_rate)
        # Whole filter blocks in every chunk too: no short remainder to filter on its own.
        unit = math.lcm(self.step, self._weighting.block)
        self._chunk = unit * max(1, _CHUNK_SAMPLES // unit)
        poles = [time_weighting_pole(self.sample_rate, tau) for tau in (FAST_TAU_S, SLOW_TAU_S)]
        # Column j weights a cell's squared samples by their decay to the cell's last sample;
        # the last column (ones) gives the plain cell energy for LAeq.
        exponents = np.arange(self.step - 1, -1, -1, dtype=np.float64)
        self._cell_weights = np.column_stack(
            [(1.0 - p) * p**exponents for p in poles] + [np.ones(self.step)]
        ).astype(self.dtype)
        # Fast, Slow: y[k] = pole**step * y[k-1] + cell[k]; their state is the mean square at
        # the last grid point.
        self._detectors = [StreamingFilter.first_order(p**self.step) for p in poles]
        self._settled_cell = math.ceil(_FAST_SETTLING_S * self.sample_rate / self.step)

        self._overload = OverloadDetector(clip_level)
        self._pending = np.empty(0, dtype=self.dtype)  # raw samples not yet forming a whole cell
        self._samples_done = 0  # samples already folded into cells
        self._periods_emitted = 0
        self._reset_period()

    # -- public API ---------------------------------------------------------------------------

    def process(self, block: ArrayLike) -> list[PeriodLevels]:
        """Consume ``block`` (1-D samples, full scale 1.0); return the periods it completed."""
        x = np.asarray(block, dtype=self.dtype)
        if x.ndim != 1:
            raise ValueError(f"expected a 1-D block of samples, got shape {x.shape}")
        if x.size == 0:
            return []
        if self._pending.size:
            x = np.concatenate([self._pending, x])
        whole = (x.size // self.step) * self.step
        self._pending = x[whole:].copy()
        out: list[PeriodLevels] = []
        # Work through cache-sized chunks: large temporaries would cost more in page faults and
        # memory traffic than the filtering itself.
        for start in range(0, whole, self._chunk):
            out.extend(self._consume_cells(x[start : min(start + self._chunk, whole)]))
        return out

    def flush(self) -> list[PeriodLevels]:
        """Emit the partial last period (if any samples are left) and reset period accumulators."""
        out: list[PeriodLevels] = []
        if self._pending.size:
            leftover, self._pending = self._pending, np.empty(0, dtype=self.dtype)
            self._consume_partial_cell(leftover)
        if self._period_filled:
            out.append(self._finish_period())
        return out

    # -- internals ----------------------------------------------------------------------------

    def _reset_period(self) -> None:
        self._period_filled = 0
        self._sum_a = 0.0
        self._sum_c = 0.0
        self._sum_z = 0.0
        self._fast_max = 0.0
        self._slow_max = 0.0
        self._fast_min = math.inf
        self._peak_c = 0.0
        self._peak_z = 0.0
        self._overloaded = False

    def _filter(self, x: NDArray[np.floating]) -> tuple[NDArray[np.floating], NDArray[np.floating]]:
        c, a = self._weighting.process(x)
        return a, c

    def _consume_cells(self, x: NDArray[np.floating]) -> list[PeriodLevels]:
        a, c = self._filter(x)
        a_squared = a * a
        cells = a_squared.reshape(-1, self.step) @ self._cell_weights  # (n_cells, 3)
        fast, slow = self._run_detectors(cells[:, 0], cells[:, 1], self.step)
        return self._accumulate(x, c, cells[:, 2], fast, slow)

    def _consume_partial_cell(self, x: NDArray[np.floating]) -> None:
        a, c = self._filter(x)
        a_squared = (a * a).astype(np.float64)
        exponents = np.arange(x.size - 1, -1, -1, dtype=np.float64)
        weights = [(1.0 - p) * p**exponents for p in self._poles()]
        fast, slow = self._run_detectors(
            np.array([a_squared @ weights[0]]), np.array([a_squared @ weights[1]]), x.size
        )
        self._accumulate(x, c, np.array([a_squared.sum()]), fast, slow)

    def _poles(self) -> list[float]:
        return [time_weighting_pole(self.sample_rate, tau) for tau in (FAST_TAU_S, SLOW_TAU_S)]

    def _run_detectors(
        self, fast_cells: NDArray[np.floating], slow_cells: NDArray[np.floating], cell_length: int
    ) -> tuple[FloatArray, FloatArray]:
        outputs: list[FloatArray] = []
        for detector, cells, pole in zip(
            self._detectors, (fast_cells, slow_cells), self._poles(), strict=True
        ):
            if cell_length == self.step:
                outputs.append(np.asarray(detector.process(cells.astype(np.float64))[0], dtype=np.float64))
            else:  # the one shorter cell a flush ends with: a single step of the recursion
                (last,) = detector.state
                y = np.array([pole**cell_length * last + float(cells[0])])
                detector.state = y
                outputs.append(y)
        return outputs[0], outputs[1]

    def _accumulate(
        self,
        x: NDArray[np.floating],
        c: NDArray[np.floating],
        cell_energy: NDArray[np.floating],
        fast: FloatArray,
        slow: FloatArray,
    ) -> list[PeriodLevels]:
        out: list[PeriodLevels] = []
        cell_length = x.size // fast.size
        first_cell = self._samples_done // self.step
        sample_pos = 0
        cell_pos = 0
        while sample_pos < x.size:
            take = min(self.period_samples - self._period_filled, x.size - sample_pos)
            stop = sample_pos + take
            cells_taken = max(1, take // cell_length)
            cell_stop = cell_pos + cells_taken
            xs, cs = x[sample_pos:stop], c[sample_pos:stop]
            self._sum_a += float(cell_energy[cell_pos:cell_stop].sum(dtype=np.float64))
            self._sum_c += float(np.dot(cs, cs))
            self._sum_z += float(np.dot(xs, xs))
            self._peak_c = max(self._peak_c, float(cs.max()), -float(cs.min()))
            self._peak_z = max(self._peak_z, float(xs.max()), -float(xs.min()))
            if self._overload.feed(xs):
                self._overloaded = True
            fast_part = fast[cell_pos:cell_stop]
            self._fast_max = max(self._fast_max, float(fast_part.max()))
            self._slow_max = max(self._slow_max, float(slow[cell_pos:cell_stop].max()))
            settled_from = self._settled_cell - (first_cell + cell_pos)
            if settled_from < fast_part.size:
                self._fast_min = min(self._fast_min, float(fast_part[max(0, settled_from) :].min()))
            self._period_filled += take
            sample_pos, cell_pos = stop, cell_stop
            if self._period_filled == self.period_samples:
                out.append(self._finish_period())
        self._samples_done += x.size
        return out

    def _finish_period(self) -> PeriodLevels:
        n = self._period_filled
        start = self._samples_done_before_period()
        cal, floor = self.calibration_db, self.level_floor_db
        record = PeriodLevels(
            start_s=start / self.sample_rate,
            duration_s=n / self.sample_rate,
            LAeq=mean_square_to_db(self._sum_a / n, cal, floor),
            LAFmax=mean_square_to_db(self._fast_max, cal, floor),
            LASmax=mean_square_to_db(self._slow_max, cal, floor),
            LAFmin=mean_square_to_db(self._fast_min, cal, floor)
            if math.isfinite(self._fast_min)
            else math.nan,
            LCeq=mean_square_to_db(self._sum_c / n, cal, floor),
            LCpeak=peak_to_db(self._peak_c, cal, floor),
            LZpeak=peak_to_db(self._peak_z, cal, floor),
            LZeq=mean_square_to_db(self._sum_z / n, cal, floor),
            overload=self._overloaded,
        )
        self._periods_emitted += 1
        self._reset_period()
        return record

    def _samples_done_before_period(self) -> int:
        # Every period but a flushed last one is complete, so periods start on a fixed grid.
        return self._periods_emitted * self.period_samples


def laeq_per_period(
    samples: ArrayLike,
    sample_rate: int,
    period_s: float = 1.0,
    calibration_db: float = 94.0,
    level_floor_db: float | None = None,
) -> FloatArray:
    """LAeq of each complete period of a whole recording (the cheap path: one filter pass).

    A trailing partial period is ignored.  Works in the input's precision (float32 or float64).
    """
    x = np.asarray(samples)
    if x.dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        x = x.astype(np.float64)
    period = round(period_s * sample_rate)
    n_periods = x.size // period
    a = sps.sosfilt(design_weighting_filters(sample_rate).sos_a.astype(x.dtype), x[: n_periods * period])
    blocks = a.reshape(n_periods, period)
    energy = np.einsum("ij,ij->i", blocks, blocks, dtype=np.float64)
    return np.array(
        [mean_square_to_db(e / period, calibration_db, level_floor_db) for e in energy], dtype=np.float64
    )


# --------------------------------------------------------------------------------------------
# Calibration
# --------------------------------------------------------------------------------------------


def calibration_from_tone(
    samples: ArrayLike, sample_rate: float, reference_db: float = 94.0, frequency_hz: float = 1000.0
) -> float:
    """Calibration offset (level of a full-scale sine) from a sound calibrator recording.

    Checks that the recording is dominated by a steady tone near ``frequency_hz`` (within 5 %,
    at least 90 % of the energy within +/- 1/6 octave, segment levels within 0.5 dB, no clipping),
    otherwise raises ``ValueError``.
    """
    x = np.asarray(samples, dtype=np.float64)
    if x.ndim != 1:
        raise ValueError("calibration tone must be a 1-D signal")
    if x.size < 0.25 * sample_rate:
        raise ValueError("calibration recording shorter than 0.25 s")
    if not np.all(np.isfinite(x)):
        raise ValueError("calibration recording contains non-finite samples")
    x = x - x.mean()
    total_ms = float(np.mean(x * x))
    if total_ms <= 1e-12:
        raise ValueError("calibration recording is silent")
    if np.max(np.abs(x)) >= 0.999:
        raise ValueError("calibration recording is clipped")

    spectrum = np.abs(np.fft.rfft(x * np.hanning(x.size))) ** 2
    freqs = np.fft.rfftfreq(x.size, 1.0 / sample_rate)
    peak = int(np.argmax(spectrum[1:])) + 1
    if 1 <= peak < spectrum.size - 1:  # parabolic interpolation on the log spectrum
        lo, mid, hi = np.log(spectrum[peak - 1 : peak + 2] + 1e-300)
        denom = lo - 2 * mid + hi
        offset = 0.5 * (lo - hi) / denom if denom != 0 else 0.0
    else:
        offset = 0.0
    tone_hz = (peak + offset) * sample_rate / x.size
    if abs(tone_hz - frequency_hz) > 0.05 * frequency_hz:
        raise ValueError(f"calibration tone found at {tone_hz:.1f} Hz, expected {frequency_hz:.1f} Hz")
    band = (freqs >= frequency_hz * 2 ** (-1 / 6)) & (freqs <= frequency_hz * 2 ** (1 / 6))
    tone_fraction = float(spectrum[band].sum() / spectrum.sum())
    if tone_fraction < 0.9:
        raise ValueError(f"calibration tone holds only {100 * tone_fraction:.0f} % of the energy")
    segments = np.array_split(x, 8)
    segment_db = [10 * math.log10(max(float(np.mean(s * s)), 1e-300)) for s in segments]
    if max(segment_db) - min(segment_db) > 0.5:
        raise ValueError("calibration tone level is not steady (segments differ by > 0.5 dB)")
    tone_ms = total_ms * tone_fraction
    return reference_db - 10.0 * math.log10(tone_ms / FULL_SCALE_SINE_MS)


@dataclass(frozen=True)
class CalibrationDrift:
    drift_db: float
    flagged: bool


CALIBRATION_DRIFT_LIMIT_DB = 0.5  # a field check that moved more than this puts the meter in doubt


# This project's choice, not a clause of the standard: a meter that reads its calibrator more
# than this far off has a wrong sensitivity setting (full_scale_db) or a failing microphone.
CALIBRATION_OFFSET_LIMIT_DB = 1.0


def calibration_drift(
    previous_db: float, current_db: float, limit_db: float = CALIBRATION_DRIFT_LIMIT_DB
) -> CalibrationDrift:
    """Change of calibration offset (a check's reading less its calibrator's level) between two
    checks; flagged when ``|drift| > limit_db``."""
    drift = current_db - previous_db
    return CalibrationDrift(drift, abs(drift) > limit_db)


def calibration_offset(reference_db: float, measured_db: float) -> float:
    """How far a check read from its calibrator: 94 dB read as 93.8 is -0.2 dB. Checks with
    calibrators of different levels (94 and 114 dB) compare by this, not by their readings."""
    return measured_db - reference_db


# --------------------------------------------------------------------------------------------
# Band spectra
# --------------------------------------------------------------------------------------------


def exact_band_frequency(nominal_hz: float) -> float:
    """Exact base-10 one-third-octave mid-band frequency 1000*10**(n/10) for a nominal one."""
    if nominal_hz <= 0:
        raise ValueError(f"band frequency must be positive, got {nominal_hz}")
    n = round(10 * math.log10(nominal_hz / 1000.0))
    exact = 1000.0 * 10 ** (n / 10)
    if abs(nominal_hz / exact - 1) > 0.05:
        raise ValueError(f"{nominal_hz} Hz is not a one-third-octave mid-band frequency")
    return exact


class BandLevels(NamedTuple):
    LAeq: float
    LCeq: float
    LZeq: float


def levels_from_bands(bands: Mapping[float, float]) -> BandLevels:
    """LAeq, LCeq and LZeq from Z-weighted one-third-octave band levels {nominal Hz: dB}.

    The weightings are evaluated at the exact mid-band frequencies and the bands summed
    energetically (IEC 61672-1 Annex E relations; ISO 266 base-10 frequencies).
    """
    if not bands:
        raise ValueError("no band levels given")
    exact = np.array([exact_band_frequency(f) for f in bands])
    levels = np.array(list(bands.values()), dtype=np.float64)

    def total(offsets: FloatArray) -> float:
        with np.errstate(divide="ignore"):
            return float(10 * np.log10(np.sum(10 ** ((levels + offsets) / 10))))

    return BandLevels(
        total(a_weighting_db(exact)), total(c_weighting_db(exact)), total(np.zeros_like(levels))
    )


# --------------------------------------------------------------------------------------------
# Interval statistics
# --------------------------------------------------------------------------------------------


def leq(levels_db: ArrayLike, durations: ArrayLike | None = None) -> float:
    """Energy (duration-weighted) average of levels in dB."""
    levels = np.asarray(levels_db, dtype=np.float64).ravel()
    if levels.size == 0:
        raise ValueError("leq of an empty series")
    weights = np.ones_like(levels) if durations is None else np.asarray(durations, dtype=np.float64).ravel()
    if weights.shape != levels.shape or np.any(weights < 0) or weights.sum() <= 0:
        raise ValueError("durations must be non-negative, match the levels and not all be zero")
    with np.errstate(divide="ignore"):
        return float(10 * np.log10(np.sum(weights * 10 ** (levels / 10)) / weights.sum()))


@dataclass(frozen=True)
class IntervalStats:
    """Statistics of per-period levels over an interval.  ``LN`` is the level exceeded N % of
    the time, i.e. the (100 - N)th percentile of the used per-period LAeq values (linear
    interpolation between order statistics).  Levels are NaN when no period is used."""

    LAeq: float
    LAFmax: float
    L10: float
    L50: float
    L90: float
    n_used: int
    n_excluded: int


def interval_stats(
    laeq_series: ArrayLike, lafmax_series: ArrayLike, exclude_mask: ArrayLike | None = None
) -> IntervalStats:
    """Energy-average LAeq, max LAFmax and L10/L50/L90 of equal-length periods, skipping the
    periods where ``exclude_mask`` is true (e.g. exempt blast seconds)."""
    laeq = np.asarray(laeq_series, dtype=np.float64).ravel()
    lafmax = np.asarray(lafmax_series, dtype=np.float64).ravel()
    if laeq.shape != lafmax.shape:
        raise ValueError("LAeq and LAFmax series differ in length")
    excluded = np.zeros(laeq.shape, dtype=bool) if exclude_mask is None else np.asarray(exclude_mask, bool)
    if excluded.shape != laeq.shape:
        raise ValueError("exclude_mask differs in length from the level series")
    used = ~excluded
    n_used = int(used.sum())
    if n_used == 0:
        nan = math.nan
        return IntervalStats(nan, nan, nan, nan, nan, 0, int(excluded.sum()))
    kept = laeq[used]
    l10, l50, l90 = (float(np.percentile(kept, 100 - n)) for n in (10, 50, 90))
    return IntervalStats(leq(kept), float(lafmax[used].max()), l10, l50, l90, n_used, int(excluded.sum()))
