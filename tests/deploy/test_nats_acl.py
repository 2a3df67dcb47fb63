"""make-credentials --nats against a real three-node nats-server cluster: the same attacks as
tests/deploy/test_broker_acl.py (the shipped Mosquitto ACL), each client on its own node.

nats-server speaks MQTT 3.1.1 only: a refused publish is acknowledged and dropped (no
PUBACK reason), so non-delivery is proven with a marker as in test_broker_acl.py; a
subscription outside the grants is refused in the SUBACK (0x80). The differences from
Mosquitto are docs/PROTOCOL.md's (MQTT through a NATS cluster).
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from paho.mqtt.enums import MQTTProtocolVersion

from monitor.daemon.ingest import session_client_id
from tests.support.nats_cluster import NatsCluster, run_nats_cluster, wait_mqtt_ready
from tests.support.secure_broker import (
    EXTRA_ARGS,
    SecureBroker,
    TestClient,
    make_credentials,
    write_test_config,
)

pytestmark = pytest.mark.timeout(120)

OUTPUTS = ("violations", "findings", "alerts", "notices", "status", "rejected", "anchors", "daemon")
V311 = MQTTProtocolVersion.MQTTv311
PROBE_GRACE_S = 2.0  # see reaches()
Connect = Callable[..., TestClient]


@pytest.fixture(scope="module")
def nats(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsCluster]:
    tmp = tmp_path_factory.mktemp("nats-acl")
    config = write_test_config(tmp / "minewatch.toml")
    result = make_credentials(["--config", config, "--out", tmp / "creds", "--quiet", "--nats", *EXTRA_ARGS])
    assert result.returncode == 0, result.stderr
    with run_nats_cluster(tmp / "cluster", credentials=tmp / "creds") as cluster:
        creds = tmp / "creds"
        town = json.loads((creds / "credentials.json").read_text())["users"]["town"]["password"]
        for node in cluster.nodes:
            wait_mqtt_ready(node, tls=(creds / "ca.crt", "town", town))
        yield cluster


def broker_on(nats: NatsCluster, node: str) -> SecureBroker:
    """make-credentials' folder and one node's MQTT port, as test_broker_acl.py's clients use them."""
    return SecureBroker(nats.dir.parent / "creds", port=nats.node(node).mqtt_port)


@pytest.fixture
def connect(nats: NatsCluster) -> Iterator[Connect]:
    """connect("user", node="a"|"b"|"c") -> a connected MQTT 3.1.1 client, closed after the test."""
    clients: list[TestClient] = []

    def make(username: str, node: str = "a", **kwargs: object) -> TestClient:
        # A connection closed without a CONNACK is tried again, as a real client's reconnect
        # would: nats-server closes a client id that comes back at a fast pace (its guard
        # against two clients taking a session from each other), and loading a session from
        # JetStream can take longer than one attempt's wait on a loaded machine. A refusal
        # (a failing CONNACK) is the answer under test and is not retried.
        deadline = time.monotonic() + 30
        while True:
            c = TestClient(broker_on(nats, node), username, protocol=V311, **kwargs)  # type: ignore[arg-type]
            rc = c.connect(timeout=10)
            if rc is not None or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert rc is not None and not rc.is_failure, f"{username} refused: {rc}"
        clients.append(c)
        return c

    yield make
    for c in clients:
        c.close()


def token() -> str:
    return uuid.uuid4().hex


