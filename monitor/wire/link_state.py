"""Broker connection state and reconnect policy, shared by the daemon and the edge publishers.

No paho here (``monitor.daemon.ingest`` and ``sensors.link`` wire it to paho): the state is
what ``minewatch status`` reads back from the store, so this module stays cheap to import.

    paho network thread ──► LinkWatch.failed / lost / up ──► log line (reason + next attempt)
                                                        └──► LinkState (polled by the daemon
                                                             and written to the store's meta)
"""

from __future__ import annotations

import json
import logging
import math
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from urllib.parse import urlparse

from monitor.errors import MinewatchError

META_KEY = "broker_link"  # the store's meta row holding the daemon's LinkState
# A running daemon writes its LinkState at least every 30 s (LinkRecorder.refresh_s): a record not
# written for this long is a daemon that no longer runs (or is stuck), whatever the record says.
STALE_AFTER_S = 90.0

# CONNACK reason codes that no retry can fix (MQTT 5 section 3.2.2.2; paho maps the MQTT 3.1.1
# return codes 4 and 5 to 0x86 and 0x87): the credentials or the account itself are refused.
FATAL_CONNACK = {
    0x86: "bad user name or password",
    0x87: "not authorized",
    0x8A: "banned",
    0x8C: "bad authentication method",
}


@dataclass(frozen=True, slots=True)
class LinkState:
    """The broker link as the daemon last saw it; ``since`` is wall-clock UTC."""

    connected: bool
    since: datetime
    reason: str = ""  # why it is not connected ("" while connected)
    broker: str = ""
    as_of: datetime | None = None  # when the daemon last wrote it

    def to_json(self) -> str:
        return json.dumps(
            {
                "connected": self.connected,
                "since": self.since.isoformat(),
                "reason": self.reason,
                "broker": self.broker,
                "as_of": (self.as_of or self.since).isoformat(),
            },
            separators=(",", ":"),
        )

    @staticmethod
    def from_json(text: str | None) -> LinkState | None:
        """The stored state, or None when there is none or it cannot be read (an older store)."""
        if not text:
            return None
        try:
            d = json.loads(text)
            return LinkState(
                bool(d["connected"]),
                datetime.fromisoformat(d["since"]),
                str(d.get("reason", "")),
                str(d.get("broker", "")),
                datetime.fromisoformat(d["as_of"]) if d.get("as_of") else None,
            )
        except (ValueError, KeyError, TypeError):
            return None

    def silent_since(self, now: datetime) -> datetime | None:
        """When the daemon last reported, if that is over ``STALE_AFTER_S`` before ``now``
        (it died, or hangs); None while it reports. The one test of a daemon's being alive that
        `minewatch status` makes: its other records (the InfluxDB forwarder's) defer to it."""
        if self.as_of is not None and (now - self.as_of).total_seconds() > STALE_AFTER_S:
            return self.as_of
        return None

    def describe(self, now: datetime) -> str:
        """One line for `minewatch status`; says so when the daemon has not reported for a while."""
        since = _hms(self.since)
        if self.connected:
            line = f"broker {self.broker}: connected since {since}"
        else:
            line = f"broker {self.broker}: not connected since {since} ({self.reason or 'unknown reason'})"
        silent = self.silent_since(now)
        if silent is not None:
            line += f"; the daemon last reported at {_hms(silent)}"
        return line


def _hms(ts: datetime) -> str:
    return ts.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")


