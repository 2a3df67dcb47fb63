"""Alert delivery against real servers: SMTP with STARTTLS and login (aiosmtpd), an HTTP webhook
receiver (http.server), and Mosquitto for extra MQTT topics. The clock is passed in."""

from __future__ import annotations

import email
import email.policy
import hashlib
import hmac
import json
import queue
import socket
import sqlite3
import ssl
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP as SMTPServer
from aiosmtpd.smtp import AuthResult, Envelope, LoginPassword, Session

from monitor.config import Config
from monitor.journal.store import Store
from monitor.notify.alerts import Alert, AlertBook
from monitor.notify.delivery import (
    DELIVERED,
    PENDING,
    UNDELIVERABLE,
    Deliveries,
    DeliveryWorker,
    UndeliverableAlert,
    routes_for,
)
from monitor.notify.notices import NoticeBook
from monitor.shown_url import shown_url
from monitor.wire.network_loop import stop_network_loop
from tests.support.notices import local, make_config, site_and_profile, store_findings, violation
from tests.support.servers import Mosquitto, free_port, self_signed_cert
from tests.support.webhook import Hook

T0 = datetime(2026, 6, 15, 16, 40, tzinfo=UTC)
HMAC_KEY = "hook-secret-123"

# --------------------------------------------------------------------------- real servers


@pytest.fixture
def hook() -> Iterator[Hook]:
    server = Hook(free_port()).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def tls_cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1, made with openssl."""
    return self_signed_cert(tmp_path_factory.mktemp("tls"))


@dataclass
class Mailbox:
    port: int
    messages: list[tuple[Envelope, EmailMessage]] = field(default_factory=list)
    logins: list[str] = field(default_factory=list)
    tls_sessions: int = 0

    async def handle_DATA(self, server: SMTPServer, session: Session, envelope: Envelope) -> str:
        if session.ssl is not None:
            self.tls_sessions += 1
        content = envelope.content if isinstance(envelope.content, bytes) else str(envelope.content).encode()
        parsed = email.message_from_bytes(content, policy=email.policy.default)
        assert isinstance(parsed, EmailMessage)
        self.messages.append((envelope, parsed))
        return "250 OK"

    def authenticate(
        self, server: SMTPServer, session: Session, envelope: Envelope, mechanism: str, auth_data: Any
    ) -> AuthResult:
        assert isinstance(auth_data, LoginPassword)
        ok = (auth_data.login, auth_data.password) == (b"minewatch", b"smtp-pass")
        if ok:
            self.logins.append(auth_data.login.decode())
        return AuthResult(success=ok, handled=False)  # handled=False: aiosmtpd answers 535


@pytest.fixture
def smtp(tls_cert: tuple[Path, Path]) -> Iterator[Mailbox]:
    """aiosmtpd on a free port: STARTTLS required, then AUTH LOGIN/PLAIN (only over TLS)."""
    cert, key = tls_cert
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_tls.load_cert_chain(str(cert), str(key))
    box = Mailbox(free_port())
    controller = Controller(
        box,
        hostname="127.0.0.1",
        port=box.port,
        tls_context=server_tls,
        require_starttls=True,
        authenticator=box.authenticate,
        auth_require_tls=True,
    )
    controller.start()
    yield box
    controller.stop()


@pytest.fixture
def client_tls(tls_cert: tuple[Path, Path]) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(tls_cert[0]))


class Subscriber:
    """A real MQTT client on the broker, collecting what arrives on a filter."""

    def __init__(self, broker: Mosquitto, topic: str) -> None:
        self.messages: queue.Queue[tuple[str, bytes]] = queue.Queue()
        self.client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"sub-{time.monotonic_ns()}")
        subscribed = threading.Event()
        self.client.on_message = lambda c, u, m: self.messages.put((m.topic, bytes(m.payload)))
        self.client.on_subscribe = lambda *a: subscribed.set()
        self.client.connect("127.0.0.1", broker.port)
        self.client.subscribe(topic, qos=1)
        self.client.loop_start()
        assert subscribed.wait(5)

    def get(self, timeout: float = 5.0) -> tuple[str, bytes]:
        return self.messages.get(timeout=timeout)

    def close(self) -> None:
        stop_network_loop(self.client)
        self.client.disconnect()


def publisher(broker: Mosquitto) -> tuple[mqtt.Client, Any]:
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"pub-{time.monotonic_ns()}")
    client.connect("127.0.0.1", broker.port)
    client.loop_start()

    def publish(topic: str, payload: bytes, retain: bool) -> None:
        info = client.publish(topic, payload, qos=1, retain=retain)
        info.wait_for_publish(5)

    return client, publish


# --------------------------------------------------------------------------- configuration

RECIPIENTS = """
[[recipients]]
name = "Town clerk"
role = "town"
[[recipients.channels]]
type = "email"
to = ["clerk@dovre.example"]
smtp_host = "127.0.0.1"
smtp_port = {smtp_port}
smtp_starttls = true
smtp_username = "minewatch"
smtp_password = "smtp-pass"
sender = "minewatch@quarry.example"

[[recipients]]
name = "County inspector"
role = "inspector"
sites = ["quarry"]
[[recipients.channels]]
type = "webhook"
url = "{hook_url}"
secret = "{hmac_key}"

[[recipients]]
name = "Inspector elsewhere"
role = "inspector"
sites = ["other"]
[[recipients.channels]]
type = "webhook"
url = "http://127.0.0.1:9/never"

