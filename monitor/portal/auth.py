"""Passwords, API tokens and login rate limits for the portal.

Passwords: scrypt (memory-hard; hashlib, no extra dependency), stored as
``scrypt$n$r$p$salt_hex$hash_hex``. API tokens are long random strings, so a plain SHA-256
is enough to store them (``sha256$hex``): nobody can guess one from its hash.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable

SCRYPT_N, SCRYPT_R, SCRYPT_P = 2**14, 8, 1  # 16 MiB per hash
_SCRYPT_MAXMEM = 64 * 1024 * 1024


def hash_password(password: str, *, n: int = SCRYPT_N, r: int = SCRYPT_R, p: int = SCRYPT_P) -> str:
    salt = secrets.token_bytes(16)
    digest = hashlib.scrypt(password.encode(), salt=salt, n=n, r=r, p=p, maxmem=_SCRYPT_MAXMEM, dklen=32)
    return f"scrypt${n}${r}${p}${salt.hex()}${digest.hex()}"


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


# A hash to check against when the name is unknown, so a wrong name costs the same time.
DUMMY_HASH = hash_password(secrets.token_hex(8), n=SCRYPT_N)


ADDRESS_FACTOR = 4


class LoginLimiter:
    """At most ``attempts`` failed logins per name, and ADDRESS_FACTOR times that per address,
    within ``window_s``: guessing one account's password is slow, and so is trying many accounts
    from one address, while colleagues behind one NAT address are not locked out by one typo."""

    def __init__(self, attempts: int, window_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.attempts = attempts
        self.window_s = window_s
        self.clock = clock
        self._failures: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def _recent(self, key: str, now: float) -> deque[float]:
        failures = self._failures.setdefault(key, deque())
        while failures and failures[0] <= now - self.window_s:
            failures.popleft()
        return failures

    def blocked(self, name: str, address: str) -> float:
        """Seconds until another attempt is allowed (0: allowed now)."""
        now = self.clock()
        with self._lock:
            wait = 0.0
            for key, limit in (
                (f"n:{name}", self.attempts),
                (f"a:{address}", self.attempts * ADDRESS_FACTOR),
            ):
                failures = self._recent(key, now)
                if len(failures) >= limit:
                    wait = max(wait, failures[0] + self.window_s - now)
            return wait

    def failed(self, name: str, address: str) -> None:
        now = self.clock()
        with self._lock:
            for key in (f"n:{name}", f"a:{address}"):
                self._recent(key, now).append(now)

    def succeeded(self, name: str) -> None:
        with self._lock:
            self._failures.pop(f"n:{name}", None)
