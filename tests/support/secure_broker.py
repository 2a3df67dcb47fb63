"""A real Mosquitto with minewatch's production configuration (TLS, passwords, ACL), for tests.

Reusable outside tests/deploy:

    from tests.support.secure_broker import run_secure_broker

    with run_secure_broker(config_toml, tmp_path / "broker") as broker:
        toml = broker.broker_toml()            # a [broker] table for minewatch.toml (daemon account)
        c = broker.client("town")             # a connected-on-demand paho test client
        broker.restart()                      # same port, same persistence, e.g. to test recovery

Every broker gets its own free port (never 1883/8883) and folder, and is stopped on exit.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import pwd
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion, MQTTProtocolVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.reasoncodes import ReasonCode

from monitor.wire.network_loop import stop_network_loop
from tests.support.paths import REPO

MAKE_CREDENTIALS = REPO / "deploy" / "mosquitto" / "make-credentials"
HOST = "localhost"  # the name in the server certificate

_ids = itertools.count()


def free_port() -> int:
    """A port the kernel just handed out; not 1883/8883, so never a system broker's."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in (1883, 8883):
            return port


def wait_for_port(
    port: int, host: str = "127.0.0.1", timeout: float = 10.0, process: subprocess.Popen[Any] | None = None
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"process exited with {process.returncode} before listening on {port}")
        with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.5):
            return
        time.sleep(0.02)
    raise TimeoutError(f"nothing listening on {host}:{port} after {timeout} s")


def make_credentials(args: Sequence[str | Path | int]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(MAKE_CREDENTIALS), *map(str, args)], capture_output=True, text=True, check=False
    )


def _run_user() -> str:
    # Started as root, Mosquitto drops to `user`; stay as the test's user so it can read tmp files.
    return pwd.getpwuid(os.geteuid()).pw_name


# --------------------------------------------------------------------------- client


