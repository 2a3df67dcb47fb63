"""influxdb-client's requests, each bounded as a whole by one deadline (the InfluxDB v2 writer,
and the reader of evidence exports).

influxdb-client sends through a ``urllib3.PoolManager`` whose timeout bounds each socket
operation alone: a server answering a byte every 0.2 s held a write with a 1 s timeout for the
12 s its answer took to drip in, and the host name's lookup (``getaddrinfo``) was not bounded
at all. ``bound_requests`` gives that pool manager connections that do their socket work as
monitor/deadline_socket.py does for the v1 writer and the webhooks, under the deadline that
``one_deadline`` starts:

* the host name's lookup and the connection: ``deadline_socket.connect`` (an IP address is read
  in the caller's thread, a name is looked up in a thread waited on for what is left);
* the TLS handshake: urllib3's own, so the certificate and host name checks are its, unchanged;
  the socket's timeout is set to what is left, and CPython's handshake is bounded as a whole
  by it (not each of its reads);
* sending the request and reading the whole answer: ``DeadlineSocket``, every call given what is
  left. A connection the pool keeps alive takes the deadline of the request it carries.

A failure once the deadline has passed reads ``TimeoutError("no whole answer within N s")``,
as ``deadline_http.post`` says it.
"""

from __future__ import annotations

import http.client
import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import urllib3
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import ConnectTimeoutError, NameResolutionError, NewConnectionError

from monitor import deadline_socket
from monitor.deadline_socket import Deadline, DeadlineSocket

__all__ = ["bound_requests", "one_deadline"]

# The deadline of the request being made on this thread (the forwarder's, or an export's).
_current: ContextVar[Deadline | None] = ContextVar("influx_request_deadline", default=None)


@contextmanager
def one_deadline(timeout_s: float) -> Iterator[None]:
    """Every request made inside, through a pool manager given ``bound_requests``, is bounded
    by one deadline ``timeout_s`` from now; past it a failure is TimeoutError."""
    deadline = Deadline(timeout_s)
    token = _current.set(deadline)
    try:
        yield
    except (OSError, http.client.HTTPException, urllib3.exceptions.HTTPError) as exc:
        if deadline.passed():
            raise deadline_socket.overdue(timeout_s) from exc
        raise
    finally:
        _current.reset(token)


def bound_requests(pool_manager: urllib3.PoolManager) -> None:
    """Make every connection ``pool_manager`` opens from now on bounded by ``one_deadline``
    (before its first request: pools are made at the first request to a host)."""
    pool_manager.pool_classes_by_scheme = {"http": _HTTPPool, "https": _HTTPSPool}


def _deadline() -> Deadline:
    deadline = _current.get()
    if deadline is None:
        raise RuntimeError("an InfluxDB request was made outside monitor.influx.deadline_pool.one_deadline")
    return deadline


class _Bounded(HTTPConnection):
    """urllib3's connection with the lookup, the connection, sending and reading under the
    request's deadline. The TLS subclass below adds urllib3's handshake in between."""

    def _new_conn(self) -> socket.socket:
        deadline = _deadline()
        # The errors urllib3's own _new_conn raises, so that they read alike.
        try:
            sock = deadline_socket.connect(self._dns_host, self.port, deadline)
        except socket.gaierror as exc:
            raise NameResolutionError(self.host, self, exc) from exc
        except TimeoutError as exc:
            raise ConnectTimeoutError(self, f"Connection to {self.host} timed out: {exc}") from exc
        except OSError as exc:
            raise NewConnectionError(self, f"Failed to establish a new connection: {exc}") from exc
        try:
            for option in self.socket_options or ():
                sock.setsockopt(*option)
            # What is left, for the TLS handshake that may follow: CPython bounds it as a whole.
            sock.settimeout(deadline.left())
        except BaseException:
            sock.close()
            raise
        sys.audit("http.client.connect", self, self.host, self.port)
        return sock

    def connect(self) -> None:
        super().connect()
        self.sock = DeadlineSocket(self.sock, _deadline())

    def request(self, *args: Any, **kwargs: Any) -> None:
        if isinstance(self.sock, DeadlineSocket):  # kept alive from an earlier request
            self.sock.deadline = _deadline()
        super().request(*args, **kwargs)


class _BoundedTLS(_Bounded, HTTPSConnection):
    pass


class _HTTPPool(HTTPConnectionPool):
    ConnectionCls = _Bounded


class _HTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _BoundedTLS
