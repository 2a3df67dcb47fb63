"""Real servers for tests: Mosquitto, influxd and VictoriaMetrics on free loopback ports, in temp dirs.

Each starts its own process with its own data directory and stops it at the end;
nothing here touches default ports or services already running on the machine.
"""

from __future__ import annotations

import getpass
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(port: int, timeout: float = 15.0, proc: subprocess.Popen[bytes] | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode} before listening on {port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listening on 127.0.0.1:{port} after {timeout} s")


def stop_process(proc: subprocess.Popen[bytes] | None, timeout: float) -> None:
    """SIGTERM, then SIGKILL if it has not exited within ``timeout`` seconds."""
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def require(binary: str) -> str:
    path = shutil.which(binary) or next(
        (p for p in (f"/usr/sbin/{binary}", f"/usr/bin/{binary}") if os.path.exists(p)), None
    )
    if path is None:
        raise RuntimeError(
            f"{binary} is not installed: .ci/run installs it"
            " (apt-get install mosquitto influxdb victoria-metrics)"
        )
    return path


@dataclass
class Mosquitto:
    """A Mosquitto broker on a free port. ``restart()`` keeps its persistence file."""

    workdir: Path
    port: int = field(default_factory=free_port)
    extra_conf: str = ""
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"mqtt://127.0.0.1:{self.port}"

    def start(self) -> Mosquitto:
        self.workdir.mkdir(parents=True, exist_ok=True)
        conf = self.workdir / "mosquitto.conf"
        conf.write_text(
            f"listener {self.port} 127.0.0.1\n"
            "allow_anonymous true\n"
            "persistence true\n"
            f"persistence_location {self.workdir}/\n"
            "autosave_interval 1\n"
            # A slow subscriber must not lose QoS 1 messages (default limit is 1000).
            "max_queued_messages 2000000\n"
            "max_inflight_messages 100\n"
            "log_dest stderr\n"
            "log_type error\n"
            # Run as whoever started the test (as root, mosquitto would switch to a user that
            # cannot write the temp dir, and silently keep no persistence).
            f"user {getpass.getuser()}\n" + self.extra_conf
        )
        self.log = open(self.workdir / "mosquitto.log", "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [require("mosquitto"), "-c", str(conf)], stdout=self.log, stderr=self.log
        )
        wait_for_port(self.port, proc=self.proc)
        return self

    def stop(self) -> None:
        stop_process(self.proc, timeout=10)  # SIGTERM lets it save its persistence file
        self.proc = None
        if hasattr(self, "log"):
            self.log.close()

    def restart(self, pause_s: float = 0.0) -> None:
        self.stop()
        time.sleep(pause_s)
        self.start()


@dataclass
class Influxd:
    """InfluxDB 1.x (Debian's influxd) with the HTTP API on a free port."""

    workdir: Path
    port: int = field(default_factory=free_port)
    rpc_port: int = field(default_factory=free_port)
    max_body_size: int = 0  # [http] max-body-size: a larger write is answered 413 (0: influxd's 25 MB)
    # [data] limits, e.g. {"max-series-per-database": 2} (0: none; influxd's defaults when not given)
    limits: dict[str, int] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Influxd:
        self.workdir.mkdir(parents=True, exist_ok=True)
        conf = self.workdir / "influxdb.conf"
        conf.write_text(
            "reporting-enabled = false\n"
            f'bind-address = "127.0.0.1:{self.rpc_port}"\n'
            f'[meta]\n  dir = "{self.workdir}/meta"\n'
            f'[data]\n  dir = "{self.workdir}/data"\n  wal-dir = "{self.workdir}/wal"\n'
            "  query-log-enabled = false\n"
            + "".join(f"  {name} = {value}\n" for name, value in self.limits.items())
            + "[monitor]\n  store-enabled = false\n"
            f'[http]\n  bind-address = "127.0.0.1:{self.port}"\n  log-enabled = false\n'
            + (f"  max-body-size = {self.max_body_size}\n" if self.max_body_size else "")
            + "[continuous_queries]\n  enabled = false\n"
        )
        self.log = open(self.workdir / "influxd.log", "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [require("influxd"), "-config", str(conf)], stdout=self.log, stderr=self.log
        )
        wait_for_port(self.port, timeout=30, proc=self.proc)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # the port opens a moment before /ping answers
            try:
                with urllib.request.urlopen(f"{self.url}/ping", timeout=1) as r:
                    if r.status == 204:
                        return self
            except OSError:
                time.sleep(0.1)
        raise TimeoutError("influxd did not answer /ping")

    def stop(self) -> None:
        stop_process(self.proc, timeout=15)
        self.proc = None
        if hasattr(self, "log"):
            self.log.close()

    def query(self, q: str, db: str = "") -> list[dict[str, object]]:
        """Run an InfluxQL query; returns the series of the first statement."""
        params = urllib.parse.urlencode({"q": q, "db": db})
        with urllib.request.urlopen(f"{self.url}/query?{params}", timeout=10) as r:
            result = json.loads(r.read())["results"][0]
        if "error" in result:
            raise RuntimeError(result["error"])
        series: list[dict[str, object]] = result.get("series", [])
        return series

    def execute(self, q: str, db: str = "") -> None:
        """Run an InfluxQL statement that changes data (SELECT INTO, DROP): by POST, as influxd asks."""
        data = urllib.parse.urlencode({"q": q, "db": db}).encode()
        with urllib.request.urlopen(f"{self.url}/query", data=data, timeout=10) as r:
            result = json.loads(r.read())["results"][0]
        if "error" in result:
            raise RuntimeError(result["error"])

    def create_database(self, db: str) -> None:
        data = urllib.parse.urlencode({"q": f'CREATE DATABASE "{db}"'}).encode()
        with urllib.request.urlopen(f"{self.url}/query", data=data, timeout=10) as r:
            r.read()

    def count(self, db: str, measurement: str, field_name: str) -> int:
        series = self.query(f'SELECT count("{field_name}") FROM "{measurement}"', db)
        if not series:
            return 0
        values = series[0]["values"]
        assert isinstance(values, list)
        return int(values[0][1])


@dataclass
class VictoriaMetrics:
    """VictoriaMetrics (Debian's victoria-metrics) on a free port: a real server of the
    InfluxDB v2 write API (``POST /api/v2/write``, line protocol), read back with its own
    export API. It keeps numeric and boolean fields (as 1/0); a string field's series is
    created but its value is not kept. ``restart()`` keeps the data directory and the port.
    """

    workdir: Path
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> VictoriaMetrics:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.log = open(self.workdir / "victoria-metrics.log", "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [
                require("victoria-metrics"),
                f"-httpListenAddr=127.0.0.1:{self.port}",
                f"-storageDataPath={self.workdir / 'data'}",
                "-retentionPeriod=100y",  # test points carry fixed dates, however old
                "-search.latencyOffset=0s",  # queries see a point as soon as it is flushed
                "-search.disableCache",
                "-loggerLevel=ERROR",
            ],
            stdout=self.log,
            stderr=self.log,
        )
        wait_for_port(self.port, timeout=30, proc=self.proc)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=1) as r:
                    if r.status == 200:
                        return self
            except OSError:
                time.sleep(0.1)
        raise TimeoutError("victoria-metrics did not answer /health")

    def stop(self) -> None:
        stop_process(self.proc, timeout=15)
        self.proc = None
        if hasattr(self, "log"):
            self.log.close()

    def restart(self) -> None:
        self.stop()
        self.start()

    def export(self, match: str) -> list[dict[str, Any]]:
        """Every stored sample of the series ``match`` selects (``/api/v1/export``), one
        dict per series: ``metric`` (name and labels), ``values``, ``timestamps`` (ms)."""
        with urllib.request.urlopen(f"{self.url}/internal/force_flush", timeout=10) as r:
            r.read()  # rows still in the in-memory buffer become searchable
        data = urllib.parse.urlencode({"match[]": match, "start": "0"}).encode()
        with urllib.request.urlopen(f"{self.url}/api/v1/export", data=data, timeout=10) as r:
            return [json.loads(text) for text in r.read().decode().splitlines() if text.strip()]


def self_signed_cert(folder: Path) -> tuple[Path, Path]:
    """(cert.pem, key.pem): a self-signed certificate for 127.0.0.1 and localhost, made with openssl."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "2",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1,DNS:localhost",
        ],
        check=True,
        capture_output=True,
    )
    return cert, key
