"""The event forms' numbers (monitor.portal.pages.event_payload): each refusal names its field.

A browser's number field never sends nan or inf, but a script posting the form can, and float()
takes them: the payload then went out with a NaN that JSON has not, refused for no field
(payload: NaN is not allowed (values must be finite numbers))."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest
from starlette.datastructures import FormData

from monitor.portal.data import Refused
from monitor.portal.pages import event_payload

NOW = datetime(2026, 6, 15, 12, tzinfo=UTC)
ZONE = ZoneInfo("America/Chicago")
NOTICE = {"blast_id": "B-1", "planned": "2026-06-16T10:00", "distance_ft": "1000"}


@pytest.mark.parametrize(
    ("kind", "fields", "expected"),
    [
        (
            "blast-notice",
            {"charge_per_delay_lb": "nan"},
            "charge_per_delay_lb: expected a finite number, got 'nan'",
        ),
        (
            "blast-notice",
            {"charge_per_delay_lb": "-inf"},
            "charge_per_delay_lb: expected a finite number, got '-inf'",
        ),
        (
            "blast-notice",
            {"charge_per_delay_lb": "1e999"},
            "charge_per_delay_lb: expected a finite number, got '1e999'",
        ),
        (
            "blast-notice",
            {"charge_per_delay_lb": "lots"},
            "charge_per_delay_lb: expected a number, got 'lots'",
        ),
        (
            "blast",
            {"blast_id": "B-1", "charge_kg": "Infinity"},
            "charge_kg: expected a finite number, got 'Infinity'",
        ),
        (
            "blast",
            {"blast_id": "B-1", "overpressure_db": "9" * 400},
            f"overpressure_db: expected a finite number, got '{'9' * 40}'... (400 characters)",
        ),
    ],
)
def test_a_number_no_json_holds_is_refused_by_its_field(
    kind: str, fields: dict[str, str], expected: str
) -> None:
    form = FormData({**(NOTICE if kind == "blast-notice" else {}), **fields})
    with pytest.raises(Refused) as info:
        event_payload(kind, form, ZONE, NOW)
    assert str(info.value) == expected


def test_finite_numbers_go_into_the_payload() -> None:
    payload = event_payload("blast-notice", FormData({**NOTICE, "charge_per_delay_lb": "220.5"}), ZONE, NOW)
    assert (payload["charge_per_delay_lb"], payload["distance_ft"]) == (220.5, 1000.0)