def reaches(reader: TestClient, writer: TestClient, topic: str, marker: tuple[TestClient, str]) -> bool:
    """Does `writer`'s QoS 1 publish on `topic` reach `reader` (subscribed already)?

    The marker goes through the same nodes after the probe was acknowledged. nats-server
    keeps the order within one QoS 1 subscription (one JetStream consumer) but not across
    two, and the marker often travels on another: after it, the probe gets PROBE_GRACE_S more.
    """
    payload = f"probe-{token()}".encode()
    assert not writer.publish(topic, payload).is_failure  # 3.1.1: acknowledged, refused or not
    marker_client, marker_topic = marker
    marker_payload = f"marker-{token()}".encode()
    assert not marker_client.publish(marker_topic, marker_payload).is_failure
    assert reader.wait_for(lambda ms: any(m.payload == marker_payload for m in ms), 10), (
        "marker never arrived"
    )
    return reader.wait_for(lambda ms: any(m.payload == payload for m in ms), PROBE_GRACE_S)


def granted(client: TestClient, topic: str) -> bool:
    return not client.subscribe(topic)[0].is_failure


# --------------------------------------------------------------------------- sensors


def test_sensor_publishes_its_own_readings_to_the_daemon_across_nodes(connect: Connect) -> None:
    daemon = connect("minewatch-daemon", "a")
    assert granted(daemon, "minewatch/+/sensors/#")
    n1 = connect("sensor-north-n1", "b")
    for kind in ("levels", "audio", "bands", "status"):
        payload = f"{kind}-{token()}".encode()
        assert not n1.publish(f"minewatch/north/sensors/n1/{kind}", payload).is_failure
        assert daemon.wait_for(lambda ms, p=payload: any(m.payload == p for m in ms), 10)  # type: ignore[misc]


@pytest.mark.parametrize(
    "topic",
    [
        "minewatch/north/sensors/n2/levels",  # another sensor of its site
        "minewatch/south/sensors/n1/levels",  # a sensor with its id at another site
        "minewatch/north/events/blast",  # operator events
        "minewatch/north/violations",  # forged daemon output
    ],
)
def test_sensor_cannot_publish_as_anyone_else(connect: Connect, topic: str) -> None:
    daemon = connect("minewatch-daemon", "a")
    town = connect("town", "c")
    daemon.subscribe("minewatch/+/sensors/#")
    daemon.subscribe("minewatch/+/events/#")
    town.subscribe("minewatch/+/violations/#")
    n1 = connect("sensor-north-n1", "b")
    reader = town if topic.endswith("violations") else daemon
    marker = (
        (daemon, "minewatch/north/violations") if reader is town else (n1, "minewatch/north/sensors/n1/x")
    )
    assert not reaches(reader, n1, topic, marker)


# --------------------------------------------------------------------------- operators


def test_operator_writes_its_own_site_events_only(connect: Connect) -> None:
    daemon = connect("minewatch-daemon", "a")
    daemon.subscribe("minewatch/+/events/#")
    daemon.subscribe("minewatch/+/sensors/#")
    operator = connect("operator-north", "b")
    marker = (operator, "minewatch/north/events/work")
    assert reaches(daemon, operator, "minewatch/north/events/blast-notice", marker)
    assert not reaches(daemon, operator, "minewatch/south/events/blast", marker)
    assert not reaches(daemon, operator, "minewatch/north/sensors/n1/levels", marker)


def test_forbidden_subscription_is_refused_and_delivers_nothing(connect: Connect) -> None:
    """Where Mosquitto grants and filters (test_broker_acl.py), nats-server refuses in the SUBACK."""
    operator = connect("operator-north", "c")  # may read north's outputs, not south's
    assert not granted(operator, "minewatch/south/violations")
    assert not granted(operator, "minewatch/#")
    assert not granted(operator, "#")
    assert granted(operator, "minewatch/north/status")  # for the marker
    daemon = connect("minewatch-daemon", "a")
    assert not reaches(operator, daemon, "minewatch/south/violations", (daemon, "minewatch/north/status"))


def test_operator_reads_its_own_site_outputs_only(connect: Connect) -> None:
    operator = connect("operator-north", "b")
    for out in OUTPUTS:
        assert granted(operator, f"minewatch/north/{out}"), out
    daemon = connect("minewatch-daemon", "a")
    marker = (daemon, "minewatch/north/status")
    for out in OUTPUTS:
        assert reaches(operator, daemon, f"minewatch/north/{out}", marker), out
    assert not granted(operator, "minewatch/+/+")
    assert not granted(operator, "minewatch/north/sensors/#")


