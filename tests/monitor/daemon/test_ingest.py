"""The MQTT receive path: the batched PUBLISH decoder, the handoff, manual acks.

The decoder is checked at the byte level (packets split anywhere across socket reads) and
against paho's own packet handling on a real Mosquitto: both paths must deliver the same
messages, and what the daemon acks must not come back while what it did not ack must.
"""

from __future__ import annotations

import struct
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion, MQTTErrorCode
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from monitor.config import BrokerConfig
from monitor.daemon.ingest import Handoff, Inbound, MqttLink, _ReceivingClient
from monitor.wire.network_loop import stop_network_loop
from tests.support.servers import Mosquitto


def remaining_length(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n % 128, n // 128
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def publish_packet(
    topic: bytes, payload: bytes, mid: int, *, v5: bool, qos: int = 1, properties: bytes = b""
) -> bytes:
    body = struct.pack("!H", len(topic)) + topic
    if qos:
        body += struct.pack("!H", mid)
    if v5:
        body += remaining_length(len(properties)) + properties
    body += payload
    return bytes([0x30 | (qos << 1)]) + remaining_length(len(body)) + body


class Recorder(_ReceivingClient):
    """The receiving client without a socket: records batches and the packets left to paho."""

    def __init__(self, v5: bool) -> None:
        self.batches: list[list[Inbound]] = []
        self.to_paho: list[tuple[int, bytes]] = []
        self.order: list[str] = []
        super().__init__(
            CallbackAPIVersion.VERSION2,
            deliver=self._record,
            protocol=mqtt.MQTTv5 if v5 else mqtt.MQTTv311,
            manual_ack=True,
        )

    def _record(self, batch: list[Inbound], size: int) -> None:
        self.batches.append(batch)
        self.order += [m.topic for m in batch]

    def _paho_packet(self, command: int, packet: bytes, length: int) -> MQTTErrorCode:
        self.to_paho.append((command, packet))
        self.order.append(f"paho:{command:#x}")
        return MQTTErrorCode.MQTT_ERR_SUCCESS

    def feed(self, *chunks: bytes) -> MQTTErrorCode:
        """As _packet_read does with successive socket reads."""
        buf = bytearray()
        rc = MQTTErrorCode.MQTT_ERR_SUCCESS
        for chunk in chunks:
            buf += chunk
            rc, used = self._packets(buf)
            del buf[:used]
            if rc != MQTTErrorCode.MQTT_ERR_SUCCESS:
                return rc
        assert not buf, "bytes left over after the last chunk"
        return rc

    @property
    def messages(self) -> list[tuple[str, bytes, int]]:
        return [(m.topic, m.payload, m.mid) for batch in self.batches for m in batch]


@pytest.mark.parametrize("v5", [True, False], ids=["mqtt5", "mqtt311"])
def test_packets_split_anywhere_across_reads_decode_the_same(v5: bool) -> None:
    packets = [
        publish_packet(b"minewatch/q/sensors/n1/levels", b'{"LAeq":61.5}', 1, v5=v5),
        publish_packet(b"minewatch/q/sensors/n2/levels", b"x" * 200, 2, v5=v5),  # 2-byte length
        publish_packet(b"minewatch/q/sensors/n3/audio", bytes(range(256)) * 80, 65535, v5=v5),  # 3 bytes
        publish_packet("minewatch/q/événements".encode(), b"", 7, v5=v5),  # UTF-8 topic, empty payload
    ]
    stream = b"".join(packets)
    expected = [
        ("minewatch/q/sensors/n1/levels", b'{"LAeq":61.5}', 1),
        ("minewatch/q/sensors/n2/levels", b"x" * 200, 2),
        ("minewatch/q/sensors/n3/audio", bytes(range(256)) * 80, 65535),
        ("minewatch/q/événements", b"", 7),
    ]
    whole = Recorder(v5)
    assert whole.feed(stream) == MQTTErrorCode.MQTT_ERR_SUCCESS
    assert whole.messages == expected
    assert len(whole.batches) == 1  # one read, one batch
    for cut in range(1, len(stream)):
        split = Recorder(v5)
        split.feed(stream[:cut], stream[cut:])
        assert split.messages == expected, f"cut at byte {cut}"
        assert not split.to_paho


def test_unusual_packets_go_to_paho_in_their_place() -> None:
    props = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
    props.UserProperty = ("k", "v")
    packets = [
        publish_packet(b"a/1", b"one", 1, v5=True),
        publish_packet(b"a/2", b"props", 2, v5=True, properties=props.pack()[1:]),  # properties present
        publish_packet(b"a/3", b"three", 3, v5=True),
        publish_packet(b"a/4", b"qos0", 0, v5=True, qos=0),
        publish_packet(b"\xff\xfe", b"bad topic", 5, v5=True),  # not UTF-8
        bytes([0x90, 3, 0, 1, 1]),  # SUBACK
        bytes([0xD0, 0]),  # PINGRESP
        publish_packet(b"a/6", b"six", 6, v5=True),
    ]
    client = Recorder(v5=True)
    assert client.feed(b"".join(packets)) == MQTTErrorCode.MQTT_ERR_SUCCESS
    assert client.order == [
        "a/1",
        "paho:0x32",
        "a/3",
        "paho:0x30",
        "paho:0x32",
        "paho:0x90",
        "paho:0xd0",
        "a/6",
    ]
    # What was delivered before a paho packet went out before paho handled it.
    assert [[m.topic for m in b] for b in client.batches] == [["a/1"], ["a/3"], ["a/6"]]


def test_a_remaining_length_over_four_bytes_is_a_protocol_error() -> None:
    client = Recorder(v5=True)
    rc = client.feed(bytes([0x32, 0xFF, 0xFF, 0xFF, 0xFF, 0x01]))
    assert rc == MQTTErrorCode.MQTT_ERR_PROTOCOL


def test_retained_and_duplicate_flags_still_take_the_fast_path() -> None:
    packet = bytearray(publish_packet(b"a/1", b"p", 9, v5=True))
    packet[0] |= 0x08 | 0x01  # DUP, RETAIN
    client = Recorder(v5=True)
    client.feed(bytes(packet))
    assert client.messages == [("a/1", b"p", 9)]


def test_handoff_is_bounded_in_messages_and_takes_whole_batches() -> None:
    handoff = Handoff(capacity=5)
    handoff.put([Inbound(f"t{i}", b"", i, 1, 0.0) for i in range(3)])
    handoff.put([Inbound(f"u{i}", b"", i, 1, 0.0) for i in range(3)])
    assert len(handoff) == 6
    blocked = threading.Event()
    released = threading.Event()

    def producer() -> None:
        blocked.set()
        handoff.put([Inbound("v", b"", 1, 1, 0.0)])  # over capacity: waits
        released.set()

    threading.Thread(target=producer, daemon=True).start()
    blocked.wait(5)
    assert not released.wait(0.3)
    first = handoff.take(timeout=0.0, limit=4)
    assert [m.topic for m in first] == ["t0", "t1", "t2"]  # a second batch would exceed the limit
    assert released.wait(5)
    rest = handoff.take(timeout=0.0, limit=100)
    assert [m.topic for m in rest] == ["u0", "u1", "u2", "v"]
    assert handoff.take(timeout=0.05, limit=100) == []


# ---------------------------------------------------------------------------- against Mosquitto


def collect(link: MqttLink, handoff: Handoff, count: int, timeout: float = 20) -> list[Inbound]:
    got: list[Inbound] = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        got += handoff.take(timeout=0.2, limit=10_000)
    return got


@contextmanager
def publisher(broker: Mosquitto) -> Iterator[mqtt.Client]:
    client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="test-pub", protocol=mqtt.MQTTv5)
    client.connect("127.0.0.1", broker.port)
    client.loop_start()
    try:
        yield client
    finally:
        stop_network_loop(client)
        client.disconnect()


