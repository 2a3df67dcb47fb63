"""One HTTP POST to the address given and nowhere else, within one deadline.

The InfluxDB v1 writer (monitor/influx/client.py) and the webhooks (monitor/notify/webhook.py)
send through ``post``; each sorts the answer its own way.

* Nothing is followed: urllib's opener followed a 301, 302 or 303 as a GET without the body,
  whose 2xx then read as "written" or "delivered", and sent the request's headers (a password,
  a signature) to wherever ``Location`` pointed. Here a 3xx is an answer like any other.
* ``timeout_s`` bounds the whole request: connecting, the TLS handshake, sending and the whole
  answer. A socket's timeout bounds each read alone, so a server dripping one byte a second held
  a request with a 2 s timeout for 45 s. Every read and write here is given what is left of the
  deadline, and the handshake runs without blocking under it. (The host name's lookup, done by
  the C library, is bounded by the resolver's own timeouts.)
"""

from __future__ import annotations

import http.client
import io
import select
import socket
import ssl
import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Answer", "post"]

# An answer's body is read for its error message only; a server sending more is cut short.
MAX_BODY = 64 * 1024


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    reason: str
    headers: http.client.HTTPMessage
    body: bytes

    def header(self, name: str) -> str | None:
        value = self.headers.get(name)
        return None if value is None else str(value)


def post(
    url: str,
    body: bytes,
    headers: Mapping[str, str],
    *,
    timeout_s: float,
    ssl_context: ssl.SSLContext | None = None,
) -> Answer:
    """POST ``body`` to ``url`` and return the answer, whatever its status (a 3xx included).

    Raises TimeoutError when there is no whole answer within ``timeout_s``, OSError or
    http.client.HTTPException when there is none, ValueError for a port that is no number.
    """
    parts = urllib.parse.urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    tls = (ssl_context or ssl.create_default_context()) if parts.scheme == "https" else None
    connection = _Connection(parts.hostname or "", port, _Deadline(timeout_s), tls)
    try:
        connection.request("POST", target, body=body, headers=dict(headers))
        response = connection.getresponse()
        data = response.read(MAX_BODY)
        return Answer(response.status, response.reason, response.headers, data)
    except TimeoutError:
        raise TimeoutError(f"no whole answer within {timeout_s:g} s") from None
    finally:
        connection.close()


class _Deadline:
    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        """The seconds left; TimeoutError once there are none."""
        left = self.end - time.monotonic()
        if left <= 0:
            raise TimeoutError("the deadline passed")
        return left


class _Connection(http.client.HTTPConnection):
    """http.client's connection over a socket whose every operation is bounded by ``deadline``."""

    def __init__(self, host: str, port: int, deadline: _Deadline, tls: ssl.SSLContext | None) -> None:
        super().__init__(host, port)
        self.deadline = deadline
        self.tls = tls

    def connect(self) -> None:
        sock = socket.create_connection((self.host, self.port), timeout=self.deadline.left())
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.tls is not None:
                sock = _handshake(
                    self.tls.wrap_socket(sock, server_hostname=self.host, do_handshake_on_connect=False),
                    self.deadline,
                )
        except BaseException:
            sock.close()
            raise
        self.sock = _DeadlineSocket(sock, self.deadline)


def _handshake(sock: ssl.SSLSocket, deadline: _Deadline) -> ssl.SSLSocket:
    """The TLS handshake, a record at a time, without blocking past the deadline."""
    sock.setblocking(False)
    while True:
        try:
            sock.do_handshake()
            return sock
        except ssl.SSLWantReadError:
            select.select([sock], [], [], deadline.left())
        except ssl.SSLWantWriteError:
            select.select([], [sock], [], deadline.left())


class _DeadlineSocket:
    """What http.client uses of a socket (``sendall``, ``makefile``, ``close``), each call given
    what is left of the deadline."""

    def __init__(self, sock: socket.socket, deadline: _Deadline) -> None:
        self.sock = sock
        self.deadline = deadline

    def sendall(self, data: Any) -> None:
        view = memoryview(data).cast("B")
        while view:
            self.sock.settimeout(self.deadline.left())
            view = view[self.sock.send(view) :]

    def makefile(self, mode: str, *args: Any, **kwargs: Any) -> io.BufferedReader:
        return io.BufferedReader(_DeadlineReader(self.sock, self.deadline))

    def close(self) -> None:
        self.sock.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sock, name)


class _DeadlineReader(io.RawIOBase):
    def __init__(self, sock: socket.socket, deadline: _Deadline) -> None:
        self.sock = sock
        self.deadline = deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        self.sock.settimeout(self.deadline.left())
        return self.sock.recv_into(buffer)
