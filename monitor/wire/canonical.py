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


# What a lone UTF-16 surrogate is, in the words every refusal of one uses.
HALF_PAIR = "not text: half of a UTF-16 surrogate pair (a \\ud800-\\udfff escape without its other half)"


def half_pair_at(value: Any) -> tuple[str, str] | None:
    """(where, what) when parsed JSON holds a string that is not text, else None.

    ``json.loads`` takes a ``"\\ud800"`` escape alone (orjson refuses it), which no UTF-8 output
    can hold: stored or printed, it fails there. ``where`` names the place (``site.id``,
    ``recipients[1]``; ``""``: the value itself), ``what`` says what is wrong there.
    """
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, str):
            if not _is_text(item):
                return where, HALF_PAIR
        elif isinstance(item, dict):
            for key, inner in item.items():
                if isinstance(key, str) and not _is_text(key):
                    return where, f"a field's name is {HALF_PAIR}"
                stack.append((f"{where}.{key}" if where else str(key), inner))
        elif isinstance(item, list):
            stack.extend((f"{where}[{i}]", inner) for i, inner in enumerate(item))
    return None


def _is_text(value: str) -> bool:
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
