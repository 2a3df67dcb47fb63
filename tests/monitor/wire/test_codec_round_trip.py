"""One codec both ways: a record decoded from its payload, stored as its payload, and read back
from the store through the same module (monitor/wire/codec.py) is the record it was."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from monitor.journal.store import event_kind
from monitor.wire.canonical import canonical_text
from monitor.wire.codec import (
    event_from_row,
    finding_from_json,
    finding_to_json,
    payload_of,
    reading_from_row,
)
from rules.model import (
    Finding,
    FindingKind,
    GenericEvent,
    LightSummary,
    Measurement,
    TurbidityReading,
    WeatherReading,
)
from tests.support.wire_samples import P, dec

READINGS = [
    LightSummary("dovre-north", "l1", datetime(2026, 6, 15, 11, 59, tzinfo=UTC), 60.0, 0.4, 0.1, 2.5),
    LightSummary(
        "dovre-north", "l1", datetime(2026, 6, 15, 11, 59, tzinfo=UTC), 1.0, 0.4, 0.1, 2.5, (0.1, 2.5), 100.0
    ),
    WeatherReading("dovre-north", "wx", datetime(2026, 6, 15, 11, 59, tzinfo=UTC), 60.0, 3.25, False),
    WeatherReading("dovre-north", "wx", datetime(2026, 6, 15, 11, 59, tzinfo=UTC), 60.0, 3.25, True, 1.5),
    TurbidityReading("dovre-north", "t1", datetime(2026, 6, 15, 11, 59, tzinfo=UTC), 60.0, 12.5),
]
KINDS = {LightSummary: "light", WeatherReading: "weather", TurbidityReading: "turbidity"}


def _stored(payload: dict[str, Any]) -> str:
    return canonical_text(payload, ascii=True)  # as Store.append_reading / append_event write it


@pytest.mark.parametrize("reading", READINGS, ids=lambda r: type(r).__name__)
def test_a_stored_reading_reads_back_as_the_record(reading: Any) -> None:
    row = {"site": reading.site, "sensor": reading.sensor, "kind": KINDS[type(reading)]}
    assert reading_from_row({**row, "data": _stored(payload_of(reading))}) == reading


EVENTS = {
    "blast-notice": {
        "blast_id": "b1",
        "issued_ts": "2026-06-14T09:00:00Z",
        "planned_ts": "2026-06-15T16:30:00Z",
        "recipients": ["town"],
    },
    "blast": {"blast_id": "b1", "ts": "2026-06-15T11:30:00Z", "safety_reason": "misfire"},
    "truck": {"ts": "2026-06-15T11:30:00Z", "gate": "g1", "direction": "in"},
    "work": {"id": "w1", "start": "2026-06-15T08:00:00Z", "end": "2026-06-15T10:00:00Z", "kind": "repair"},
    "temporary-lighting": {
        "id": "t1",
        "start": "2026-06-15T01:00:00Z",
        "end": "2026-06-15T05:00:00Z",
        "description": "night repair",
    },
}


@pytest.mark.parametrize("kind", EVENTS)
def test_a_stored_event_reads_back_as_the_decoded_event(kind: str) -> None:
    event = dec(f"{P}/events/{kind}", EVENTS[kind])
    assert event_kind(event) == kind  # one kind map, in wire
    assert event_from_row(kind, _stored(payload_of(event)), event.site) == event


def test_a_generic_event_reads_back() -> None:
    event = dec(
        f"{P}/events/slope-exposed",
        {"id": "s1", "ts": "2026-06-15T11:30:00Z", "area_m2": 120.5},
        generic=frozenset({"slope-exposed"}),
    )
    assert isinstance(event, GenericEvent)
    assert event_from_row("slope-exposed", _stored(payload_of(event)), event.site) == event


def test_a_finding_reads_back_from_its_json() -> None:
    start = datetime(2026, 6, 15, 11, 0, tzinfo=UTC)
    finding = Finding(
        "dovre-north",
        "noise",
        "6.D",
        FindingKind.VIOLATION,
        start,
        start + timedelta(minutes=1),
        "America/Chicago",
        "82.5 dB(A) at n1",
        ("n1",),
        (Measurement("LAeq", 82.5, 80.0, "dB(A)"),),
        exemptions=("a truck",),
        completeness=0.9,
    )
    assert finding_from_json(finding_to_json(finding)) == finding


def test_microseconds_are_exact_and_agree_with_what_was_stored() -> None:
    """to_us is integer arithmetic; the float formula the store used before agrees with it on
    the times a store holds (so stored keys and digests are unchanged) but not far out."""
    import random

    from monitor.wire.canonical import from_us, to_us

    rng = random.Random(18)
    for _ in range(20_000):
        us = rng.randrange(946_684_800_000_000, 4_102_444_800_000_000)  # 2000 to 2100
        ts = from_us(us)
        assert to_us(ts) == us == round(ts.timestamp() * 1_000_000)
    far = datetime(9999, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC)
    assert from_us(to_us(far)) == far
    assert round(far.timestamp() * 1_000_000) != to_us(far)  # the float one is off here
