"""What an edge publisher sends, encoded once with monitor.wire.codec, handed to an outlet.

    record ──wire.encode(record, key)──► (topic, payload) ──► Outlet.send (store and forward)

The outlet is ``sensors.link.Link`` in production and a list in tests. Status heartbeats
carry the queue's depth and what it had to drop (``queued``/``dropped``: fields the
daemon's codec accepts but ``SensorStatus`` does not hold), so they are built here.

Size: no message leaves here larger than the daemon accepts (``daemon.max_payload_bytes``)
or the shipped broker lets through (``max_packet_size`` 2 MiB in
deploy/mosquitto/mosquitto.conf; a bigger packet makes Mosquitto disconnect the
publisher, which would then resend it after every reconnect and never get past it).
Raw audio too long for one message is sent as consecutive shorter blocks
(``split_audio``), which the daemon's meter reads as one continuous stream; any other
record that large is dropped with an error (it could never be delivered).
"""

from __future__ import annotations

import json
import logging
import math
import time
from dataclasses import replace
from datetime import timedelta
from typing import Any, Protocol

from monitor.config import SensorConfig, SiteConfig
from monitor.wire.codec import AudioBlock, Message, encode, payload_of, sign
from monitor.wire.protocol import AUDIO_FORMATS, sensor_topic
from rules.model import SensorStatus

log = logging.getLogger("minewatch.sensors.publisher")

BROKER_MAX_PACKET_BYTES = 2 * 1024 * 1024  # max_packet_size in deploy/mosquitto/mosquitto.conf
# What an MQTT PUBLISH adds around the payload besides its topic: fixed header (<= 5 bytes),
# topic length, packet id, MQTT 5 properties; generously rounded up.
PACKET_OVERHEAD_BYTES = 256
DEFAULT_MAX_PAYLOAD_BYTES = 1_048_576  # the daemon's default daemon.max_payload_bytes


class Outlet(Protocol):
    def send(self, topic: str, payload: bytes, qos: int = 1) -> None: ...


class Backlog(Protocol):
    def __len__(self) -> int: ...

    def take_unreported_drops(self) -> int: ...


def signing_key(sensor: SensorConfig) -> bytes | None:
    return sensor.signing_key.value.encode() if sensor.signing_key else None


def encode_status(
    status: SensorStatus, extra: dict[str, Any], key: bytes | None, prefix: str = "minewatch"
) -> tuple[str, bytes]:
    """A status heartbeat with extra fields (queued, dropped, uptime_s, firmware), signed if keyed."""
    data = payload_of(status)
    data.update({k: v for k, v in extra.items() if v is not None})
    if key:
        data["sig"] = sign(data, key)
    return sensor_topic(status.site, status.sensor, "status", prefix), json.dumps(
        data, separators=(",", ":")
    ).encode()


def split_audio(block: AudioBlock, max_pcm_bytes: int) -> list[AudioBlock]:
    """``block`` as consecutive blocks of at most ``max_pcm_bytes`` of PCM each.

    Parts start on whole milliseconds (the wire's time resolution), so each part's ``ts``
    is exactly where the previous one ended and the daemon's meter runs straight on.
    Every part keeps the block's ``seq``; their times tell them apart (the daemon keys
    audio by sensor and time).
    """
    width = AUDIO_FORMATS[block.sample_format][1]
    if len(block.pcm) <= max_pcm_bytes:
        return [block]
    unit = block.sample_rate // math.gcd(block.sample_rate, 1000)  # samples in whole milliseconds
    per_part = max_pcm_bytes // (unit * width) * unit
    if per_part <= 0:
        raise ValueError(
            f"audio at {block.sample_rate} Hz cannot be split into parts of at most {max_pcm_bytes} bytes"
        )
    samples = len(block.pcm) // width
    return [
        replace(
            block,
            ts=block.ts + timedelta(milliseconds=start * 1000 // block.sample_rate),
            pcm=block.pcm[start * width : min(start + per_part, samples) * width],
        )
        for start in range(0, samples, per_part)
    ]


class Publisher:
    """Encodes and signs one sensor's records and passes them on; counts what it sent."""

    def __init__(
        self,
        site: SiteConfig,
        sensor: SensorConfig,
        outlet: Outlet,
        backlog: Backlog | None = None,
        prefix: str = "minewatch",
        firmware: str = "",
        max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
    ) -> None:
        self.site = site
        self.sensor = sensor
        self.outlet = outlet
        self.backlog = backlog
        self.prefix = prefix
        self.key = signing_key(sensor)
        self.firmware = firmware
        self.max_payload_bytes = max_payload_bytes
        self.sent = 0
        self.oversized = 0  # records dropped because no message could carry them
        self.started = time.monotonic()

    def payload_limit(self, topic: str) -> int:
        """The largest payload on ``topic`` that both the broker and the daemon accept."""
        room = BROKER_MAX_PACKET_BYTES - PACKET_OVERHEAD_BYTES - len(topic.encode())
        return min(self.max_payload_bytes, room)

    def publish(self, record: Message) -> None:
        topic, payload = encode(record, self.key, self.prefix)
        limit = self.payload_limit(topic)
        if len(payload) > limit:
            if not isinstance(record, AudioBlock):
                self.oversized += 1
                log.error("Dropped %d bytes for %s: over the %d-byte limit", len(payload), topic, limit)
                return
            # The header can grow by a few bytes in a part (a ts with milliseconds): keep room.
            header = len(payload) - len(record.pcm) + 16
            for part in split_audio(record, limit - header):
                self.outlet.send(*encode(part, self.key, self.prefix))
        else:
            self.outlet.send(topic, payload)
        self.sent += 1

    def heartbeat(self, status: SensorStatus) -> None:
        extra: dict[str, Any] = {
            "uptime_s": round(time.monotonic() - self.started, 1),
            "firmware": self.firmware or None,
        }
        if self.backlog is not None:
            extra["queued"] = len(self.backlog)
            extra["dropped"] = self.backlog.take_unreported_drops()
        topic, payload = encode_status(status, extra, self.key, self.prefix)
        self.outlet.send(topic, payload)
        self.sent += 1
