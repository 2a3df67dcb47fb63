"""An e-mail's SMTP conversation (monitor/notify/delivery.py sends through it), within one
deadline, its failures sorted here.

smtplib's ``timeout`` bounds each socket operation alone: a server that sent a byte of its
reply every few seconds held a delivery lane for ever. Here the whole conversation (the
server's name looked up, connecting, the greeting, EHLO, STARTTLS and its handshake, the
login, the message and the answers) is bounded by ``timeout_s``, through the sockets of
monitor/deadline_socket.py that HTTP uses too. The local host's name for EHLO (smtplib looks
it up, unbounded) is looked up under the same deadline.

Failures are sorted as the webhooks' are: 4xx answers, lost connections and the deadline are
worth retrying; 5xx, a refused login, an untrusted certificate and a missing extension not.
"""

from __future__ import annotations

import smtplib
import socket
import ssl
from email.message import EmailMessage
from typing import Any

from monitor.config import ChannelConfig
from monitor.deadline_socket import Deadline, DeadlineSocket, Resolver, bounded, start_tls
from monitor.deadline_socket import connect as deadline_connect
from monitor.errors import OutputError

__all__ = ["send"]


def send(
    message: EmailMessage,
    channel: ChannelConfig,
    *,
    timeout_s: float,
    ssl_context: ssl.SSLContext | None = None,
    resolver: Resolver | None = None,
) -> None:
    """Send ``message`` through the channel's SMTP server within ``timeout_s`` in all; returns
    once the server took it, raises OutputError otherwise (``retryable`` set as above).

    ``resolver`` stands in for ``socket.getaddrinfo``."""
    where = f"{channel.smtp_host}:{channel.smtp_port}"
    deadline = Deadline(timeout_s)
    smtp = _DeadlineSMTP(deadline, resolver)
    try:
        taken = False
        try:
            code, greeting = smtp.connect(channel.smtp_host, channel.smtp_port)
            if code != 220:
                raise smtplib.SMTPConnectError(code, greeting)
            smtp.local_hostname = _local_name(smtp, deadline)
            smtp.ehlo()
            if channel.smtp_starttls:
                smtp.starttls(context=ssl_context or ssl.create_default_context())
                smtp.ehlo()
            if channel.smtp_username:
                smtp.login(channel.smtp_username, channel.smtp_password.value)
            smtp.send_message(message)
            taken = True
        finally:
            if taken:
                _quit(smtp)
            else:
                smtp.close()
    except smtplib.SMTPAuthenticationError as exc:
        raise OutputError(f"SMTP {where} refused the login: {exc.smtp_code}", retryable=False) from None
    except smtplib.SMTPRecipientsRefused as exc:
        codes = [code for code, _ in exc.recipients.values()]
        raise OutputError(
            f"SMTP {where} refused the recipients: {exc.recipients}",
            retryable=all(400 <= c < 500 for c in codes),
        ) from None
    except smtplib.SMTPResponseException as exc:
        raise OutputError(
            f"SMTP {where} answered {exc.smtp_code} {exc.smtp_error!r}",
            retryable=400 <= exc.smtp_code < 500,
        ) from None
    except ssl.SSLCertVerificationError as exc:
        raise OutputError(
            f"SMTP {where}: certificate not trusted ({exc.verify_message})", retryable=False
        ) from None
    except smtplib.SMTPNotSupportedError as exc:
        raise OutputError(f"SMTP {where}: {exc}", retryable=False) from None
    except (smtplib.SMTPException, OSError) as exc:
        # smtplib turns a timeout into "Connection unexpectedly closed" or "Server not connected".
        if isinstance(exc, TimeoutError) or deadline.passed():
            raise OutputError(
                f"SMTP {where} did not finish within {timeout_s:.3g} s (the whole conversation)",
                retryable=True,
            ) from None
        raise OutputError(f"SMTP {where} failed: {exc}", retryable=True) from None


def _quit(smtp: smtplib.SMTP) -> None:
    """QUIT, the message already taken: a server that does not answer it (or the deadline
    passing) is no failure of the delivery, which would be sent again."""
    try:
        smtp.quit()
    except (smtplib.SMTPException, OSError):
        pass
    finally:
        smtp.close()


def _local_name(smtp: smtplib.SMTP, deadline: Deadline) -> str:
    """The name EHLO gives (RFC 5321 4.1.4: the host's FQDN, or else an address literal), looked
    up under the deadline; the literal is the connection's own address (smtplib looked it up)."""
    fqdn = bounded(socket.getfqdn, deadline, "the lookup of this host's name")
    if "." in fqdn:
        return fqdn
    address = str(smtp.sock.getsockname()[0]) if smtp.sock else "127.0.0.1"
    return f"[IPv6:{address}]" if ":" in address else f"[{address}]"


class _DeadlineSMTP(smtplib.SMTP):
    """smtplib's client over a DeadlineSocket: every read and write, the lookup, the connection
    and the STARTTLS handshake given what is left of ``deadline``."""

    def __init__(self, deadline: Deadline, resolver: Resolver | None) -> None:
        self.deadline = deadline
        self.resolver = resolver
        # A local_hostname given: smtplib's own would be looked up here, with no bound.
        super().__init__(local_hostname="localhost")

    def connect(
        self, host: str = "localhost", port: int = 0, source_address: Any = None
    ) -> tuple[int, bytes]:
        self._host = host  # STARTTLS's server name (smtplib sets it only when its constructor connects)
        return super().connect(host, port, source_address)

    def _get_socket(self, host: str, port: int, timeout: float | None) -> Any:
        return DeadlineSocket(
            deadline_connect(host, port, self.deadline, resolver=self.resolver), self.deadline
        )

    def starttls(self, *args: Any, context: ssl.SSLContext | None = None, **kwargs: Any) -> tuple[int, bytes]:
        tls = context or ssl.create_default_context()
        # smtplib uses only the context's wrap_socket: a stand-in whose handshake keeps the deadline.
        reply: tuple[int, bytes] = super().starttls(context=_DeadlineTLS(tls, self.deadline))  # type: ignore[call-overload]
        return reply


class _DeadlineTLS:
    """What smtplib's ``starttls`` uses of an SSLContext: ``wrap_socket``, the handshake under
    the deadline, the result a DeadlineSocket again."""

    def __init__(self, tls: ssl.SSLContext, deadline: Deadline) -> None:
        self.tls = tls
        self.deadline = deadline

    def wrap_socket(self, sock: DeadlineSocket, server_hostname: str) -> DeadlineSocket:
        return DeadlineSocket(start_tls(sock.sock, self.tls, server_hostname, self.deadline), self.deadline)
