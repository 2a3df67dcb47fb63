"""What an edge publisher sends, encoded once with monitor.wire, handed to an outlet.

    record ──wire.encode(record, key)──► (topic, payload) ──► Outlet.send (store and forward)

The outlet is ``sensors.link.Link`` in production and a list in tests. Status heartbeats
carry the queue's depth and what it had to drop (``queued``/``dropped``: fields the
daemon's codec accepts but ``SensorStatus`` does not hold), so they are built here.
"""

from __future__ import annotations

import json
import time
from typing import Any, Protocol

from monitor.config import SensorConfig, SiteConfig
from monitor.wire import Message, encode, payload_of, sensor_topic, sign
from rules.model import SensorStatus


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
    ) -> None:
        self.site = site
        self.sensor = sensor
        self.outlet = outlet
        self.backlog = backlog
        self.prefix = prefix
        self.key = signing_key(sensor)
        self.firmware = firmware
        self.sent = 0
        self.started = time.monotonic()

    def publish(self, record: Message) -> None:
        topic, payload = encode(record, self.key, self.prefix)
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
