"""Repeated complaints the record does not bear out point the Town at a monitor's placement
(monitor/complaints/placement.py over rules/complaints.py): through the portal's own submit,
the Town's signals (the operator sees none), one town alert an area and period, queued to the
Town's recipients and chained."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from monitor.journal.store import Store
from monitor.portal.data import ComplaintForm, Portal, Scope, User
from tests.support.notices import SITE, add_sample_sound, local, make_config

TOWN_RECIPIENT = """
[portal]
placement_complaints = 3
placement_days = 30

[[recipients]]
name = "Town clerk"
role = "town"
[[recipients.channels]]
type = "webhook"
url = "http://127.0.0.1:9/hook"
"""
ADDRESS = "N4410 County Rd K"


@pytest.fixture
def portal(tmp_path: Path) -> Iterator[tuple[Portal, list[datetime]]]:
    db = tmp_path / "store.db"
    config = make_config(db, TOWN_RECIPIENT)
    store = Store(db)
    day = local(2026, 11, 10, 9)
    add_sample_sound(store, day, day + timedelta(hours=1), (day, day))  # an hour of quiet at n1
    store.close()
    clock = [day + timedelta(days=1)]
    yield Portal(config, clock=lambda: clock[0]), clock


def submit(portal: Portal, when: datetime, address: str = ADDRESS, what: str = "noise") -> str:
    form = ComplaintForm(what, when, when, address, None, "a roar at night", {"email": "r@example.org"})
    return str(portal.submit_complaint(SITE, form)["id"])


def test_repeated_unborne_complaints_raise_one_town_alert_and_show_on_the_towns_page(
    portal: tuple[Portal, list[datetime]],
) -> None:
    web, clock = portal
    town = Scope(User("clerk", "town", ()), web.config)
    operator = Scope(User("acme", "operator", ()), web.config)
    quiet = local(2026, 11, 10, 9, 20)
    first = [submit(web, quiet), submit(web, local(2026, 11, 8, 2))]  # not corroborated; no monitor
    submit(web, quiet, address="Elsewhere Lane")
    assert web.placement_signals(town, SITE) == []
    verdicts = {c["id"]: c["verdict"] for c in web.complaints(town, SITE)}
    assert [verdicts[c] for c in first] == ["not_corroborated", "no_monitor"]

    clock[0] += timedelta(hours=1)
    third = submit(web, local(2026, 11, 10, 23), address=ADDRESS.upper())
    [signal] = web.placement_signals(town, SITE)
    assert {c["id"] for c in signal["complaints"]} == {*first, third}
    assert signal["text"].startswith(f"Placement signal: 3 complaints of noise at {ADDRESS} within 30 days")
    assert "consider the monitors' placement" in signal["text"]
    assert web.placement_signals(operator, SITE) == []  # the Town's: it lists complaints

    conn = web.store().conn
    alerts = conn.execute("SELECT * FROM alerts WHERE kind = 'placement'").fetchall()
    [alert] = alerts
    assert alert["audience"] == "town" and alert["message"] == signal["text"]
    assert {c["id"] for c in json.loads(alert["data"])["complaints"]} == {*first, third}
    assert "r@example.org" not in alert["message"] + alert["data"]
    [queued] = conn.execute("SELECT * FROM deliveries WHERE alert_id = ?", (alert["id"],)).fetchall()
    assert queued["recipient"] == "Town clerk" and queued["status"] == "pending"
    chained = conn.execute("SELECT COUNT(*) FROM chain WHERE kind = 'alert' AND key = ?", (alert["id"],))
    assert chained.fetchone()[0] == 1

    # A fourth is listed, but the Town is not alerted again within the period ...
    clock[0] += timedelta(days=2)
    fourth = submit(web, local(2026, 11, 12, 1))
    assert len(web.placement_signals(town, SITE)[0]["complaints"]) == 4
    assert conn.execute("SELECT COUNT(*) FROM alerts WHERE kind = 'placement'").fetchone()[0] == 1
    # ... and once the period is over and three more came, it is.
    clock[0] += timedelta(days=31)
    for days in (1, 2, 3):
        submit(web, clock[0] - timedelta(days=days))
    assert conn.execute("SELECT COUNT(*) FROM alerts WHERE kind = 'placement'").fetchone()[0] == 2
    assert fourth not in {c["id"] for c in web.placement_signals(town, SITE)[0]["complaints"]}
