"""The daemon's persistent session loses no QoS 1 reading while it is away, nor across a broker restart.

Mosquitto's default max_queued_messages (1000) would silently drop everything past
the first thousand; the production configuration must not.
"""

from __future__ import annotations

import pytest

from tests.support.secure_broker import SecureBroker, TestClient

pytestmark = pytest.mark.timeout(60)

DAEMON = "minewatch-daemon"
TOPIC = "minewatch/north/sensors/n1/levels"


def subscribe_and_leave(broker: SecureBroker) -> None:
    daemon = TestClient(broker, DAEMON, client_id=DAEMON)
    rc = daemon.connect(clean_start=False, session_expiry_s=3600)
    assert rc is not None and not rc.is_failure
    assert not daemon.subscribe("minewatch/+/sensors/#", qos=1)[0].is_failure
    daemon.close()


def publish_burst(broker: SecureBroker, count: int) -> list[bytes]:
    sensor = TestClient(broker, "sensor-north-n1")
    assert sensor.connect() is not None
    payloads = [f'{{"seq": {i}}}'.encode() for i in range(count)]
    try:
        mids = [sensor.client.publish(TOPIC, p, qos=1).mid for p in payloads]
        codes = [sensor.wait_puback(mid, timeout=30) for mid in mids]
    finally:
        sensor.close()
    assert not any(rc.is_failure for rc in codes)
    return payloads


def come_back(broker: SecureBroker, expected: list[bytes]) -> None:
    daemon = TestClient(broker, DAEMON, client_id=DAEMON)
    try:
        rc = daemon.connect(clean_start=False, session_expiry_s=3600)
        assert rc is not None and not rc.is_failure
        assert daemon.session_present
        daemon.wait_for(lambda ms: len(ms) >= len(expected), timeout=30)
        got = daemon.payloads(TOPIC)
        assert len(got) == len(expected), f"{len(got)} of {len(expected)} queued messages delivered"
        assert got == expected  # and in order: per-site ordering is what the daemon relies on
    finally:
        daemon.close()


def test_5000_readings_wait_for_the_daemon(fresh_secure_broker: SecureBroker) -> None:
    subscribe_and_leave(fresh_secure_broker)
    sent = publish_burst(fresh_secure_broker, 5000)
    come_back(fresh_secure_broker, sent)


def test_queued_readings_survive_a_broker_restart(fresh_secure_broker: SecureBroker) -> None:
    subscribe_and_leave(fresh_secure_broker)
    sent = publish_burst(fresh_secure_broker, 1500)
    fresh_secure_broker.restart()  # a clean stop writes the persistence file
    come_back(fresh_secure_broker, sent)
