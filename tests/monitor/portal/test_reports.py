"""Compliance reports made in the portal's background jobs (monitor/portal/report_pages.py),
through the real portal in Debian's chromium against the real daemon, broker and store
(tests/monitor/portal/conftest.py): the request starts the job, its page shows progress and then
the PDF and CSV; the same month asked again is the same report while the chain head has not
moved, and a new one once it has; every report made is a chained record that `minewatch
verify` accepts."""

from __future__ import annotations

import sqlite3
import subprocess
import sys

from playwright.sync_api import BrowserContext, Page

from tests.monitor.portal.conftest import DAY, SITE, Env, local, login, publish_minutes
from tests.support.daemon import wait_until
from tests.support.paths import REPO


def chain_head(env: Env) -> tuple[int, str]:
    conn = sqlite3.connect(env.store, timeout=30)
    try:
        row = conn.execute(
            "SELECT seq, head FROM chain WHERE site = ? ORDER BY seq DESC LIMIT 1", (SITE,)
        ).fetchone()
    finally:
        conn.close()
    return int(row[0]), str(row[1])


def ask(page: Page, env: Env, month: str) -> str:
    """Click the month's button on the reports page; the job's URL once its files are shown."""
    page.goto(f"{env.url}/sites/{SITE}/reports")
    page.click(f"#reports tr[data-month='{month}'] button")
    page.wait_for_url(f"{env.url}/sites/{SITE}/reports/jobs/*")
    page.wait_for_selector("#job-done", timeout=120_000)  # the page refreshes itself until then
    return page.url


def test_the_town_makes_a_months_report_in_the_background(env: Env, context: BrowserContext) -> None:
    month = DAY.strftime("%Y-%m")
    town = login(context, env, "town")
    reports_before = env.count("SELECT COUNT(*) FROM reports")
    first = ask(town, env, month)
    assert env.count("SELECT COUNT(*) FROM reports") == reports_before + 1
    done = town.inner_text("#job-done")
    assert "computed from chain entry" in done and "recorded in the chain as report rp-" in done
    assert town.inner_text("#report-files").split() == [f"{SITE}-{month}.pdf", f"{SITE}-{month}.csv"]
    town.screenshot(path=str(env.artifacts / "report-ready.png"), full_page=True)

    with town.expect_download() as download:
        town.click(f"#report-files a:has-text('{SITE}-{month}.pdf')")
    pdf_path = env.root / f"downloaded-{month}.pdf"
    download.value.save_as(pdf_path)
    assert pdf_path.read_bytes().startswith(b"%PDF")
    csv_reply = context.request.get(f"{first}/{SITE}-{month}.csv")
    assert csv_reply.status == 200
    text = csv_reply.text()
    assert f"{DAY.isoformat()} n2" in text  # the day's levels at the boundary meter
    assert env.notice_id in text and "Noise at the mine site boundaries (6.D) at n2" in text
    assert "B-1100" in text
    csv_path = env.root / f"downloaded-{month}.csv"
    csv_path.write_bytes(csv_reply.body())
    for path in (pdf_path, csv_path):  # a report made in the portal verifies like any other
        verify = subprocess.run(
            [sys.executable, "-m", "monitor.cli", "verify", "--config", str(env.config), str(path)],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert verify.returncode == 0, verify.stdout + verify.stderr
        assert len(verify.stdout.splitlines()) == 3 and ": FAILED: " not in verify.stdout

    # Asked again with nothing recorded since: the same job and files, no new record.
    head = chain_head(env)
    again = ask(town, env, month)
    assert chain_head(env) == head  # the daemon runs on the data clock: no new data, no new entry
    assert again == first
    assert env.count("SELECT COUNT(*) FROM reports") == reports_before + 1
    # Something recorded since (a minute of sound): a new report, computed from the new head.
    publish_minutes(env.pub, "n1", local(12), 1, 57.0)
    assert wait_until(lambda: chain_head(env)[0] > head[0], 60), env.daemon.logs()
    third = ask(town, env, month)
    assert third != first
    assert env.count("SELECT COUNT(*) FROM reports") == reports_before + 2
    assert f"computed from chain entry {head[0]}" not in town.inner_text("#job-done")

    # A month that is none, and a role without reports.
    town.goto(f"{env.url}/sites/{SITE}/reports")
    csrf = town.locator("#reports input[name=csrf]").first.get_attribute("value")
    bad = context.request.post(f"{env.url}/sites/{SITE}/reports/2026-13", form={"csrf": str(csrf)})
    assert bad.status == 400 and "month: expected a month like 2026-11" in bad.text()
    reports_now = env.count("SELECT COUNT(*) FROM reports")
    ahead = context.request.post(f"{env.url}/sites/{SITE}/reports/2099-12", form={"csrf": str(csrf)})
    assert ahead.status == 400 and f"month: 2099-12-01 has not begun yet at {SITE}" in ahead.text()
    assert env.count("SELECT COUNT(*) FROM reports") == reports_now  # nothing made, nothing chained
    context.clear_cookies()
    operator = login(context, env, "op")
    operator.goto(f"{env.url}/sites/{SITE}/reports")
    assert context.request.get(f"{env.url}/sites/{SITE}/reports", max_redirects=0).status == 403
    assert context.request.get(first, max_redirects=0).status == 403
