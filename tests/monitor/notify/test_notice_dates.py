"""The dates of a notice's history, said once: the document's history table and the portal's
notice page (NoticeDates.changes) take each change's time and deadline from ``change_dates``;
the page formatted them itself from a second place."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

from monitor.journal.store import Store
from monitor.notify.document import NoticeDates, history_rows
from monitor.notify.formats import render_notice
from monitor.notify.notices import NoticeBook
from tests.support.notices import make_config, minutes, site_and_profile, store_findings


def test_the_history_dates_of_the_page_and_the_document_are_one(tmp_path: Path) -> None:
    config = make_config(tmp_path / "n.db")
    store = Store(config.storage.path)
    site, profile = site_and_profile(config)
    # 2026-11-01 is the night Chicago falls back: the extension is made in CST, the notice in CDT.
    at = datetime(2026, 10, 31, 20, tzinfo=UTC)
    found = store_findings(store, minutes(at, 2), at + timedelta(minutes=3))
    book = NoticeBook(store)
    with store.batch():
        [event] = book.on_findings(site, profile, found, at + timedelta(minutes=4))
    book.extend(
        event.notice_id, None, "clerk", "the berm is being raised", at + timedelta(days=2), extra_days=3
    )
    notice, history = book.get(event.notice_id), book.history(event.notice_id)

    dates = NoticeDates.of(notice, history)
    rows = history_rows(notice, history)
    assert len(dates.changes) == len(history) == 2
    assert list(dates.changes) == [(row[0], row[3]) for row in rows]
    assert dates.changes[0][0].endswith("CDT") and dates.changes[1][0].endswith("CST")
    document = render_notice(store.conn, notice.id, "html", config=config).decode()
    table = document[document.index("<h2>History</h2>") :]
    cells = [re.findall(r"<td>(.*?)</td>", row) for row in re.findall(r"<tr>(<td>.*?)</tr>", table)]
    assert [(c[0], c[3]) for c in cells] == list(dates.changes)
    store.close()
