"""A queue file a power cut damaged (an SD card's): the sensor sets it aside under a new name,
says where and that what it held is not sent, and measures on with a new queue, rather than
exiting with 2 for ever under systemd's Restart. A file no sensor has used is left alone.
A file found damaged while the sensor runs is set aside the same way, and it goes on; one that
cannot be set aside (its folder read-only) is left as it is, the sensor going on from memory
(stopping with one line at its start). A first page damaged under the running queue is written
again from SQLite's copy, nothing lost."""

from __future__ import annotations

import logging
import os
import random
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import sensors.queue
from monitor.claims import QueueTaken, claim_queue
from sensors.queue import ForwardQueue, QueueBounds
from tests.support.sensors import Subscriber, site_config, wait_for
from tests.support.servers import Mosquitto, free_port
from tests.support.tiny_disk import fill, tiny_disk

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


# More than SQLite's page cache (2 MB): its pages are read from the disk again, as on a sensor
# whose queue grew through an outage, so damage under the running queue is met.
BIG_QUEUE = 8000
TOPIC = "minewatch/dovre-quarry/sensors/n1/backlog"


def _fill(q: ForwardQueue, n: int = BIG_QUEUE) -> None:
    rng = random.Random(7)
    for _ in range(n):
        q.put(TOPIC, rng.randbytes(500))


DAMAGES: dict[str, Callable[[Path], None]] = {
    # The disk returns garbage past the first pages.
    "garbage": lambda p: p.write_bytes(
        p.read_bytes()[:8192] + random.Random(1).randbytes(p.stat().st_size - 8192)
    ),
    "truncated": lambda p: os.truncate(p, 8192),
    # Another program wrote over it (the same file, other bytes).
    "overwritten": lambda p: p.write_bytes(b"notes\n" * 200_000),
}


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_queue_damaged_while_running_is_set_aside_and_what_waits_in_memory_is_kept(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: str
) -> None:
    """It raised 'database disk image is malformed' from every next_batch, for ever."""
    path = tmp_path / "n1.queue.db"
    q = ForwardQueue(path, claim=claim_queue(str(path)))
    _fill(q)
    # The disk refuses writes for a moment (SQLite's own page limit: a real SQLITE_FULL): three
    # messages wait in memory with the ids they will have.
    q.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    q.conn.execute(f"PRAGMA max_page_count = {q.conn.execute('PRAGMA page_count').fetchone()[0]}")
    waiting = [q.put(TOPIC, f"waiting {i}".encode() * 300) for i in range(3)]
    assert q.held == 3 and waiting == [BIG_QUEUE + 1, BIG_QUEUE + 2, BIG_QUEUE + 3]
    DAMAGES[damage](path)
    damaged_bytes = path.read_bytes()
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="minewatch.sensors.queue"):
        batch = q.next_batch(0, 100)
    assert [m.id for m in batch] == waiting  # from memory; the damaged file's are gone
    aside = [p for p in tmp_path.glob("n1.queue.db.damaged-*") if not p.name.endswith(("-wal", "-shm"))]
    assert len(aside) == 1 and aside[0].read_bytes() == damaged_bytes  # kept as it was
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(said) == 1, said
    assert said[0].startswith(f"The queue {path} is damaged (") and f"moved to {aside[0]}" in said[0]
    assert f"with the {BIG_QUEUE} message(s) queued in it, which are not sent" in said[0]
    assert "3 waiting in memory are kept" in said[0]
    # It goes on: what waited reaches the new file, ids go on from there, and the new file is
    # this sensor's (the damaged one is nobody's).
    new = q.put(TOPIC, b"after")
    assert new == BIG_QUEUE + 4 and q.held == 0 and len(q) == 4 and q.lost_to_damage == BIG_QUEUE
    with pytest.raises(QueueTaken):
        claim_queue(str(path))
    claim_queue(str(aside[0])).release()
    q.close()
    again = ForwardQueue(path)
    try:
        assert [m.id for m in again.next_batch(0, 100)] == [*waiting, new]
    finally:
        again.close()


