"""Verification of monitor.acoustics.iec61672 against IEC 61672-1:2013 design goals."""

from __future__ import annotations

import csv
import math

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy import signal

from monitor.acoustics import iec61672
from tests.support.paths import DATA

SAMPLE_RATES = (16000, 44100, 48000, 96000)


# IEC 61672-1:2013 Table 3, kept in the repository (source named in tests/data/README.md).
REFERENCE_TABLE = DATA / "iec61672_table3.csv"


def _reference_rows() -> list[dict[str, float]]:
    with REFERENCE_TABLE.open(newline="") as handle:
        return [{k: float(v) for k, v in row.items()} for row in csv.DictReader(handle)]


def _sine(freq: float, fs: int, seconds: float, amplitude: float = 1.0) -> NDArray[np.float64]:
    t = np.arange(round(seconds * fs)) / fs
    return amplitude * np.sin(2 * np.pi * freq * t)


def _run_meter(
    meter: iec61672.SoundLevelMeter, x: NDArray[np.floating], block: int
) -> list[iec61672.PeriodLevels]:
    out: list[iec61672.PeriodLevels] = []
    for start in range(0, x.size, block):
        out.extend(meter.process(x[start : start + block]))
    return out + meter.flush()


# ------------------------------------------------------------------ frequency weightings


def test_analytic_weightings_match_table_to_rounding() -> None:
    for row in _reference_rows():
        f = row["freq_hz"]
        exact = iec61672.exact_band_frequency(f)
        # The table is rounded to 0.1 dB (half-way cases such as -13.35 at 160 Hz round away)
        # and computed at the exact base-10 frequencies.
        assert abs(float(iec61672.a_weighting_db(exact)) - row["A_db"]) <= 0.051, f
        assert abs(float(iec61672.c_weighting_db(exact)) - row["C_db"]) <= 0.051, f
    assert float(iec61672.a_weighting_db(1000.0)) == pytest.approx(0.0, abs=1e-3)
    assert float(iec61672.c_weighting_db(1000.0)) == pytest.approx(0.0, abs=1e-3)


@pytest.mark.parametrize("fs", SAMPLE_RATES)
def test_digital_weightings_within_half_db_of_design_goal(fs: int) -> None:
    rows = [r for r in _reference_rows() if r["freq_hz"] <= 0.45 * fs]
    assert rows[-1]["freq_hz"] == {16000: 6300, 44100: 16000, 48000: 20000, 96000: 20000}[fs]
    freqs = np.array([r["freq_hz"] for r in rows])
    for weighting, column, goal in (
        ("A", "A_db", iec61672.a_weighting_db),
        ("C", "C_db", iec61672.c_weighting_db),
    ):
        response = iec61672.weighting_response_db(fs, weighting, freqs)
        error_vs_goal = response - goal(freqs)
        assert np.max(np.abs(error_vs_goal)) <= 0.5, (weighting, fs, error_vs_goal)
        # Our design is in fact much better than required; keep it that way.
        assert np.max(np.abs(error_vs_goal)) <= 0.1, (weighting, fs, error_vs_goal)
        # Against the rounded table values (0.05 dB rounding + 0.5 dB budget) and class 1 limits.
        table = np.array([r[column] for r in rows])
        assert np.all(np.abs(response - table) <= 0.55), (weighting, fs)
        plus = np.array([r["class1_tol_plus"] for r in rows])
        minus = np.array([r["class1_tol_minus"] for r in rows])
        assert np.all(response - table <= plus) and np.all(table - response <= minus)
    z = iec61672.weighting_response_db(fs, "Z", freqs)
    assert np.max(np.abs(z)) <= 0.1


@pytest.mark.parametrize("fs", [1024, 2048, 4096, 7999])
def test_c_weighting_below_audio_rates_within_a_twentieth_of_a_db_of_the_design_goal(fs: int) -> None:
    """A seismograph's microphone (1,024 samples/s and up): the C weighting's f1 double pole alone
    (its f4 pole lies at 12.2 kHz), within 0.05 dB of IEC 61672-1 eq. E.1 from 1 Hz to 500 Hz
    (airblast lies below), and within the class 1 tolerances of the standard's table up to 0.45 fs."""
    grid = np.geomspace(1.0, min(0.45 * fs, 500.0), 400)
    sos = iec61672.c_weighting_sos(fs)
    error = iec61672._section_db(sos, grid, float(fs)) - iec61672.c_weighting_db(grid)
    assert np.max(np.abs(error)) <= 0.05, (fs, float(np.max(np.abs(error))))
    rows = [r for r in _reference_rows() if r["freq_hz"] <= 0.45 * fs]
    freqs = np.array([r["freq_hz"] for r in rows])
    response = iec61672._section_db(sos, freqs, float(fs))
    table = np.array([r["C_db"] for r in rows])
    plus = np.array([r["class1_tol_plus"] for r in rows])
    minus = np.array([r["class1_tol_minus"] for r in rows])
    assert np.all(response - table <= plus) and np.all(table - response <= minus)
    assert np.array_equal(iec61672.c_weighting_sos(16000), iec61672.weighting_sos(16000, "C"))
    with pytest.raises(ValueError, match="below the 1024 Hz"):
        iec61672.c_weighting_sos(512)


