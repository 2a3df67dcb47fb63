"""A WAV source's overload: each format's own full scale, flagged per second and said once."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from monitor.acoustics.wavfile import wav_bytes
from sensors.sound import SoundProcessor, open_source

RATE = 16000
T0 = datetime(2026, 6, 15, 16, 31, tzinfo=UTC)


def clipped_tone(seconds: int, loud: range) -> np.ndarray:
    """A 500 Hz tone at half scale, driven 4x (past full scale) in the ``loud`` seconds."""
    t = np.arange(seconds * RATE) / RATE
    tone = 0.5 * np.sin(2 * np.pi * 500 * t)
    for s in loud:
        tone[s * RATE : (s + 1) * RATE] *= 4.0
    return tone


def wav(path: Path, samples: np.ndarray, bits: int, is_float: bool) -> str:
    if is_float:
        pcm = samples.astype("<f4" if bits == 32 else "<f8").tobytes()
    else:
        top = 2 ** (bits - 1)
        codes = np.clip(np.round(samples * top), -top, top - 1).astype(np.int64)
        if bits == 8:
            pcm = (codes + 128).astype(np.uint8).tobytes()
        elif bits == 24:
            pcm = b"".join(int(c).to_bytes(3, "little", signed=True) for c in codes)
        else:
            pcm = codes.astype(f"<i{bits // 8}").tobytes()
    path.write_bytes(wav_bytes(pcm, RATE, bits, is_float))
    return f"wav:{path}"


@pytest.mark.parametrize(("bits", "is_float"), [(8, False), (16, False), (24, False), (32, True)])
def test_a_clipped_wav_gives_overloaded_seconds(
    tmp_path: Path, bits: int, is_float: bool, caplog: pytest.LogCaptureFixture
) -> None:
    source = open_source(wav(tmp_path / "a.wav", clipped_tone(5, range(1, 3)), bits, is_float), 110.0)
    processor = SoundProcessor("q", "n1", source.sample_rate, 110.0, T0, clip_level=source.clip_level)
    with caplog.at_level(logging.INFO, "minewatch.sensors.sound"):
        levels = [m for block in source.blocks() for m in processor.feed(block)] + processor.finish()
    assert [lv.overload for lv in levels] == [False, True, True, False, False]
    said = [r.getMessage() for r in caplog.records]
    assert sum("Overload: sensor n1's input reached full scale at 1.0 s" in m for m in said) == 1
    assert sum(m == "Overload over after 2 s" for m in said) == 1


def test_a_tone_up_to_just_below_full_scale_is_not_overloaded(tmp_path: Path) -> None:
    t = np.arange(2 * RATE) / RATE
    loud = 0.999 * np.sin(2 * np.pi * 500 * t)  # -0.01 dBFS peaks: loud, but measured right
    source = open_source(wav(tmp_path / "a.wav", loud, 16, False), 110.0)
    processor = SoundProcessor("q", "n1", RATE, 110.0, T0, clip_level=source.clip_level)
    levels = [m for block in source.blocks() for m in processor.feed(block)] + processor.finish()
    assert [lv.overload for lv in levels] == [False, False]
