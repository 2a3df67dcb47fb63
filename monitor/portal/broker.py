"""The portal's MQTT publisher: operator events go to the daemon as messages on their event
topic, so the daemon validates and journals them like any other (no second writer of events)."""

from __future__ import annotations

import ssl
import threading

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from monitor.config import BrokerConfig
from monitor.errors import MinewatchError

ACK_TIMEOUT_S = 10.0


class Publisher:
    def __init__(self, config: BrokerConfig, client_id: str) -> None:
        v5 = config.protocol == "5"
        self.client = mqtt.Client(
            CallbackAPIVersion.VERSION2,
            client_id=client_id,
            protocol=mqtt.MQTTv5 if v5 else mqtt.MQTTv311,
        )
        if config.username:
            self.client.username_pw_set(config.username, config.password.value or None)
        if config.tls:
            self.client.tls_set(ca_certs=config.ca_file or None, cert_reqs=ssl.CERT_REQUIRED)
        self.client.reconnect_delay_set(1, 10)
        self.connected = threading.Event()
        self.client.on_connect = lambda c, u, f, rc, p=None: (
            self.connected.set() if not rc.is_failure else None
        )
        self.client.on_disconnect = lambda c, u, f, rc, p=None: self.connected.clear()
        # MQTT 5 says in the PUBACK whether the broker took the message: an ACL's refusal
        # (e.g. the daemon's account used for the portal) is not a delivery.
        self.refused: dict[int, str] = {}
        self.client.on_publish = self._acknowledged
        self.url = config.url
        self.client.connect_async(config.host, config.port, keepalive=config.keepalive_s)
        self.client.loop_start()

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
        self.client.loop_stop()
        self.client.disconnect()
