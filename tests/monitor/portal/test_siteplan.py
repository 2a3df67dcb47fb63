"""The site plan in Debian's chromium through the real portal, daemon, broker and store
(tests/monitor/portal/conftest.py, with this module's site given a plan by ``EDIT_CONFIG``):
the plan page for each role with live states, a monitor's link to its chart, the 390-px
layout, and a complaint whose point is a click on the public plan."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from playwright.sync_api import Browser, BrowserContext, Page

from monitor import geo
from monitor.config import load_config
from monitor.portal import siteplan
from monitor.portal.complaint_pages import PICK_WIDTH_PX
from tests.monitor.portal.conftest import DAY, SITE, Env, levels, login, publish_minutes
from tests.support.daemon import wait_until

# The demo's coordinates (sensors/demo/dovre-demo.toml) on the fixture's site.
POSITIONS = {
    'id = "n1"\nkind = "sound"\n': "position = [45.27318, -91.62060]\n",
    'id = "n2"\nkind = "sound"\n': "position = [45.27000, -91.61432]\n",
    'id = "l1"\nkind = "light"\n': "position = [45.27100, -91.62568]\n",
    'id = "wx"\nkind = "weather"\n': "position = [45.27060, -91.61880]\n",
    'id = "sg1"\nkind = "seismograph"\n': "position = [45.26531, -91.61786]\n",
    '[[sites.gates]]\nid = "g1"\n': 'name = "North gate on 10th Avenue"\nposition = [45.27320, -91.62100]\n',
}
BOUNDARY = (
    "boundary = [[45.27320, -91.62570], [45.27320, -91.61430], [45.26690, -91.61430],"
    " [45.26690, -91.62150], [45.26900, -91.62570]]\n"
)
DWELLING = (
    '\n[[sites.dwellings]]\nid = "hansen"\nname = "Hansen residence"\nowner = "p-1"\n'
    "position = [45.26530, -91.61790]\n"
)
MONITORS = ["n1", "n2", "l1", "wx", "sg1"]


def EDIT_CONFIG(text: str) -> str:
    text = text.replace('profile = "dovre"\n', 'profile = "dovre"\n' + BOUNDARY, 1)
    for anchor, added in POSITIONS.items():
        assert anchor in text, anchor
        text = text.replace(anchor, anchor + added, 1)
    return text.replace('parcel = "012-0412-00"\n', 'parcel = "012-0412-00"\n' + DWELLING, 1)


@pytest.fixture(scope="module")
def live(env: Env) -> Iterator[datetime]:
    """Data at the wall clock's now (the portal's): n2 loud for three minutes fifteen minutes ago
    (a 6.D violation), then n1 and n2 quiet up to now."""
    now = datetime.now(UTC).replace(microsecond=0)
    # Fifteen minutes back: the loud minutes lie well before the newest data (lateness_s is 600 s).
    loud = now - timedelta(minutes=15)
    publish_minutes(env.pub, "n2", loud, 3, 86.0)
    publish_minutes(env.pub, "n2", loud + timedelta(minutes=3), 12, 60.0)
    publish_minutes(env.pub, "n1", loud, 15, 58.0)
    since = int(loud.timestamp() * 1e6)
    assert wait_until(
        lambda: (
            env.count("SELECT COUNT(*) FROM findings WHERE kind = 'violation' AND start_us >= ?", since) >= 1
        ),
        180,  # two shared cores: the daemon may take a while over 1,800 seconds of data
    ), env.daemon.logs()
    yield now


def keep_online(env: Env) -> None:
    """The last half minute of n1 and n2 at now: online whatever the tests before took."""
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=30)
    for s in range(30):
        for sensor in ("n1", "n2"):
            env.pub.publish(*levels(sensor, start + timedelta(seconds=s), 58.0))
    assert wait_until(
        lambda: (
            env.count(
                "SELECT COUNT(*) FROM sound WHERE sensor = 'n1' AND ts_us >= ?",
                int((start.timestamp() + 29) * 1e6),
            )
            >= 1
        ),
        30,
    )


def states(page: Page) -> dict[str, str]:
    return {
        m.get_attribute("data-sensor") or "": m.get_attribute("data-state") or ""
        for m in page.locator("#site-plan .monitor").all()
    }


def overlapping_labels(page: Page) -> list[tuple[str, str]]:
    """Pairs of the plan's labels whose rendered boxes (getBBox) share an area."""
    found = page.eval_on_selector_all(
        "#site-plan text.label",
        "els => els.map(e => { const b = e.getBBox();"
        " return [e.textContent, b.x, b.y, b.x + b.width, b.y + b.height]; })",
    )
    return [
        (a[0], b[0])
        for i, a in enumerate(found)
        for b in found[i + 1 :]
        if a[1] < b[3] and b[1] < a[3] and a[2] < b[4] and b[2] < a[4]
    ]


