"""Login throttling for the portal: per (name, address) with growing waits, and per address.

An address is counted as ``address_key`` says (an IPv6 client: its /64) and, for IPv6, its /48
as well (``prefix_key``, PREFIX_FACTOR times the one address's cap): the one place the login
limiter, the complaint limit and the connection cap take their units from.

Pure but for the lock: the clock is passed in, so the tests drive time.
"""

from __future__ import annotations

import ipaddress
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

ADDRESS_FACTOR = 4  # failures per address within the window: this many times login_attempts
BASE_DELAY_S = 10.0  # the first wait once a (name, address) has used its free attempts; doubles
MAX_ENTRIES = 4096  # per table (pairs, addresses, prefixes): least recently failed forgotten first
# One IPv6 subscriber is usually given a /56 or a /48 (256 or 65,536 /64s), so a cap per /64 alone
# is multiplied as many times: every /48 is capped as a whole too, at this many times one /64's cap
# (room for a household's or an office's few subnets; one ISP's customers given /56s out of one
# /48 share it).
PREFIX_BITS = 48
PREFIX_FACTOR = 8


def address_key(address: str) -> str:
    """The unit an address is limited as: an IPv6 client owns its whole /64 (one host picks
    among 2**64 addresses), an IPv4 client its address."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


def prefix_key(address: str) -> str | None:
    """The /48 an IPv6 client's /64 lies in, limited as a whole at PREFIX_FACTOR times one
    address's cap; None for an IPv4 client (written as ``::ffff:a.b.c.d`` too) and a name."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return None
    if not isinstance(ip, ipaddress.IPv6Address) or ip.ipv4_mapped is not None:
        return None
    return str(ipaddress.ip_network(f"{ip}/{PREFIX_BITS}", strict=False))


class LoginLimiter:
    """Failed logins throttled per (name, client address) and per address; ``clock`` drives it.

    A (name, address) pair has ``attempts`` free failures; then each attempt waits BASE_DELAY_S,
    doubling with every further failure, up to ``window_s``. So guessing one password from one
    address slows to one try per window, while the account's owner from another address is not
    held back at all. An address also gets ADDRESS_FACTOR x ``attempts`` failures (any names)
    at once, then one more each ``window_s`` / that (a leaky bucket draining over ``window_s``),
    so one address cannot try many names; colleagues behind one NAT address are not locked out
    by one typo. An IPv6 client's /48 (prefix_key) has such a bucket too, PREFIX_FACTOR times
    larger and draining as fast in proportion, and a (name, /48) pair PREFIX_FACTOR x
    ``attempts`` free failures, so the /64s of one subscriber do not each bring theirs. The
    tables are bounded: a pair is forgotten a quiet window after its wait ends, an
    address or prefix when its bucket is empty, and beyond MAX_ENTRIES the least recently
    failed goes first.
    """

    def __init__(
        self,
        attempts: int,
        window_s: float,
        clock: Callable[[], float] = time.monotonic,
        max_entries: int = MAX_ENTRIES,
    ) -> None:
        self.attempts = attempts
        self.window_s = window_s
        self.clock = clock
        self.max_entries = max_entries
        self._pairs: OrderedDict[tuple[str, str], tuple[int, float]] = OrderedDict()  # failures, last
        self._prefix_pairs: OrderedDict[tuple[str, str], tuple[int, float]] = OrderedDict()  # (name, /48)
        self._addresses: OrderedDict[str, tuple[float, float]] = OrderedDict()  # bucket level, when
        self._prefixes: OrderedDict[str, tuple[float, float]] = OrderedDict()  # the same per /48
        self._per_address = attempts * ADDRESS_FACTOR
        self._per_prefix = self._per_address * PREFIX_FACTOR
        self._lock = threading.Lock()

    def delay(self, failures: int, free: int | None = None) -> float:
        """How long after its last failure a pair with ``failures`` may try again, ``free`` of
        them free (``attempts`` for a (name, address) pair)."""
        free = self.attempts if free is None else free
        if failures < free:
            return 0.0
        return min(self.window_s, BASE_DELAY_S * 2.0 ** min(failures - free, 32))

    def _level(self, bucket: tuple[float, float], now: float, capacity: float) -> float:
        """A bucket's level now: it drains ``capacity`` over ``window_s``."""
        level, since = bucket
        return max(0.0, level - (now - since) * capacity / self.window_s)

    def __len__(self) -> int:
        return len(self._pairs) + len(self._prefix_pairs) + len(self._addresses) + len(self._prefixes)

    def _pair_tables(
        self, name: str, address: str
    ) -> list[tuple[OrderedDict[tuple[str, str], tuple[int, float]], tuple[str, str], int]]:
        """(table, key, free failures) of each (name, address) pair a failure counts in."""
        found = [(self._pairs, (name, address_key(address)), self.attempts)]
        prefix = prefix_key(address)
        if prefix is not None:
            found.append((self._prefix_pairs, (name, prefix), self.attempts * PREFIX_FACTOR))
        return found

    def _buckets(self, address: str) -> list[tuple[OrderedDict[str, tuple[float, float]], str, float]]:
        """(table, key, capacity) of each bucket a failure from ``address`` fills."""
        found = [(self._addresses, address_key(address), float(self._per_address))]
        prefix = prefix_key(address)
        if prefix is not None:
            found.append((self._prefixes, prefix, float(self._per_prefix)))
        return found

    def _expire(self, now: float) -> None:
        # Least recently failed first: stop at the first entry still in use (amortised O(1)).
        for pairs, free in (
            (self._pairs, self.attempts),
            (self._prefix_pairs, self.attempts * PREFIX_FACTOR),
        ):
            while pairs:
                failures, last = next(iter(pairs.values()))
                if now < last + self.delay(failures, free) + self.window_s and len(pairs) <= self.max_entries:
                    break
                pairs.popitem(last=False)
        for table, capacity in ((self._addresses, self._per_address), (self._prefixes, self._per_prefix)):
            while table:
                oldest = next(iter(table.values()))
                if self._level(oldest, now, capacity) > 0 and len(table) <= self.max_entries:
                    break
                table.popitem(last=False)

    def blocked(self, name: str, address: str) -> float:
        """Seconds until another attempt is allowed (0: allowed now)."""
        now = self.clock()
        with self._lock:
            self._expire(now)
            wait = 0.0
            for pairs, pair_key, free in self._pair_tables(name, address):
                pair = pairs.get(pair_key)
                if pair is not None:
                    wait = max(wait, pair[1] + self.delay(pair[0], free) - now)
            for table, key, capacity in self._buckets(address):
                bucket = table.get(key)
                if bucket is not None:
                    over = self._level(bucket, now, capacity) - (capacity - 1)
                    wait = max(wait, over * self.window_s / capacity)
            return max(wait, 0.0)

    def failed(self, name: str, address: str) -> None:
        now = self.clock()
        with self._lock:
            for pairs, key, _ in self._pair_tables(name, address):
                failures = pairs.pop(key, (0, now))[0] + 1
                pairs[key] = (failures, now)
            for table, bucket_key, capacity in self._buckets(address):
                bucket = table.pop(bucket_key, (0.0, now))
                table[bucket_key] = (self._level(bucket, now, capacity) + 1, now)
            self._expire(now)

    def succeeded(self, name: str, address: str) -> None:
        with self._lock:
            for pairs, key, _ in self._pair_tables(name, address):
                pairs.pop(key, None)
