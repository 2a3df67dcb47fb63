"""monitor/daemon/rejections.py: who a rejected message is journaled under; rate-limited log lines.

``LogGate`` reads ``time.monotonic`` itself (there is no clock to inject), so the tests move
that function's answer; the lines are read from the ``minewatch.pipeline`` logger.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest

from monitor.config import SiteConfig, parse_config
from monitor.daemon import rejections
from monitor.daemon.rejections import LOG_GATE_S, MAX_GATES_PER_SENSOR, LogGate, sender_of

T0 = datetime(2026, 6, 15, 17, 0, tzinfo=UTC)

_CONFIG = parse_config(
    """
[[sites]]
id = "q"
timezone = "America/Chicago"
latitude = 45.27
longitude = -91.62
[[sites.sensors]]
id = "n1"
kind = "sound"
[[sites]]
id = "r"
timezone = "America/Chicago"
latitude = 45.28
longitude = -91.63
[[sites.sensors]]
id = "x9"
kind = "sound"
"""
)
SITES: dict[str, SiteConfig] = {s.id: s for s in _CONFIG.sites}


@pytest.mark.parametrize(
    ("topic", "sender"),
    [
        ("minewatch/q/sensors/n1/levels", ("q", "n1")),  # a configured sensor of a configured site
        ("minewatch/q/sensors/n1", ("q", "n1")),  # the wrong shape, still n1's business
        ("minewatch/q/sensors/n1/levels/extra/deeper", ("q", "n1")),
        ("minewatch/q/sensors/fake7/levels", ("q", "")),  # invented names are keys of nothing
        ("minewatch/q/sensors/x9/levels", ("q", "")),  # r's sensor, not q's
        ("minewatch/r/sensors/x9/levels", ("r", "x9")),
        ("minewatch/q/events/blast", ("q", "")),  # a site's events: no sensor
        ("minewatch/q/garbage", ("q", "")),
        ("minewatch/q", ("q", "")),
        ("minewatch/elsewhere/sensors/n1/levels", ("*", "")),  # no configured site
        ("minewatch/_/rejected", ("*", "")),
        ("other/q/sensors/n1/levels", ("*", "")),  # another prefix
        ("minewatch", ("*", "")),
        ("", ("*", "")),
    ],
)
def test_sender_of(topic: str, sender: tuple[str, str]) -> None:
    assert sender_of(topic, "minewatch", SITES) == sender


def test_sender_of_under_another_prefix() -> None:
    assert sender_of("plant7/q/sensors/n1/levels", "plant7", SITES) == ("q", "n1")
    assert sender_of("minewatch/q/sensors/n1/levels", "plant7", SITES) == ("*", "")


class Wall:
    """The monotonic clock LogGate reads, moved by the test."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.now = 1000.0
        monkeypatch.setattr(rejections.time, "monotonic", lambda: self.now)

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def wall(monkeypatch: pytest.MonkeyPatch) -> Wall:
    return Wall(monkeypatch)


def lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "minewatch.pipeline"]


def test_admit_lets_one_line_a_minute_through_and_counts_the_rest(wall: Wall) -> None:
    gate = LogGate()
    key = ("q", "n1", "LAeq")
    assert gate.admit(key) == 0
    assert [gate.admit(key) for _ in range(3)] == [None, None, None]
    assert gate.admit(("q", "n1", "ts")) == 0  # another key has its own minute
    wall.advance(LOG_GATE_S - 0.001)
    assert gate.admit(key) is None
    wall.advance(0.001)
    assert gate.admit(key) == 4  # the lines held back since the last one
    assert gate.admit(key) is None
    wall.advance(LOG_GATE_S)
    assert gate.admit(key) == 1
    assert sorted(gate) == [("q", "n1", "LAeq"), ("q", "n1", "ts")] and len(gate) == 2


