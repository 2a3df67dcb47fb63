"""The production broker configuration, against a real Mosquitto: who may publish and read what.

Mosquitto drops an unauthorised publish silently (MQTT 5 QoS 1 gets PUBACK 0x87),
so non-delivery is proven with a marker: after the forbidden publish is acknowledged
(the broker has routed or dropped it), an allowed client publishes a marker to the
same reader; per-client delivery is ordered, so once the marker arrives the
forbidden message would have arrived before it.
"""

from __future__ import annotations

import dataclasses
import ssl
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from paho.mqtt.enums import MQTTProtocolVersion

from monitor.config import parse_config
from monitor.errors import MinewatchError
from monitor.portal.broker import Publisher
from tests.support.secure_broker import SecureBroker, TestClient

pytestmark = pytest.mark.timeout(60)

NOT_AUTHORIZED = 0x87
OUTPUTS = ("violations", "findings", "alerts", "notices", "status", "rejected", "anchors", "daemon")

Connect = Callable[..., TestClient]


@pytest.fixture
def connect(secure_broker: SecureBroker) -> Iterator[Connect]:
    """connect("user", **kwargs) -> a connected client, closed after the test."""
    clients: list[TestClient] = []

    def make(username: str, **kwargs: object) -> TestClient:
        c = TestClient(secure_broker, username, **kwargs)  # type: ignore[arg-type]
        rc = c.connect()
        assert rc is not None and not rc.is_failure, f"{username} refused: {rc}"
        clients.append(c)
        return c

    yield make
    for c in clients:
        c.close()


def token() -> str:
    return uuid.uuid4().hex


def reaches(reader: TestClient, writer: TestClient, topic: str, marker: tuple[TestClient, str]) -> bool:
    """Does `writer`'s QoS 1 publish on `topic` reach `reader` (subscribed already)?"""
    payload = f"probe-{token()}".encode()
    writer.publish(topic, payload)
    marker_client, marker_topic = marker
    marker_payload = f"marker-{token()}".encode()
    assert not marker_client.publish(marker_topic, marker_payload).is_failure
    assert reader.wait_for(lambda ms: any(m.payload == marker_payload for m in ms)), "marker never arrived"
    return payload in reader.payloads()


# --------------------------------------------------------------------------- sensors


def test_sensor_publishes_its_own_readings_to_the_daemon(connect: Connect) -> None:
    daemon = connect("minewatch-daemon")
    assert not daemon.subscribe("minewatch/+/sensors/#")[0].is_failure
    n1 = connect("sensor-north-n1")
    for kind in ("levels", "audio", "bands", "status"):
        payload = f"{kind}-{token()}".encode()
        assert not n1.publish(f"minewatch/north/sensors/n1/{kind}", payload).is_failure
        assert daemon.wait_for(lambda ms, p=payload: any(m.payload == p for m in ms))  # type: ignore[misc]


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
    daemon = connect("minewatch-daemon")
    town = connect("town")
    daemon.subscribe("minewatch/+/sensors/#")
    daemon.subscribe("minewatch/+/events/#")
    town.subscribe("minewatch/+/violations/#")
    n1 = connect("sensor-north-n1")
    rc = n1.publish(topic, b"forged")
    assert rc.value == NOT_AUTHORIZED
    reader = town if topic.endswith("violations") else daemon
    marker = (
        (daemon, "minewatch/north/violations") if reader is town else (n1, "minewatch/north/sensors/n1/x")
    )
    assert not reaches(reader, n1, topic, marker)


# --------------------------------------------------------------------------- operators


def test_operator_writes_its_own_site_events_only(connect: Connect) -> None:
    daemon = connect("minewatch-daemon")
    daemon.subscribe("minewatch/+/events/#")
    operator = connect("operator-north")
    marker = (operator, "minewatch/north/events/work")
    assert reaches(daemon, operator, "minewatch/north/events/blast-notice", marker)
    assert reaches(daemon, operator, "minewatch/north/events/blast", marker)
    rc = operator.publish("minewatch/south/events/blast", b"x")
    assert rc.value == NOT_AUTHORIZED
    assert not reaches(daemon, operator, "minewatch/south/events/blast", marker)
    daemon.subscribe("minewatch/+/sensors/#")
    assert not reaches(daemon, operator, "minewatch/north/sensors/n1/levels", marker)


