"""A `minewatch serve` of its own (no daemon, no broker: logins, sessions and their records need
neither) and a small cookie-keeping HTTP client that can choose its source address and headers."""

from __future__ import annotations

import http.client
import json
import re
import sqlite3
import subprocess
import sys
import urllib.parse
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from monitor.credentials import hash_password
from monitor.journal.store import Store
from tests.support.paths import REPO
from tests.support.servers import free_port, stop_process, wait_for_port

PASSWORDS = {"ann": "ann-secret-1", "bob": "bob-secret-1", "ida": "ida-secret-1"}
SITES = """
[[sites]]
id = "s1"
timezone = "America/Chicago"
latitude = 45.27
longitude = -91.62
[[sites.sensors]]
id = "n1"
kind = "sound"

[[sites]]
id = "s2"
timezone = "America/Chicago"
latitude = 45.3
longitude = -91.7
[[sites.sensors]]
id = "n1"
kind = "sound"
"""


def account(name: str, role: str, sites: str, password_hash: str, extra: str = "") -> str:
    return (
        f'[[portal.accounts]]\nname = "{name}"\nrole = "{role}"\nsites = {sites}\n'
        f'password_hash = "{password_hash}"\n{extra}'
    )


@dataclass
class Portal:
    """The configuration's pieces; :meth:`write` makes the file, :func:`serving` runs it."""

    root: Path
    port: int = field(default_factory=free_port)
    portal_extra: str = ""
    hashes: dict[str, str] = field(
        default_factory=lambda: {name: hash_password(p) for name, p in PASSWORDS.items()}
    )
    accounts: dict[str, tuple[str, str]] = field(
        default_factory=lambda: {"ann": ("operator", '["s1"]'), "bob": ("town", "[]")}
    )
    account_extra: dict[str, str] = field(default_factory=dict)  # more lines of an account

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def store(self) -> Path:
        return self.root / "store.db"

    def write(self) -> Path:
        config = self.root / "minewatch.toml"
        accounts = "".join(
            account(name, role, sites, self.hashes[name], self.account_extra.get(name, ""))
            for name, (role, sites) in self.accounts.items()
        )
        config.write_text(
            f'{SITES}\n[storage]\npath = "{self.store}"\n\n[portal]\nport = {self.port}\n'
            f'secret_key = "harness-secret-key"\nlogin_attempts = 5\nlogin_window_s = 300\n'
            f"{self.portal_extra}\n{accounts}"
        )
        return config

    def actions(self, action: str) -> list[dict[str, Any]]:
        conn = sqlite3.connect(self.store)
        conn.row_factory = sqlite3.Row
        try:
            rows = conn.execute(
                "SELECT site, actor, role, action, target, source, data FROM portal_actions"
                " WHERE action = ? ORDER BY id",
                (action,),
            ).fetchall()
        finally:
            conn.close()
        return [{**dict(r), "data": json.loads(r["data"])} for r in rows]


@contextmanager
def serving(portal: Portal) -> Iterator[Portal]:
    """`minewatch serve` on the portal's configuration until the block ends (SIGTERM: it stops
    as in production, writing what it holds)."""
    if not portal.store.exists():
        Store(portal.store).conn.close()  # `serve` wants the daemon's store; an empty one will do
    log = (portal.root / "portal.log").open("ab")
    try:
        for attempt in range(3):
            config = portal.write()
            proc = subprocess.Popen(
                [sys.executable, "-m", "monitor.cli", "serve", "--config", str(config)],
                stdout=log,
                stderr=log,
                cwd=REPO,
            )
            try:
                wait_for_port(portal.port, timeout=30, proc=proc)
                break
            except RuntimeError:
                # The free port was taken by another test process between free_port() and the
                # server's bind ("cannot listen ... Address already in use", exit 2): another port.
                if proc.returncode != 2 or attempt == 2:
                    raise
                portal.port = free_port()
        try:
            yield portal
        finally:
            stop_process(proc, timeout=15)
    finally:
        log.close()


@dataclass
class Reply:
    status: int
    headers: http.client.HTTPMessage
    body: str
    raw: bytes = b""  # the body as sent (a bundle is no text)

    @property
    def location(self) -> str:
        return self.headers.get("location", "")


class Client:
    """One browser: keeps the session cookie, never follows redirects; ``source`` is the local
    address it connects from (any 127.x.y.z reaches the portal on 127.0.0.1)."""

    def __init__(self, portal: Portal, source: str = "127.0.0.1") -> None:
        self.portal = portal
        self.source = source
        self.cookie = ""

    def request(
        self,
        method: str,
        path: str,
        form: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        body: bytes | None = None,
    ) -> Reply:
        """``form`` (urlencoded) or a ``body`` as it is, with its Content-Type in ``headers``."""
        conn = http.client.HTTPConnection(
            "127.0.0.1", self.portal.port, timeout=30, source_address=(self.source, 0)
        )
        sent = dict(headers or {})
        if self.cookie:
            sent["Cookie"] = f"minewatch_session={self.cookie}"
        if form is not None:
            body = urllib.parse.urlencode(form).encode()
            sent["Content-Type"] = "application/x-www-form-urlencoded"
        try:
            conn.request(method, path, body=body, headers=sent)
            response = conn.getresponse()
            raw = response.read()
            reply = Reply(response.status, response.headers, raw.decode(errors="replace"), raw)
        finally:
            conn.close()
        for header in reply.headers.get_all("set-cookie") or []:
            name, _, rest = header.partition("=")
            if name == "minewatch_session":
                value = rest.split(";", 1)[0]
                self.cookie = "" if value == "null" or "1970" in rest else value
        return reply

    def get(self, path: str, headers: Mapping[str, str] | None = None) -> Reply:
        return self.request("GET", path, headers=headers)

    def csrf(self, path: str = "/login") -> str:
        match = re.search(r'name="csrf" value="([^"]+)"', self.get(path).body)
        assert match, f"no CSRF token on {path}"
        return match.group(1)

    def login(
        self, name: str, password: str | None = None, headers: Mapping[str, str] | None = None
    ) -> Reply:
        token = self.csrf()
        form = {"name": name, "password": PASSWORDS[name] if password is None else password, "csrf": token}
        return self.request("POST", "/login", form, headers)

    def logout(self) -> Reply:
        return self.request("POST", "/logout", {"csrf": self.csrf("/")})
