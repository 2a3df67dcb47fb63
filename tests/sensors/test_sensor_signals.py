"""A SIGTERM while `minewatch sensor` is still starting: it drains and exits 0, and what it had
queued stays in (or leaves through) its store-and-forward queue. Real Mosquitto.

To hit "still starting" deterministically the WAV source is a FIFO: the sensor blocks opening
its source until the test writes the recording, and the signal is sent while it waits there
(before the fix the handlers were set only after the source was open: the signal killed it).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import resource
import signal
import subprocess
import sys
import time
import wave
from pathlib import Path

import numpy as np
import pytest

from sensors.queue import ForwardQueue
from tests.support.sensors import Subscriber, site_config, wait_for
from tests.support.servers import Mosquitto, free_port

pytestmark = pytest.mark.timeout(120)


def _wav_bytes(path: Path, seconds: int = 2, rate: int = 8000) -> bytes:
    tone = (0.1 * np.sin(2 * np.pi * 1000 * np.arange(seconds * rate) / rate) * 32767).astype("<i2")
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(tone.tobytes())
    return path.read_bytes()


def _sigterm_while_opening_the_source(tmp_path: Path, url: str, queued: int) -> tuple[int, str, Path]:
    """Start the sensor on a FIFO source with ``queued`` messages already queued; SIGTERM it while
    it waits for its source; then let the source open. Returns (exit status, log, queue path)."""
    config = site_config(tmp_path, url)
    queue_path = tmp_path / "n1.queue.db"
    q = ForwardQueue(queue_path)
    for i in range(queued):
        q.put("minewatch/dovre-quarry/sensors/n1/status", f'{{"ts": {1781520000 + i}}}'.encode())
    q.close()
    wav = _wav_bytes(tmp_path / "tone.wav")
    fifo = tmp_path / "source.wav"
    os.mkfifo(fifo)
    log_path = tmp_path / "sensor.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "monitor.cli", "sensor", "sound", "--config", str(config)),
                *("--sensor", "n1", "--source", f"wav:{fifo}", "--queue", str(queue_path)),
                *("--speed", "max", "--start", "2026-06-15T11:00", "--drain-timeout", "3"),
            ],
            stdout=log,
            stderr=log,
        )
        try:
            # The sensor has opened the FIFO for reading once a non-blocking writer can open it.
            deadline = time.monotonic() + 60
            while True:
                try:
                    fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
                    break
                except OSError as exc:
                    assert exc.errno == errno.ENXIO, exc
                    assert proc.poll() is None, log_path.read_text()
                    assert time.monotonic() < deadline, "the sensor never opened its source"
                    time.sleep(0.02)
            proc.send_signal(signal.SIGTERM)  # it is blocked reading its source: still starting
            time.sleep(0.3)
            os.set_blocking(fd, True)
            # BrokenPipeError: the reader is gone, killed by the signal (the failure this test catches).
            with contextlib.suppress(BrokenPipeError):
                os.write(fd, wav)
            os.close(fd)
            code = proc.wait(60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return code, log_path.read_text(errors="replace"), queue_path


def test_sigterm_while_starting_drains_to_the_broker(tmp_path: Path, mosquitto: Mosquitto) -> None:
    sub = Subscriber(mosquitto.port, "minewatch/dovre-quarry/sensors/n1/status", client_id="sig-sub")
    try:
        code, log, queue_path = _sigterm_while_opening_the_source(tmp_path, mosquitto.url, queued=5)
        assert code == 0, log
        assert "Signal received while starting" in log, log
        # The five queued before the start, and its start and end heartbeats.
        assert wait_for(lambda: len(sub.received()) >= 5, timeout=20), sub.received()
    finally:
        sub.close()
    q = ForwardQueue(queue_path)
    try:
        assert len(q) == 0  # drained: everything acknowledged by the broker
    finally:
        q.close()


def test_sigterm_while_starting_keeps_the_queue_when_the_broker_is_away(tmp_path: Path) -> None:
    code, log, queue_path = _sigterm_while_opening_the_source(tmp_path, f"mqtt://127.0.0.1:{free_port()}", 5)
    assert code == 0, log
    assert "still queued" in log and "(sent on the next start)" in log, log
    q = ForwardQueue(queue_path)
    try:
        assert len(q) >= 5  # nothing lost: the queued readings (and heartbeats) wait on disk
        assert len(q.next_batch(0, 100)) == len(q)
    finally:
        q.close()


def test_a_full_disk_does_not_stop_the_sensor_and_its_last_line_counts_the_disk(tmp_path: Path) -> None:
    """The queue's disk fills while the broker is away: the kernel refuses the sensor's writes past
    a file-size limit (RLIMIT_FSIZE, set on its process alone), as on a full card. It measures
    on, says so once, and at the end names what the disk never took; the count it leaves queued
    is what the file holds."""
    config = site_config(tmp_path, f"mqtt://127.0.0.1:{free_port()}")  # nothing listens there
    queue_path = tmp_path / "n1.queue.db"
    log_path = tmp_path / "sensor.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "monitor.cli", "sensor", "sound", "--config", str(config)),
                *("--sensor", "n1", "--source", "synthetic:70", "--queue", str(queue_path)),
                *("--speed", "max", "--start", "2026-06-15T11:00", "--duration", "3000"),
                *("--drain-timeout", "1"),
            ],
            stdout=log,
            stderr=log,
        )
        # Python ignores SIGXFSZ: a write past the limit fails (EFBIG), and SQLite says so.
        resource.prlimit(proc.pid, resource.RLIMIT_FSIZE, (300_000, resource.RLIM_INFINITY))
        code = proc.wait(90)
    text = log_path.read_text(errors="replace")
    assert code == 0, text
    assert "Traceback" not in text, text
    assert text.count(f"Writing the queue {queue_path} failed") == 1, text
    lost = re.search(r"(\d+) message\(s\) waiting in memory are lost", text)
    left = re.search(
        r"Stopped: 0 message\(s\) delivered \(acknowledged by the broker\), (\d+) still queued in .*"
        r" \(sent on the next start\), (\d+) lost \((\d+) waited in memory while the disk refused them\)",
        text,
    )
    assert lost is not None and left is not None, text
    q = ForwardQueue(queue_path)
    try:
        assert int(left.group(1)) == len(q) > 0
        assert int(lost.group(1)) == int(left.group(2)) == int(left.group(3))  # nothing delivered
    finally:
        q.close()
    # Measured: the heartbeat first, then 3000 seconds of levels and the heartbeats, on disk or lost.
    measured = 1 + 3000 + 3000 // 60 + 1
    assert len(q) + int(left.group(2)) == measured, text
