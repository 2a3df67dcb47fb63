"""The minute-closing decision (monitor/daemon/minute_closing.py): pure, so every case is a plain call."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from monitor.daemon.minute_closing import EVALUATION_DELAY, closed_until, is_late, is_quiet

NOW = datetime(2026, 6, 15, 17, 30, tzinfo=UTC)
LATENESS = timedelta(seconds=300)


def ago(seconds: float) -> datetime:
    return NOW - timedelta(seconds=seconds)


def test_nothing_closes_before_any_data() -> None:
    assert closed_until(None, None, NOW, LATENESS, quiet=False) is None


def test_in_real_time_minutes_close_a_few_seconds_behind_the_data() -> None:
    assert closed_until(ago(1), ago(1), NOW, LATENESS, quiet=False) == ago(1) - EVALUATION_DELAY


def test_a_backlog_closes_minutes_where_it_has_got_to_not_at_the_wall_clock() -> None:
    # Nine minutes behind (a daemon outage): the wall clock must not run ahead of the data.
    closed = closed_until(ago(540), ago(540), NOW, LATENESS, quiet=False)
    assert closed == ago(540) - EVALUATION_DELAY
    # However long the outage the broker held.
    closed = closed_until(ago(86_400), ago(86_400), NOW, LATENESS, quiet=False)
    assert closed == ago(86_400) - EVALUATION_DELAY


def test_a_silent_site_follows_the_stream_by_the_lateness_in_data_time() -> None:
    # Site silent for an hour of data while the stream (other sites) is 9 minutes behind.
    closed = closed_until(ago(3600), ago(540), NOW, LATENESS, quiet=False)
    assert closed == ago(540) - LATENESS - EVALUATION_DELAY


def test_quiet_closes_everything_up_to_now() -> None:
    assert closed_until(ago(540), ago(540), NOW, LATENESS, quiet=True) == NOW - EVALUATION_DELAY
    assert closed_until(None, None, NOW, LATENESS, quiet=True) == NOW - EVALUATION_DELAY


def test_data_ahead_of_the_clock_does_not_close_the_future() -> None:
    ahead = NOW + timedelta(seconds=100)  # a sensor clock running fast, within the skew allowed
    assert closed_until(ahead, ahead, NOW, LATENESS, quiet=False) == NOW - EVALUATION_DELAY


@pytest.mark.parametrize(
    ("minute_ago", "site_newest_ago", "late"),
    [
        (600, 600 - 60 - 1, False),  # the next second after the minute: a backlog in order
        (600, 600 - 60 - 300, False),  # exactly the lateness past it
        (600, 600 - 60 - 301, True),  # the site's own data moved on more than the lateness
        (600, 0, True),
    ],
)
def test_late_is_measured_against_the_sites_own_data(
    minute_ago: int, site_newest_ago: int, late: bool
) -> None:
    minute = ago(minute_ago)
    assert is_late(minute, ago(site_newest_ago), NOW, LATENESS) is late


def test_nothing_is_late_before_the_site_has_data() -> None:
    assert not is_late(ago(86_400), None, NOW, LATENESS)


def quiet(**kw: float | int | bool | None) -> bool:
    args: dict[str, Any] = {
        "site_silent_s": 11.0,
        "input_silent_s": 11.0,
        "connected_s": 60.0,
        "pending": 0,
        "live": False,
        "quiet_s": 10.0,
    }
    args.update(kw)
    return is_quiet(**args)


def test_silence_with_the_broker_connected_and_nothing_coming_is_quiet() -> None:
    assert quiet()


def test_silence_proves_nothing_while_the_broker_may_hold_the_data() -> None:
    assert not quiet(connected_s=None)  # not connected
    assert not quiet(connected_s=3.0)  # just connected: the queued backlog is on its way
    assert not quiet(pending=10)  # messages in hand
    assert not quiet(site_silent_s=2.0)
    # Other sites' backlog still arriving, behind real time: this site's may be further on in it.
    assert not quiet(input_silent_s=0.5, live=False)


def test_a_silent_site_among_live_ones_is_quiet() -> None:
    assert quiet(input_silent_s=0.5, live=True)