class TestClient:
    """A paho 2.x client with blocking helpers: connect, publish (waits for PUBACK), subscribe."""

    __test__ = False  # not a pytest class

    def __init__(
        self,
        broker: SecureBroker,
        username: str,
        password: str | None = None,
        *,
        protocol: MQTTProtocolVersion = MQTTProtocolVersion.MQTTv5,
        client_id: str = "",
        clean_session: bool = True,  # MQTT 3.1.1 only
        tls: bool = True,
        ca_file: str | None = None,
    ) -> None:
        self.broker = broker
        self.username = username
        self.protocol = protocol
        self.client = mqtt.Client(
            callback_api_version=CallbackAPIVersion.VERSION2,
            client_id=client_id or f"test-{username}-{os.getpid()}-{next(_ids)}",
            protocol=protocol,
            clean_session=clean_session if protocol != mqtt.MQTTv5 else None,
        )
        if tls:
            self.client.tls_set(ca_certs=ca_file or str(broker.ca_file))
        self.client.username_pw_set(username, broker.password(username) if password is None else password)
        self.client.max_inflight_messages_set(100)
        self.messages: list[mqtt.MQTTMessage] = []
        self.connack: ReasonCode | None = None
        self.session_present = False
        self._cond = threading.Condition()
        self._pubacks: dict[int, ReasonCode] = {}
        self._subacks: dict[int, list[ReasonCode]] = {}
        self._connected = threading.Event()
        self.client.on_connect = self._on_connect
        self.client.on_message = self._on_message
        self.client.on_publish = self._on_publish
        self.client.on_subscribe = self._on_subscribe
        self.client.on_disconnect = self._on_disconnect

    # paho callbacks (network thread)
    def _on_connect(self, _c: Any, _u: Any, flags: Any, rc: ReasonCode, _p: Any) -> None:
        self.connack = rc
        self.session_present = bool(flags.session_present)
        self._connected.set()

    def _on_disconnect(self, _c: Any, _u: Any, _f: Any, _rc: Any, _p: Any) -> None:
        self._connected.set()  # wakes a connect() that will never get its CONNACK

    def _on_message(self, _c: Any, _u: Any, msg: mqtt.MQTTMessage) -> None:
        with self._cond:
            self.messages.append(msg)
            self._cond.notify_all()

    def _on_publish(self, _c: Any, _u: Any, mid: int, rc: ReasonCode, _p: Any) -> None:
        with self._cond:
            self._pubacks[mid] = rc
            self._cond.notify_all()

    def _on_subscribe(self, _c: Any, _u: Any, mid: int, rcs: list[ReasonCode], _p: Any) -> None:
        with self._cond:
            self._subacks[mid] = rcs
            self._cond.notify_all()

    def connect(
        self, *, clean_start: bool = True, session_expiry_s: int | None = None, timeout: float = 5.0
    ) -> ReasonCode | None:
        """The CONNACK reason code, or None when the broker closed the connection without one."""
        props = None
        if session_expiry_s is not None:
            props = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
            props.SessionExpiryInterval = session_expiry_s
        self._connected.clear()
        self.connack = None
        kwargs: dict[str, Any] = {"keepalive": 30, "properties": props}
        if self.protocol == mqtt.MQTTv5:
            kwargs["clean_start"] = clean_start
        self.client.connect(HOST, self.broker.port, **kwargs)
        self.client.loop_start()
        self._connected.wait(timeout)
        if self.connack is None or self.connack.is_failure:
            self.close()  # stop paho from retrying a refused connection
        return self.connack

    def publish(self, topic: str, payload: str | bytes, qos: int = 1) -> ReasonCode:
        """Publish and wait for the PUBACK; its reason code (MQTT 5: 0x87 when not authorised)."""
        info = self.client.publish(topic, payload, qos=qos)
        if qos == 0:
            return ReasonCode(PacketTypes.PUBACK, "Success")
        return self.wait_puback(info.mid)

    def wait_puback(self, mid: int, timeout: float = 10.0) -> ReasonCode:
        with self._cond:
            if not self._cond.wait_for(lambda: mid in self._pubacks, timeout):
                raise TimeoutError(f"{self.username}: no PUBACK for mid {mid}")
            return self._pubacks[mid]

    def subscribe(self, topic: str, qos: int = 1, timeout: float = 5.0) -> list[ReasonCode]:
        _, mid = self.client.subscribe(topic, qos=qos)
        assert mid is not None
        with self._cond:
            if not self._cond.wait_for(lambda: mid in self._subacks, timeout):
                raise TimeoutError(f"{self.username}: no SUBACK for {topic}")
            return self._subacks[mid]

    def wait_for(self, predicate: Callable[[list[mqtt.MQTTMessage]], bool], timeout: float = 5.0) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: predicate(self.messages), timeout)

    def payloads(self, topic: str | None = None) -> list[bytes]:
        with self._cond:
            return [bytes(m.payload) for m in self.messages if topic is None or m.topic == topic]

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.client.disconnect()
        stop_network_loop(self.client)


# --------------------------------------------------------------------------- broker


