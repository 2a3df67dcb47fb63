"""monitor.acoustics.iir, the meter's numpy filter, against scipy.signal (the reference) and exact sums.

The weighting filters' 20.6 Hz double pole lies close to z = 1 (radius 0.9973 at 48 kHz,
0.9987 at 96 kHz): the cases where a block method in plain direct-form states lost digits.
"""

from __future__ import annotations

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy import signal

from monitor.acoustics import iec61672
from monitor.acoustics.iir import DEFAULT_BLOCK, StreamingFilter

L = DEFAULT_BLOCK
# Split points that exercise every path: single samples, blocks +/- 1, primes, empty calls,
# and a call longer than one pass (4096 blocks) with a remainder.
SPLITS = (1, L - 1, L, L + 1, 0, 7, 97, 0, 1009, 4096 * L + 13, 2 * L, 3)
# Every rate `minewatch` meets in practice, from the lowest design_weighting_filters supports.
RATES = (8000, 16000, 22050, 44100, 48000, 96000)
FLOAT32_EPS = float(np.finfo(np.float32).eps)


def _split_run(flt: StreamingFilter, x: NDArray[np.floating]) -> NDArray[np.floating]:
    parts, start = [], 0
    for length in (*SPLITS, x.size):
        parts.append(flt.process(x[start : start + length]))
        start += length
    assert start >= x.size
    return np.concatenate(parts, axis=1)


