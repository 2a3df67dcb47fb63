"""What an edge sensor leaves out, and what it no longer drops (the site technician's review).

- Digital silence (a dead microphone) read -80 dB(A) every second, each a message the daemon
  refuses (`LAeq: -80 is below the plausible minimum -20`), sent and queued for nothing.
- The last part of a WAV past its whole seconds, and a WAV shorter than one second, were dropped
  (`minewatch levels` reports them).
- A light reading of NaN, infinity or 1e300 lux made the daemon refuse the whole 10 s summary
  (NaN was read as darkness), and a CSV saved by Excel (a byte order mark) was refused.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from rules.model import SoundLevels
from sensors.light import CsvSource, LightAggregator
from sensors.sound import SoundProcessor

RATE = 8000
ORIGIN = datetime(2026, 6, 15, 12, tzinfo=UTC)


def tone(seconds: float, amplitude: float = 0.1) -> np.ndarray:
    t = np.arange(int(seconds * RATE)) / RATE
    return amplitude * np.sin(2 * np.pi * 1000 * t)


def levels_of(records: list[object]) -> list[SoundLevels]:
    return [r for r in records if isinstance(r, SoundLevels)]


def test_digital_silence_is_left_out_and_said_once(caplog: pytest.LogCaptureFixture) -> None:
    processor = SoundProcessor("s", "n1", RATE, 120.0, ORIGIN)
    with caplog.at_level(logging.INFO, logger="minewatch.sensors.sound"):
        silent = levels_of(processor.feed(np.zeros(5 * RATE)))
        heard = levels_of(processor.feed(tone(2)))
    assert silent == [] and processor.left_out == 5
    assert len(heard) == 2 and all(-20 <= h.LAeq <= 200 for h in heard)
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 2
    assert said[0].startswith("No signal: sensor n1 reads LAeq ") and "left out, not sent" in said[0]
    assert said[1] == "Signal back after 5 s below -20 dB"


def test_the_last_partial_second_of_a_file_is_published_with_its_duration() -> None:
    processor = SoundProcessor("s", "n1", RATE, 120.0, ORIGIN)
    whole = levels_of(processor.feed(tone(1.5)))
    last = levels_of(processor.finish())
    assert [w.duration_s for w in whole] == [1.0]
    assert [p.duration_s for p in last] == [0.5] and abs(last[0].LAeq - whole[0].LAeq) < 0.5
    short = SoundProcessor("s", "n1", RATE, 120.0, ORIGIN)
    assert levels_of(short.feed(tone(0.5))) == []
    assert [p.duration_s for p in levels_of(short.finish())] == [0.5]  # a WAV under a second


def test_a_light_reading_no_light_gives_is_left_out(caplog: pytest.LogCaptureFixture) -> None:
    aggregator = LightAggregator("s", "l1", 10.0)
    start = ORIGIN.timestamp()
    with caplog.at_level(logging.WARNING, logger="minewatch.sensors.light"):
        for i, lux in enumerate([2.0, float("nan"), float("inf"), 1e300, 4.0]):
            assert aggregator.add(start + i, lux) is None
    summary = aggregator.flush()
    assert summary is not None and summary.lux_mean == 3.0 and summary.lux_max == 4.0
    assert aggregator.left_out == 3
    assert [r.getMessage().split(" lux,")[0] for r in caplog.records] == ["Light sensor l1 read nan"]


def test_a_light_csv_excel_saved_is_read(tmp_path: Path) -> None:
    csv = tmp_path / "night.csv"
    csv.write_bytes(b"\xef\xbb\xbfts,lux\r\n2026-06-15T03:00:00Z,0.5\r\n2026-06-15T03:00:01Z,0.7\r\n")
    assert [lux for _, lux in CsvSource(str(csv)).samples()] == [0.5, 0.7]