@pytest.mark.parametrize(
    ("where", "meets_it"),
    [
        ("delete", lambda q: q.delete([1, 2, 3])),
        ("put", lambda q: q.put(TOPIC, b"one too many")),  # past the bound: the oldest dropped
    ],
)
def test_damage_met_on_any_running_path_starts_a_new_queue(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, where: str, meets_it: Callable[[ForwardQueue], object]
) -> None:
    path = tmp_path / "n1.queue.db"
    q = ForwardQueue(path, QueueBounds(max_messages=BIG_QUEUE, max_bytes=0))
    _fill(q)
    DAMAGES["garbage"](path)
    with caplog.at_level(logging.INFO, logger="minewatch.sensors.queue"):
        meets_it(q)
        q.put(TOPIC, b"goes on")
    assert sum("is damaged" in r.getMessage() for r in caplog.records) == 1, caplog.text
    assert [m.payload for m in q.next_batch(0, 100)][-1] == b"goes on"
    q.close()


@pytest.mark.timeout(180)
def test_a_running_sensor_whose_queue_is_damaged_goes_on_publishing(tmp_path: Path) -> None:
    """A sensor resumed with a backlog, the broker away; its file is damaged under it; when the
    broker is back the sensor met the damage on its first read and failed for ever."""
    port = free_port()
    config = site_config(tmp_path, f"mqtt://127.0.0.1:{port}")
    queue = tmp_path / "n1.queue.db"
    backlog = ForwardQueue(queue, claim=claim_queue(str(queue)))
    _fill(backlog)
    backlog.close()
    log = tmp_path / "sensor.log"
    argv = [sys.executable, "-m", "monitor.cli", "sensor", "sound", "--config", str(config)]
    argv += ["--sensor", "n1", "--source", "synthetic:60", "--queue", str(queue), "--drain-timeout", "2"]
    broker = Mosquitto(tmp_path / "mosquitto", port=port)
    with log.open("wb") as out:
        sensor = subprocess.Popen(argv, stdout=out, stderr=out)
        try:
            assert wait_for(lambda: f"Resuming with {BIG_QUEUE} messages" in log.read_text(), 60), (
                log.read_text()
            )
            DAMAGES["garbage"](queue)
            broker.start()
            levels = Subscriber(port, "minewatch/dovre-quarry/sensors/n1/levels")
            try:
                assert wait_for(lambda: "is damaged" in log.read_text(), 60), log.read_text()
                seen = len(levels.received())
                assert wait_for(lambda: len(levels.received()) >= seen + 3, 30), log.read_text()
            finally:
                levels.close()
            assert sensor.poll() is None, log.read_text()
            sensor.send_signal(signal.SIGTERM)
            assert sensor.wait(60) == 0, log.read_text()
        finally:
            if sensor.poll() is None:
                sensor.kill()
                sensor.wait(10)
            broker.stop()
    lines = log.read_text().splitlines()
    damaged = [line for line in lines if "is damaged" in line]
    assert len(damaged) == 1, damaged
    # The backlog, and what the sensor queued behind it before it met the damage.
    found = re.search(r"with the (\d+) message\(s\) queued in it", damaged[0])
    assert found is not None and BIG_QUEUE <= int(found[1]) < BIG_QUEUE + 20, damaged[0]
    assert "Traceback" not in log.read_text()
    assert f"({found[1]} left in a damaged queue file, set aside)" in lines[-1], lines[-1]


# The sensor runs as it does on a card, where its user may not write a folder made read-only:
# here the test runs as root, whom a folder's mode does not stop, so the sensor is started
# without the capability that overrides it (setpriv; the test still chmods the real folder).
def _bound_by_modes() -> list[str]:
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("running as root, and no setpriv to start the sensor bound by the folder's mode")
    return ["setpriv", "--bounding-set=-dac_override,-dac_read_search"]