def _weighting_reference(fs: int, x: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    filters = iec61672.design_weighting_filters(fs)
    c = signal.sosfilt(filters.sos_c.copy(), x)
    return c, signal.sosfilt(filters.sos_a_from_c.copy(), c)


def _relative_error(got: NDArray[np.floating], want: NDArray[np.floating]) -> float:
    return float(np.max(np.abs(got.astype(np.float64) - want)) / np.sqrt(np.mean(want * want)))


@pytest.mark.parametrize("fs", RATES)
def test_weighting_cascade_matches_sosfilt_across_splits(fs: int) -> None:
    x = np.random.default_rng(fs).standard_normal(4096 * L + 2 * fs // 3)
    c, a = _weighting_reference(fs, x)
    filters = iec61672.design_weighting_filters(fs)
    flt = StreamingFilter.from_sections(filters.sos_c, filters.sos_a_from_c)
    got = _split_run(flt, x)
    assert got.shape == (2, x.size) and got.dtype == np.float64
    # sosfilt is itself off the exact result by ~1e-12 of the RMS at 48 kHz, ~1e-11 at 96 kHz
    # (see the exact-sum test below): the two agree to that.
    tolerance = 2e-11 if fs > 48000 else 1e-11
    assert _relative_error(got[0], c) < tolerance
    assert _relative_error(got[1], a) < tolerance


@pytest.mark.parametrize("fs", RATES)
def test_weighting_cascade_float32_to_its_precision(fs: int) -> None:
    x = np.random.default_rng(fs + 1).standard_normal(4096 * L + fs // 2).astype(np.float32)
    c, a = _weighting_reference(fs, x.astype(np.float64))  # the float32 samples, filtered exactly
    filters = iec61672.design_weighting_filters(fs)
    got = _split_run(StreamingFilter.from_sections(filters.sos_c, filters.sos_a_from_c, dtype=np.float32), x)
    assert got.dtype == np.float32
    for output, want in ((got[0], c), (got[1], a)):
        assert _relative_error(output, want) < 64 * FLOAT32_EPS
    # float32 sosfilt (float32 coefficients move the double pole) is ~1e-3 off: far worse.
    sosfilt32 = signal.sosfilt(filters.sos_c.astype(np.float32), x)
    assert _relative_error(got[0], c) < _relative_error(sosfilt32, c) / 10


def _exact_sections(sos: NDArray[np.float64], x: NDArray[np.float64]) -> NDArray[np.longdouble]:
    """Direct form II transposed, sample by sample, in extended precision."""
    y = x.astype(np.longdouble)
    for b0, b1, b2, a0, a1, a2 in sos.astype(np.longdouble):
        z0 = z1 = np.longdouble(0)
        out = np.empty_like(y)
        for i, u in enumerate(y):
            v = (b0 * u + z0) / a0
            z0 = (b1 * u - a1 * v + z1) / a0
            z1 = (b2 * u - a2 * v) / a0
            out[i] = v
        y = out
    return y


@pytest.mark.skipif(np.finfo(np.longdouble).eps >= np.finfo(np.float64).eps, reason="no extended precision")
@pytest.mark.parametrize("fs", (8000, 48000, 96000))
def test_weighting_cascade_as_accurate_as_sosfilt(fs: int) -> None:
    x = np.random.default_rng(7).standard_normal(6000)
    filters = iec61672.design_weighting_filters(fs)
    exact_c = _exact_sections(filters.sos_c, x)
    exact_a = _exact_sections(filters.sos_a_from_c, exact_c.astype(np.float64))
    got = StreamingFilter.from_sections(filters.sos_c, filters.sos_a_from_c).process(x)
    c, a = _weighting_reference(fs, x)

    def error(y: NDArray[np.floating], exact: NDArray[np.longdouble]) -> float:
        return float(np.max(np.abs(y.astype(np.longdouble) - exact)) / np.sqrt(np.mean(exact * exact)))

    for ours, theirs, exact in ((got[0], c, exact_c), (got[1], a, exact_a)):
        assert error(ours, exact) < max(3 * error(theirs, exact), 2e-12)
        assert error(ours, exact) < 1e-11


def test_random_sections_and_carried_state_match_sosfilt_zi() -> None:
    rng = np.random.default_rng(11)
    sos = np.vstack([signal.butter(4, 0.02, output="sos"), signal.cheby1(2, 1, 0.4, "high", output="sos")])
    x = rng.standard_normal(50_000)
    # A 4th-order low-pass at 0.01 of the sample rate is more sensitive to rounding than the
    # weightings: float32 gets a wider margin (float32 sosfilt is ~5e-4 off here).
    for dtype, tolerance in ((np.float64, 1e-11), (np.float32, 256 * FLOAT32_EPS)):
        flt = StreamingFilter.from_sections(sos, dtype=dtype)
        zi = rng.standard_normal((sos.shape[0], 2))
        flt.state = zi.reshape(-1)  # sosfilt's zi layout
        want, zf = signal.sosfilt(sos, x.astype(dtype).astype(np.float64), zi=zi)
        got = _split_run(flt, x.astype(dtype))[0]
        assert _relative_error(got, want) < tolerance
        assert np.allclose(flt.state, zf.reshape(-1), rtol=0, atol=tolerance * np.sqrt(np.mean(want * want)))
        flt.reset()
        assert not np.any(flt.state)


def test_outputs_after_each_group_equal_separate_filters() -> None:
    first, second = signal.butter(2, 0.1, output="sos"), signal.butter(2, 0.3, "high", output="sos")
    x = np.random.default_rng(3).standard_normal(10_000)
    both = StreamingFilter.from_sections(first, second).process(x)
    after_first = signal.sosfilt(first, x)
    assert _relative_error(both[0], after_first) < 1e-12
    assert _relative_error(both[1], signal.sosfilt(second, after_first)) < 1e-12


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_first_order_recursion_matches_lfilter(dtype: type[np.floating]) -> None:
    # The meter's F and S detectors at 48 kHz on the 0.5 ms grid: y[k] = p y[k-1] + x[k].
    for pole in (np.exp(-24 / (48000 * 0.125)), np.exp(-24 / 48000.0), 0.3):
        x = np.random.default_rng(5).random(200_000)  # energies: non-negative
        flt = StreamingFilter.first_order(pole, dtype=dtype)
        flt.state = [2.5]
        want, zf = signal.lfilter([1.0], [1.0, -pole], x.astype(dtype).astype(np.float64), zi=[pole * 2.5])
        got = _split_run(flt, x.astype(dtype))[0]
        tolerance = 1e-13 if dtype == np.float64 else 16 * FLOAT32_EPS
        assert float(np.max(np.abs(got - want) / want)) < tolerance
        assert flt.state[0] == pytest.approx(zf[0] / pole, rel=tolerance)  # lfilter's zf is pole * y[-1]


def test_empty_input_keeps_the_state() -> None:
    flt = StreamingFilter.from_sections(signal.butter(2, 0.1, output="sos"))
    flt.process(np.ones(100))
    before = flt.state
    out = flt.process(np.empty(0))
    assert out.shape == (1, 0)
    assert np.array_equal(flt.state, before)


def test_non_minimal_cascade_still_exact() -> None:
    # An identity section adds states no input reaches: no balanced realization exists, the
    # filter keeps the direct-form coordinates and stays exact.
    sos = np.vstack([[1.0, 0.0, 0.0, 1.0, 0.0, 0.0], signal.butter(2, 0.2, output="sos")])
    x = np.random.default_rng(9).standard_normal(5000)
    got = _split_run(StreamingFilter.from_sections(sos), x)[0]
    assert _relative_error(got, signal.sosfilt(sos, x)) < 1e-12


def test_rejects_unstable_filters_and_bad_arguments() -> None:
    with pytest.raises(ValueError, match="not stable"):
        StreamingFilter.first_order(1.0)
    with pytest.raises(ValueError, match="not stable"):
        StreamingFilter.from_sections([1.0, 0.0, 0.0, 1.0, -2.5, 1.2])
    with pytest.raises(ValueError, match="dtype"):
        StreamingFilter.first_order(0.5, dtype=np.float16)
    with pytest.raises(ValueError, match="a0 = 0"):
        StreamingFilter.from_sections([1.0, 0.0, 0.0, 0.0, 0.1, 0.0])
    with pytest.raises(ValueError, match="1-D"):
        StreamingFilter.first_order(0.5).process(np.ones((2, 3)))
    with pytest.raises(ValueError, match="2 values"):
        StreamingFilter.from_sections(signal.butter(2, 0.1, output="sos")).state = [1.0]


@pytest.mark.parametrize("fs", (48000, 96000))
def test_float32_meter_keeps_the_low_frequency_response(fs: int) -> None:
    # float32 sos coefficients moved the 20.6 Hz double pole: 0.02 dB at 10 Hz at 48 kHz,
    # 0.07 dB at 96 kHz. The float32 meter now rounds the balanced system's matrices instead.
    x = 0.5 * np.sin(2 * np.pi * 10.0 * np.arange(4 * fs) / fs)
    levels = {}
    for dtype in (np.float64, np.float32):
        levels[dtype] = iec61672.SoundLevelMeter(fs, dtype=dtype).process(x)[-1]
    assert abs(levels[np.float32].LCeq - levels[np.float64].LCeq) < 0.002
    assert abs(levels[np.float32].LAeq - levels[np.float64].LAeq) < 0.002
