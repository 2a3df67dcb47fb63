"""The host name's lookup within the request's deadline (monitor/deadline_socket.py).

A resolver that does not answer cannot be made real here: it would take a name server that
holds its answers, and pointing the C library at one means editing /etc/resolv.conf (root,
and every other process on the machine). The lookup is therefore replaced by one that blocks,
``socket.getaddrinfo`` itself or the ``resolver`` argument, and nothing else is: the webhook's
request, its deadline and its error are the real ones. The normal path is shown by a real
POST to a local server by its name, ``localhost``.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from monitor import deadline_http, deadline_socket
from monitor.deadline_socket import MAX_LOOKUPS, Deadline
from monitor.errors import OutputError
from monitor.notify import webhook
from tests.support.servers import free_port
from tests.support.webhook import Hook

HANG_S = 6.0  # how long the stand-in resolver blocks at most (then the test's threads end)


@pytest.fixture
def released() -> Iterator[threading.Event]:
    """Set at the end of a test: every blocked lookup returns."""
    event = threading.Event()
    yield event
    event.set()


def hanging_resolver(released: threading.Event) -> Any:
    real = socket.getaddrinfo

    def resolve(host: str, *args: Any, **kwargs: Any) -> Any:
        released.wait(HANG_S)
        return real("127.0.0.1", *args, **kwargs)

    return resolve


def settled(given_up: int) -> None:
    """Wait until the lookups given up on and still running are ``given_up``."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and deadline_socket._given_up != given_up:
        time.sleep(0.01)
    assert deadline_socket._given_up == given_up


def test_a_webhook_whose_name_does_not_resolve_ends_at_the_deadline(
    monkeypatch: pytest.MonkeyPatch, released: threading.Event
) -> None:
    """getaddrinfo cannot be interrupted and ran before the deadline began: a resolver that did
    not answer held the delivery as long as it took (here HANG_S, in life resolv.conf's timeout
    times its attempts and servers), whatever ``timeout_s`` said."""
    monkeypatch.setattr(socket, "getaddrinfo", hanging_resolver(released))
    started = time.monotonic()
    with pytest.raises(OutputError) as raised:
        webhook.post("http://hooks.example:9/", b"{}", {}, timeout_s=0.5)
    assert time.monotonic() - started < 1.5
    assert (
        str(raised.value)
        == "webhook 'http://hooks.example:9/' did not answer within 0.5 s (the whole request)"
    )
    assert raised.value.retryable


def test_lookups_given_up_on_are_bounded_in_number(released: threading.Event) -> None:
    """Each lookup given up on still runs in its thread until the resolver answers: past
    MAX_LOOKUPS of them, a connection fails at once instead of adding one more."""
    settled(0)  # an earlier test's lookups, released at its end, have returned
    resolve = hanging_resolver(released)
    for _ in range(MAX_LOOKUPS):
        with pytest.raises(TimeoutError, match=r"the lookup of 'stuck\.example' did not finish"):
            deadline_socket.connect("stuck.example", 9, Deadline(0.02), resolver=resolve)
    started = time.monotonic()
    with pytest.raises(OSError, match=f"{MAX_LOOKUPS} lookups given up on are still waiting"):
        deadline_socket.connect("stuck.example", 9, Deadline(5.0), resolver=resolve)
    assert time.monotonic() - started < 0.5
    released.set()  # the resolver answers: the threads end and lookups go on
    settled(0)
    listener = socket.create_server(("127.0.0.1", 0))
    try:
        sock = deadline_socket.connect("localhost", listener.getsockname()[1], Deadline(5.0))
        sock.close()
    finally:
        listener.close()


