"""One daemon judges a site of a store: a second `minewatch run` on the same sites is refused.

Two daemons judging one site would each keep its own minutes, episodes and alerts in memory
and issue notices and alerts twice, and with one broker account they would take each other's
session in turn. The chain itself stays whole (every batch re-reads its heads under the write
lock), so the CLI and the daemon's workers may write beside the daemon; judging is the one
thing claimed.

The claim is a POSIX record lock on one byte per site of ``<store>-sites``: daemons of
other sites of the same store (``daemon.sites``) claim other bytes and run side by side. The
kernel lets go of a dead process's locks, so a daemon killed outright leaves no stale claim.
The process that owns the sites claims them: the daemon, or the supervisor of its workers.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
from collections.abc import Iterable
from pathlib import Path

from monitor.errors import StoreError, UsageError


class SiteTaken(UsageError):
    """Another process judges one of the sites."""


class SiteClaims:
    """Held while open; ``release`` (or the process's end) lets the sites go."""

    def __init__(self, fd: int, sites: tuple[str, ...]) -> None:
        self.fd = fd
        self.sites = sites

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # drops every lock this process holds on the file
            self.fd = -1


def claims_path(store_path: str) -> str:
    return store_path + "-sites"


def claim_sites(store_path: str, sites: Iterable[str]) -> SiteClaims:
    """Claim every site in ``sites`` for this process, or raise SiteTaken naming the first taken."""
    names = tuple(sites)
    if store_path == ":memory:":
        return SiteClaims(-1, names)
    path = claims_path(store_path)
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)  # as the store's own opening does
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise StoreError(f"cannot open {path!r} beside the store: {exc.strerror}") from None
    try:
        for site in names:
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, _offset(site))
            except OSError:
                raise SiteTaken(
                    f"site {site!r} is judged by another minewatch daemon on the store {store_path!r}:"
                    " stop that one first, or give each daemon its own daemon.sites"
                ) from None
    except BaseException:
        os.close(fd)
        raise
    return SiteClaims(fd, names)


def _offset(site: str) -> int:
    """The site's byte: a stable place in a sparse file, the same for every process."""
    return int.from_bytes(hashlib.sha256(site.encode()).digest()[:4], "big")
