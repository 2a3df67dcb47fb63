"""A `minewatch serve` of its own (no daemon, no broker: logins, sessions and their records need
neither) and a small cookie-keeping HTTP client that can choose its source address and headers."""

from __future__ import annotations

import http.client
import json
import re
import sqlite3
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from monitor.credentials import hash_password, hash_token
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


def scoped_inspector_config(
    config: Path,
    site: str,
    token: str,
    not_before: datetime,
    not_after: datetime,
    secret: str,
    others: str = "",
) -> Callable[[int], Path]:
    """``config_for`` of portal_serving: ``config`` as it is now, with the portal on the port and
    the inspector ida (PASSWORDS; an API ``token``) scoped to ``site`` and [not_before, not_after],
    and the ``others`` accounts (``account()``'s text) after it."""
    base = config.read_text()
    ida = account(
        "ida",
        "inspector",
        f'["{site}"]',
        hash_password(PASSWORDS["ida"]),
        f'token_hash = "{hash_token(token)}"\n'
        f'not_before = "{not_before.isoformat()}"\nnot_after = "{not_after.isoformat()}"\n',
    )

    def config_for(port: int) -> Path:
        config.write_text(f'{base}\n[portal]\nport = {port}\nsecret_key = "{secret}"\n{ida}{others}')
        return config

    return config_for


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


_PORTAL_HEAD = re.compile(r'(?m)^\[portal\]\nport = \d+\n(?:mqtt_client_id = "[^"]*"\n)?')


def on_port(text: str, port: int, client_id: str = "portal", extra: str = "") -> str:
    """A configuration's text with its [portal] section's port set to ``port``, its broker client id
    ``{client_id}-{port}`` (unique with it) and the ``extra`` lines after them."""
    head = f'[portal]\nport = {port}\nmqtt_client_id = "{client_id}-{port}"\n{extra}'
    new, count = _PORTAL_HEAD.subn(lambda _: head, text, count=1)
    assert count == 1, "no [portal] section starting with its port"
    return new


@contextmanager
def portal_serving(
    config_for: Callable[[int], Path],
    log_path: Path,
    *,
    port: int | None = None,
    env: Mapping[str, str] | None = None,
) -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    """`minewatch serve --config config_for(port)` until the block ends (SIGTERM: it stops as in
    production), on ``port`` or a free one; yields the port and the process.

    Another test process can take a free port between free_port() and the server's bind. The
    server then exits 2 ("cannot listen ... Address already in use"), and a connection made
    meanwhile to see whether it listens may reach the other process. So the server is up once
    it has said in its log that it listens on the port, the port answers and it still runs;
    when it exits 2 instead, it is started again on another free port (CI lost runs to this).
    """
    port = port or free_port()
    with log_path.open("ab") as log:
        for attempt in range(3):
            config = config_for(port)
            log.flush()
            said_from = log_path.stat().st_size
            proc = subprocess.Popen(
                [sys.executable, "-m", "monitor.cli", "serve", "--config", str(config)],
                stdout=log,
                stderr=log,
                cwd=REPO,
                env=None if env is None else dict(env),
            )
            if _listening(proc, port, log_path, said_from):
                break
            stop_process(proc, timeout=15)
            if proc.returncode != 2 or attempt == 2:
                tail = log_path.read_bytes()[said_from:].decode(errors="replace")[-2000:]
                raise RuntimeError(f"the portal did not start (exit {proc.returncode}): {tail}")
            port = free_port()
        try:
            yield port, proc
        finally:
            stop_process(proc, timeout=15)


def _listening(proc: subprocess.Popen[bytes], port: int, log_path: Path, said_from: int) -> bool:
    """Whether ``proc`` said it listens on ``port`` (its first line, before it binds) and then
    the port answered while it ran; False once it has exited."""
    said = f":{port}/".encode()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and proc.poll() is None:
        with log_path.open("rb") as text:
            text.seek(said_from)
            if b"minewatch portal on" in (line := text.read()) and said in line:
                break
        time.sleep(0.05)
    else:
        return False
    try:
        wait_for_port(port, timeout=max(0.1, deadline - time.monotonic()), proc=proc)
    except (RuntimeError, TimeoutError):
        return False
    return proc.poll() is None


@contextmanager
def serving(portal: Portal) -> Iterator[Portal]:
    """`minewatch serve` on the portal's configuration until the block ends."""
    if not portal.store.exists():
        Store(portal.store).conn.close()  # `serve` wants the daemon's store; an empty one will do

    def config_for(port: int) -> Path:
        portal.port = port
        return portal.write()

    with portal_serving(config_for, portal.root / "portal.log", port=portal.port):
        yield portal


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
