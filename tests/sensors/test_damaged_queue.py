"""A queue file a power cut damaged (an SD card's): the sensor sets it aside under a new name,
says where and that what it held is not sent, and measures on with a new queue, rather than
exiting with 2 for ever under systemd's Restart. A file no sensor has used is left alone."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from monitor.claims import claim_queue
from sensors.queue import ForwardQueue
from tests.support.sensors import site_config
from tests.support.servers import free_port

pytestmark = pytest.mark.timeout(120)


def _sensor(tmp_path: Path, queue: Path) -> subprocess.CompletedProcess[str]:
    config = site_config(tmp_path, f"mqtt://127.0.0.1:{free_port()}")  # nothing listens there
    return subprocess.run(
        [
            *(sys.executable, "-m", "monitor.cli", "sensor", "sound", "--config", str(config)),
            *("--sensor", "n1", "--source", "synthetic:60", "--queue", str(queue), "--speed", "max"),
            *("--start", "2026-06-15T11:00", "--duration", "3", "--drain-timeout", "0.5"),
        ],
        capture_output=True,
        text=True,
        timeout=90,
    )


def _used_queue(path: Path) -> None:
    """A queue a sensor has used: messages in it, its claim file beside it."""
    q = ForwardQueue(path, claim=claim_queue(str(path)))
    for i in range(50):
        q.put("minewatch/dovre-quarry/sensors/n1/status", f'{{"n": {i}}}'.encode() * 40)
    q.close()


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        (lambda b: b"\0" * 100 + b[100:], "file is not a database"),  # the header lost
        (lambda b: b[:4096] + b"\xff" * 4096 + b[8192:], "malformed"),  # a page overwritten
    ],
)
def test_a_damaged_queue_is_set_aside_and_a_new_one_started(
    tmp_path: Path, damage: Callable[[bytes], bytes], said: str
) -> None:
    queue = tmp_path / "n1.queue.db"
    _used_queue(queue)
    damaged = damage(queue.read_bytes())
    queue.write_bytes(damaged)
    result = _sensor(tmp_path, queue)
    assert result.returncode == 0, result.stderr
    aside = [p for p in tmp_path.glob("n1.queue.db.damaged-*") if not p.name.endswith(("-wal", "-shm"))]
    assert len(aside) == 1 and aside[0].read_bytes() == damaged, aside  # kept as it was
    line = next(line for line in result.stderr.splitlines() if "is damaged" in line)
    assert said in line and f"moved to {aside[0]}" in line and "is not sent" in line, line
    q = ForwardQueue(queue)
    try:
        assert len(q) >= 3  # the new queue holds what this run measured
    finally:
        q.close()
    # A second damaged file the same second gets a name of its own: nothing is written over.
    queue.write_bytes(damaged)
    assert _sensor(tmp_path, queue).returncode == 0
    assert len([p for p in tmp_path.glob("*.damaged-*") if not p.name.endswith(("-wal", "-shm"))]) == 2


def test_a_file_no_sensor_used_is_left_alone(tmp_path: Path) -> None:
    queue = tmp_path / "notes.db"
    queue.write_bytes(b"not a queue at all\n" * 300)
    result = _sensor(tmp_path, queue)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        f"minewatch sensor sound: --queue {queue}: file is not a database; name a new file for the queue"
    )
    assert queue.read_bytes() == b"not a queue at all\n" * 300
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.db", "site.toml"]
