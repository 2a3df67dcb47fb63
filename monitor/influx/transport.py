"""One HTTP request to InfluxDB, to the configured address and no other.

The writer's v1 and v2 requests both go through ``post``. urllib's default opener follows a
301, 302 or 303 as a GET without the body, whose 2xx then reads as "written", and sends our
``Authorization`` header to wherever ``Location`` points. Here nothing is followed:
``http.client`` answers the 3xx itself, and the writer refuses it (monitor/influx/client.py).
"""

from __future__ import annotations

import http.client
import ssl
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

    Raises OSError or http.client.HTTPException when there is no answer.
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
    try:
        conn.request("POST", target, body=body, headers=dict(headers))
        response = conn.getresponse()
        data = response.read(MAX_BODY)
        return Answer(response.status, response.reason, response.headers, data)
    finally:
        conn.close()
