"""broker.urls: the daemon's link, the edge publishers' link and the portal's publisher try a
cluster's nodes in turn. The policy is pure (``Failover``, ``LinkWatch.next_wait``); the three
clients run against two real Mosquittos (tests/support/servers.py), the first stopped to play a
dead node. The cluster itself (nats-server) is tests/deploy/test_nats_cluster.py."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest

from monitor.config import BrokerConfig
from monitor.daemon.ingest import Handoff, MqttLink
from monitor.portal.broker import Publisher
from monitor.wire.link_state import Backoff, Failover, LinkWatch
from sensors.link import Link
from sensors.queue import ForwardQueue, QueueBounds
from tests.support.sensors import Subscriber, wait_for
from tests.support.servers import Mosquitto, free_port

pytestmark = pytest.mark.timeout(120)


# --------------------------------------------------------------------------- the policy (pure)


def test_each_attempt_after_the_first_goes_to_the_next_node() -> None:
    f = Failover(["mqtt://a:1", "mqtt://b:2", "mqtt://c:3"])
    assert [f.attempt() for _ in range(5)] == [
        "mqtt://a:1",
        "mqtt://b:2",
        "mqtt://c:3",
        "mqtt://a:1",
        "mqtt://b:2",
    ]
    assert f.host_port == ("b", 2)


def test_untried_nodes_are_tried_at_once_then_the_backoff_applies() -> None:
    watch = LinkWatch(
        ["mqtt://a:1", "mqtt://b:2", "mqtt://c:3"],
        logging.getLogger("test"),
        Backoff(jitter=lambda: 0.0),
    )
    watch.attempting()  # a: up, then lost
    watch.up()
    watch.lost("killed")
    assert watch.next_wait() == 0.0  # b not tried in this outage
    assert watch.attempting() == ("b", 2)
    watch.failed("refused")
    assert watch.next_wait() == 0.0  # c neither
    assert watch.attempting() == ("c", 3)
    watch.failed("refused")
    assert watch.next_wait() == 0.5  # a again: every node failed once, back off
    assert watch.attempting() == ("a", 1)
    watch.up()  # up on a: the next outage tries b at once again
    watch.lost("killed")
    assert watch.next_wait() == 0.0


def test_one_address_keeps_the_backoff() -> None:
    watch = LinkWatch("mqtt://a:1", logging.getLogger("test"), Backoff(jitter=lambda: 0.0))
    watch.attempting()
    watch.failed("refused")
    assert watch.next_wait() == 0.5
    assert watch.attempting() == ("a", 1)
    assert watch.url == "mqtt://a:1"


def test_the_state_names_the_node_of_the_connection() -> None:
    watch = LinkWatch(["mqtt://a:1", "mqtt://b:2"], logging.getLogger("test"))
    watch.attempting()
    watch.failed("refused")
    watch.attempting()
    watch.up()
    assert watch.state.connected and watch.state.broker == "mqtt://b:2"


# --------------------------------------------------------------------------- real brokers


@pytest.fixture
def two_brokers(tmp_path: Path) -> tuple[Mosquitto, Mosquitto]:
    first, second = Mosquitto(tmp_path / "m1"), Mosquitto(tmp_path / "m2")
    second.start()
    yield first, second  # first never started: a node that is down
    second.stop()


def cluster_config(down: str, up: Mosquitto, **kwargs: object) -> BrokerConfig:
    return BrokerConfig(url=down, urls=(down, up.url), **kwargs)  # type: ignore[arg-type]


def test_the_daemons_link_fails_over_to_the_next_node(two_brokers: tuple[Mosquitto, Mosquitto]) -> None:
    _, up = two_brokers
    down = f"mqtt://127.0.0.1:{free_port()}"
    inbound = Handoff(100)
    link = MqttLink(cluster_config(down, up, client_id="failover-daemon"), ["t/#"], inbound)
    link.start()
    try:
        assert wait_for(lambda: link.watch.state.connected, 10)
        assert link.watch.state.broker == up.url
        sub_ready = time.monotonic() + 5
        sender = Subscriber(up.port, "unused", client_id="failover-sender")
        while time.monotonic() < sub_ready and not len(inbound):
            sender.client.publish("t/x", b"hello", qos=1)
            time.sleep(0.2)
        sender.close()
        assert next(m.payload for m in inbound.take(1, 10)) == b"hello"
    finally:
        link.close()


def test_the_edge_publisher_fails_over_and_forwards_its_queue(
    two_brokers: tuple[Mosquitto, Mosquitto], tmp_path: Path
) -> None:
    _, up = two_brokers
    sub = Subscriber(up.port, "minewatch/#")
    queue = ForwardQueue(tmp_path / "q.db", QueueBounds())
    link = Link(cluster_config(f"mqtt://127.0.0.1:{free_port()}", up), "failover-sensor", queue)
    for i in range(10):
        queue.put(f"minewatch/s1/sensors/n1/levels{i}", b"x", 1)
    link.start()
    try:
        assert link.drain(15), f"{len(queue)} left"
        assert wait_for(lambda: len(sub.received()) == 10, 10)
    finally:
        link.close()
        sub.close()


def test_the_portal_publisher_fails_over(two_brokers: tuple[Mosquitto, Mosquitto]) -> None:
    _, up = two_brokers
    sub = Subscriber(up.port, "minewatch/+/events/#")
    publisher = Publisher(cluster_config(f"mqtt://127.0.0.1:{free_port()}", up), "failover-portal")
    try:
        publisher.publish("minewatch/s1/events/blast", b"{}")
        assert publisher.url == up.url and publisher.confirms_acceptance
        assert wait_for(lambda: len(sub.received()) == 1, 10)
    finally:
        publisher.close()
        sub.close()


def test_the_portal_says_when_the_broker_cannot_confirm_acceptance() -> None:
    publisher = Publisher(BrokerConfig(protocol="3.1.1", url=f"mqtt://127.0.0.1:{free_port()}"), "p311")
    try:
        assert not publisher.confirms_acceptance
    finally:
        publisher.close()
