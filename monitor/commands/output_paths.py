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
from monitor.unfinished import replace_whole


def new_file(text: str, *, force: bool, option: str = "--out") -> Path:
    """The path of a file to (re)write, after the checks above."""
    path = Path(text)
    if path.is_symlink():
        # Replacing it would write through it, or put a file where the user's link was.
        raise UsageError(
            f"{option} {text}: is a symbolic link; give the path of a new file, or of a file to replace"
        )
    _not_a_folder(text, option)
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


def format_named(
    text: str, formats: dict[str, str], *, bare: str | None = None, option: str = "--out"
) -> str:
    """The format a file's suffix names (``formats``: suffix such as ".pdf" -> format), or
    ``bare`` for a name without a suffix (None: refused too). A suffix naming a format the
    command does not write is refused: Markdown was written into a file named notice.docx."""
    _not_a_folder(text, option)  # said as such, not as a name without a suffix
    suffix = Path(text).suffix.lower()
    if suffix in formats:
        return formats[suffix]
    if not suffix and bare is not None:
        return bare
    shown: dict[str, str] = {}  # a format's first suffix: ".md" for md (not ".markdown")
    for each, name in formats.items():
        shown.setdefault(name, each)
    choices = list(shown.values())
    listed = f"{', '.join(choices[:-1])} or {choices[-1]}" if len(choices) > 1 else choices[0]
    why = f"{suffix} is not a format written here" if suffix else "no suffix to choose the format"
    raise UsageError(f"{option} {text}: {why}; name a {listed} file")


def _not_a_folder(text: str, option: str) -> None:
    if Path(text).is_dir():
        raise UsageError(f"{option} {text}: is a folder; give a file name inside it")


def write_whole(path: Path, body: bytes) -> None:
    """Write ``path`` whole or not at all: into ``<path>.partial``, made here (never a file of
    that name the user has), then renamed over ``path``. Interrupted (Ctrl-C, SIGTERM, a full
    disk), the partial file goes and ``path`` keeps what it held."""
    partial = path.with_name(path.name + ".partial")
    try:
        replace_whole(path, body, partial)
    except FileExistsError:
        raise UsageError(
            f"{partial}: exists (another run writing {path.name}, or one cut short); remove it once"
            " none is running, or choose another --out"
        ) from None
    except OSError as exc:  # a full disk: the file named, and what it held before kept
        raise OSError(exc.errno, exc.strerror, str(path)) from None
