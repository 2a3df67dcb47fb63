"""The queue on a real full disk (a tiny tmpfs, tests/support/tiny_disk.py), through `minewatch
sensor` and a real Mosquitto: what the disk refuses waits in memory, and once the broker is back
everything is delivered, acknowledged rows leave the file although the disk stays full, and
nothing delivered is left to be sent again.

A SQLite page limit (tests/sensors/test_queue.py) is no full disk: there the WAL and the files
beside the queue may still grow, which hid that deleting acknowledged rows needs disk too."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from sensors.queue import ForwardQueue
from tests.support.sensors import Subscriber, site_config, wait_for
from tests.support.servers import Mosquitto
from tests.support.tiny_disk import fill, tiny_disk

pytestmark = pytest.mark.timeout(240)

SECONDS = 120


def _seconds(sub: Subscriber) -> set[str]:
    return {json.loads(p)["ts"] for _, p in sub.received("/levels")}


@pytest.mark.parametrize(
    "free_kib",
    [
        600,  # room for the reserve and some seconds of audio, then full
        64,  # less than the reserve from the start: nothing goes to disk, all is sent from memory
    ],
)
def test_a_disk_that_stays_full_delivers_everything_once_the_broker_is_back(
    tmp_path: Path, mosquitto: Mosquitto, free_kib: int
) -> None:
    config = site_config(tmp_path, mosquitto.url)
    sub = Subscriber(mosquitto.port, "minewatch/dovre-quarry/sensors/n1/levels", client_id="disk-sub")
    mosquitto.stop()  # the subscriber's session waits in the broker's persistence
    log_path = tmp_path / "sensor.log"
    with tiny_disk(tmp_path / "card", "1m") as card:
        queue_path = card / "n1.queue.db"
        fill(card, free_kib * 1024)
        try:
            with log_path.open("wb") as log:
                proc = subprocess.Popen(
                    [
                        *(sys.executable, "-m", "monitor.cli", "sensor", "sound", "--config", str(config)),
                        *("--sensor", "n1", "--source", "synthetic:60", "--audio", "continuous"),
                        *("--queue", str(queue_path), "--speed", "20", "--duration", str(SECONDS)),
                        *("--start", "2026-06-15T11:00", "--drain-timeout", "30"),
                    ],
                    stdout=log,
                    stderr=log,
                )
                try:
                    refused = f"Writing the queue {queue_path} failed"
                    assert wait_for(lambda: refused in log_path.read_text(errors="replace"), 60), (
                        log_path.read_text(errors="replace")
                    )
                    mosquitto.start()  # the disk still full: the filler stays
                    code = proc.wait(180)
                finally:
                    if proc.poll() is None:
                        proc.kill()
                        proc.wait()
            text = log_path.read_text(errors="replace")
            assert code == 0, text
            assert "Traceback" not in text, text
            assert "are lost" not in text, text
            assert wait_for(lambda: len(_seconds(sub)) == SECONDS, 30), (len(_seconds(sub)), text)
            # Nothing delivered stays in the file to be sent again by the next start.
            q = ForwardQueue(queue_path)
            try:
                assert len(q) == 0, text
            finally:
                q.close()
            # Its last line counts what the broker took: each second's levels and audio, the heartbeats.
            stopped = re.search(
                r"Stopped: (\d+) message\(s\) delivered \(acknowledged by the broker\), 0 still", text
            )
            assert stopped is not None and int(stopped.group(1)) >= 2 * SECONDS + 2, text
            assert ", 0 lost" in text, text
        finally:
            sub.close()


def test_a_queue_the_full_disk_refused_at_the_start_is_not_left_behind(tmp_path: Path) -> None:
    """The sensor makes its queue's file empty before SQLite writes its tables there; a disk too
    full for the tables left that empty file, which the next start then refused as no queue a
    sensor made. The file it made is removed with the one-line refusal; with room, it starts."""
    config = site_config(tmp_path, "mqtt://127.0.0.1:9")
    argv = [
        *(sys.executable, "-m", "monitor.cli", "sensor", "sound", "--config", str(config)),
        *("--sensor", "n1", "--source", "synthetic:60", "--duration", "2", "--drain-timeout", "1"),
    ]
    with tiny_disk(tmp_path / "card", "1m") as card:
        queue_path = card / "n1.queue.db"
        filler = fill(card, 0)
        full = subprocess.run([*argv, "--queue", str(queue_path)], capture_output=True, text=True, timeout=60)
        assert full.returncode == 2 and full.stderr.endswith("database or disk is full\n"), full.stderr
        assert sorted(p.name for p in card.iterdir()) == ["filler"]
        filler.unlink()
        again = subprocess.run(
            [*argv, "--queue", str(queue_path)], capture_output=True, text=True, timeout=60
        )
        assert again.returncode == 0 and "still queued in" in again.stderr, again.stderr


def test_a_file_replaced_with_force_on_a_full_disk_is_kept(tmp_path: Path) -> None:
    """`notices show ID --out n.pdf --force` (and report-blast) wrote straight into the file: on a
    full disk the user's n.pdf was left as the first 4 KiB of the new PDF. It is written beside
    and renamed over, so the file is replaced whole or kept as it was, and named in the line."""
    from monitor.journal.store import Store
    from tests.monitor.notify.test_notice_service import _open
    from tests.support.notices import make_config

    store_path = tmp_path / "store.db"
    config = make_config(store_path)
    store = Store(store_path)
    try:
        notice_id = _open(store, config)
    finally:
        store.close()
    config_path = tmp_path / "minewatch.toml"
    config_path.write_text(config.raw_text)
    with tiny_disk(tmp_path / "card", "256k") as card:
        mine = card / "n.pdf"
        mine.write_text("the user's own notice\n")
        fill(card, 0)
        argv = ["notices", "show", notice_id, "--config", config_path, "--out", mine, "--force"]
        done = subprocess.run(
            [sys.executable, "-m", "monitor.cli", *map(str, argv)], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 2, done.stderr
        assert done.stderr == f"minewatch notices show: {mine}: No space left on device\n"
        assert mine.read_text() == "the user's own notice\n"
        assert sorted(p.name for p in card.iterdir()) == ["filler", "n.pdf"]