# --------------------------------------------------------------------------- daemon and town


def test_daemon_reads_inputs_and_writes_outputs_the_town_reads(connect: Connect) -> None:
    daemon = connect("minewatch-daemon", "a")
    daemon.subscribe("minewatch/+/sensors/#")
    daemon.subscribe("minewatch/+/events/#")
    south = connect("sensor-south-n1", "b")
    assert reaches(
        daemon, south, "minewatch/south/sensors/n1/levels", (south, "minewatch/south/sensors/n1/x")
    )
    town = connect("town", "c")
    for out in OUTPUTS:
        assert granted(town, f"minewatch/+/{out}")
    for site in ("north", "south"):
        for out in OUTPUTS:
            assert reaches(town, daemon, f"minewatch/{site}/{out}", (daemon, f"minewatch/{site}/status"))


def test_daemon_publishes_unattributed_rejections_the_town_reads(connect: Connect) -> None:
    town = connect("town", "c")
    town.subscribe("minewatch/+/rejected")
    daemon = connect("minewatch-daemon", "a")
    assert reaches(town, daemon, "minewatch/_/rejected", (daemon, "minewatch/north/rejected"))
    east = connect("minewatch-daemon-east", "b")  # --daemon-instance east=north
    assert reaches(town, east, "minewatch/_/rejected", (east, "minewatch/north/rejected"))
    sensor = connect("sensor-north-n1", "b")
    assert not reaches(town, sensor, "minewatch/_/rejected", (daemon, "minewatch/north/rejected"))


def test_town_reads_outputs_but_no_inputs(connect: Connect) -> None:
    town = connect("town-web", "c")
    assert not granted(town, "minewatch/#")
    assert not granted(town, "minewatch/+/sensors/#")
    assert not granted(town, "minewatch/+/events/#")
    assert granted(town, "minewatch/+/findings")
    daemon = connect("minewatch-daemon", "a")
    assert reaches(town, daemon, "minewatch/north/findings", (daemon, "minewatch/north/findings"))


@pytest.mark.parametrize(
    "topic",
    ["minewatch/north/sensors/n1/levels", "minewatch/north/events/blast", "minewatch/north/violations"],
)
def test_town_publishes_nothing(connect: Connect, topic: str) -> None:
    daemon = connect("minewatch-daemon", "a")
    daemon.subscribe("minewatch/+/sensors/#")
    daemon.subscribe("minewatch/+/events/#")
    daemon.subscribe("minewatch/+/violations")
    town = connect("town", "b")
    assert not reaches(daemon, town, topic, (connect("operator-north", "c"), "minewatch/north/events/work"))


def test_daemon_instance_account_sees_only_its_sites(connect: Connect) -> None:
    east = connect("minewatch-daemon-east", "a")  # --daemon-instance east=north
    assert granted(east, "minewatch/north/sensors/#")
    assert not granted(east, "minewatch/+/sensors/#")
    assert not granted(east, "minewatch/south/sensors/#")
    north = connect("sensor-north-n1", "b")
    marker = (north, "minewatch/north/sensors/n1/x")
    assert reaches(east, north, "minewatch/north/sensors/n1/levels", marker)
    town = connect("town", "c")
    town.subscribe("minewatch/+/violations")
    daemon = connect("minewatch-daemon", "a")
    assert not reaches(town, east, "minewatch/south/violations", (daemon, "minewatch/north/violations"))
    assert reaches(town, east, "minewatch/north/violations", (daemon, "minewatch/north/violations"))


# --------------------------------------------------------------------------- the portal


EVENT_KINDS = ("blast-notice", "blast", "truck", "work", "temporary-lighting", "vehicle-present")


