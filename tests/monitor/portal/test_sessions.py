"""Sessions end on the server: logout, a password change and an account's removal refuse a
cookie copied before; an ordinary session outlives a portal restart; expired ones are purged."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from monitor.config import AccountConfig
from monitor.credentials import hash_password
from monitor.journal.store import Store
from monitor.portal.sessions import MAX_PER_ACCOUNT, Sessions
from tests.support.portal_server import Client, Portal, serving


def logged_in(client: Client) -> bool:
    """Whether the client's cookie opens a page and the API (else: the login, 401)."""
    page = client.get("/")
    api = client.get("/api/v1/sites")
    assert (page.status == 200) == (api.status == 200), (page.status, api.status)
    if page.status != 200:
        assert page.status == 303 and page.location.endswith("/login") and api.status == 401
    return page.status == 200


def test_a_cookie_copied_before_logout_opens_nothing_after(tmp_path: Path) -> None:
    with serving(Portal(tmp_path)) as portal:
        ann = Client(portal)
        assert ann.login("ann").status == 303
        copy = Client(portal)
        copy.cookie = ann.cookie
        assert logged_in(copy)
        assert ann.logout().status == 303
        assert not logged_in(ann)
        assert not logged_in(copy)  # signed and unexpired, but its session has ended
        again = Client(portal)
        assert again.login("ann").status == 303 and logged_in(again)  # a new login works
    (record,) = portal.actions("logout")
    assert (record["actor"], record["site"], record["source"]) == ("ann", "s1", "127.0.0.1")


def test_a_session_outlives_a_restart_but_not_a_password_change_or_a_recreated_account(
    tmp_path: Path,
) -> None:
    portal = Portal(tmp_path)
    with serving(portal):
        ann, bob = Client(portal), Client(portal)
        assert ann.login("ann").status == 303 and bob.login("bob").status == 303
    with serving(portal):  # restarted with the same configuration
        assert logged_in(ann) and logged_in(bob)
    # ann's password changed; bob removed ...
    portal.hashes["ann"] = hash_password("ann-secret-2")
    del portal.accounts["bob"]
    with serving(portal):
        assert not logged_in(ann) and not logged_in(bob)
    # ... and bob added again with the same name (and a new password): his old cookie stays dead.
    portal.hashes["bob"] = hash_password("bob-secret-2")
    portal.accounts["bob"] = ("town", "[]")
    with serving(portal):
        assert not logged_in(ann) and not logged_in(bob)
        assert Client(portal).login("ann", "ann-secret-2").status == 303
    store = Store(portal.store)
    try:
        rows = store.conn.execute("SELECT account FROM portal_sessions").fetchall()
    finally:
        store.conn.close()
    assert [r["account"] for r in rows] == ["ann"]  # the ended sessions are gone from the store


def test_sessions_expire_and_the_table_stays_bounded(tmp_path: Path) -> None:
    now = [datetime(2026, 1, 5, 12, tzinfo=UTC)]
    store = Store(tmp_path / "store.db")
    sessions = Sessions(lambda: store, "key", 2.0, lambda: now[0])
    ann = AccountConfig("ann", "operator", hash_password("x"))
    first = sessions.open(ann)
    assert sessions.valid(first, ann) and not sessions.valid("forged", ann)
    assert not sessions.valid(first, AccountConfig("bob", "operator", ann.password_hash))
    now[0] += timedelta(hours=2)
    assert not sessions.valid(first, ann)  # session_hours after the login, however active
    for _ in range(MAX_PER_ACCOUNT + 5):
        sessions.open(ann)
    count = store.conn.execute("SELECT COUNT(*) FROM portal_sessions").fetchone()[0]
    assert count == MAX_PER_ACCOUNT  # the expired one and the oldest beyond the cap deleted
    now[0] += timedelta(hours=3)
    assert sessions.forget_stale({"ann": ann}) == MAX_PER_ACCOUNT
    store.conn.close()


def test_session_hours_are_bounded_so_that_every_login_can_end(tmp_path: Path) -> None:
    """``session_hours = 1e9`` passed check-config, and then every login answered 500: the
    session's end (now + 10**9 hours) is past the last date Python holds (OverflowError).
    The key is bounded as every duration is (ten years); the longest opens a session."""
    from monitor.config import LONGEST_DURATION_S, parse_config
    from monitor.errors import ConfigError
    from tests.support.config_samples import MINIMAL

    longest = LONGEST_DURATION_S / 3600
    with pytest.raises(ConfigError) as info:
        parse_config('[portal]\nsecret_key = "k"\nsession_hours = 1e9\n' + MINIMAL)
    assert f"portal.session_hours: must be at most {longest:g} hours, got 1e+09" in info.value.problems
    config = parse_config(f'[portal]\nsecret_key = "k"\nsession_hours = {longest}\n' + MINIMAL)
    assert config.portal is not None and config.portal.session_hours == longest
    store = Store(tmp_path / "store.db")
    sessions = Sessions(lambda: store, "key", longest, lambda: datetime(2026, 1, 5, 12, tzinfo=UTC))
    ann = AccountConfig("ann", "operator", hash_password("x"))
    assert sessions.valid(sessions.open(ann), ann)
    store.conn.close()