def no_horizontal_overflow(page: Page) -> None:
    width = page.evaluate("document.documentElement.scrollWidth")
    viewport = page.evaluate("window.innerWidth")
    wide = page.evaluate(  # what sticks out, for the message
        "[...document.querySelectorAll('body *')]"
        ".filter(e => e.getBoundingClientRect().right > window.innerWidth)"
        ".map(e => e.tagName + '#' + e.id + '.' + e.className).slice(0, 8)"
    )
    assert width <= viewport, (width, viewport, wide)
    box = page.locator("svg.siteplan").first.bounding_box() if page.locator("svg.siteplan").count() else None
    if box is not None:
        assert box["x"] >= 0 and box["x"] + box["width"] <= viewport, box


@pytest.mark.parametrize("role", ["op", "town", "insp"])
def test_the_plan_page_for_each_role(env: Env, live: datetime, context: BrowserContext, role: str) -> None:
    keep_online(env)
    page = login(context, env, role)
    page.goto(f"{env.url}/sites/{SITE}/plan")
    assert page.locator("#site-plan .boundary").count() == 1
    assert page.locator("#site-plan .gate[data-gate=g1]").count() == 1
    assert page.locator("#site-plan .dwelling[data-dwelling=hansen]").count() == 1
    assert [m.get_attribute("data-sensor") for m in page.locator("#site-plan .monitor").all()] == MONITORS
    # Live: what the status says, coloured; the inspector's scope (from the day before DAY) covers now.
    assert states(page) == {"n1": "ok", "n2": "violation", "l1": "offline", "wx": "offline", "sg1": "offline"}
    fill = page.locator("#site-plan .monitor[data-sensor=n2] circle").get_attribute("fill")
    assert fill == siteplan.STATE_COLOURS["violation"]
    legend = page.inner_text("#plan-legend")
    for label in ("ok", "violation", "offline", "site boundary", "gate", "dwelling"):
        assert label in legend
    # Early warnings are the operator's: only its legend offers that state.
    assert ("early warning" in legend) == (role == "op")
    # What the configuration does not give is said (here: the nearest dwellings are given).
    assert page.locator("#plan-missing").count() == 0
    # No label prints over another, as Chromium lays the text out.
    assert overlapping_labels(page) == []
    page.screenshot(path=str(env.artifacts / f"plan-{role}-1280.png"), full_page=True)
    # Another site is outside every one of these accounts' scope.
    assert page.goto(f"{env.url}/sites/other/plan").status == 404  # type: ignore[union-attr]


