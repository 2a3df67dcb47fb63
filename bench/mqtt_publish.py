"""A QoS 1 publisher for the benches: MQTT 3.1.1 PUBLISH packets written straight to a socket.

paho publishes about 6,000 messages a second on the benches' machines (a Python call, a lock and
a tracking object per message), so queueing 2,000 per sensor (2,000,000 messages) took about 5.5
minutes, twice a run, and a bench comparing sizes within one run could not repeat them. Written
as packets in 64 KiB batches, with a window of messages not yet acknowledged, the broker and the
payloads' encoding set the pace. Every message is acknowledged (PUBACK) before this returns, as
with paho's ``wait_for_publish``, so the backlog is the broker's when it does.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable

PUBACK = 0x40
WINDOW = 20_000  # messages sent and not acknowledged; below 65,535 so no packet id is reused in flight
BATCH_BYTES = 1 << 16


def publish_qos1(port: int, messages: Iterable[tuple[str, bytes]], client_id: str = "bench-pub") -> int:
    """Publish every (topic, payload) at QoS 1 to the broker on 127.0.0.1:``port``, in order, and
    wait until the broker has acknowledged each; returns how many."""
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.sendall(_connect(client_id))
        connack = _read_exactly(sock, 4)
        if connack[0] != 0x20 or connack[3] != 0:
            raise ConnectionError(f"the broker refused the publisher's CONNECT: {connack.hex()}")
        acks = _Acks(sock)
        sent = 0
        batch = bytearray()
        for topic, payload in messages:
            batch += _publish(topic, payload, sent % 65535 + 1)
            sent += 1
            if len(batch) >= BATCH_BYTES:
                sock.sendall(batch)
                batch.clear()
                acks.read(wait=sent - acks.count > WINDOW)
        sock.sendall(batch)
        while acks.count < sent:
            acks.read(wait=True)
        sock.sendall(b"\xe0\x00")  # DISCONNECT
    return sent


class _Acks:
    """The PUBACKs read so far (each four bytes in MQTT 3.1.1)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock, self.count, self._partial = sock, 0, b""

    def read(self, *, wait: bool) -> None:
        """Count what has arrived; with ``wait``, block until something has."""
        try:
            data = self.sock.recv(1 << 16, 0 if wait else socket.MSG_DONTWAIT)
        except BlockingIOError:
            return
        if not data:
            raise ConnectionError(f"the broker closed the publisher's connection after {self.count} PUBACKs")
        data = self._partial + data
        whole = len(data) // 4 * 4
        if any(data[i] != PUBACK for i in range(0, whole, 4)):
            raise ConnectionError("the broker sent the publisher something other than a PUBACK")
        self.count += whole // 4
        self._partial = data[whole:]


def _connect(client_id: str) -> bytes:
    """CONNECT, MQTT 3.1.1, a clean session and no keep-alive (the publisher's life is short)."""
    cid = client_id.encode()
    body = b"\x00\x04MQTT\x04\x02\x00\x00" + len(cid).to_bytes(2, "big") + cid
    return b"\x10" + _remaining_length(len(body)) + body


def _publish(topic: str, payload: bytes, packet_id: int) -> bytes:
    name = topic.encode()
    size = 2 + len(name) + 2 + len(payload)
    return (
        b"\x32"  # PUBLISH, QoS 1
        + _remaining_length(size)
        + len(name).to_bytes(2, "big")
        + name
        + packet_id.to_bytes(2, "big")
        + payload
    )


def _remaining_length(n: int) -> bytes:
    out = bytearray()
    while True:
        n, digit = divmod(n, 128)
        out.append(digit | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _read_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("the broker closed the publisher's connection before its CONNACK")
        data += chunk
    return data
