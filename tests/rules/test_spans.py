"""How a span of time reads: both ends and a length that their difference gives (issue 25)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from rules.times import duration_text, span_text

CHICAGO = "America/Chicago"
T0 = datetime(2026, 11, 30, 23, 2, tzinfo=UTC)  # 17:02 CST


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0 seconds"),
        (45, "45 seconds"),
        (60, "1 minute"),
        (90, "1 minute 30 seconds"),
        (360, "6 minutes"),
        (7500, "2 hours 5 minutes"),
        (3600, "1 hour"),
    ],
)
def test_duration_text(seconds: float, text: str) -> None:
    assert duration_text(seconds) == text


def test_a_span_names_both_ends_and_the_length_they_give() -> None:
    assert span_text(T0, T0 + timedelta(minutes=6), CHICAGO) == "17:02-17:08 CST (6 minutes)"


def test_a_span_off_the_minute_shows_seconds() -> None:
    start = T0 + timedelta(seconds=21)
    text = span_text(start, start + timedelta(minutes=11, seconds=17), CHICAGO)
    assert text == "17:02:21-17:13:38 CST (11 minutes 17 seconds)"


def test_a_span_across_midnight_or_asked_for_dates_gives_them() -> None:
    late = datetime(2026, 12, 1, 5, 50, tzinfo=UTC)  # 23:50 CST on 30 November
    assert span_text(late, late + timedelta(minutes=20), CHICAGO) == (
        "2026-11-30 23:50 CST to 2026-12-01 00:10 CST (20 minutes)"
    )
    assert span_text(T0, T0 + timedelta(minutes=1), CHICAGO, with_date=True) == (
        "2026-11-30 17:02 CST to 2026-11-30 17:03 CST (1 minute)"
    )