def test_portal_publishes_events_for_every_site(connect: Connect) -> None:
    daemon = connect("minewatch-daemon", "a")
    daemon.subscribe("minewatch/+/events/#")
    portal = connect("minewatch-portal", "b")
    for site in ("north", "south"):
        for kind in EVENT_KINDS:
            assert reaches(
                daemon, portal, f"minewatch/{site}/events/{kind}", (portal, "minewatch/north/events/blast")
            )


@pytest.mark.parametrize(
    "topic",
    [
        "minewatch/north/sensors/n1/levels",
        "minewatch/north/status",
        "minewatch/north/violations",
        "minewatch/elsewhere/events/blast",  # a site that is not configured
        "minewatch/north/events/blast/x",  # below an event topic
        "minewatch/north/events",
        "minewatch/_/rejected",
    ],
)
def test_portal_publishes_nothing_but_events(connect: Connect, topic: str) -> None:
    portal = connect("minewatch-portal", "b")
    if topic.startswith("minewatch/_/"):
        town = connect("town", "c")
        town.subscribe("minewatch/+/rejected")
        daemon = connect("minewatch-daemon", "a")
        assert not reaches(town, portal, topic, (daemon, "minewatch/north/rejected"))
        return
    daemon = connect("minewatch-daemon", "a")
    for wide in ("minewatch/+/sensors/#", "minewatch/+/events/#", *(f"minewatch/+/{o}" for o in OUTPUTS)):
        daemon.subscribe(wide)
    assert not reaches(daemon, portal, topic, (portal, "minewatch/north/events/blast"))


def test_portal_reads_nothing(connect: Connect) -> None:
    portal = connect("minewatch-portal", "c")
    for wide in ("#", "minewatch/#", "minewatch/+/events/#", "minewatch/+/+", "minewatch/north/status"):
        assert not granted(portal, wide), wide


# --------------------------------------------------------------------------- connecting


@pytest.mark.parametrize(("user", "password"), [("town", "wrong"), ("nobody", "x"), ("town", "")])
def test_bad_credentials_are_refused(nats: NatsCluster, user: str, password: str) -> None:
    c = TestClient(broker_on(nats, "a"), user, password, protocol=V311)
    rc = c.connect()
    assert rc is None or rc.is_failure, rc


def test_plain_mqtt_is_refused(nats: NatsCluster) -> None:
    c = TestClient(broker_on(nats, "b"), "town", protocol=V311, tls=False)
    try:
        rc = c.connect(timeout=3)
    except OSError:
        rc = None
    finally:
        c.close()
    assert rc is None or rc.is_failure


def test_the_client_checks_the_broker_certificate(nats: NatsCluster, tmp_path: Path) -> None:
    import ssl

    other_ca, key = tmp_path / "other-ca.crt", tmp_path / "other-ca.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
         "-keyout", str(key), "-out", str(other_ca), "-subj", "/CN=other", "-days", "1"],
        check=True, capture_output=True,
    )  # fmt: skip
    c = TestClient(broker_on(nats, "c"), "town", protocol=V311, ca_file=str(other_ca))
    with pytest.raises(ssl.SSLCertVerificationError):
        c.connect(timeout=3)
    c.close()


def test_accounts_cannot_log_in_over_the_nats_protocol(nats: NatsCluster) -> None:
    """Reading $MQTT.sub.> (every QoS 1 delivery) is granted for MQTT's sake; over the NATS
    client port the same account would read everyone's: allowed_connection_types refuses it."""
    creds = json.loads((nats.dir.parent / "creds" / "credentials.json").read_text())["users"]
    node = nats.node("a")
    with socket.create_connection(("127.0.0.1", node.client_port), timeout=5) as s:
        assert s.recv(4096).startswith(b"INFO ")
        login = {"user": "town", "pass": creds["town"]["password"], "verbose": True}
        s.sendall(b"CONNECT " + json.dumps(login).encode() + b"\r\nPING\r\n")
        answer = s.recv(4096)
    assert b"Authorization Violation" in answer, answer


