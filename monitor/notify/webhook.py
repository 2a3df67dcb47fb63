"""A webhook's POST: to the URL configured and nowhere else (monitor/notify/delivery.py sends through it).

urllib's ``urlopen`` followed a 302 by itself: a GET without the body, to whatever host the
``Location`` named, with the ``Idempotency-Key`` and ``X-Minewatch-Signature`` headers, and the
delivery counted as delivered though its receiver never had it. Here a 3xx is a failed attempt
(retried like a 503) whose error names where it pointed: the fix is the URL in the configuration.

Answers are sorted as Telegraf's outputs sort them: 2xx delivered; 408, 425, 429 and 5xx worth
retrying; other 4xx not.
"""

from __future__ import annotations

import base64
import http.client
import ssl
import urllib.parse
from collections.abc import Mapping

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
    connection: http.client.HTTPConnection
    if parts.scheme == "https":
        context = ssl_context or ssl.create_default_context()
        connection = http.client.HTTPSConnection(host, port, timeout=timeout_s, context=context)
    else:
        connection = http.client.HTTPConnection(host, port, timeout=timeout_s)
    try:
        connection.request("POST", target, body=body, headers=headers)
        response = connection.getresponse()
        status, reason = response.status, response.reason
        location = response.getheader("Location")
        response.read(_BODY_READ)
    except http.client.HTTPException as exc:
        raise OutputError(
            f"webhook {shown!r} answered with no HTTP answer ({type(exc).__name__}: {exc})", retryable=True
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
