"""minewatch on a real three-node nats-server cluster (JetStream + MQTT 3.1.1), with
make-credentials --nats accounts: the daemon (`minewatch run`, a subprocess) on node a, the
edge publisher (sensors.link, store and forward) on node b, the town on node c.

The fault test kills node a (SIGKILL) mid-stream, brings it back, then kills node b, and
checks what docs/DEPLOY.md (High availability) promises: nothing acknowledged lost, nothing
stored twice, every minute judged, alerts flowing from the surviving nodes; it prints and
records (``record_property``) how long the daemon was blind at each failover.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from paho.mqtt.enums import MQTTProtocolVersion

from monitor.wire.codec import encode
from rules.model import SoundLevels
from sensors.queue import ForwardQueue, QueueBounds
from tests.support.broker_daemon import minute_ago
from tests.support.daemon import Daemon, store_count, wait_until
from tests.support.nats_cluster import NatsCluster, run_nats_cluster
from tests.support.nats_daemon import (
    make_nats_credentials,
    sensor_link,
    wait_cluster_ready,
    write_daemon_config,
)
from tests.support.secure_broker import SecureBroker, TestClient

pytestmark = pytest.mark.timeout(400)

V311 = MQTTProtocolVersion.MQTTv311
# How long the daemon may be blind at a node's loss, and alerts may pause: docs/DEPLOY.md
# states it. Measured here: under 2 s (docs/PERFORMANCE.md); the bound leaves room for a
# shared, slow machine.
MAX_BLIND_S = 20.0
MAX_ALERT_PAUSE_S = 60.0


def client(cluster: NatsCluster, creds: Path, user: str, node: str) -> TestClient:
    c = TestClient(SecureBroker(creds, port=cluster.node(node).mqtt_port), user, protocol=V311)
    rc = c.connect()
    assert rc is not None and not rc.is_failure, rc
    return c


def levels(site: str, ts: datetime, level: float) -> tuple[str, bytes]:
    return encode(SoundLevels(site, "n1", ts, 1.0, level, level + 1, level + 15))


def test_wildcards_retained_status_and_rejections_through_the_cluster(tmp_path: Path) -> None:
    """The daemon's `+`/`#` subscriptions, its retained …/status and …/rejected, across nodes."""
    creds = make_nats_credentials(tmp_path, ["north"])
    with run_nats_cluster(tmp_path / "cluster", credentials=creds) as cluster:
        wait_cluster_ready(cluster, creds)
        config = write_daemon_config(tmp_path / "minewatch.toml", cluster, creds, ["north"])
        daemon = Daemon(config).start()
        clients: list[TestClient] = []
        try:
            daemon.wait_ready(60)
            time.sleep(3)  # nats-server makes each QoS 1 subscription's R3 consumer after the CONNACK
            town = client(cluster, creds, "town", "c")
            clients.append(town)
            for topic in ("minewatch/+/violations", "minewatch/+/rejected"):
                assert not town.subscribe(topic)[0].is_failure
            sensor = client(cluster, creds, "sensor-north-n1", "b")
            clients.append(sensor)
            start = minute_ago(3)
            for s in range(60):
                assert not sensor.publish(*levels("north", start + timedelta(seconds=s), 86.0)).is_failure
            sensor.publish("minewatch/north/sensors/n1/levels", b"{not json")
            store = tmp_path / "store.db"
            assert wait_until(lambda: store_count(store, "SELECT COUNT(*) FROM sound") == 60, 60), (
                daemon.logs()
            )
            assert town.wait_for(lambda ms: any(m.topic == "minewatch/north/rejected" for m in ms), 30)
            assert town.wait_for(lambda ms: any(m.topic == "minewatch/north/violations" for m in ms), 60), (
                daemon.logs()
            )
            violation = json.loads(town.payloads("minewatch/north/violations")[0])
            assert violation["standard"] == "noise" and violation["sensors"] == ["n1"]
            # Retained: a reader that subscribes later, on another node, gets the last status.
            late = client(cluster, creds, "town", "b")
            clients.append(late)
            assert not late.subscribe("minewatch/+/status")[0].is_failure
            assert late.wait_for(lambda ms: any(m.retain for m in ms), 20), "no retained status"
            status = json.loads(next(bytes(m.payload) for m in late.messages if m.retain))
            assert status["site"] == "north"
        finally:
            for c in clients:
                c.close()
            assert daemon.stop() == 0, daemon.logs()


class LinkLog(threading.Thread):
    """Polls the daemon's broker link (the store's meta row) and keeps every change seen."""

    def __init__(self, store: Path) -> None:
        super().__init__(daemon=True)
        self.store = store
        self.changes: list[dict[str, object]] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        last = None
        while not self.stopping.is_set():
            try:
                conn = sqlite3.connect(self.store, timeout=5)
                row = conn.execute("SELECT value FROM meta WHERE key = 'broker_link'").fetchone()
                conn.close()
            except sqlite3.Error:
                row = None
            if row and row[0] != last:
                last = row[0]
                self.changes.append(json.loads(row[0]))
            time.sleep(0.05)


def reconnected_after(changes: list[dict[str, object]], t: float) -> tuple[float, str] | None:
    """(seconds from t until the daemon's link was up again, the node) from the link's changes."""
    for change in changes:
        since = datetime.fromisoformat(str(change["since"])).timestamp()
        if change["connected"] and since > t:
            return since - t, str(change["broker"])
    return None


