"""The portal's MQTT publisher: operator events go to the daemon as messages on their event
topic, so the daemon validates and journals them like any other (no second writer of events)."""

from __future__ import annotations

import ssl
import threading

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion, MQTTErrorCode

from monitor.config import BrokerConfig
from monitor.errors import MinewatchError
from monitor.wire.link_state import Failover
from monitor.wire.network_loop import stop_network_loop

ACK_TIMEOUT_S = 10.0


class _FailoverClient(mqtt.Client):
    """paho's client trying a cluster's nodes (``broker.urls``) in turn, as the daemon's link does."""

    failover: Failover

    def reconnect(self) -> MQTTErrorCode:
        self.failover.attempt()
        self._host, self._port = self.failover.host_port
        return super().reconnect()


class Publisher:
    """QoS 1 events with failover over ``broker.urls``.

    MQTT 5: a PUBACK with a failure reason (the account may not publish events) is an error.
    MQTT 3.1.1 has no reason in the PUBACK: a broker that refuses a message acknowledges and
    drops it (Mosquitto and nats-server alike), so ``confirms_acceptance`` is False there and
    configuration refuses the daemon's account for the portal (monitor.config).
    """

    def __init__(self, config: BrokerConfig, client_id: str) -> None:
        v5 = config.protocol == "5"
        self.confirms_acceptance = v5
        self.client = _FailoverClient(
            CallbackAPIVersion.VERSION2,
            client_id=client_id,
            protocol=mqtt.MQTTv5 if v5 else mqtt.MQTTv311,
        )
        self.client.failover = Failover(config.addresses)
        if config.username:
            self.client.username_pw_set(config.username, config.password.value or None)
        if config.tls:
            self.client.tls_set(ca_certs=config.ca_file or None, cert_reqs=ssl.CERT_REQUIRED)
        self.client.reconnect_delay_set(1, 10)
        self.connected = threading.Event()
        self.client.on_connect = self._on_connect
        self.client.on_disconnect = lambda c, u, f, rc, p=None: self.connected.clear()
        # MQTT 5 says in the PUBACK whether the broker took the message: an ACL's refusal
        # (e.g. the daemon's account used for the portal) is not a delivery.
        self.refused: dict[int, str] = {}
        self.client.on_publish = self._acknowledged
        self.client.connect_async(config.host, config.port, keepalive=config.keepalive_s)
        self.client.loop_start()

    @property
    def url(self) -> str:
        """The broker address of the current (or last) connection."""
        return self.client.failover.url

    def _on_connect(
        self, client: mqtt.Client, userdata: object, flags: object, reason: object, properties: object
    ) -> None:
        if not getattr(reason, "is_failure", False):
            self.client.failover.up()
            self.connected.set()

    def publish(self, topic: str, payload: bytes) -> None:
        """QoS 1, returning once the broker has the message (PUBACK)."""
        if not self.connected.wait(ACK_TIMEOUT_S):
            raise MinewatchError(f"the broker {self.url} is not reachable: the event was not sent, try again")
        info = self.client.publish(topic, payload, qos=1)
        info.wait_for_publish(ACK_TIMEOUT_S)
        if not info.is_published():
            raise MinewatchError(
                f"the broker {self.url} did not confirm the event within {ACK_TIMEOUT_S:g} s"
            )
        reason = self.refused.pop(info.mid, "")
        if reason:
            raise MinewatchError(
                f"the broker {self.url} refused the event ({reason}): the portal's broker account"
                " must be allowed to publish events (make-credentials' minewatch-portal)"
            )

    def _acknowledged(
        self, client: mqtt.Client, userdata: object, mid: int, reason: object, props: object
    ) -> None:
        if getattr(reason, "is_failure", False):
            self.refused[mid] = str(reason)

    def close(self) -> None:
        stop_network_loop(self.client)
        self.client.disconnect()
