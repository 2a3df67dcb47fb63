"""Claims: what one process may do at a time, held while it runs.

- **A site of a store is judged by one daemon** (``claim_sites``). Two daemons judging one
  site would each keep its own minutes, episodes and alerts in memory and issue notices and
  alerts twice, and with one broker account they would take each other's session in turn.
  The chain itself stays whole (every batch re-reads its heads under the write lock), so the
  CLI and the daemon's workers may write beside the daemon: judging is what is claimed, by
  the process that owns the sites (the daemon, or the supervisor of its workers). Daemons of
  other sites of the same store (``daemon.sites``) claim other keys and run side by side.
- **A sensor's queue is sent by one publisher** (``claim_queue``): two would send every
  message twice and take each other's broker session (the same client id) in turn, and two
  SQLite connections reaching one file by two names keep two WALs (``NAME-wal``), which
  corrupts it.

A site claim is a POSIX record lock on one byte per key of a file beside the store
(``<store>-sites``). A queue claim is a lock on one byte of the queue's file itself, so it
holds whatever names the file (a symlink, ``a/../q.db``, a hard link, a bind mount): it is
keyed on the file (device and inode), not on a path. The kernel lets go of a dead process's
locks, so a process killed outright leaves no stale claim.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import struct
from collections.abc import Iterable
from pathlib import Path

from monitor.errors import StoreError, UsageError


class SiteTaken(UsageError):
    """Another daemon judges one of the sites."""


class QueueTaken(UsageError):
    """Another publisher sends from the queue."""


class Claims:
    """Held while open; ``release`` (or the process's end) lets the keys go."""

    def __init__(self, fd: int, keys: tuple[str, ...]) -> None:
        self.fd = fd
        self.keys = keys

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # drops every lock this process holds on the file
            self.fd = -1


class _Taken(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def claims_path(store_path: str) -> str:
    """The file of a store's site claims."""
    return store_path + "-sites"


def claim_sites(store_path: str, sites: Iterable[str]) -> Claims:
    """Claim every site in ``sites`` for this process, or raise SiteTaken naming the first taken."""
    if store_path == ":memory:":
        return Claims(-1, tuple(sites))
    try:
        return _claim(claims_path(store_path), sites)
    except _Taken as taken:
        raise SiteTaken(
            f"site {taken.key!r} is judged by another minewatch daemon on the store {store_path!r}:"
            " stop that one first, or give each daemon its own daemon.sites"
        ) from None


# The byte of a queue's file that claims it: far past SQLite's own lock bytes (from 1 GiB to
# 1 GiB + 512), so that neither ever meets the other.
QUEUE_CLAIM_BYTE = 1 << 40
# Who sends from a queue, on its file (on its inode: every name of the file shows it).
QUEUE_OWNER_XATTR = "user.minewatch.sensor"


class QueueClaim(Claims):
    """A sensor's claim on its queue's file: a lock held by an open file of its own.

    The lock belongs to that open file (Linux's open file description locks), not to the
    process: SQLite's POSIX locks on the same file in this process neither meet it nor let it
    go. Closing this claim's file *does* let go of every POSIX lock the process holds on the
    file (SQLite's too), so a queue's connection is closed before its claim is released."""

    def __init__(self, fd: int, path: str, *, made: bool = False) -> None:
        super().__init__(fd, ("queue",))
        self.path = path
        self.made = made  # the file did not exist: this claim made it (empty)
        self._named = False

    def mark_used(self) -> None:
        """Say that a sensor sends from this file: ``<queue>-owner`` beside it (a file no sensor
        has used is never set aside as damaged) and this claim's name of it on the file itself,
        for a second sensor given another name of it to show. Neither is needed to send: a
        folder or filesystem that refuses them (vfat has no extended attributes) is let be."""
        with contextlib.suppress(OSError):
            Path(self.path + "-owner").touch(0o600)
        if not self._named:
            with contextlib.suppress(OSError):
                os.setxattr(self.fd, QUEUE_OWNER_XATTR, os.fsencode(os.path.abspath(self.path)))
                self._named = True

    def renew(self) -> QueueClaim:
        """The claim of the file now at the queue's path (a new queue, the damaged one set aside);
        this one let go. Its connection to the old file must be closed already."""
        new = claim_queue(self.path)
        self.release()
        return new

    def release(self) -> None:
        if self.fd >= 0 and self._named:
            with contextlib.suppress(OSError):
                os.removexattr(self.fd, QUEUE_OWNER_XATTR)
            self._named = False
        super().release()


def claim_queue(queue_path: str) -> QueueClaim:
    """Claim a sensor's queue file for this process, or raise QueueTaken. Made empty if missing
    (an empty file is an empty SQLite database; ``made`` says so); never written to."""
    made = True
    try:
        Path(queue_path).parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(queue_path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        except FileExistsError:
            made = False
            fd = os.open(queue_path, os.O_RDWR | os.O_CLOEXEC)
    except OSError as exc:
        raise StoreError(f"cannot open {queue_path!r}: {exc.strerror}") from None
    try:
        _lock_own_byte(fd, QUEUE_CLAIM_BYTE)
    except OSError as exc:
        try:
            if exc.errno in (errno.EAGAIN, errno.EACCES):  # held by another process
                raise QueueTaken(_queue_taken(queue_path, fd)) from None
            # No record locks here (a network filesystem without them): no claim at all.
            raise StoreError(f"cannot lock {queue_path!r}: {exc.strerror}") from None
        finally:
            os.close(fd)
    return QueueClaim(fd, queue_path, made=made)


def _lock_own_byte(fd: int, offset: int) -> None:
    """Lock one byte of ``fd``'s file for ``fd`` alone (OSError EAGAIN if another holds it)."""
    if hasattr(fcntl, "F_OFD_SETLK"):
        # struct flock: type, whence, start, length, pid (0, as open file description locks need).
        lock = struct.pack("hhqqi", fcntl.F_WRLCK, os.SEEK_SET, offset, 1, 0)
        fcntl.fcntl(fd, fcntl.F_OFD_SETLK, lock)
    else:  # no OFD locks (macOS): flock's are the open file's too, and apart from POSIX locks
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)


def _queue_taken(queue_path: str, fd: int) -> str:
    """The refusal of a second sensor, naming the file by the name the first one sends from."""
    try:
        theirs = os.fsdecode(os.getxattr(fd, QUEUE_OWNER_XATTR))
    except OSError:
        theirs = None
    if theirs is None or theirs == os.path.abspath(queue_path):
        return (
            f"--queue {queue_path}: another minewatch sensor sends from it: stop that one first,"
            " or give this one its own --queue"
        )
    return (
        f"--queue {queue_path}: is the file {theirs}, which another minewatch sensor sends from"
        " (one file, two names): stop that one first, or give this one its own --queue"
    )


def _claim(path: str, keys: Iterable[str]) -> Claims:
    names = tuple(keys)
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)  # as the store's own opening does
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise StoreError(f"cannot open {path!r}: {exc.strerror}") from None
    try:
        for key in names:
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, _offset(key))
            except OSError as exc:
                if exc.errno in (errno.EAGAIN, errno.EACCES):  # held by another process
                    raise _Taken(key) from None
                # No record locks here (a network filesystem without them): no claim at all.
                raise StoreError(f"cannot lock {path!r}: {exc.strerror}") from None
    except BaseException:
        os.close(fd)
        raise
    return Claims(fd, names)


def _offset(key: str) -> int:
    """The key's byte: a stable place in a sparse file, the same for every process."""
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:4], "big")
