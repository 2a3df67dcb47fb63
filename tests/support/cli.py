"""`minewatch ...` run the way a person runs it: a process of its own, its output as text."""

from __future__ import annotations

import subprocess
import sys

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