@pytest.mark.timeout(180)
def test_a_damaged_queue_that_cannot_be_set_aside_goes_on_from_memory(tmp_path: Path) -> None:
    """The card remounted read-only (here: its folder made read-only after the queue opened), then
    the queue found damaged: moving it aside is refused. The sensor ended with a traceback of
    PermissionError and published nothing more; it says so in one line, naming the file, what is
    wrong and what to do, and goes on publishing what it measures from memory."""
    port = free_port()
    config = site_config(tmp_path, f"mqtt://127.0.0.1:{port}")
    card = tmp_path / "card"
    queue = card / "n1.queue.db"
    backlog = ForwardQueue(queue, claim=claim_queue(str(queue)))
    _fill(backlog)
    backlog.close()
    log = tmp_path / "sensor.log"
    argv = [
        *_bound_by_modes(),
        sys.executable,
        "-m",
        "monitor.cli",
        "sensor",
        "sound",
        "--config",
        str(config),
    ]
    argv += ["--sensor", "n1", "--source", "synthetic:60", "--queue", str(queue), "--drain-timeout", "2"]
    broker = Mosquitto(tmp_path / "mosquitto", port=port)
    with log.open("wb") as out:
        sensor = subprocess.Popen(argv, stdout=out, stderr=out)
        try:
            assert wait_for(lambda: f"Resuming with {BIG_QUEUE} messages" in log.read_text(), 60), (
                log.read_text()
            )
            card.chmod(0o555)
            DAMAGES["garbage"](queue)
            inode = queue.stat().st_ino
            broker.start()
            levels = Subscriber(port, "minewatch/dovre-quarry/sensors/n1/levels")
            try:
                assert wait_for(lambda: "cannot be set aside" in log.read_text(), 60), log.read_text()
                seen = len(levels.received())
                assert wait_for(lambda: len(levels.received()) >= seen + 3, 30), log.read_text()
            finally:
                levels.close()
            assert sensor.poll() is None, log.read_text()
            sensor.send_signal(signal.SIGTERM)
            assert sensor.wait(60) == 0, log.read_text()
        finally:
            card.chmod(0o755)
            if sensor.poll() is None:
                sensor.kill()
                sensor.wait(10)
            broker.stop()
    text = log.read_text()
    assert "Traceback" not in text, text
    said = [line for line in text.splitlines() if "is damaged" in line]
    assert len(said) == 1, said
    assert f"The queue {queue} is damaged (database disk image is malformed)" in said[0], said[0]
    assert "cannot be set aside (" in said[0] and "Permission denied" in said[0], said[0]
    assert "going on without a queue on disk" in said[0], said[0]
    assert "make its folder writable" in said[0] and "then restart the sensor" in said[0], said[0]
    # The damaged file is left where it was (the sensor's writes before it met the damage aside),
    # not replaced by a new one, and nothing was made beside it.
    assert queue.stat().st_ino == inode
    assert not list(card.glob("*.damaged-*"))
    last = text.splitlines()[-1]
    assert "left in a damaged queue file that could not be set aside" in last, last
    assert " 0 still queued in " in last, last  # what waited in memory was not on disk


def test_a_damaged_queue_that_cannot_be_set_aside_at_start_stops_the_sensor_saying_why(
    tmp_path: Path,
) -> None:
    """At the start there is nothing in memory to keep and no queue to measure into: exit 2, one
    line (it printed '[Errno 13] Permission denied' with no word of the damage or the remedy)."""
    card = tmp_path / "card"
    queue = card / "n1.queue.db"
    _used_queue(queue)
    damaged = b"\0" * 100 + queue.read_bytes()[100:]
    queue.write_bytes(damaged)
    card.chmod(0o555)
    try:
        config = site_config(tmp_path, f"mqtt://127.0.0.1:{free_port()}")
        result = subprocess.run(
            [
                *_bound_by_modes(),
                *(sys.executable, "-m", "monitor.cli", "sensor", "sound", "--config", str(config)),
                *("--sensor", "n1", "--source", "synthetic:60", "--queue", str(queue), "--speed", "max"),
                *("--start", "2026-06-15T11:00", "--duration", "3", "--drain-timeout", "0.5"),
            ],
            capture_output=True,
            text=True,
            timeout=90,
        )
    finally:
        card.chmod(0o755)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        f"minewatch sensor sound: --queue {queue}: damaged (file is not a database) and cannot be set"
        " aside (Permission denied): make its folder writable (a card remounted read-only?) or move"
        " the file away, then start the sensor again"
    )
    assert queue.read_bytes() == damaged


def _first_page_damaged(path: Path, start: int, end: int, byte: bytes) -> None:
    """Bytes ``start`` to ``end`` of the file's first page (4096 bytes) as ``byte``, as a card
    returns them; ``end`` 0: the page's end."""
    whole = path.read_bytes()
    end = end or 4096
    path.write_bytes(whole[:start] + byte * (end - start) + whole[end:])


def _table_of_tables_start(path: Path) -> int:
    """Where the first page's cells (the queue's tables' entries) begin."""
    return int.from_bytes(path.read_bytes()[105:107], "big")


