"""Run the real daemon (`minewatch run`) as a subprocess against real servers, and publish to it."""

from __future__ import annotations

import json
import os
import resource
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import paho.mqtt.client as mqtt

from monitor.wire.network_loop import stop_network_loop

SITE_CONFIG = """
[broker]
url = "{broker_url}"
client_id = "{client_id}"
protocol = "{protocol}"

[storage]
path = "{store}"
{influx}

[daemon]
status_interval_s = 5
anchor_interval_s = 30
lateness_s = 600
{daemon_extra}

[alerts]
min_gap_s = 600

[[sites]]
id = "{site}"
name = "Test quarry"
timezone = "America/Chicago"
latitude = 45.27
longitude = -91.62
profile = "dovre"
[[sites.gates]]
id = "g1"
[[sites.sensors]]
id = "n1"
kind = "sound"
gates = ["g1"]
[[sites.sensors]]
id = "n2"
kind = "sound"
[[sites.sensors]]
id = "l1"
kind = "light"
expected_period_s = 10
[[sites.sensors]]
id = "wx"
kind = "weather"
expected_period_s = 60
"""


def write_config(
    path: Path,
    broker_url: str,
    *,
    site: str = "quarry",
    influx: str = "",
    client_id: str = "minewatch-test",
    protocol: str = "5",
    daemon_extra: str = "",
    extra_sites: str = "",
) -> Path:
    path.write_text(
        SITE_CONFIG.format(
            broker_url=broker_url,
            client_id=client_id,
            protocol=protocol,
            store=path.parent / "store.db",
            influx=influx,
            site=site,
            daemon_extra=daemon_extra,
        )
        + extra_sites
    )
    return path


class Daemon:
    def __init__(self, config: Path, *, file_size_limit: int | None = None) -> None:
        """``file_size_limit``: the process may not grow a file past it (RLIMIT_FSIZE, soft; the
        kernel refuses the write, as a full disk does), until ``lift_file_size_limit``."""
        self.config = config
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = config.parent / "daemon.log"
        self.file_size_limit = file_size_limit

    def start(self) -> Daemon:
        self.log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "monitor.cli", "run", "--config", str(self.config)],
            stdout=self.log,
            stderr=self.log,
            env=env,
        )
        if self.file_size_limit is not None:  # before it has written that much (a new store is small)
            self._limit_files(self.file_size_limit)
        return self

    def lift_file_size_limit(self) -> None:
        """The space comes back: files may grow again."""
        self._limit_files(resource.RLIM_INFINITY)

    def _limit_files(self, size: int) -> None:
        # Python ignores SIGXFSZ: a write past the soft limit fails (EFBIG), as on a full disk.
        assert self.proc is not None
        resource.prlimit(self.proc.pid, resource.RLIMIT_FSIZE, (size, resource.RLIM_INFINITY))

    def wait_ready(self, timeout: float = 20) -> None:
        """Until the daemon has connected and subscribed (its persistent session then queues for it)."""
        assert wait_until(lambda: "Connected to" in self.logs(), timeout), self.logs()
        time.sleep(0.5)  # the SUBACK follows the log line

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20) -> int:
        assert self.proc is not None
        self.proc.send_signal(sig)
        code = self.proc.wait(timeout)
        self.log.close()
        return code

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def logs(self) -> str:
        return self.log_path.read_text(errors="replace")


def store_count(store: Path, sql: str, *params: object) -> int:
    if not store.exists():
        return 0
    conn = sqlite3.connect(store, timeout=30)
    try:
        return int(conn.execute(sql, params).fetchone()[0])
    except sqlite3.OperationalError:
        return 0
    finally:
        conn.close()


def wait_until(predicate: Callable[[], bool], timeout: float = 30, interval: float = 0.2) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


class Client:
    """A paho client for tests: publish at QoS 1, collect what arrives on subscriptions."""

    def __init__(self, port: int, client_id: str, subscribe: tuple[str, ...] = ()) -> None:
        self.messages: list[tuple[str, bytes]] = []
        self.lock = threading.Lock()
        self.client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, protocol=mqtt.MQTTv5)
        self.client.on_message = self._on_message
        self.client.max_inflight_messages_set(1000)
        self.client.max_queued_messages_set(0)
        self.client.reconnect_delay_set(0.1, 1)
        connected = threading.Event()
        self.client.on_connect = lambda c, u, f, r, p: (
            [c.subscribe(t, qos=1) for t in subscribe],
            connected.set(),
        )
        self.client.connect("127.0.0.1", port)
        self.client.loop_start()
        assert connected.wait(10)
        time.sleep(0.1)

    def _on_message(self, client: mqtt.Client, userdata: object, message: mqtt.MQTTMessage) -> None:
        with self.lock:
            self.messages.append((message.topic, bytes(message.payload)))

    def publish(self, topic: str, payload: bytes | dict[str, object], qos: int = 1) -> mqtt.MQTTMessageInfo:
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        return self.client.publish(topic, body, qos=qos)

    def received(self, suffix: str) -> list[dict[str, object]]:
        with self.lock:
            return [json.loads(p) for t, p in self.messages if t.endswith(suffix)]

    def close(self) -> None:
        stop_network_loop(self.client)
        self.client.disconnect()
