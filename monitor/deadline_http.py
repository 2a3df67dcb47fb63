"""One HTTP POST to the address given and nowhere else, within one deadline.

The InfluxDB v1 writer and reader (monitor/influx/client.py) and the webhooks
(monitor/notify/webhook.py) send through ``post``; each sorts the answer its own way.

* Nothing is followed: urllib's opener followed a 301, 302 or 303 as a GET without the body,
  whose 2xx then read as "written" or "delivered", and sent the request's headers (a password,
  a signature) to wherever ``Location`` pointed. Here a 3xx is an answer like any other.
* ``timeout_s`` bounds the whole request: the host name's lookup, connecting, the TLS handshake,
  sending and the whole answer (monitor/deadline_socket.py: a socket's timeout bounds each read
  alone, so a server dripping one byte a second held a request with a 2 s timeout for 45 s; a
  resolver that did not answer held it past any timeout). ``Host`` and TLS keep the URL's name.
"""

from __future__ import annotations

import http.client
import socket
import ssl
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass

from monitor import deadline_socket
from monitor.deadline_socket import Deadline, DeadlineSocket, Resolver, overdue, start_tls

__all__ = ["Answer", "post"]

# A writer's answer is read for its error message only; a server sending more is cut short.
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
    resolver: Resolver | None = None,
    max_body: int = MAX_BODY,
) -> Answer:
    """POST ``body`` to ``url`` and return the answer, whatever its status (a 3xx included), its
    body cut at ``max_body`` bytes.

    Raises TimeoutError when there is no whole answer within ``timeout_s``, OSError or
    http.client.HTTPException when there is none, ValueError for a port that is no number.
    ``resolver`` stands in for ``socket.getaddrinfo`` (tests of a resolver that hangs).
    """
    parts = urllib.parse.urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    tls = (ssl_context or ssl.create_default_context()) if parts.scheme == "https" else None
    connection = _Connection(parts.hostname or "", port, Deadline(timeout_s), tls, resolver)
    try:
        connection.request("POST", target, body=body, headers=dict(headers))
        response = connection.getresponse()
        data = response.read(max_body)
        return Answer(response.status, response.reason, response.headers, data)
    except TimeoutError:
        raise overdue(timeout_s) from None
    finally:
        connection.close()


class _Connection(http.client.HTTPConnection):
    """http.client's connection (``Host`` the URL's name) over a socket whose every operation,
    the name's lookup first, is bounded by ``deadline``."""

    def __init__(
        self, host: str, port: int, deadline: Deadline, tls: ssl.SSLContext | None, resolver: Resolver | None
    ) -> None:
        super().__init__(host, port)
        self.deadline = deadline
        self.tls = tls
        self.resolver = resolver

    def connect(self) -> None:
        sock: socket.socket = deadline_socket.connect(
            self.host, self.port, self.deadline, resolver=self.resolver
        )
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.tls is not None:
                sock = start_tls(sock, self.tls, self.host, self.deadline)
        except BaseException:
            sock.close()
            raise
        self.sock = DeadlineSocket(sock, self.deadline)
