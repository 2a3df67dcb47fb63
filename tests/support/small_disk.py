"""A disk of its own for a command, for real: a tmpfs mounted in a mount namespace of the
command's own (gone with it), which fills up at its size or is mounted read-only."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest


def on_a_small_disk(
    disk: Path, size: str = "2m", *, store: Path | None = None, read_only: bool = False
) -> list[str]:
    """The prefix that runs a command (its executable first: sys.executable) where the folder
    ``disk`` is a tmpfs of ``size``, with a new store at ``store`` made on it by that executable
    and the file system then remounted read-only (``read_only``). Mounting needs root's powers
    (the tests run as root): skipped elsewhere."""
    if os.geteuid() != 0 or subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode != 0:
        pytest.skip("mounting a tmpfs of its own needs root's powers over mounts")
    disk.mkdir(exist_ok=True)
    steps = [f"mount -t tmpfs -o size={size} tmpfs {shlex.quote(str(disk))}"]
    if store is not None:
        made = "import sys; from monitor.journal.store import Store; Store(sys.argv[1]).close()"
        steps.append(f'"$0" -c {shlex.quote(made)} {shlex.quote(str(store))}')
    if read_only:
        steps.append(f"mount -o remount,ro {shlex.quote(str(disk))}")
    return ["unshare", "-m", "sh", "-c", " && ".join([*steps, 'exec "$0" "$@"'])]
