"""A URL as people may see it (monitor/shown_url.py): scheme, host and port, and a fingerprint
of the rest (the SHA-256 of the path and the query's names, its first 8 hex digits)."""

from __future__ import annotations

import hashlib

import pytest

from monitor.shown_url import shown_url, shown_urls_in


def fingerprint(kept: str) -> str:
    return hashlib.sha256(kept.encode()).hexdigest()[:8]


@pytest.mark.parametrize(
    ("url", "shown", "secret"),
    [
        (  # Slack: the token is the path's last segment
            "https://hooks.slack.com/services/T000/B000/XXXXXXXX",
            f"https://hooks.slack.com/…[{fingerprint('/services/T000/B000/XXXXXXXX')}]",
            "XXXXXXXX",
        ),
        (  # Discord: /api/webhooks/<id>/<token>
            "https://discord.com/api/webhooks/112233/dIsCoRdToKeN",
            f"https://discord.com/…[{fingerprint('/api/webhooks/112233/dIsCoRdToKeN')}]",
            "dIsCoRdToKeN",
        ),
        (  # Teams (an Office 365 connector)
            "https://acme.webhook.office.com/webhookb2/g1@g2/IncomingWebhook/tEaMsKeY/g3",
            f"https://acme.webhook.office.com/…[{fingerprint('/webhookb2/g1@g2/IncomingWebhook/tEaMsKeY/g3')}]",
            "tEaMsKeY",
        ),
        (  # a receiver's own /hook/<token>
            "https://receiver.example:8443/hook/hOoKtOkEn",
            f"https://receiver.example:8443/…[{fingerprint('/hook/hOoKtOkEn')}]",
            "hOoKtOkEn",
        ),
        ("http://host/town-hook?token=SECRET", f"http://host/…[{fingerprint('/town-hook?token')}]", "SECRET"),
        (
            "https://host:8443/h?site=quarry&key=abc&flag",
            f"https://host:8443/…[{fingerprint('/h?site&key&…')}]",
            "abc",
        ),
        ("https://user:pa55@host/h", f"https://host/…[{fingerprint('/h')}]", "pa55"),
        ("https://TOKEN@host/h", f"https://host/…[{fingerprint('/h')}]", "TOKEN"),
        ("https://host/h#SECRET", f"https://host/…[{fingerprint('/h')}]", "SECRET"),
        ("http://[::1]:9/h?t=SECRET", f"http://[::1]:9/…[{fingerprint('/h?t')}]", "SECRET"),
        ("http://[::1/h?t=SECRET", "(a URL that does not parse, 22 characters)", "SECRET"),
        ("slack.com/s/NoScheme", f"…[{fingerprint('slack.com/s/NoScheme')}]", "NoScheme"),  # no scheme
    ],
)  # fmt: skip
def test_a_url_is_shown_by_what_people_may_see(url: str, shown: str, secret: str) -> None:
    """A secret in the path (chat services' hooks) was shown: only query values, userinfo and
    fragment were hidden. Now only the scheme, host and port are shown, with a fingerprint."""
    assert shown_url(url) == shown
    assert secret not in shown_url(url)
    assert shown_url(shown) == shown  # shown twice, the same: stored rows of either kind match


def test_a_url_with_nothing_past_its_host_is_shown_as_it_is_and_two_hooks_of_one_host_apart() -> None:
    assert shown_url("http://127.0.0.1:8080/") == "http://127.0.0.1:8080/"
    assert shown_url("https://user:pa55@host") == "https://host/"
    one = shown_url("https://hooks.slack.com/services/T000/B000/AAAAAAAA")
    other = shown_url("https://hooks.slack.com/services/T000/B111/BBBBBBBB")
    assert one != other and "AAAAAAAA" not in one + other and "BBBBBBBB" not in one + other


