"""A URL as people may see it: in a log line, an error, a stored row, an alert, `minewatch status`.

A Town's webhook is often ``https://host/hook?token=SECRET``, and every surface that named the
channel by its URL passed the token on: the daemon's log, the ``deliveries`` table, and the
"undeliverable" alerts, which are chained, exported in evidence bundles and delivered to the
operator's own channels (the Town's token reached the operator). What is shown is the scheme,
the host and port, the path and the query's names; each query value, a userinfo password (or a
lone user name, often a token itself) and a fragment read ``…``. The real URL is used only where
the request is made (monitor/notify/webhook.py). Showing a shown URL again changes nothing, so
a stored row of either kind can be matched and shown the same way.

A secret in the path itself (some chat services' hooks) is not told apart from a path: such a
URL is shown as it is.
"""

from __future__ import annotations

import urllib.parse

__all__ = ["HIDDEN", "shown_url"]

HIDDEN = "…"


def shown_url(url: str) -> str:
    """``url`` without its secrets: query values, userinfo password and fragment as ``…``."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:  # an unclosed IPv6 bracket
        return f"(a URL that does not parse, {len(url)} characters)"
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, hostport = netloc.rpartition("@")
        user, colon, _ = userinfo.partition(":")
        netloc = f"{user}:{HIDDEN}@{hostport}" if colon else f"{HIDDEN}@{hostport}"
    query = "&".join(
        f"{name}={HIDDEN}" if sep else HIDDEN
        for name, sep, _ in (item.partition("=") for item in parts.query.split("&") if item)
    )
    return urllib.parse.urlunsplit(
        (parts.scheme, netloc, parts.path, query, HIDDEN if parts.fragment else "")
    )
