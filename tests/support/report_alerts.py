"""A report's town alert as minewatch wrote it before the alert stopped naming where the
report's files lie (report_pdf, report_csv): what an older store holds, chained and queued."""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any

from monitor.journal import queries
from monitor.journal.store import Store
from monitor.reports.sending import chain_report_alert, record_report
from monitor.wire.protocol import format_ts
from tests.support.notices import SITE


def report_alert_as_before(
    store: Store,
    start: datetime,
    end: datetime,
    now: datetime,
    pdf: bytes,
    csv: bytes,
    pdf_path: str,
    recipients: list[str],
    label: str = "2026-06-15",
) -> dict[str, Any]:
    """Record a report of [start, end) made at ``now`` and chain its town alert with the files'
    paths in its data, as send_report did then (inside the caller's batch); returns the alert
    as it was queued for delivery."""
    head = queries.chain_head(store.conn, SITE)
    rid = record_report(store, SITE, start, end, now, head, pdf, csv, pdf_path, recipients)
    data = {
        "report_id": rid,
        "period": label,
        "from": format_ts(start),
        "to": format_ts(end),
        "chain_seq": head[0],
        "chain_head": head[1],
        "report_pdf": pdf_path,
        "report_csv": pdf_path.removesuffix(".pdf") + ".csv",
        "report_pdf_sha256": hashlib.sha256(pdf).hexdigest(),
        "report_csv_sha256": hashlib.sha256(csv).hexdigest(),
    }
    message = f"Compliance report for Quarry ({format_ts(start)} to {format_ts(end)})"
    return chain_report_alert(store, rid, SITE, now, message, data)
