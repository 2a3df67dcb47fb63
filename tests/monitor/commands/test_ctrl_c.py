"""Ctrl-C as a terminal sends it: SIGINT to the command's whole process group, its workers too.

The command stops quietly with status 130; its worker processes leave the interrupt to it and
print nothing (each printed "Process ForkPoolWorker-1:" and a traceback), and no output file is
left behind half written.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import psutil

from tests.support.cli import sigint_as_at_a_terminal
from tests.support.evidence import SITE, T0, build_site
from tests.support.paths import REPO


def test_ctrl_c_during_an_export_stops_it_without_a_workers_traceback(tmp_path: Path) -> None:
    site = build_site(tmp_path, seconds=3600)
    out = tmp_path / "bundle.zip"
    window = ["--from", T0.isoformat(), "--to", (T0 + timedelta(hours=1)).isoformat()]
    argv = ["evidence", "--config", str(site.config_path), "--site", SITE, *window, "--out", str(out)]
    with sigint_as_at_a_terminal():
        command = subprocess.Popen(
            [sys.executable, "-m", "monitor.cli", *argv],
            cwd=tmp_path,
            env=dict(os.environ, PYTHONPATH=str(REPO)),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its own process group, as a terminal's foreground job
        )
    parent = psutil.Process(command.pid)
    deadline = time.monotonic() + 60
    while not parent.children() and command.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert parent.children(), "the export ended before its plot worker started: nothing interrupted"
    time.sleep(0.2)  # the worker past its start, drawing or waiting for a plot
    os.killpg(command.pid, signal.SIGINT)
    stdout, stderr = command.communicate(timeout=60)
    assert "ForkPoolWorker" not in stderr and "Traceback" not in stderr, stderr
    assert command.returncode == 130, (command.returncode, stdout, stderr)
    assert not out.exists() and not list(tmp_path.glob("bundle.zip*")), sorted(
        p.name for p in tmp_path.iterdir()
    )
