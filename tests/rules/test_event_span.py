"""One reading of an event's times (rules.model.event_span), for every event type: what the
store's row keeps, the time of InfluxDB's point and the minutes the daemon judges again."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from rules.model import (
    Blast,
    BlastNotice,
    Event,
    EventSpan,
    GenericEvent,
    TemporaryLighting,
    TruckPassage,
    WorkKind,
    WorkPeriod,
    event_span,
)

T0 = datetime(2026, 6, 15, 17, 0, tzinfo=UTC)
LATER = T0 + timedelta(hours=26)


@pytest.mark.parametrize(
    ("event", "span"),
    [
        # On record from its issue; it happens (and is over) at the blast it announces.
        (BlastNotice("q", "b-7", T0, LATER), EventSpan(T0, LATER, LATER)),
        (Blast("q", "b-7", T0), EventSpan(T0, T0, None)),
        (TruckPassage("q", "t-1", T0, "north", "in"), EventSpan(T0, T0, None)),
        (WorkPeriod("q", "w-1", T0, LATER, WorkKind.REPAIR), EventSpan(T0, T0, LATER)),
        (TemporaryLighting("q", "l-1", T0, LATER), EventSpan(T0, T0, LATER)),
        (GenericEvent("q", "g-1", "slope-exposed", T0), EventSpan(T0, T0, None)),
    ],
)
def test_each_event_type_has_its_span(event: Event, span: EventSpan) -> None:
    assert event_span(event) == span


def test_until_is_the_end_or_the_moment_of_an_instant() -> None:
    assert event_span(Blast("q", "b-7", T0)).until == T0
    assert event_span(WorkPeriod("q", "w-1", T0, LATER, WorkKind.REPAIR)).until == LATER
    assert event_span(BlastNotice("q", "b-7", T0, LATER)).until == LATER
