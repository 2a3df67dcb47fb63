"""The Town's notice page after it records a service given as a day (the form's date field), in
Chromium against the real daemon and portal (conftest's env): the page says the day alone, as
the notice's document does, and beside the cure deadline that it is now counted from service,
in the document's words (monitor/notify/document.py: served_text, deadline_text)."""

from __future__ import annotations

import html
import re
from datetime import date, timedelta

from playwright.sync_api import BrowserContext

from monitor.journal.store import Store
from monitor.notify.notices import NoticeBook
from monitor.wire.protocol import format_ts
from rules.deadlines import end_of_local_day
from tests.monitor.portal.conftest import TZ, Env, login


def document_row(document_html: str, label: str) -> str:
    """A row of the notice document's header table, as text."""
    match = re.search(rf"<th>{label}</th>\s*<td>(.*?)</td>", document_html, re.S)
    assert match, label
    return html.unescape(re.sub(r"<[^>]+>", "", match.group(1))).strip()


def test_a_service_given_as_a_day_reads_as_that_day_and_the_deadline_as_counted_from_it(
    env: Env, context: BrowserContext
) -> None:
    store = Store(env.store)
    try:
        notice = NoticeBook(store).get(env.notice_id)
    finally:
        store.close()
    issued = notice.opened.astimezone(TZ).date()
    first = notice.first_deadline.astimezone(TZ).strftime("%Y-%m-%d %H:%M %Z")
    served = issued + timedelta(days=1)  # a day later: the cure period counts from that day
    page = login(context, env, "town")
    page.goto(f"{env.url}/notices/{env.notice_id}")
    page.fill("#form-serve input[name=served_on]", served.isoformat())
    page.fill("#form-serve textarea[name=reason]", "certified mail, signed for")
    with page.expect_navigation():
        page.click("#form-serve button[type=submit]")
    done = page.inner_text("#notice-done")
    assert f"was served on the Operator {served.isoformat()} by town;" in done, done

    # The day given, and no time nobody gave (its 00:00, which the period is counted from).
    assert page.inner_text("#notice-served") == f"{served.isoformat()} by town"
    due = end_of_local_day(served + timedelta(days=14), TZ).astimezone(TZ).strftime("%Y-%m-%d %H:%M %Z")
    deadline = page.inner_text("#notice-deadline")
    assert deadline == f"{due} (counted from service; first deadline {first})", deadline

    # One set of facts: the document says the same, with the deadline's instant beside it.
    document = context.request.get(f"{env.url}/notices/{env.notice_id}/document.html").text()
    assert document_row(document, "Served") == f"{served.isoformat()} by town"
    assert document_row(document, "Cure deadline").startswith(f"{deadline} (")


def test_the_issued_row_is_the_documents(env: Env, context: BrowserContext) -> None:
    """The page's "Issued" is the notice document's own row (header_rows): the local time and the
    instant beside it. The page formatted the local time itself and left the instant out."""
    page = login(context, env, "town")
    page.goto(f"{env.url}/notices/{env.notice_id}")
    issued = page.locator("table.kv tr", has=page.locator("th", has_text="Issued")).locator("td").inner_text()
    document = context.request.get(f"{env.url}/notices/{env.notice_id}/document.html").text()
    assert issued == document_row(document, "Issued"), (issued, document_row(document, "Issued"))
    store = Store(env.store)
    try:
        opened = NoticeBook(store).get(env.notice_id).opened
    finally:
        store.close()
    assert issued == f"{opened.astimezone(TZ).strftime('%Y-%m-%d %H:%M %Z')} ({format_ts(opened)})"


def test_the_notices_list_says_the_dates_in_the_notice_pages_words(env: Env, context: BrowserContext) -> None:
    """The list formatted its own short dates: no service, no instant beside the issue, and an
    extended deadline without "extended; first deadline ...". It shows the notice page's words
    (the document's, NoticeDates), for the notice served and then extended."""
    page = login(context, env, "town")

    def page_and_list() -> tuple[list[str], list[str]]:
        page.goto(f"{env.url}/notices/{env.notice_id}")
        said = [
            page.inner_text("#notice-issued"),
            page.inner_text("#notice-served") if page.locator("#notice-served").count() else "",
            page.inner_text("#notice-deadline"),
        ]
        page.goto(f"{env.url}/sites/quarry/notices")
        row = page.locator("#notices tbody tr", has_text=env.notice_id)
        cells = [row.locator(f"td[data-label='{label}']") for label in ("Issued", "Served", "Cure deadline")]
        return said, [cell.inner_text() if cell.count() else "" for cell in cells]

    said, listed = page_and_list()
    if not said[1]:  # not served by an earlier test of this module: served here, as a day
        page.goto(f"{env.url}/notices/{env.notice_id}")
        served = date.fromisoformat(said[0][:10]) + timedelta(days=1)  # the deadline moves with it
        page.fill("#form-serve input[name=served_on]", served.isoformat())
        page.fill("#form-serve textarea[name=reason]", "handed over at the gate")
        with page.expect_navigation():
            page.click("#form-serve button[type=submit]")
        said, listed = page_and_list()
    assert said[1].endswith(" by town") and "counted from service" in said[2], said
    assert listed == said

    page.goto(f"{env.url}/notices/{env.notice_id}")
    page.fill("#form-extend input[name=days]", "3")
    page.fill("#form-extend textarea[name=reason]", "the berm is being raised")
    with page.expect_navigation():
        page.click("#form-extend button[type=submit]")
    said, listed = page_and_list()
    assert "extended; first deadline" in said[2], said
    assert listed == said

    # The history table too: each change's time and deadline after it as the document's history
    # says them (NoticeDates.changes, document.change_dates), the served and extended ones included.
    page.goto(f"{env.url}/notices/{env.notice_id}")
    rows = page.locator("#history tbody tr")
    on_page = [
        (
            rows.nth(i).locator("td[data-label='When']").inner_text(),
            rows.nth(i).locator("td[data-label='Deadline after']").inner_text(),
        )
        for i in range(rows.count())
    ]
    document = context.request.get(f"{env.url}/notices/{env.notice_id}/document.html").text()
    table = document[document.index("<h2>History</h2>") :]
    cells = [re.findall(r"<td>(.*?)</td>", row) for row in re.findall(r"<tr>(<td>.*?)</tr>", table)]
    assert len(on_page) >= 3 and on_page == [(html.unescape(c[0]), html.unescape(c[3])) for c in cells]
