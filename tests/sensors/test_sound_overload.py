"""A WAV source's overload: each format's own full scale, flagged per second and said once."""

from __future__ import annotations

import json
import logging
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from monitor.acoustics.wavfile import wav_bytes
from sensors.sound import SoundProcessor, open_source
from tests.support.daemon import Daemon, store_count, wait_until
from tests.support.sensors import Subscriber, site_config, wait_for
from tests.support.servers import Mosquitto

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


def _findings(store: Path) -> list[dict[str, object]]:
    conn = sqlite3.connect(store, timeout=30)
    try:
        rows = conn.execute(
            "SELECT data FROM findings f WHERE retracted = 0 AND revision ="
            " (SELECT MAX(revision) FROM findings WHERE id = f.id)"
        ).fetchall()
    finally:
        conn.close()
    return [json.loads(r[0]) for r in rows]


@pytest.mark.timeout(180)
def test_a_clipped_recording_is_published_overloaded_and_judged_so(
    tmp_path: Path, mosquitto: Mosquitto
) -> None:
    """The meter's full scale is 79 dB (a full-scale sine reads 79): a 1 kHz tone driven past it
    is clipped and reads at most some 82 dB, whatever it really was. Minute 0 is a plain 61 dB
    tone; minute 1 the tone 1.1 x past full scale (reads ~79.3, below the 80 dB limit); minute 2
    it 8 x past (reads ~82). Real sensor process, Mosquitto and daemon."""
    config = site_config(tmp_path, mosquitto.url, "calibration = { full_scale_db = 79.0 }")
    t = np.arange(190 * RATE) / RATE
    tone = np.sin(2 * np.pi * 1000 * t)
    gain = np.repeat(
        [10 ** (-18 / 20), 1.1, 8.0, 10 ** (-18 / 20)], [60 * RATE, 60 * RATE, 60 * RATE, 10 * RATE]
    )
    source = wav(tmp_path / "clipped.wav", tone * gain, 16, False)
    store = tmp_path / "store.db"
    daemon = Daemon(config).start()
    sub = Subscriber(mosquitto.port, "minewatch/dovre-quarry/sensors/n1/levels", client_id="overload-sub")
    try:
        daemon.wait_ready()
        run = subprocess.run(
            [
                *(sys.executable, "-m", "monitor.cli", "sensor", "sound", "--config", str(config)),
                *("--sensor", "n1", "--source", source, "--speed", "max", "--start", "2026-06-15T11:00"),
                *("--queue", str(tmp_path / "n1.queue.db")),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert run.returncode == 0, run.stderr
        assert "Overload: sensor n1's input reached full scale at 60.0 s" in run.stderr
        assert wait_for(lambda: len(sub.received()) == 190, 30), len(sub.received())
        published = sorted((json.loads(p) for _, p in sub.received()), key=lambda m: m["ts"])
        # Every second of minutes 1 and 2 says so; the others carry no flag at all, as ever.
        assert [i for i, m in enumerate(published) if m.get("overload")] == list(range(60, 180))
        assert all("overload" not in m for m in published[:60] + published[180:])
        minute_2 = int(datetime(2026, 6, 15, 16, 3, tzinfo=UTC).timestamp() * 1e6)
        assert wait_until(
            lambda: (
                store_count(store, "SELECT COUNT(*) FROM progress WHERE evaluated_until_us >= ?", minute_2)
                == 1
            ),
            60,
            0.5,
        ), daemon.logs()[-3000:]
        assert store_count(store, "SELECT COUNT(*) FROM sound WHERE sensor = 'n1' AND overload") == 120
    finally:
        sub.close()
        daemon.stop()
    noise = {
        str(f["details"]["interval_start"])[11:16]: f  # type: ignore[index]
        for f in _findings(store)
        if f["standard"] == "noise" and f["sensors"] == ["n1"]
    }
    # Minute 1 read below the limit, clipped: not judged (it was judged compliant).
    quiet = noise["16:01"]
    assert quiet["kind"] == "info", quiet
    assert "not judged over" in str(quiet["summary"]) and "the meter was overloaded for" in str(
        quiet["summary"]
    )
    assert "averaged at least 79." in str(quiet["summary"])
    # Minute 2 read above it: a violation all the same, of at least what was read.
    [loud] = [f for f in noise.values() if f["kind"] == "violation"]
    assert "averaged at least 8" in str(loud["summary"]), loud["summary"]
    assert "the meter was overloaded for 60 seconds" in str(loud["summary"])
