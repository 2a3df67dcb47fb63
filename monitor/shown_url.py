"""A URL as people may see it: in a log line, an error, a stored row, an alert, `minewatch status`.

A webhook's URL often carries its secret: ``https://host/hook?token=SECRET``, and chat services
put it in the path itself (Slack ``/services/T…/B…/SECRET``, Discord ``/api/webhooks/<id>/<token>``,
Teams, many ``/hook/<token>`` receivers). Every surface that named a channel by its URL passed
the secret on: the daemon's log, the ``deliveries`` table, and the "undeliverable" alerts, which
are chained, exported in evidence bundles and delivered to the operator's own channels.

What is shown is chosen, not what is hidden: the scheme, the host and the port, which say where
deliveries go, and a fingerprint of the rest, which tells two receivers of one host apart:

    https://hooks.slack.com/services/T000/B000/XXXXXXXX  ->  https://hooks.slack.com/…[41887530]

The fingerprint is the first 8 hex digits of the SHA-256 of the path and the query's names
(``/services/T000/B000/XXXXXXXX``; ``/hook?token`` for ``/hook?token=SECRET``); userinfo and
fragment are left out of it and of the URL shown. 32 bits of a hash do not give back a long
random token; they could confirm a guessed short one. Query values are left out so that a
token changed in the configuration still names the same channel, and so that a URL shown by
the earlier form (``https://host/hook?token=…``, query values, userinfo and fragment as ``…``)
is shown as its real URL is: shown again, a shown URL of either form gives the same text, and a
stored row of any age is matched and shown the same way. A URL with nothing past the host is
shown as it is (``https://host/``).

The real URL is used only where the request is made (monitor/notify/webhook.py). A secret in
the host name itself (a request-catcher's random subdomain) is shown: the host is what a
person needs to see.
"""

from __future__ import annotations

import hashlib
import re
import urllib.parse

__all__ = ["HIDDEN", "shown_url", "shown_urls_in"]

HIDDEN = "…"
FINGERPRINT_HEX = 8

_UNPARSED = re.compile(r"\(a URL that does not parse, \d+ characters\)")
# A URL as shown here: scheme and host (or neither), then the fingerprint in place of the rest.
_SHOWN = re.compile(rf"(?:[A-Za-z][A-Za-z0-9+.\-]*:)?(?://[^/?#@\s]*)?/?…\[[0-9a-f]{{{FINGERPRINT_HEX}}}\]")
# A URL within a text (an error message): up to a space, a quote or an angle bracket.
_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s'\"<>]+")
_TRAILING = ").,:;!?"


def shown_url(url: str) -> str:
    """``url`` as people may see it: scheme, host and port, and a fingerprint of the rest."""
    if _SHOWN.fullmatch(url) or _UNPARSED.fullmatch(url):
        return url
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:  # an unclosed IPv6 bracket
        return f"(a URL that does not parse, {len(url)} characters)"
    hostport = parts.netloc.rpartition("@")[2]
    start = f"{parts.scheme}:" if parts.scheme else ""
    if parts.netloc:
        start += f"//{hostport}"
    path = parts.path or "/"
    if path == "/" and not parts.query:  # nothing past the host: nothing to hide
        return f"{start}/" if parts.netloc else start + parts.path
    slash = "/" if parts.netloc else ""
    return f"{start}{slash}{HIDDEN}[{_fingerprint(path, parts.query)}]"


def _fingerprint(path: str, query: str) -> str:
    """The path and the query's names (a value, and an item without a name, as ``…``: what the
    earlier shown form kept of them) hashed."""
    names = [
        name if sep else HIDDEN for name, sep, _ in (item.partition("=") for item in query.split("&") if item)
    ]
    kept = path + ("?" + "&".join(names) if names else "")
    return hashlib.sha256(kept.encode("utf-8", "surrogatepass")).hexdigest()[:FINGERPRINT_HEX]


def shown_urls_in(text: str) -> str:
    """``text`` (an error message) with every URL in it as ``shown_url`` shows it."""

    def show(match: re.Match[str]) -> str:
        url = match.group(0)
        kept = url.rstrip(_TRAILING)
        return shown_url(kept) + url[len(kept) :]

    return _URL_IN_TEXT.sub(show, text)
