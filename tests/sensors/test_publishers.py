"""`minewatch sensor sound|light` against a real Mosquitto: what arrives decodes with monitor.wire.codec."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import wave
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from monitor.cli import main
from monitor.config import load_config
from monitor.wire.codec import decode
from monitor.wire.protocol import Limits
from rules.model import LightSummary, SensorStatus, SoundLevels
from sensors.sound import SoundProcessor, Trigger
from tests.support.sensors import Subscriber, site_config, wait_for
from tests.support.servers import Mosquitto

NOW = datetime(2026, 12, 31, tzinfo=UTC)  # after every timestamp below: the codec's clock check
PAST_OK = Limits(max_past_s=1e9)  # the replays are dated in the past on purpose


def sensor_cmd(config: Path, kind: str, sensor: str, source: str, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "monitor.cli",
        "sensor",
        kind,
        "--config",
        str(config),
        "--sensor",
        sensor,
        "--source",
        source,
        "--queue",
        str(config.parent / f"{sensor}.queue.db"),
        *extra,
    ]


def run_sensor(
    config: Path, kind: str, sensor: str, source: str, *extra: str
) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        sensor_cmd(config, kind, sensor, source, *extra), capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    return result


def decoded(config: Path, messages: list[tuple[str, bytes]]) -> list[object]:
    sites = {s.id: s for s in load_config(config).sites}
    return [decode(topic, payload, sites, NOW, PAST_OK) for topic, payload in messages]


def test_synthetic_sound_levels(tmp_path: Path, mosquitto: Mosquitto) -> None:
    config = site_config(tmp_path, mosquitto.url)
    sub = Subscriber(mosquitto.port, "minewatch/dovre-quarry/sensors/n2/#")
    try:
        run_sensor(
            config,
            "sound",
            "n2",
            "synthetic:72",
            "--speed",
            "max",
            "--duration",
            "6",
            "--start",
            "2026-06-15T11:00:00",
        )
        assert wait_for(lambda: len(sub.received("/levels")) == 6), sub.received()
        records = decoded(config, sub.received())
    finally:
        sub.close()
    levels = [r for r in records if isinstance(r, SoundLevels)]
    assert [r.ts.astimezone(UTC).isoformat() for r in levels[:2]] == [
        "2026-06-15T16:00:00+00:00",
        "2026-06-15T16:00:01+00:00",
    ]
    assert all(abs(r.LAeq - 72.0) < 1.0 and r.LCpeak > r.LAeq for r in levels[1:])
    status = [r for r in records if isinstance(r, SensorStatus)]
    assert status  # the start and end heartbeats
    body = json.loads(sub.received("/status")[-1][1])
    assert body["queued"] >= 0 and body["dropped"] == 0


def test_wav_replay_matches_the_recording(tmp_path: Path, mosquitto: Mosquitto) -> None:
    config = site_config(tmp_path, mosquitto.url)
    # A 1 kHz tone at 0.1 of full scale for 4.5 s: 120 + 20 log10(0.1) = 100 dB, A = Z at 1 kHz.
    # The last half second is a level of its own, of 0.5 s (it was dropped).
    rate = 16000
    tone = (0.1 * np.sin(2 * np.pi * 1000 * np.arange(int(4.5 * rate)) / rate) * 32767).astype("<i2")
    path = tmp_path / "tone.wav"
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(tone.tobytes())
    sub = Subscriber(mosquitto.port, "minewatch/dovre-quarry/sensors/n1/levels")
    try:
        run_sensor(config, "sound", "n1", f"wav:{path}", "--speed", "20", "--start", "2026-06-15T11:00")
        assert wait_for(lambda: len(sub.received()) == 5), sub.received()
        levels = decoded(config, sub.received())
    finally:
        sub.close()
    assert all(isinstance(r, SoundLevels) and abs(r.LAeq - 100.0) < 0.2 for r in levels[1:]), levels
    assert [r.duration_s for r in levels] == [1.0, 1.0, 1.0, 1.0, 0.5]


def test_light_bursts_for_flashing_detection(tmp_path: Path, mosquitto: Mosquitto) -> None:
    config = site_config(tmp_path, mosquitto.url)
    sub = Subscriber(mosquitto.port, "minewatch/dovre-quarry/sensors/l2/#")
    try:
        # Flashing at 1 Hz between 2 lux and 0.1 lux, sampled at 10 Hz, 10 s summaries.
        run_sensor(
            config,
            "light",
            "l2",
            "synthetic:2:1",
            "--speed",
            "max",
            "--duration",
            "30",
            "--start",
            "2026-06-15T23:00:00",
        )
        assert wait_for(lambda: len(sub.received("/light")) == 3), sub.received()
        records = decoded(config, sub.received())
    finally:
        sub.close()
    light = [r for r in records if isinstance(r, LightSummary)]
    assert all(
        r.duration_s == 10 and len(r.burst) == 100 and r.burst_rate_hz == pytest.approx(10, rel=0.02)
        for r in light
    )
    assert light[0].lux_max > 1.9 and light[0].lux_min < 0.2
    from rules.flashing_light import FlashingLightParams, analyse_burst

    flashing = analyse_burst(light[0], FlashingLightParams())
    assert flashing is not None and flashing.frequency_hz == pytest.approx(1.0, abs=0.15)


def test_soundcard_without_sounddevice_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = site_config(tmp_path, "mqtt://127.0.0.1:1")
    monkeypatch.setitem(sys.modules, "sounddevice", None)  # import fails as if not installed
    code = main(["sensor", "sound", "--config", str(config), "--sensor", "n1", "--source", "soundcard"])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("minewatch sensor sound: the soundcard source needs the 'sounddevice' package")
    assert len(err.splitlines()) == 1


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--sensor", "l1", "--source", "synthetic"], "sensor l1 is a light sensor, not a sound sensor"),
        (["--sensor", "zz", "--source", "synthetic"], "no sensor 'zz'"),
        (["--sensor", "n1", "--source", "mic"], "unknown source 'mic'"),
        (["--sensor", "n1", "--source", "wav:/nonexistent.wav"], "/nonexistent.wav: no such file"),
    ],
)
def test_setup_errors_exit_2_before_connecting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    config = site_config(tmp_path, "mqtt://127.0.0.1:1")
    assert main(["sensor", "sound", "--config", str(config), *argv]) == 2
    assert message in capsys.readouterr().err


def test_audio_clips_around_events() -> None:
    rate = 8000
    rng = np.random.default_rng(1)
    quiet = 0.001 * rng.standard_normal(20 * rate)
    t = np.arange(int(0.2 * rate)) / rate
    start = int(10.1 * rate)
    quiet[start : start + t.size] += 0.3 * np.sin(2 * np.pi * 1000 * t)  # a loud 200 ms in second 10
    origin = datetime(2026, 6, 15, 12, tzinfo=UTC)
    processor = SoundProcessor(
        "s", "n1", rate, 120.0, origin, "events", Trigger(95.0, 200.0, pre_s=3, post_s=4)
    )
    out = processor.feed(quiet)
    levels = [r for r in out if isinstance(r, SoundLevels)]
    blocks = [r for r in out if not isinstance(r, SoundLevels)]
    assert len(levels) == 20 and processor.triggers == 1
    # 3 s before, the triggering second, 4 s after: seconds 7..14, in order, seq 1..8.
    assert [int((b.ts - origin).total_seconds()) for b in blocks] == list(range(7, 15))
    assert [b.seq for b in blocks] == list(range(1, 9))
    assert math.isclose(levels[10].LZpeak or 0, 120 + 20 * math.log10(0.3 * math.sqrt(2)), abs_tol=0.5)
    assert levels[10].LAFmax > 95 > levels[11].LAFmax
