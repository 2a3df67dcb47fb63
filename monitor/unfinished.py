"""Files a one-shot command makes whole or not at all, and what SIGTERM does to such a command.

A result (an evidence bundle, a notice, a report) is written into ``<out>.partial`` and moved
into place when whole. Interrupted, the command removes that file and nothing else: never a
file of the name it did not make.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import BinaryIO

# The unfinished files this process made, by name: (device, inode) of the file made there.
_UNFINISHED: dict[Path, tuple[int, int]] = {}

# Set by SIGTERM's handler as it starts: a child forked from then on ends at once. A pool
# replaces a worker that died (`timeout` signals the whole group, the worker too) from a thread
# of its own, and a worker forked as the handler stopped the others outlived the command: it
# took the pool's next task and printed a traceback when the result had nowhere to go.
_ENDING = False

# For the pool workers SIGTERM stops: each ends at its next line of Python (a plot being drawn
# in C first); one still there at this bound is killed.
_CHILDREN_STOP_S = 5.0


def _end_if_forked_while_ending() -> None:
    if _ENDING:
        os._exit(128 + signal.SIGTERM)


if hasattr(os, "register_at_fork"):  # POSIX: where processes are forked at all
    os.register_at_fork(after_in_child=_end_if_forked_while_ending)


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

    SIGTERM and Ctrl-C wait while the file is made and listed (interrupts_held), so a signal
    between the two neither leaves it behind nor removes a file of that name another process made.
    """
    with interrupts_held():
        handle = open(path, "xb")  # noqa: SIM115  (closed below)
        found = os.fstat(handle.fileno())
        made = (found.st_dev, found.st_ino)
        _UNFINISHED[path] = made
    try:
        with handle:
            yield handle
    finally:
        # A second Ctrl-C, pressed while the first one's KeyboardInterrupt is removing the file,
        # raised inside the removal and left the file; it is raised once the file is gone.
        with interrupts_held():
            _remove_if_made_here(path, made)
            _UNFINISHED.pop(path, None)


@contextlib.contextmanager
def interrupts_held() -> Iterator[None]:
    """SIGINT and SIGTERM wait for the block's end, where the commands clean up and make their
    files; one that came meanwhile is raised again then, to its own handler. Python runs a
    handler in the main thread whichever thread the kernel gives the signal to (one that does
    not block it), so the handlers are swapped, not the thread's mask: in the main thread only,
    where Python lets them be set (elsewhere the block runs as it is)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []

    def hold(signum: int, frame: FrameType | None) -> None:
        caught.append(signum)

    previous = {signum: signal.signal(signum, hold) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
        for came in dict.fromkeys(caught):
            signal.raise_signal(came)


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
    # os.urandom, as secrets.token_hex is: the secrets module loads OpenSSL (hmac), some 4 ms
    # before the CLI's first line, where SIGTERM still has its default action.
    return path.with_name(f"{path.name}.{os.urandom(6).hex()}.partial")


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
    action, which the pool's own shutdown (terminate sends SIGTERM) relies on. The command's
    children are stopped before it ends, every one the kernel lists (a pool's replacement for
    a worker the signal ended, forked by the pool's own thread, is not yet among the pool's
    processes), and any forked from then on ends at once.

    Neither a second SIGTERM nor Ctrl-C cuts this short: a KeyboardInterrupt raised inside it
    left the files it had not removed yet.
    """
    owner = os.getpid()

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        if os.getpid() != owner:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        global _ENDING
        for held in (signal.SIGINT, signal.SIGTERM):  # this process is ending: nothing more to do
            signal.signal(held, signal.SIG_IGN)
        _ENDING = True
        try:
            for path, made in list(_UNFINISHED.items()):
                _remove_if_made_here(path, made)
            _stop_children()
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):  # a write this signal cut short
                    stream.flush()
        finally:
            os._exit(128 + signum)

    signal.signal(signal.SIGTERM, on_sigterm)


def _children() -> set[int]:
    """This process's children: the kernel's list, each thread's (a pool forks from a thread of
    its own), and multiprocessing's where the kernel lists none (no /proc)."""
    pids: set[int] = set()
    for listed in Path("/proc/self/task").glob("*/children"):
        with contextlib.suppress(OSError, ValueError):
            pids.update(int(pid) for pid in listed.read_text().split())
    if not pids:
        import multiprocessing

        pids.update(p.pid for p in multiprocessing.active_children() if p.pid is not None)
    return pids


def _stop_children() -> None:
    """SIGTERM each child and wait for it to end, listing them again until none is left, up to
    _CHILDREN_STOP_S in all; those still there then are killed. Listed again: one forked as the
    list was read (ending at once) or left out of it (the kernel's list may skip a child while
    another one ends), and a worker forked an instant before can lose the signal (the
    interpreter clears the signals not yet handled in a new child)."""
    signalled: set[int] = set()
    deadline = time.monotonic() + _CHILDREN_STOP_S
    while alive := _children():  # one ended and reaped here (or by its pool) leaves the list
        if time.monotonic() >= deadline:
            for pid in alive:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            return
        for pid in alive - signalled:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGTERM)
        signalled |= alive
        for pid in alive:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
        time.sleep(0.01)
