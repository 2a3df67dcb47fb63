"""The day and period views in a real browser (Debian's chromium through Playwright) on the
demo's day: `minewatch demo` runs it through a real Mosquitto, daemon and store (dovre-short:
2.5 hours with two recorded blasts, an unreported one at 16:02, a noise violation at n3, the
conveyor meter n4, light trespass, a flashing light and a sky sensor), then the portal is
served on that store as in production (`minewatch serve`)."""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from playwright.sync_api import Browser, BrowserContext, Page

from monitor.config import Config, parse_config
from monitor.demo.runner import run_demo
from tests.support.portal_server import portal_serving

SITE = "dovre-quarry"
TZ = ZoneInfo("America/Chicago")
# A past 10 December: dovre-short's lights fall in the dark (as tests/sensors/test_demo.py).
DAY = date(datetime.now(TZ).year - 1, 12, 10)


@dataclass
class Demo:
    url: str
    config: Config
    artifacts: Path


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    root = tmp_path_factory.mktemp("period-demo")
    out = io.StringIO()
    # The demo's own expectations are tests/sensors/test_demo.py's; what these tests read (the
    # n3 episode, the blasts, n4, the light and sky sensors) each test asserts. On a loaded
    # machine at speed "max" a light burst once came too late for the flashing-light finding,
    # which made the demo exit 1 with everything these tests need on record.
    code = run_demo(root / "demo", "dovre-short", "max", None, out, day=DAY)
    assert code in (0, 1) and "Compliance summary" in out.getvalue(), out.getvalue()
    config_path = root / "demo" / "minewatch.toml"

    def config_for(port: int) -> Path:
        config_path.write_text(
            re.sub(r"(?m)^port = \d+$", f"port = {port}", config_path.read_text(), count=1)
        )
        return config_path

    with portal_serving(config_for, root / "portal.log") as (port, _):
        artifacts = root / "artifacts"
        artifacts.mkdir()
        yield Demo(
            f"http://127.0.0.1:{port}", parse_config(config_path.read_text(), str(config_path)), artifacts
        )


def login(browser: Browser, demo: Demo, role: str, width: int = 1280) -> tuple[BrowserContext, Page]:
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    page.goto(f"{demo.url}/login")
    page.fill("input[name=name]", role)
    page.fill("input[name=password]", f"demo-{role}")
    page.click("button[type=submit]")
    page.wait_for_load_state()
    return context, page


def boxes(page: Page, selector: str) -> list[dict[str, Any]]:
    """The rendered boxes (getBBox, SVG units) and texts of the elements ``selector`` finds."""
    found: list[dict[str, Any]] = page.eval_on_selector_all(
        selector,
        "els => els.map(e => { const b = e.getBBox(); return {x: b.x, y: b.y, w: b.width, h: b.height,"
        " text: e.textContent, panel: e.closest('g.panel').id}; })",
    )
    return found


def overlapping(found: list[dict[str, Any]]) -> list[tuple[str, str]]:
    out = []
    for i, a in enumerate(found):
        for b in found[i + 1 :]:
            if a["panel"] != b["panel"]:
                continue
            if (
                a["x"] < b["x"] + b["w"]
                and b["x"] < a["x"] + a["w"]
                and a["y"] < b["y"] + b["h"]
                and b["y"] < a["y"] + a["h"]
            ):
                out.append((f"{a['panel']}:{a['text']}", f"{b['panel']}:{b['text']}"))
    return out


def local_hm(ts: str) -> str:
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).astimezone(TZ).strftime("%H:%M")


