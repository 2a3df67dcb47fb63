"""Test helpers shared by several test modules (from tests/sensors/conftest.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from monitor.wire.network_loop import stop_network_loop

SITE_TOML = """
[broker]
url = "{url}"
client_id = "minewatch-daemon-test"

[storage]
path = "{store}"

[daemon]
clock = "data"            # simulations run faster than real time
max_age_s = 40000000      # ... and in the past
lateness_s = 600
status_interval_s = 60

[[sites]]
id = "dovre-quarry"
name = "Dovre Township Quarry"
timezone = "America/Chicago"
latitude = 45.27
longitude = -91.62
preexisting = true
[[sites.gates]]
id = "gate-north"
[[sites.gates]]
id = "gate-east"
[[sites.sensors]]
id = "n1"
gates = ["gate-north"]
{n1_extra}
[[sites.sensors]]
id = "n2"
gates = ["gate-east"]
[[sites.sensors]]
id = "n3"
[[sites.sensors]]
id = "l1"
kind = "light"
expected_period_s = 10
[[sites.sensors]]
id = "l2"
kind = "light"
expected_period_s = 10
[[sites.sensors]]
id = "wx1"
kind = "weather"
expected_period_s = 60
"""


def site_config(tmp: Path, url: str, n1_extra: str = "") -> Path:
    """The Dovre quarry with three meters, two light sensors and a weather station."""
    path = tmp / "site.toml"
    path.write_text(SITE_TOML.format(url=url, store=tmp / "store.db", n1_extra=n1_extra))
    return path


class Subscriber:
    """A persistent-session subscriber (MQTT 3.1.1, clean_session False): survives broker restarts."""

    def __init__(self, port: int, topic: str, client_id: str = "test-subscriber") -> None:
        self.messages: list[tuple[str, bytes]] = []
        self.lock = threading.Lock()
        self.client = mqtt.Client(
            CallbackAPIVersion.VERSION2, client_id=client_id, clean_session=False, protocol=mqtt.MQTTv311
        )
        self.client.reconnect_delay_set(0.1, 1)
        subscribed = threading.Event()
        self.client.on_connect = lambda c, u, f, r, p: c.subscribe(topic, qos=1)
        self.client.on_subscribe = lambda c, u, m, r, p: subscribed.set()
        self.client.on_message = self._on_message
        self.client.connect("127.0.0.1", port)
        self.client.loop_start()
        assert subscribed.wait(10), "no SUBACK"

    def _on_message(self, client: mqtt.Client, userdata: object, message: mqtt.MQTTMessage) -> None:
        with self.lock:
            self.messages.append((message.topic, bytes(message.payload)))

    def received(self, suffix: str = "") -> list[tuple[str, bytes]]:
        with self.lock:
            return [(t, p) for t, p in self.messages if t.endswith(suffix)]

    def close(self) -> None:
        stop_network_loop(self.client)
        self.client.disconnect()


def wait_for(predicate: Callable[[], bool], timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()
