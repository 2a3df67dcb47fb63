"""A report made or sent: a chained ``report`` record (``record_report``, the one place that
writes it), and for one sent a town alert carrying it through delivery.

Every report made is recorded (``record_made``: ``minewatch report`` without ``--send``, the
portal's report jobs), so ``minewatch verify --config F report.pdf|csv`` knows its files;
``send_report`` writes, in one store transaction: the ``reports`` row and its chain entry (the
period, the chain head the figures were computed from, the SHA-256 of the PDF and the CSV, the
recipients), the alert (kind ``report``, audience town; chained like every alert) and one
delivery per (recipient, channel) by the existing routing (monitor/notify/delivery.py): e-mail
with the PDF attached, webhooks with the report's facts, PDF and CSV. Then it delivers those rows at once;
what fails stays queued, and the daemon's delivery worker retries it as it retries any alert.

The alert names the report by its id and its files by their SHA-256, never by where they lie:
a path on the operator's disk is nobody else's (the Town's webhook, an inspector's bundle).
The delivery finds the files through the report's row (monitor/journal/report_files.py).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from monitor.config import Config
from monitor.journal.store import Store
from monitor.reports.content import Report
from monitor.wire.canonical import canonical_text, to_us
from monitor.wire.protocol import format_ts
from rules.times import local_moment

KIND = "report"


def report_id(site: str, start: datetime, end: datetime, made: datetime, nth: int = 1) -> str:
    """The id of the ``nth`` report of the site's period made at that microsecond. The first's
    key has no count, as every id before the count was added (stored ids read the same)."""
    key = f"{site}|{to_us(start)}|{to_us(end)}|{to_us(made)}" + (f"|{nth}" if nth > 1 else "")
    return "rp-" + hashlib.sha256(key.encode()).hexdigest()[:20]


def _unused_report_id(store: Store, site: str, start: datetime, end: datetime, made: datetime) -> str:
    """``report_id`` of the first count not yet in the reports table, read inside the caller's
    batch (its write lock): two reports of one period made at one microsecond (two portal jobs, a
    frozen clock) had one id, and the second failed on it (UNIQUE)."""
    nth = 1
    while True:
        rid = report_id(site, start, end, made, nth)
        if store.conn.execute("SELECT 1 FROM reports WHERE id = ?", (rid,)).fetchone() is None:
            return rid
        nth += 1


def chain_report_alert(
    store: Store, rid: str, site: str, now: datetime, message: str, data: dict[str, Any]
) -> dict[str, Any]:
    """Chain a report's alert to the Town (inside the caller's batch); returns it as it is queued
    for delivery."""
    store.append_alert(rid, site, "town", KIND, "info", f"report:{rid}", message, data, now)
    return {
        "id": rid,
        "site": site,
        "ts": format_ts(now),
        "audiences": ["town"],
        "kind": KIND,
        "severity": "info",
        "condition": f"report:{rid}",
        "message": message,
        "data": data,
    }


def record_report(
    store: Store,
    site: str,
    start: datetime,
    end: datetime,
    now: datetime,
    head: tuple[int, str],
    pdf: bytes,
    csv: bytes,
    pdf_path: str,
    recipients: Sequence[str],
) -> str:
    """The ``reports`` row and its chain entry (inside the caller's batch); returns its id."""
    row = {
        "id": _unused_report_id(store, site, start, end, now),
        "site": site,
        "period_start_us": to_us(start),
        "period_end_us": to_us(end),
        "made_us": to_us(now),
        "chain_seq": head[0],
        "chain_head": head[1],
        "pdf_sha256": hashlib.sha256(pdf).hexdigest(),
        "csv_sha256": hashlib.sha256(csv).hexdigest(),
        "pdf_path": pdf_path,
        "recipients": canonical_text(sorted(recipients)),
    }
    store.conn.execute(
        f"INSERT INTO reports ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})", list(row.values())
    )
    store.chain_row(site, "report", row, now)
    return str(row["id"])


def _record(
    store: Store,
    report: Report,
    pdf: bytes,
    csv: bytes,
    pdf_path: str,
    now: datetime,
    recipients: Sequence[str],
) -> str:
    """``record_report`` of a made ``report``: its site, period and the chain head it was made from."""
    period = report.period
    head = (report.chain_seq, report.chain_head)
    return record_report(
        store, report.site.id, period.start, period.end, now, head, pdf, csv, pdf_path, recipients
    )


def record_made(store: Store, report: Report, pdf: bytes, csv: bytes, pdf_path: str, now: datetime) -> str:
    """Record a report made and not sent (no recipients) in its own transaction; returns its id."""
    with store.batch():
        return _record(store, report, pdf, csv, pdf_path, now, ())


def town_recipients(config: Config, site_id: str) -> list[str]:
    """The recipients a report of the site is delivered to: the Town's, with a channel that
    carries it (e-mail, webhook, an MQTT topic of their own; the daemon's …/alerts is not one:
    `minewatch report --send` does not publish there)."""
    from monitor.notify.delivery import routes_for

    probe = {"site": site_id, "audiences": ["town"], "data": {}}
    return sorted({r.recipient.name for r in routes_for(probe, config.recipients)})


def send_report(
    config: Config, store: Store, report: Report, pdf: bytes, csv: bytes, pdf_path: str, now: datetime
) -> dict[str, Any]:
    """Record the report as sent, raise its town alert, queue and deliver it; returns a summary.

    The CSV is the file beside the PDF of the same name (journal.report_files.csv_beside): e-mail attaches the
    PDF, a webhook both (monitor/notify/delivery.py, ``report_attachments``), each found through
    the report's row."""
    from monitor.notify.delivery import Deliveries

    site = report.site
    period = report.period
    message = (
        f"Compliance report for {site.name}, {period.label} ({period.first_day} to {period.last_day}):"
        f" {len(report.episodes)} violation episode(s), {len(report.blasts)} blast(s),"
        f" {len(report.notices)} notice(s), {len(report.complaints)} complaint(s)"
    )
    recipients = town_recipients(config, site.id)
    deliveries = Deliveries(store.conn, config)
    with store.batch():
        rid = _record(store, report, pdf, csv, pdf_path, now, recipients)
        data = {
            "report_id": rid,
            "period": period.label,
            "from": format_ts(period.start),
            "to": format_ts(period.end),
            "chain_seq": report.chain_seq,
            "chain_head": report.chain_head,
            "report_pdf_sha256": hashlib.sha256(pdf).hexdigest(),
            "report_csv_sha256": hashlib.sha256(csv).hexdigest(),
            "made_local": local_moment(now, site.timezone),
        }
        alert = chain_report_alert(store, rid, site.id, now, message, data)
        queued = deliveries.enqueue(alert, now)
    delivered = deliveries.deliver_due(now, alert_id=rid)
    return {"id": rid, "recipients": recipients, "queued": queued, "delivered": delivered}