@pytest.mark.parametrize("fs", SAMPLE_RATES)
def test_weighting_filters_stable_deterministic_and_cached(fs: int) -> None:
    filters = iec61672.design_weighting_filters(fs)
    assert iec61672.design_weighting_filters(fs) is filters
    for sos in (filters.sos_a, filters.sos_c):
        assert np.max(np.abs(signal.sos2zpk(sos)[1])) < 1.0
    iec61672.design_weighting_filters.cache_clear()
    again = iec61672.design_weighting_filters(fs)
    np.testing.assert_array_equal(again.sos_a, filters.sos_a)
    # The A filter is the C filter plus one section.
    np.testing.assert_allclose(
        signal.sosfreqz(filters.sos_a, worN=256)[1],
        signal.sosfreqz(np.vstack([filters.sos_c, filters.sos_a_from_c]), worN=256)[1],
        rtol=1e-9,
    )


def test_measured_tone_level_follows_weighting() -> None:
    fs = 48000
    for freq in (31.5, 1000.0, 8000.0, 16000.0):
        meter = iec61672.SoundLevelMeter(fs, calibration_db=94.0)
        records = _run_meter(meter, _sine(freq, fs, 3.0), fs)
        assert records[-1].LAeq == pytest.approx(94.0 + float(iec61672.a_weighting_db(freq)), abs=0.1)
        assert records[-1].LCeq == pytest.approx(94.0 + float(iec61672.c_weighting_db(freq)), abs=0.1)
        assert records[-1].LZeq == pytest.approx(94.0, abs=0.01)


# ------------------------------------------------------------------ time weightings


@pytest.mark.parametrize(
    ("tau", "field", "durations_ms"),
    [
        (iec61672.FAST_TAU_S, "LAFmax", (1000, 500, 200, 100, 50, 20, 10, 5, 2, 1, 0.5, 0.25)),
        (iec61672.SLOW_TAU_S, "LASmax", (1000, 500, 200, 100, 50, 20, 10, 5, 2)),
    ],
)
def test_tone_burst_response(tau: float, field: str, durations_ms: tuple[float, ...]) -> None:
    fs = 48000
    settle_s = 10 * tau
    steady_meter = iec61672.SoundLevelMeter(fs, period_s=1.0, calibration_db=94.0)
    steady = _run_meter(steady_meter, _sine(4000, fs, settle_s + 1), fs)[-1]
    reference = getattr(steady, field)
    for duration_ms in durations_ms:
        n = round(duration_ms * fs / 1000)
        lead = fs // 2 + 5  # not aligned with the detector grid on purpose
        x = np.zeros(lead + n + 2 * fs)
        x[lead : lead + n] = _sine(4000, fs, n / fs)
        records = _run_meter(iec61672.SoundLevelMeter(fs, period_s=1.0, calibration_db=94.0), x, 4800)
        measured = max(getattr(r, field) for r in records) - reference
        expected = 10 * math.log10(1 - math.exp(-duration_ms / 1000 / tau))
        # Required: 0.1 dB from 1 s down to 1 ms.  Shorter bursts (2 and 1 cycles of 4 kHz) spread
        # their energy over frequency, so the A-weighted response falls ~0.1 dB lower even with a
        # sample-rate detector; IEC 61672-1 Table 4 allows far more there.
        tolerance = 0.1 if duration_ms >= 1 else 0.2
        assert measured == pytest.approx(expected, abs=tolerance), (duration_ms, measured, expected)


