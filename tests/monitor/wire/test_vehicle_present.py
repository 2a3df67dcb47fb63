"""The vehicle-present event (6.C.3 "except on vehicles"): a profile-listed kind the wire checks."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from monitor.errors import DecodeError
from monitor.wire.codec import decode, encode
from rules.model import VEHICLE_PRESENT, GenericEvent, VehiclePresence
from tests.support.wire_samples import DEFAULT_LIMITS, NOW, SITES, P

TOPIC = f"{P}/events/{VEHICLE_PRESENT}"
KINDS = {"dovre-north": frozenset({VEHICLE_PRESENT})}
ARRIVED = {"id": "vp-1", "ts": "2026-06-15T11:50:00Z"}


def dec(payload: dict[str, Any]) -> Any:
    return decode(TOPIC, json.dumps(payload).encode(), SITES, NOW, DEFAULT_LIMITS, KINDS)


def test_vehicle_present_round_trips_to_its_typed_view() -> None:
    payload = {
        **ARRIVED,
        "end": "2026-06-15T11:53:00Z",
        "gate": "g1",
        "sensors": ["l1"],
        "description": "T-17",
    }
    event = dec(payload)
    assert isinstance(event, GenericEvent) and event.kind == VEHICLE_PRESENT
    seen = VehiclePresence.from_event(event)
    assert seen.gate == "g1" and seen.sensors == ("l1",) and seen.description == "T-17"
    assert seen.start == datetime(2026, 6, 15, 11, 50, tzinfo=UTC)
    assert seen.end == datetime(2026, 6, 15, 11, 53, tzinfo=UTC)
    topic, body = encode(event)
    assert topic == TOPIC and dec(json.loads(body)) == event


def test_vehicle_present_at_a_gate_only() -> None:
    seen = VehiclePresence.from_event(dec({**ARRIVED, "gate": "g1"}))
    assert (seen.gate, seen.sensors, seen.end) == ("g1", (), None)


# fmt: off
VEHICLE_PRESENT_ERRORS = [
    ({**ARRIVED}, "gate", "needs a gate or sensors"),
    ({**ARRIVED, "gate": "g9"}, "gate", "gate 'g9' is not configured"),
    ({**ARRIVED, "sensors": ["l9"]}, "sensors", "sensor l9 is not configured"),
    ({**ARRIVED, "gate": "g1", "end": "2026-06-15T11:49:59Z"}, "end", "must not be before ts"),
    ({**ARRIVED, "gate": "g1", "end": "2026-06-16T11:50:01Z"}, "end", "at most one day"),
    ({**ARRIVED, "gate": "g1", "colour": "amber"}, "colour", "unknown field"),
]
# fmt: on


@pytest.mark.parametrize(("payload", "field", "reason"), VEHICLE_PRESENT_ERRORS)
def test_vehicle_present_errors_name_the_field(payload: dict[str, Any], field: str, reason: str) -> None:
    with pytest.raises(DecodeError) as info:
        dec(payload)
    assert field in str(info.value) and reason in str(info.value)
