"""A URL as people may see it (monitor/shown_url.py): names kept, values and passwords hidden."""

from __future__ import annotations

import pytest

from monitor.shown_url import shown_url


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://host/town-hook?token=SECRET", "http://host/town-hook?token=…"),
        ("https://host:8443/h?site=quarry&key=abc&flag", "https://host:8443/h?site=…&key=…&…"),
        ("https://user:pa55@host/h", "https://user:…@host/h"),
        ("https://TOKEN@host/h", "https://…@host/h"),  # a lone user name is often the token
        ("https://host/h#SECRET", "https://host/h#…"),
        ("http://127.0.0.1:8080/hook", "http://127.0.0.1:8080/hook"),
        ("http://[::1]:9/h?t=1", "http://[::1]:9/h?t=…"),
        ("http://[::1/h?t=SECRET", "(a URL that does not parse, 22 characters)"),
    ],
)
def test_a_url_is_shown_without_its_secrets(url: str, shown: str) -> None:
    assert shown_url(url) == shown
    assert shown_url(shown) == shown  # shown twice, the same: stored rows of either kind match