def test_the_internal_delivery_subjects_cannot_be_subscribed_over_mqtt(connect: Connect) -> None:
    town = connect("town", "a")
    assert not granted(town, "$MQTT/sub/#")
    assert not granted(town, "$MQTT/#")


def test_another_account_taking_the_daemons_client_id_gets_none_of_its_queue(connect: Connect) -> None:
    """Partly as Mosquitto (test_broker_acl.py): a sensor resuming the daemon's session
    (clean_session false) receives nothing the daemon was queued, and the daemon keeps it all.
    nats-server has no use_username_as_clientid: the session is the client id's, whoever logs
    in with it; what that costs is the next test's (docs/PROTOCOL.md)."""
    daemon = connect("minewatch-daemon", "a", client_id="minewatch-daemon", clean_session=False)
    daemon.subscribe("minewatch/+/sensors/#")
    daemon.close()
    n1 = connect("sensor-north-n1", "b")
    sent = [f"queued-{token()}".encode() for _ in range(3)]
    for p in sent:
        n1.publish("minewatch/north/sensors/n1/levels", p)
    thief = connect("sensor-south-n1", "c", client_id="minewatch-daemon", clean_session=False)
    assert not thief.wait_for(lambda ms: bool(ms), 2)
    thief.close()
    daemon = connect("minewatch-daemon", "a", client_id="minewatch-daemon", clean_session=False)
    assert daemon.wait_for(lambda ms: [m.payload for m in ms] == sent, 10), daemon.payloads()
    daemon.close()


def test_another_account_can_end_a_session_whose_id_it_knows(connect: Connect) -> None:
    """The broker's behaviour the daemon's keyed session ids answer (next test): any account
    logging in with a session's client id and a clean session ends that session, and what
    was queued for it is gone. If a nats-server release binds sessions to accounts, this
    test fails and docs/PROTOCOL.md and docs/DEPLOY.md are to be updated."""
    daemon = connect("minewatch-daemon", "a", client_id="minewatch-daemon", clean_session=False)
    daemon.subscribe("minewatch/+/sensors/#")
    daemon.close()
    n1 = connect("sensor-north-n1", "b")
    n1.publish("minewatch/north/sensors/n1/levels", b"queued")
    thief = connect("sensor-south-n1", "c", client_id="minewatch-daemon", clean_session=True)
    thief.close()
    daemon = connect("minewatch-daemon", "a", client_id="minewatch-daemon", clean_session=False)
    assert not daemon.session_present
    assert not daemon.wait_for(lambda ms: bool(ms), 2)
    daemon.close()


def test_nats_passwords_are_stored_as_bcrypt_hashes(tmp_path: Path) -> None:
    """nats-auth.conf holds each account's bcrypt hash ($2b$, cost 10), never the password."""
    import re

    import bcrypt

    config = write_test_config(tmp_path / "minewatch.toml")
    creds = tmp_path / "creds"
    result = make_credentials(["--config", config, "--out", creds, "--quiet", "--nats"])
    assert result.returncode == 0, result.stderr
    users = json.loads((creds / "credentials.json").read_text())["users"]
    stored = dict(re.findall(r'user: "([^"]+)", password: "([^"]+)"', (creds / "nats-auth.conf").read_text()))
    assert set(stored) == set(users)
    for user, record in users.items():
        assert stored[user].startswith("$2b$10$"), user
        assert stored[user] != record["password"]
        assert bcrypt.checkpw(record["password"].encode(), stored[user].encode()), user


def _answer(sock: socket.socket) -> bytes:
    """Everything the peer says until it closes the connection (or stops talking)."""
    reply = b""
    try:
        while chunk := sock.recv(4096):
            reply += chunk
    except (OSError, TimeoutError):  # reset, a TLS alert (ssl.SSLError), silence
        pass
    return reply


