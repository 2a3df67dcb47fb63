"""A real HTTP webhook receiver for the delivery tests (http.server on a free port)."""

from __future__ import annotations

import socket
import ssl
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Hook:
    """An HTTP server that answers webhooks with scripted status codes (then 200) and records them.

    A 3xx answer names ``location``. A GET (what urllib made of a POST answered by a 302) is
    answered 200 and recorded in ``gets``."""

    port: int
    statuses: list[int] = field(default_factory=list)
    received: list[tuple[dict[str, str], bytes, int]] = field(default_factory=list)
    location: str = ""
    paths: list[str] = field(default_factory=list)  # each POST's request target (path and query)
    gets: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    tls: ssl.SSLContext | None = None  # a server context: HTTPS
    delay_s: float = 0.0  # before each answer: a receiver that takes its time
    server: ThreadingHTTPServer | None = None
    host: str = "127.0.0.1"  # or "::1": an IPv6 server

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'https' if self.tls else 'http'}://{host}:{self.port}/hook"

    def start(self) -> Hook:
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                status = hook.statuses.pop(0) if hook.statuses else 200
                hook.received.append(({k.lower(): v for k, v in self.headers.items()}, body, status))
                hook.paths.append(self.path)
                time.sleep(hook.delay_s)
                self.send_response(status)
                if 300 <= status < 400 and hook.location:
                    self.send_header("Location", hook.location)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_GET(self) -> None:
                hook.gets.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        server_class = _IPv6Server if ":" in self.host else ThreadingHTTPServer
        self.server = server_class((self.host, self.port), Handler)
        if self.tls is not None:
            self.server.socket = self.tls.wrap_socket(self.server.socket, server_side=True)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    def accepted(self) -> list[tuple[dict[str, str], bytes]]:
        return [(h, b) for h, b, status in self.received if status < 300]


class _IPv6Server(ThreadingHTTPServer):
    address_family = socket.AF_INET6
