"""One HTTP request to InfluxDB, to the configured address and no other.

The writer's v1 and v2 requests both go through ``post``. urllib's default opener follows a
301, 302 or 303 as a GET without the body, whose 2xx then reads as "written", and sends our
``Authorization`` header to wherever ``Location`` points. Here nothing is followed:
``http.client`` answers the 3xx itself, and the writer refuses it (monitor/influx/client.py).

``timeout_s`` bounds the whole request, not each socket read: urllib's and urllib3's timeouts
(``Timeout(total=...)`` too, once connected) restart with every byte, so a server sending one
byte a second held a write with a 2 s timeout for 45 s. A timer shuts the socket down when the
time is up, whatever the request is waiting for, and the request fails with TimeoutError.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import ssl
import threading
import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass

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


def post(url: str, body: bytes, headers: Mapping[str, str], timeout_s: float) -> Answer:
    """POST ``body`` to ``url`` and return the answer, whatever its status (a 3xx included).

    Raises OSError or http.client.HTTPException when there is no answer, TimeoutError when
    there is none within ``timeout_s`` (connecting, sending and reading together).
    """
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    conn: http.client.HTTPConnection
    if parts.scheme == "https":
        conn = http.client.HTTPSConnection(
            host, parts.port, timeout=timeout_s, context=ssl.create_default_context()
        )
    elif parts.scheme == "http":
        conn = http.client.HTTPConnection(host, parts.port, timeout=timeout_s)
    else:  # the config refuses other schemes; a programmer error here
        raise ValueError(f"expected an http(s) URL, got {url!r}")
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    began = time.monotonic()
    expired = threading.Event()

    def expire() -> None:
        expired.set()
        sock = conn.sock
        if sock is not None:
            with contextlib.suppress(OSError):  # already closed
                sock.shutdown(socket.SHUT_RDWR)  # a blocked recv or send returns at once

    timer = threading.Timer(timeout_s, expire)
    timer.daemon = True
    timer.start()
    try:
        conn.connect()  # each step of connecting is bounded by the socket's timeout_s as well
        if expired.is_set():
            raise TimeoutError
        conn.request("POST", target, body=body, headers=dict(headers))
        response = conn.getresponse()
        data = response.read(MAX_BODY)
        if expired.is_set():  # the answer may have been cut short by the shutdown
            raise TimeoutError
        return Answer(response.status, response.reason, response.headers, data)
    except (OSError, http.client.HTTPException) as exc:
        if expired.is_set():
            elapsed = time.monotonic() - began
            raise TimeoutError(
                f"no whole answer within {timeout_s:g} s (gave up after {elapsed:.1f} s)"
            ) from exc
        raise
    finally:
        timer.cancel()
        conn.close()
