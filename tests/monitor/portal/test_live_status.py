"""The operator's live status updates itself (issue 26): in Chromium, with the real daemon, broker
and store of tests/monitor/portal/conftest.py, a meter publishing now is seen on the open page
(its last minute's LAeq, its trend of the last hours, the daemon's early warning) without the
test reloading it; without JavaScript the page reloads itself (a meta refresh)."""

from __future__ import annotations

import sqlite3
import threading
from datetime import UTC, datetime, timedelta

from playwright.sync_api import Browser, BrowserContext

from monitor.portal.pages import LIVE_REFRESH_S
from tests.monitor.portal.conftest import SITE, Env, levels, login
from tests.support.daemon import wait_until


class Meters(threading.Thread):
    """n1 at 71.3 dB(A) and n2 at 86.0 dB(A), one second each second, stamped with the wall
    clock's last whole second, as live meters send them, until stopped."""

    def __init__(self, env: Env) -> None:
        super().__init__(daemon=True)
        self.env = env
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.is_set():
            ts = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=1)
            self.env.pub.publish(*levels("n1", ts, 71.3))
            self.env.pub.publish(*levels("n2", ts, 86.0))
            self.halt.wait(1.0)


def test_the_status_page_updates_in_place_as_readings_arrive(env: Env, context: BrowserContext) -> None:
    page = login(context, env, "op")
    page.goto(f"{env.url}/sites/{SITE}/status")
    # The fixture's data are days old: nothing in the last minute, no trend yet.
    assert page.inner_text("tr[data-sensor=n1] td.laeq") == "–"
    assert page.locator("tr[data-sensor=n1] td.trend svg").count() == 0
    assert page.locator("#warnings li").count() == 0
    page.evaluate("window.notReloaded = true")  # gone if the page were loaded again
    started = datetime.now(UTC)
    meters = Meters(env)
    meters.start()
    try:
        # The last minute's LAeq of a steady 71.3 dB(A) is 71.3, shown without a reload.
        page.wait_for_function(
            "() => document.querySelector('tr[data-sensor=n1] td.laeq').textContent.startsWith('71.3 dB(A)')",
            timeout=(4 * LIVE_REFRESH_S + 20) * 1000,
        )
        assert page.evaluate("window.notReloaded") is True
        # The trend: the minutes of the last hours, as the period view's minutes give them.
        trend = page.locator("tr[data-sensor=n1] td.trend svg")
        assert trend.get_attribute("aria-label") == "LAeq per minute, 71.3 to 71.3 dB(A)"
        assert (
            page.locator(
                "tr[data-sensor=n1] td.trend svg polyline, tr[data-sensor=n1] td.trend svg circle"
            ).count()
            >= 1
        )

        # n2 runs above its limit (80 dB(A), section 6.D): the daemon's early warning, as stored,
        # appears in the list as it rises. (The daemon runs on the data clock from the fixture's
        # day three days back: it walks its timers up to now before it judges these seconds.)
        def warning() -> str:
            conn = sqlite3.connect(env.store)
            try:
                row = conn.execute(
                    "SELECT message FROM alerts WHERE kind = 'early_warning' AND message LIKE '%n2%'"
                    " AND created_us >= ? ORDER BY created_us DESC LIMIT 1",
                    (int(started.timestamp() * 1e6) - 120_000_000,),
                ).fetchone()
            finally:
                conn.close()
            return str(row[0]) if row else ""

        assert wait_until(lambda: warning() != "", 300), env.daemon.logs()[-3000:]
        page.wait_for_function(
            "() => document.querySelectorAll('#warnings li').length > 0",
            timeout=(2 * LIVE_REFRESH_S + 10) * 1000,
        )
        shown = page.inner_text("#warnings")
        assert warning() in shown, shown
        assert page.evaluate("window.notReloaded") is True
        page.set_viewport_size({"width": 390, "height": 800})
        # At 390 px the table is a column of cards: nothing scrolls sideways, neither the page
        # nor the table's own box, and each meter's trend is on screen whole.
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        table = page.locator("#sensors")
        assert table.evaluate("e => e.parentElement.scrollWidth <= e.parentElement.clientWidth")
        assert table.evaluate("e => e.scrollWidth <= e.clientWidth")
        box = page.locator("tr[data-sensor=n1] td.trend svg").bounding_box()
        assert box is not None and box["width"] >= 150 and box["height"] >= 25, box
        assert box["x"] >= 0 and box["x"] + box["width"] <= 390, box
        assert page.locator("tr[data-sensor=n1] td.trend svg").is_visible()
        # Each value under its column's name (the header row is off screen, for screen readers).
        label = page.eval_on_selector(
            "tr[data-sensor=n1] td.laeq", "e => getComputedStyle(e, '::before').content"
        )
        assert label == '"Last minute LAeq"'
        page.screenshot(path=str(env.artifacts / "operator-live-status-390.png"), full_page=True)
        # At 1280 px it is a table again, the trend in its column.
        page.set_viewport_size({"width": 1280, "height": 800})
        assert page.eval_on_selector("#sensors thead", "e => e.getBoundingClientRect().width") > 1000
    finally:
        meters.halt.set()
        meters.join(5)


def test_without_javascript_the_page_reloads_itself(env: Env, browser: Browser) -> None:
    context = browser.new_context(java_script_enabled=False)
    try:
        page = login(context, env, "op")
        page.goto(f"{env.url}/sites/{SITE}/status")
        refresh = page.locator("noscript").first.inner_html()
        assert f'<meta http-equiv="refresh" content="{LIVE_REFRESH_S}">' in refresh
        # The page's live part alone is also the fragment the script fetches.
        fragment = context.request.get(f"{env.url}/sites/{SITE}/status/live")
        assert fragment.status == 200 and 'id="sensors"' in fragment.text()
        assert "<html" not in fragment.text()
    finally:
        context.close()


def test_the_live_fragment_is_the_operators_only(env: Env, context: BrowserContext) -> None:
    login(context, env, "town")
    reply = context.request.get(f"{env.url}/sites/{SITE}/status/live", max_redirects=0)
    assert reply.status == 403
