"""The only module that touches paho-mqtt.

paho's network thread reads the socket; QoS 1 PUBLISH packets take a batched fast path
(``_ReceivingClient``) into a bounded ``Handoff``, everything else goes through paho
itself. Messages are acknowledged *manually*, only after the pipeline has committed them
to the store, so a crash between receipt and commit makes the broker redeliver them
(persistent session: fixed client id, no clean start, a session expiry).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import ssl
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import NamedTuple

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion, MQTTErrorCode, _ConnectionState
from paho.mqtt.exception import MalformedPacket
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.reasoncodes import ReasonCode

from monitor.config import BrokerConfig
from monitor.errors import OutputError
from monitor.wire.link_state import Backoff, LinkWatch, describe_connect_error
from monitor.wire.network_loop import stop_network_loop
from monitor.wire.quick_levels import Parsed
from rules.model import SoundLevels

log = logging.getLogger("minewatch.ingest")

# How many unacknowledged QoS 1 messages the broker may have in flight to us (MQTT 5
# Receive Maximum, at most 65535). The pipeline acks after each committed batch; a window
# several batches wide keeps the broker sending while a batch is being committed.
RECEIVE_MAXIMUM = 65535
_CHUNK = 256 * 1024  # bytes per socket read
_PUBLISH_QOS1 = 0x32  # PUBLISH, QoS 1, no DUP, no RETAIN; the flags are masked with 0xF6
_PUBACK = struct.Struct("!BBH")
# Bytes of messages the handoff holds at most, beside daemon.queue_size messages. It bounds
# what a flood of large payloads makes the network thread allocate ahead of the pipeline, and
# so what that thread's malloc arena keeps for reuse once they are freed: 600 MB of 1 MB
# messages left the daemon ~20 MB larger with 8 MiB here, ~27 MB with 16 MiB (issue 24).
MAX_QUEUED_BYTES = 8 * 1024 * 1024


Predecode = Callable[[str, bytes], SoundLevels | Parsed | None]  # topic, payload: wire_levels.predecode


class Inbound(NamedTuple):
    topic: str
    payload: bytes
    mid: int
    qos: int
    received: float  # time.time() on receipt
    decoded: SoundLevels | Parsed | None = None  # wire_levels.predecode, when it ran ahead of the pipeline
    session: int = 0  # which of the link's sessions received it (its ack goes back there)


class Handoff:
    """Bounded hand-over of message batches from the network thread to the pipeline.

    Bounded in *messages* and in *bytes*: a full handoff blocks the network thread, which
    stops reading the socket and so pushes back on the broker instead of growing memory.
    Each bound may be passed by the one batch that fills it (an empty handoff takes any).
    """

    def __init__(self, capacity: int, max_bytes: int = MAX_QUEUED_BYTES) -> None:
        self.capacity = capacity
        self.max_bytes = max_bytes
        self._batches: deque[tuple[list[Inbound], int]] = deque()
        self._count = 0
        self._bytes = 0
        self._cond = threading.Condition()

    def put(self, batch: list[Inbound], size: int | None = None) -> None:
        """Waits while the handoff is full. ``size``: the batch's bytes, when the caller knows
        them (the network thread: the packets' span in its buffer); else its payloads'."""
        if size is None:
            size = sum(len(m.payload) for m in batch)
        with self._cond:
            while self._count >= self.capacity or self._bytes >= self.max_bytes:
                self._cond.wait()
            self._batches.append((batch, size))
            self._count += len(batch)
            self._bytes += size
            self._cond.notify_all()

    def take(self, timeout: float, limit: int) -> list[Inbound]:
        """Up to about ``limit`` messages (whole batches), waiting up to ``timeout`` for the first."""
        with self._cond:
            if not self._batches and timeout > 0:
                self._cond.wait_for(lambda: bool(self._batches), timeout)
            taken: list[Inbound] = []
            while self._batches and (not taken or len(taken) + len(self._batches[0][0]) <= limit):
                batch, size = self._batches.popleft()
                taken += batch
                self._bytes -= size
            self._count -= len(taken)
            self._cond.notify_all()
            return taken

    def __len__(self) -> int:
        return self._count


_STOPPING = (_ConnectionState.MQTT_CS_DISCONNECTING, _ConnectionState.MQTT_CS_DISCONNECTED)


class WatchedClient(mqtt.Client):
    """paho's client reporting every connection attempt to a ``LinkWatch`` and using its backoff.

    paho swallows the exception of a failed attempt (it only logs "Connection failed,
    retrying" to its own logger, at debug level) and waits with its own doubling delay.
    Here ``reconnect`` records why the attempt failed and ``_reconnect_wait`` (a paho
    internal, as in ``_ReceivingClient``; paho is pinned below 3) waits the watch's
    delay, which logs the reason and the time of the next attempt. With a cluster's
    addresses (``broker.urls``) the watch's ``Failover`` picks the node of each attempt.
    """

    watch: LinkWatch | None = None

    def reconnect(self) -> MQTTErrorCode:
        watch = self.watch
        if watch is not None:
            # A cluster (broker.urls): each attempt after the first goes to the next node.
            self._host, self._port = watch.attempting()
        try:
            return super().reconnect()
        except OSError as exc:  # refused, not resolved, TLS (ssl.SSLError is an OSError), timeout
            if watch is not None:
                watch.failed(describe_connect_error(exc, self._host, self._port, self._ssl))
            raise

    def _reconnect_wait(self) -> None:
        if self.watch is None:
            super()._reconnect_wait()
            return
        deadline = time.monotonic() + self.watch.next_wait()
        while not self._thread_terminate and self._state not in _STOPPING:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(left, 0.05))


class _ReceivingClient(WatchedClient):
    """paho's client with a batched receive path for QoS 1 PUBLISH packets.

    paho reads a packet in three or more recv() calls and builds an MQTTMessage, logs and
    dispatches it through its callback machinery: draining a backlog that way measured
    ~16 k msg/s here, this path ~270 k msg/s. It reads the socket in large chunks, decodes
    the plain QoS 1 PUBLISH packets itself (fixed header, topic, packet id, MQTT 5 property
    length, payload: MQTT 5.0 section 3.3) and hands them over as one batch per chunk. Every
    other packet (CONNACK, SUBACK, PINGRESP, PUBACKs of our own publishes, QoS 0 and 2,
    PUBLISH with properties or a topic that is not UTF-8) goes to paho's own handler
    unchanged, in order. Uses paho's internal ``_in_packet`` / ``_packet_handle`` /
    ``_packet_queue``; paho is pinned below 3, and tests/monitor/daemon/test_ingest.py runs both
    paths against Mosquitto.
    """

    def __init__(
        self,
        *args: object,
        deliver: Callable[[list[Inbound], int], None],
        predecode: Predecode | None = None,
        **kwargs: object,
    ) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._deliver = deliver
        self.session = 0  # the index of this client's session in its MqttLink
        # Runs here, in the network thread, beside the pipeline's SQLite writes (which
        # release the GIL).
        self.predecode = predecode
        self._v5 = self._protocol == mqtt.MQTTv5
        self._rbuf = bytearray()
        self._rbuf_sock: object = None
        self.fast_path = True  # False: every packet through paho (the reference path, for tests)

    def loop_read(self, max_packets: int = 1) -> MQTTErrorCode:
        for _ in range(64):  # chunks per wake-up, so writes (our acks) get their turn
            if self._sock is None:
                return MQTTErrorCode.MQTT_ERR_NO_CONN
            rc = self._packet_read()
            if rc > 0:
                return self._loop_rc_handle(rc)
            if rc == MQTTErrorCode.MQTT_ERR_AGAIN:
                break
        return MQTTErrorCode.MQTT_ERR_SUCCESS

    def _packet_read(self) -> MQTTErrorCode:
        if self._rbuf_sock is not self._sock:  # a new connection: drop a partial packet of the old
            self._rbuf = bytearray()
            self._rbuf_sock = self._sock
        try:
            data = self._sock_recv(_CHUNK)
        except BlockingIOError:
            return MQTTErrorCode.MQTT_ERR_AGAIN
        except OSError as err:
            log.debug("failed to receive on socket: %s", err)
            return MQTTErrorCode.MQTT_ERR_CONN_LOST
        if not data:
            return MQTTErrorCode.MQTT_ERR_CONN_LOST
        with self._msgtime_mutex:
            self._last_bytes_received = mqtt.time_func()
        buf = self._rbuf
        buf += data
        rc, used = self._packets(buf)
        del buf[:used]
        return rc

    def _packets(self, buf: bytearray) -> tuple[MQTTErrorCode, int]:
        """Handle every complete packet in ``buf``; returns (rc, bytes used)."""
        batch: list[Inbound] = []
        now = time.time()
        pos, end = 0, len(buf)
        first = 0  # where the batch's first packet starts: the batch's bytes are pos - first
        v5, fast, session = self._v5, self.fast_path, self.session
        rc = MQTTErrorCode.MQTT_ERR_SUCCESS
        while pos + 2 <= end:
            # Fixed header: the packet type and flags, then the remaining length (1-4 bytes).
            command = buf[pos]
            header = _remaining_length(buf, pos + 1, end)
            if header is None:
                break  # the remaining length itself is incomplete
            length, i = header
            if length < 0:
                return MQTTErrorCode.MQTT_ERR_PROTOCOL, pos
            body, stop = i, i + length
            if stop > end:
                break  # the packet is incomplete: keep it for the next chunk
            message = None
            if fast and command & 0xF6 == _PUBLISH_QOS1:
                message = _fast_publish(buf, body, stop, v5, now, self.predecode, session)
            if message is not None:
                batch.append(message)
            else:
                if batch:  # keep the order: what came before goes first
                    self._deliver(batch, pos - first)
                    batch = []
                first = stop
                rc = self._paho_packet(command, bytes(buf[body:stop]), length)
                if rc != MQTTErrorCode.MQTT_ERR_SUCCESS:
                    return rc, stop
            pos = stop
        if batch:
            self._deliver(batch, pos - first)
        return rc, pos

    def _paho_packet(self, command: int, packet: bytes, length: int) -> MQTTErrorCode:
        self._in_packet = {
            "command": command,
            "have_remaining": 1,
            "remaining_count": [],
            "remaining_mult": 1,
            "remaining_length": length,
            "packet": bytearray(packet),
            "to_process": 0,
            "pos": 0,
        }
        try:
            return self._packet_handle()
        except MalformedPacket as exc:
            log.debug("Received malformed packet: %s", exc)
            return MQTTErrorCode.MQTT_ERR_PROTOCOL
        finally:
            self._in_packet["command"] = 0

    def ack_many(self, mids: Sequence[int]) -> None:
        """PUBACK every packet id, queued as one write (MQTT 5 allows omitting reason 0x00)."""
        if mids:
            blob = b"".join([_PUBACK.pack(0x40, 2, mid) for mid in mids])
            self._packet_queue(0x40, blob, 0, 0)


def _remaining_length(buf: bytearray, i: int, end: int) -> tuple[int, int] | None:
    """(length, index after it), None if incomplete, length -1 if malformed (over 4 bytes)."""
    length = shift = 0
    while i < end:
        byte = buf[i]
        i += 1
        length |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return length, i
        shift += 7
        if shift > 21:
            return -1, i
    return None


def _fast_publish(
    buf: bytearray,
    pos: int,
    stop: int,
    v5: bool,
    now: float,
    predecode: Predecode | None,
    session: int = 0,
) -> Inbound | None:
    """A plain QoS 1 PUBLISH as an Inbound; None if anything is unusual (paho handles it)."""
    if pos + 2 > stop:
        return None
    topic_end = pos + 2 + ((buf[pos] << 8) | buf[pos + 1])
    if topic_end + 2 > stop:
        return None
    mid = (buf[topic_end] << 8) | buf[topic_end + 1]
    payload_at = topic_end + 2
    if v5:
        if payload_at >= stop or buf[payload_at] != 0:
            return None  # properties present (or a topic alias): paho decodes them
        payload_at += 1
    try:
        topic = buf[pos + 2 : topic_end].decode("utf-8")
    except UnicodeDecodeError:
        return None
    if not topic or mid == 0:
        return None
    payload = bytes(buf[payload_at:stop])
    decoded = predecode(topic, payload) if predecode else None
    # tuple.__new__: a NamedTuple's own __new__ costs twice as much, once per message
    return tuple.__new__(Inbound, (topic, payload, mid, 1, now, decoded, session))


def session_client_id(config: BrokerConfig, topics: Sequence[str]) -> str:
    """``broker.client_id``, or the id and a digest: of the filter with a session per filter
    (stable whatever the order of the filters, so a restart finds each filter's session),
    keyed with ``broker.session_key`` when one is set, so that only its holders know the id
    (nats-server lets whoever logs in with a session's id end it)."""
    what = "\n".join(topics) if config.session_per_filter else ""
    key = config.session_key.value
    if key:
        return f"{config.client_id}-{hmac.new(key.encode(), what.encode(), 'sha256').hexdigest()[:24]}"
    if not config.session_per_filter:
        return config.client_id
    return f"{config.client_id}-{hashlib.sha256(what.encode()).hexdigest()[:10]}"


def authenticate(client: mqtt.Client, config: BrokerConfig) -> None:
    """The configured username/password and TLS (server certificate checked) on a paho client."""
    if config.username:
        client.username_pw_set(config.username, config.password.value or None)
    if config.tls:
        client.tls_set(ca_certs=config.ca_file or None, cert_reqs=ssl.CERT_REQUIRED)


class MqttLink:
    """Subscribe to inputs, hand messages to the pipeline, ack after commit, publish outputs.

    One persistent session, or with ``broker.session_per_filter`` one per topic filter: a
    nats-server session holds at most ``max_ack_pending`` unacknowledged messages over all
    its subscriptions, while each subscription's consumer may push that many; with two or
    more filters and a backlog the surplus is dropped at the server and comes back only
    after its ``ack_wait`` (30 s), so a backlog drained at ~67 msg/s (docs/PERFORMANCE.md).
    A session per filter leaves each consumer's own limit in charge. The first session
    publishes the daemon's outputs and its state is the link's state for ``status``.
    """

    def __init__(
        self,
        config: BrokerConfig,
        topics: Sequence[str],
        inbound: Handoff,
        predecode: Predecode | None = None,
        on_fatal: Callable[[str], None] | None = None,
    ) -> None:
        self.config = config
        self.topics = list(topics)
        self.inbound = inbound
        self.accepting = True
        groups = [[t] for t in self.topics] if config.session_per_filter else [self.topics]
        self.clients = [
            self._session(i, group, predecode, on_fatal) for i, group in enumerate(groups or [[]])
        ]
        self.client = self.clients[0]
        self.sessions_lost = 0  # reconnections that found no session at the broker (logged)
        self._connected_once: set[int] = set()

    def _session(
        self,
        index: int,
        topics: list[str],
        predecode: Predecode | None,
        on_fatal: Callable[[str], None] | None,
    ) -> _ReceivingClient:
        v5 = self.config.protocol == "5"
        client = _ReceivingClient(
            CallbackAPIVersion.VERSION2,
            deliver=self._deliver,
            predecode=predecode,
            client_id=session_client_id(self.config, topics),
            clean_session=None if v5 else False,
            protocol=mqtt.MQTTv5 if v5 else mqtt.MQTTv311,
            manual_ack=True,
            userdata=topics,
        )
        client.session = index
        authenticate(client, self.config)
        # Every failed attempt is logged with its reason and the next attempt; a refused
        # login calls on_fatal (the daemon stops: retrying cannot fix a password).
        client.watch = LinkWatch(self.config.addresses, log, Backoff(), on_fatal)
        client.max_queued_messages_set(100_000)
        client.on_connect = self._on_connect
        client.on_disconnect = self._on_disconnect
        client.on_message = self._on_message
        client.on_subscribe = self._on_subscribe
        return client

    @property
    def watch(self) -> LinkWatch:
        """The first session's watch: its state is what ``status`` records."""
        watch = self.client.watch
        assert watch is not None
        return watch

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        properties = None
        if self.config.protocol == "5":
            properties = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
            properties.SessionExpiryInterval = self.config.session_expiry_s
            properties.ReceiveMaximum = RECEIVE_MAXIMUM
        for client in self.clients:
            # Never a clean start: the session (and what the broker queued for us) must survive.
            # (MQTT 3.1.1 takes this from clean_session=False given to the client instead.)
            client.connect_async(
                self.config.host,
                self.config.port,
                self.config.keepalive_s,
                clean_start=False,
                properties=properties,
            )
            client.loop_start()

    def stop_accepting(self) -> None:
        """Stop taking new messages; unacked ones stay with the broker for the next run."""
        # No UNSUBSCRIBE: the persistent session must keep its subscriptions so the
        # broker queues what arrives while the daemon is down.
        self.accepting = False

    def close(self) -> None:
        try:
            for client in self.clients:
                client.disconnect()
        finally:
            for client in self.clients:
                stop_network_loop(client)
                if client.watch is not None:
                    client.watch.closed("the daemon stopped")

    @property
    def connected(self) -> bool:
        """Every session is connected."""
        return all(client.is_connected() for client in self.clients)

    @property
    def fatal(self) -> str | None:
        """Why the link gave up for good (a refused login), or None."""
        return next((c.watch.fatal for c in self.clients if c.watch is not None and c.watch.fatal), None)

    # ------------------------------------------------------------------ paho callbacks (network thread)

    @staticmethod
    def _watch_of(client: mqtt.Client) -> LinkWatch:
        watch = getattr(client, "watch", None)
        assert isinstance(watch, LinkWatch)
        return watch

    def _on_connect(
        self,
        client: mqtt.Client,
        userdata: list[str],
        flags: mqtt.ConnectFlags,
        reason: object,
        properties: object,
    ) -> None:
        watch = self._watch_of(client)
        if getattr(reason, "is_failure", False):
            if watch.refused(reason, self.config.username or None):
                client.disconnect()  # no retry: paho's loop ends
            return
        watch.up()
        session = getattr(client, "session", 0)
        if session in self._connected_once and not flags.session_present:
            # Ours was ended while we were away: by another client with our client id and a
            # clean session (nats-server binds sessions to the id, not the account), or a
            # broker that lost its store. What was queued for us in between is gone.
            self.sessions_lost += 1
            log.error(
                "Broker %s had no session for %s on reconnecting: what was queued for the daemon"
                " while it was away is lost (another client logged in with this client id and a"
                " clean session, or the broker lost its store; docs/DEPLOY.md)",
                watch.url,
                client._client_id.decode(),
            )
        self._connected_once.add(session)
        # Resubscribe on every connect: harmless when the session kept the subscriptions
        # (MQTT 5 section 3.2.2.1.1 session present), required when it did not.
        for topic in userdata:
            client.subscribe(topic, qos=1)
        log.info(
            "Connected to %s as %s (session present: %s)",
            watch.url,
            client._client_id.decode(),
            flags.session_present,
        )

    def _on_subscribe(
        self,
        client: mqtt.Client,
        userdata: object,
        mid: int,
        reasons: list[ReasonCode],
        properties: Properties,
    ) -> None:
        # Mosquitto grants a subscription its ACL does not allow (and delivers nothing on it);
        # nats-server refuses it in the SUBACK (0x80). Either way the daemon would wait for
        # data that never comes: say so.
        refused = [str(r) for r in reasons if r.is_failure]
        if refused:
            log.error(
                "Broker %s refused a subscription (%s); no data arrives on it: check the grants"
                " of the account %r (make-credentials)",
                self._watch_of(client).url,
                ", ".join(refused),
                self.config.username,
            )

    def _on_disconnect(
        self, client: mqtt.Client, userdata: object, flags: object, reason: object, properties: object
    ) -> None:
        if self.accepting:  # the reason and the next attempt are logged by the watch's wait
            self._watch_of(client).lost(reason)

    def _on_message(self, client: mqtt.Client, userdata: object, message: mqtt.MQTTMessage) -> None:
        payload = bytes(message.payload)
        session = getattr(client, "session", 0)
        inbound = Inbound(message.topic, payload, message.mid, message.qos, time.time(), None, session)
        self._deliver([inbound], len(payload))

    def _deliver(self, batch: list[Inbound], size: int) -> None:
        if not self.accepting:
            return  # not acked: the broker redelivers it to the next run
        self.inbound.put(batch, size)

    # ------------------------------------------------------------------ pipeline side

    def ack(self, messages: Sequence[Inbound]) -> None:
        if len(self.clients) == 1:
            self.client.ack_many([m.mid for m in messages if m.qos == 1])
        else:  # each packet id back to the session it came from
            by_session: dict[int, list[int]] = {}
            for m in messages:
                if m.qos == 1:
                    by_session.setdefault(m.session, []).append(m.mid)
            for session, mids in by_session.items():
                self.clients[session].ack_many(mids)
        for m in messages:
            if m.qos == 2:
                self.clients[m.session].ack(m.mid, m.qos)

    def publish(self, topic: str, payload: bytes, *, qos: int = 1, retain: bool = False) -> None:
        info = self.client.publish(topic, payload, qos=qos, retain=retain)
        if info.rc not in (mqtt.MQTT_ERR_SUCCESS, mqtt.MQTT_ERR_NO_CONN):
            raise OutputError(f"publish to {topic!r} failed: {mqtt.error_string(info.rc)}", retryable=True)
