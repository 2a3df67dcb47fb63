"""A webhook's POST: to the URL configured and nowhere else, within one deadline
(monitor/notify/delivery.py sends through it).

urllib's ``urlopen`` followed a 302 by itself: a GET without the body, to whatever host the
``Location`` named, with the ``Idempotency-Key`` and ``X-Minewatch-Signature`` headers, and the
delivery counted as delivered though its receiver never had it. Here a 3xx is a failed attempt
(retried like a 503) whose error names where it pointed: the fix is the URL in the configuration.

Answers are sorted as Telegraf's outputs sort them: 2xx delivered; 408, 425, 429 and 5xx worth
retrying; other 4xx not.

``timeout_s`` bounds the whole request: connecting, the TLS handshake, sending and the answer.
A socket's timeout bounds each read alone, so a receiver dripping one byte a second held one
delivery 37 s with a 15 s timeout. Every read and write here is given what is left of the
deadline, and the handshake runs without blocking under it. (The host name's lookup, done by
the C library, is bounded by the resolver's own timeouts.)
"""

from __future__ import annotations

import base64
import http.client
import io
import select
import socket
import ssl
import time
import urllib.parse
from collections.abc import Mapping
from typing import Any

from monitor.errors import OutputError
from monitor.shown_url import shown_url

__all__ = ["post"]

_BODY_READ = 64 * 1024  # of an answer's body: read (a receiver may wait for it), never kept


def post(
    url: str,
    body: bytes,
    headers: Mapping[str, str],
    *,
    timeout_s: float,
    ssl_context: ssl.SSLContext | None = None,
) -> None:
    """POST ``body`` to ``url``; returns on a 2xx answer, raises OutputError otherwise.

    Errors name the URL as ``shown_url`` shows it: they are logged, stored and alerted."""
    shown = shown_url(url)
    parts = urllib.parse.urlsplit(url)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise OutputError(f"webhook {shown!r}: the port is not a number", retryable=False) from None
    host = parts.hostname or ""
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    headers = dict(headers)
    if parts.username is not None:  # http://user:password@host/...: HTTP Basic
        pair = f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
        headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode("ascii")
    tls = (ssl_context or ssl.create_default_context()) if parts.scheme == "https" else None
    connection = _Connection(host, port, _Deadline(timeout_s), tls)
    try:
        connection.request("POST", target, body=body, headers=headers)
        response = connection.getresponse()
        status, reason = response.status, response.reason
        location = response.getheader("Location")
        response.read(_BODY_READ)
    except TimeoutError:
        raise OutputError(
            f"webhook {shown!r} did not answer within {timeout_s:g} s (the whole request)", retryable=True
        ) from None
    except http.client.HTTPException as exc:
        raise OutputError(
            f"webhook {shown!r} gave no HTTP answer ({type(exc).__name__}: {exc})", retryable=True
        ) from None
    except OSError as exc:
        raise OutputError(f"webhook {shown!r} unreachable: {exc}", retryable=True) from None
    finally:
        connection.close()
    if 200 <= status < 300:
        return
    if 300 <= status < 400:
        where = "a redirect"
        if location:
            where += f" to {shown_url(urllib.parse.urljoin(url, location))}"
        raise OutputError(
            f"webhook {shown!r} answered {status} ({where}): minewatch does not follow redirects;"
            " set the webhook url to the final address",
            retryable=True,
        )
    raise OutputError(
        f"webhook {shown!r} answered HTTP {status} {reason}",
        retryable=status in (408, 425, 429) or status >= 500,
    )


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
