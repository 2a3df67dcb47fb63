"""A real three-node nats-server cluster (JetStream + MQTT) on free loopback ports, for tests.

    with run_nats_cluster(tmp_path / "nats") as cluster:
        cluster.urls                     # ["mqtt://127.0.0.1:p1", ...], node a first
        cluster.node("a").kill()         # SIGKILL, as a node's crash
        cluster.node("a").start()        # back, on the same ports and JetStream store

Each node is its own process with its own folder (configuration, log, JetStream store), the
cluster's routes and MQTT listener on free ports (never 4222/6222/1883), rendered from the
shipped template deploy/nats/nats-node.conf. With ``auth`` (make-credentials' nats-auth.conf)
every MQTT client must log in and gets the shipped permissions. Every node is stopped at the end.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from monitor.wire.network_loop import stop_network_loop
from tests.support.paths import REPO
from tests.support.secure_broker import free_port, wait_for_port
from tests.support.servers import require

TlsLogin = tuple[Path, str, str]  # CA file, user name, password

TEMPLATE = REPO / "deploy" / "nats" / "nats-node.conf"
NAMES = ("a", "b", "c")
DEFAULT_PORTS = {4222, 6222, 8222, 1883, 8883}


def _free_port() -> int:
    while True:
        port = free_port()
        if port not in DEFAULT_PORTS:
            return port


@dataclass
class NatsNode:
    name: str
    dir: Path
    mqtt_port: int = field(default_factory=_free_port)
    client_port: int = field(default_factory=_free_port)
    cluster_port: int = field(default_factory=_free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"mqtt://127.0.0.1:{self.mqtt_port}"

    @property
    def conf(self) -> Path:
        return self.dir / "nats.conf"

    @property
    def log(self) -> Path:
        return self.dir / "nats.log"

    def write_conf(
        self,
        routes: Sequence[int],
        credentials: Path | None,
        extra: str = "",
        edits: Sequence[tuple[str, str]] = (),
    ) -> None:
        """The template for this node; ``credentials``: a make-credentials --nats folder (TLS
        and accounts), or None for a plain listener that lets anyone in; ``edits``: (line,
        replacement) pairs, each line present in the template (e.g. a longer ``ack_wait``)."""
        text = TEMPLATE.read_text(encoding="utf-8")
        for line, replacement in edits:
            if line not in text:
                raise ValueError(f"{line!r} is not in {TEMPLATE}")
            text = text.replace(line, replacement)
        if credentials is None:
            while "  tls {" in text.splitlines():  # the routes' and the MQTT listener's
                text = _drop_block(text, "  tls {")
        route_list = ", ".join(f'"nats-route://127.0.0.1:{p}"' for p in routes)
        for key, value in (
            ("@NAME@", f"minewatch-{self.name}"),
            ("@HOST@", "127.0.0.1"),
            ("@CLIENT_PORT@", str(self.client_port)),
            ("@CLUSTER_PORT@", str(self.cluster_port)),
            ("@MQTT_PORT@", str(self.mqtt_port)),
            ("@ROUTES@", route_list),
            ("@STORE_DIR@", str(self.dir / "jetstream")),
            ("@CERT_DIR@", str(credentials)),
        ):
            text = text.replace(key, value)
        if credentials is None:  # the template includes the generated accounts; without them, anyone
            text = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("include"))
        else:  # nats-server reads an include relative to the configuration's folder
            shutil.copy2(credentials / "nats-auth.conf", self.dir / "nats-auth.conf")
        self.conf.write_text(text + "\n" + extra)

    def start(self, wait: bool = True) -> NatsNode:
        binary = require("nats-server")
        with self.log.open("ab") as log:
            self.process = subprocess.Popen([binary, "-c", str(self.conf)], stdout=log, stderr=log)
        if wait:
            self.wait_listening()
        return self

    def wait_listening(self, timeout: float = 20.0) -> None:
        try:
            wait_for_port(self.mqtt_port, timeout=timeout, process=self.process)
        except (RuntimeError, TimeoutError) as exc:
            raise RuntimeError(f"nats-server {self.name}: {exc}\n{self.log.read_text()[-3000:]}") from None

    def kill(self) -> None:
        """SIGKILL: a crash, nothing flushed or said to the other nodes."""
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(10)
        self.process = None

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        self.process = None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None


def _drop_block(text: str, opening: str) -> str:
    """The text without the block that starts at the line ``opening`` (to its closing brace)."""
    lines = text.splitlines()
    start = lines.index(opening)
    indent = opening[: len(opening) - len(opening.lstrip())]
    end = lines.index(f"{indent}}}", start)
    return "\n".join(lines[:start] + lines[end + 1 :])


@dataclass
class NatsCluster:
    dir: Path
    nodes: list[NatsNode]

    def node(self, name: str) -> NatsNode:
        return next(n for n in self.nodes if n.name == name)

    def urls_from(self, first: str) -> list[str]:
        """The nodes' MQTT addresses, ``first`` first, then the others in order."""
        start = NAMES.index(first)
        order = [*NAMES[start:], *NAMES[:start]]
        return [self.node(n).url for n in order]

    @property
    def urls(self) -> list[str]:
        return self.urls_from("a")

    def logs(self) -> str:
        return "\n".join(f"--- {n.name}\n{n.log.read_text()[-3000:]}" for n in self.nodes if n.log.exists())

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


