"""Shared fixtures: real Mosquitto, influxd and VictoriaMetrics (see tests/support/servers.py),
and a stand-in for a server that answers a byte at a time."""

from __future__ import annotations

import http.server
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.servers import Influxd, Mosquitto, VictoriaMetrics


@pytest.fixture(scope="session", autouse=True)
def _cache_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Caches the tests make (designed filters, matplotlib's fonts) go to a temporary folder,
    not the user's ~/.cache: processes the tests start inherit it."""
    before = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("xdg-cache"))
    yield
    if before is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = before


@pytest.fixture
def mosquitto(tmp_path: Path) -> Iterator[Mosquitto]:
    broker = Mosquitto(tmp_path / "mosquitto").start()
    yield broker
    broker.stop()


@pytest.fixture(scope="session")
def mosquitto_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mosquitto]:
    broker = Mosquitto(tmp_path_factory.mktemp("mosquitto-session")).start()
    yield broker
    broker.stop()


@pytest.fixture
def influxd(tmp_path: Path) -> Iterator[Influxd]:
    server = Influxd(tmp_path / "influxd").start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def influxd_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Influxd]:
    server = Influxd(tmp_path_factory.mktemp("influxd-session")).start()
    yield server
    server.stop()


@pytest.fixture
def victoria_metrics(tmp_path: Path) -> Iterator[VictoriaMetrics]:
    """A real InfluxDB v2 write API (VictoriaMetrics), with a data directory of its own."""
    server = VictoriaMetrics(tmp_path / "victoria-metrics").start()
    yield server
    server.stop()


@pytest.fixture
def dripping() -> Iterator[str]:
    """A server that reads the request and answers one byte every 0.2 s (a 12 s answer): no
    real InfluxDB can be made to, hence this stand-in."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            try:
                for byte in b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\nServer: drip\r\n\r\n":
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(0.2)
            except OSError:
                pass  # the client gave up

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