def test_the_view_opens_on_the_demo_days_data_with_every_sensor(demo: Demo, browser: Browser) -> None:
    context, page = login(browser, demo, "inspector")
    page.goto(f"{demo.url}/sites/{SITE}/day")
    # The demo's 14:50-17:20 fills the axis: the whole hours that hold it, not 00:00-24:00.
    assert page.inner_text("#period-span") == f"{DAY} 14:00 CST to {DAY} 18:00 CST (4 hours)"
    ticks = page.locator("#panel-n1 text.time-tick").all_text_contents()
    assert ticks[0] == "14:00" and ticks[-1] == "18:00"
    site = demo.config.site(SITE)
    assert site is not None
    configured = [s.id for s in site.sensors]
    assert "n4" in configured and "sky1" in configured
    # Every configured sensor is on the page; each sound, light and sky sensor has its panel.
    listed = page.eval_on_selector_all("#period-sensors tbody tr", "rows => rows.map(r => r.dataset.sensor)")
    assert listed == configured
    plotted = [s.id for s in site.sensors if s.kind.value in ("sound", "light", "sky")]
    assert page.eval_on_selector_all("svg.dayplot g.panel", "gs => gs.map(g => g.dataset.sensor)") == plotted
    # n4 stands on the conveyor parcel: held to 6.G's limit, with its minutes drawn.
    assert "6.G" in (page.text_content("#panel-n4 text.title") or "")
    assert page.locator("#panel-n4 line.limit").get_attribute("data-limit-db") == "80"
    assert page.locator("#panel-n4 polyline.level").count() >= 1
    assert page.locator("#panel-sky1 polyline.lux-mean").count() >= 1
    assert (page.locator("#panel-n1 polyline.level").first.get_attribute("points") or "").count(",") >= 140
    page.screenshot(path=str(demo.artifacts / "period-opening.png"), full_page=True)
    # The API answers the same period, with the same sensors.
    api = context.request.get(f"{demo.url}/api/v1/sites/{SITE}/day").json()
    assert (api["from"], api["resolution"]) == (f"{DAY}T20:00:00Z", "minute")
    assert set(api["sound"]) == {"n1", "n2", "n3", "n4"} and set(api["light"]) == {"l1", "l2", "sky1"}
    assert [s["id"] for s in api["sensors"]] == configured
    context.close()


def test_zooming_to_an_hour_and_to_a_week_with_links_and_the_form(demo: Demo, browser: Browser) -> None:
    context, page = login(browser, demo, "inspector")
    page.goto(f"{demo.url}/sites/{SITE}/day")
    page.click("#step-hour")  # the hour around the middle of the period: 16:00-17:00
    assert page.inner_text("#period-span") == f"{DAY} 16:00 CST to {DAY} 17:00 CST (1 hour)"
    points = page.locator("#panel-n3 polyline.level").first.get_attribute("points") or ""
    assert 55 <= points.count(",") <= 60  # a point a minute
    assert page.locator("#panel-n1 text.time-tick").all_text_contents()[:3] == ["16:00", "16:05", "16:10"]
    page.click("#period-prev")
    assert page.inner_text("#period-span") == f"{DAY} 15:00 CST to {DAY} 16:00 CST (1 hour)"
    page.click("#zoom-out")
    assert page.inner_text("#period-span") == f"{DAY} 15:00 CST to {DAY} 18:00 CST (3 hours)"
    page.click("#step-week")
    span = page.inner_text("#period-span")
    assert span.endswith("(168 hours)") and "00:00 CST" in span
    monday = datetime.fromisoformat(page.url.split("from=")[1][:16]).date()
    assert monday.weekday() == 0 and 0 <= (DAY - monday).days < 7
    # A week: hourly LAeq with L10 and L90, said so in the legend.
    assert "L10" in page.inner_text("#legend") and "Hourly LAeq" in page.inner_text("main")
    assert (
        page.locator("#panel-n1 polyline.l10").count() >= 1
        and page.locator("#panel-n1 polyline.l90").count() >= 1
    )
    hourly = page.locator("#panel-n1 polyline.level").first.get_attribute("points") or ""
    assert 3 <= hourly.count(",") <= 4  # 14:00-17:20: four clock hours
    page.screenshot(path=str(demo.artifacts / "period-week.png"), full_page=True)
    # Any period from the form (no JavaScript involved: a GET form).
    page.fill("#period-form input[name=from]", f"{DAY}T16:05")
    page.fill("#period-form input[name=to]", f"{DAY}T16:25")
    page.click("#period-form button[type=submit]")
    assert page.inner_text("#period-span") == f"{DAY} 16:05 CST to {DAY} 16:25 CST (20 minutes)"
    assert page.locator("#panel-n3 rect.episode").count() == 1
    # A period the wrong way round: 400, saying which field and why.
    wrong = context.request.get(f"{demo.url}/sites/{SITE}/day?from={DAY}T16:00&to={DAY}T15:00")
    assert wrong.status == 400 and "to: must be after from" in wrong.text()
    api = context.request.get(f"{demo.url}/api/v1/sites/{SITE}/day?from={monday}T00:00&to={monday}T00:00")
    assert api.status == 400 and api.json() == {"error": "to: must be after from"}
    # A time the clocks skip (it was read an hour on and said "to: must be after from").
    gap = context.request.get(f"{demo.url}/api/v1/sites/{SITE}/day?from=2026-03-08T02:30&to=2026-03-08T03:00")
    assert gap.status == 400 and gap.json()["error"].startswith(
        "from: '2026-03-08T02:30' is no time at the site: the clocks skip it when daylight-saving time begins"
    )
    context.close()


