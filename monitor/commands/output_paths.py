"""Where the commands may write: checked before any work, refused in one line (UsageError).

No command overwrites a file or deletes a folder that minewatch did not create. A file the
user names with ``--out`` must not exist yet, unless ``--force`` says to replace it, and only a
regular file is ever replaced (never a symbolic link, a device, a pipe or a socket); its folder
must exist and be writable. (Output folders of `minewatch demo`: monitor.demo.runner.prepare_out_dir.)
"""

from __future__ import annotations

import os
from pathlib import Path

from monitor.errors import UsageError


def new_file(text: str, *, force: bool, option: str = "--out") -> Path:
    """The path of a file to (re)write, after the checks above."""
    path = Path(text)
    if path.is_symlink():
        # Replacing it would write through it, or put a file where the user's link was.
        raise UsageError(
            f"{option} {text}: is a symbolic link; give the path of a new file, or of a file to replace"
        )
    if path.is_dir():
        raise UsageError(f"{option} {text}: is a folder; give a file name inside it")
    if path.exists() and not path.is_file():
        # A device, a pipe or a socket (e.g. /dev/null): never replaced, not even with --force.
        raise UsageError(
            f"{option} {text}: is not a regular file (a device, pipe or socket); choose another path"
        )
    folder = path.parent
    if not folder.exists():
        raise UsageError(f"{option} {text}: folder {folder} does not exist; create it or choose another path")
    if not folder.is_dir():
        raise UsageError(f"{option} {text}: {folder} is not a folder")
    if path.exists() and not force:
        raise UsageError(
            f"{option} {text}: the file exists; choose another name, or add --force to replace it"
        )
    if not os.access(folder, os.W_OK):
        raise UsageError(f"{option} {text}: cannot write in {folder} (permission denied)")
    return path


def write_whole(path: Path, body: bytes) -> None:
    """Write ``path`` whole or not at all: into ``<path>.partial``, made here (never a file of
    that name the user has), then renamed over ``path``."""
    partial = path.with_name(path.name + ".partial")
    try:
        with open(partial, "xb") as handle:
            handle.write(body)
    except FileExistsError:
        raise UsageError(
            f"{partial}: exists (another run writing {path.name}, or one cut short); remove it once"
            " none is running, or choose another --out"
        ) from None
    except OSError:
        partial.unlink(missing_ok=True)
        raise
    os.replace(partial, path)
