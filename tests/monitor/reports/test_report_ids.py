"""Report ids (monitor/reports/sending.py): one per report made, even of one period at one
microsecond, and the id of a report made alone as it always was. Real store, real portal."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from pathlib import Path

from monitor.journal.store import Store
from monitor.portal.data import Portal, Scope, User
from monitor.wire.canonical import to_us
from tests.support.notices import make_config

MADE = datetime(2026, 12, 10, tzinfo=UTC)


def test_two_reports_of_one_period_made_at_one_microsecond_get_ids_of_their_own(tmp_path: Path) -> None:
    """Two portal jobs of one month, the portal's clock frozen: the id hashed the site, the period
    and the microsecond it was made, so the second report's record failed on the reports table's
    UNIQUE id. The first keeps the id it always had (a stored report's id reads the same)."""
    config = make_config(tmp_path / "r.db")
    Store(config.storage.path).close()
    portal = Portal(config, clock=lambda: MADE)
    town = Scope(User("bob", "town", ()), config)
    made = [portal.make_report(town, "quarry", "2026-11", tmp_path / f"{n}.pdf") for n in (1, 2)]
    first, second = (m["report_id"] for m in made)
    assert first != second
    period = portal.report_period(town, "quarry", "2026-11")
    key = f"quarry|{to_us(period.start)}|{to_us(period.end)}|{to_us(MADE)}"
    assert first == "rp-" + hashlib.sha256(key.encode()).hexdigest()[:20]
    store = Store(config.storage.path)
    try:
        rows = store.conn.execute("SELECT id, pdf_path FROM reports ORDER BY rowid").fetchall()
        chained = store.conn.execute("SELECT key FROM chain WHERE kind = 'report' ORDER BY seq").fetchall()
    finally:
        store.close()
    assert [tuple(r) for r in rows] == [(first, str(tmp_path / "1.pdf")), (second, str(tmp_path / "2.pdf"))]
    assert [r["key"] for r in chained] == [first, second]