def test_cluster_routes_take_only_tls_with_the_installations_certificate(nats: NatsCluster) -> None:
    """A route port speaks TLS first and wants a client certificate of make-credentials' CA:
    a plain connection that tries to join as a route is closed unanswered, and so is a TLS
    one that trusts the nodes but shows no certificate. (Without the template's route TLS the
    same plain connection gets the node's INFO and a PONG: checked when this was written.)"""
    import ssl

    port = nats.node("a").cluster_port
    join = b'CONNECT {"verbose":false,"name":"intruder","cluster":"minewatch"}\r\nPING\r\n'
    with socket.create_connection(("127.0.0.1", port), timeout=5) as plain:
        plain.sendall(join)
        assert b"PONG" not in _answer(plain)
    context = ssl.create_default_context(cafile=nats.dir.parent / "creds" / "ca.crt")
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        try:
            tls = context.wrap_socket(raw, server_hostname="localhost")
        except (ssl.SSLError, OSError):
            return  # refused in the handshake (TLS 1.2)
        with tls:
            try:
                tls.sendall(join)
            except (ssl.SSLError, OSError):
                return
            assert b"PONG" not in _answer(tls)  # TLS 1.3: the refusal comes after the handshake


def test_the_daemons_keyed_sessions_survive_an_account_claiming_its_ids(nats: NatsCluster) -> None:
    """make-credentials --nats gives the daemon a session key (broker.session_key_file): its
    sessions' ids are known only to holders of the key. A sensor account that logs in with
    clean sessions under every id it can work out (the configured client id, the unkeyed
    per-filter ids) ends none of them: the daemon finds its sessions and what was queued."""
    import time

    from monitor.config import BrokerConfig, Secret
    from monitor.daemon.ingest import Handoff, MqttLink

    creds = nats.dir.parent / "creds"
    users = json.loads((creds / "credentials.json").read_text())["users"]
    urls = tuple(u.replace("mqtt://127.0.0.1", "mqtts://localhost") for u in nats.urls_from("a"))
    filters = ["minewatch/north/sensors/#", "minewatch/north/events/#"]
    config = BrokerConfig(
        url=urls[0],
        urls=urls,
        protocol="3.1.1",
        client_id="minewatch-daemon",
        username="minewatch-daemon",
        password=Secret(users["minewatch-daemon"]["password"]),
        ca_file=str(creds / "ca.crt"),
        session_per_filter=True,
        session_key=Secret((creds / "session-keys" / "minewatch-daemon").read_text().strip()),
    )
    guessable = [
        "minewatch-daemon",
        *(session_client_id(replace(config, session_key=Secret("")), [f]) for f in filters),
    ]

    def link() -> MqttLink:
        made = MqttLink(config, filters, Handoff(1000))
        made.start()
        deadline = time.monotonic() + 60
        while not made.connected:
            assert time.monotonic() < deadline, "the daemon's link did not connect"
            time.sleep(0.1)
        return made

    first = link()
    time.sleep(3)  # each QoS 1 subscription's R3 consumer is made after the SUBACK
    first.stop_accepting()
    first.close()
    broker = broker_on(nats, "b")
    sensor = TestClient(broker, "sensor-north-n1", protocol=V311)
    assert not sensor.connect().is_failure
    payload = f"queued-{token()}".encode()
    assert not sensor.publish("minewatch/north/sensors/n1/levels", payload).is_failure
    sensor.close()
    for claimed in guessable:
        thief = TestClient(broker_on(nats, "c"), "sensor-south-n1", protocol=V311, client_id=claimed)
        assert not thief.connect().is_failure
        thief.close()
    again = link()
    try:
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while payload not in got and time.monotonic() < deadline:
            batch = again.inbound.take(0.2, 100)
            got += [m.payload for m in batch]
            again.ack(batch)
        assert payload in got
        assert again.sessions_lost == 0
    finally:
        again.close()
