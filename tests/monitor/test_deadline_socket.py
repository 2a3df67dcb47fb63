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

from monitor import deadline_socket
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
