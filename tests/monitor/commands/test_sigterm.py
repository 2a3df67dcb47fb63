"""SIGTERM (`kill PID`, `timeout`) stops a one-shot command as Ctrl-C does: its cleanup runs.

The default action of SIGTERM ends the process at once: an export cut short left
``<out>.partial`` behind, and the next run refused to write ("exists ... cut short").
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
import pytest

from tests.support.evidence import SITE, T0, build_site
from tests.support.paths import REPO


def _evidence(argv: list[str], cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "monitor.cli", *argv],
        cwd=cwd,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


@pytest.mark.parametrize("group", [False, True], ids=["kill", "timeout"])
def test_sigterm_during_an_export_leaves_no_partial_file_and_the_next_run_writes(
    tmp_path: Path, group: bool
) -> None:
    """``kill PID`` signals the command alone; ``timeout`` signals its process group, workers too."""
    site = build_site(tmp_path, seconds=3600)
    out = tmp_path / "bundle.zip"
    window = ["--from", T0.isoformat(), "--to", (T0 + timedelta(hours=1)).isoformat()]
    argv = ["evidence", "--config", str(site.config_path), "--site", SITE, *window, "--out", str(out)]
    command = _evidence(argv, tmp_path)
    parent = psutil.Process(command.pid)
    deadline = time.monotonic() + 60
    while not parent.children() and command.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert parent.children(), "the export ended before its plot worker started: nothing interrupted"
    workers = parent.children()
    time.sleep(0.2)  # the export writing into <out>.partial
    if group:
        os.killpg(command.pid, signal.SIGTERM)
    else:
        command.send_signal(signal.SIGTERM)
    stdout, stderr = command.communicate(timeout=60)
    assert command.returncode == 143, (command.returncode, stdout, stderr)
    assert "Traceback" not in stderr, stderr
    assert not list(tmp_path.glob("bundle.zip*")), sorted(p.name for p in tmp_path.iterdir())
    _gone, alive = psutil.wait_procs(workers, timeout=30)
    assert not alive, f"workers outlived the command: {alive}"

    again = _evidence(argv, tmp_path)
    stdout, stderr = again.communicate(timeout=300)
    assert again.returncode == 0, (again.returncode, stdout, stderr)
    assert out.is_file() and not out.with_name("bundle.zip.partial").exists()
