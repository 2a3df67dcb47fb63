"""The portal's HTTP connections, guarded where uvicorn leaves them open.

uvicorn closes a connection left idle after a response (``timeout_keep_alive``), but not one
that never sends a whole request head, nor one whose body stops arriving. Reached directly (no
proxy in front, docs/PORTAL.md), 1,100 connections that sent nothing took every file handle
(1,024 by default under systemd) and the portal answered no one until they let go. Here:

- a request's head must arrive within HEAD_S of the connection (or of the previous answer);
- a body still arriving may pause at most IDLE_S;
- one address holds at most PER_ADDRESS connections (an address as throttle.address_key counts
  it: an IPv6 client's /64, whose 2**64 addresses one host picks from), and one IPv6 /48
  (throttle.prefix_key: one subscriber's /56 or /48 holds 256 or 65,536 /64s) at most
  throttle.PREFIX_FACTOR times that; a trusted proxy's are not counted: every client behind it
  shares its address.

A connection past these is closed; the portal's own work (a long answer, a slow download) is
never timed.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import resource
from collections import Counter
from collections.abc import Iterable
from typing import ClassVar

from uvicorn.protocols.http.h11_impl import H11Protocol

from monitor.portal.throttle import PREFIX_FACTOR, address_key, prefix_key

log = logging.getLogger("minewatch.portal")

HEAD_S = 10.0
IDLE_S = 30.0
PER_ADDRESS = 64
PER_PREFIX = PER_ADDRESS * PREFIX_FACTOR  # one IPv6 /48
FILE_HANDLES = 65536  # the soft limit asked for at start, within the hard one
SAY_EVERY_S = 60.0  # closed connections are counted in one log line at most this often

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with the three bounds of the module's docstring."""

    trusted: ClassVar[tuple[Network, ...]] = ()
    _open: ClassVar[Counter[str]] = Counter()
    _closed: ClassVar[Counter[str]] = Counter()  # why -> connections closed since the last line
    _said_at: ClassVar[float] = 0.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._peer = self.client[0] if self.client else ""
        # What the limits count: the address and, of IPv6, its /48 (each key once per connection);
        # a trusted proxy's many connections are not counted against the /48 it shares.
        trusted = self._is_trusted()
        prefix = None if trusted else prefix_key(self._peer)
        self._counted = (address_key(self._peer), *(() if prefix is None else (prefix,)))
        self._open.update(self._counted)
        self._last_data = self._head_by = self.loop.time()
        self._head_by += HEAD_S
        self._timer: asyncio.TimerHandle | None = None
        if not trusted:
            if self._open[self._counted[0]] > PER_ADDRESS:
                self._close(f"more than {PER_ADDRESS} connections from one address")
                return
            if prefix is not None and self._open[prefix] > PER_PREFIX:
                self._close(f"more than {PER_PREFIX} connections from one IPv6 /48")
                return
        self._check_later(HEAD_S)

    def data_received(self, data: bytes) -> None:
        self._last_data = self.loop.time()
        super().data_received(data)

    def on_response_complete(self) -> None:
        self._head_by = self.loop.time() + HEAD_S  # the next request's head, on a kept connection
        super().on_response_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
        for key in self._counted:
            self._open[key] -= 1
            if self._open[key] <= 0:
                del self._open[key]
        super().connection_lost(exc)

    # ------------------------------------------------------------------ the checks

    def _check_later(self, delay: float) -> None:
        self._timer = self.loop.call_later(max(delay, 0.05), self._check)

    def _check(self) -> None:
        self._timer = None
        if self.transport.is_closing():
            return
        now = self.loop.time()
        cycle = self.cycle
        if cycle is None or cycle.response_complete:  # waiting for a request's head
            due, why = self._head_by, f"no request within {HEAD_S:g} s"
        elif cycle.more_body:  # its body is arriving
            due, why = self._last_data + IDLE_S, f"a request body paused for {IDLE_S:g} s"
        else:  # the portal is answering: its own time, not the client's
            due, why = now + IDLE_S, ""
        if now >= due:
            self._close(why)
        else:
            self._check_later(due - now)

    def _close(self, why: str) -> None:
        self.transport.close()
        cls = GuardedH11Protocol
        cls._closed[why] += 1
        now = self.loop.time()
        if now - cls._said_at >= SAY_EVERY_S:
            cls._said_at = now
            counts = "; ".join(f"{n} ({reason})" for reason, n in sorted(cls._closed.items()))
            log.warning("Closed connections that held the portal: %s", counts)
            cls._closed.clear()

    def _is_trusted(self) -> bool:
        try:
            address = ipaddress.ip_address(self._peer)
        except ValueError:
            return False
        return any(address in network for network in self.trusted)


def guarded(trusted_proxies: Iterable[str]) -> type[GuardedH11Protocol]:
    """The protocol class for uvicorn (``http=``), trusting ``trusted_proxies`` (checked by the
    configuration: addresses or networks) with any number of connections; and as many file
    handles as the system allows this process, up to FILE_HANDLES."""
    GuardedH11Protocol.trusted = tuple(ipaddress.ip_network(p, strict=False) for p in trusted_proxies)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = FILE_HANDLES if hard == resource.RLIM_INFINITY else min(FILE_HANDLES, hard)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    return GuardedH11Protocol
