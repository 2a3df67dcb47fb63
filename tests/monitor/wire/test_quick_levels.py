"""The quick levels decoder parses each payload once, whichever way the message then goes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from monitor.errors import DecodeError
from monitor.wire.codec import decode
from monitor.wire.quick_levels import Parsed, predecode
from rules.model import SoundLevels
from tests.support.wire_samples import DEFAULT_LIMITS, LEVELS, NOW, SITES, P

TOPIC = f"{P}/sensors/n1/levels"


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Counts the parses of a payload (orjson's and the strict json one), by wrapping both."""
    calls: list[str] = []
    real_orjson, real_json = orjson.loads, json.loads

    def counted_orjson(data: Any) -> Any:
        calls.append("orjson")
        return real_orjson(data)

    def counted_json(text: Any, **kwargs: Any) -> Any:
        calls.append("json")
        return real_json(text, **kwargs)

    monkeypatch.setattr(orjson, "loads", counted_orjson)
    monkeypatch.setattr(json, "loads", counted_json)
    yield calls


def _reason(payload: bytes, ahead: Parsed | None = None) -> str:
    with pytest.raises(DecodeError) as caught:
        decode(TOPIC, payload, SITES, NOW, DEFAULT_LIMITS, None, "minewatch", ahead)
    return str(caught.value)


MISSES = {  # levels payloads the quick path leaves to the full decoder
    "unknown field": json.dumps({**LEVELS, "extra": 1}).encode(),
    "a string level": json.dumps({**LEVELS, "LAeq": "72.4"}).encode(),
    "LAFmax below LAeq": json.dumps({**LEVELS, "LAFmax": 1.0}).encode(),
    "not a time": json.dumps({**LEVELS, "ts": "yesterday"}).encode(),
    "a list": b"[1, 2]",
}


@pytest.mark.parametrize("name", MISSES)
def test_a_payload_missing_the_quick_path_is_parsed_once(name: str, parses: list[str]) -> None:
    payload = MISSES[name]
    alone = _reason(payload)
    # decode() alone: once (it was twice, and three times after the network thread)
    assert parses == ["orjson"], name
    parses.clear()
    ahead = predecode(payload, "dovre-north", "n1", DEFAULT_LIMITS.max_payload_bytes)
    assert isinstance(ahead, Parsed)
    assert _reason(payload, ahead) == alone  # the same rejection, from what was parsed ahead
    assert parses == ["orjson"], name  # ahead in the network thread, then not again


def test_what_orjson_refuses_is_parsed_strictly_once_to_name_the_reason(parses: list[str]) -> None:
    payload = b'{"ts": "2026-06-15T12:00:00Z", "LAeq": NaN}'
    alone = _reason(payload)
    assert parses == ["orjson", "json"]
    parses.clear()
    ahead = predecode(payload, "dovre-north", "n1", DEFAULT_LIMITS.max_payload_bytes)
    assert ahead == Parsed(None, ok=False)
    assert _reason(payload, ahead) == alone and "NaN is not allowed" in alone
    assert parses == ["orjson", "json"]


def test_the_quick_path_is_one_parse(parses: list[str]) -> None:
    payload = json.dumps(LEVELS).encode()
    levels = decode(TOPIC, payload, SITES, NOW, DEFAULT_LIMITS)
    assert isinstance(levels, SoundLevels) and parses == ["orjson"]
