"""Alerts: raised by the pipeline, deduplicated, journaled, then published.

Deduplication keeps people reading alerts: a *condition* (e.g. "noise violation
at meter n2") alerts once; while it keeps recurring it stays active and silent;
it clears when it has not recurred for ``min_gap_s`` (or explicitly, e.g. a
sensor back online), and only then can it alert again. Active conditions are kept
in the store, and only there: a restart does not re-alert them, and a batch rolled back
takes its conditions back with its alerts (a copy in memory would have kept them silent).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from monitor.config import AlertsConfig
from monitor.journal import migrations
from monitor.journal.store import Store
from monitor.wire.canonical import from_us, to_us
from monitor.wire.protocol import format_ts

PublishAlert = Callable[[str, dict[str, Any]], None]  # site, alert body
# Whom the daemon's early warnings (alerts of kind early_warning) are raised for: the operator's
# self-monitoring. No bundle shows them (a reader's Disclosure.audiences), and the Town's and its
# inspectors' portal views are made without them (the portal's Sight).
EARLY_WARNING_AUDIENCES: tuple[str, ...] = ("operator",)


@dataclass(frozen=True, slots=True)
class Alert:
    """What is to be said, to whom, about which condition (one value, like Home Assistant's
    mqtt ReceiveMessage): the book decides whether it is said now and when it was."""

    site: str
    audiences: tuple[str, ...]  # "town", "operator"
    kind: str  # e.g. "violation", "sensor_offline", "anchor"
    severity: str  # "violation" | "notice" | "warning" | "citation" | "info"
    condition: str  # deduplication key within the site
    message: str
    data: Mapping[str, Any] = field(default_factory=dict)


class AlertBook:
    def __init__(self, store: Store, config: AlertsConfig, publish: PublishAlert) -> None:
        self.store = store
        self.config = config
        self.publish = publish
        migrations.apply(store.conn)  # the store applied them when opened: a no-op then
        self.listeners: list[Callable[[dict[str, Any]], None]] = []

    def last_raised(self, site: str, condition: str) -> datetime | None:
        """When the condition last recurred, while it is active (None once cleared)."""
        row = self.store.conn.execute(
            "SELECT last_us FROM alert_conditions WHERE site = ? AND condition = ?", (site, condition)
        ).fetchone()
        return None if row is None else from_us(row[0])

    def _is_active(self, site: str, condition: str, now: datetime) -> bool:
        last = self.last_raised(site, condition)
        return last is not None and now - last < timedelta(seconds=self.config.min_gap_s)

    def raise_(self, alert: Alert, now: datetime, *, dedupe: bool = True) -> bool:
        """Raise an alert unless its condition is already active. Returns True if raised."""
        site, condition = alert.site, alert.condition
        suppressed = dedupe and self._is_active(site, condition, now)
        self.store.conn.execute(
            "INSERT INTO alert_conditions (site, condition, last_us) VALUES (?,?,?)"
            " ON CONFLICT(site, condition) DO UPDATE SET last_us = excluded.last_us",
            (site, condition, to_us(now)),
        )
        if suppressed:
            return False
        alert_id = hashlib.sha256(f"{site}|{condition}|{to_us(now)}".encode()).hexdigest()[:20]
        body = {
            "id": alert_id,
            "site": site,
            "ts": format_ts(now),
            "audiences": list(alert.audiences),
            "kind": alert.kind,
            "severity": alert.severity,
            "condition": condition,
            "message": alert.message,
            "data": dict(alert.data),
        }
        self.store.append_alert(
            alert_id,
            site,
            ",".join(alert.audiences),
            alert.kind,
            alert.severity,
            condition,
            alert.message,
            json.loads(json.dumps(alert.data, default=str)),
            now,
        )
        self.publish(site, body)
        for listener in self.listeners:
            listener(body)
        return True

    def clear(self, site: str, condition: str, message: str, now: datetime, audiences: Sequence[str]) -> None:
        """End a condition; with a message and audiences, say so (e.g. "sensor back online")."""
        gone = self.store.conn.execute(
            "DELETE FROM alert_conditions WHERE site = ? AND condition = ?", (site, condition)
        )
        if gone.rowcount == 0:
            return
        if message and audiences:
            cleared = Alert(
                site,
                tuple(audiences),
                "cleared",
                "info",
                f"cleared:{condition}:{to_us(now)}",
                message,
                {"condition": condition},
            )
            self.raise_(cleared, now, dedupe=False)
