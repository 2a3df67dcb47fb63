"""The operator's notices in the browser (issue 26): the notices addressed to it with their
cure deadlines, and the request for more time (13.3.A) that `minewatch notices
request-extension` records, offered only while the notice's state allows one. Real Chromium,
daemon, broker and store (tests/monitor/portal/conftest.py; a module of its own, since the
request changes the fixture's notice)."""

from __future__ import annotations

import html
import json
import re
import sqlite3
from zoneinfo import ZoneInfo

from playwright.sync_api import BrowserContext

from monitor.journal.store import Store
from monitor.notify.notices import NoticeBook
from rules.times import local_stamp
from tests.monitor.portal.conftest import SITE, Env, login


def _csrf(page_html: str) -> str:
    match = re.search(r'name="csrf" value="([^"]+)"', page_html)
    assert match
    return match.group(1)


def test_the_operator_sees_its_notices_and_asks_for_more_time(env: Env, context: BrowserContext) -> None:
    store = Store(env.store)
    try:
        notice = NoticeBook(store).get(env.notice_id)
    finally:
        store.close()
    deadline = notice.deadline.astimezone(ZoneInfo(notice.timezone))
    page = login(context, env, "op")
    assert "Notices" in page.inner_text("header nav")
    page.goto(f"{env.url}/sites/{SITE}/notices")
    row = page.locator("#notices tr", has_text=env.notice_id)
    assert "open" in row.inner_text() and deadline.strftime("%Y-%m-%d %H:%M %Z") in row.inner_text()
    row.locator("a").click()
    assert page.url == f"{env.url}/notices/{env.notice_id}"
    assert page.inner_text("#notice-deadline") == deadline.strftime("%Y-%m-%d %H:%M %Z")
    # The Town's forms are not the operator's.
    assert page.locator("#form-extend, #form-close, #form-escalate").count() == 0
    form = page.locator("#form-request-extension")
    assert form.count() == 1

    # Refusals in the form's words, on the notice's page: an explanation of blanks...
    form.locator("textarea[name=explanation]").fill("   ")
    form.locator("button[type=submit]").click()
    assert page.inner_text("#notice-error") == "explanation: say why more time is needed (the Town reads it)"
    # ...and days out of range (sent as a form would, past the browser's own check).
    url = f"{env.url}/notices/{env.notice_id}/request-extension"
    reply = context.request.post(
        url, form={"csrf": _csrf(page.content()), "explanation": "berm", "days": "0"}, max_redirects=0
    )
    assert reply.status == 400
    assert "days: must be at least 1, got 0" in reply.text()
    # Without the form's token: refused, nothing recorded.
    assert context.request.post(url, form={"explanation": "berm"}, max_redirects=0).status == 403
    assert env.count("SELECT COUNT(*) FROM notice_changes WHERE change = 'extension_requested'") == 0

    page.goto(f"{env.url}/notices/{env.notice_id}")
    explanation = "The noise berm on the east side is half built; the contractor finishes it in 10 days."
    page.fill("#form-request-extension textarea[name=explanation]", explanation)
    page.fill("#form-request-extension input[name=days]", "10")
    with page.expect_navigation():
        page.click("#form-request-extension button[type=submit]")
    assert page.url == f"{env.url}/notices/{env.notice_id}"  # post/redirect/get
    # The notice book's own message, as the CLI prints it.
    assert page.inner_text("#notice-done") == (
        f"op requests 10 more days to correct notice {env.notice_id} (deadline "
        f"{local_stamp(notice.deadline, notice.timezone)}): {explanation}"
    )
    assert page.inner_text("#notice-status") == "extension requested"
    page.screenshot(path=str(env.artifacts / "operator-notice-extension-requested.png"), full_page=True)
    last = page.locator("#history tbody tr").last.inner_text()
    assert "extension_requested" in last and "op" in last and explanation in last
    # Recorded as `minewatch notices request-extension` records it, with the portal's record.
    conn = sqlite3.connect(env.store)
    try:
        status = conn.execute("SELECT status FROM notices WHERE id = ?", (env.notice_id,)).fetchone()[0]
        change = conn.execute(
            "SELECT actor, note, data FROM notice_changes"
            " WHERE notice_id = ? AND change = 'extension_requested'",
            (env.notice_id,),
        ).fetchall()
        action = conn.execute(
            "SELECT actor, role FROM portal_actions WHERE action = 'notice_request_extension' AND target = ?",
            (env.notice_id,),
        ).fetchall()
    finally:
        conn.close()
    assert status == "extension_requested"
    assert len(change) == 1 and change[0][0] == "op" and change[0][1] == explanation
    assert json.loads(change[0][2]) == {"requested_days": 10}
    assert action == [("op", "operator")]

    # A requested extension takes no second request: no form, and a POST is refused in words.
    assert page.locator("#form-request-extension").count() == 0
    assert "takes no request for more time" in page.inner_text("#request-extension-closed")
    reply = context.request.post(
        url, form={"csrf": _csrf(page.content()), "explanation": "again"}, max_redirects=0
    )
    assert reply.status == 400
    said = html.unescape(reply.text())
    assert "is extension requested; 'extension requested' is possible only when it is open, extended" in said
    context.clear_cookies()

    # The Town reads the request in the history and may not send one itself.
    page = login(context, env, "town")
    page.goto(f"{env.url}/notices/{env.notice_id}")
    assert explanation in page.inner_text("#history")
    assert page.locator("#form-request-extension").count() == 0
    reply = context.request.post(
        url, form={"csrf": _csrf(page.content()), "explanation": "x"}, max_redirects=0
    )
    assert reply.status == 403


def test_the_status_page_lists_the_notices_not_closed_with_their_deadline(
    env: Env, context: BrowserContext
) -> None:
    """The operator's live status said nothing of the notices it has to act on: it lists them,
    worded as `minewatch status` words them (site_status's text), each linked to its page."""
    store = Store(env.store)
    try:
        notice = NoticeBook(store).get(env.notice_id)
    finally:
        store.close()
    page = login(context, env, "op")
    page.goto(f"{env.url}/sites/{SITE}/status")
    item = page.locator("#open-notices li", has_text=env.notice_id)
    text = item.inner_text()
    assert f"correct by {local_stamp(notice.deadline, notice.timezone)} (" in text
    assert text.startswith(f"{env.notice_id} ")
    item.locator("a").click()
    assert page.url == f"{env.url}/notices/{env.notice_id}"