def test_forbidden_subscription_is_granted_and_delivers_nothing(connect: Connect) -> None:
    """What the ACL file's header says: Mosquitto 2.0 answers a subscription the ACL does not
    allow with a granted SUBACK, and then filters each message on delivery."""
    operator = connect("operator-north")  # may read north's outputs, not south's
    assert not operator.subscribe("minewatch/south/violations")[0].is_failure
    assert not operator.subscribe("minewatch/north/status")[0].is_failure  # for the marker
    daemon = connect("minewatch-daemon")
    assert not reaches(operator, daemon, "minewatch/south/violations", (daemon, "minewatch/north/status"))


def test_operator_reads_its_own_site_outputs_only(connect: Connect) -> None:
    operator = connect("operator-north")
    operator.subscribe("minewatch/+/+")  # as wide as it likes: the ACL filters what it gets
    daemon = connect("minewatch-daemon")
    marker = (daemon, "minewatch/north/status")
    for out in OUTPUTS:
        assert reaches(operator, daemon, f"minewatch/north/{out}", marker), out
    assert not reaches(operator, daemon, "minewatch/south/violations", marker)
    operator.subscribe("minewatch/#")
    n1 = connect("sensor-north-n1")
    assert not reaches(operator, n1, "minewatch/north/sensors/n1/levels", marker)


# --------------------------------------------------------------------------- daemon and town


def test_daemon_reads_inputs_and_writes_outputs_the_town_reads(connect: Connect) -> None:
    daemon = connect("minewatch-daemon")
    daemon.subscribe("minewatch/+/sensors/#")
    daemon.subscribe("minewatch/+/events/#")
    south = connect("sensor-south-n1")
    assert reaches(
        daemon, south, "minewatch/south/sensors/n1/levels", (south, "minewatch/south/sensors/n1/x")
    )
    town = connect("town")
    town.subscribe("minewatch/+/+")
    for site in ("north", "south"):
        for out in OUTPUTS:
            assert reaches(town, daemon, f"minewatch/{site}/{out}", (daemon, f"minewatch/{site}/status"))


def test_daemon_publishes_unattributed_rejections_the_town_reads(connect: Connect) -> None:
    """…/_/rejected (rejections of topics under no configured site) reaches the town, from
    the daemon's account and from an instance's account limited to its own sites."""
    town = connect("town")
    town.subscribe("minewatch/+/rejected")
    daemon = connect("minewatch-daemon")
    assert reaches(town, daemon, "minewatch/_/rejected", (daemon, "minewatch/north/rejected"))
    east = connect("minewatch-daemon-east")  # --daemon-instance east=north
    assert reaches(town, east, "minewatch/_/rejected", (east, "minewatch/north/rejected"))
    sensor = connect("sensor-north-n1")
    assert not reaches(town, sensor, "minewatch/_/rejected", (daemon, "minewatch/north/rejected"))


def test_town_over_mqtt311_reads_outputs_but_no_inputs(connect: Connect) -> None:
    town = connect("town-web", protocol=MQTTProtocolVersion.MQTTv311)
    town.subscribe("minewatch/#")
    daemon = connect("minewatch-daemon")
    n1 = connect("sensor-north-n1")
    operator = connect("operator-north")
    marker = (daemon, "minewatch/north/status")
    assert reaches(town, daemon, "minewatch/north/findings", marker)
    assert not reaches(town, n1, "minewatch/north/sensors/n1/levels", marker)
    assert not reaches(town, operator, "minewatch/north/events/blast", marker)


@pytest.mark.parametrize(
    "topic",
    ["minewatch/north/sensors/n1/levels", "minewatch/north/events/blast", "minewatch/north/violations"],
)
def test_town_publishes_nothing(connect: Connect, topic: str) -> None:
    daemon = connect("minewatch-daemon")
    daemon.subscribe("minewatch/#")
    town = connect("town")
    rc = town.publish(topic, b"forged")
    assert rc.value == NOT_AUTHORIZED
    assert not reaches(daemon, town, topic, (connect("operator-north"), "minewatch/north/events/work"))


def test_daemon_instance_account_sees_only_its_sites(connect: Connect) -> None:
    east = connect("minewatch-daemon-east")  # --daemon-instance east=north
    east.subscribe("minewatch/+/sensors/#")
    north, south = connect("sensor-north-n1"), connect("sensor-south-n1")
    marker = (north, "minewatch/north/sensors/n1/x")
    assert reaches(east, north, "minewatch/north/sensors/n1/levels", marker)
    assert not reaches(east, south, "minewatch/south/sensors/n1/levels", marker)
    assert east.publish("minewatch/south/violations", b"x").value == NOT_AUTHORIZED
    assert not east.publish("minewatch/north/violations", b"x").is_failure


