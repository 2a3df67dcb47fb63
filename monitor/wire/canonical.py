"""The one canonical JSON form and the one microsecond conversion (standard library only).

Everything hashed, signed or compared as bytes goes through ``canonical_json``: wire signatures,
chain digests, notice and delivery records. Stored ``data`` columns are the same form with
``ascii=True`` (how they have always been written: the text is part of chained records, so
it must never change). Times are stored as integer microseconds since the epoch; ``to_us``
is exact integer arithmetic (a float timestamp can be off by one microsecond before rounding).
This module imports nothing from minewatch: the evidence verifier a town runs uses it.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)


def canonical_text(value: Any, *, ascii: bool = False) -> str:
    """Sorted keys, no spaces; non-JSON values (datetimes, enums) as str()."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=ascii, default=str)


def canonical_json(value: Any, *, ascii: bool = False) -> bytes:
    return canonical_text(value, ascii=ascii).encode()


def to_us(ts: datetime) -> int:
    """Microseconds since the epoch of an aware datetime, exactly."""
    return (ts - EPOCH) // _US


def from_us(us: int) -> datetime:
    return EPOCH + timedelta(microseconds=us)
