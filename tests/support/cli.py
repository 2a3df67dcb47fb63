"""`minewatch ...` run the way a person runs it: a process of its own, its output as text."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
from collections.abc import Iterator

from tests.support.paths import REPO


def run_minewatch(*argv: object, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``python -m monitor.cli ARGV`` from the checkout; the exit status is the caller's to check."""
    return subprocess.run(
        [sys.executable, "-m", "monitor.cli", *map(str, argv)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@contextlib.contextmanager
def sigint_as_at_a_terminal() -> Iterator[None]:
    """Commands started inside take SIGINT as a terminal's Ctrl-C. A test run started in the
    background by a shell without job control (``cmd &`` in a script) ignores SIGINT, and a
    child inherits that across exec: such a command never saw the test's Ctrl-C and listened
    out its 600 s. A Python handler here is reset to the default at exec. (Main thread only.)"""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