# --------------------------------------------------------------------------- the portal

EVENT_KINDS = ("blast-notice", "blast", "truck", "work", "temporary-lighting", "vehicle-present")


def test_portal_publishes_events_for_every_site(
    connect: Connect, secure_broker: SecureBroker, tmp_path: Path
) -> None:
    """The portal's own publisher (monitor/portal/broker.py), configured as docs/CONFIG.md
    says (portal.mqtt_username and its password file beside the daemon's [broker]), gets its
    QoS 1 events for both sites acknowledged, and the daemon receives them."""
    daemon = connect("minewatch-daemon")
    daemon.subscribe("minewatch/+/events/#")
    config = parse_config(
        secure_broker.broker_toml()
        + "\n[portal]\n"
        + 'mqtt_username = "minewatch-portal"\n'
        + f'mqtt_password_file = "{secure_broker.password_file("minewatch-portal")}"\n'
        + '\n[[sites]]\nid = "north"\ntimezone = "Europe/Oslo"\nlatitude = 62.0\nlongitude = 9.6\n'
        + f'[storage]\npath = "{tmp_path / "store.db"}"\n'
    )
    broker = dataclasses.replace(
        config.broker, username=config.portal.mqtt_username, password=config.portal.mqtt_password
    )  # as `minewatch serve` does (monitor/commands/serve.py)
    publisher = Publisher(broker, config.portal.mqtt_client_id)
    try:
        sent = []
        for site in ("north", "south"):
            for kind in EVENT_KINDS:
                payload = f"{site}-{kind}-{token()}".encode()
                publisher.publish(f"minewatch/{site}/events/{kind}", payload)  # raises without a PUBACK
                sent.append(payload)
        assert daemon.wait_for(lambda ms: {m.payload for m in ms} >= set(sent))
    finally:
        publisher.close()
    portal = connect("minewatch-portal")  # and with the test client: each PUBACK is a success
    for kind in EVENT_KINDS:
        assert reaches(
            daemon, portal, f"minewatch/south/events/{kind}", (portal, "minewatch/north/events/blast")
        )


@pytest.mark.parametrize(
    "topic",
    [
        "minewatch/north/sensors/n1/levels",  # a sensor's levels
        "minewatch/north/sensors/l1/light",  # a sensor's readings
        "minewatch/north/sensors/n1/status",  # a sensor's status
        "minewatch/north/status",  # the daemon's outputs
        "minewatch/north/violations",
        "minewatch/north/findings",
        "minewatch/north/rejected",
        "minewatch/north/anchors",
        "minewatch/elsewhere/events/blast",  # a site that is not configured
        "minewatch/north/events/blast/x",  # below an event topic
        "minewatch/north/events",
        "minewatch/_/rejected",
    ],
)
def test_portal_publishes_nothing_but_events(connect: Connect, topic: str) -> None:
    portal = connect("minewatch-portal")
    assert portal.publish(topic, b"forged").value == NOT_AUTHORIZED
    if topic.startswith("minewatch/_/"):  # only the town reads it
        town = connect("town")
        town.subscribe("minewatch/+/rejected")
        daemon = connect("minewatch-daemon")
        assert not reaches(town, portal, topic, (daemon, "minewatch/north/rejected"))
        return
    daemon = connect("minewatch-daemon")
    daemon.subscribe("minewatch/#")  # reads every input and output of every site
    assert not reaches(daemon, portal, topic, (portal, "minewatch/north/events/blast"))


@pytest.mark.parametrize(
    "topic",
    ["minewatch-other/north/events/blast", "other/north/events/blast", "north/events/blast", "minewatch"],
)
def test_portal_cannot_publish_outside_the_prefix(connect: Connect, topic: str) -> None:
    assert connect("minewatch-portal").publish(topic, b"forged").value == NOT_AUTHORIZED