def test_exponential_time_weighting_function_carries_state() -> None:
    rng = np.random.default_rng(3)
    squared = rng.random(5000)
    whole, _ = iec61672.exponential_time_weighting(squared, 8000, iec61672.FAST_TAU_S)
    first, state = iec61672.exponential_time_weighting(squared[:1234], 8000, iec61672.FAST_TAU_S)
    second, _ = iec61672.exponential_time_weighting(squared[1234:], 8000, iec61672.FAST_TAU_S, state)
    np.testing.assert_allclose(np.concatenate([first, second]), whole, rtol=1e-12)


def test_meter_detector_grid_equals_sample_rate_detector() -> None:
    fs = 16000
    x = np.random.default_rng(4).standard_normal(fs * 3) * 0.1
    a = signal.sosfilt(iec61672.weighting_sos(fs, "A"), x)
    fast, _ = iec61672.exponential_time_weighting(a * a, fs, iec61672.FAST_TAU_S)
    records = _run_meter(iec61672.SoundLevelMeter(fs, calibration_db=94.0), x, 999)
    for k, record in enumerate(records):
        exact_max = iec61672.mean_square_to_db(float(fast[k * fs : (k + 1) * fs].max()), 94.0)
        assert record.LAFmax == pytest.approx(exact_max, abs=0.02)


# ------------------------------------------------------------------ meter