def wait_mqtt_ready(node: NatsNode, timeout: float = 90.0, tls: TlsLogin | None = None) -> float:
    """Until ``node`` takes an MQTT 3.1.1 session with a QoS 1 subscription; the seconds waited.

    A node listens before its JetStream cluster has elected leaders; until then a QoS 1
    SUBSCRIBE (a JetStream consumer) is refused or unanswered, and the first session of an
    account creates its MQTT streams, which takes longest on a loaded machine. It subscribes to
    a status topic, which every reading account may. Each attempt has a client id of its own: a
    reused one makes the server end the last attempt's session first (a JetStream request of its
    own, timing out under the same load), and an attempt waits up to 20 s for its grant (the
    server's own requests time out after 4 s and are retried) rather than starting over. ``tls``:
    (CA file, user, password) for a cluster with make-credentials' accounts. On a timeout the
    error carries the node's log.
    """
    import threading

    import paho.mqtt.client as mqtt
    from paho.mqtt.enums import CallbackAPIVersion

    host, port = "127.0.0.1", node.mqtt_port
    started = time.monotonic()
    last = "no answer"
    for attempt in itertools.count():
        left = timeout - (time.monotonic() - started)
        if left <= 0:
            break
        client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=f"ready-{os.getpid()}-{port}-{attempt}",
                             protocol=mqtt.MQTTv311)  # fmt: skip
        granted = threading.Event()
        client.on_subscribe = lambda _c, _u, _m, rcs, _p, g=granted: (
            g.set() if not rcs[0].is_failure else None
        )
        client.on_connect = lambda c, _u, _f, rc, _p: c.subscribe("minewatch/_ready/status", qos=1)
        if tls is not None:
            client.tls_set(ca_certs=str(tls[0]))
            client.username_pw_set(tls[1], tls[2])
        try:
            client.connect("localhost" if tls else host, port, keepalive=30)
            client.loop_start()
            if granted.wait(min(20.0, left)):
                return time.monotonic() - started
            last = "no QoS 1 subscription"
        except OSError as exc:
            last = str(exc)
        finally:
            with contextlib.suppress(Exception):
                client.disconnect()
            stop_network_loop(client)
        time.sleep(0.3)
    log = node.log.read_text(errors="replace")[-3000:] if node.log.exists() else "(no log)"
    raise TimeoutError(
        f"nats MQTT at {node.url} not ready after {timeout} s: {last}\n--- {node.name}'s log\n{log}"
    )


@contextlib.contextmanager
def run_nats_cluster(
    workdir: Path,
    credentials: Path | None = None,
    extra_conf: str = "",
    edits: Sequence[tuple[str, str]] = (),
) -> Iterator[NatsCluster]:
    """Three nodes a, b, c routed to each other; stopped on exit. ``credentials``: a
    make-credentials --nats folder (TLS listeners, the shipped accounts and grants);
    ``edits``: changes to the shipped template's lines (NatsNode.write_conf)."""
    nodes = []
    for name in NAMES:
        folder = workdir / name
        folder.mkdir(parents=True, exist_ok=True)
        nodes.append(NatsNode(name, folder))
    for node in nodes:
        node.write_conf([n.cluster_port for n in nodes if n is not node], credentials, extra_conf, edits)
    cluster = NatsCluster(workdir, nodes)
    try:
        for node in nodes:
            node.start(wait=False)
        for node in nodes:
            node.wait_listening()
        yield cluster
    finally:
        cluster.stop()
