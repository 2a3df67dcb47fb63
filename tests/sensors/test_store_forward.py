"""Store and forward through a real Mosquitto: outages, publisher restarts, the size bound."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from monitor.config import BrokerConfig, load_config
from rules.model import SensorStatus, SoundLevels
from sensors.link import Link
from sensors.publisher import Publisher
from sensors.queue import ForwardQueue, QueueBounds
from tests.support.sensors import Subscriber, site_config, wait_for
from tests.support.servers import Mosquitto

T0 = datetime(2026, 6, 15, 16, 0, tzinfo=UTC)
TOPIC = "minewatch/dovre-quarry/sensors/n1/#"


def levels(i: int) -> SoundLevels:
    return SoundLevels("dovre-quarry", "n1", T0 + timedelta(seconds=i), 1.0, 60.0 + i % 7, 62.0 + i % 7, 80.0)


def seconds_received(sub: Subscriber) -> list[int]:
    """Seconds after T0 of the levels received, first occurrence only (QoS 1 may repeat one)."""
    seen: list[int] = []
    for _, payload in sub.received("/levels"):
        ts = datetime.fromisoformat(json.loads(payload)["ts"].replace("Z", "+00:00"))
        second = int((ts - T0).total_seconds())
        if second not in seen:
            seen.append(second)
    return seen


def make(tmp_path: Path, broker: Mosquitto, bounds: QueueBounds | None = None) -> tuple[Link, Publisher]:
    config = load_config(site_config(tmp_path, broker.url))
    site = config.sites[0]
    queue = ForwardQueue(tmp_path / "n1.queue.db", bounds or QueueBounds())
    link = Link(BrokerConfig(url=broker.url), "sensor-test-n1", queue)
    return link, Publisher(site, site.sensors[0], link, queue)


def test_nothing_lost_across_a_broker_outage(tmp_path: Path, mosquitto: Mosquitto) -> None:
    sub = Subscriber(mosquitto.port, TOPIC)
    link, publisher = make(tmp_path, mosquitto)
    link.start()
    try:
        assert link.connected.wait(10)
        for i in range(20):
            publisher.publish(levels(i))
        assert link.drain(10)
        mosquitto.stop()  # the subscriber's session and subscription persist in the broker
        assert wait_for(lambda: not link.connected.is_set(), 10)
        for i in range(20, 120):  # the publisher keeps measuring during the outage
            publisher.publish(levels(i))
        assert len(link.queue) >= 100  # on disk, waiting
        mosquitto.start()
        assert link.drain(30), f"{len(link.queue)} still queued"
        assert wait_for(lambda: len(seconds_received(sub)) == 120, 30), seconds_received(sub)
        assert seconds_received(sub) == list(range(120))  # all of them, in order
    finally:
        link.close()
        sub.close()


def test_a_restarted_publisher_sends_what_it_had_queued(tmp_path: Path, mosquitto: Mosquitto) -> None:
    sub = Subscriber(mosquitto.port, TOPIC)
    mosquitto.stop()
    link, publisher = make(tmp_path, mosquitto)
    link.start()
    for i in range(30):
        publisher.publish(levels(i))
    assert not link.close(drain_timeout=0.5)  # broker down: nothing could go
    link.queue.close()  # type: ignore[attr-defined]  # the process "exits"
    mosquitto.start()
    again, _ = make(tmp_path, mosquitto)
    assert len(again.queue) == 30
    again.start()
    try:
        assert again.drain(30)
        assert wait_for(lambda: len(seconds_received(sub)) == 30, 30)
        assert seconds_received(sub) == list(range(30))
    finally:
        again.close()
        sub.close()


def test_size_bound_drops_the_oldest_and_reports_it(tmp_path: Path, mosquitto: Mosquitto) -> None:
    sub = Subscriber(mosquitto.port, TOPIC)
    mosquitto.stop()
    link, publisher = make(tmp_path, mosquitto, QueueBounds(max_messages=25, max_bytes=0))
    link.start()
    try:
        for i in range(100):
            publisher.publish(levels(i))
        publisher.heartbeat(SensorStatus("dovre-quarry", "n1", T0 + timedelta(seconds=100)))
        mosquitto.start()
        assert link.drain(30)
        assert wait_for(lambda: len(sub.received("/status")) == 1, 30)
        # The 25 newest messages survive: 24 levels and the heartbeat. It reports the 75 drops
        # made before it was written; queueing it dropped one more, left for the next heartbeat.
        assert wait_for(lambda: len(seconds_received(sub)) == 24, 10)
        assert seconds_received(sub) == list(range(76, 100))
        status = json.loads(sub.received("/status")[0][1])
        assert status["dropped"] == 75 and status["queued"] == 25
        assert publisher.backlog is not None and publisher.backlog.take_unreported_drops() == 1
    finally:
        link.close()
        sub.close()
