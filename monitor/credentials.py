"""Passwords and API tokens: how they are stored, checked and what a stored hash must be.

Passwords: scrypt (memory-hard; hashlib, no extra dependency), stored as
``scrypt$n$r$p$salt_hex$hash_hex``. API tokens are long random strings, so a plain SHA-256
is enough to store them (``sha256$hex``): nobody can guess one from its hash. Standard library
only: the configuration check, `minewatch hash-password` and the portal all use it.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import secrets

SCRYPT_N, SCRYPT_R, SCRYPT_P = 2**14, 8, 1  # 16 MiB per hash
# The longest password a person can log in with: the login form's body (8 KB, the portal's
# limits.SMALL) carries it URL-encoded, up to 12 characters for each (4 UTF-8 bytes as %XX), and
# 512 such leave room for the other fields. `hash-password` refuses a longer one, which no login
# could ever send.
MAX_PASSWORD_CHARS = 512
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