def test_a_configured_sensors_rejections_log_a_line_per_field_a_minute(
    wall: Wall, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="minewatch.pipeline")
    gate = LogGate()
    topic = "minewatch/q/sensors/n1/levels"
    for _ in range(3):
        gate.rejection("q", "n1", "LAeq", topic, "LAeq: not a number")
    gate.rejection("q", "n1", "ts", topic, "ts: not a time")
    wall.advance(LOG_GATE_S)
    gate.rejection("q", "n1", "LAeq", topic, "LAeq: not a number")
    assert lines(caplog) == [
        "Rejected message on 'minewatch/q/sensors/n1/levels': LAeq: not a number",
        "Rejected message on 'minewatch/q/sensors/n1/levels': ts: not a time",
        "Rejected message on 'minewatch/q/sensors/n1/levels': LAeq: not a number"
        " (2 more like it in the last minute not logged)",
    ]


def test_unconfigured_senders_share_their_sites_line(wall: Wall, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="minewatch.pipeline")
    gate = LogGate()
    for i in range(500):  # invented names and fields: one key for the site, whatever the field
        gate.rejection(
            "q", "", f"f{i}", f"minewatch/q/sensors/fake{i}/levels", f"sensor fake{i}: not configured"
        )
    gate.rejection("*", "", "", "minewatch/elsewhere/x", "site elsewhere: not configured")
    assert sorted(gate) == [("*", "", ""), ("q", "", "")]
    assert lines(caplog) == [
        "Rejected message on 'minewatch/q/sensors/fake0/levels': sensor fake0: not configured;"
        " rejections of unconfigured sensors and topics of site q are logged once a minute",
        "Rejected message on 'minewatch/elsewhere/x': site elsewhere: not configured;"
        " rejections of unconfigured sensors and topics of site * are logged once a minute",
    ]


def test_a_long_topic_is_cut_short_in_the_line(wall: Wall, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="minewatch.pipeline")
    topic = "minewatch/q/sensors/n1/" + "x" * 5000
    LogGate().rejection("q", "n1", "topic", topic, "topic: too long")
    (line,) = lines(caplog)
    assert len(line) < 400 and f"({len(topic)} characters)" in line


def test_a_sensors_field_keys_are_capped(wall: Wall, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="minewatch.pipeline")
    gate = LogGate()
    for i in range(MAX_GATES_PER_SENSOR + 50):  # field names come from the payload
        gate.rejection("q", "n1", f"f{i}", "minewatch/q/sensors/n1/levels", f"f{i}: unknown field")
    assert len(gate) == MAX_GATES_PER_SENSOR + 1
    assert ("q", "n1", "*") in set(gate)  # the reasons beyond the first few share one key
    assert len(lines(caplog)) == MAX_GATES_PER_SENSOR + 1
    gate.rejection("q", "n2", "f0", "minewatch/q/sensors/n2/levels", "f0: unknown field")
    assert ("q", "n2", "f0") in set(gate)  # another sensor has its own allowance


def test_the_gate_table_is_bounded_dropping_expired_keys_first(
    wall: Wall, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rejections, "MAX_LOG_GATES", 4)
    gate = LogGate()
    for sensor in ("a", "b", "c", "d"):
        assert gate.admit(("q", sensor, "ts")) == 0
    assert gate.admit(("q", "e", "ts")) == 0  # full within the minute: the site's shared key
    assert gate.admit(("q", "f", "ts")) is None  # ... which now holds the line back
    assert ("q", "", "") in set(gate) and ("q", "e", "ts") not in set(gate)
    assert len(gate) == 4 + 1  # the cap, and one shared key per site past it
    wall.advance(LOG_GATE_S)
    assert gate.admit(("q", "g", "ts")) == 0  # the expired keys were dropped for it
    assert list(gate) == [("q", "g", "ts")]


def test_conflicts_log_a_line_a_minute_per_sensor(wall: Wall, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="minewatch.pipeline")
    gate = LogGate()
    for _ in range(4):
        gate.conflict("q", "n1", "sound", T0)
    gate.conflict("q", "l1", "light", T0)
    wall.advance(LOG_GATE_S)
    gate.conflict("q", "n1", "sound", T0)
    assert lines(caplog) == [
        "Sensor q/n1 resent its sound of 2026-06-15T17:00:00Z with other content: the first is kept,"
        " the conflict journaled",
        "Sensor q/l1 resent its light of 2026-06-15T17:00:00Z with other content: the first is kept,"
        " the conflict journaled",
        "Sensor q/n1 resent its sound of 2026-06-15T17:00:00Z with other content: the first is kept,"
        " the conflict journaled (3 more in the last minute not logged)",
    ]