@pytest.mark.parametrize(
    ("url", "shown_before"),
    [
        ("http://host/town-hook?token=SECRET", "http://host/town-hook?token=…"),
        ("https://host:8443/h?site=quarry&key=abc&flag", "https://host:8443/h?site=…&key=…&…"),
        ("https://user:pa55@host/h", "https://user:…@host/h"),
        ("https://TOKEN@host/h#SECRET", "https://…@host/h#…"),
        ("https://hooks.slack.com/services/T000/B000/XXXXXXXX", "https://hooks.slack.com/services/T000/B000/XXXXXXXX"),
    ],
)  # fmt: skip
def test_a_url_shown_the_earlier_way_is_shown_as_its_real_url(url: str, shown_before: str) -> None:
    """Rows stored with the earlier shown form (query values, userinfo and fragment as ``…``,
    the path whole) are shown, and matched to their channel, as the real URL is."""
    assert shown_url(shown_before) == shown_url(url)
    assert "…[" in shown_url(url)


def test_every_url_in_an_error_is_shown() -> None:
    """A stored error names the webhook and where its redirect pointed (old rows: by the
    earlier shown form, a path's token and all)."""
    error = (
        "webhook 'https://hooks.slack.com/services/T000/B000/XXXXXXXX' answered 302 (a redirect to"
        " https://other.example/hook/SeCrEt?k=…): minewatch does not follow redirects"
    )
    assert shown_urls_in(error) == (
        f"webhook 'https://hooks.slack.com/…[{fingerprint('/services/T000/B000/XXXXXXXX')}]' answered 302"
        f" (a redirect to https://other.example/…[{fingerprint('/hook/SeCrEt?k')}]): minewatch does not"
        " follow redirects"
    )
    assert shown_urls_in(shown_urls_in(error)) == shown_urls_in(error)


def label_fingerprint(label: str) -> str:
    return f"…[{fingerprint(label.lower())}]"


NGROK = "a1b2c3d4e5f6a7b8c9d0"


@pytest.mark.parametrize(
    ("url", "shown_host", "secret"),
    [
        (f"https://{NGROK}.ngrok-free.app/hook", f"{label_fingerprint(NGROK)}.ngrok-free.app", NGROK),
        (
            "https://84c5df439d74.ngrok-free.app/",
            f"{label_fingerprint('84c5df439d74')}.ngrok-free.app",
            "84c5df",
        ),
        (
            "https://eo1x2y3z4abc5d.m.pipedream.net",
            f"{label_fingerprint('eo1x2y3z4abc5d')}.m.pipedream.net",
            "eo1x2y",
        ),
        (
            "https://hello-3ruc5j7i4q-uc.a.run.app/h",
            f"{label_fingerprint('hello-3ruc5j7i4q-uc')}.a.run.app",
            "3ruc5j",
        ),
        (
            "https://DEADBEEFCAFEBABE.example:8443/h",
            f"{label_fingerprint('deadbeefcafebabe')}.example:8443",
            "BEEF",
        ),
        (f"https://u:pw@{NGROK}.ngrok-free.app/h", f"{label_fingerprint(NGROK)}.ngrok-free.app", NGROK),
    ],
)
def test_a_token_in_the_host_is_shown_as_a_fingerprint(url: str, shown_host: str, secret: str) -> None:
    """Some services put their secret in the host (ngrok, Pipedream, a function URL's id): the
    host was shown whole. A label that reads as a token is shown as a fingerprint of it."""
    shown = shown_url(url)
    assert shown.split("//")[1].split("/")[0] == shown_host
    assert secret not in shown and secret.lower() not in shown
    assert shown_url(shown) == shown
    assert shown_urls_in(f"webhook {url!r} answered 302 (a redirect to {url})") == (
        f"webhook {shown!r} answered 302 (a redirect to {shown})"
    )


@pytest.mark.parametrize(
    "host",
    [
        "hooks.slack.com",
        "prod-12.westus.logic.azure.com:443",
        "s3-eu-west-1.amazonaws.com",
        "ec2-54-12-33-10.compute-1.amazonaws.com",
        "grafana01.town-of-dovre.example:3000",
        "192.168.1.10:8080",
        "[2001:db8::1]:9",
        "xn--80ak6aa92e.com",
        "town-of-dovre.wi.gov",  # words are a name outside a relay's domain
        "smtp.office365.com",
        "trycloudflare.com",  # a relay's own domain names no receiver
        "notrycloudflare.com",
    ],
)
def test_a_name_in_the_host_is_shown_as_it_is(host: str) -> None:
    assert shown_url(f"https://{host}/hook/SECRET") == f"https://{host}/…[{fingerprint('/hook/SECRET')}]"


