"""Passwords, API tokens and login rate limits for the portal.

Passwords: scrypt (memory-hard; hashlib, no extra dependency), stored as
``scrypt$n$r$p$salt_hex$hash_hex``. API tokens are long random strings, so a plain SHA-256
is enough to store them (``sha256$hex``): nobody can guess one from its hash.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import ipaddress
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

SCRYPT_N, SCRYPT_R, SCRYPT_P = 2**14, 8, 1  # 16 MiB per hash
_SCRYPT_MAXMEM = 64 * 1024 * 1024


def hash_password(password: str, *, n: int = SCRYPT_N, r: int = SCRYPT_R, p: int = SCRYPT_P) -> str:
    salt = secrets.token_bytes(16)
    digest = hashlib.scrypt(password.encode(), salt=salt, n=n, r=r, p=p, maxmem=_SCRYPT_MAXMEM, dklen=32)
    return f"scrypt${n}${r}${p}${salt.hex()}${digest.hex()}"


def scrypt_problem(stored: str) -> str:
    """Why ``stored`` is not a password hash the portal accepts ('' when it is): malformed, or
    scrypt parameters weaker than those `hash-password` uses (a weak hash is cheap to crack once
    read), or heavier than a login may compute (the account could never log in)."""
    parts = stored.split("$")
    if len(parts) != 6 or parts[0] != "scrypt":
        return "expected a hash from `minewatch hash-password` (scrypt$...)"
    try:
        n, r, p = (int(x) for x in parts[1:4])
        salt, digest = bytes.fromhex(parts[4]), bytes.fromhex(parts[5])
    except ValueError:
        return "malformed: n, r and p must be whole numbers, salt and hash hexadecimal"
    if n < SCRYPT_N or r < SCRYPT_R or p < SCRYPT_P:
        return (
            f"scrypt parameters n={n}, r={r}, p={p} are weaker than n={SCRYPT_N}, r={SCRYPT_R},"
            f" p={SCRYPT_P}: make a new hash with `minewatch hash-password`"
        )
    if n & (n - 1):
        return f"scrypt n must be a power of 2, got {n}"
    if 128 * r * (n + p + 2) > _SCRYPT_MAXMEM:
        return f"scrypt parameters n={n}, r={r}, p={p} need more than {_SCRYPT_MAXMEM >> 20} MiB per login"
    if len(salt) < 16 or len(digest) < 16:
        return "malformed: the salt and the hash must be at least 16 bytes each"
    return ""


def check_password(password: str, stored: str) -> bool:
    try:
        scheme, n, r, p, salt, digest = stored.split("$")
        if scheme != "scrypt":
            return False
        got = hashlib.scrypt(
            password.encode(),
            salt=bytes.fromhex(salt),
            n=int(n),
            r=int(r),
            p=int(p),
            maxmem=_SCRYPT_MAXMEM,
            dklen=len(bytes.fromhex(digest)),
        )
    except (ValueError, MemoryError):
        return False
    return hmac.compare_digest(got.hex(), digest)


def new_token() -> str:
    return "mw_" + secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    return "sha256$" + hashlib.sha256(token.encode()).hexdigest()


def check_token(token: str, stored: str) -> bool:
    return bool(stored) and hmac.compare_digest(hash_token(token), stored)


@functools.cache
def dummy_hash() -> str:
    """A hash to check against when the name is unknown, so a wrong name costs the same time
    (made on first use: importing this module for the configuration check costs no scrypt)."""
    return hash_password(secrets.token_hex(8))


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
