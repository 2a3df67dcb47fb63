"""Overload (IEC 61672-1 5.11): runs of samples at full scale, per measurement period."""

from __future__ import annotations

import numpy as np
import pytest

from monitor.acoustics.iec61672 import SoundLevelMeter
from monitor.acoustics.overload import (
    OVERLOAD_RUN_SAMPLES,
    UNKNOWN_FORMAT_CLIP_LEVEL,
    OverloadDetector,
    clip_level,
)

RATE = 16000
TOP16 = 32767 / 32768


def test_the_clip_level_is_the_most_positive_code_of_the_format() -> None:
    assert clip_level(16, False) == TOP16 == UNKNOWN_FORMAT_CLIP_LEVEL
    assert clip_level(8, False) == 127 / 128
    assert clip_level(24, False) == (2**23 - 1) / 2**23
    assert clip_level(32, True) == clip_level(64, True) == 1.0


@pytest.mark.parametrize(
    ("blocks", "expected"),
    [
        pytest.param([[0.5, TOP16, TOP16, 0.5]], [False], id="two-at-full-scale-a-peak"),
        pytest.param([[0.5, TOP16, TOP16, TOP16, 0.5]], [True], id="three-in-a-row"),
        pytest.param([[-1.0, -1.0, -1.0]], [True], id="the-negative-extreme"),
        pytest.param([[TOP16, 0.2, TOP16, 0.2, TOP16]], [False], id="not-in-a-row"),
        pytest.param([[0.1, TOP16, TOP16], [TOP16, 0.1]], [False, True], id="a-run-across-blocks"),
        pytest.param([[TOP16] * 2, [TOP16], [TOP16, 0.0]], [False, True, True], id="whole-blocks"),
        pytest.param([[TOP16, TOP16], [0.0, TOP16]], [False, False], id="broken-run"),
    ],
)
def test_runs_at_full_scale(blocks: list[list[float]], expected: list[bool]) -> None:
    detector = OverloadDetector(TOP16)
    assert [detector.feed(np.array(b)) for b in blocks] == expected


def test_float_samples_are_overloaded_from_one() -> None:
    detector = OverloadDetector(clip_level(32, True))
    assert not detector.feed(np.array([0.5, 0.99999, 0.99999, 0.99999]))
    assert detector.feed(np.array([0.5, 1.0, 1.7, -1.2, 0.3]))


def test_an_eight_bit_clip_needs_its_own_level() -> None:
    clipped = np.array([0.0, 127 / 128, 127 / 128, 127 / 128, 0.0])
    assert OverloadDetector(clip_level(8, False)).feed(clipped)
    assert not OverloadDetector().feed(clipped)  # 127/128 is short of the 16-bit top code


def test_the_meter_flags_the_periods_of_a_clipped_signal_which_read_low() -> None:
    t = np.arange(3 * RATE) / RATE
    tone = np.sin(2 * np.pi * 500 * t)
    tone[RATE : 2 * RATE] *= 4.0  # the second second driven 12 dB past full scale...
    clipped = np.clip(tone, -1.0, TOP16)  # ...as a 16-bit converter delivers it
    meter = SoundLevelMeter(RATE, 1.0, calibration_db=110.0)
    periods = meter.process(clipped)
    assert [p.overload for p in periods] == [False, True, False]
    # The clipped second reads far less than the 12 dB more it was: why its level is a lower bound.
    assert periods[1].LAeq - periods[0].LAeq < 4.0
    unclipped = SoundLevelMeter(RATE, 1.0, calibration_db=110.0).process(tone)
    assert [p.overload for p in unclipped] == [False, True, False]  # float samples past 1.0 too
    assert unclipped[1].LAeq - unclipped[0].LAeq == pytest.approx(12.04, abs=0.05)


def test_the_run_length_is_three() -> None:
    assert OVERLOAD_RUN_SAMPLES == 3  # docs/ACOUSTICS.md and PROTOCOL.md state it