[[recipients]]
name = "Acme operations"
role = "operator"
[[recipients.channels]]
type = "webhook"
url = "{operator_hook_url}"
[[recipients.channels]]
type = "mqtt"
topic = "acme/{{site}}/alerts"
[[recipients.channels]]
type = "mqtt"
"""

OTHER_SITE = """
[[sites]]
id = "other"
name = "Other pit"
timezone = "America/Chicago"
latitude = 45.0
longitude = -91.0
"""


def config_for(
    db: Path, hook_url: str, smtp_port: int = 9, operator_hook_url: str = "", max_attempts: int = 3
) -> Config:
    recipients = RECIPIENTS.format(
        smtp_port=smtp_port,
        hook_url=hook_url,
        hmac_key=HMAC_KEY,
        operator_hook_url=operator_hook_url or hook_url,
    )
    return make_config(db, OTHER_SITE + recipients, max_attempts=max_attempts)


def alert(
    alert_id: str = "a1", audiences: tuple[str, ...] = ("town", "operator"), site: str = "quarry", **data: Any
) -> dict[str, Any]:
    return {
        "id": alert_id,
        "site": site,
        "ts": "2026-06-15T16:40:00Z",
        "audiences": list(audiences),
        "kind": "violation",
        "severity": "violation",
        "condition": f"c-{alert_id}",
        "message": "Noise at meter n1 averaged 84.2 dB(A) over 11:30-11:31 local",
        "data": data,
    }


def wait_until(condition: Any, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return bool(condition())


def connect(db: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(str(db), isolation_level=None, timeout=30)
    conn.execute("PRAGMA journal_mode=WAL")
    return conn


# --------------------------------------------------------------------------- routing


def test_routing_by_role_site_and_channel(tmp_path: Path) -> None:
    config = config_for(tmp_path / "db", "http://127.0.0.1:1/hook")
    names = lambda a: [(r.recipient.name, r.channel.type) for r in routes_for(a, config.recipients)]  # noqa: E731
    assert names(alert(audiences=("town",))) == [("Town clerk", "email"), ("County inspector", "webhook")]
    assert names(alert(audiences=("operator",))) == [
        ("Acme operations", "webhook"),
        ("Acme operations", "mqtt"),
    ]
    assert names(alert(audiences=("town",), site="other")) == [
        ("Town clerk", "email"),
        ("Inspector elsewhere", "webhook"),
    ]
    # The operator's default-topic mqtt channel makes no delivery: the pipeline publishes there already.
    assert all(
        r.channel.topic
        for r in routes_for(alert(audiences=("operator",)), config.recipients)
        if r.channel.type == "mqtt"
    )
    excluded = alert(audiences=("operator",), exclude_channels=[["Acme operations", 0]])
    assert names(excluded) == [("Acme operations", "mqtt")]


def test_enqueue_joins_the_alert_transaction(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    config = config_for(db, "http://127.0.0.1:1/hook")
    store = Store(db)
    deliveries = Deliveries(store.conn, config)
    book = AlertBook(store, config.alerts, lambda site, body: None)
    book.listeners.append(lambda body: deliveries.enqueue(body, T0))

    with pytest.raises(RuntimeError), store.batch():
        book.raise_(Alert("quarry", ("town",), "violation", "violation", "c1", "loud"), T0)
        raise RuntimeError("the batch fails after the alert")
    assert deliveries.rows() == []  # rolled back with the alert

    with store.batch():
        book.raise_(Alert("quarry", ("town", "operator"), "violation", "violation", "c2", "loud"), T0)
    rows = deliveries.rows()
    assert sorted((r["recipient"], r["channel_type"]) for r in rows) == [
        ("Acme operations", "mqtt"),
        ("Acme operations", "webhook"),
        ("County inspector", "webhook"),
        ("Town clerk", "email"),
    ]
    assert {r["status"] for r in rows} == {PENDING}
    assert "smtp-pass" not in json.dumps([dict(r) for r in rows]) and HMAC_KEY not in json.dumps(
        [dict(r) for r in rows]
    )
    # Enqueueing the same alert again adds nothing.
    with store.batch():
        assert deliveries.enqueue(json.loads(rows[0]["alert"]), T0) == 0
    store.close()


# --------------------------------------------------------------------------- webhook


def test_webhook_signed_retried_with_backoff_and_delivered_once(tmp_path: Path, hook: Hook) -> None:
    db = tmp_path / "store.db"
    config = config_for(db, hook.url, max_attempts=5)
    conn = connect(db)
    deliveries = Deliveries(conn, config)
    deliveries.enqueue(
        alert(audiences=("town",)), T0
    )  # e-mail (no server: fails) and the inspector's webhook
    hook.statuses = [503, 503]

    def hook_row() -> sqlite3.Row:
        [row] = [r for r in deliveries.rows() if r["channel_type"] == "webhook"]
        return row

    assert deliveries.deliver_due(T0) == 0
    row = hook_row()
    assert (row["status"], row["attempts"]) == (PENDING, 1)
    assert "HTTP 503" in row["last_error"]
    assert row["next_us"] == int((T0 + timedelta(seconds=2)).timestamp() * 1e6)  # retry_base_s
    assert deliveries.deliver_due(T0 + timedelta(seconds=1)) == 0  # not due yet
    assert len(hook.received) == 1
    assert deliveries.deliver_due(T0 + timedelta(seconds=2)) == 0
    assert hook_row()["next_us"] == int((T0 + timedelta(seconds=6)).timestamp() * 1e6)  # doubled
    assert deliveries.deliver_due(T0 + timedelta(seconds=6)) == 1
    assert hook_row()["status"] == DELIVERED
    assert deliveries.deliver_due(T0 + timedelta(seconds=60)) == 0

    assert [status for _, _, status in hook.received] == [503, 503, 200]
    [(headers, body)] = hook.accepted()
    assert headers["content-type"] == "application/json"
    expected = "sha256=" + hmac.new(HMAC_KEY.encode(), body, hashlib.sha256).hexdigest()
    assert headers["x-minewatch-signature"] == expected
    document = json.loads(body)
    assert headers["idempotency-key"] == document["delivery_id"] == hook_row()["id"]
    assert document["alert"]["id"] == "a1" and document["recipient"] == "County inspector"
    # Every attempt carried the same body, key and signature.
    assert len({(h["idempotency-key"], h["x-minewatch-signature"], b) for h, b, _ in hook.received}) == 1

    # The at-least-once edge: a crash after the send, before the commit, resends once, same key.
    conn.execute("UPDATE deliveries SET status = 'pending' WHERE id = ?", (hook_row()["id"],))
    assert deliveries.deliver_due(T0 + timedelta(seconds=61)) == 1
    assert [h["idempotency-key"] for h, _ in hook.accepted()] == [document["delivery_id"]] * 2
    conn.close()


def test_permanent_http_error_is_not_retried(tmp_path: Path, hook: Hook) -> None:
    db = tmp_path / "store.db"
    conn = connect(db)
    deliveries = Deliveries(conn, config_for(db, hook.url, max_attempts=5))
    deliveries.enqueue(alert(audiences=("operator",)), T0)
    hook.statuses = [400]
    deliveries.deliver_due(T0)  # the mqtt channel has no publisher here: retried later
    [row] = [r for r in deliveries.rows() if r["channel_type"] == "webhook"]
    assert (row["status"], row["attempts"]) == (UNDELIVERABLE, 1)
    assert "HTTP 400" in row["last_error"]
    conn.close()


def test_a_redirect_is_a_failed_attempt_and_is_not_followed(tmp_path: Path, hook: Hook) -> None:
    """urllib followed a 302 as a bodiless GET to the other host, signature and idempotency key
    and all, and the delivery counted as delivered though the receiver never had it."""
    elsewhere = Hook(free_port()).start()
    try:
        db = tmp_path / "store.db"
        conn = connect(db)
        deliveries = Deliveries(conn, config_for(db, hook.url, max_attempts=2))
        deliveries.enqueue(alert(audiences=("town",), site="quarry"), T0)
        hook.statuses, hook.location = [302, 302], f"{elsewhere.url}/moved"

        def hook_row() -> sqlite3.Row:
            [row] = [r for r in deliveries.rows() if r["channel_type"] == "webhook"]
            return row

        assert deliveries.deliver_due(T0) == 0
        row = hook_row()
        assert (row["status"], row["attempts"]) == (PENDING, 1)  # retried as the policy says
        assert row["last_error"] == (
            f"webhook {shown_url(hook.url)!r} answered 302 (a redirect to"
            f" {shown_url(elsewhere.url + '/moved')}): minewatch does not follow redirects; set the"
            " webhook url to the final address"
        )
        deliveries.deliver_due(T0 + timedelta(seconds=2))
        assert (hook_row()["status"], hook_row()["attempts"]) == (UNDELIVERABLE, 2)
        assert [status for _, _, status in hook.received] == [302, 302]
        assert elsewhere.gets == [] and elsewhere.received == []  # nothing went where it pointed
    finally:
        elsewhere.stop()
        conn.close()


class Dripper:
    """A receiver that reads the request, then answers one byte every ``gap_s`` (``gap_s`` None:
    never answers). Written here: no real HTTP server misbehaves this way on request, and a
    hostile network or a stalled proxy does."""

    def __init__(self, gap_s: float | None) -> None:
        self.gap_s = gap_s
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.requests = 0
        self.stopping = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def _serve(self) -> None:
        while not self.stopping.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:  # a TLS client's hello is no request head: it gives up and closes
                    return
                data += chunk
            head, _, body = data.partition(b"\r\n\r\n")
            length = int(
                next(
                    v
                    for k, _, v in (h.partition(b":") for h in head.split(b"\r\n"))
                    if k.lower() == b"content-length"
                )
            )
            while len(body) < length:
                body += conn.recv(65536)
            self.requests += 1
            if self.gap_s is None:
                self.stopping.wait(60)
                return
            try:
                for byte in b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n":
                    conn.sendall(bytes([byte]))
                    if self.stopping.wait(self.gap_s):
                        return
            except OSError:
                pass

    def stop(self) -> None:
        self.stopping.set()
        self.listener.close()


def test_a_dripping_receiver_is_given_one_deadline_for_the_whole_request(tmp_path: Path) -> None:
    """A socket timeout bounds each read: a receiver dripping its answer a byte at a time held
    one delivery 37 s with a 15 s timeout. ``timeout_s`` is the whole request's."""
    dripper = Dripper(gap_s=0.2)  # 38 bytes: 7.6 s
    db = tmp_path / "store.db"
    conn = connect(db)
    try:
        deliveries = Deliveries(conn, config_for(db, dripper.url, max_attempts=5), timeout_s=1.0)
        deliveries.enqueue(alert(audiences=("town",)), T0)
        conn.execute("UPDATE deliveries SET status = 'delivered' WHERE channel_type <> 'webhook'")
        started = time.monotonic()
        assert deliveries.deliver_due(T0) == 0
        assert time.monotonic() - started < 2.5
        [row] = [r for r in deliveries.rows() if r["channel_type"] == "webhook"]
        assert dripper.requests == 1
        assert (row["status"], row["attempts"]) == (PENDING, 1)
        assert row["last_error"].endswith(
            "did not answer within 1.01 s (the whole request)"
        )  # 1 s + its size
    finally:
        dripper.stop()
        conn.close()


