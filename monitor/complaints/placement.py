"""Placement signals over the stored complaints (the decision: rules/complaints.py).

``site_signals`` reads a site's complaints of the last ``portal.placement_days`` and returns the
areas where ``portal.placement_complaints`` or more of them were "not corroborated" or "no
monitor covers it": the Town's complaints page shows them. ``raise_placement_alerts`` (inside the
caller's store batch, right after a complaint is stored) records one town alert an area and
period (kind ``placement``, chained like every alert) and queues its deliveries; the daemon's
delivery worker sends them as it sends any alert.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from monitor.complaints.book import Complaint, ComplaintBook
from monitor.config import Config, SiteConfig
from monitor.journal import queries
from monitor.journal.store import Store
from monitor.wire.canonical import from_us, to_us
from monitor.wire.protocol import format_ts
from rules.complaints import (
    PlacedComplaint,
    PlacementSignal,
    complaint_area,
    placement_alert_due,
    placement_signals,
)
from rules.times import local_moment, span_text

KIND = "placement"


def placed(complaint: Complaint, tz: str) -> PlacedComplaint:
    """A stored complaint as the placement decision reads it."""
    listed: list[tuple[str, str, float | None, str]] = []
    for m in complaint.correlation.get("monitors", ()):
        if isinstance(m, Mapping):
            distance = m.get("distance_m")
            listed.append(
                (
                    str(m.get("sensor", "")),
                    str(m.get("kind", "")),
                    None if distance is None else float(distance),
                    str(m.get("location") or ""),
                )
            )
    area, words = complaint_area(
        complaint.what,
        complaint.address,
        complaint.plan is not None or complaint.position is not None,
        listed,
    )
    when = (
        span_text(complaint.start, complaint.end, tz, with_date=True)
        if complaint.end > complaint.start
        else local_moment(complaint.start, tz)
    )
    verdict = str(complaint.correlation.get("verdict", ""))
    return PlacedComplaint(complaint.id, complaint.start, complaint.what, verdict, when, area, words)


def site_signals(
    book: ComplaintBook, site: SiteConfig, now: datetime, count: int, days: int
) -> list[PlacementSignal]:
    period = timedelta(days=days)
    found = book.find(site.id, now - period, now + timedelta(microseconds=1))
    return placement_signals([placed(c, site.timezone) for c in found], now, count, period)


def signal_json(signal: PlacementSignal) -> dict[str, Any]:
    return {
        "area": signal.area,
        "monitor_kind": signal.kind,
        "text": signal.text,
        "complaints": [
            {"id": c.id, "what": c.what, "when": c.when, "verdict": c.verdict} for c in signal.complaints
        ],
    }


def _last_alert(store: Store, site: str, condition: str) -> datetime | None:
    last = queries.last_alert_us(store.conn, site, KIND, condition)
    return None if last is None else from_us(last)


def raise_placement_alerts(
    config: Config, store: Store, site: SiteConfig, now: datetime, deliveries: Any = None
) -> list[str]:
    """Within the caller's batch: one town alert for each placement signal not alerted within the
    period; returns the alert ids. ``deliveries`` (a monitor.notify.delivery.Deliveries made
    before the batch) queues them to the Town's recipients; without it they are journaled only."""
    portal = config.portal
    period = timedelta(days=portal.placement_days)
    raised: list[str] = []
    signals: Sequence[PlacementSignal] = site_signals(
        ComplaintBook(store), site, now, portal.placement_complaints, portal.placement_days
    )
    for signal in signals:
        if not placement_alert_due(_last_alert(store, site.id, signal.condition), now, period):
            continue
        alert_id = (
            "pl-" + hashlib.sha256(f"{site.id}|{signal.condition}|{to_us(now)}".encode()).hexdigest()[:20]
        )
        data = signal_json(signal)
        store.append_alert(
            alert_id, site.id, "town", KIND, "notice", signal.condition, signal.text, data, now
        )
        if deliveries is not None:
            deliveries.enqueue(
                {
                    "id": alert_id,
                    "site": site.id,
                    "ts": format_ts(now),
                    "audiences": ["town"],
                    "kind": KIND,
                    "severity": "notice",
                    "condition": signal.condition,
                    "message": signal.text,
                    "data": data,
                },
                now,
            )
        raised.append(alert_id)
    return raised
