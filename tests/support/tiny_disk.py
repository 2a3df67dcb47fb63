"""A real, tiny full disk for tests: a tmpfs of a few hundred kilobytes, mounted for the test and
unmounted after it. Mounting needs root (CAP_SYS_ADMIN); without it the test is skipped and says
so, as a SQLite page limit is no full disk: it never refuses the WAL or a file beside the queue."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def tiny_disk(folder: Path, size: str) -> Iterator[Path]:
    """``folder`` made a tmpfs of ``size`` (e.g. ``1m``) while the block runs."""
    if os.geteuid() != 0:
        pytest.skip("a real full disk is a tmpfs, and mounting one needs root")
    folder.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        reason = mounted.stderr.strip()
        pytest.skip(f"cannot mount a tmpfs here (a container without CAP_SYS_ADMIN?): {reason}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def fill(folder: Path, leave_bytes: int) -> Path:
    """A filler file taking all but about ``leave_bytes`` of ``folder``'s filesystem."""
    stat = os.statvfs(folder)
    free = stat.f_bavail * stat.f_frsize
    filler = folder / "filler"
    filler.write_bytes(b"\0" * max(0, free - leave_bytes))
    return filler
