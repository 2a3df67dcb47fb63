"""The seismograph event summary on synthetic waveforms whose answers are known."""

from __future__ import annotations

import math

import numpy as np
import pytest

from monitor.acoustics.iec61672 import c_weighting_db
from monitor.seismic.summary import (
    G_MM_S2,
    Waveform,
    db_from_pa,
    pa_from_db,
    summarize,
)

RATE = 1024


def burst(freq: float, amplitude: float, peak_s: float, n: int, rate: float = RATE, cycles: float = 4.0):
    """A cosine burst under a Hann envelope, both peaking on a sample at ``peak_s``.

    Its largest sample is exactly ``amplitude`` and its zero crossings are the cosine's own
    (the envelope moves no zero), so the half-period around the peak is 1 / (2 freq).
    """
    t = np.arange(n) / rate - round(peak_s * rate) / rate
    half_width = cycles / freq / 2
    envelope = np.where(np.abs(t) < half_width, 0.5 * (1 + np.cos(np.pi * t / half_width)), 0.0)
    return amplitude * envelope * np.cos(2 * np.pi * freq * t)


def record(t, v, lo, mic=None, ranges=(0.0, 0.0, 0.0, 0.0), mic_low_hz=2.0, rate=RATE) -> Waveform:
    mic = np.zeros_like(t) if mic is None else mic
    return Waveform(rate, np.vstack([t, v, lo, mic]).astype(np.float64), ranges, mic_low_hz)


@pytest.mark.parametrize("freq", [3.0, 8.0, 12.0, 30.0, 80.0])
def test_sine_bursts_per_axis_ppv_exact_and_zero_crossing_frequency(freq: float) -> None:
    n = 4 * RATE
    amplitudes = {"T": 5.0, "V": 12.7, "L": 2.54}
    wave = record(
        burst(freq, amplitudes["T"], 1.0, n),
        burst(freq, amplitudes["V"], 2.0, n),
        burst(freq, amplitudes["L"], 3.0, n),
    )
    summary = summarize(wave)
    for axis in summary.axes:
        assert axis.ppv_mm_s == amplitudes[axis.axis]  # exact: the peak is a sample
        assert axis.zc_hz is not None
        if freq <= 30:
            assert axis.zc_hz == pytest.approx(freq, rel=0.05)
        assert axis.fft_hz == pytest.approx(freq, rel=0.1)
        assert not axis.clipped
    t_axis = summary.axis("T")
    assert t_axis.ppv_time_s == pytest.approx(1.0, abs=1 / RATE)
    # a Hann-windowed cosine: peak acceleration and displacement near 2 pi f A and A / (2 pi f)
    assert t_axis.accel_g == pytest.approx(2 * math.pi * freq * 5.0 / G_MM_S2, rel=0.1)
    if freq <= 30:
        assert t_axis.disp_mm == pytest.approx(5.0 / (2 * math.pi * freq), rel=0.1)


def test_peak_vector_sum_is_per_sample_between_the_axes_peaks_and_their_sum() -> None:
    n = 2 * RATE
    t = burst(10.0, 4.0, 0.50, n)
    v = burst(10.0, 3.0, 0.52, n)  # peaks 20 ms apart: never all at their peak together
    lo = burst(15.0, 2.0, 0.55, n)
    summary = summarize(record(t, v, lo))
    peaks = [a.ppv_mm_s for a in summary.axes]
    assert max(peaks) < summary.pvs_mm_s < math.sqrt(sum(p * p for p in peaks)) < sum(peaks)
    expected = float(np.sqrt(t * t + v * v + lo * lo).max())
    assert summary.pvs_mm_s == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(("pa", "db"), [(20.0, 120.0), (200.0, 140.0), (89.34, 133.0), (2e-5, 0.0)])
def test_decibels_linear_from_pascals(pa: float, db: float) -> None:
    assert db_from_pa(pa) == pytest.approx(db, abs=0.005)
    assert pa_from_db(db_from_pa(pa)) == pytest.approx(pa)


def test_airblast_peak_in_pa_and_db_with_the_microphones_low_frequency_limit() -> None:
    n = 2 * RATE
    quiet = np.zeros(n)
    mic = burst(6.0, 100.0, 1.0, n) - burst(20.0, 30.0, 0.3, n)
    summary = summarize(record(quiet, quiet, quiet, mic, mic_low_hz=0.5))
    assert summary.airblast_pa == 100.0
    assert summary.airblast_db == pytest.approx(20 * math.log10(100.0 / 20e-6))
    assert summary.airblast_zc_hz == pytest.approx(6.0, rel=0.05)
    assert summary.mic_low_hz == 0.5
    assert summary.to_json()["airblast_db"] == pytest.approx(133.98, abs=0.01)


