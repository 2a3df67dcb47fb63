"""The sound card path for real: `minewatch sensor sound --source soundcard:DEVICE` captures
through sounddevice -> PortAudio -> alsa-lib from an ALSA PCM that plays a known recording,
and publishes (through a real Mosquitto) the levels `minewatch levels` gives for that file.

The machine has no sound card, so the device is ALSA's own `file` plugin over the `null`
PCM: on capture it reads its `infile` (raw samples in the negotiated format) into what the
application records. A `plug` PCM in front pins the layout to the raw file's: FLOAT_LE
(what SoundcardSource asks PortAudio for, so the plug passes it through), 48 kHz, mono.
The raw file holds the WAV's samples scaled to full scale 1.0, exactly as float32. (With a
conversion in the plug, e.g. an S16_LE file, alsa-lib 1.2.8 loses a period now and then
over the unpaced `null` PCM: measured here, the capture skipped 0.5 s after 1.5 s.)
The configuration goes in a temporary `$XDG_CONFIG_HOME/alsa/asoundrc`, which alsa-lib
1.2.x loads besides `~/.asoundrc` (the `@hooks` of /usr/share/alsa/alsa.conf; there is no
ASOUNDRC variable). The `null` PCM is not paced by a clock, so the capture runs faster than
real time; the source's queue keeps the first 32 s in order, more than the recording.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import wave
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from tests.support.sensors import Subscriber, site_config, wait_for
from tests.support.servers import Mosquitto

pytestmark = pytest.mark.timeout(180)

RATE = 48000  # SoundcardSource captures at 48 kHz
SECONDS = 8
CALIBRATION_DB = 120.0  # the sensor's default calibration.full_scale_db

ASOUNDRC = """\
pcm.minewatch_file {{
    type file
    slave.pcm "null"
    file "/dev/null"
    infile "{raw}"
    format "raw"
}}
pcm.minewatch_test {{
    type plug
    slave {{ pcm "minewatch_file"; format FLOAT_LE; rate {rate}; channels 1 }}
}}
"""


def _recording(tmp_path: Path) -> tuple[Path, Path]:
    """A WAV of noise whose level steps every second, and its samples as a raw FLOAT_LE file."""
    rng = np.random.default_rng(16)
    gains = 10 ** (rng.uniform(-50, -15, SECONDS) / 20)
    x = rng.standard_normal(SECONDS * RATE) * np.repeat(gains, RATE)
    pcm = (np.clip(x, -1.0, 32767 / 32768) * 32768).astype("<i2")
    wav = tmp_path / "known.wav"
    with wave.open(str(wav), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(RATE)
        w.writeframes(pcm.tobytes())
    raw = tmp_path / "known.f32"
    raw.write_bytes((pcm / 32768).astype("<f4").tobytes())  # exact: 16-bit values fit a float32
    return wav, raw


def _alsa_env(tmp_path: Path, raw: Path) -> dict[str, str]:
    xdg = tmp_path / "xdg"
    (xdg / "alsa").mkdir(parents=True)
    (xdg / "alsa" / "asoundrc").write_text(ASOUNDRC.format(raw=raw, rate=RATE))
    return dict(os.environ, XDG_CONFIG_HOME=str(xdg), PYTHONUNBUFFERED="1")


def test_the_alsa_configuration_plays_the_recording(tmp_path: Path) -> None:
    """The device itself, checked with alsa-utils' arecord: it records the known samples."""
    _, raw = _recording(tmp_path)
    out = tmp_path / "arecord.raw"
    result = subprocess.run(
        [
            *("arecord", "-q", "-D", "minewatch_test", "-t", "raw", "-f", "FLOAT_LE"),
            *("-r", str(RATE), "-c", "1", "-s", str(SECONDS * RATE), str(out)),
        ],
        env=_alsa_env(tmp_path, raw),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert out.read_bytes() == raw.read_bytes()


def test_soundcard_capture_publishes_the_levels_of_the_recording(
    tmp_path: Path, mosquitto: Mosquitto
) -> None:
    pytest.importorskip("sounddevice", reason="the `test` extra installs sounddevice")
    wav, raw = _recording(tmp_path)
    env = _alsa_env(tmp_path, raw)
    reference = subprocess.run(
        [
            *(sys.executable, "-m", "monitor.cli", "levels", str(wav)),
            *("--calibration", str(CALIBRATION_DB), "--format", "json"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    expected = json.loads(reference.stdout)[:SECONDS]  # whole seconds only (no partial period)
    assert len(expected) == SECONDS

    config = site_config(tmp_path, mosquitto.url)
    sub = Subscriber(mosquitto.port, "minewatch/dovre-quarry/sensors/n1/levels", client_id="alsa-sub")
    try:
        result = subprocess.run(
            [
                *(sys.executable, "-m", "monitor.cli", "sensor", "sound", "--config", str(config)),
                *("--sensor", "n1", "--source", "soundcard:minewatch_test", "--duration", str(SECONDS)),
                *("--queue", str(tmp_path / "n1.queue.db"), "--drain-timeout", "20"),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stderr
        assert wait_for(lambda: len(sub.received()) >= SECONDS, timeout=20), result.stderr
        published = [json.loads(p) for _, p in sub.received()]
    finally:
        sub.close()
    published.sort(key=lambda m: m["ts"])
    assert len(published) == SECONDS, published
    for got, want in zip(published, expected, strict=True):
        for name in ("LAeq", "LAFmax", "LCpeak"):
            assert abs(got[name] - want[name]) <= 0.1, (name, got, want)
    # The steps are there: the capture is the recording, not silence or noise of its own.
    assert max(m["LAeq"] for m in published) - min(m["LAeq"] for m in published) > 10


class _StallingDevice(threading.Thread):
    """Writes noise into the device's FIFO until ``stall`` is set, then keeps it open unwritten.
    PortAudio opens the device more than once (probing it first): each reader gets the FIFO anew,
    and a probe may leave bytes unread, so the stream's floats need not start on a 4-byte edge.
    Every byte is 0x3C to 0x3E, so any four of them read as a float of about 0.01 to 0.5 whatever
    the alignment."""

    def __init__(self, fifo: Path) -> None:
        super().__init__(daemon=True)
        self.fifo = fifo
        self.stall = threading.Event()
        self.done = threading.Event()
        self.fds: list[int] = []

    def run(self) -> None:
        rng = np.random.default_rng(7)
        chunk = rng.integers(0x3C, 0x3F, size=4 * (RATE // 10), dtype=np.uint8).tobytes()  # 0.1 s
        while not self.done.is_set():
            fd = os.open(self.fifo, os.O_WRONLY)  # blocks until the device opens it
            self.fds.append(fd)
            try:
                while not self.stall.is_set():
                    os.write(fd, chunk)
            except BrokenPipeError:
                continue  # a probe closed it
            self.done.wait()

    def close(self) -> None:
        self.done.set()
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)


def test_a_device_that_stops_delivering_is_said_and_a_sigterm_still_stops_the_sensor(
    tmp_path: Path, mosquitto: Mosquitto
) -> None:
    """The device's samples come from a FIFO that the test feeds for a while and then keeps open
    without writing, as a sound card that stops calling back (an unplugged USB card): alsa-lib
    waits in its read, so PortAudio's callbacks stop. A real part, no fake sounddevice. The sensor
    says so once, its heartbeats go on, and a SIGTERM ends it cleanly, its queue drained."""
    pytest.importorskip("sounddevice", reason="the `test` extra installs sounddevice")
    fifo = tmp_path / "device.f32"
    os.mkfifo(fifo)
    env = _alsa_env(tmp_path, fifo)
    config = site_config(tmp_path, mosquitto.url)
    sub = Subscriber(mosquitto.port, "minewatch/dovre-quarry/sensors/n1/#", client_id="stall-sub")
    log_path = tmp_path / "sensor.log"
    device = _StallingDevice(fifo)
    device.start()
    try:
        with log_path.open("wb") as log:
            proc = subprocess.Popen(
                [
                    *(sys.executable, "-m", "monitor.cli", "sensor", "sound", "--config", str(config)),
                    *("--sensor", "n1", "--source", "soundcard:minewatch_test", "--status-interval", "1"),
                    *("--queue", str(tmp_path / "n1.queue.db"), "--drain-timeout", "10"),
                ],
                env=env,
                stdout=log,
                stderr=log,
            )
            try:
                # Capturing: seconds measured, published or (alsa's file plugin fills a FIFO's
                # short reads with whatever its buffer held, not numbers) left out as no signal.
                assert wait_for(
                    lambda: (
                        len(sub.received("/levels")) >= 2
                        or "No signal:" in log_path.read_text(errors="replace")
                    ),
                    60,
                ), log_path.read_text(errors="replace")
                device.stall.set()
                said = "No audio from the device"
                assert wait_for(lambda: said in log_path.read_text(errors="replace"), 60), log_path.read_text(
                    errors="replace"
                )
                beats = len(sub.received("/status"))
                assert wait_for(lambda: len(sub.received("/status")) >= beats + 2, 20), "no heartbeat"
                proc.send_signal(signal.SIGTERM)
                code = proc.wait(30)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
    finally:
        device.close()
        sub.close()
    text = log_path.read_text(errors="replace")
    assert code == 0, text
    assert text.count("No audio from the device") == 1, text
    assert "Stopped:" in text and "Traceback" not in text, text


def test_a_device_faster_than_the_system_clock_has_its_times_follow_the_clock(
    tmp_path: Path, mosquitto: Mosquitto
) -> None:
    """The `null` PCM delivers 25 s of samples at once: a sound card whose clock runs far fast.
    Its levels are counted from the samples for the first check (10 s of samples); then they
    follow the system clock, and the seconds whose times it has passed already are left out, so
    that what is published never overlaps nor goes back. Published in order of capture."""
    pytest.importorskip("sounddevice", reason="the `test` extra installs sounddevice")
    seconds = 25
    rng = np.random.default_rng(3)
    raw = tmp_path / "noise.f32"
    raw.write_bytes((0.01 * rng.standard_normal(seconds * RATE)).astype("<f4").tobytes())
    env = _alsa_env(tmp_path, raw)
    config = site_config(tmp_path, mosquitto.url)
    sub = Subscriber(mosquitto.port, "minewatch/dovre-quarry/sensors/n1/#", client_id="fast-sub")
    try:
        result = subprocess.run(
            [
                *(sys.executable, "-m", "monitor.cli", "sensor", "sound", "--config", str(config)),
                *("--sensor", "n1", "--source", "soundcard:minewatch_test", "--duration", str(seconds)),
                *("--queue", str(tmp_path / "n1.queue.db"), "--drain-timeout", "20"),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stderr
        sent = int(result.stderr.split("Stopped: ")[1].split(" message")[0])
        assert wait_for(lambda: len(sub.received()) >= sent, timeout=20), result.stderr
        published = [json.loads(p) for _, p in sub.received("/levels")]
    finally:
        sub.close()
    assert "its levels follow the system clock from here" in result.stderr, result.stderr
    assert "are left out until they pass" in result.stderr, result.stderr
    assert 9 <= len(published) < seconds, len(published)
    spans = [
        (
            datetime.fromisoformat(m["ts"]),
            datetime.fromisoformat(m["ts"]) + timedelta(seconds=m["duration_s"]),
        )
        for m in published
    ]
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert start >= end, (end, start)  # in the order captured: never overlapping, never back