class Backoff:
    """Delays between connection attempts.

    A broker that was reachable a moment ago (a restart, a network blip) is retried fast:
    ``first_s``, doubling up to ``fast_cap_s``, for ``fast_for_s`` after the link was last
    up (or the process started). After that the cap is ``slow_cap_s``, so a long outage
    costs one attempt (and one log line) every half minute. Each delay is shortened by up
    to 20 % at random so that many sensors do not reconnect in lockstep.
    """

    def __init__(
        self,
        first_s: float = 0.5,
        fast_cap_s: float = 5.0,
        slow_cap_s: float = 30.0,
        fast_for_s: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self.first_s, self.fast_cap_s, self.slow_cap_s = first_s, fast_cap_s, slow_cap_s
        self.fast_for_s = fast_for_s
        self.clock, self.jitter = clock, jitter
        self._last_up = clock()
        self._delay: float | None = None

    def up(self) -> None:
        """The link is up: the next outage starts again from ``first_s``."""
        self._last_up = self.clock()
        self._delay = None

    def next_delay(self) -> float:
        cap = self.fast_cap_s if self.clock() - self._last_up <= self.fast_for_s else self.slow_cap_s
        self._delay = self.first_s if self._delay is None else min(self._delay * 2, cap)
        return min(self._delay, cap) * (1 - 0.2 * self.jitter())


def describe_connect_error(exc: BaseException, host: str, port: int, tls: bool = False) -> str:
    """Why a TCP/TLS connection to the broker failed, in words an operator can act on."""
    import socket  # here, not at the top: `minewatch status` imports this module for LinkState alone
    import ssl

    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"TLS: the broker's certificate is not trusted ({exc.verify_message}); check broker.ca_file"
    if isinstance(exc, ssl.SSLError):
        return f"TLS handshake failed ({exc.reason or exc}); is the port a TLS listener?"
    if isinstance(exc, socket.gaierror):
        return f"host name {host!r} not resolved ({exc.strerror})"
    if isinstance(exc, ConnectionRefusedError):
        return f"connection refused: nothing listens on {host}:{port}"
    if isinstance(exc, TimeoutError):
        return f"no answer from {host}:{port} (timed out)"
    if isinstance(exc, ConnectionResetError | BrokenPipeError):
        if tls:  # the handshake is the first thing said on a TLS connection
            return "TLS handshake failed: the connection was reset (is the port a TLS listener?)"
        return "connection reset by the broker (a plain connection to a TLS port?)"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror.lower()
    return str(exc) or type(exc).__name__


def connack_code(reason: object) -> int | None:
    """The numeric CONNACK reason of paho's ReasonCode (None if there is none)."""
    value = getattr(reason, "value", None)
    return value if isinstance(value, int) else None


class Failover:
    """Which of a cluster's addresses (``broker.urls``) the next connection attempt goes to.

    The first attempt goes to the first address; every later one to the next, round the
    list: a node that just failed is the last one retried. Each address not yet tried
    since the link was last up is tried at once (``untried_next``); once all have been,
    the attempts wait the ``Backoff``'s delays. With one address it changes nothing.
    """

    def __init__(self, urls: Sequence[str]) -> None:
        if not urls:
            raise ValueError("a broker link needs at least one address")
        self.urls = tuple(urls)
        self.index = 0
        self._tried = {0}
        self._attempted = False

    @property
    def url(self) -> str:
        return self.urls[self.index]

    @property
    def host_port(self) -> tuple[str, int]:
        parsed = urlparse(self.url)
        return parsed.hostname or "localhost", parsed.port or (8883 if parsed.scheme == "mqtts" else 1883)

    def attempt(self) -> str:
        """The address of the attempt about to be made (the next one after the first attempt)."""
        if self._attempted:
            self.index = (self.index + 1) % len(self.urls)
            self._tried.add(self.index)
        self._attempted = True
        return self.url

    def untried_next(self) -> bool:
        """Whether the next attempt goes to an address not tried since the link was last up."""
        return (self.index + 1) % len(self.urls) not in self._tried

    def up(self) -> None:
        self._tried = {self.index}


class LinkWatch:
    """The state of one broker connection, fed from paho's network thread.

    Logs every failed attempt with its reason and the time of the next attempt; keeps the
    current ``LinkState`` for the daemon to record; a refused login (not retryable) is
    ``fatal`` and calls ``on_fatal`` once. ``urls``: one address, or a cluster's (``Failover``).
    """

    def __init__(
        self,
        urls: str | Sequence[str],
        logger: logging.Logger,
        backoff: Backoff | None = None,
        on_fatal: Callable[[str], None] | None = None,
        wall: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.failover = Failover((urls,) if isinstance(urls, str) else urls)
        self.log = logger
        self.backoff = backoff or Backoff()
        self.on_fatal = on_fatal
        self.wall = wall
        self.fatal: str | None = None
        self.attempts = 0  # failed attempts since the link was last up
        self._lock = threading.Lock()
        self._state = LinkState(False, wall(), "connecting", self.url)
        self._changed = True
        self._problem: str | None = None  # the reason the next wait is for

    @property
    def url(self) -> str:
        """The address of the current (or last) connection attempt."""
        return self.failover.url

    @property
    def state(self) -> LinkState:
        with self._lock:
            return self._state

    def take_change(self) -> LinkState | None:
        """The state if it changed since the last call (for the daemon to record)."""
        with self._lock:
            if not self._changed:
                return None
            self._changed = False
            return self._state

    def _set(self, connected: bool, reason: str) -> None:
        with self._lock:
            old = self._state
            if old.connected == connected and old.reason == reason:
                return
            since = self.wall() if old.connected != connected else old.since
            self._state = LinkState(connected, since, reason, self.url)
            self._changed = True

    # ------------------------------------------------------------------ from paho's thread

    def attempting(self) -> tuple[str, int]:
        """A connection attempt starts; returns the (host, port) it goes to."""
        self._problem = None
        self.failover.attempt()
        return self.failover.host_port

    def failed(self, reason: str) -> None:
        """A connection attempt failed (socket, TLS, or a refused CONNACK)."""
        self._problem = reason
        self.attempts += 1
        self._set(False, reason)

    def refused(self, reason: object, username: str | None) -> bool:
        """A CONNACK with a failure reason; True if it is fatal (then ``on_fatal`` has run)."""
        code = connack_code(reason)
        if code in FATAL_CONNACK:
            who = f"user {username!r}" if username else "an anonymous client"
            message = (
                f"the broker {self.url} refused the login of {who}: {FATAL_CONNACK[code]}"
                " (check broker.username and its password; not retried)"
            )
            self.failed(f"login refused: {FATAL_CONNACK[code]}")
            if self.fatal is None:
                self.fatal = message
                self.log.error("%s", message)
                if self.on_fatal is not None:
                    self.on_fatal(message)
            return True
        self.failed(f"the broker refused the connection: {reason}")
        return False

    def up(self) -> None:
        self.backoff.up()
        self.failover.up()
        self.attempts = 0
        self._problem = None
        self._set(True, "")

    def lost(self, reason: object) -> None:
        if self._problem is None:  # a refused CONNACK has already said why
            self._problem = f"connection lost ({reason})"
            self._set(False, self._problem)

    def closed(self, reason: str) -> None:
        """The process closes the link on purpose (shutdown)."""
        self._problem = reason
        self._set(False, reason)

    def next_wait(self) -> float:
        """Seconds until the next attempt; logs the failure and when the next attempt is."""
        if self.failover.untried_next():
            # Another node of the cluster, not tried in this outage: at once (a node's loss
            # costs a reconnect, not a backoff).
            following = self.failover.urls[(self.failover.index + 1) % len(self.failover.urls)]
            self.log.warning(
                "Broker %s: %s; trying %s now", self.url, self._problem or "not connected", following
            )
            return 0.0
        delay = self.backoff.next_delay()
        at = (self.wall().astimezone(UTC).timestamp()) + delay
        self.log.warning(
            "Broker %s: %s; next attempt in %.1f s (at %s)",
            self.url,
            self._problem or "not connected",
            delay,
            datetime.fromtimestamp(at, UTC).strftime("%H:%M:%S.%f")[:-5] + "Z",
        )
        return delay


class LoginRefused(MinewatchError):
    """The broker refused the credentials: retrying cannot help, the process ends."""


class LinkRecorder:
    """Writes the watch's state where `minewatch status` reads it (the store's meta row).

    Called from the daemon's own thread between batches (the store is not thread-safe):
    on every change, and every ``refresh_s`` so that the record's ``as_of`` shows a
    daemon that died without saying so.
    """

    def __init__(
        self,
        watch: LinkWatch,
        write: Callable[[str, str], None],
        refresh_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.watch, self.write, self.refresh_s, self.clock = watch, write, refresh_s, clock
        self._written = -math.inf

    def poll(self) -> None:
        changed = self.watch.take_change()
        if changed is None and self.clock() - self._written < self.refresh_s:
            return
        state = changed or self.watch.state
        self.write(META_KEY, replace(state, as_of=self.watch.wall()).to_json())
        self._written = self.clock()