FIRST_PAGE_DAMAGES: dict[str, Callable[[Path], None]] = {
    "the header": lambda p: _first_page_damaged(p, 0, 100, b"\0"),
    # Beyond the header: found, before, only by the next start ("malformed", all set aside).
    "the table of tables": lambda p: _first_page_damaged(p, _table_of_tables_start(p), 0, b"\xff"),
    "the free-list page": lambda p: _first_page_damaged(p, 32, 36, b"\x7f"),
    "one byte of a table's entry": lambda p: _first_page_damaged(p, 4000, 4001, b"\x55"),
}


@pytest.mark.parametrize("damage", list(FIRST_PAGE_DAMAGES))
@pytest.mark.parametrize("when", ["while it writes", "as it closes"])
def test_a_first_page_damaged_under_the_running_queue_is_written_again_and_nothing_is_lost(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch, when: str, damage: str
) -> None:
    """SQLite reads the first page (the header, the table of tables) only when it opens the file:
    damaged under a running queue it went unnoticed, and the next start found 'file is not a
    database' or 'malformed' and set aside everything queued. Only the header was read back while
    the queue ran: damage beyond it was still found only at the next start."""
    if when == "while it writes":
        monkeypatch.setattr(sensors.queue, "FIRST_PAGE_CHECK_S", 0.0, raising=False)  # due at every write
    path = tmp_path / "n1.queue.db"
    q = ForwardQueue(path, claim=claim_queue(str(path)))
    _fill(q, 200)
    q.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # all of it in the file, as after a while
    sound = path.read_bytes()[:4096]
    FIRST_PAGE_DAMAGES[damage](path)
    assert path.read_bytes()[:4096] != sound
    with caplog.at_level(logging.INFO, logger="minewatch.sensors.queue"):
        q.put(TOPIC, b"after")
        if when == "while it writes":
            mended = path.read_bytes()[:4096]  # found and mended, running
            assert mended[:60] + mended[64:] == sound[:60] + sound[64:]  # user_version (60) aside
        q.close()
    kept = 200 if when == "while it writes" else 201  # found before "after" was written, or after
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert said == [
        f"The queue {path}'s first page read back damaged from the disk: written again from the copy"
        f" in memory, and the {kept} message(s) queued in it kept (the disk may be failing: if this"
        " is said again, replace it)"
    ], said
    assert not list(tmp_path.glob("*.damaged-*"))
    again = ForwardQueue(path)
    try:
        assert [m.id for m in again.next_batch(0, 1000)] == list(range(1, 202))
    finally:
        again.close()


def test_a_damaged_first_page_on_a_full_disk_is_set_aside_and_the_queue_goes_on_in_memory(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real full disk (a tiny tmpfs): the first page cannot be written again (SQLite then lets
    its copy go), so the file is set aside as damaged; no new queue can be started on the full
    disk either, which raised 'disk I/O error' out of put(): the queue goes on in memory."""
    monkeypatch.setattr(sensors.queue, "FIRST_PAGE_CHECK_S", 0.0, raising=False)
    with tiny_disk(tmp_path / "card", "1m") as card:
        path = card / "n1.queue.db"
        q = ForwardQueue(path, claim=claim_queue(str(path)))
        _fill(q, 200)
        q.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the WAL empty: a write needs the disk
        fill(card, 0)
        with path.open("r+b") as f:  # the header lost, in place (no room to write the file anew)
            f.write(b"\0" * 100)
        with caplog.at_level(logging.INFO, logger="minewatch.sensors.queue"):
            after = q.put(TOPIC, b"on a full disk")
            later = q.put(TOPIC, b"still measuring")
        said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        damaged_lines = [line for line in said if "is damaged" in line]
        assert len(damaged_lines) == 1, said
        aside = [p for p in card.glob("n1.queue.db.damaged-*") if not p.name.endswith(("-wal", "-shm"))]
        assert len(aside) == 1, list(card.iterdir())
        assert damaged_lines[0].startswith(
            f"The queue {path} is damaged (file is not a database: its first page reads back damaged"
            f" from the disk): moved to {aside[0]} with the 200 message(s) queued in it, which are not"
            " sent from it"
        ), damaged_lines[0]
        assert "; a new queue cannot be started there (" in damaged_lines[0], damaged_lines[0]
        assert "make room on its disk or name another one, then restart the sensor" in damaged_lines[0]
        assert [m.id for m in q.next_batch(0, 100)] == [after, later] == [201, 202]
        q.close()
        assert q.lost_to_damage == 200 and q.lost_at_close == 2 and len(q) == 0
