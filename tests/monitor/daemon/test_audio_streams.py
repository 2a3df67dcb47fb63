"""Audio blocks to sound levels: PCM scaling, one meter stream per sensor, a new meter on a gap."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np

from monitor.daemon.audio_streams import AudioStreams, pcm_samples
from monitor.wire.codec import AudioBlock

T0 = datetime(2026, 6, 15, 17, 0, tzinfo=UTC)
RATE = 8000


def block(ts: datetime, seconds: float, seq: int, sensor: str = "n1", amplitude: float = 0.1) -> AudioBlock:
    t = np.arange(round(seconds * RATE)) / RATE
    pcm = (amplitude * np.sin(2 * np.pi * 1000 * t) * 32767).astype("<i2").tobytes()
    return AudioBlock("q", sensor, ts, seq, RATE, "s16le", pcm)


def test_integer_pcm_is_scaled_to_full_scale_one() -> None:
    pcm = np.array([-32768, 0, 16384], dtype="<i2").tobytes()
    assert pcm_samples(pcm, "s16le").tolist() == [-1.0, 0.0, 0.5]
    floats = np.array([0.25, -0.5], dtype="<f4").tobytes()
    assert pcm_samples(floats, "f32le").tolist() == [0.25, -0.5]


def test_consecutive_blocks_continue_one_meter_and_a_gap_starts_a_new_one() -> None:
    streams = AudioStreams()
    first = streams.levels(block(T0, 1.5, 1), 94.0)
    assert [lv.ts for lv in first] == [T0]  # half a period still pending in the meter
    meter = streams.streams["n1"].meter
    second = streams.levels(block(T0 + timedelta(seconds=1.5), 1.5, 2), 94.0)
    assert streams.streams["n1"].meter is meter  # the stream continued
    assert [lv.ts for lv in second] == [T0 + timedelta(seconds=1), T0 + timedelta(seconds=2)]
    assert all(lv.duration_s == 1.0 and lv.sensor == "n1" for lv in first + second)
    # A block ten seconds later does not follow on: a new meter, periods aligned to its own time.
    later = T0 + timedelta(seconds=13)
    third = streams.levels(block(later, 1.0, 3), 94.0)
    assert streams.streams["n1"].meter is not meter
    assert [lv.ts for lv in third] == [later]
    # Another sensor has a stream of its own.
    other = streams.levels(block(T0, 1.0, 1, sensor="n2"), 94.0)
    assert [lv.ts for lv in other] == [T0] and set(streams.streams) == {"n1", "n2"}


def test_a_louder_block_reads_louder_by_its_amplitude_ratio() -> None:
    quiet = AudioStreams().levels(block(T0, 1.0, 1, amplitude=0.01), 94.0)[0]
    loud = AudioStreams().levels(block(T0, 1.0, 1, amplitude=0.1), 94.0)[0]
    assert abs((loud.LAeq - quiet.LAeq) - 20.0) < 0.1


def test_a_clipped_block_gives_overloaded_levels_by_its_format() -> None:
    """The daemon's own meter flags a second of s16le audio at the extreme codes; the same
    samples as f32le are short of 1.0 and are not (the codes 32767 and -32768 are, in 16 bits)."""
    t = np.arange(2 * RATE) / RATE
    tone = np.sin(2 * np.pi * 1000 * t)
    tone[RATE:] *= 3.0
    codes = np.clip(np.round(tone * 32768), -32768, 32767)
    s16 = AudioBlock("q", "n1", T0, 1, RATE, "s16le", codes.astype("<i2").tobytes())
    levels = AudioStreams().levels(s16, 94.0)
    assert [lv.overload for lv in levels] == [False, True]
    f32 = AudioBlock("q", "n1", T0, 1, RATE, "f32le", (codes / 32768 * 0.999).astype("<f4").tobytes())
    assert [lv.overload for lv in AudioStreams().levels(f32, 94.0)] == [False, False]
