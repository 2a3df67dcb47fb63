"""Claims: what one process may do at a time, held while it runs.

- **A site of a store is judged by one daemon** (``claim_sites``). Two daemons judging one
  site would each keep its own minutes, episodes and alerts in memory and issue notices and
  alerts twice, and with one broker account they would take each other's session in turn.
  The chain itself stays whole (every batch re-reads its heads under the write lock), so the
  CLI and the daemon's workers may write beside the daemon: judging is what is claimed, by
  the process that owns the sites (the daemon, or the supervisor of its workers). Daemons of
  other sites of the same store (``daemon.sites``) claim other keys and run side by side.
- **A sensor's queue is sent by one publisher** (``claim_queue``): two would send every
  message twice and take each other's broker session (the same client id) in turn.

A claim is a POSIX record lock on one byte per key of a file beside what is claimed
(``<store>-sites``, ``<queue>-owner``). The kernel lets go of a dead process's locks, so a
process killed outright leaves no stale claim.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
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


def claim_queue(queue_path: str) -> Claims:
    """Claim a sensor's queue for this process, or raise QueueTaken."""
    try:
        return _claim(queue_path + "-owner", ["queue"])
    except _Taken:
        raise QueueTaken(
            f"--queue {queue_path}: another minewatch sensor sends from it: stop that one first,"
            " or give this one its own --queue"
        ) from None


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