def test_an_https_webhook_is_delivered_and_a_silent_one_ends_at_the_deadline(
    tmp_path: Path, tls_cert: tuple[Path, Path], client_tls: ssl.SSLContext
) -> None:
    """The TLS handshake runs under the request's deadline too: a host that accepts the
    connection and never answers it is given ``timeout_s`` in all."""
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_tls.load_cert_chain(*map(str, tls_cert))
    secure = Hook(free_port(), tls=server_tls).start()
    silent = Dripper(gap_s=None)
    silent_tls = f"https://127.0.0.1:{silent.port}/hook"  # it reads the ClientHello as a request head
    try:
        for url, delivered in ((secure.url, 1), (silent_tls, 0)):
            db = tmp_path / f"store-{delivered}.db"
            conn = connect(db)
            deliveries = Deliveries(conn, config_for(db, url), ssl_context=client_tls, timeout_s=1.0)
            deliveries.enqueue(alert(audiences=("town",)), T0)
            conn.execute("UPDATE deliveries SET status = 'delivered' WHERE channel_type <> 'webhook'")
            started = time.monotonic()
            assert deliveries.deliver_due(T0) == delivered
            assert time.monotonic() - started < 2.5
            [row] = [r for r in deliveries.rows() if r["channel_type"] == "webhook"]
            if not delivered:
                assert row["last_error"].endswith(
                    "did not answer within 1.01 s (the whole request)"
                )  # 1 s + its size
            conn.close()
        assert len(secure.accepted()) == 1
    finally:
        secure.stop()
        silent.stop()


def test_a_hanging_receiver_holds_only_its_own_deliveries(tmp_path: Path, hook: Hook) -> None:
    """With one sender, a Town webhook that hung held every delivery behind it for the timeout
    (15 s an attempt): the operator's alerts waited. Each channel sends in a lane of its own."""
    town = Dripper(gap_s=None)  # accepts the request and never answers
    db = tmp_path / "store.db"
    config = config_for(db, town.url, operator_hook_url=hook.url, max_attempts=5)
    store = Store(db)
    deliveries = Deliveries(store.conn, config)
    with store.batch():
        deliveries.enqueue(alert("a1", audiences=("town",)), T0)
    worker = DeliveryWorker(str(db), config, None, lambda: T0, interval_s=0.05)
    worker.start()
    try:
        assert wait_until(lambda: town.requests == 1, 5)  # the Town's request hangs
        with store.batch():
            deliveries.enqueue(alert("a2", audiences=("operator",)), T0)
        worker.wake()
        assert wait_until(lambda: len(hook.accepted()) == 1, 3), "the operator's alert waited"
        assert json.loads(hook.accepted()[0][1])["alert"]["id"] == "a2"
        [town_row] = [r for r in deliveries.rows() if r["recipient"] == "County inspector"]
        assert (town_row["status"], town_row["attempts"]) == (PENDING, 0)  # still in its attempt
    finally:
        town.stop()  # the hanging request ends: its lane records the failure and stops
        worker.stop(timeout=10)
        store.close()


def test_a_worker_started_on_a_locked_store_waits_for_it_and_then_delivers(
    tmp_path: Path, hook: Hook, caplog: pytest.LogCaptureFixture
) -> None:
    """A worker started while another connection held the store (``locking_mode=EXCLUSIVE``: no
    one else reads it) past its busy timeout died of "database is locked" in its first
    statement: the daemon went on, and no alert was delivered until it was restarted. The lock
    and the store are real; the busy timeout is 0.2 s instead of 30 s."""
    db = tmp_path / "store.db"
    config = config_for(db, hook.url)
    Store(db).close()
    holder = sqlite3.connect(str(db), isolation_level=None)
    holder.execute("PRAGMA locking_mode=EXCLUSIVE")
    holder.execute("BEGIN IMMEDIATE")
    holder.execute("UPDATE deliveries SET reported = reported")  # the exclusive lock, held
    holder.execute("COMMIT")
    worker = DeliveryWorker(str(db), config, None, lambda: T0, interval_s=0.05, busy_timeout_s=0.2)
    worker.start()
    try:
        assert wait_until(lambda: "database is locked" in caplog.text, 5)
        time.sleep(0.5)  # more rounds, each locked out
        assert worker.is_alive()
        holder.close()  # the lock ends
        store = Store(db)
        with store.batch():
            Deliveries(store.conn, config).enqueue(alert(audiences=("town",)), T0)
        store.close()
        worker.wake()
        assert wait_until(lambda: len(hook.accepted()) == 1, 5), "nothing was delivered after the lock"
        # Said once the round that delivered has closed its connection: after the town's answer.
        assert wait_until(lambda: "works again" in caplog.text, 5)
    finally:
        holder.close()
        worker.stop(timeout=5)