def test_the_violation_is_shaded_in_the_legend_and_the_blasts_are_marked_apart(
    demo: Demo, browser: Browser
) -> None:
    context, page = login(browser, demo, "inspector")
    page.goto(f"{demo.url}/sites/{SITE}/day?date={DAY}")
    api = context.request.get(f"{demo.url}/api/v1/sites/{SITE}/day?date={DAY}").json()
    [noise] = [e for e in api["episodes"] if e["sensors"] == ["n3"]]
    shaded = page.locator("#panel-n3 rect.episode")
    assert shaded.count() == 1 and shaded.get_attribute("data-episode") == noise["id"]
    assert page.locator("svg.dayplot rect.episode").count() == len(
        [s for e in api["episodes"] for s in e["sensors"] if s in api["sound"] or s in api["light"]]
    )
    assert shaded.bounding_box()["width"] >= 3  # type: ignore[index]
    # The legend has the violation entry, in the colour of the shading.
    assert page.inner_text("#legend-violation") == "violation (episode)"
    key = page.eval_on_selector("#legend .key.episode", "e => getComputedStyle(e).backgroundColor")
    fill = shaded.evaluate("e => getComputedStyle(e).fill")
    assert key == fill
    # The unreported blast at 16:02 is marked (on the meter that heard it) and listed.
    [unreported] = api["unreported_blasts"]
    assert local_hm(unreported["ts"]) == "16:02"
    mark = page.locator("line.unreported-blast")
    assert mark.count() == len(unreported["sensors"]) >= 1
    assert mark.first.get_attribute("data-ts") == unreported["ts"]
    assert "Unreported blast" in page.inner_text("#period-blasts li.unreported")
    # The two recorded blasts and the rest: no label prints over another, on a day's axis too.
    labels = boxes(page, "svg.dayplot text.label:not(.limit-label)")
    assert {b["text"] for b in labels} >= {"blast", "unreported blast", "sunset"}
    assert overlapping(labels) == []
    limits = boxes(page, "svg.dayplot text.limit-label")
    assert overlapping(limits) == []
    # Lux on a log axis, ticks a decade apart: the 3.3 lux trespass stands above the 1 lux line.
    assert page.locator("#panel-l1 text.tick").all_text_contents()[:5] == ["0.01", "0.1", "1", "10", "100"]
    assert {t for t in page.locator("#panel-l1 text.limit-label").all_text_contents()} == {
        "trespass lux 1",
        "max lux 25",
    }
    page.screenshot(path=str(demo.artifacts / "period-day.png"), full_page=True)
    context.close()


