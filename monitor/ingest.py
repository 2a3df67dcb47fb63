"""The only module that touches paho-mqtt.

paho's network thread calls ``_on_message``; we copy the message into our own
frozen ``Inbound`` and put it on a bounded queue (a full queue blocks paho's
thread, which pushes back on the broker instead of growing memory). Messages are
acknowledged *manually*, only after the pipeline has committed them to the store,
so a crash between receipt and commit makes the broker redeliver them
(persistent session: fixed client id, no clean start, a session expiry).
"""

from __future__ import annotations

import logging
import queue
import ssl
import time
from collections.abc import Sequence
from dataclasses import dataclass

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion, MQTTErrorCode
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from monitor.config import BrokerConfig
from monitor.errors import OutputError

log = logging.getLogger("minewatch.ingest")

# How many unacknowledged QoS 1 messages the broker may have in flight to us (MQTT 5
# Receive Maximum). The pipeline acks after each committed batch, so this bounds a batch.
RECEIVE_MAXIMUM = 10000


class _DrainingClient(mqtt.Client):
    """paho's client, reading every packet the socket holds per wake-up.

    paho 2.x reads one packet per select() when it has no messages of its own in flight
    (our QoS 1 receipts with manual acks are not counted), which costs a select round per
    message. Reading until the socket would block measured ~30 % faster draining a backlog
    (bench/ingest.py). Uses paho's internal ``_packet_read``; paho is pinned below 3.
    """

    def loop_read(self, max_packets: int = 1) -> MQTTErrorCode:
        for _ in range(max(max_packets, 1000)):
            if self._sock is None:
                return MQTTErrorCode.MQTT_ERR_NO_CONN
            rc = self._packet_read()
            if rc > 0:
                return self._loop_rc_handle(rc)
            if rc == MQTTErrorCode.MQTT_ERR_AGAIN:
                break
        return MQTTErrorCode.MQTT_ERR_SUCCESS


@dataclass(frozen=True, slots=True)
class Inbound:
    topic: str
    payload: bytes
    mid: int
    qos: int
    received: float  # time.time() on receipt


class MqttLink:
    """Subscribe to inputs, hand messages to the pipeline, ack after commit, publish outputs."""

    def __init__(self, config: BrokerConfig, topics: Sequence[str], inbound: queue.Queue[Inbound]) -> None:
        self.config = config
        self.topics = list(topics)
        self.inbound = inbound
        self.accepting = True
        v5 = config.protocol == "5"
        self.client = _DrainingClient(
            CallbackAPIVersion.VERSION2,
            client_id=config.client_id,
            clean_session=None if v5 else False,
            protocol=mqtt.MQTTv5 if v5 else mqtt.MQTTv311,
            manual_ack=True,
        )
        if config.username:
            self.client.username_pw_set(config.username, config.password.value or None)
        if config.tls:
            self.client.tls_set(ca_certs=config.ca_file or None, cert_reqs=ssl.CERT_REQUIRED)
        self.client.reconnect_delay_set(min_delay=1, max_delay=30)
        self.client.max_queued_messages_set(100_000)
        self.client.on_connect = self._on_connect
        self.client.on_disconnect = self._on_disconnect
        self.client.on_message = self._on_message

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        properties = None
        if self.config.protocol == "5":
            properties = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
            properties.SessionExpiryInterval = self.config.session_expiry_s
            properties.ReceiveMaximum = RECEIVE_MAXIMUM
        # Never a clean start: the session (and what the broker queued for us) must survive.
        # (MQTT 3.1.1 takes this from clean_session=False given to the client instead.)
        self.client.connect_async(
            self.config.host,
            self.config.port,
            self.config.keepalive_s,
            clean_start=False,
            properties=properties,
        )
        self.client.loop_start()

    def stop_accepting(self) -> None:
        """Stop taking new messages; unacked ones stay with the broker for the next run."""
        # No UNSUBSCRIBE: the persistent session must keep its subscriptions so the
        # broker queues what arrives while the daemon is down.
        self.accepting = False

    def close(self) -> None:
        try:
            self.client.disconnect()
        finally:
            self.client.loop_stop()

    # ------------------------------------------------------------------ paho callbacks (network thread)

    def _on_connect(
        self,
        client: mqtt.Client,
        userdata: object,
        flags: mqtt.ConnectFlags,
        reason: object,
        properties: object,
    ) -> None:
        if getattr(reason, "is_failure", False):
            log.error("Broker %s refused the connection: %s", self.config.url, reason)
            return
        # Resubscribe on every connect: harmless when the session kept the subscriptions
        # (MQTT 5 section 3.2.2.1.1 session present), required when it did not.
        for topic in self.topics:
            client.subscribe(topic, qos=1)
        log.info("Connected to %s (session present: %s)", self.config.url, flags.session_present)

    def _on_disconnect(
        self, client: mqtt.Client, userdata: object, flags: object, reason: object, properties: object
    ) -> None:
        if self.accepting:
            log.warning("Disconnected from %s (%s); reconnecting with backoff", self.config.url, reason)

    def _on_message(self, client: mqtt.Client, userdata: object, message: mqtt.MQTTMessage) -> None:
        if not self.accepting:
            return  # not acked: the broker redelivers it to the next run
        self.inbound.put(
            Inbound(message.topic, bytes(message.payload), message.mid, message.qos, time.time())
        )

    # ------------------------------------------------------------------ pipeline side

    def ack(self, messages: Sequence[Inbound]) -> None:
        for m in messages:
            if m.qos > 0:
                self.client.ack(m.mid, m.qos)

    def publish(self, topic: str, payload: bytes, *, qos: int = 1, retain: bool = False) -> None:
        info = self.client.publish(topic, payload, qos=qos, retain=retain)
        if info.rc not in (mqtt.MQTT_ERR_SUCCESS, mqtt.MQTT_ERR_NO_CONN):
            raise OutputError(f"publish to {topic!r} failed: {mqtt.error_string(info.rc)}", retryable=True)