def connected_at(changes: list[dict[str, object]], t: float) -> str | None:
    """The node the daemon's link was up on at time t, from the link's changes."""
    on = None
    for change in changes:
        if datetime.fromisoformat(str(change["since"])).timestamp() > t:
            break
        on = str(change["broker"]) if change["connected"] else None
    return on


def test_the_daemon_and_sensors_ride_through_the_loss_of_two_nodes(
    tmp_path: Path, record_property: pytest.RecordProperty
) -> None:
    creds = make_nats_credentials(tmp_path, ["north"])
    minutes = 13
    first = minute_ago(minutes + 1)
    total = minutes * 60
    kill_a_at, restart_a_at, kill_b_at = 200, 380, 560
    with run_nats_cluster(tmp_path / "cluster", credentials=creds) as cluster:
        wait_cluster_ready(cluster, creds)
        config = write_daemon_config(tmp_path / "minewatch.toml", cluster, creds, ["north"], first="a")
        daemon = Daemon(config).start()
        queue = ForwardQueue(tmp_path / "n1.queue.db", QueueBounds())
        link = sensor_link(cluster, creds, "north", queue, first="b")
        store = tmp_path / "store.db"
        watcher = LinkLog(store)
        town = None
        try:
            daemon.wait_ready(60)
            time.sleep(3)  # nats-server makes each QoS 1 subscription's R3 consumer after the CONNACK
            watcher.start()
            town = client(cluster, creds, "town", "c")
            assert not town.subscribe("minewatch/north/violations")[0].is_failure
            arrivals: list[float] = []
            town.client.message_callback_add(
                "minewatch/north/violations", lambda *_: arrivals.append(time.time())
            )
            link.start()
            assert link.connected.wait(30)
            kills: dict[str, float] = {}
            for i in range(total):
                if i == kill_a_at:
                    kills["a"] = time.time()
                    cluster.node("a").kill()
                elif i == restart_a_at:
                    cluster.node("a").start()
                    wait_cluster_ready(cluster, creds)  # a has caught up before b goes
                    time.sleep(3)
                elif i == kill_b_at:
                    kills["b"] = time.time()
                    cluster.node("b").kill()
                topic, payload = levels("north", first + timedelta(seconds=i), 86.0)
                link.send(topic, payload)
                time.sleep(0.03)
            assert link.drain(120), f"{len(queue)} readings not acknowledged"
            cluster.node("b").start()
            # Nothing acknowledged is lost, nothing is stored twice.
            assert wait_until(lambda: store_count(store, "SELECT COUNT(*) FROM sound") == total, 120), (
                store_count(store, "SELECT COUNT(*) FROM sound"),
                daemon.logs()[-3000:],
            )
            assert store_count(store, "SELECT COUNT(DISTINCT ts_us) FROM sound WHERE sensor = 'n1'") == total
            assert store_count(store, "SELECT COUNT(*) FROM chain WHERE kind = 'sound'") == total
            assert store_count(store, "SELECT COUNT(*) FROM conflicts") == 0
            assert store_count(store, "SELECT COUNT(*) FROM rejections") == 0
            # Every minute judged: the site's evaluation has passed the last minute sent.
            last_end_us = int((first + timedelta(seconds=total)).timestamp() * 1e6)
            assert wait_until(
                lambda: (
                    store_count(
                        store,
                        "SELECT evaluated_until_us >= ? FROM progress WHERE site = 'north'",
                        last_end_us,
                    )
                    == 1
                ),
                60,
            ), daemon.logs()[-3000:]
            # Alerts keep flowing: after each node's loss the town, on node c, gets violations.
            pauses = {}
            for node, t in kills.items():
                after = [a - t for a in arrivals if a > t]
                assert after, f"no violation reached the town after node {node} was killed"
                pauses[node] = after[0]
                assert after[0] < MAX_ALERT_PAUSE_S, (node, after[0])
            # The daemon's blind time at each failover: from the kill until its link was up
            # again (the link state it records), and until the first reading it stored. The
            # record follows the link by a round of the daemon's loop: watch until it shows the
            # link up again (seen once to lag the alerts after a kill), then read the changes.
            wait_until(lambda: bool(watcher.changes) and bool(watcher.changes[-1]["connected"]), 60)
            watcher.stopping.set()
            watcher.join(5)
            for node, t in kills.items():
                up = reconnected_after(watcher.changes, t)
                first_after = store_count(
                    store, "SELECT MIN(received_us) FROM sound WHERE received_us > ?", int(t * 1e6)
                )
                data_blind = first_after / 1e6 - t
                if up is None:
                    # The daemon was on another node when this one died (it had moved elsewhere
                    # than the killed node at the first failover): its link never dropped.
                    on = connected_at(watcher.changes, t)
                    assert on is not None and not on.endswith(f":{cluster.node(node).mqtt_port}"), (
                        watcher.changes
                    )
                    up = (0.0, on)
                link_blind, node_url = up
                line = (
                    f"node {node} killed: daemon reconnected to {node_url} after {link_blind:.2f} s,"
                    f" first reading stored after {data_blind:.2f} s; first alert at the town after"
                    f" {pauses[node]:.2f} s"
                )
                print(line)
                record_property(f"blind_s_node_{node}", round(max(link_blind, data_blind), 3))
                assert link_blind < MAX_BLIND_S and data_blind < MAX_BLIND_S, line
                if node == "a":  # the daemon, on a, moved; the sensors, on b, did not move
                    assert node_url != cluster.urls[0].replace("127.0.0.1", "localhost")
        finally:
            watcher.stopping.set()
            link.close()
            if town is not None:
                town.close()
            code = daemon.stop()
            assert code == 0, daemon.logs()[-3000:]