def test_findings_are_filtered_grouped_by_episode_and_linked_to_notice_and_chart(
    demo: Demo, browser: Browser
) -> None:
    context, page = login(browser, demo, "town")
    page.goto(f"{demo.url}/sites/{SITE}/day?date={DAY}")
    total = page.locator("li.finding").count()
    n3_violations = page.locator("li.finding.kind-violation[data-sensors~=n3]").count()
    assert total > 60 and n3_violations == 11
    # Filtered by sensor and kind with the GET form (query parameters, no JavaScript).
    page.select_option("#finding-filters select[name=sensor]", "n3")
    page.select_option("#finding-filters select[name=kind]", "violation")
    page.click("#finding-filters button[type=submit]")
    assert "sensor=n3" in page.url and "kind=violation" in page.url
    # Moving through time keeps the filters.
    assert (page.get_attribute("#period-next", "href") or "").endswith("&sensor=n3&kind=violation")
    shown = page.locator("li.finding")
    assert shown.count() == n3_violations
    assert page.inner_text("#findings-count").startswith(f"{n3_violations} of {total} findings")
    # Grouped by episode: one group, the n3 noise episode, with its notice and its place on the chart.
    groups = page.locator("details.finding-group")
    assert groups.count() == 1
    api = context.request.get(f"{demo.url}/api/v1/sites/{SITE}/day?date={DAY}").json()
    [noise] = [e for e in api["episodes"] if e["sensors"] == ["n3"]]
    assert groups.first.get_attribute("data-episode") == noise["id"]
    notice = groups.first.locator(".group-links a.notice-link")
    assert notice.get_attribute("href") == f"/notices/{noise['notice']}"
    assert context.request.get(f"{demo.url}/notices/{noise['notice']}").status == 200
    # By standard: the 6.G meter's findings only.
    page.goto(f"{demo.url}/sites/{SITE}/day?date={DAY}&standard=conveyor_noise")
    assert {li.get_attribute("data-standard") for li in page.locator("li.finding").all()} == {
        "conveyor_noise"
    }
    # A finding's chart link opens the hour around its window, at its meter's panel.
    page.goto(f"{demo.url}/sites/{SITE}/day?date={DAY}&sensor=n3&kind=violation")
    first = page.locator("li.finding").first
    when = first.locator(".when").inner_text()
    first.locator("a.chart-link").click()
    assert page.url.endswith("#panel-n3")
    assert page.inner_text("#period-span").endswith("(1 hour)")
    span = page.inner_text("#period-span")
    assert span.split(" ")[1] <= when[:5] <= span.split(" ")[5]
    assert page.locator("#panel-n3 rect.episode").count() == 1
    # An unknown filter value: 400 naming the field.
    bad = context.request.get(f"{demo.url}/sites/{SITE}/day?sensor=n9")
    assert bad.status == 400 and "sensor: no sensor &#39;n9&#39;; choose one of n1, n2, n3, n4" in bad.text()
    context.close()


@pytest.mark.parametrize(("role", "path"), [("operator", "status"), ("inspector", "day"), ("town", "day")])
def test_status_and_day_pages_fit_a_390_px_screen(demo: Demo, browser: Browser, role: str, path: str) -> None:
    context, page = login(browser, demo, role, width=390)
    page.goto(f"{demo.url}/sites/{SITE}/{path}" + (f"?date={DAY}" if path == "day" else ""))
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    header = page.locator("header.top").bounding_box()
    assert header is not None and header["width"] == 390
    # Wide content scrolls in its own box instead of the page.
    wide = "#sensors" if path == "status" else "svg.dayplot"
    box = page.locator(wide).evaluate("e => e.parentElement.getBoundingClientRect().right")
    assert box <= 390
    page.screenshot(path=str(demo.artifacts / f"390-{role}-{path}.png"), full_page=True)
    context.close()


