"""A webhook's POST (monitor/notify/delivery.py sends through it): to the URL configured and
nowhere else, within one deadline (monitor/deadline_http.py), its answer sorted here.

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

from monitor import deadline_http
from monitor.errors import OutputError
from monitor.shown_url import shown_url

__all__ = ["post"]


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
    headers = dict(headers)
    if parts.username is not None:  # http://user:password@host/...: HTTP Basic
        pair = f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
        headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode("ascii")
    try:
        answer = deadline_http.post(url, body, headers, timeout_s=timeout_s, ssl_context=ssl_context)
    except ValueError:
        raise OutputError(f"webhook {shown!r}: the port is not a number", retryable=False) from None
    except TimeoutError:
        raise OutputError(
            f"webhook {shown!r} did not answer within {timeout_s:.3g} s (the whole request)", retryable=True
        ) from None
    except http.client.HTTPException as exc:
        raise OutputError(
            f"webhook {shown!r} gave no HTTP answer ({type(exc).__name__}: {exc})", retryable=True
        ) from None
    except OSError as exc:
        raise OutputError(f"webhook {shown!r} unreachable: {exc}", retryable=True) from None
    status = answer.status
    if 200 <= status < 300:
        return
    if 300 <= status < 400:
        where = "a redirect"
        location = answer.header("Location")
        if location:
            where += f" to {shown_url(urllib.parse.urljoin(url, location))}"
        raise OutputError(
            f"webhook {shown!r} answered {status} ({where}): minewatch does not follow redirects;"
            " set the webhook url to the final address",
            retryable=True,
        )
    raise OutputError(
        f"webhook {shown!r} answered HTTP {status} {answer.reason}",
        retryable=status in (408, 425, 429) or status >= 500,
    )
