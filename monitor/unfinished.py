"""Files a one-shot command makes whole or not at all, and what SIGTERM does to such a command.

A result (an evidence bundle, a notice, a report) is written into ``<out>.partial`` and moved
into place when whole. Interrupted, the command removes that file and nothing else: never a
file of the name it did not make.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import BinaryIO

# The unfinished files this process made, by name: (device, inode) of the file made there.
_UNFINISHED: dict[Path, tuple[int, int]] = {}


def _remove_if_made_here(path: Path, made: tuple[int, int]) -> None:
    with contextlib.suppress(OSError):
        found = os.stat(path)
        if (found.st_dev, found.st_ino) == made:
            os.unlink(path)


@contextlib.contextmanager
def unfinished_file(path: Path) -> Iterator[BinaryIO]:
    """A new file at ``path`` (FileExistsError if there is one), open for writing. The caller
    moves or links it into place within the block; at the block's end, and on SIGTERM before
    then (exit_on_sigterm), the name is removed if it is still the file made here.

    SIGTERM is held back while the file is made and listed, so a signal between the two neither
    leaves it behind nor removes a file of that name another process made (a process of one
    thread, as the commands are when they make theirs: a signal another thread takes runs its
    handler in the main thread all the same).
    """
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    try:
        handle = open(path, "xb")  # noqa: SIM115  (closed below)
        found = os.fstat(handle.fileno())
        made = (found.st_dev, found.st_ino)
        _UNFINISHED[path] = made
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
    try:
        with handle:
            yield handle
    finally:
        _remove_if_made_here(path, made)
        _UNFINISHED.pop(path, None)


def replace_whole(path: Path, body: bytes, partial: Path) -> None:
    """Write ``body`` into ``partial``, a new file made here (FileExistsError if there is one),
    and rename it over ``path``: ``path`` holds what it held or the whole body, never part of
    it, and ``partial`` is gone however the write ends (a full disk, Ctrl-C, SIGTERM)."""
    with unfinished_file(partial) as handle:
        handle.write(body)
        handle.flush()
        os.replace(partial, path)


def own_partial(path: Path) -> Path:
    """``<path>.<12 hex>.partial``: a partial name no other writer of ``path`` takes, for a
    process whose threads may write the same file at once (the portal's jobs). Each writer then
    renames its own whole file into place; the shared ``<path>.partial`` of the commands would
    be written by both, or refused to the second."""
    return path.with_name(f"{path.name}.{secrets.token_hex(6)}.partial")


def exit_on_sigterm() -> None:
    """SIGTERM (`kill PID`, `timeout`) ends this one-shot command with exit 143, its unfinished
    files removed and its pool workers stopped: the default action left an export's
    ``<out>.partial`` behind, and the next run refused to write.

    Not by raising SystemExit where the signal lands: it landed inside zipfile's close, in a
    member half made, and in a finalizer that swallowed it (the export then went on to exit 0),
    each a traceback or a lost signal. A read transaction or an SQLite write cut short here is
    rolled back, as after a crash. Ctrl-C still raises KeyboardInterrupt, to a user who sees
    what it stopped.

    A forked child (a pool worker) inherits the handler: there the signal keeps its default
    action, which the pool's own shutdown (terminate sends SIGTERM) relies on.
    """
    owner = os.getpid()

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        if os.getpid() != owner:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        try:
            for path, made in list(_UNFINISHED.items()):
                _remove_if_made_here(path, made)
            import multiprocessing

            for child in multiprocessing.active_children():
                child.terminate()
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):  # a write this signal cut short
                    stream.flush()
        finally:
            os._exit(128 + signum)

    signal.signal(signal.SIGTERM, on_sigterm)
