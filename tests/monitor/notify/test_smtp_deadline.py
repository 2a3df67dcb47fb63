"""The whole SMTP conversation within one deadline (monitor/notify/smtp.py), against a real TCP
peer on a free port: an SMTP server that answers every command, each reply a byte at a time."""

from __future__ import annotations

import re
import socket
import sqlite3
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from monitor.notify.delivery import CLAIM_S, DELIVERED, PENDING, Deliveries
from tests.support.notices import make_config

T0 = datetime(2026, 6, 15, 16, 40, tzinfo=UTC)


class TricklingSMTP:
    """An SMTP server (greeting, EHLO, MAIL, RCPT, DATA, QUIT) that sends each reply one byte
    every ``gap_s``: every read of the client gets a byte well within a socket timeout."""

    def __init__(self, gap_s: float) -> None:
        self.gap_s = gap_s
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.stopping = threading.Event()
        self.messages = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self.stopping.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._converse, args=(conn,), daemon=True).start()

    def _trickle(self, conn: socket.socket, reply: bytes) -> None:
        for byte in reply:
            conn.sendall(bytes([byte]))
            if self.stopping.wait(self.gap_s):
                raise OSError("stopped")

    def _converse(self, conn: socket.socket) -> None:
        with conn, conn.makefile("rb") as lines:
            try:
                self._trickle(conn, b"220 trickle.example ESMTP\r\n")
                for line in lines:
                    verb = line[:4].upper()
                    if verb == b"EHLO":
                        self._trickle(conn, b"250-trickle.example\r\n250 8BITMIME\r\n")
                    elif verb == b"DATA":
                        self._trickle(conn, b"354 go on\r\n")
                        while next(lines) != b".\r\n":
                            pass
                        self.messages += 1
                        self._trickle(conn, b"250 taken\r\n")
                    elif verb == b"QUIT":
                        self._trickle(conn, b"221 bye\r\n")
                        return
                    else:
                        self._trickle(conn, b"250 ok\r\n")
            except (OSError, StopIteration):
                return

    def stop(self) -> None:
        self.stopping.set()
        self.listener.close()


def mail_config(port: int) -> str:
    return f"""
[[recipients]]
name = "Town clerk"
role = "town"
[[recipients.channels]]
type = "email"
to = ["clerk@dovre.example"]
smtp_host = "127.0.0.1"
smtp_port = {port}
smtp_starttls = false
sender = "minewatch@quarry.example"
"""


def alert() -> dict[str, object]:
    return {
        "id": "a1",
        "site": "quarry",
        "ts": "2026-06-15T16:40:00Z",
        "audiences": ["town"],
        "kind": "violation",
        "severity": "violation",
        "condition": "c-a1",
        "message": "Noise at meter n1 averaged 84.2 dB(A) over 11:30-11:31 local",
        "data": {},
    }


def send_once(db: Path, port: int, timeout_s: float) -> tuple[int, float, sqlite3.Row]:
    conn = sqlite3.connect(str(db), isolation_level=None, timeout=30)
    try:
        deliveries = Deliveries(conn, make_config(db, mail_config(port)), timeout_s=timeout_s)
        deliveries.enqueue(alert(), T0)
        started = time.monotonic()
        delivered = deliveries.deliver_due(T0)
        took = time.monotonic() - started
        [row] = deliveries.rows()
        return delivered, took, row
    finally:
        conn.close()


def test_an_smtp_server_trickling_its_replies_is_given_one_deadline_for_the_conversation(
    tmp_path: Path,
) -> None:
    """smtplib's timeout bounds each read: a server sending a byte every 0.05 s (about 7 s of
    replies in all) held the delivery the whole time with a 1 s timeout, and would hold it for
    ever sending slower still. ``timeout_s`` is the whole conversation's now; the row stays
    pending, to be tried again."""
    server = TricklingSMTP(gap_s=0.05)
    try:
        delivered, took, row = send_once(tmp_path / "store.db", server.port, timeout_s=1.0)
        assert delivered == 0 and took < 2.0
        assert (row["status"], row["attempts"]) == (PENDING, 1)
        # 1 s and the message's size at 256 kbit/s (a short alert: hundredths of a second).
        assert re.fullmatch(
            rf"SMTP 127\.0\.0\.1:{server.port} did not finish within 1\.\d+ s \(the whole conversation\)",
            row["last_error"],
        ), row["last_error"]
        assert server.messages == 0
    finally:
        server.stop()


def test_an_smtp_server_answering_within_the_deadline_takes_the_message(tmp_path: Path) -> None:
    """The same server, trickling faster than the deadline needs: the message is taken."""
    server = TricklingSMTP(gap_s=0.002)
    try:
        delivered, _, row = send_once(tmp_path / "store.db", server.port, timeout_s=10.0)
        assert (delivered, row["status"], server.messages) == (1, DELIVERED, 1)
    finally:
        server.stop()


def test_a_larger_delivery_is_given_the_time_its_size_takes_on_a_slow_uplink(tmp_path: Path) -> None:
    """The whole-request bound would cut off a month's report (a PDF of megabytes) on a site's
    slow uplink for ever: each attempt gets its size's time at 256 kbit/s beyond timeout_s."""
    conn = sqlite3.connect(str(tmp_path / "store.db"), isolation_level=None, timeout=30)
    try:
        deliveries = Deliveries(conn, make_config(tmp_path / "store.db", mail_config(25)), timeout_s=15.0)
        assert deliveries._attempt_s(0) == 15.0
        assert deliveries._attempt_s(1_000_000) == pytest.approx(15.0 + 1_000_000 / 32_768)
        assert deliveries._attempt_s(8 * 1024 * 1024) < CLAIM_S  # within one claim of the row
    finally:
        conn.close()
