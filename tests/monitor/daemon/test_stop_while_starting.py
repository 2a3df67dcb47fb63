"""A SIGTERM while `minewatch run` still starts: the real daemon against a real Mosquitto.

The daemon's handler was put in as its run began, after the configuration, the store's check,
the site claims and the pipeline's modules (numpy, scipy, paho: a second or more); a SIGTERM
before that ended it by the one-shot commands' rule, exit 143 and no line, so a stop (systemd's,
the supervisor's to its workers) while it started looked like a crash. The start is not made
slow: the signal is aimed at the loading of the pipeline's modules, told by ``-X importtime``
(each module's line as its import ends), at a few delays from there; the broker is real, so
that what it queued for the daemon's session while it was away can be seen kept.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from monitor.wire.codec import encode
from rules.model import SoundLevels
from tests.support.daemon import Client, Daemon, store_count, wait_until, write_config
from tests.support.paths import REPO
from tests.support.servers import Mosquitto

pytestmark = pytest.mark.timeout(240)

# Imported by the pipeline's module alone, the first of its own modules it loads: most of the
# loading (scipy, the rules, paho: some 0.6 s of 0.7 here) is still to come.
LOADING_THE_PIPELINE = "monitor.daemon.minute_closing"

# `minewatch run` as the installed `minewatch` script starts it (pip's console script: the CLI's
# module imported, then its main), so that the CLI's module has an import line of its own.
MINEWATCH = ("-c", "import sys; from monitor.cli import main; sys.exit(main())")


def _sigterm_while_starting(
    config: Path, after: float, loads: int = 1, loaded: str = LOADING_THE_PIPELINE
) -> tuple[int, str]:
    """`minewatch run` given SIGTERM ``after`` seconds past the ``loads``-th end of the import of
    ``loaded`` (a supervisor's workers inherit PYTHONPROFILEIMPORTTIME; the supervisor loads no
    pipeline); its exit status and everything it wrote but those lines."""
    proc = subprocess.Popen(
        [sys.executable, *MINEWATCH, "run", "--config", str(config)],
        cwd=config.parent,
        env={**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1", "PYTHONPROFILEIMPORTTIME": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None
        seen = []
        ends = 0
        for line in proc.stdout:
            seen.append(line)
            ends += line.rpartition("|")[2].strip() == loaded
            if ends == loads:
                break
        else:
            raise AssertionError("".join(seen[-50:]))
        time.sleep(after)
        proc.send_signal(signal.SIGTERM)
        rest, _ = proc.communicate(timeout=60 * loads)  # a supervisor stops its workers too
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    said = [line for line in "".join(seen).splitlines() + rest.splitlines() if "import time:" not in line]
    return proc.returncode, "\n".join(said)


def _levels(ts: datetime) -> tuple[str, bytes]:
    return encode(SoundLevels("quarry", "n1", ts, 1.0, 60.0, 61.5, 75.0))


def test_sigterm_while_the_daemon_starts_stops_it_cleanly_and_loses_nothing(
    tmp_path: Path, mosquitto: Mosquitto
) -> None:
    """Each stop while starting: exit 0 with the run's lines (Signal 15: shutting down; Stopped
    while starting: ..., or Stopped: ... where the signal landed once the run had begun), never
    a traceback; what the broker queued for the daemon's session meanwhile is all stored, once.
    Before, the signals landing in the loading ended the daemon with 143 and no line."""
    config = write_config(tmp_path / "minewatch.toml", mosquitto.url)
    store = tmp_path / "store.db"
    publisher = Client(mosquitto.port, "publisher")
    try:
        first = Daemon(config).start()  # the daemon's persistent session at the broker
        first.wait_ready()
        assert first.stop() == 0, first.logs()
        start = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=5)
        for second in range(3):  # queued at the broker for the session while the daemon is away
            publisher.publish(*_levels(start + timedelta(seconds=second))).wait_for_publish(5)
        early = 0
        for after in (0.0, 0.0, 0.0, 0.02, 0.05):
            code, said = _sigterm_while_starting(config, after)
            assert code == 0, (after, code, said[-3000:])
            assert "Traceback" not in said, said
            assert "Signal 15: shutting down" in said, said
            # Before the broker is connected, or (a signal landing later) by the run's own stop.
            starting = "Stopped while starting: nothing was taken from the broker" in said
            assert starting or "minewatch.pipeline: Stopped: " in said, said
            early += starting
        assert early, "no signal landed before the broker was connected"
        daemon = Daemon(config).start()
        try:
            stored = wait_until(lambda: store_count(store, "SELECT COUNT(*) FROM sound") == 3, 30)
            assert stored, daemon.logs()
            time.sleep(1.0)  # a message taken twice would show as a fourth row
        finally:
            assert daemon.stop() == 0, daemon.logs()
        assert store_count(store, "SELECT COUNT(*) FROM sound") == 3
        assert "Traceback" not in daemon.logs(), daemon.logs()
    finally:
        publisher.close()


def test_workers_stopped_while_they_start_stop_cleanly(tmp_path: Path, mosquitto: Mosquitto) -> None:
    """The supervisor stopped (SIGTERM) as its second worker loads the pipeline's modules sends
    each SIGTERM: a worker still starting ended with 143 (the supervisor: "worker 2/2 stopped
    with status 143"); each stops as a daemon stopped while starting does (or, further on, as
    one stopped in its run), exit 0, and so does the supervisor. Told by the workers' own
    ``-X importtime`` lines (PYTHONPROFILEIMPORTTIME, which they inherit; the supervisor loads
    no pipeline)."""
    config = write_config(
        tmp_path / "minewatch.toml",
        mosquitto.url,
        daemon_extra="workers = 2",
        extra_sites='[[sites]]\nid = "s2"\nname = "Quarry s2"\ntimezone = "America/Chicago"\n'
        'latitude = 45.27\nlongitude = -91.62\n[[sites.sensors]]\nid = "n1"\nkind = "sound"\n',
    )
    code, said = _sigterm_while_starting(config, 0.0, loads=2)
    assert code == 0, said[-3000:]
    assert "Traceback" not in said and "stopped with status" not in said, said
    # The second at least was loading the pipeline; the first may have got further.
    early = said.count("Stopped while starting: nothing was taken from the broker")
    assert early >= 1 and early + said.count("minewatch.pipeline: Stopped: ") == 2, said
    assert "all 2 workers stopped" in said, said


def test_sigterm_while_runs_modules_load_stops_the_daemon_cleanly(
    tmp_path: Path, mosquitto: Mosquitto
) -> None:
    """SIGTERM sent as `run`'s modules load (the configuration's import line, some 70 ms before
    its handler is in): it ended the daemon by the one-shot commands' rule, exit 143 and no line.
    The CLI notes the signal from its first line and the daemon's handler takes it: a stop while
    starting, exit 0, each time. (The configuration's line comes after the CLI's first line; at
    the CLI module's own line the signal could come before it, a race in the test.)"""
    config = write_config(tmp_path / "minewatch.toml", mosquitto.url)
    for after in (0.0, 0.0, 0.0, 0.005, 0.01):
        code, said = _sigterm_while_starting(config, after, loaded="monitor.config")
        assert code == 0, (after, code, said[-3000:])
        assert "Traceback" not in said, said
        assert said.count("Signal 15: shutting down") == 1, said
        assert "Stopped while starting: nothing was taken from the broker" in said, said