def test_a_clipped_channel_is_flagged() -> None:
    n = 2 * RATE
    v_range = 254.0  # 10 in/s geophone range
    v = np.clip(burst(20.0, 400.0, 1.0, n), -v_range, v_range)  # the geophone saturated
    t = burst(20.0, 50.0, 1.0, n)
    summary = summarize(record(t, v, t, ranges=(v_range, v_range, v_range, 500.0)))
    assert summary.axis("V").clipped and summary.axis("V").ppv_mm_s == v_range
    assert not summary.axis("T").clipped
    assert summary.clipped == ("V",)
    assert summary.to_json()["clipped"] == ["V"]


def test_bad_shapes_are_refused_with_the_field() -> None:
    with pytest.raises(ValueError, match="data: expected 4 channels"):
        Waveform(RATE, np.zeros((3, 100)))
    with pytest.raises(ValueError, match="sample_rate"):
        Waveform(0, np.zeros((4, 100)))


def test_chunks_split_under_the_cap_and_join_back() -> None:
    from datetime import UTC, datetime

    from monitor.seismic.chunks import join, split
    from monitor.wire.codec import encode

    n = 3 * RATE
    wave = record(burst(8.0, 5.0, 1.0, n), burst(8.0, 3.0, 1.5, n), burst(8.0, 1.0, 2.0, n))
    ts = datetime(2026, 6, 15, 16, 30, tzinfo=UTC)
    for fmt in ("f32le", "s32le"):
        chunks = split(wave, "q", "sg1", "e1", ts, max_bytes=8192, sample_format=fmt)
        assert len(chunks) > 1 and all(len(encode(c)[1]) <= 8192 for c in chunks)
        joined = join([(c.header(), c.data) for c in reversed(chunks)])
        assert joined.data.shape == wave.data.shape
        assert summarize(joined).axis("T").ppv_mm_s == pytest.approx(5.0, rel=1e-6)
    with pytest.raises(ValueError, match="chunks: 1 of"):
        join([(chunks[0].header(), chunks[0].data)])


@pytest.mark.parametrize(
    ("freq", "rate", "within_db"),
    [
        (250.0, 1024, 0.1),  # C weighting ~0 dB: the tone's own level
        (100.0, 16384, 0.1),  # the audio design at a high-rate seismograph (C(100 Hz) = -0.3 dB)
        (31.5, 1024, 0.1),  # C(31.5 Hz) = -3.0 dB: the weighting is applied
        (8.0, 2048, 0.15),  # C(8 Hz) = -17.6 dB; the slow detector's 16 Hz ripple adds under 0.1 dB
    ],
)
def test_c_weighted_slow_level_of_a_tone_of_known_pressure(freq: float, rate: int, within_db: float) -> None:
    """A steady tone of 20 Pa peak for 8 s (8 time constants: the slow detector settles within
    0.01 dB): LCSmax = 20 log10(20 / sqrt(2) / 20 uPa) + C(f), the design goal of IEC 61672-1."""
    n = 8 * rate
    t = np.arange(n) / rate
    mic = 20.0 * np.sin(2 * np.pi * freq * t)
    zeros = np.zeros(n)
    summary = summarize(record(zeros, zeros, zeros, mic=mic, rate=rate))
    expected = 20 * math.log10(20.0 / math.sqrt(2) / 20e-6) + float(c_weighting_db(freq))
    assert expected == pytest.approx({250.0: 117.0, 100.0: 116.7, 31.5: 114.0, 8.0: 99.4}[freq], abs=0.05)
    assert summary.airblast_dbc_slow == pytest.approx(expected, abs=within_db)
    assert summary.to_json()["airblast_dbc_slow"] == pytest.approx(expected, abs=within_db)


def test_a_silent_microphone_has_no_c_weighted_level() -> None:
    zeros = np.zeros(2 * RATE)
    summary = summarize(record(zeros, zeros, zeros))
    assert summary.airblast_dbc_slow is None and summary.to_json()["airblast_dbc_slow"] is None


def test_the_first_half_cycle_after_rest_has_its_zero_crossing_frequency() -> None:
    """A record at rest (exactly 0) until one cycle of an 8 Hz sine arrives: the peak lies in the
    first half-cycle, which begins at the sample where the motion leaves 0. Before the summary took
    a sample at 0 as a crossing, a positive first half-cycle had no crossing before its peak and
    the frequency was None (issue 27's intake test: V and L). Known answer: 64 samples a
    half-period at 1,024 samples/s, 8.0 Hz; the same negative-going."""
    n, onset, per = 2 * RATE, RATE // 2, RATE // 8  # one 8 Hz cycle is 128 samples
    for polarity in (1.0, -1.0):
        v = np.zeros(n)
        v[onset : onset + per] = polarity * 10.0 * np.sin(2 * np.pi * np.arange(per) / per)
        axis = summarize(record(np.zeros(n), v, np.zeros(n))).axis("V")
        assert axis.ppv_time_s == pytest.approx((onset + per // 4) / RATE)
        assert axis.zc_hz == pytest.approx(8.0, rel=1e-6), polarity
    t = np.zeros(n)
    t[onset] = 5.0  # one sample away from rest, and back: a half-period of 2 samples, 256 Hz
    assert summarize(record(t, np.zeros(n), np.zeros(n))).axis("T").zc_hz == pytest.approx(256.0)
