"""The portal in a real browser (Debian's chromium through Playwright) against a real daemon,
broker and store (tests/portal/conftest.py starts them)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

from playwright.sync_api import BrowserContext

from tests.portal.conftest import DAY, OTHER, SITE, TOKENS, Env, local, login


def status_of(context: BrowserContext, url: str, token: str | None = None) -> int:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return context.request.get(url, headers=headers, max_redirects=0).status


def test_each_role_sees_what_it_may(env: Env, context: BrowserContext) -> None:
    page = login(context, env, "op")
    assert page.url == f"{env.url}/"
    nav = page.inner_text("header nav")
    assert "Status" in nav and "Record events" in nav and "Alerts" in nav
    assert "Notices" not in nav and "Day view" not in nav and "Evidence" not in nav
    assert "Other quarry" not in page.content()
    page.goto(f"{env.url}/sites/{SITE}/status")
    rows = page.locator("#sensors tbody tr")
    assert rows.count() == 4
    assert page.locator("tr[data-sensor=n2]").inner_text().startswith("n2")
    assert status_of(context, f"{env.url}/sites/{SITE}/notices") == 403
    assert status_of(context, f"{env.url}/notices/{env.notice_id}") == 403
    assert status_of(context, f"{env.url}/sites/{SITE}/day") == 403
    assert status_of(context, f"{env.url}/sites/{SITE}/evidence") == 403
    context.clear_cookies()

    page = login(context, env, "town")
    nav = page.inner_text("header nav")
    assert "Notices" in nav and "Alerts" in nav and "Day view" in nav
    assert "Record events" not in nav and "Status" not in nav
    page.goto(f"{env.url}/sites/{SITE}/notices")
    assert env.notice_id in page.inner_text("#notices")
    assert status_of(context, f"{env.url}/sites/{SITE}/status") == 403
    assert status_of(context, f"{env.url}/sites/{SITE}/events") == 403
    context.clear_cookies()

    page = login(context, env, "insp")
    nav = page.inner_text("header nav")
    assert "Day view" in nav and "Evidence" in nav
    assert "Notices" not in nav and "Status" not in nav and "Record events" not in nav and "Alerts" not in nav
    page.goto(f"{env.url}/sites/{SITE}/day?date={DAY.isoformat()}")
    assert page.locator("svg.dayplot").count() == 1
    assert status_of(context, f"{env.url}/notices/{env.notice_id}") == 403
    assert status_of(context, f"{env.url}/sites/{SITE}/status") == 403


def test_scoped_accounts_get_404_for_another_sites_pages_and_api(env: Env, context: BrowserContext) -> None:
    login(context, env, "op")
    assert status_of(context, f"{env.url}/sites/{SITE}/status") == 200
    assert status_of(context, f"{env.url}/sites/{OTHER}/status") == 404
    assert status_of(context, f"{env.url}/sites/{OTHER}/events") == 404
    assert status_of(context, f"{env.url}/sites/no-such-site/status") == 404
    context.clear_cookies()
    login(context, env, "insp")
    assert status_of(context, f"{env.url}/sites/{OTHER}/day") == 404
    assert status_of(context, f"{env.url}/sites/{OTHER}/evidence") == 404
    # The inspector's time scope starts the day before DAY: earlier days are not there.
    early = DAY.replace(day=1) if DAY.day > 3 else DAY
    if early < DAY:
        assert status_of(context, f"{env.url}/sites/{SITE}/day?date={early.isoformat()}") == 404
    context.clear_cookies()
    # The API, with tokens and no cookie.
    assert status_of(context, f"{env.url}/api/v1/sites/{SITE}/status", TOKENS["op"]) == 200
    assert status_of(context, f"{env.url}/api/v1/sites/{OTHER}/status", TOKENS["op"]) == 404
    assert status_of(context, f"{env.url}/api/v1/sites/{OTHER}/findings", TOKENS["op"]) == 404
    assert status_of(context, f"{env.url}/api/v1/sites/{OTHER}/day", TOKENS["insp"]) == 404
    assert status_of(context, f"{env.url}/api/v1/sites/{SITE}/day?date={DAY}", TOKENS["insp"]) == 200
    sites = context.request.get(
        f"{env.url}/api/v1/sites", headers={"Authorization": f"Bearer {TOKENS['op']}"}
    ).json()
    assert [s["id"] for s in sites] == [SITE]
