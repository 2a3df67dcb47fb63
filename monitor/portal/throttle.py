"""Login throttling for the portal: per (name, address) with growing waits, and per address.

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
MAX_ENTRIES = 4096  # per table (pairs, addresses): least recently failed forgotten first


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


class LoginLimiter:
    """Failed logins throttled per (name, client address) and per address; ``clock`` drives it.

    A (name, address) pair has ``attempts`` free failures; then each attempt waits BASE_DELAY_S,
    doubling with every further failure, up to ``window_s``. So guessing one password from one
    address slows to one try per window, while the account's owner from another address is not
    held back at all. An address also gets ADDRESS_FACTOR x ``attempts`` failures (any names)
    at once, then one more each ``window_s`` / that (a leaky bucket draining over ``window_s``),
    so one address cannot try many names; colleagues behind one NAT address are not locked out
    by one typo. Both tables are bounded: a pair is forgotten a quiet window after its wait
    ends, an address when its bucket is empty, and beyond MAX_ENTRIES the least recently
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
        self._addresses: OrderedDict[str, tuple[float, float]] = OrderedDict()  # bucket level, when
        self._per_address = attempts * ADDRESS_FACTOR
        self._lock = threading.Lock()

    def delay(self, failures: int) -> float:
        """How long after its last failure a pair with ``failures`` may try again."""
        if failures < self.attempts:
            return 0.0
        return min(self.window_s, BASE_DELAY_S * 2.0 ** min(failures - self.attempts, 32))

    def _level(self, address: tuple[float, float], now: float) -> float:
        level, since = address
        return max(0.0, level - (now - since) * self._per_address / self.window_s)

    def __len__(self) -> int:
        return len(self._pairs) + len(self._addresses)

    def _expire(self, now: float) -> None:
        # Least recently failed first: stop at the first entry still in use (amortised O(1)).
        while self._pairs:
            failures, last = next(iter(self._pairs.values()))
            if now < last + self.delay(failures) + self.window_s and len(self._pairs) <= self.max_entries:
                break
            self._pairs.popitem(last=False)
        while self._addresses:
            oldest = next(iter(self._addresses.values()))
            if self._level(oldest, now) > 0 and len(self._addresses) <= self.max_entries:
                break
            self._addresses.popitem(last=False)

    def blocked(self, name: str, address: str) -> float:
        """Seconds until another attempt is allowed (0: allowed now)."""
        now = self.clock()
        with self._lock:
            self._expire(now)
            wait = 0.0
            pair = self._pairs.get((name, address_key(address)))
            if pair is not None:
                wait = pair[1] + self.delay(pair[0]) - now
            bucket = self._addresses.get(address_key(address))
            if bucket is not None:
                over = self._level(bucket, now) - (self._per_address - 1)
                wait = max(wait, over * self.window_s / self._per_address)
            return max(wait, 0.0)

    def failed(self, name: str, address: str) -> None:
        now = self.clock()
        key = address_key(address)
        with self._lock:
            failures = self._pairs.pop((name, key), (0, now))[0] + 1
            self._pairs[(name, key)] = (failures, now)
            bucket = self._addresses.pop(key, (0.0, now))
            self._addresses[key] = (self._level(bucket, now) + 1, now)
            self._expire(now)

    def succeeded(self, name: str, address: str) -> None:
        with self._lock:
            self._pairs.pop((name, address_key(address)), None)
