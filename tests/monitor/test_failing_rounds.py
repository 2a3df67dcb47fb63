"""A task failing round after round is said once, again every remind_s, and once when it works."""

from __future__ import annotations

import logging

import pytest

from monitor.failing_rounds import FailingRounds


def test_a_failure_lasting_many_rounds_is_said_once_then_every_reminder(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [0.0]
    rounds = FailingRounds(logging.getLogger("test"), "WAL checkpoint", remind_s=600, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, "test"):
        for second in range(0, 1300):  # a round a second for 21 minutes
            now[0] = float(second)
            rounds.failed(OSError("database or disk is full"))
        rounds.worked()
        rounds.worked()  # working on: nothing more to say
    assert [r.getMessage() for r in caplog.records] == [
        "WAL checkpoint failed: database or disk is full (tried again every round)",
        "WAL checkpoint still fails after 600 s: database or disk is full",
        "WAL checkpoint still fails after 1200 s: database or disk is full",
        "WAL checkpoint works again, after 1299 s",
    ]
    caplog.clear()
    rounds.failed(OSError("disk I/O error"))  # a new failure is said at once
    assert [r.getMessage() for r in caplog.records] == [
        "WAL checkpoint failed: disk I/O error (tried again every round)"
    ]
