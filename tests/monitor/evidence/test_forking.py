"""When the exporter may fork its workers (parts.forking_is_safe): not beside another thread that
runs Python, even one started below ``threading`` (as pytest-xdist's execnet starts its
receiver: a fork beside it hung an export in CI)."""

from __future__ import annotations

import _thread
import subprocess
import sys
import threading

from monitor.evidence.parts import forking_is_safe
from tests.support.paths import REPO


def test_a_thread_started_below_threading_makes_forking_unsafe() -> None:
    started, release = threading.Event(), threading.Event()

    def wait() -> None:
        started.set()
        release.wait()

    _thread.start_new_thread(wait, ())
    started.wait(5)
    try:
        assert not forking_is_safe()
    finally:
        release.set()


def test_a_lone_thread_with_numpy_loaded_may_fork() -> None:
    """A process of its own, as `minewatch evidence` runs: numpy's BLAS threads run no Python."""
    code = "import numpy; from monitor.evidence.parts import forking_is_safe; print(forking_is_safe())"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"