def test_the_status_page_shows_the_plan_and_each_monitors_state(
    env: Env, live: datetime, context: BrowserContext
) -> None:
    keep_online(env)
    page = login(context, env, "op")
    page.goto(f"{env.url}/sites/{SITE}/status")
    assert states(page)["n2"] == "violation"
    assert page.inner_text("#sensor-n2 td:nth-child(3)").strip() == "violation"
    assert page.inner_text("#sensor-n1 td:nth-child(3)").strip() == "ok"
    assert page.inner_text("#sensor-l1 td:nth-child(3)").strip() == "offline"
    # The API gives the same state.
    api = page.request.get(f"{env.url}/api/v1/sites/{SITE}/status").json()
    assert {k: v["state"] for k, v in api["sensors"].items() if k in ("n1", "n2", "l1")} == {
        "n1": "ok",
        "n2": "violation",
        "l1": "offline",
    }


def test_a_monitor_links_to_its_chart(env: Env, live: datetime, context: BrowserContext) -> None:
    town = login(context, env, "town")
    town.goto(f"{env.url}/sites/{SITE}/plan")
    town.locator("#site-plan .monitor[data-sensor=n2] circle").click()  # the dot a person clicks
    town.wait_for_load_state()
    assert town.url == f"{env.url}/sites/{SITE}/day?sensor=n2#panel-n2"
    assert town.locator("svg.dayplot #panel-n2").count() == 1  # the day view's chart of n2
    # The operator may not open the day view: its monitors link to their row of the status.
    context.clear_cookies()
    op = login(context, env, "op")
    op.goto(f"{env.url}/sites/{SITE}/plan")
    op.locator("#site-plan .monitor[data-sensor=n1] circle").click()
    op.wait_for_load_state()
    assert op.url == f"{env.url}/sites/{SITE}/status#sensor-n1"
    assert op.locator("#sensor-n1").count() == 1


def test_the_plan_fits_a_390px_screen(env: Env, live: datetime, browser: Browser) -> None:
    phone = browser.new_context(viewport={"width": 390, "height": 844})
    try:
        for role, path in (("town", "plan"), ("op", "status")):
            phone.clear_cookies()
            page = login(phone, env, role)
            page.goto(f"{env.url}/sites/{SITE}/{path}")
            box = page.locator("#site-plan").bounding_box()
            assert box is not None and 300 <= box["width"] <= 390, box
            if path == "plan":
                no_horizontal_overflow(page)
            page.screenshot(path=str(env.artifacts / f"{path}-{role}-390.png"), full_page=True)
        phone.clear_cookies()
        page = phone.new_page()
        page.goto(f"{env.url}/complaint")
        box = page.locator(f"#plan-image-{SITE}").bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390, box
        no_horizontal_overflow(page)
    finally:
        phone.close()


def test_the_public_plan_of_a_site_the_portal_lacks_is_not_found(env: Env, context: BrowserContext) -> None:
    """`/complaint/plan.svg` drew the first site's plan for a site id the configuration lacks, or
    for none: the complaint form asks for each plan by its site, and anything else is a 404."""
    assert context.request.get(f"{env.url}/complaint/plan.svg?site={SITE}").status == 200
    for query in ("?site=nope", "?site=", ""):
        reply = context.request.get(f"{env.url}/complaint/plan.svg{query}")
        assert reply.status == 404, (query, reply.status)
        assert 'class="boundary"' not in reply.text(), query


