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

The host is shown label by label, each as it is unless it reads as a token rather than a
name: some services put their secret in the host (ngrok's ``a1b2c3d4e5f6.ngrok-free.app``, a
Pipedream source's ``eo1x2y3z4abc5d.m.pipedream.net``, an AWS Lambda function URL's id). A
label is a token when a part of it between hyphens is 8 characters or more with a digit before
a letter (``a1b2…``, ``84c5df…``, ``eo1x2y…``), or 16 hex digits or more; it is shown as
``…[fingerprint]`` (of the label, lower case), so ``https://a1b2c3d4e5f6a7b8c9d0.ngrok-free.app/hook``
as ``https://…[57695df4].ngrok-free.app/…[6fc2d051]``. Names stay (``hooks.slack.com``,
``prod-12.westus.logic.azure.com``, ``s3-eu-west-1``, ``grafana01``, an IP address, an ``xn--``
name). A tunnel or relay service's receiver is named by a label left of the service's domain
(a Cloudflare quick tunnel's ``seasonal-deck-organisms-sf.trycloudflare.com``, localtunnel's
``tidy-lions-sing.loca.lt``): words, yet the name alone reaches the receiver, so every label
left of a domain in ``RELAY_DOMAINS`` is shown as its fingerprint whatever it reads as. Words
are not judged by their form elsewhere: ``town-of-dovre.wi.gov`` is a name. A name of letters
alone under another domain is shown whatever it is (a service naming its receivers by random
words that is not listed: put the secret in the path or the query instead). The userinfo
(``user:password@``) is never shown.

The real URL is used only where the request is made (monitor/notify/webhook.py).
"""

from __future__ import annotations

import hashlib
import re
import urllib.parse

__all__ = ["HIDDEN", "RELAY_DOMAINS", "shown_url", "shown_urls_in"]

HIDDEN = "…"
FINGERPRINT_HEX = 8
# Tunnel and relay services whose receivers are named by the labels left of these domains, names
# given at random (words or not) that reach the receiver by themselves: Cloudflare quick tunnels,
# ngrok, localtunnel, serveo, localhost.run, tunnelmole, Pipedream sources, pinggy, and Tailscale
# Funnel (a machine's name and its tailnet's, public while the funnel is on).
RELAY_DOMAINS = (
    "trycloudflare.com",
    "ngrok-free.app",
    "ngrok-free.dev",
    "ngrok.app",
    "ngrok.dev",
    "ngrok.io",
    "loca.lt",
    "serveo.net",
    "serveousercontent.com",
    "lhr.life",
    "tunnelmole.net",
    "m.pipedream.net",
    "pinggy.link",
    "pinggy.online",
    "ts.net",
)

_UNPARSED = re.compile(r"\(a URL that does not parse, \d+ characters\)")
_HIDDEN_HEX = rf"…\[[0-9a-f]{{{FINGERPRINT_HEX}}}\]"
# A URL as shown here: scheme and host (or neither), then the fingerprint in place of the rest.
_SHOWN = re.compile(
    rf"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*:)?(?://(?P<hostport>[^/?#@\s]*))?(?P<rest>/?{_HIDDEN_HEX})"
)
# A URL's parts (RFC 3986, appendix B), split as urllib.parse.urlsplit splits them; here because a
# host shown with a fingerprint (``…[57695df4].ngrok-free.app``) is no host urlsplit takes.
_PARTS = re.compile(
    r"(?:(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*):)?(?://(?P<netloc>[^/?#]*))?"
    r"(?P<path>[^?#]*)(?:\?(?P<query>[^#]*))?(?:#.*)?",
    re.DOTALL,
)
# A host label's part (between hyphens) that reads as a token, not a name: 8 characters or more
# with a digit before a letter, or 16 hex digits or more.
_TOKEN_PART = re.compile(
    r"(?=[0-9A-Za-z]{8,}$)[0-9A-Za-z]*[0-9][0-9A-Za-z]*[A-Za-z][0-9A-Za-z]*|[0-9A-Fa-f]{16,}"
)
# A URL within a text (an error message): up to a space, a quote or an angle bracket.
_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s'\"<>]+")
_TRAILING = ").,:;!?"


def shown_url(url: str) -> str:
    """``url`` as people may see it: scheme, host (a token in it fingerprinted) and port, and a
    fingerprint of the rest."""
    if _UNPARSED.fullmatch(url):
        return url
    shown = _SHOWN.fullmatch(url)
    if shown:  # shown already (its host perhaps before tokens in hosts were hidden)
        hostport = shown["hostport"]
        start = (shown["scheme"] or "") + ("" if hostport is None else f"//{_shown_hostport(hostport)}")
        return start + shown["rest"]
    parts = _PARTS.fullmatch(url)
    assert parts is not None  # every part is optional and the path takes any other text
    scheme, netloc, path, query = (parts[name] or "" for name in ("scheme", "netloc", "path", "query"))
    hostport = netloc.rpartition("@")[2]  # the userinfo never
    if not _parses(hostport):  # an unclosed IPv6 bracket
        return f"(a URL that does not parse, {len(url)} characters)"
    start = f"{scheme.lower()}:" if scheme else ""
    if netloc:
        start += f"//{_shown_hostport(hostport)}"
    path = path or "/"
    if path == "/" and not query:  # nothing past the host: nothing to hide
        return f"{start}/" if netloc else start + parts["path"]
    slash = "/" if netloc else ""
    return f"{start}{slash}{HIDDEN}[{_fingerprint(path, query)}]"


def _parses(hostport: str) -> bool:
    """Whether urllib takes the host and port (labels shown as fingerprints aside)."""
    try:
        urllib.parse.urlsplit("//" + re.sub(_HIDDEN_HEX, "x", hostport))
    except ValueError:
        return False
    return True


def _shown_hostport(hostport: str) -> str:
    """The host and port, each label of a name that reads as a token as ``…[fingerprint]``."""
    if hostport.startswith("["):  # an IPv6 address
        return hostport
    host, colon, port = hostport.partition(":")
    labels = host.split(".")
    named = _relay_receiver_labels(labels)
    labels = [_fingerprinted(label) if i < named else _shown_label(label) for i, label in enumerate(labels)]
    if not port.isdigit():  # a password holding a "/" (``user:pa/ss@host``) ends the host there
        port = HIDDEN if port else ""
    return ".".join(labels) + colon + port


def _relay_receiver_labels(labels: list[str]) -> int:
    """How many labels from the left name a receiver of a relay service (RELAY_DOMAINS): all
    those left of its domain; 0 for any other host (a trailing dot aside)."""
    name = ".".join(labels).lower().removesuffix(".")
    for domain in RELAY_DOMAINS:
        if name.endswith("." + domain):
            return name.count(".") - domain.count(".")
    return 0


def _shown_label(label: str) -> str:
    if label.lower().startswith("xn--") or not any(_TOKEN_PART.fullmatch(p) for p in label.split("-")):
        return label  # a name (an international one spelled in ASCII), or shown already
    return _fingerprinted(label)


def _fingerprinted(label: str) -> str:
    """``…[fingerprint]`` of a host label (of its lower case), a label shown so already as it is."""
    if re.fullmatch(_HIDDEN_HEX, label):
        return label
    digest = hashlib.sha256(label.lower().encode("utf-8", "surrogatepass")).hexdigest()
    return f"{HIDDEN}[{digest[:FINGERPRINT_HEX]}]"


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
