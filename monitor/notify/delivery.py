"""Alert delivery to people: e-mail, webhooks and extra MQTT topics, durable in the store.

    AlertBook.raise_ ─► listener ─► Deliveries.enqueue ─► table ``deliveries``   (the alert's own
                                    one row per (recipient, channel)              transaction)
    DeliveryWorker ─► a lane per (recipient, channel), a thread and a connection each:
                      deliver_due ─► send ─► COMMIT delivered
                                     │ failure ─► attempts+1, next try after
                                     │            retry_base_s·2^(n-1) ≤ retry_max_s
                                     └ max_attempts or a permanent error ─► undeliverable
    Pipeline.tick ─► Deliveries.claim_undeliverable ─► AlertBook.raise_ ("undeliverable", operator)

Routing: a recipient gets an alert when its role is among the alert's audiences (an
inspector gets what the town gets) and its ``sites`` is empty or names the alert's site.
An mqtt channel without a ``topic`` is the default ``{prefix}/{site}/alerts`` topic, which
the pipeline publishes every alert on already: it makes no delivery row.

Delivery is at least once, and never twice at the same time. A sender (the daemon's lane,
`minewatch report --send`) claims a row in one UPDATE before sending it: its owner and until
when (``claim_s``, by the wall clock, whatever clock the daemon judges by). Another sender
leaves a claimed row alone; the claim ends with the outcome's commit. A sender that dies
mid-send leaves its claim, which lapses: the row is sent again after ``claim_s``. A delivery
is marked delivered in its own transaction after the send succeeded; a crash between the
two sends it once more, when the claim lapses. Receivers can tell: a webhook
carries the delivery id as ``Idempotency-Key`` (and in the body), an e-mail as its
``Message-ID`` (``_sent_key``: a copy rewritten since it was queued goes under a key of its
own). Pending rows survive a restart because they are rows.

Secrets never enter the table: a row names its recipient and channel, and the channel is
looked up in the configuration in force when it is sent. The undeliverable alert is raised
by the pipeline (``claim_undeliverable``) rather than here, so the hash chain keeps one
writer; it is routed to the operator's other channels, never the one that failed.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import html
import json
import logging
import os
import socket
import sqlite3
import ssl
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.message import EmailMessage
from email.utils import format_datetime
from typing import Any
from zoneinfo import ZoneInfo

from monitor.config import ChannelConfig, Config, RecipientConfig
from monitor.errors import OutputError
from monitor.failing_rounds import FailingRounds
from monitor.journal import migrations, queries
from monitor.journal.report_files import ReportFile, report_files
from monitor.notify import smtp, webhook
from monitor.notify.alerts import Alert
from monitor.shown_url import shown_url
from monitor.wire.canonical import canonical_json, canonical_text, from_us, to_us
from rules.times import stored_time

__all__ = [
    "DELIVERED",
    "PENDING",
    "UNDELIVERABLE",
    "Deliveries",
    "DeliveryWorker",
    "PublishMqtt",
    "Route",
    "UndeliverableAlert",
    "routes_for",
    "shown_target",
    "signature",
]

log = logging.getLogger("minewatch.delivery")

PublishMqtt = Callable[[str, bytes, bool], None]  # topic, payload, retain (the pipeline's Publish)

PENDING, DELIVERED, UNDELIVERABLE = "pending", "delivered", "undeliverable"
USER_AGENT = "minewatch/0.1"
SIGNATURE_HEADER = "X-Minewatch-Signature"
IDEMPOTENCY_HEADER = "Idempotency-Key"
_BATCH = 100
# How long a claim holds a row being sent: past one attempt (a webhook's is bounded by timeout_s,
# an e-mail's by the server's answers, a notice's PDF rendered first), short enough that a
# sender that died mid-send delays its rows by minutes, not until a restart.
CLAIM_S = 300.0
# An attempt's timeout_s bounds the whole request, so a large one (a report's PDF, 8 MiB of
# attachments) gets more time: as long as it takes at 256 kbit/s, a slow site uplink. 8 MiB
# then takes 256 s more, still within a claim.
SLOWEST_UPLINK_BYTES_S = 32 * 1024


@dataclass(frozen=True, slots=True)
class Route:
    recipient: RecipientConfig
    index: int  # position of the channel in the recipient's configuration
    channel: ChannelConfig

    @property
    def target(self) -> str:
        """Where it goes, for people and for matching the channel after a config change (no secrets:
        a webhook's URL as ``shown_url`` shows it; the request alone uses the real one)."""
        c = self.channel
        if c.type == "webhook":
            return shown_url(c.url)
        if c.type == "email":
            return ",".join(c.to)
        return c.topic


@dataclass(frozen=True, slots=True)
class UndeliverableAlert:
    """What the pipeline raises through AlertBook when a delivery gave up."""

    site: str
    message: str
    data: Mapping[str, Any]
    condition: str
    audiences: tuple[str, ...] = ("operator",)
    kind: str = "undeliverable"
    severity: str = "warning"

    @property
    def alert(self) -> Alert:
        return Alert(
            self.site, self.audiences, self.kind, self.severity, self.condition, self.message, self.data
        )


def _audience_matches(role: str, audiences: Sequence[str]) -> bool:
    return role in audiences or (role == "inspector" and "town" in audiences)


def routes_for(alert: Mapping[str, Any], recipients: Sequence[RecipientConfig]) -> list[Route]:
    """Every (recipient, channel) an alert goes to, less the default alerts topic and excluded channels."""
    audiences = list(alert.get("audiences", ()))
    site = str(alert.get("site", ""))
    data = alert.get("data")
    excluded = {tuple(x) for x in (data.get("exclude_channels", ()) if isinstance(data, Mapping) else ())}
    routes = []
    for recipient in recipients:
        if not _audience_matches(recipient.role, audiences):
            continue
        if recipient.sites and site not in recipient.sites:
            continue
        for index, channel in enumerate(recipient.channels):
            if channel.type == "mqtt" and not channel.topic:
                continue  # the pipeline publishes every alert on {prefix}/{site}/alerts already
            if (recipient.name, index) in excluded:
                continue
            routes.append(Route(recipient, index, channel))
    return routes


def signature(secret: str, body: bytes) -> str:
    """``sha256=<hex>``: HMAC-SHA256 of the exact request body with the channel's secret."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def _delivery_id(alert_id: str, recipient: str, index: int) -> str:
    return "dl-" + hashlib.sha256(f"{alert_id}|{recipient}|{index}".encode()).hexdigest()[:24]


@dataclass
class _SendContext:
    """Per deliver_due call: the MQTT publisher and rendered PDFs (one render per notice)."""

    publish_mqtt: PublishMqtt | None
    now: datetime
    pdfs: dict[str, bytes | None] = field(default_factory=dict)


class Deliveries:
    """The delivery queue over one SQLite connection.

    ``enqueue`` writes inside the caller's transaction (the store's connection). ``deliver_due``
    runs on a connection of its own (the worker's): it sends outside any transaction and
    commits each outcome by itself.
    """

    def __init__(
        self,
        conn: sqlite3.Connection,
        config: Config,
        *,
        ssl_context: ssl.SSLContext | None = None,
        timeout_s: float = 15.0,
        claim_s: float = CLAIM_S,
    ) -> None:
        self.conn = conn
        self.config = config
        self.ssl_context = ssl_context
        self.timeout_s = timeout_s
        self.claim_s = claim_s
        # Who claims rows: a person reading the table sees the host and process.
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        if conn.row_factory is not sqlite3.Row:
            conn.row_factory = sqlite3.Row
        migrations.apply(conn)  # outside a caller's transaction only

    # ------------------------------------------------------------------ queue

    def enqueue(self, alert: Mapping[str, Any], now: datetime) -> int:
        """One pending delivery per (recipient, channel); returns how many were added. No commit."""
        added = 0
        body = canonical_text(alert)
        for route in routes_for(alert, self.config.recipients):
            cur = self.conn.execute(
                "INSERT OR IGNORE INTO deliveries (id, alert_id, site, recipient, channel, channel_type,"
                " target, alert, status, attempts, next_us, created_us) VALUES (?,?,?,?,?,?,?,?,?,0,?,?)",
                (
                    _delivery_id(str(alert["id"]), route.recipient.name, route.index),
                    str(alert["id"]),
                    str(alert.get("site", "")),
                    route.recipient.name,
                    route.index,
                    route.channel.type,
                    route.target,
                    body,
                    PENDING,
                    to_us(now),
                    to_us(now),
                ),
            )
            added += cur.rowcount
        return added

    def pending(self) -> int:
        return int(
            self.conn.execute("SELECT COUNT(*) FROM deliveries WHERE status = ?", (PENDING,)).fetchone()[0]
        )

    def get(self, delivery_id: str) -> sqlite3.Row | None:
        row: sqlite3.Row | None = self.conn.execute(
            "SELECT * FROM deliveries WHERE id = ?", (delivery_id,)
        ).fetchone()
        return row

    def rows(self, status: str | None = None) -> list[sqlite3.Row]:
        if status is None:
            return list(self.conn.execute("SELECT * FROM deliveries ORDER BY created_us, id"))
        return list(
            self.conn.execute("SELECT * FROM deliveries WHERE status = ? ORDER BY created_us, id", (status,))
        )

    # ------------------------------------------------------------------ sending

    def due_targets(self, now: datetime) -> list[tuple[str, int]]:
        """The (recipient, channel) of every pending delivery whose time has come, not claimed."""
        rows = self.conn.execute(
            "SELECT DISTINCT recipient, channel FROM deliveries WHERE status = ? AND next_us <= ?"
            " AND claim_until_us <= ? ORDER BY recipient, channel",
            (PENDING, to_us(now), _wall_us()),
        )
        return [(str(r[0]), int(r[1])) for r in rows]

    def deliver_due(
        self,
        now: datetime,
        publish_mqtt: PublishMqtt | None = None,
        *,
        alert_id: str | None = None,
        target: tuple[str, int] | None = None,
        stop: threading.Event | None = None,
    ) -> int:
        """Send every pending delivery whose time has come, one after the other; returns how many
        were delivered. Only those of one alert, given ``alert_id`` (`minewatch report --send`
        delivers its own at once), or of one (recipient, channel), given ``target`` (the worker's
        lanes); none after ``stop`` is set."""
        where = "status = ? AND next_us <= ? AND claim_until_us <= ?"
        params: list[Any] = [PENDING, to_us(now), _wall_us()]
        if alert_id is not None:
            where, params = where + " AND alert_id = ?", [*params, alert_id]
        if target is not None:
            where, params = where + " AND recipient = ? AND channel = ?", [*params, *target]
        rows = self.conn.execute(
            f"SELECT * FROM deliveries WHERE {where} ORDER BY next_us, id LIMIT ?", (*params, _BATCH)
        ).fetchall()
        context = _SendContext(publish_mqtt, now)
        delivered = 0
        for row in rows:
            if stop is not None and stop.is_set():
                break
            claimed = self._claim(row["id"], now)
            if claimed is None:  # another sender has it, or has sent it since
                continue
            row = claimed
            route = self._route_of(row)
            try:
                if route is None:
                    raise OutputError(
                        f"recipient {row['recipient']!r} has no {row['channel_type']} channel to "
                        f"{shown_target(row)!r} in the configuration any more",
                        retryable=False,
                    )
                self._send(route, row, json.loads(row["alert"]), context)
            except OutputError as exc:
                self._failed(row, str(exc), exc.retryable, now)
                continue
            except Exception as exc:  # a bug in one channel must not stop the others
                log.exception("Delivery %s failed unexpectedly", row["id"])
                self._failed(row, f"internal error ({type(exc).__name__}: {exc})", True, now)
                continue
            with self._transaction():
                # Delivered is a fact, whoever holds the claim by now (one that lapsed mid-send).
                done = self.conn.execute(
                    "UPDATE deliveries SET status = ?, attempts = attempts + 1, done_us = ?, last_error = '',"
                    " claim_owner = '', claim_until_us = 0 WHERE id = ? AND status = ?",
                    (DELIVERED, to_us(now), row["id"], PENDING),
                ).rowcount
            delivered += done
        return delivered

    def _claim(self, delivery_id: str, now: datetime) -> sqlite3.Row | None:
        """Claim a due, pending row no one else holds, in one UPDATE (atomic: of two senders, one
        gets it); returns it as it is now, or None."""
        if self.conn.in_transaction:  # a caller's: the claim would not be seen until its commit
            raise RuntimeError("deliveries are sent outside a transaction")
        wall = _wall_us()
        claimed = self.conn.execute(
            "UPDATE deliveries SET claim_owner = ?, claim_until_us = ?"
            " WHERE id = ? AND status = ? AND next_us <= ? AND claim_until_us <= ?",
            (self.owner, wall + int(self.claim_s * 1_000_000), delivery_id, PENDING, to_us(now), wall),
        ).rowcount
        if self.conn.in_transaction:  # a connection in sqlite3's implicit-transaction mode began one
            self.conn.commit()
        return self.get(delivery_id) if claimed == 1 else None

    def _route_of(self, row: sqlite3.Row) -> Route | None:
        recipient = next((r for r in self.config.recipients if r.name == row["recipient"]), None)
        if recipient is None:
            return None
        candidates = [Route(recipient, i, c) for i, c in enumerate(recipient.channels)]
        # The same channel, even if channels were reordered in the configuration. A webhook's is
        # matched by its shown URL, the same for a row stored with the real URL or an earlier
        # shown form; a ?token= changed in the configuration still names the same channel (a
        # token in the path does not: the fingerprint is of the path).
        target = shown_target(row)
        for route in [*candidates[row["channel"] : row["channel"] + 1], *candidates]:
            if route.channel.type == row["channel_type"] and route.target == target:
                return route
        return None

    def _failed(self, row: sqlite3.Row, error: str, retryable: bool, now: datetime) -> None:
        attempts = int(row["attempts"]) + 1
        alerts = self.config.alerts
        give_up = not retryable or attempts >= alerts.max_attempts
        if give_up:
            log.error(
                "Delivery %s to %r by %s gave up after %d attempt(s): %s",
                row["id"],
                row["recipient"],
                row["channel_type"],
                attempts,
                error,
            )
            status, next_us, done_us = UNDELIVERABLE, row["next_us"], to_us(now)
        else:
            delay = min(alerts.retry_max_s, alerts.retry_base_s * 2 ** (attempts - 1))
            log.warning(
                "Delivery %s to %r by %s failed (attempt %d of %d), retrying in %.0f s: %s",
                row["id"],
                row["recipient"],
                row["channel_type"],
                attempts,
                alerts.max_attempts,
                delay,
                error,
            )
            status, next_us, done_us = PENDING, to_us(now + timedelta(seconds=delay)), None
        with self._transaction():
            self.conn.execute(
                "UPDATE deliveries SET status = ?, attempts = ?, next_us = ?, last_error = ?, done_us = ?,"
                " claim_owner = '', claim_until_us = 0 WHERE id = ? AND status = ? AND claim_owner = ?",
                (status, attempts, next_us, error[:1000], done_us, row["id"], PENDING, self.owner),
            )

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        if self.conn.in_transaction:  # a caller's transaction: it commits
            yield
            return
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield
            self.conn.execute("COMMIT")
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise

    def _send(self, route: Route, row: sqlite3.Row, alert: Mapping[str, Any], context: _SendContext) -> None:
        kind = route.channel.type
        if kind == "webhook":
            self._send_webhook(route, self._sent_key(row, alert), alert)
        elif kind == "email":
            self._send_email(route, self._sent_key(row, alert), alert, context)
        elif kind == "mqtt":
            if context.publish_mqtt is None:
                raise OutputError("no MQTT connection to publish on", retryable=True)
            topic = route.channel.topic.replace("{site}", str(alert.get("site", "")))
            try:
                context.publish_mqtt(topic, canonical_json(alert), False)
            except OutputError:
                raise
            except Exception as exc:
                raise OutputError(f"publish to {topic!r} failed: {exc}", retryable=True) from exc
        else:
            raise OutputError(f"unknown channel type {kind!r}", retryable=False)

    def _sent_key(self, row: sqlite3.Row, alert: Mapping[str, Any]) -> str:
        """What a delivery is sent as (a webhook's Idempotency-Key and ``delivery_id``, an
        e-mail's Message-ID): its id while its copy of the alert says what the chained alert
        says. A copy rewritten since it was queued (an upgrade showing the URLs of an
        "undeliverable" alert anew, monitor/journal/migrations.py) goes as ``<id>-<the first 8
        hex digits of the copy's SHA-256>``: a receiver that took a try of the copy as it was
        gets no other body under that key, and every try of the rewritten copy has one key."""
        chained = queries.alert_words(self.conn, row["alert_id"])
        if chained is None:  # not raised through AlertBook: no copy of it is ever rewritten
            return str(row["id"])
        message, data = chained
        said = (message, canonical_text(json.loads(data)))
        if said == (alert.get("message"), canonical_text(alert.get("data"))):
            return str(row["id"])
        return f"{row['id']}-{hashlib.sha256(row['alert'].encode()).hexdigest()[:8]}"

    # ------------------------------------------------------------------ webhook

    def _send_webhook(self, route: Route, key: str, alert: Mapping[str, Any]) -> None:
        url = route.channel.url
        # The same bytes on every attempt: the signature and the idempotency key stay valid.
        document: dict[str, Any] = {
            "delivery_id": key,
            "recipient": route.recipient.name,
            "alert": alert,
        }
        if alert.get("kind") == "report":
            files = _report_files(self.conn, alert.get("data") or {})
            document["attachments"] = report_attachments(files, route.channel.attach_max_bytes)
        body = canonical_json(document)
        headers = {
            "Content-Type": "application/json",
            "User-Agent": USER_AGENT,
            IDEMPOTENCY_HEADER: key,
        }
        if route.channel.secret:
            headers[SIGNATURE_HEADER] = signature(route.channel.secret.value, body)
        webhook.post(url, body, headers, timeout_s=self._attempt_s(len(body)), ssl_context=self.ssl_context)

    # ------------------------------------------------------------------ e-mail

    def _notice_pdf(self, notice_id: str, context: _SendContext) -> bytes | None:
        if notice_id not in context.pdfs:
            from monitor.notify.formats import render_notice

            try:
                context.pdfs[notice_id] = render_notice(self.conn, notice_id, "pdf", config=self.config)
            except Exception:  # the alert still goes out, without the attachment
                log.exception("Could not render the PDF of notice %r for an e-mail", notice_id)
                context.pdfs[notice_id] = None
        return context.pdfs[notice_id]

    def _email_message(
        self, route: Route, delivery_id: str, alert: Mapping[str, Any], context: _SendContext
    ) -> EmailMessage:
        channel = route.channel
        site_id = str(alert.get("site", ""))
        site = self.config.site(site_id)
        ts = _parse_ts(str(alert.get("ts", ""))) or context.now
        when = (
            ts.astimezone(ZoneInfo(site.timezone)).strftime("%Y-%m-%d %H:%M %Z") if site else ts.isoformat()
        )
        data = alert.get("data") if isinstance(alert.get("data"), Mapping) else {}
        assert isinstance(data, Mapping)
        notice_id = str(data.get("notice_id", "")) or None
        kind = str(alert.get("kind", "alert")).replace("_", " ")
        message = str(alert.get("message", ""))
        lines = [
            message,
            "",
            f"Site: {site.name if site else site_id} ({site_id})",
            f"Time: {when}",
            f"Kind: {kind} (severity {alert.get('severity', '')})",
        ]
        if notice_id:
            lines += [
                f"Notice: {notice_id}, status {data.get('status', '')}",
                f"Cure deadline: {data.get('deadline_local', data.get('deadline', ''))}",
                "The notice is attached as a PDF.",
            ]
        lines += [
            "",
            f"Alert {alert.get('id', '')}, delivery {delivery_id}, to {route.recipient.name}.",
            "Sent by minewatch, the mine's compliance monitor.",
        ]
        msg = EmailMessage()
        # One line: a message may quote the operator's text (a blast id), line breaks and all,
        # which a header may not hold (nor, pasted in, add a header of the operator's choosing).
        msg["Subject"] = f"[minewatch {site_id}] {kind}: {' '.join(message.split())[:100]}"
        msg["From"] = channel.sender
        msg["To"] = ", ".join(channel.to)
        msg["Date"] = format_datetime(context.now.astimezone(UTC))
        msg["Message-ID"] = f"<{delivery_id}@minewatch>"  # the same on a resend: mail clients fold duplicates
        msg.set_content("\n".join(lines))
        rows = "".join(f"<p>{html.escape(line)}</p>" if line else "" for line in lines[1:])
        msg.add_alternative(
            f'<!DOCTYPE html><html><body style="font-family: sans-serif"><h2>{html.escape(kind.capitalize())}'
            f"</h2><p><strong>{html.escape(message)}</strong></p>{rows}</body></html>",
            subtype="html",
        )
        if notice_id:
            pdf = self._notice_pdf(notice_id, context)
            if pdf:
                msg.add_attachment(pdf, maintype="application", subtype="pdf", filename=f"{notice_id}.pdf")
        if alert.get("kind") == "report":
            for file in _report_files(self.conn, data):
                body = _report_body(file) if file.media_type == "application/pdf" else None
                if body is not None:
                    name = os.path.basename(file.path)
                    msg.add_attachment(body, maintype="application", subtype="pdf", filename=name)
        return msg

    def _send_email(self, route: Route, key: str, alert: Mapping[str, Any], context: _SendContext) -> None:
        message = self._email_message(route, key, alert, context)
        size = len(message.as_bytes())
        smtp.send(message, route.channel, timeout_s=self._attempt_s(size), ssl_context=self.ssl_context)

    def _attempt_s(self, size: int) -> float:
        """How long one attempt to send ``size`` bytes may take in all (SLOWEST_UPLINK_BYTES_S)."""
        return self.timeout_s + size / SLOWEST_UPLINK_BYTES_S

    # ------------------------------------------------------------------ giving up

    def claim_undeliverable(self) -> list[UndeliverableAlert]:
        """Deliveries that gave up and were not reported yet; marks them reported (caller's transaction).

        An undeliverable "undeliverable" alert is only logged: no alert about an alert about an alert.
        """
        rows = self.conn.execute(
            "SELECT * FROM deliveries WHERE status = ? AND reported = 0 ORDER BY done_us, id",
            (UNDELIVERABLE,),
        ).fetchall()
        claimed = []
        with self._transaction():
            for row in rows:
                self.conn.execute("UPDATE deliveries SET reported = 1 WHERE id = ?", (row["id"],))
                alert = json.loads(row["alert"])
                if alert.get("kind") == "undeliverable":
                    continue
                target = shown_target(row)
                message = (
                    f"An alert could not be delivered to {row['recipient']} by {row['channel_type']} "
                    f"({target}) after {row['attempts']} attempt(s): {row['last_error']}. "
                    f"The alert was: {alert.get('message', '')}"
                )
                claimed.append(
                    UndeliverableAlert(
                        site=row["site"],
                        message=message,
                        condition=f"undeliverable:{row['id']}",
                        data={
                            "delivery_id": row["id"],
                            "alert_id": row["alert_id"],
                            "recipient": row["recipient"],
                            "channel_type": row["channel_type"],
                            "target": target,
                            "attempts": row["attempts"],
                            "error": row["last_error"],
                            "failed_at": from_us(row["done_us"] or row["next_us"]),
                            "exclude_channels": [[row["recipient"], row["channel"]]],
                        },
                    )
                )
        return claimed


def _wall_us() -> int:
    """Now by the wall clock, for claims: senders in other processes compare it."""
    return time.time_ns() // 1000


def shown_target(row: sqlite3.Row) -> str:
    """A delivery's target as people may see it (a webhook's URL by ``shown_url``, also of a row
    stored before URLs were shown)."""
    target = str(row["target"])
    return shown_url(target) if row["channel_type"] == "webhook" else target


def _report_files(conn: sqlite3.Connection, data: Mapping[str, Any]) -> list[ReportFile]:
    """A report alert's files (monitor/reports/sending.py), found through the report's row by the
    id the alert names, never by a path in the alert (one queued before the alert stopped naming
    them is sent the same way)."""
    rid = data.get("report_id")
    files = report_files(conn, rid) if isinstance(rid, str) else None
    if files is None:
        log.warning("The report %r is not recorded in the store; the delivery goes without its files", rid)
        return []
    return files


def _report_body(file: ReportFile) -> bytes | None:
    """The bytes of a report's file as written when it was made, if it is still there with the
    SHA-256 the chained report record holds."""
    try:
        with open(file.path, "rb") as opened:
            body = opened.read()
    except OSError:
        log.warning("The report file %r is gone; the delivery goes without it", file.path)
        return None
    if hashlib.sha256(body).hexdigest() != file.sha256:
        log.warning("The report file %r changed since it was made; the delivery goes without it", file.path)
        return None
    return body


def report_attachments(files: Sequence[ReportFile], max_bytes: int) -> list[dict[str, Any]]:
    """A report webhook's files (docs/PROTOCOL.md, "Webhooks"): each by name, media type, size
    and SHA-256 (the chained report record's), its bytes in base64 while the files so far fit
    in ``max_bytes`` (the channel's ``attach_max_bytes``); a file left out says why.

    Attached rather than linked: the Town's receiver needs no portal account or route to the
    portal, and the HMAC signature of the body covers the files too."""
    out: list[dict[str, Any]] = []
    used = 0
    for file in files:
        body = _report_body(file)
        if body is None:
            gone = "the file is gone or changed"
            out.append({"media_type": file.media_type, "sha256": file.sha256, "omitted": gone})
            continue
        entry: dict[str, Any] = {
            "filename": os.path.basename(file.path),
            "media_type": file.media_type,
            "bytes": len(body),
            "sha256": file.sha256,
        }
        if used + len(body) <= max_bytes:
            used += len(body)
            entry["content_base64"] = base64.b64encode(body).decode("ascii")
        else:
            entry["omitted"] = f"larger than the channel's attach_max_bytes ({max_bytes})"
        out.append(entry)
    return out


def _parse_ts(text: str) -> datetime | None:
    try:
        return stored_time(text)
    except ValueError:
        return None


class DeliveryWorker(threading.Thread):
    """Sends due deliveries on connections of its own, every ``interval_s`` or when woken.

    One lane per (recipient, channel): a thread of its own, with its own connection, sending that
    channel's due rows one after the other. A receiver that hangs holds its own lane, each attempt
    for at most ``timeout_s``, and every other channel's deliveries go out meanwhile (with one
    sender, a Town webhook that hung delayed the operator's alerts 15 s an attempt)."""

    def __init__(
        self,
        db_path: str,
        config: Config,
        publish_mqtt: PublishMqtt | None,
        clock: Callable[[], datetime] | None = None,
        *,
        interval_s: float = 1.0,
        ssl_context: ssl.SSLContext | None = None,
        timeout_s: float = 15.0,
        busy_timeout_s: float = 30.0,
    ) -> None:
        """``busy_timeout_s``: how long a statement waits for another connection's lock before the
        round fails (and is tried again the next)."""
        super().__init__(name="minewatch-deliveries", daemon=True)
        self.db_path = db_path
        self.config = config
        self.publish_mqtt = publish_mqtt
        self.clock = clock or (lambda: datetime.now(UTC))
        self.interval_s = interval_s
        self.ssl_context = ssl_context
        self.timeout_s = timeout_s
        self.busy_timeout_s = busy_timeout_s
        self._stopping = threading.Event()
        self._wakeup = threading.Event()
        self._lanes: dict[tuple[str, int], threading.Thread] = {}
        self._lock = threading.Lock()  # delivered, rounds
        self._rounds = FailingRounds(log, "Reading or updating the deliveries in the store")
        self.delivered = 0

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.db_path, isolation_level=None, timeout=self.busy_timeout_s)

    def run(self) -> None:
        conn: sqlite3.Connection | None = None
        deliveries: Deliveries | None = None
        try:
            while not self._stopping.is_set():
                try:
                    # Opened in the round, not before: a store locked or unreadable when the
                    # worker started ended its thread, and no delivery went out until a restart.
                    if deliveries is None:
                        conn = conn or self._connect()
                        conn.execute("PRAGMA journal_mode=WAL")
                        deliveries = Deliveries(
                            conn, self.config, ssl_context=self.ssl_context, timeout_s=self.timeout_s
                        )
                    due = deliveries.due_targets(self.clock())
                except sqlite3.Error as exc:  # a busy, full or broken store: try again on the next round
                    with self._lock:
                        self._rounds.failed(exc)
                    due = []
                for target in due:
                    lane = self._lanes.get(target)
                    if lane is None or not lane.is_alive():
                        lane = threading.Thread(
                            target=self._lane, args=(target,), name="minewatch-delivery-lane", daemon=True
                        )
                        self._lanes[target] = lane
                        lane.start()
                self._wakeup.wait(self.interval_s)
                self._wakeup.clear()
        finally:
            if conn is not None:
                conn.close()

    def _lane(self, target: tuple[str, int]) -> None:
        """One round of one channel's due deliveries, on a connection of its own."""
        try:
            conn = self._connect()
            try:
                deliveries = Deliveries(
                    conn, self.config, ssl_context=self.ssl_context, timeout_s=self.timeout_s
                )
                sent = deliveries.deliver_due(
                    self.clock(), self.publish_mqtt, target=target, stop=self._stopping
                )
            finally:
                conn.close()
        except sqlite3.Error as exc:
            with self._lock:
                self._rounds.failed(exc)
            return
        with self._lock:
            self.delivered += sent
            self._rounds.worked()

    def wake(self) -> None:
        """Deliver now (the pipeline calls this after a batch that enqueued deliveries committed)."""
        self._wakeup.set()

    def stop(self, timeout: float = 30.0) -> None:
        """Stop starting lanes and wait up to ``timeout`` for those sending to finish their attempt;
        a lane still waiting on a receiver then is left (its row stays pending: at least once)."""
        deadline = time.monotonic() + timeout
        self._stopping.set()
        self._wakeup.set()
        self.join(timeout)
        for lane in list(self._lanes.values()):
            lane.join(max(0.0, deadline - time.monotonic()))
