"""Failed logins are throttled per (name, address) with growing waits and per address; the
owner from a clean address still logs in; the limiter's tables are bounded; X-Forwarded-For is
believed only from portal.trusted_proxies."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest

from monitor.portal.throttle import (
    ADDRESS_FACTOR,
    BASE_DELAY_S,
    MAX_ENTRIES,
    PREFIX_FACTOR,
    LoginLimiter,
    address_key,
    prefix_key,
)
from tests.support.portal_server import Client, Portal, serving


def test_waits_grow_per_name_and_address_and_the_owner_elsewhere_is_not_held_back() -> None:
    now = [0.0]
    limiter = LoginLimiter(3, 300.0, clock=lambda: now[0])
    for _ in range(3):
        assert limiter.blocked("ann", "10.0.0.1") == 0
        limiter.failed("ann", "10.0.0.1")
    assert limiter.blocked("ann", "10.0.0.1") == BASE_DELAY_S
    assert limiter.blocked("ann", "10.0.0.2") == 0  # the owner, from another address
    waits = []
    for _ in range(8):
        now[0] += limiter.blocked("ann", "10.0.0.1")
        waits.append(limiter.blocked("ann", "10.0.0.1"))  # 0: the wait is over
        limiter.failed("ann", "10.0.0.1")
        waits.append(limiter.blocked("ann", "10.0.0.1"))
    assert waits[0::2] == [0.0] * 8
    assert waits[1::2] == [20.0, 40.0, 80.0, 160.0, 300.0, 300.0, 300.0, 300.0]  # up to the window
    limiter.succeeded("ann", "10.0.0.1")
    assert limiter.blocked("ann", "10.0.0.1") == 0


def test_one_address_gets_a_limited_number_of_failures_whatever_the_names() -> None:
    now = [0.0]
    limiter = LoginLimiter(3, 60.0, clock=lambda: now[0])
    for i in range(3 * ADDRESS_FACTOR):
        assert limiter.blocked(f"name{i}", "10.0.0.1") == 0
        limiter.failed(f"name{i}", "10.0.0.1")
    assert limiter.blocked("carol", "10.0.0.1") == pytest.approx(5.0)  # then one per 60 s / 12
    now[0] = 5.0
    assert limiter.blocked("carol", "10.0.0.1") == 0
    limiter.failed("carol", "10.0.0.1")
    assert limiter.blocked("dave", "10.0.0.1") == pytest.approx(5.0)
    assert limiter.blocked("dave", "10.0.0.2") == 0
    # An IPv6 client is one /64: changing the interface identifier does not help.
    for i in range(3 * ADDRESS_FACTOR):
        limiter.failed(f"name{i}", f"2001:db8:1:2::{i + 1:x}")
    assert limiter.blocked("carol", "2001:db8:1:2:ffff::9") > 0
    assert limiter.blocked("carol", "2001:db8:1:3::1") == 0
    assert address_key("::ffff:10.0.0.1") == "10.0.0.1"
    now[0] = 65.0
    assert limiter.blocked("carol", "10.0.0.1") == 0


def test_the_failures_of_one_ipv6_48_are_limited_together_across_its_64s() -> None:
    """A subscriber's /56 or /48 holds 256 or 65,536 /64s, each with the per-address bucket:
    one /48 failed 4 x attempts times in every /64. Its /48 has PREFIX_FACTOR such buckets'
    worth, draining as fast; another /48 and IPv4 (written as IPv6 too) are as before."""
    now = [0.0]
    limiter = LoginLimiter(3, 60.0, clock=lambda: now[0])
    per_prefix = 3 * ADDRESS_FACTOR * PREFIX_FACTOR
    for i in range(per_prefix):
        address = f"2001:db8:7:{i:x}::1"  # a /64 of its own each time
        assert limiter.blocked(f"name{i}", address) == 0, i
        limiter.failed(f"name{i}", address)
    assert limiter.blocked("carol", "2001:db8:7:ffff::1") == pytest.approx(60.0 / per_prefix)
    assert limiter.blocked("carol", "2001:db8:8::1") == 0  # another /48
    assert limiter.blocked("carol", "10.0.0.1") == 0
    now[0] = 60.0 / per_prefix
    assert limiter.blocked("carol", "2001:db8:7:ffff::1") == 0  # then one more as it drains
    for i in range(3 * ADDRESS_FACTOR):  # IPv4: the one address's bucket, no prefix
        limiter.failed(f"name{i}", "::ffff:10.0.0.2" if i % 2 else "10.0.0.2")
    assert limiter.blocked("carol", "10.0.0.2") > 0
    assert limiter.blocked("carol", "10.0.0.3") == 0
    assert prefix_key("::ffff:10.0.0.2") is None and prefix_key("10.0.0.2") is None


def test_one_name_guessed_from_many_64s_of_one_48_waits_as_from_one_address() -> None:
    """Each (name, /64) pair had its own free failures: a subscriber's /48 guessed one account's
    password from each of its /64s without waiting. A (name, /48) pair has PREFIX_FACTOR times
    the free failures, then waits as a pair does; the owner from another /48 is not held back."""
    now = [0.0]
    limiter = LoginLimiter(3, 300.0, clock=lambda: now[0])
    for i in range(3 * PREFIX_FACTOR):
        address = f"2001:db8:b:{i // 3:x}::1"  # three failures in each /64: its own free ones
        assert limiter.blocked("ann", address) == 0, i
        limiter.failed("ann", address)
    assert limiter.blocked("ann", "2001:db8:b:ffff::1") == BASE_DELAY_S  # a fresh /64 of the /48
    assert limiter.blocked("bob", "2001:db8:b:ffff::1") == 0  # another name
    assert limiter.blocked("ann", "2001:db8:c::1") == 0  # the owner, from another /48
    limiter.succeeded("ann", "2001:db8:b:ffff::1")
    assert limiter.blocked("ann", "2001:db8:b:ffff::1") == 0


def test_the_limiters_tables_are_bounded_and_forget_old_entries() -> None:
    now = [0.0]
    limiter = LoginLimiter(5, 300.0, clock=lambda: now[0])
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        for i in range(50_000):
            limiter.failed(f"someone-{i:06d}@example.org", f"10.{i >> 16}.{(i >> 8) & 255}.{i & 255}")
        grown = sum(s.size_diff for s in tracemalloc.take_snapshot().compare_to(before, "filename"))
    finally:
        tracemalloc.stop()
    assert len(limiter) == 2 * MAX_ENTRIES
    assert grown < 4 * 1024 * 1024, grown  # 20,000 names cost 18 MB before the bound
    # The latest failures are the ones kept; quiet entries are forgotten after a window.
    assert limiter.blocked("someone-049999@example.org", "10.0.195.79") == 0
    now[0] = 301.0
    limiter.blocked("x", "10.9.9.9")
    assert len(limiter) == 0


def test_the_owner_from_a_clean_address_logs_in_while_a_guesser_waits(tmp_path: Path) -> None:
    with serving(Portal(tmp_path)) as portal:
        guesser = Client(portal, source="127.0.0.1")
        for _ in range(5):
            assert guesser.login("ann", "guess").status == 401
        refused = guesser.login("ann")  # even the right password waits, from this address
        assert refused.status == 429 and "Too many failed logins" in refused.body
        owner = Client(portal, source="127.0.0.2")
        assert owner.login("ann").status == 303 and owner.get("/").status == 200
        # The guesser's address has used 5 of its 20: another account logs in from it.
        assert Client(portal, source="127.0.0.1").login("bob").status == 303
        for i in range(16):  # one more than the 20 (the bucket drains 1 per 15 s meanwhile)
            guesser.login(f"nobody{i}", "guess")
        assert guesser.login("bob").status == 429  # 20 failures from one address, any names


@pytest.mark.parametrize("trusted", [False, True])
def test_forwarded_for_is_believed_only_from_trusted_proxies(tmp_path: Path, trusted: bool) -> None:
    extra = 'trusted_proxies = ["127.0.0.1"]\n' if trusted else ""
    with serving(Portal(tmp_path, portal_extra=extra)) as portal:
        client = Client(portal)
        assert client.login("ann", headers={"X-Forwarded-For": "203.0.113.7"}).status == 303
        # Six failures, each claiming another address: one address's throttle, unless believed.
        for i in range(5):
            client.login("bob", "guess", headers={"X-Forwarded-For": f"198.51.100.{i}"})
        sixth = client.login("bob", "guess", headers={"X-Forwarded-For": "198.51.100.1"})
        other = client.login("bob", "guess", headers={"X-Forwarded-For": "198.51.100.99"})
    (login,) = portal.actions("login")
    failed = {r["source"] for r in portal.actions("login_failed")}
    if trusted:
        assert login["source"] == "203.0.113.7"
        assert sixth.status == 401 and other.status == 401  # each claimed address has its own count
        assert failed == {f"198.51.100.{i}" for i in (0, 1, 2, 3, 4, 99)}
    else:
        assert login["source"] == "127.0.0.1"
        assert sixth.status == 429 and other.status == 429  # the real address is the key
        assert failed == {"127.0.0.1"}
