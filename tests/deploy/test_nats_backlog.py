"""A queued backlog on several topic filters drains through a real three-node nats-server
cluster without waiting for the broker's redelivery (``broker.session_per_filter``).

nats-server 2.9 holds at most ``max_ack_pending`` unacknowledged messages per MQTT session,
over all its subscriptions, while each subscription's JetStream consumer may push that many:
with several filters in one session and a backlog, the surplus is dropped at the server and
redelivered only after ``ack_wait`` (server/mqtt.go, ``trackPending``). Here ``ack_wait`` is
10 minutes and ``max_ack_pending`` 64, so a dropped message would not come back during the
test: the daemon's link (``MqttLink``, acking each batch as the pipeline does after its
commit) must receive every message with one session per filter, and one session for all
filters is shown to lose messages to the server's limit (why the option exists).
"""

from __future__ import annotations

import time
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from monitor.config import BrokerConfig
from monitor.daemon.ingest import Handoff, Inbound, MqttLink, session_client_id
from monitor.wire.network_loop import stop_network_loop
from tests.support.nats_cluster import NatsCluster, run_nats_cluster, wait_mqtt_ready

pytestmark = pytest.mark.timeout(300)

FILTERS = [f"minewatch/s{i}/sensors/#" for i in range(6)]
PER_FILTER = 150  # 900 messages, over 14 times the session's limit of 64
EDITS = [("max_ack_pending: 1024", "max_ack_pending: 64"), ('ack_wait: "30s"', 'ack_wait: "10m"')]


def _link(cluster: NatsCluster, per_filter: bool, handoff: Handoff) -> MqttLink:
    urls = tuple(cluster.urls_from("a"))
    config = BrokerConfig(
        url=urls[0], urls=urls, protocol="3.1.1", client_id="backlog-daemon", session_per_filter=per_filter
    )
    return MqttLink(config, FILTERS, handoff)


def _wait_subscribed(link: MqttLink, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not link.connected:
        assert time.monotonic() < deadline, "the link did not connect"
        time.sleep(0.1)
    time.sleep(3)  # nats-server makes each QoS 1 subscription's R3 consumer after the SUBACK


def _publish_backlog(cluster: NatsCluster) -> None:
    publisher = mqtt.Client(
        CallbackAPIVersion.VERSION2, client_id="backlog-publisher", protocol=mqtt.MQTTv311
    )
    node = cluster.node("b")
    publisher.connect("127.0.0.1", node.mqtt_port)
    publisher.loop_start()
    try:
        infos = [
            publisher.publish(f"minewatch/s{i % len(FILTERS)}/sensors/n1/levels", f"{i}".encode(), qos=1)
            for i in range(PER_FILTER * len(FILTERS))
        ]
        for info in infos:
            info.wait_for_publish(60)
    finally:
        publisher.disconnect()
        stop_network_loop(publisher)


def _drain(link: MqttLink, handoff: Handoff, within_s: float) -> set[bytes]:
    """Takes and acks batches as the pipeline does after a commit, until all or ``within_s``."""
    got: set[bytes] = set()
    deadline = time.monotonic() + within_s
    while len(got) < PER_FILTER * len(FILTERS) and time.monotonic() < deadline:
        batch: list[Inbound] = handoff.take(0.2, 100)
        got |= {m.payload for m in batch}
        link.ack(batch)
    return got


def _backlog_after_restart(tmp_path: Path, per_filter: bool, within_s: float) -> set[bytes]:
    with run_nats_cluster(tmp_path / "cluster", edits=EDITS) as cluster:
        for node in cluster.nodes:
            wait_mqtt_ready(node)
        handoff = Handoff(100_000)
        first = _link(cluster, per_filter, handoff)
        first.start()
        try:
            _wait_subscribed(first)
        finally:
            first.stop_accepting()
            first.close()
        _publish_backlog(cluster)  # queued for the daemon's sessions while it is down
        again = _link(cluster, per_filter, Handoff(100_000))
        again.start()
        try:
            return _drain(again, again.inbound, within_s)
        finally:
            again.close()


def test_a_session_per_filter_drains_the_whole_backlog(tmp_path: Path) -> None:
    got = _backlog_after_restart(tmp_path, per_filter=True, within_s=120)
    assert got == {f"{i}".encode() for i in range(PER_FILTER * len(FILTERS))}


def test_one_session_for_several_filters_loses_messages_to_the_servers_limit(tmp_path: Path) -> None:
    """The behaviour the option works around: one session with six filters gets the first
    ``max_ack_pending`` and a few more, the rest waits for the 10-minute redelivery."""
    got = _backlog_after_restart(tmp_path, per_filter=False, within_s=15)
    assert len(got) < PER_FILTER * len(FILTERS) / 2, len(got)


def test_a_sessions_client_id_is_stable_and_its_own() -> None:
    config = BrokerConfig(client_id="minewatch-daemon", session_per_filter=True)
    ids = [session_client_id(config, [f]) for f in FILTERS]
    assert len(set(ids)) == len(FILTERS)
    assert all(i.startswith("minewatch-daemon-") for i in ids)
    assert session_client_id(config, [FILTERS[2]]) == ids[2]  # the same filter, the same session
    one = BrokerConfig(client_id="minewatch-daemon")
    assert session_client_id(one, FILTERS) == "minewatch-daemon"  # the default keeps its id


def test_a_session_ended_by_another_client_is_reported_on_reconnecting(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """nats-server binds a session to the client id: a client that logs in with the daemon's
    id and a clean session ends the daemon's session (docs/DEPLOY.md). The daemon cannot
    prevent it; it says so when it reconnects and finds no session."""
    with run_nats_cluster(tmp_path / "cluster") as cluster:
        for node in cluster.nodes:
            wait_mqtt_ready(node)
        link = _link(cluster, True, Handoff(1000))
        link.start()
        try:
            _wait_subscribed(link)
            victim = session_client_id(link.config, [FILTERS[0]])
            thief = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=victim, protocol=mqtt.MQTTv311)
            thief.connect("127.0.0.1", cluster.node("c").mqtt_port)
            thief.loop_start()
            time.sleep(2)
            thief.disconnect()
            stop_network_loop(thief)
            deadline = time.monotonic() + 60
            while link.sessions_lost == 0 and time.monotonic() < deadline:
                time.sleep(0.2)
        finally:
            link.close()
    assert link.sessions_lost >= 1  # the thief reconnecting may end it again
    assert any(victim in r.getMessage() and "is lost" in r.getMessage() for r in caplog.records)