def test_restart_with_undelivered_alerts_delivers_exactly_once(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    port = free_port()  # nobody listens here yet: the receiver is down
    config = config_for(db, f"http://127.0.0.1:{port}/hook", max_attempts=10)
    clock = {"now": T0}

    worker = DeliveryWorker(str(db), config, None, lambda: clock["now"], interval_s=0.05)
    store = Store(db)
    deliveries = Deliveries(store.conn, config)
    with store.batch():
        deliveries.enqueue(alert("a1", audiences=("town",)), T0)
        deliveries.enqueue(alert("a2", audiences=("town",)), T0)
    store.close()  # the daemon writes them and stops
    worker.start()
    deadline = time.monotonic() + 10
    conn = connect(db)
    while time.monotonic() < deadline:
        attempts = conn.execute(
            "SELECT MIN(attempts) FROM deliveries WHERE channel_type = 'webhook'"
        ).fetchone()
        if attempts[0] >= 1:
            break
        time.sleep(0.02)
    worker.stop()
    rows = conn.execute("SELECT status, last_error FROM deliveries WHERE channel_type = 'webhook'").fetchall()
    assert [r[0] for r in rows] == [PENDING, PENDING]
    assert all("unreachable" in r[1] for r in rows)
    conn.close()

    # Restart: the receiver is up now, a new worker on a new connection, later clock.
    server = Hook(port).start()
    try:
        clock["now"] = T0 + timedelta(minutes=5)
        worker = DeliveryWorker(str(db), config, None, lambda: clock["now"], interval_s=0.05)
        worker.start()
        deadline = time.monotonic() + 10
        while len(server.accepted()) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.3)  # more rounds of the worker: nothing is sent twice
        worker.stop()
        keys = sorted(h["idempotency-key"] for h, _ in server.accepted())
        assert len(keys) == 2 and len(set(keys)) == 2
        assert sorted(json.loads(b)["alert"]["id"] for _, b in server.accepted()) == ["a1", "a2"]
        conn = connect(db)
        assert [
            r[0] for r in conn.execute("SELECT status FROM deliveries WHERE channel_type = 'webhook'")
        ] == [DELIVERED, DELIVERED]
        conn.close()
    finally:
        server.stop()