@pytest.mark.parametrize(
    ("width", "javascript"),
    [(390, True), (1280, True), (1280, False)],
    ids=["390px", "1280px", "1280px-nojs"],
)
def test_a_complaint_placed_by_a_click_on_the_plan(
    env: Env, browser: Browser, width: int, javascript: bool
) -> None:
    """The resident clicks beside monitor n2 on the public plan (the image input posts the
    click's pixels); the stored point is that place and n2 is named nearest. With JavaScript the
    plan fills its box (on a phone and on a wide screen) and the page sends the width clicked;
    without, it is drawn PICK_WIDTH_PX wide and the server maps the pixels by that."""
    site = load_config(env.config, secrets="defer").site(SITE)
    assert site is not None
    frame = siteplan.canvas(site, siteplan.PUBLIC_LAYERS)
    assert frame is not None
    target = (45.27000, -91.61480)  # 37 m west of n2, inside the boundary
    u, v = frame.at(target)

    said = f"Loud at the east gate ({width} px{'' if javascript else ', no JavaScript'})"  # one per case
    context = browser.new_context(viewport={"width": width, "height": 900}, java_script_enabled=javascript)
    page = context.new_page()
    page.goto(f"{env.url}/complaint")
    public = page.request.get(f"{env.url}/complaint/plan.svg?site={SITE}").text()
    assert 'class="boundary"' in public and "data-sensor" not in public and "Hansen" not in public
    page.select_option("select[name=site]", "other")  # the click on the quarry's plan names the site
    page.check("input[name=what][value=noise]")
    page.fill("input[name=from]", f"{DAY.isoformat()}T09:01")
    page.fill("input[name=to]", f"{DAY.isoformat()}T09:02")
    page.fill("textarea[name=description]", said)
    image = page.locator(f"#plan-image-{SITE}")
    box = image.bounding_box()
    assert box is not None
    # Drawn whole at its box's width and its own shape (nothing stretched or padded: the
    # point a person sees is the point stored), and never wider than the screen.
    if javascript:
        room = image.evaluate(
            "e => { const s = getComputedStyle(e.parentElement);"
            " return e.parentElement.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight); }"
        )
        assert box["width"] == pytest.approx(min(room, 720), abs=1), (box, room)
        assert box["width"] > PICK_WIDTH_PX if width > 400 else box["width"] >= 300
    else:
        assert box["width"] == PICK_WIDTH_PX, box
    assert box["x"] >= 0 and box["x"] + box["width"] <= width
    assert box["height"] == pytest.approx(box["width"] * frame.height / siteplan.WIDTH, abs=1), box
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    px, py = u * box["width"] / siteplan.WIDTH, v * box["width"] / siteplan.WIDTH
    image.click(position={"x": px, "y": py})
    page.wait_for_load_state()
    assert page.locator("#complaint-error").count() == 0
    assert "Your point:" in page.inner_text("#plan-chosen")
    # The form kept what was typed; nothing was sent yet.
    assert page.input_value("textarea[name=description]") == said
    assert page.input_value("select[name=site]") == SITE
    assert env.count("SELECT COUNT(*) FROM complaints WHERE description = ?", said) == 0
    # The point marked is where the resident clicked: the cross's middle, on the plan as drawn.
    lat, lon = (float(page.input_value(f"input[name={n}]")) for n in ("plan_lat", "plan_lon"))
    metres_per_px = siteplan.WIDTH / box["width"] / frame.scale  # the browser sends whole pixels
    assert geo.great_circle_m((lat, lon), target) <= 1.5 * metres_per_px, (lat, lon, metres_per_px)
    shot = f"complaint-plan-point-{width}{'' if javascript else '-nojs'}.png"
    page.screenshot(path=str(env.artifacts / shot), full_page=True)
    page.click("#complaint-form button[type=submit]")
    page.wait_for_load_state()
    reference = page.inner_text("#reference")

    conn = sqlite3.connect(env.store)
    try:
        lat, lon, plan_x, correlation = conn.execute(
            "SELECT lat, lon, plan_x, correlation FROM complaints WHERE id = ?", (reference,)
        ).fetchone()
    finally:
        conn.close()
    assert geo.great_circle_m((lat, lon), target) <= 1.5 * metres_per_px, (lat, lon, metres_per_px)
    assert plan_x is None
    checked = json.loads(correlation)
    nearest = checked["monitors"][0]
    assert nearest["sensor"] == "n2"
    assert nearest["distance_m"] == pytest.approx(37, abs=1.5 * metres_per_px + 1)
    assert checked["verdict"] == "corroborated"

    town = login(context, env, "town")
    town.goto(f"{env.url}/complaints/{reference}")
    assert f"{lat:.6f}, {lon:.6f}" in town.inner_text("body")
    assert town.inner_text("#monitors tr[data-sensor=n2]")
    context.close()