@dataclass
class SecureBroker:
    dir: Path  # make-credentials output: ca.crt, passwd, acl, credentials.json, mosquitto.conf, data/
    port: int = 0
    process: subprocess.Popen[bytes] | None = None
    clients: list[TestClient] = field(default_factory=list)

    @property
    def ca_file(self) -> Path:
        return self.dir / "ca.crt"

    @property
    def conf(self) -> Path:
        return self.dir / "mosquitto.conf"

    @property
    def log(self) -> Path:
        return self.dir / "mosquitto.log"

    @property
    def url(self) -> str:
        return f"mqtts://{HOST}:{self.port}"

    @property
    def users(self) -> dict[str, dict[str, Any]]:
        users: dict[str, dict[str, Any]] = json.loads((self.dir / "credentials.json").read_text())["users"]
        return users

    def password(self, username: str) -> str:
        return str(self.users[username]["password"])

    def password_file(self, username: str) -> Path:
        return self.dir / "passwords" / username

    def broker_toml(self, username: str = "minewatch-daemon", client_id: str = "minewatch-daemon") -> str:
        """A [broker] table for a minewatch.toml that connects the daemon to this broker."""
        return (
            "[broker]\n"
            f'url = "{self.url}"\n'
            f'client_id = "{client_id}"\n'
            f'username = "{username}"\n'
            f'password_file = "{self.password_file(username)}"\n'
            f'ca_file = "{self.ca_file}"\n'
        )

    def client(self, username: str, password: str | None = None, **kwargs: Any) -> TestClient:
        """A client closed when the broker stops (not yet connected: call .connect())."""
        c = TestClient(self, username, password, **kwargs)
        self.clients.append(c)
        return c

    def connected(self, username: str, **kwargs: Any) -> TestClient:
        c = self.client(username, **kwargs)
        rc = c.connect()
        if rc is None or rc.is_failure:
            raise AssertionError(f"{username} could not connect: {rc}")
        return c

    def start(self) -> None:
        last: Exception | None = None
        for _ in range(5):  # a free port can be taken between choosing and binding it
            port = self.port or free_port()
            result = make_credentials(
                ["--conf-only", "--out", self.dir, "--port", str(port), "--run-user", _run_user()]
            )
            if result.returncode != 0:
                raise RuntimeError(f"make-credentials --conf-only failed: {result.stderr}")
            with self.log.open("ab") as log:
                process = subprocess.Popen(["mosquitto", "-c", str(self.conf)], stdout=log, stderr=log)
            try:
                wait_for_port(port, process=process)
            except (RuntimeError, TimeoutError) as exc:
                last = exc
                _stop(process)
                if self.port:  # a restart must keep its port; give the old socket a moment
                    time.sleep(0.2)
                continue
            self.port, self.process = port, process
            return
        raise RuntimeError(f"mosquitto did not start: {last}\n{self.log.read_text()[-2000:]}")

    def stop(self) -> None:
        for c in self.clients:
            c.close()
        self.clients.clear()
        if self.process is not None:
            _stop(self.process)
            self.process = None

    def restart(self) -> None:
        """Stop cleanly (Mosquitto saves its persistence file) and start on the same port."""
        self.stop()
        self.start()


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


@contextlib.contextmanager
def run_secure_broker(
    config: Path | str, workdir: Path, extra_args: Sequence[str] = (), port: int = 0
) -> Iterator[SecureBroker]:
    """make-credentials for `config` into `workdir`, then a Mosquitto on a free port; stopped on exit."""
    workdir.mkdir(parents=True, exist_ok=True)
    result = make_credentials(
        ["--config", config, "--out", workdir, "--run-user", _run_user(), "--quiet", *extra_args]
    )
    if result.returncode != 0:
        raise RuntimeError(f"make-credentials failed ({result.returncode}): {result.stderr}")
    broker = SecureBroker(workdir, port=port)
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


# Two sites so cross-site rules can be tested; only ids matter to make-credentials.
TEST_CONFIG = """\
[broker]
topic_prefix = "minewatch"

[[sites]]
id = "north"
timezone = "Europe/Oslo"
latitude = 62.0
longitude = 9.6

[[sites.sensors]]
id = "n1"
kind = "sound"

[[sites.sensors]]
id = "n2"
kind = "sound"

[[sites.sensors]]
id = "l1"
kind = "light"

[[sites]]
id = "south"
timezone = "Europe/Oslo"
latitude = 61.0
longitude = 9.6

[[sites.sensors]]
id = "n1"
kind = "sound"
"""


# A second daemon instance that owns only "north" (scaling by site partition).
EXTRA_ARGS = ("--daemon-instance", "east=north", "--town-user", "town-web")


def write_test_config(path: Path, text: str = TEST_CONFIG) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path