def test_two_senders_never_send_one_delivery_at_the_same_time(tmp_path: Path, hook: Hook) -> None:
    """`minewatch report --send` and the daemon both sent the same rows (one webhook POSTed at
    15:04:40.5 and again at 15:04:42.9): nothing claimed a row before sending it."""
    db = tmp_path / "store.db"
    config = config_for(db, hook.url, max_attempts=5)
    setup = connect(db)
    Deliveries(setup, config).enqueue(alert("a1", audiences=("town",)), T0)
    Deliveries(setup, config).enqueue(alert("a2", audiences=("town",)), T0)
    hook.delay_s = 0.3  # both senders are in their send at once
    start = threading.Barrier(2)
    sent: list[int] = []

    def sender() -> None:
        conn = connect(db)
        deliveries = Deliveries(conn, config)
        start.wait()
        sent.append(deliveries.deliver_due(T0, alert_id=None))
        conn.close()

    threads = [threading.Thread(target=sender) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    keys = sorted(h["idempotency-key"] for h, _ in hook.accepted())
    assert len(keys) == 2 and len(set(keys)) == 2, keys  # each webhook delivery POSTed once
    assert sum(sent) == 2
    rows = [r for r in Deliveries(setup, config).rows() if r["channel_type"] == "webhook"]
    assert [(r["status"], r["attempts"], r["claim_owner"]) for r in rows] == [(DELIVERED, 1, "")] * 2
    setup.close()


def test_a_sender_that_dies_mid_send_leaves_a_claim_that_lapses(tmp_path: Path, hook: Hook) -> None:
    """At least once after a crash: the row waits for the dead sender's claim, then goes."""
    db = tmp_path / "store.db"
    config = config_for(db, hook.url, max_attempts=5)
    conn = connect(db)
    Deliveries(conn, config).enqueue(alert("a1", audiences=("operator",)), T0)
    conn.execute("UPDATE deliveries SET status = 'delivered' WHERE channel_type <> 'mqtt'")

    def killed(topic: str, payload: bytes, retain: bool) -> None:
        raise SystemExit("killed mid-send")  # not an Exception: nothing after it runs

    dying = Deliveries(connect(db), config, claim_s=0.5)
    with pytest.raises(SystemExit):
        dying.deliver_due(T0, killed)
    [row] = Deliveries(conn, config).rows(PENDING)
    assert (row["claim_owner"], row["attempts"]) == (dying.owner, 0)

    published: list[str] = []
    survivor = Deliveries(conn, config)
    assert survivor.deliver_due(T0, lambda t, p, r: published.append(t)) == 0  # claimed: left alone
    assert survivor.due_targets(T0) == []
    time.sleep(0.6)
    assert survivor.due_targets(T0) == [("Acme operations", 1)]
    assert survivor.deliver_due(T0, lambda t, p, r: published.append(t)) == 1
    assert published == ["acme/quarry/alerts"]
    conn.close()


# --------------------------------------------------------------------------- undeliverable


def test_undeliverable_after_max_attempts_alerts_the_operator_elsewhere(
    tmp_path: Path, hook: Hook, mosquitto: Mosquitto
) -> None:
    db = tmp_path / "store.db"
    config = config_for(db, "http://127.0.0.1:1/unused", operator_hook_url=hook.url, max_attempts=3)
    store = Store(db)
    deliveries = Deliveries(store.conn, config)
    published: list[dict[str, Any]] = []
    book = AlertBook(store, config.alerts, lambda site, body: published.append(body))
    book.listeners.append(lambda body: deliveries.enqueue(body, T0))
    with store.batch():
        book.raise_(Alert("quarry", ("operator",), "warning", "warning", "c1", "Noise near the limit"), T0)

    worker_conn = connect(db)
    worker = Deliveries(worker_conn, config)
    client, publish = publisher(mosquitto)
    sub = Subscriber(mosquitto, "acme/#")
    try:
        hook.statuses = [503] * 10
        worker.deliver_due(T0, publish)  # mqtt delivered; webhook attempt 1
        worker.deliver_due(T0 + timedelta(seconds=2), publish)  # attempt 2
        worker.deliver_due(T0 + timedelta(seconds=6), publish)  # attempt 3: gives up
        webhook = [r for r in worker.rows() if r["channel_type"] == "webhook"]
        assert [(r["status"], r["attempts"]) for r in webhook] == [(UNDELIVERABLE, 3)]
        assert len(hook.received) == 3
        topic, payload = sub.get()
        assert topic == "acme/quarry/alerts" and json.loads(payload)["message"] == "Noise near the limit"

        # The pipeline, on its tick: raise the undeliverable alert (stored, chained), routed around
        # the failure.
        now = T0 + timedelta(seconds=7)
        with store.batch():
            claimed = deliveries.claim_undeliverable()
            for u in claimed:
                book.raise_(u.alert, now)
        assert len(claimed) == 1 and "after 3 attempt(s)" in claimed[0].message
        assert deliveries.claim_undeliverable() == []
        stored = store.conn.execute(
            "SELECT kind, audience FROM alerts WHERE kind = 'undeliverable'"
        ).fetchall()
        assert [tuple(r) for r in stored] == [("undeliverable", "operator")]
        assert store.conn.execute("SELECT COUNT(*) FROM chain WHERE kind = 'alert'").fetchone()[0] == 2
        new = [r for r in deliveries.rows() if json.loads(r["alert"])["kind"] == "undeliverable"]
        assert [(r["recipient"], r["channel_type"]) for r in new] == [("Acme operations", "mqtt")]
        assert worker.deliver_due(now, publish) == 1
        topic, payload = sub.get()
        assert json.loads(payload)["kind"] == "undeliverable"
        assert len(hook.received) == 3  # not re-sent through the failing webhook
    finally:
        sub.close()
        stop_network_loop(client)
        client.disconnect()
        worker_conn.close()
        store.close()


def test_a_token_in_a_webhook_url_is_shown_nowhere_but_in_its_request(
    tmp_path: Path, hook: Hook, caplog: pytest.LogCaptureFixture
) -> None:
    """A Town's ``?token=`` reached the daemon's log, the deliveries table and the chained
    "undeliverable" alerts (exported in evidence bundles), and through those alerts the
    operator's webhook. Shown, the URL keeps its names and hides their values."""
    from monitor.evidence import export_bundle
    from monitor.evidence.disclosure import Disclosure

    secret = "SECRET-town-9f2c"
    operator = Hook(free_port()).start()
    db = tmp_path / "store.db"
    town_url = f"{hook.url}?token={secret}&site=quarry"
    config = config_for(db, town_url, operator_hook_url=operator.url, max_attempts=2)
    store = Store(db)
    published: list[dict[str, Any]] = []
    book = AlertBook(store, config.alerts, lambda site, body: published.append(body))
    deliveries = Deliveries(store.conn, config)
    book.listeners.append(lambda body: deliveries.enqueue(body, T0))
    caplog.set_level("DEBUG")
    try:
        with store.batch():
            book.raise_(Alert("quarry", ("town",), "violation", "violation", "c1", "Noise over"), T0)
        hook.statuses = [503, 503]
        deliveries.deliver_due(T0)
        deliveries.deliver_due(T0 + timedelta(seconds=2))
        assert hook.paths == [f"/hook?token={secret}&site=quarry"] * 2  # the request has the real URL
        [row] = [r for r in deliveries.rows() if r["channel_type"] == "webhook"]
        shown = shown_url(town_url)  # scheme, host, port and a fingerprint of the rest
        assert shown.startswith(f"http://127.0.0.1:{hook.port}/…[") and secret not in shown
        assert (row["status"], row["target"]) == (UNDELIVERABLE, shown)
        assert row["last_error"] == f"webhook {shown!r} answered HTTP 503 Service Unavailable"

        now = T0 + timedelta(seconds=3)
        with store.batch():
            for failed in deliveries.claim_undeliverable():
                book.raise_(failed.alert, now)
        deliveries.deliver_due(now)
        [told] = [json.loads(b)["alert"] for _, b in operator.accepted() if shown in b.decode()]
        assert told["kind"] == "undeliverable" and told["data"]["target"] == shown

        bundle = tmp_path / "bundle.zip"
        everyone = Disclosure(audiences=frozenset({"town", "inspector", "operator"}))
        export_bundle(
            config,
            "quarry",
            T0 - timedelta(hours=1),
            now + timedelta(hours=1),
            bundle,
            plots=False,
            disclosure=everyone,
        )
        import zipfile

        with zipfile.ZipFile(bundle) as z:
            exported = b"".join(z.read(name) for name in z.namelist())
        assert b"undeliverable" in exported and shown.encode() in exported
        everything = {
            "log": caplog.text,
            "deliveries": json.dumps([dict(r) for r in deliveries.rows()]),
            "alerts": json.dumps([dict(r) for r in store.conn.execute("SELECT * FROM alerts")]),
            "published": json.dumps(published, default=str),
            "operator's webhook": b"".join(b for _, b in operator.accepted()).decode(),
            "bundle": exported.decode("utf-8", "replace"),
        }
        assert [where for where, text in everything.items() if secret in text] == []
    finally:
        operator.stop()
        store.close()


def test_a_delivery_stored_with_its_real_url_is_shown_and_still_sent(tmp_path: Path, hook: Hook) -> None:
    """Rows stored before URLs were shown hold the real URL in ``target`` and ``last_error``: the
    migration shows both, and the row still finds its channel (by the shown URL) and is sent."""
    db = tmp_path / "store.db"
    town_url = f"{hook.url}?token=SECRET-old-row"
    config = config_for(db, town_url, max_attempts=5)
    store = Store(db)
    Deliveries(store.conn, config).enqueue(alert(audiences=("town",)), T0)
    store.conn.execute(
        "UPDATE deliveries SET target = ?, attempts = 1, last_error = ? WHERE channel_type = 'webhook'",
        (town_url, f"webhook {town_url!r} answered HTTP 503 Service Unavailable"),
    )
    store.conn.execute("DELETE FROM migrations WHERE name = 'deliveries-shown-targets'")
    store.close()

    conn = connect(db)
    deliveries = Deliveries(conn, config)  # the store is opened by a newer minewatch
    [row] = [r for r in deliveries.rows() if r["channel_type"] == "webhook"]
    shown = shown_url(town_url)
    assert row["target"] == shown and "SECRET" not in shown
    assert row["last_error"] == f"webhook {shown!r} answered HTTP 503 Service Unavailable"
    deliveries.deliver_due(T0)
    assert deliveries.get(row["id"])["status"] == DELIVERED  # type: ignore[index]
    assert hook.paths == ["/hook?token=SECRET-old-row"]
    conn.close()


def test_deliveries_stored_with_a_token_in_the_shown_path_are_shown_anew_and_still_sent(
    tmp_path: Path, hook: Hook
) -> None:
    """The earlier shown form kept a URL's path whole, a chat service's token and all
    (``/services/T…/B…/SECRET``), in ``target`` and ``last_error`` (and a redirect's target in
    the error). The migration shows both as monitor/shown_url.py shows them now, a row shown
    the earlier way for a ``?token=`` URL too, and each row still finds its channel and is sent."""
    db = tmp_path / "store.db"
    path_url = f"http://127.0.0.1:{hook.port}/services/T000/B000/SECRET-in-path"
    query_url = f"{hook.url}?token=SECRET-in-query"
    config = config_for(db, path_url, operator_hook_url=query_url, max_attempts=5)
    store = Store(db)
    Deliveries(store.conn, config).enqueue(alert(audiences=("town", "operator")), T0)
    store.conn.execute("UPDATE deliveries SET status = 'delivered' WHERE channel_type <> 'webhook'")
    redirect_error = (
        f"webhook {path_url!r} answered 302 (a redirect to http://elsewhere.example/hook/SECRET-moved):"
        " minewatch does not follow redirects; set the webhook url to the final address"
    )
    for recipient, target, error in (
        ("County inspector", path_url, redirect_error),  # the earlier shown form of path_url: itself
        ("Acme operations", f"{hook.url}?token=…", f"webhook '{hook.url}?token=…' answered HTTP 503"),
    ):
        store.conn.execute(
            "UPDATE deliveries SET target = ?, attempts = 1, last_error = ? WHERE recipient = ?",
            (target, error, recipient),
        )
    store.conn.execute("DELETE FROM migrations WHERE name = 'deliveries-shown-fingerprints'")
    store.close()

    conn = connect(db)
    deliveries = Deliveries(conn, config)  # the store is opened by a newer minewatch
    rows = {r["recipient"]: r for r in deliveries.rows() if r["channel_type"] == "webhook"}
    assert rows["County inspector"]["target"] == shown_url(path_url)
    assert rows["County inspector"]["last_error"] == (
        f"webhook {shown_url(path_url)!r} answered 302 (a redirect to"
        f" {shown_url('http://elsewhere.example/hook/SECRET-moved')}): minewatch does not follow"
        " redirects; set the webhook url to the final address"
    )
    assert rows["Acme operations"]["target"] == shown_url(query_url)
    assert "SECRET" not in json.dumps([dict(r) for r in rows.values()])
    assert deliveries.deliver_due(T0) == 2
    assert sorted(hook.paths) == ["/hook?token=SECRET-in-query", "/services/T000/B000/SECRET-in-path"]
    conn.close()


def test_an_undeliverable_alert_waiting_to_be_sent_is_shown_anew_and_its_chained_alert_kept(
    tmp_path: Path, hook: Hook
) -> None:
    """An "undeliverable" alert raised while a shown URL kept its path carries the Town's token in
    its message, its target and its error; the migration rewrote the deliveries' columns but not
    the copy of that alert waiting in the operator's delivery row, which then went out with the
    token. The copy not yet delivered is shown now and sent so; the chained alert, and a copy
    already delivered, keep what they said."""
    db = tmp_path / "store.db"
    town_url = "http://town.example/services/T000/B000/SECRET-in-path"  # the failed channel's URL
    config = config_for(db, town_url, operator_hook_url=hook.url)
    store = Store(db)
    deliveries = Deliveries(store.conn, config)
    book = AlertBook(store, config.alerts, lambda site, body: None)
    book.listeners.append(lambda body: deliveries.enqueue(body, T0))
    error = f"webhook {town_url!r} answered HTTP 503 Service Unavailable"  # the earlier shown form
    failed = UndeliverableAlert(
        site="quarry",
        message=f"An alert could not be delivered to County inspector by webhook ({town_url}) after 3"
        f" attempt(s): {error}. The alert was: Noise over",
        condition="undeliverable:dl-1",
        data={"recipient": "County inspector", "channel_type": "webhook", "target": town_url, "error": error},
    )
    with store.batch():
        book.raise_(failed.alert, T0)
    copies = {r["channel_type"]: r["id"] for r in deliveries.rows()}
    assert set(copies) == {"webhook", "mqtt"}  # the operator's webhook and topic
    store.conn.execute("UPDATE deliveries SET status = 'delivered' WHERE id = ?", (copies["mqtt"],))
    store.conn.execute("DELETE FROM migrations WHERE name = 'deliveries-shown-alert-copies'")
    store.close()

    conn = connect(db)
    deliveries = Deliveries(conn, config)  # the store is opened by a newer minewatch
    shown = shown_url(town_url)
    waiting = json.loads(deliveries.get(copies["webhook"])["alert"])  # type: ignore[index]
    assert waiting["data"]["target"] == shown
    assert waiting["data"]["error"] == f"webhook {shown!r} answered HTTP 503 Service Unavailable"
    assert f"by webhook ({shown}) after 3 attempt(s): webhook {shown!r} answered" in waiting["message"]
    assert deliveries.deliver_due(T0) == 1
    [(_, body)] = hook.accepted()
    assert json.loads(body)["alert"] == waiting and b"SECRET" not in body
    sent = deliveries.get(copies["mqtt"])["alert"]  # type: ignore[index]
    assert "SECRET-in-path" in sent  # delivered already: what was sent
    [chained] = conn.execute("SELECT message, data FROM alerts WHERE kind = 'undeliverable'").fetchall()
    assert "SECRET-in-path" in chained[0] and "SECRET-in-path" in chained[1]  # the chain is not rewritten
    conn.close()


def _undeliverable_in_the_earlier_shown_form(
    db: Path, config: Config, town_url: str
) -> tuple[Store, Deliveries, AlertBook, UndeliverableAlert]:
    """A store whose alert book queues deliveries, and an "undeliverable" alert naming
    ``town_url`` whole, as alerts were worded before URLs were shown (not raised yet)."""
    store = Store(db)
    deliveries = Deliveries(store.conn, config)
    book = AlertBook(store, config.alerts, lambda site, body: None)
    book.listeners.append(lambda body: deliveries.enqueue(body, T0))
    error = f"webhook {town_url!r} answered HTTP 503 Service Unavailable"  # the earlier shown form
    failed = UndeliverableAlert(
        site="quarry",
        message=f"An alert could not be delivered to County inspector by webhook ({town_url}): {error}",
        condition="undeliverable:dl-1",
        data={"recipient": "County inspector", "channel_type": "webhook", "target": town_url, "error": error},
    )
    return store, deliveries, book, failed


def test_a_copy_rewritten_after_a_try_went_out_is_sent_under_a_key_of_its_own(
    tmp_path: Path, hook: Hook
) -> None:
    """An upgrade shows anew the URLs in an "undeliverable" alert's copy waiting to be sent
    (deliveries-shown-alert-copies and those after it): a receiver that took an earlier try of
    the copy as it was (our side gave up waiting for its answer) was then sent another body
    under the same Idempotency-Key, which a receiver keeping keys drops as a duplicate or refuses
    as a key reused. The rewritten copy goes under a key of its own, the same on its retries."""
    db = tmp_path / "store.db"
    town_url = "http://town.example/services/T000/B000/SECRET-in-path"  # the failed channel's URL
    config = config_for(db, town_url, operator_hook_url=hook.url, max_attempts=5)
    store, deliveries, book, failed = _undeliverable_in_the_earlier_shown_form(db, config, town_url)
    with store.batch():
        book.raise_(failed.alert, T0)
    copies = {r["channel_type"]: r["id"] for r in deliveries.rows()}
    store.conn.execute("UPDATE deliveries SET status = 'delivered' WHERE id = ?", (copies["mqtt"],))
    hook.delay_s = 1.5  # the receiver takes the body and answers after our side stopped waiting
    assert Deliveries(store.conn, config, timeout_s=0.3).deliver_due(T0) == 0
    assert wait_until(lambda: len(hook.received) == 1, 5)
    store.conn.execute("DELETE FROM migrations WHERE name = 'deliveries-shown-relay-hosts'")
    store.close()

    hook.delay_s = 0.0
    conn = connect(db)
    deliveries = Deliveries(conn, config)  # the store is opened by a newer minewatch
    hook.statuses = [503]  # the rewritten copy's first try fails, its retry goes through
    assert deliveries.deliver_due(T0 + timedelta(minutes=1)) == 0
    assert deliveries.deliver_due(T0 + timedelta(minutes=10)) == 1
    sent = [(h["idempotency-key"], body) for h, body, _ in hook.received]
    bodies_by_key: dict[str, set[bytes]] = {}
    for key, body in sent:
        bodies_by_key.setdefault(key, set()).add(body)
        assert json.loads(body)["delivery_id"] == key
    assert [len(bodies) for bodies in bodies_by_key.values()] == [1, 1]  # one body a key
    (first, before), (again, rewritten), (retried, _) = sent
    assert first == copies["webhook"] and b"SECRET-in-path" in before
    assert again == retried != first and again.startswith(first + "-")  # a retry keeps the new key
    assert b"SECRET-in-path" not in rewritten
    conn.close()


def test_a_rewritten_copy_mailed_goes_under_a_message_id_of_its_own(
    tmp_path: Path, smtp: Mailbox, client_tls: ssl.SSLContext
) -> None:
    """The e-mail path of the key above: a mail client folds two messages of one Message-ID
    into one, so a rewritten copy mailed under its old Message-ID could be hidden behind the
    earlier try. A copy as chained keeps ``<id@minewatch>``; a rewritten one goes as
    ``<id>-<8 hex of the copy's SHA-256>``, through a real SMTP server."""
    db = tmp_path / "store.db"
    town_url = "http://town.example/services/T000/B000/SECRET-in-path"
    operator_by_mail = RECIPIENTS.replace(
        'name = "Acme operations"\nrole = "operator"\n',
        'name = "Acme operations"\nrole = "operator"\n[[recipients.channels]]\ntype = "email"\n'
        'to = ["ops@acme.example"]\nsmtp_host = "127.0.0.1"\nsmtp_port = {smtp_port}\n'
        'smtp_starttls = true\nsmtp_username = "minewatch"\nsmtp_password = "smtp-pass"\n'
        'sender = "minewatch@quarry.example"\n',
    )
    assert operator_by_mail != RECIPIENTS
    recipients = operator_by_mail.format(
        smtp_port=smtp.port, hook_url=town_url, hmac_key=HMAC_KEY, operator_hook_url="http://127.0.0.1:9/x"
    )
    config = make_config(db, OTHER_SITE + recipients, max_attempts=5)
    store, deliveries, book, failed = _undeliverable_in_the_earlier_shown_form(db, config, town_url)
    with store.batch():
        book.raise_(failed.alert, T0)
        never_rewritten = Alert("quarry", ("operator",), "violation", "violation", "c-a2", "Noise at n1")
        book.raise_(never_rewritten, T0)
    mailed = {
        json.loads(r["alert"])["kind"]: r["id"] for r in deliveries.rows() if r["channel_type"] == "email"
    }
    assert sorted(mailed) == ["undeliverable", "violation"], mailed
    store.conn.execute("DELETE FROM migrations WHERE name = 'deliveries-shown-relay-hosts'")
    store.close()

    conn = connect(db)
    sender = Deliveries(conn, config, ssl_context=client_tls)  # the store opened by a newer minewatch
    sender.deliver_due(T0)
    ids = sorted(message["Message-ID"] for _envelope, message in smtp.messages)
    copy = next(r for r in sender.rows() if r["id"] == mailed["undeliverable"])
    assert "SECRET-in-path" not in copy["alert"]  # the migration rewrote it
    digest = hashlib.sha256(copy["alert"].encode()).hexdigest()[:8]
    assert ids == sorted([f"<{copy['id']}-{digest}@minewatch>", f"<{mailed['violation']}@minewatch>"])
    conn.close()


def test_deliveries_stored_with_a_token_in_the_shown_host_are_shown_anew(tmp_path: Path) -> None:
    """A shown URL kept its host whole, a receiver's token in it (ngrok's
    ``<token>.ngrok-free.app``): in the target, the last error and an undeliverable alert's copy
    waiting to be sent. The migration shows them as the host is shown now, and the row still
    names its channel (its target is the channel's)."""
    db = tmp_path / "store.db"
    token = "a1b2c3d4e5f6a7b8c9d0"
    town_url = f"https://{token}.ngrok-free.app/hook"
    config = config_for(db, town_url)
    store = Store(db)
    deliveries = Deliveries(store.conn, config)
    deliveries.enqueue(alert(audiences=("town",)), T0)
    shown_before = f"https://{token}.ngrok-free.app/" + shown_url(town_url).split("/", 3)[3]
    error = f"webhook {shown_before!r} answered HTTP 503 Service Unavailable"
    store.conn.execute(
        "UPDATE deliveries SET target = ?, attempts = 1, last_error = ? WHERE channel_type = 'webhook'",
        (shown_before, error),
    )
    told = {  # an undeliverable alert's copy waiting for the operator's channels, as stored then
        **alert("u1", audiences=("operator",)),
        "kind": "undeliverable",
        "message": f"An alert could not be delivered to County inspector by webhook ({shown_before})",
        "data": {"channel_type": "webhook", "target": shown_before, "error": error},
    }
    assert deliveries.enqueue(told, T0) == 2
    store.conn.execute("DELETE FROM migrations WHERE name = 'deliveries-shown-hosts'")
    store.close()

    conn = connect(db)
    deliveries = Deliveries(conn, config)  # the store is opened by a newer minewatch
    shown = shown_url(town_url)
    assert shown.startswith("https://…[") and token not in shown
    [row] = [
        r for r in deliveries.rows() if r["channel_type"] == "webhook" and r["recipient"] != "Acme operations"
    ]
    [route] = [
        r for r in routes_for(alert(audiences=("town",)), config.recipients) if r.channel.type == "webhook"
    ]
    assert row["target"] == route.target == shown
    assert row["last_error"] == f"webhook {shown!r} answered HTTP 503 Service Unavailable"
    assert token not in json.dumps([dict(r) for r in deliveries.rows()])
    conn.close()


@pytest.mark.parametrize(
    ("name", "domain", "migration"),
    [
        ("seasonal-deck-organisms-sf", "trycloudflare.com", "deliveries-shown-relay-hosts"),
        ("quarry-office.tail4f2a9c", "ts.net", "deliveries-shown-more-relay-hosts"),
        ("rnsxw-203-0-113-5.a.free", "pinggy.link", "deliveries-shown-more-relay-hosts"),
    ],
)
def test_deliveries_stored_with_a_relay_receivers_name_in_the_host_are_shown_anew(
    tmp_path: Path, name: str, domain: str, migration: str
) -> None:
    """A Cloudflare quick tunnel's name is words (``<words>.trycloudflare.com``), shown whole as
    a name, yet the name alone reaches the receiver (a Tailscale Funnel's machine and tailnet,
    a pinggy tunnel's too): in the target, the last error and an undeliverable alert's copy
    waiting to be sent. The migration shows them with the name as a fingerprint, and the row
    still names its channel."""
    db = tmp_path / "store.db"
    town_url = f"https://{name}.{domain}/hook"
    config = config_for(db, town_url)
    store = Store(db)
    deliveries = Deliveries(store.conn, config)
    deliveries.enqueue(alert(audiences=("town",)), T0)
    shown_before = f"https://{name}.{domain}/" + shown_url(town_url).split("/", 3)[3]
    error = f"webhook {shown_before!r} answered HTTP 503 Service Unavailable"
    store.conn.execute(
        "UPDATE deliveries SET target = ?, attempts = 1, last_error = ? WHERE channel_type = 'webhook'",
        (shown_before, error),
    )
    told = {  # an undeliverable alert's copy waiting for the operator's channels, as stored then
        **alert("u1", audiences=("operator",)),
        "kind": "undeliverable",
        "message": f"An alert could not be delivered to County inspector by webhook ({shown_before})",
        "data": {"channel_type": "webhook", "target": shown_before, "error": error},
    }
    assert deliveries.enqueue(told, T0) == 2
    store.conn.execute("DELETE FROM migrations WHERE name = ?", (migration,))
    store.close()

    conn = connect(db)
    deliveries = Deliveries(conn, config)  # the store is opened by a newer minewatch
    shown = shown_url(town_url)
    assert shown.startswith("https://…[") and shown.endswith(f".{domain}/…[6fc2d051]")
    [row] = [
        r for r in deliveries.rows() if r["channel_type"] == "webhook" and r["recipient"] != "Acme operations"
    ]
    [route] = [
        r for r in routes_for(alert(audiences=("town",)), config.recipients) if r.channel.type == "webhook"
    ]
    assert row["target"] == route.target == shown
    assert row["last_error"] == f"webhook {shown!r} answered HTTP 503 Service Unavailable"
    stored = json.dumps([dict(r) for r in deliveries.rows()])
    assert name not in stored
    assert all(label not in stored for label in name.split(".") if len(label) > 4), stored
    conn.close()


# --------------------------------------------------------------------------- e-mail and MQTT


def test_email_over_starttls_with_login_and_notice_pdf(
    tmp_path: Path, smtp: Mailbox, client_tls: ssl.SSLContext, hook: Hook
) -> None:
    db = tmp_path / "store.db"
    config = config_for(db, hook.url, smtp_port=smtp.port)
    store = Store(db)
    site, profile = site_and_profile(config)
    t = local(2026, 6, 15, 11, 30)
    [event] = NoticeBook(store).on_findings(
        site, profile, store_findings(store, [violation(t)], t), t + timedelta(minutes=2)
    )
    deliveries = Deliveries(store.conn, config)
    book = AlertBook(store, config.alerts, lambda site, body: None)
    book.listeners.append(lambda body: deliveries.enqueue(body, T0))
    with store.batch():
        book.raise_(event.alert, T0, dedupe=False)
    store.close()

    conn = connect(db)
    sender = Deliveries(conn, config, ssl_context=client_tls)
    assert sender.deliver_due(T0) >= 2  # the e-mail and the inspector's webhook
    assert [r["status"] for r in sender.rows() if r["channel_type"] == "email"] == [DELIVERED]
    assert smtp.logins == ["minewatch"] and smtp.tls_sessions == 1
    [(envelope, message)] = smtp.messages
    assert envelope.rcpt_tos == ["clerk@dovre.example"]
    assert envelope.mail_from == "minewatch@quarry.example"
    assert message["Subject"].startswith(
        "[minewatch quarry] notice opened: Notice of violation DOV-2026-0001"
    )
    assert message["Message-ID"].startswith("<dl-")
    text = message.get_body(("plain",))
    html_part = message.get_body(("html",))
    assert text is not None and html_part is not None
    assert "Notice: DOV-2026-0001" in text.get_content()
    assert "Cure deadline: 2026-06-29 23:59 CDT" in text.get_content()
    assert "DOV-2026-0001" in html_part.get_content()
    [attachment] = list(message.iter_attachments())
    assert attachment.get_filename() == "DOV-2026-0001.pdf"
    assert attachment.get_content().startswith(b"%PDF-")
    conn.close()


def test_an_alert_naming_the_operators_text_with_line_breaks_is_mailed(
    tmp_path: Path, smtp: Mailbox, client_tls: ssl.SSLContext
) -> None:
    """A blast id is the operator's text and may hold line breaks; an alert naming it went
    nowhere by e-mail (a header may not hold one: "internal error", retried until undeliverable),
    or, pasted into the header, would have added a recipient of the operator's choosing."""
    db = tmp_path / "store.db"
    conn = connect(db)
    deliveries = Deliveries(
        conn, config_for(db, "http://127.0.0.1:1/h", smtp_port=smtp.port), ssl_context=client_tls
    )
    hostile = alert(audiences=("town",), site="other")
    hostile["message"] = "Blast B-7\r\nBcc: neighbour@evil.example\n\tgone at 16:02 local, after 15:00"
    deliveries.enqueue(hostile, T0)
    deliveries.deliver_due(T0)
    [row] = [r for r in deliveries.rows() if r["channel_type"] == "email"]
    assert row["status"] == DELIVERED, row["last_error"]
    [(envelope, message)] = smtp.messages
    assert envelope.rcpt_tos == ["clerk@dovre.example"] and message["Bcc"] is None
    assert message["Subject"] == (
        "[minewatch other] violation: Blast B-7 Bcc: neighbour@evil.example gone at 16:02 local, after 15:00"
    )
    text = message.get_body(("plain",))
    assert text is not None  # the body keeps the text as written, a line break a line break
    assert text.get_content().replace("\r\n", "\n").startswith(hostile["message"].replace("\r\n", "\n"))
    conn.close()


def test_email_without_trusting_the_certificate_is_not_sent(tmp_path: Path, smtp: Mailbox) -> None:
    db = tmp_path / "store.db"
    conn = connect(db)
    deliveries = Deliveries(conn, config_for(db, "http://127.0.0.1:1/h", smtp_port=smtp.port))  # system CAs
    deliveries.enqueue(alert(audiences=("town",), site="other"), T0)
    deliveries.deliver_due(T0)
    [row] = [r for r in deliveries.rows() if r["channel_type"] == "email"]
    assert row["status"] == UNDELIVERABLE and "certificate not trusted" in row["last_error"]
    assert smtp.messages == []
    conn.close()


def test_email_wrong_password_is_undeliverable(
    tmp_path: Path, smtp: Mailbox, client_tls: ssl.SSLContext
) -> None:
    db = tmp_path / "store.db"
    config = config_for(db, "http://127.0.0.1:1/h", smtp_port=smtp.port)
    text = config.raw_text.replace('smtp_password = "smtp-pass"', 'smtp_password = "wrong"')
    from monitor.config import parse_config

    config = parse_config(text)
    conn = connect(db)
    deliveries = Deliveries(conn, config, ssl_context=client_tls)
    deliveries.enqueue(alert(audiences=("town",), site="other"), T0)
    deliveries.deliver_due(T0)
    [row] = [r for r in deliveries.rows() if r["channel_type"] == "email"]
    assert row["status"] == UNDELIVERABLE and "refused the login" in row["last_error"]
    conn.close()


def test_mqtt_channel_publishes_to_its_topic_and_retries_without_a_link(
    tmp_path: Path, mosquitto: Mosquitto
) -> None:
    db = tmp_path / "store.db"
    conn = connect(db)
    deliveries = Deliveries(conn, config_for(db, "http://127.0.0.1:1/h", max_attempts=5))
    deliveries.enqueue(alert("m1", audiences=("operator",)), T0)
    assert deliveries.deliver_due(T0, None) == 0  # no link yet: the mqtt delivery waits
    [row] = [r for r in deliveries.rows() if r["channel_type"] == "mqtt"]
    assert (row["status"], row["attempts"]) == (PENDING, 1)

    client, publish = publisher(mosquitto)
    sub = Subscriber(mosquitto, "acme/+/alerts")
    try:
        deliveries.deliver_due(T0 + timedelta(seconds=2), publish)
        topic, payload = sub.get()
        assert topic == "acme/quarry/alerts"
        assert json.loads(payload)["id"] == "m1"
        [row] = [r for r in deliveries.rows() if r["channel_type"] == "mqtt"]
        assert row["status"] == DELIVERED
    finally:
        sub.close()
        stop_network_loop(client)
        client.disconnect()
        conn.close()