def test_a_shaded_episode_links_to_its_notice_or_to_its_findings(demo: Demo, browser: Browser) -> None:
    """The Town may open notices: a click on the n3 shading lands on its notice. The inspector
    may not (the findings list's allow-list): the shading links to the episode's findings on
    the page, or to its line in the list of episodes when the filters leave its group out."""
    context, page = login(browser, demo, "town")
    page.goto(f"{demo.url}/sites/{SITE}/day?date={DAY}")
    api = context.request.get(f"{demo.url}/api/v1/sites/{SITE}/day?date={DAY}").json()
    [noise] = [e for e in api["episodes"] if e["sensors"] == ["n3"]]
    assert noise["notice"]
    link = page.locator("#panel-n3 a.episode-link")
    assert link.count() == 1 and link.get_attribute("href") == f"/notices/{noise['notice']}"
    # Its accessible name says what it is and where it goes (the <title> of the <a>).
    named = page.get_by_role("link", name=f"open notice {noise['notice']}")
    assert named.count() == 1 and named.get_attribute("data-episode") == noise["id"]
    shaded = page.locator("#panel-n3 rect.episode")
    box = shaded.bounding_box()
    assert box is not None
    # Near the foot of the panel, below the levels and the marks' labels: the shading itself.
    shaded.click(position={"x": box["width"] / 2, "y": box["height"] - 4})
    page.wait_for_url(f"{demo.url}/notices/{noise['notice']}")
    assert noise["notice"] in page.inner_text("h1")
    page.set_viewport_size({"width": 390, "height": 844})
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    page.screenshot(path=str(demo.artifacts / "town-notice-390.png"), full_page=True)
    context.close()

    context, page = login(browser, demo, "inspector")
    page.goto(f"{demo.url}/sites/{SITE}/day?date={DAY}")
    assert page.locator("a[href^='/notices/']").count() == 0
    anchor = f"episode-{noise['id']}"
    link = page.locator("#panel-n3 a.episode-link")
    assert link.get_attribute("href") == f"#{anchor}"
    assert page.get_by_role("link", name="its findings on this page").count() == len(
        [s for e in api["episodes"] for s in e["sensors"] if s in api["sound"] or s in api["light"]]
    )
    shaded = page.locator("#panel-n3 rect.episode")
    box = shaded.bounding_box()
    assert box is not None
    shaded.click(position={"x": box["width"] / 2, "y": box["height"] - 4})
    page.wait_for_url(f"**#{anchor}")
    group = page.locator(f"#{anchor}")
    assert (
        group.evaluate("e => e.tagName") == "DETAILS" and group.get_attribute("data-episode") == noise["id"]
    )
    assert group.is_visible() and group.evaluate("e => e.getBoundingClientRect().top") < 900
    # Filtered to another sensor, the group is left out: the episode's line in the list instead.
    page.goto(f"{demo.url}/sites/{SITE}/day?date={DAY}&sensor=n1")
    target = page.locator(f"#{anchor}")
    assert target.count() == 1 and target.evaluate("e => e.closest('#day-episodes') !== null")
    context.close()


def test_the_demo_plans_labels_are_apart(demo: Demo, browser: Browser) -> None:
    """The demo's plan as Chromium draws it: sky1 and wx1 (18 m apart in the processing yard)
    printed over each other; now no label meets another."""
    from tests.monitor.portal.test_siteplan import overlapping_labels

    context, page = login(browser, demo, "town")
    page.goto(f"{demo.url}/sites/{SITE}/plan")
    labels = page.locator("#site-plan text.monitor-label").all_text_contents()
    assert {"sky1", "wx1", "sg1"} <= set(labels)
    assert overlapping_labels(page) == []
    page.locator("#plan-figure").screenshot(path=str(demo.artifacts / "siteplan.png"))
    context.close()