def test_a_webhook_named_by_host_name_is_delivered_with_its_name_as_host() -> None:
    """The normal path: ``localhost`` looked up in the worker thread, connected to by address
    (each tried in turn, as socket.create_connection tries them), ``Host`` the name."""
    hook = Hook(free_port()).start()
    try:
        webhook.post(
            f"http://localhost:{hook.port}/hook",
            b'{"a": 1}',
            {"Content-Type": "application/json"},
            timeout_s=5,
        )
        [(headers, body)] = hook.accepted()
        assert body == b'{"a": 1}' and headers["host"] == f"localhost:{hook.port}"
    finally:
        hook.stop()


def recording_resolver(threads: list[str]) -> Any:
    """socket.getaddrinfo, noting the thread each lookup runs in."""

    def resolve(host: str, *args: Any, **kwargs: Any) -> Any:
        threads.append(threading.current_thread().name)
        return socket.getaddrinfo(host, *args, **kwargs)

    return resolve


@pytest.mark.parametrize("host", ["127.0.0.1", "::1"])
def test_a_webhook_at_an_ip_address_starts_no_lookup_thread(host: str) -> None:
    """Every request started a thread for its lookup, of an IP address too, which no resolver is
    asked about. The resolver argument is socket.getaddrinfo itself, noting where it runs; the
    server and the request are real."""
    hook = Hook(free_port(), host=host).start()
    threads: list[str] = []
    try:
        answer = deadline_http.post(hook.url, b"{}", {}, timeout_s=5, resolver=recording_resolver(threads))
        assert answer.status == 200
        assert threads == [threading.current_thread().name]  # read where the request is made
        [(headers, _)] = hook.accepted()
        assert headers["host"] == hook.url.split("/")[2]  # 127.0.0.1:port or [::1]:port
        sock = deadline_socket.connect(f"[{host}]" if ":" in host else host, hook.port, Deadline(5.0))
        sock.close()  # an IPv6 address in its URL's brackets too
    finally:
        hook.stop()


def test_an_ip_address_is_connected_to_while_lookups_of_names_are_stuck(released: threading.Event) -> None:
    """With MAX_LOOKUPS lookups of names given up on and waiting, a connection to an IP address
    failed at once too ("lookups given up on are still waiting"), though it needs no resolver."""
    settled(0)
    resolve = hanging_resolver(released)
    for _ in range(MAX_LOOKUPS):
        with pytest.raises(TimeoutError):
            deadline_socket.connect("stuck.example", 9, Deadline(0.02), resolver=resolve)
    listener = socket.create_server(("127.0.0.1", 0))
    try:
        sock = deadline_socket.connect("127.0.0.1", listener.getsockname()[1], Deadline(5.0))
        sock.close()
    finally:
        listener.close()
        released.set()
        settled(0)


def test_tls_to_an_ipv6_address_written_with_brackets_checks_the_address(tmp_path: Any) -> None:
    """An SMTP host given as URLs write an IPv6 address (``smtp_host = "[::1]"``) was handed
    to TLS with its brackets as the server's name, which no certificate names: the handshake
    failed against a certificate for ::1. A real TLS server on ::1 (its certificate made by
    openssl for IP ::1 alone), the real handshake."""
    import ssl
    import subprocess

    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2"),
            *("-keyout", str(key), "-out", str(cert), "-subj", "/CN=ipv6-test"),
            *("-addext", "subjectAltName=IP:::1"),
        ],
        check=True,
        capture_output=True,
    )
    server_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_tls.load_cert_chain(cert, key)
    listener = socket.create_server(("::1", 0), family=socket.AF_INET6)
    port = listener.getsockname()[1]

    def serve() -> None:
        conn, _ = listener.accept()
        with server_tls.wrap_socket(conn, server_side=True) as tls:
            tls.sendall(b"hello")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    client_tls = ssl.create_default_context(cafile=str(cert))
    deadline = Deadline(5)
    try:
        sock = deadline_socket.connect("[::1]", port, deadline)
        with deadline_socket.start_tls(sock, client_tls, "[::1]", deadline) as tls:
            tls.setblocking(True)
            assert tls.recv(5) == b"hello"
    finally:
        thread.join(5)
        listener.close()
