"""The levels message's optional overload flag: absent is false, and the common message is unchanged."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from monitor.errors import DecodeError
from monitor.wire.codec import decode, encode, payload_of
from monitor.wire.quick_levels import Parsed, predecode
from rules.model import SoundLevels
from tests.support.wire_samples import DEFAULT_LIMITS, LEVELS, NOW, SITES, P, dec

TOPIC = f"{P}/sensors/n1/levels"
TS = datetime(2026, 6, 15, 11, 59, tzinfo=UTC)


def test_an_overloaded_period_is_sent_with_the_flag_and_decoded_with_it() -> None:
    levels = SoundLevels("dovre-north", "n1", TS, 1.0, 78.0, 80.5, 99.0, overload=True)
    topic, payload = encode(levels)
    assert json.loads(payload)["overload"] is True
    # Not the quick path (which takes the common message alone), the full decoder.
    assert isinstance(predecode(payload, "dovre-north", "n1", 65536), Parsed)
    assert decode(topic, payload, SITES, NOW, DEFAULT_LIMITS) == levels


def test_a_period_not_overloaded_is_sent_as_it_always_was() -> None:
    levels = SoundLevels("dovre-north", "n1", TS, 1.0, 78.0, 80.5, 99.0)
    assert payload_of(levels) == {
        "ts": "2026-06-15T11:59:00Z",
        "duration_s": 1.0,
        "LAeq": 78.0,
        "LAFmax": 80.5,
        "LCpeak": 99.0,
    }
    _, payload = encode(levels)
    quick = predecode(payload, "dovre-north", "n1", 65536)
    assert quick == levels and quick.overload is False  # the quick path, as before


@pytest.mark.parametrize("value", [False, None])
def test_overload_false_or_null_is_not_overloaded(value: object) -> None:
    assert dec(TOPIC, {**LEVELS, "overload": value}).overload is False


@pytest.mark.parametrize("value", ["true", 1, [True]])
def test_an_overload_that_is_not_a_boolean_is_refused_naming_the_field(value: object) -> None:
    with pytest.raises(DecodeError) as caught:
        dec(TOPIC, {**LEVELS, "overload": value})
    assert (caught.value.field, caught.value.reason) == ("overload", "expected true or false")