def test_calibrated_sine_reads_reference_levels() -> None:
    fs = 48000
    records = _run_meter(iec61672.SoundLevelMeter(fs, calibration_db=94.0), _sine(1000, fs, 4.0), fs)
    last = records[-1]
    assert last.LAeq == pytest.approx(94.0, abs=0.05)
    assert last.LCpeak == pytest.approx(97.0, abs=0.1)
    assert last.LZpeak == pytest.approx(97.0, abs=0.1)
    assert last.LCeq == pytest.approx(94.0, abs=0.05)
    assert last.LAFmax == pytest.approx(94.0, abs=0.05)
    assert last.LASmax == pytest.approx(94.0, abs=0.1)
    assert last.LAFmin == pytest.approx(94.0, abs=0.05)
    assert [r.start_s for r in records] == [0.0, 1.0, 2.0, 3.0]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_block_size_invariance(dtype: type[np.floating]) -> None:
    fs = 16000
    rng = np.random.default_rng(7)
    x = (rng.standard_normal(fs * 2) * 0.05 + _sine(1000, fs, 2.0, 0.2)).astype(dtype)
    x[fs // 3 : fs // 3 + 50] += 0.5  # an impulse for the peak and max detectors

    def levels(blocks: list[int]) -> NDArray[np.float64]:
        meter = iec61672.SoundLevelMeter(fs, period_s=0.1, calibration_db=94.0, dtype=dtype)
        out: list[iec61672.PeriodLevels] = []
        pos = 0
        for size in blocks:
            out.extend(meter.process(x[pos : pos + size]))
            pos += size
        assert pos >= x.size
        out.extend(meter.flush())
        return np.array([[getattr(r, k) for k in iec61672.PERIOD_FIELDS] for r in out])

    reference = levels([x.size])
    assert reference.shape == (20, len(iec61672.PERIOD_FIELDS))
    random_sizes = list(rng.integers(1, 9000, size=200))
    for blocks in ([37] * (x.size // 37 + 1), [4800] * 7, [48000], random_sizes):
        np.testing.assert_allclose(levels(blocks), reference, atol=0.01, equal_nan=True)
    # Single-sample blocks on a shorter stretch (slow in Python, so keep it small).
    short = x[: fs // 5]
    meter = iec61672.SoundLevelMeter(fs, period_s=0.1, calibration_db=94.0, dtype=dtype)
    ones = [r for v in short for r in meter.process(v[None])]
    whole = iec61672.SoundLevelMeter(fs, period_s=0.1, calibration_db=94.0, dtype=dtype).process(short)
    for a, b in zip(ones, whole, strict=True):
        for k in iec61672.PERIOD_FIELDS:
            assert getattr(a, k) == pytest.approx(getattr(b, k), abs=0.01, nan_ok=True)


def test_float32_matches_float64() -> None:
    fs = 48000
    x = np.random.default_rng(8).standard_normal(fs * 2) * 0.01
    r64 = _run_meter(iec61672.SoundLevelMeter(fs, dtype=np.float64), x, fs)
    r32 = _run_meter(iec61672.SoundLevelMeter(fs, dtype=np.float32), x.astype(np.float32), fs)
    for a, b in zip(r64, r32, strict=True):
        for k in iec61672.PERIOD_FIELDS:
            assert getattr(a, k) == pytest.approx(getattr(b, k), abs=0.01, nan_ok=True)


def test_silence_reports_floor_and_lafmin_waits_for_settling() -> None:
    fs = 16000
    records = _run_meter(iec61672.SoundLevelMeter(fs, period_s=0.1, calibration_db=94.0), np.zeros(fs), fs)
    assert len(records) == 10
    assert all(r.LAeq == -106.0 and r.LCpeak == -106.0 and r.LZeq == -106.0 for r in records)
    assert all(math.isnan(r.LAFmin) for r in records[:6])  # first 0.625 s: Fast detector settling
    assert records[-1].LAFmin == -106.0
    floored = iec61672.SoundLevelMeter(fs, calibration_db=94.0, level_floor_db=0.0).process(np.zeros(fs))
    assert floored[0].LAeq == 0.0


def test_partial_period_flush_and_period_validation() -> None:
    fs = 16000
    meter = iec61672.SoundLevelMeter(fs, period_s=1.0, calibration_db=94.0)
    assert len(meter.process(_sine(1000, fs, 2.5))) == 2
    tail = meter.flush()
    assert len(tail) == 1 and tail[0].start_s == 2.0 and tail[0].duration_s == pytest.approx(0.5)
    assert tail[0].LAeq == pytest.approx(94.0, abs=0.05)
    with pytest.raises(ValueError):
        iec61672.SoundLevelMeter(fs, period_s=0.05)


def test_laeq_per_period_matches_meter() -> None:
    fs = 48000
    x = np.random.default_rng(9).standard_normal(fs * 3) * 0.1
    fast_path = iec61672.laeq_per_period(x, fs, 1.0, 94.0)
    meter = _run_meter(iec61672.SoundLevelMeter(fs, calibration_db=94.0), x, 12345)
    np.testing.assert_allclose(fast_path, [r.LAeq for r in meter], atol=0.001)


# ------------------------------------------------------------------ calibration


def test_calibration_from_tone() -> None:
    fs = 48000
    rng = np.random.default_rng(11)
    recording = _sine(1000, fs, 2.0, 0.25) + rng.standard_normal(2 * fs) * 1e-4
    offset = iec61672.calibration_from_tone(recording, fs, reference_db=94.0)
    # Amplitude 0.25 is 12.04 dB below full scale, so full scale reads 106.04 dB.
    assert offset == pytest.approx(94.0 + 20 * math.log10(4), abs=0.02)
    records = _run_meter(iec61672.SoundLevelMeter(fs, calibration_db=offset), recording, fs)
    assert records[-1].LAeq == pytest.approx(94.0, abs=0.05)
    with pytest.raises(ValueError, match="Hz"):
        iec61672.calibration_from_tone(_sine(250, fs, 2.0, 0.25), fs)
    with pytest.raises(ValueError, match="energy"):
        iec61672.calibration_from_tone(_sine(1000, fs, 2.0, 0.1) + rng.standard_normal(2 * fs) * 0.1, fs)
    with pytest.raises(ValueError, match="silent"):
        iec61672.calibration_from_tone(np.zeros(fs), fs)
    with pytest.raises(ValueError, match="clipped"):
        iec61672.calibration_from_tone(np.clip(_sine(1000, fs, 1.0, 2.0), -1, 1), fs)
    fading = _sine(1000, fs, 2.0, 0.25) * np.linspace(1.0, 0.5, 2 * fs)
    with pytest.raises(ValueError, match="steady"):
        iec61672.calibration_from_tone(fading, fs)


def test_calibration_drift_flag() -> None:
    assert iec61672.calibration_drift(94.0, 94.3) == iec61672.CalibrationDrift(pytest.approx(0.3), False)
    drifted = iec61672.calibration_drift(94.0, 93.4)
    assert drifted.flagged and drifted.drift_db == pytest.approx(-0.6)
    assert iec61672.calibration_drift(94.0, 94.5).flagged is False  # exactly at the limit is allowed
    assert iec61672.calibration_drift(94.0, 94.2, limit_db=0.1).flagged


# ------------------------------------------------------------------ band spectra


def test_exact_band_frequencies() -> None:
    assert iec61672.exact_band_frequency(1000) == 1000.0
    assert iec61672.exact_band_frequency(31.5) == pytest.approx(31.6228, rel=1e-5)
    assert iec61672.exact_band_frequency(12500) == pytest.approx(12589.25, rel=1e-5)
    with pytest.raises(ValueError):
        iec61672.exact_band_frequency(1100)


def test_levels_from_bands_single_tone_band() -> None:
    result = iec61672.levels_from_bands({1000: 80.0, 100: -math.inf})
    assert result == pytest.approx((80.0, 80.0, 80.0), abs=1e-3)
    laeq, lceq, lzeq = iec61672.levels_from_bands({63: 70.0})
    assert laeq == pytest.approx(70.0 + float(iec61672.a_weighting_db(1000 * 10**-1.2)), abs=1e-9)
    assert lceq == pytest.approx(70.0 + float(iec61672.c_weighting_db(1000 * 10**-1.2)), abs=1e-9)
    assert lzeq == 70.0


def test_band_summation_matches_time_domain() -> None:
    fs = 48000
    rng = np.random.default_rng(12)
    white = rng.standard_normal(fs * 4)
    # Pink-ish noise: -3 dB/octave via a spectral tilt.
    spectrum = np.fft.rfft(white)
    freqs = np.fft.rfftfreq(white.size, 1 / fs)
    spectrum[1:] /= np.sqrt(freqs[1:] / 1000.0)
    # Band-limit to the span of the 10 Hz ... 20 kHz bands so both sides see the same energy.
    spectrum[(freqs < 10 * 10**-0.05) | (freqs >= 20000 * 10**0.05)] = 0
    noise = np.fft.irfft(spectrum, n=white.size)
    noise *= 0.1 / np.sqrt(np.mean(noise**2))
    calibration = 94.0
    # One-third-octave band levels by FFT binning at the base-10 band edges.
    power = np.abs(np.fft.rfft(noise)) ** 2 / noise.size**2 * 2
    bands: dict[float, float] = {}
    for nominal in iec61672.NOMINAL_THIRD_OCTAVE_HZ:
        centre = iec61672.exact_band_frequency(nominal)
        in_band = (freqs >= centre * 10**-0.05) & (freqs < centre * 10**0.05)
        bands[nominal] = calibration + 10 * math.log10(power[in_band].sum() / iec61672.FULL_SCALE_SINE_MS)
    from_bands = iec61672.levels_from_bands(bands)
    records = _run_meter(iec61672.SoundLevelMeter(fs, calibration_db=calibration), noise, fs)
    measured = [iec61672.leq([getattr(r, name) for r in records[1:]]) for name in ("LAeq", "LCeq", "LZeq")]
    assert from_bands.LAeq == pytest.approx(measured[0], abs=0.5)
    assert from_bands.LCeq == pytest.approx(measured[1], abs=0.5)
    assert from_bands.LZeq == pytest.approx(measured[2], abs=0.5)


# ------------------------------------------------------------------ interval statistics


def test_leq_energy_average() -> None:
    assert iec61672.leq([60.0, 60.0]) == pytest.approx(60.0)
    assert iec61672.leq([70.0, 0.0 - math.inf]) == pytest.approx(70.0 - 10 * math.log10(2))
    assert iec61672.leq([80.0, 60.0], durations=[1.0, 9.0]) == pytest.approx(
        10 * math.log10(0.1 * 1e8 + 0.9 * 1e6)
    )
    with pytest.raises(ValueError):
        iec61672.leq([])


def test_interval_stats_with_exclusions() -> None:
    laeq = np.array([50.0] * 85 + [60.0] * 14 + [100.0])
    lafmax = laeq + 3.0
    exclude = np.zeros(laeq.size, dtype=bool)
    exclude[-1] = True  # an exempt blast second
    stats = iec61672.interval_stats(laeq, lafmax, exclude)
    assert stats.n_used == 99 and stats.n_excluded == 1
    assert stats.LAFmax == 63.0
    assert stats.LAeq == pytest.approx(10 * math.log10((85 * 1e5 + 14 * 1e6) / 99))
    assert (stats.L10, stats.L50, stats.L90) == (60.0, 50.0, 50.0)
    everything = iec61672.interval_stats(laeq, lafmax)
    assert everything.n_excluded == 0 and everything.LAFmax == 103.0
    assert everything.LAeq > 80.0
    ramp = iec61672.interval_stats(np.arange(101.0), np.arange(101.0))
    assert (ramp.L10, ramp.L50, ramp.L90) == (90.0, 50.0, 10.0)  # L10 = exceeded 10 % of the time
    none_used = iec61672.interval_stats([50.0], [53.0], [True])
    assert none_used.n_used == 0 and math.isnan(none_used.LAeq)
    with pytest.raises(ValueError):
        iec61672.interval_stats([1.0, 2.0], [1.0])