def publish_mixed(client: mqtt.Client, n: int) -> list[tuple[str, bytes, int]]:
    """Plain QoS 1 messages with a few that paho must handle interleaved."""
    sent = []
    for i in range(n):
        topic, payload = f"minewatch/q/sensors/n{i % 7}/levels", f'{{"i":{i}}}'.encode()
        if i % 50 == 10:
            props = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
            props.UserProperty = ("i", str(i))
            info = client.publish(topic, payload, qos=1, properties=props)
        elif i % 50 == 20:
            info = client.publish(topic, payload, qos=0)
        else:
            info = client.publish(topic, payload, qos=1)
        info.wait_for_publish(10)
        sent.append((topic, payload, 0 if i % 50 == 20 else 1))
    return sent


@pytest.mark.parametrize("protocol", ["5", "3.1.1"])
@pytest.mark.parametrize("fast", [True, False], ids=["fast-path", "paho-path"])
def test_both_paths_deliver_every_message_and_acked_ones_do_not_return(
    mosquitto: Mosquitto, protocol: str, fast: bool
) -> None:
    config = BrokerConfig(url=mosquitto.url, client_id=f"ingest-{protocol}-{fast}", protocol=protocol)

    def connect() -> tuple[MqttLink, Handoff]:
        handoff = Handoff(100_000)
        link = MqttLink(config, ["minewatch/+/sensors/#"], handoff)
        link.client.fast_path = fast
        connected = threading.Event()
        link.client.on_subscribe = lambda *a: connected.set()
        link.start()
        assert connected.wait(10)
        return link, handoff

    def kept(payload: bytes) -> bool:  # not acked; few: MQTT 3.1.1 gets max_inflight_messages (100)
        return int(payload[5:-1]) % 50 == 33

    link, handoff = connect()
    sent: list[tuple[str, bytes, int]] = []
    got: list[Inbound] = []
    with publisher(mosquitto) as client:
        done = threading.Thread(target=lambda: sent.extend(publish_mixed(client, 400)))
        done.start()
        deadline = time.monotonic() + 30
        while (done.is_alive() or len(got) < len(sent)) and time.monotonic() < deadline:
            batch = handoff.take(timeout=0.2, limit=10_000)
            got += batch
            link.ack([m for m in batch if not kept(m.payload)])
        done.join()
    assert sorted((m.topic, m.payload, m.qos) for m in got) == sorted(sent)
    time.sleep(0.5)  # let the acks go out
    link.stop_accepting()
    link.close()

    # The session kept what was not acked: exactly those QoS 1 messages come back.
    link, handoff = connect()
    again = collect(link, handoff, 1000, timeout=3)
    expected = sorted((t, p) for t, p, q in sent if q == 1 and kept(p))
    assert len(expected) == 8
    assert sorted((m.topic, m.payload) for m in again) == expected
    link.ack(again)
    link.stop_accepting()
    link.close()