def test_portal_reads_nothing(connect: Connect) -> None:
    """Mosquitto 2.0 grants the portal's subscriptions (the ACL file's header) and delivers
    nothing on them: not inputs, not other publishers' events, not its own, not outputs."""
    portal = connect("minewatch-portal")
    for wide in ("#", "minewatch/#", "minewatch/+/events/#", "minewatch/+/+"):
        assert not portal.subscribe(wide)[0].is_failure
    daemon = connect("minewatch-daemon")
    daemon.subscribe("minewatch/#")
    n1, operator = connect("sensor-north-n1"), connect("operator-north")
    sends = [
        (n1, "minewatch/north/sensors/n1/levels"),
        (operator, "minewatch/north/events/blast"),
        (portal, "minewatch/south/events/work"),
        *((daemon, f"minewatch/{site}/{out}") for site in ("north", "south") for out in OUTPUTS),
    ]
    sent = []
    for writer, topic in sends:
        payload = f"probe-{token()}".encode()
        assert not writer.publish(topic, payload).is_failure, topic
        sent.append(payload)
    assert daemon.wait_for(lambda ms: {m.payload for m in ms} >= set(sent))  # the broker routed them all
    # The broker writes to one client in order: what it routed to the portal before this
    # SUBACK would have arrived before it.
    assert not portal.subscribe("minewatch/north/status")[0].is_failure
    assert portal.messages == []


# --------------------------------------------------------------------------- connecting


@pytest.mark.parametrize(("user", "password"), [("town", "wrong"), ("nobody", "x"), ("town", "")])
def test_bad_credentials_are_refused(secure_broker: SecureBroker, user: str, password: str) -> None:
    c = TestClient(secure_broker, user, password)
    rc = c.connect()
    assert rc is not None and rc.is_failure, rc


def test_plain_mqtt_is_refused(secure_broker: SecureBroker) -> None:
    c = TestClient(secure_broker, "town", tls=False)
    try:
        rc = c.connect(timeout=2)
    except OSError:
        rc = None  # the broker may close the socket mid-CONNECT
    finally:
        c.close()
    assert rc is None or rc.is_failure


def test_the_client_checks_the_broker_certificate(secure_broker: SecureBroker, tmp_path: Path) -> None:
    """A client trusting another CA refuses the broker: the CA file is what clients must pin."""
    other_ca = tmp_path / "other-ca.crt"
    key = tmp_path / "other-ca.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
         "-keyout", str(key), "-out", str(other_ca), "-subj", "/CN=other", "-days", "1"],
        check=True, capture_output=True,
    )  # fmt: skip
    c = TestClient(secure_broker, "town", ca_file=str(other_ca))
    with pytest.raises(ssl.SSLCertVerificationError):
        c.connect(timeout=2)
    c.close()


def test_no_account_can_take_over_the_daemon_session(connect: Connect, secure_broker: SecureBroker) -> None:
    """use_username_as_clientid: a sensor claiming the daemon's client id gets a session of its own."""
    daemon = TestClient(secure_broker, "minewatch-daemon", client_id="minewatch-daemon")
    assert daemon.connect(clean_start=False, session_expiry_s=600) is not None
    daemon.subscribe("minewatch/+/sensors/#")
    daemon.close()
    n1 = connect("sensor-north-n1")
    sent = [f"queued-{token()}".encode() for _ in range(3)]
    for p in sent:
        n1.publish("minewatch/north/sensors/n1/levels", p)
    thief = TestClient(secure_broker, "sensor-south-n1", client_id="minewatch-daemon")
    thief.connect(clean_start=False, session_expiry_s=600)
    assert not thief.session_present
    thief.close()
    daemon = TestClient(secure_broker, "minewatch-daemon", client_id="minewatch-daemon")
    try:
        daemon.connect(clean_start=False, session_expiry_s=0)  # 0: drop the session when done
        assert daemon.session_present
        assert daemon.wait_for(lambda ms: [m.payload for m in ms] == sent)
    finally:
        daemon.close()


def test_the_portal_publisher_reports_a_refused_event_instead_of_calling_it_sent(
    secure_broker: SecureBroker, tmp_path: Path
) -> None:
    """With the daemon's account (a configuration mistake), the broker refuses the portal's
    events in its PUBACK (MQTT 5): the portal says so, it does not tell the operator 'recorded'."""
    config = parse_config(
        secure_broker.broker_toml()
        + "\n[portal]\n"
        + 'mqtt_username = "minewatch-daemon"\n'
        + f'mqtt_password_file = "{secure_broker.password_file("minewatch-daemon")}"\n'
        + '\n[[sites]]\nid = "north"\ntimezone = "Europe/Oslo"\nlatitude = 62.0\nlongitude = 9.6\n'
        + f'[storage]\npath = "{tmp_path / "store.db"}"\n'
    )
    broker = dataclasses.replace(
        config.broker, username=config.portal.mqtt_username, password=config.portal.mqtt_password
    )
    publisher = Publisher(broker, "minewatch-portal-misconfigured")
    try:
        with pytest.raises(MinewatchError, match="refused the event"):
            publisher.publish("minewatch/north/events/blast", b"{}")
    finally:
        publisher.close()
