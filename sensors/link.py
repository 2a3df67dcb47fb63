"""The only module of sensors/ that touches paho-mqtt: forward a ForwardQueue to the broker.

    caller thread: put ──► ForwardQueue ──pump()──► paho publish (QoS 1, ≤ window in flight)
    paho thread:   PUBACK ──► on_publish(mid) ──► acked set ──pump()──► ForwardQueue.delete

paho's callbacks run on its network thread; they only touch a lock-protected set of
acknowledged message ids and a connected flag. Everything else (SQLite, the order of
sending) stays on the caller's thread, which calls ``pump()`` between readings.

Order and loss: rows are handed to paho in id order, at most ``window`` unacknowledged at a
time. After a disconnect paho resends its unacknowledged messages first, in order (MQTT
3.1.1 section 4.4 / MQTT 5 section 4.4: a client resends unacknowledged PUBLISH packets with
DUP set), and only then does ``pump`` hand out newer rows, so the broker sees the
original order. A row is deleted only on PUBACK; after a publisher restart every row left
on disk is sent again (at least once: the daemon drops duplicates by sensor and time).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from monitor.config import BrokerConfig
from monitor.daemon.ingest import WatchedClient, authenticate
from monitor.wire.link_state import Backoff, LinkWatch
from monitor.wire.network_loop import stop_network_loop
from sensors.queue import MessageQueue

log = logging.getLogger("minewatch.sensors.link")


class Link:
    """One MQTT connection draining one queue (on disk or in memory) at QoS 1."""

    def __init__(
        self,
        broker: BrokerConfig,
        client_id: str,
        queue: MessageQueue,
        *,
        window: int = 100,
        on_connect: Callable[[], None] | None = None,
        on_fatal: Callable[[str], None] | None = None,
        backoff: Backoff | None = None,
    ) -> None:
        if window < 1:
            raise ValueError(f"window: must be at least 1, got {window}")
        self.broker = broker
        self.queue = queue
        self.window = window
        self.on_connect = on_connect
        self.connected = threading.Event()
        self.connects = 0
        self.closing = False
        self._lock = threading.Lock()
        self._acked: set[int] = set()
        self._early: set[int] = set()
        self._refused: list[str] = []
        self.refused = 0  # messages the broker acknowledged with a failure reason (e.g. not authorized)
        self.delivered = 0  # messages the broker acknowledged as taken (PUBACK without a failure)
        self._inflight: dict[int, int] = {}  # paho mid -> queue row id
        self._handed_until = 0  # highest row id given to paho
        v5 = broker.protocol == "5"
        self.client = WatchedClient(
            CallbackAPIVersion.VERSION2,
            client_id=client_id,
            protocol=mqtt.MQTTv5 if v5 else mqtt.MQTTv311,
            clean_session=None if v5 else True,
        )
        authenticate(self.client, broker)
        # Each failed attempt logged with its reason and the next attempt (fast retries for
        # a broker that was up a moment ago); a refused login calls on_fatal, never retried.
        self.watch = LinkWatch(broker.addresses, log, backoff or Backoff(), on_fatal)
        self.client.watch = self.watch
        self.client.max_inflight_messages_set(window)
        self.client.max_queued_messages_set(0)  # bounded by our window instead
        self.client.on_connect = self._on_connect
        self.client.on_disconnect = self._on_disconnect
        self.client.on_publish = self._on_publish

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Connect in the background; an unreachable broker is retried for ever, never fatal."""
        self.client.connect_async(self.broker.host, self.broker.port, self.broker.keepalive_s)
        self.client.loop_start()

    def close(self, drain_timeout: float = 0.0, abandon: threading.Event | None = None) -> bool:
        """Disconnect after trying to send what is queued for up to ``drain_timeout`` seconds
        (less once ``abandon`` is set: a second Ctrl-C).

        Returns True if the queue was empty at the end; what is left stays on disk.
        """
        drained = (
            self.drain(drain_timeout, abandon)
            if drain_timeout > 0 and self.fatal is None
            else len(self.queue) == 0
        )
        self.closing = True
        self.client.disconnect()
        stop_network_loop(self.client)
        return drained

    # ------------------------------------------------------------------ caller thread

    def pump(self) -> int:
        """Forget acknowledged rows, hand new ones to paho while connected; returns rows now in flight."""
        with self._lock:
            acked, self._acked = self._acked, set()
            refused, self._refused = self._refused, []
        for topic_reason in refused:
            log.warning("Broker refused a message: %s", topic_reason)
        done: list[int] = []
        early: set[int] = set()
        for mid in acked | self._early:
            row_id = self._inflight.pop(mid, None)
            if row_id is None:
                early.add(mid)
            else:
                done.append(row_id)
        # A PUBACK can overtake the bookkeeping after publish() below; give it one more pump
        # to be matched, then forget it (mids wrap around at 65535).
        self._early = early - self._early
        self.queue.delete(done)
        if not self.connected.is_set():
            return len(self._inflight)
        room = self.window - len(self._inflight)
        if room <= 0:
            return len(self._inflight)
        for row in self.queue.next_batch(self._handed_until, room):
            info = self.client.publish(row.topic, row.payload, qos=row.qos)
            # NO_CONN: paho keeps the message and sends it after the reconnect, so it is in flight.
            if info.rc not in (mqtt.MQTT_ERR_SUCCESS, mqtt.MQTT_ERR_NO_CONN):
                log.warning(
                    "Publish to %r refused by paho (%s); retrying later",
                    row.topic,
                    mqtt.error_string(info.rc),
                )
                break
            self._inflight[info.mid] = row.id
            self._handed_until = row.id
        return len(self._inflight)

    def send(self, topic: str, payload: bytes, qos: int = 1) -> None:
        """Queue one message and forward what the window allows (never blocks on the network)."""
        self.queue.put(topic, payload, qos)
        self.pump()

    def send_bounded(self, topic: str, payload: bytes, qos: int = 1, max_backlog: int = 1000) -> None:
        """Like ``send`` but wait while more than ``max_backlog`` messages wait (the simulator's pace)."""
        self.queue.put(topic, payload, qos)
        self.pump()
        while len(self.queue) > max_backlog:
            time.sleep(0.001)
            self.pump()

    def drain(self, timeout: float, abandon: threading.Event | None = None) -> bool:
        """Pump until the queue is empty, ``timeout`` seconds pass or ``abandon`` is set."""
        deadline = time.monotonic() + timeout
        while len(self.queue) and time.monotonic() < deadline and not (abandon and abandon.is_set()):
            self.pump()
            time.sleep(0.005)
        self.pump()
        return len(self.queue) == 0

    @property
    def in_flight(self) -> int:
        return len(self._inflight)

    @property
    def fatal(self) -> str | None:
        """Why the link gave up for good (the broker refused the login), or None."""
        return self.watch.fatal

    # ------------------------------------------------------------------ paho thread

    def _on_connect(
        self,
        client: mqtt.Client,
        userdata: object,
        flags: mqtt.ConnectFlags,
        reason: object,
        properties: object,
    ) -> None:
        if getattr(reason, "is_failure", False):
            if self.watch.refused(reason, self.broker.username or None):
                client.disconnect()  # no retry: paho's loop ends
            return
        self.watch.up()
        self.connects += 1
        log.info("Connected to %s", self.watch.url)
        self.connected.set()
        if self.on_connect is not None:
            self.on_connect()

    def _on_disconnect(
        self, client: mqtt.Client, userdata: object, flags: object, reason: object, properties: object
    ) -> None:
        if not self.closing:
            if self.connected.is_set():
                log.warning("Disconnected from %s (%s); queueing until it is back", self.watch.url, reason)
            self.watch.lost(reason)  # the reason and the next attempt are logged by the watch's wait
        self.connected.clear()

    def _on_publish(
        self, client: mqtt.Client, userdata: object, mid: int, reason: object, properties: object
    ) -> None:
        with self._lock:
            self._acked.add(mid)
            # MQTT 5 PUBACK reason >= 0x80: the broker will never take it (an ACL, a quota);
            # resending would block the queue behind it, so it is logged and dropped.
            if getattr(reason, "is_failure", False):
                self.refused += 1
                self._refused.append(str(reason))
            else:
                self.delivered += 1