@pytest.mark.parametrize(
    ("url", "shown_host", "secret"),
    [
        (  # a Cloudflare quick tunnel: its name is words, and the name is the secret
            "https://seasonal-deck-organisms-sf.trycloudflare.com/hook",
            f"{label_fingerprint('seasonal-deck-organisms-sf')}.trycloudflare.com",
            "organisms",
        ),
        (  # localtunnel, its name in any case and the host ending in a dot
            "https://Tidy-Lions-Sing.LOCA.LT./h",
            f"{label_fingerprint('tidy-lions-sing')}.LOCA.LT.",
            "lions",
        ),
        (  # every label left of the relay's domain
            "https://quiet.river.ngrok.io:8443/h",
            f"{label_fingerprint('quiet')}.{label_fingerprint('river')}.ngrok.io:8443",
            "river",
        ),
        ("https://hookname.lhr.life/", f"{label_fingerprint('hookname')}.lhr.life", "hookname"),
        (  # Tailscale Funnel: the machine's name and its tailnet's
            "https://quarry-office.tail4f2a9c.ts.net/h",
            f"{label_fingerprint('quarry-office')}.{label_fingerprint('tail4f2a9c')}.ts.net",
            "quarry",
        ),
        (
            "https://rnsxw-203-0-113-5.a.free.pinggy.link/h",
            ".".join(label_fingerprint(x) for x in ("rnsxw-203-0-113-5", "a", "free")) + ".pinggy.link",
            "rnsxw",
        ),
    ],
)
def test_a_relay_receivers_name_of_words_is_shown_as_a_fingerprint(
    url: str, shown_host: str, secret: str
) -> None:
    """A tunnel or relay service names its receiver by the labels left of its domain, words
    that read as a name yet reach the receiver by themselves: they were shown whole."""
    shown = shown_url(url)
    assert shown.split("//")[1].split("/")[0] == shown_host
    assert secret not in shown.lower()
    assert shown_url(shown) == shown
    assert shown_urls_in(f"webhook {url!r} unreachable") == f"webhook {shown!r} unreachable"


def test_a_host_shown_before_its_token_was_hidden_is_shown_as_its_real_url() -> None:
    """Rows stored while the host was shown whole (``https://<token>.ngrok-free.app/…[fp]``)
    are shown, and matched to their channel, as the real URL is now."""
    url = "https://a1b2c3d4e5f6a7b8c9d0.ngrok-free.app/services/T000/B000/XXXXXXXX"
    stored = f"https://a1b2c3d4e5f6a7b8c9d0.ngrok-free.app/…[{fingerprint('/services/T000/B000/XXXXXXXX')}]"
    assert shown_url(stored) == shown_url(url) != stored
    assert shown_url("https://a1b2c3d4e5f6a7b8c9d0.ngrok-free.app/") == shown_url(
        "https://u:p@a1b2c3d4e5f6a7b8c9d0.ngrok-free.app"
    )


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://alice:SECRETpw@host.example/h", f"https://host.example/…[{fingerprint('/h')}]"),
        ("https://alice:SECRETpw@host.example", "https://host.example/"),
        (
            "https://alice@SECRETpw@host.example:8443/h?t=1",
            f"https://host.example:8443/…[{fingerprint('/h?t')}]",
        ),
        ("https://SECRETtoken@[::1]:9/h", f"https://[::1]:9/…[{fingerprint('/h')}]"),
        (
            f"https://alice:SECRETpw@{NGROK}.ngrok-free.app/h",
            f"https://{label_fingerprint(NGROK)}.ngrok-free.app/…[{fingerprint('/h')}]",
        ),
        # A "/" in the password ends the host there: the request goes to "alice" (a port not a number)
        (
            "https://alice:pa/SECRETpw@host.example/h",
            f"https://alice:…/…[{fingerprint('/SECRETpw@host.example/h')}]",
        ),
    ],
)
def test_the_userinfo_is_never_shown(url: str, shown: str) -> None:
    assert shown_url(url) == shown
    assert (
        shown_urls_in(f"webhook '{url}' unreachable: ({url})") == f"webhook '{shown}' unreachable: ({shown})"
    )
