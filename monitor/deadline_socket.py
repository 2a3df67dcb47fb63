"""A TCP conversation bounded by one deadline: the host name's lookup, the connection, the TLS
handshake and every read and write after it.

HTTP (monitor/deadline_http.py: the InfluxDB v1 writer, the webhooks) and SMTP
(monitor/notify/smtp.py: e-mail) talk through it. A socket's timeout bounds each operation
alone: a server sending a byte every few seconds held a request with a 2 s timeout for 45 s,
and an SMTP server trickling its replies held a delivery lane for ever. Here each operation is
given what is left of one deadline, and the handshake runs without blocking under it.

The lookup (``getaddrinfo``) is the C library's and cannot be interrupted: a resolver that
does not answer held a request past any timeout, bounded only by ``resolv.conf``'s timeout and
attempts times its servers. It runs in a thread of its own, waited on for what is left of the
deadline; a lookup given up on finishes there by itself, and while ``MAX_LOOKUPS`` such
threads wait, a connection fails at once rather than adding threads. The
connection is then made to the address found, the name kept for TLS (SNI, the certificate's
name) and for HTTP's ``Host``. An IP address (``127.0.0.1``, ``::1``, ``[::1]``) asks no
resolver: it is read in the caller's thread (``AI_NUMERICHOST``), with no thread started and
whatever lookups of names are waiting.
"""

from __future__ import annotations

import io
import ipaddress
import select
import socket
import ssl
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = [
    "MAX_LOOKUPS",
    "Deadline",
    "DeadlineSocket",
    "bounded",
    "connect",
    "ip_literal",
    "overdue",
    "start_tls",
]

T = TypeVar("T")
AddressInfo = tuple[Any, ...]  # one getaddrinfo entry: family, type, proto, canonname, sockaddr
Resolver = Callable[..., list[AddressInfo]]

# Blocking calls given up on (a resolver that hangs) still running in their threads: at most.
MAX_LOOKUPS = 16
_given_up = 0
_given_up_lock = threading.Lock()


class Deadline:
    """A point in time (monotonic) that every operation of one conversation must finish by."""

    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        """The seconds left; TimeoutError once there are none."""
        left = self.end - time.monotonic()
        if left <= 0:
            raise TimeoutError("the deadline passed")
        return left

    def passed(self) -> bool:
        return time.monotonic() >= self.end


def overdue(timeout_s: float) -> TimeoutError:
    """What a request past its deadline raises, said alike by every client bounded here."""
    return TimeoutError(f"no whole answer within {timeout_s:g} s")


def bounded(call: Callable[[], T], deadline: Deadline, what: str) -> T:
    """``call()``, a blocking call that cannot be interrupted (a host name's lookup), run in a
    thread of its own and waited on until the deadline; TimeoutError naming ``what`` then."""
    global _given_up
    left = deadline.left()
    with _given_up_lock:
        if _given_up >= MAX_LOOKUPS:
            raise OSError(f"{what}: {_given_up} lookups given up on are still waiting on the resolver")
    done = threading.Event()
    outcome: list[Any] = []
    given_up = [False]

    def run() -> None:
        global _given_up
        try:
            outcome.append(call())
        except BaseException as exc:  # handed to the caller's thread
            outcome.append(exc)
        finally:
            with _given_up_lock:
                done.set()
                if given_up[0]:
                    _given_up -= 1

    threading.Thread(target=run, name="minewatch-lookup", daemon=True).start()
    if not done.wait(left):
        with _given_up_lock:
            if not done.is_set():
                given_up[0] = True
                _given_up += 1
                raise TimeoutError(f"{what} did not finish within the deadline")
    result = outcome[0]
    if isinstance(result, BaseException):
        raise result
    return result  # type: ignore[no-any-return]


def connect(host: str, port: int, deadline: Deadline, *, resolver: Resolver | None = None) -> socket.socket:
    """A TCP connection to ``host`` (looked up within the deadline, each address tried in turn as
    ``socket.create_connection`` tries them), blocking with what is left of the deadline.

    ``resolver`` stands in for ``socket.getaddrinfo`` (looked up when called)."""
    resolve = resolver or socket.getaddrinfo
    literal = ip_literal(host)
    if literal is not None:  # nothing to look up: read at once, no thread
        addresses = resolve(literal, port, 0, socket.SOCK_STREAM, 0, socket.AI_NUMERICHOST)
    else:
        addresses = bounded(
            lambda: resolve(host, port, 0, socket.SOCK_STREAM), deadline, f"the lookup of {host!r}"
        )
    errors: list[OSError] = []
    for family, kind, proto, _, address in addresses:
        sock = socket.socket(family, kind, proto)
        try:
            sock.settimeout(deadline.left())
            sock.connect(address)
            return sock
        except TimeoutError:
            sock.close()
            raise
        except OSError as exc:  # refused on this address (::1 with a server on 127.0.0.1): the next
            sock.close()
            errors.append(exc)
        except BaseException:
            sock.close()
            raise
    if errors:
        raise errors[0]
    raise OSError(f"the lookup of {host!r} gave no address")


def ip_literal(host: str) -> str | None:
    """``host`` as an IP address (v4, or v6 with or without its URL's brackets), or None for a name."""
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        ipaddress.ip_address(bare)
    except ValueError:
        return None
    return bare


def start_tls(
    sock: socket.socket, tls: ssl.SSLContext, server_hostname: str, deadline: Deadline
) -> ssl.SSLSocket:
    """``sock`` in TLS for ``server_hostname``, the handshake a record at a time without blocking
    past the deadline. ``sock`` is the TLS socket's from then on: closed with it if this raises."""
    # An IPv6 address as URLs write it ("[::1]") is checked against the certificate's address.
    name = ip_literal(server_hostname) or server_hostname
    wrapped = tls.wrap_socket(sock, server_hostname=name, do_handshake_on_connect=False)
    try:
        wrapped.setblocking(False)
        while True:
            try:
                wrapped.do_handshake()
                return wrapped
            except ssl.SSLWantReadError:
                select.select([wrapped], [], [], deadline.left())
            except ssl.SSLWantWriteError:
                select.select([], [wrapped], [], deadline.left())
    except BaseException:
        wrapped.close()
        raise


class DeadlineSocket:
    """What http.client and smtplib use of a socket (``sendall``, ``makefile``, ``close``), each
    call given what is left of the deadline."""

    def __init__(self, sock: socket.socket, deadline: Deadline) -> None:
        self.sock = sock
        self.deadline = deadline

    def sendall(self, data: Any) -> None:
        view = memoryview(data).cast("B")
        while view:
            self.sock.settimeout(self.deadline.left())
            view = view[self.sock.send(view) :]

    def makefile(self, mode: str = "rb", *args: Any, **kwargs: Any) -> io.BufferedReader:
        return io.BufferedReader(_DeadlineReader(self.sock, self.deadline))

    def close(self) -> None:
        self.sock.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sock, name)


class _DeadlineReader(io.RawIOBase):
    def __init__(self, sock: socket.socket, deadline: Deadline) -> None:
        self.sock = sock
        self.deadline = deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        self.sock.settimeout(self.deadline.left())
        return self.sock.recv_into(buffer)
