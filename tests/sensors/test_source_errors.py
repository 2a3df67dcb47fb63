"""A source `minewatch sensor sound` cannot use is said in one line when it opens (exit 2), with
what to do about it, before any broker is connected."""

from __future__ import annotations

import subprocess
import sys
import wave
from pathlib import Path

import numpy as np
import pytest

from sensors.sound import SourceUnavailable, open_source
from tests.support.sensors import site_config
from tests.support.servers import free_port


def test_a_wav_below_8_khz_is_refused_in_one_line_when_the_source_opens(tmp_path: Path) -> None:
    wav = tmp_path / "low.wav"
    with wave.open(str(wav), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(4000)
        w.writeframes((np.sin(np.arange(8000) / 3) * 3000).astype("<i2").tobytes())
    config = site_config(tmp_path, f"mqtt://127.0.0.1:{free_port()}")
    result = subprocess.run(
        [
            *(sys.executable, "-m", "monitor.cli", "sensor", "sound", "--config", str(config)),
            *("--sensor", "n1", "--source", f"wav:{wav}", "--queue", str(tmp_path / "q.db")),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [
        f"minewatch sensor sound: {wav}: sample rate 4000 Hz outside the supported 8 kHz ... 400 kHz"
    ]
    assert not (tmp_path / "q.db").exists()  # refused before the queue or the broker


def test_an_unknown_sound_card_says_how_to_list_the_devices() -> None:
    pytest.importorskip("sounddevice", reason="the `test` extra installs sounddevice")
    with pytest.raises(SourceUnavailable, match=r"list the devices with: python3 -m sounddevice\)$"):
        open_source("soundcard:nosuch", 120.0)
