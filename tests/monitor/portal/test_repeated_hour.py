"""A local time the clocks show twice (the hour repeated when they go back in autumn), typed in
the portal's forms in Debian's chromium against a real daemon, broker and store
(tests/monitor/portal/conftest.py). A browser's datetime-local field carries no offset: the form
is shown again, what was typed kept, with one line naming the two readings and a choice of them;
the time is stored at the reading chosen."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, date, datetime, timedelta

from playwright.sync_api import BrowserContext

from tests.monitor.portal.conftest import SITE, TZ, Env, login


def last_fall_back() -> date:
    """The last day (to today) on which the site's clocks went back: 2026-11-01 in Chicago in
    December 2026; a complaint may be about the last year only."""
    day = datetime.now(TZ).date()
    while True:
        noon = datetime(day.year, day.month, day.day, 12, tzinfo=TZ)
        if noon.utcoffset() != (noon - timedelta(days=1)).utcoffset():
            return day
        day -= timedelta(days=1)


def test_a_complaint_at_a_time_that_occurred_twice_is_refused_with_the_choice_and_stored_as_chosen(
    env: Env, context: BrowserContext
) -> None:
    day = last_fall_back()
    when = f"{day.isoformat()}T01:30"
    page = context.new_page()
    page.goto(f"{env.url}/complaint")
    page.select_option("select[name=site]", SITE)
    page.check("input[name=what][value=noise]")
    page.fill("input[name=from]", when)
    page.fill("input[name=address]", "N4410 County Rd K")
    page.fill("textarea[name=description]", "Trucks at the gate in the night")
    page.click("#complaint-form button[type=submit]")
    page.wait_for_load_state()

    error = page.inner_text("#complaint-error")
    assert error == (
        f"from: 01:30 happened twice that night ({day.isoformat()}), before and after the clocks"
        " went back: choose 01:30 CDT (the first) or 01:30 CST (the second)"
    ), error
    # What was typed is kept; the choice is shown for that field only, nothing chosen for the resident.
    assert page.input_value("input[name=from]") == when
    assert page.input_value("textarea[name=description]") == "Trucks at the gate in the night"
    assert page.locator("select[name=to_offset]").count() == 0
    options = page.eval_on_selector_all(
        "select[name=from_offset] option", "os => os.map(o => [o.value, o.textContent.trim()])"
    )
    assert options == [
        ["", "choose"],
        ["-05:00", "CDT (UTC-05:00), the first"],
        ["-06:00", "CST (UTC-06:00), the second"],
    ], options
    page.screenshot(path=str(env.artifacts / "complaint-hour-twice.png"), full_page=True)

    page.select_option("select[name=from_offset]", "-06:00")
    page.click("#complaint-form button[type=submit]")
    page.wait_for_load_state()
    assert page.locator("#complaint-error").count() == 0, page.inner_text("#complaint-error")
    reference = page.inner_text("#reference")

    town = login(context, env, "town")
    stored = {c["id"]: c for c in context.request.get(f"{env.url}/api/v1/sites/{SITE}/complaints").json()}
    second = datetime(day.year, day.month, day.day, 1, 30, fold=1, tzinfo=TZ).astimezone(UTC)
    assert stored[reference]["start"] == second.strftime("%Y-%m-%dT%H:%M:%SZ"), stored[reference]
    assert stored[reference]["start"] == stored[reference]["end"]
    town.close()


def test_an_event_at_a_time_that_occurred_twice_is_refused_with_the_choice_and_read_as_chosen(
    env: Env, context: BrowserContext
) -> None:
    """The operator's event forms: the blast form refused keeps what was typed and offers the
    choice; the blast is then read at the reading chosen."""
    day = last_fall_back()
    page = login(context, env, "op")
    page.goto(f"{env.url}/sites/{SITE}/events")
    page.fill("#form-blast input[name=blast_id]", "FALL-BACK-1")
    page.fill("#form-blast input[name=ts]", f"{day.isoformat()}T01:30:20")
    page.fill("#form-blast input[name=charge_kg]", "12")
    with page.expect_navigation():
        page.click("#form-blast button[type=submit]")
    error = page.inner_text("#event-error")
    assert error == (
        f"Not recorded (blast): ts: 01:30:20 happened twice that night ({day.isoformat()}), before and"
        " after the clocks went back: choose 01:30:20 CDT (the first) or 01:30:20 CST (the second)"
    ), error
    assert page.input_value("#form-blast input[name=blast_id]") == "FALL-BACK-1"
    assert page.input_value("#form-blast input[name=ts]").startswith(f"{day.isoformat()}T01:30:20")
    assert page.input_value("#form-blast input[name=charge_kg]") == "12"
    assert page.locator("#form-truck select[name=ts_offset]").count() == 0  # only the form refused
    assert env.count("SELECT COUNT(*) FROM events WHERE id = 'FALL-BACK-1'") == 0

    # The choice made, the blast is read at the second 01:30:20: the event codec's own bound on
    # an event's age (a fall-back night is weeks past) then refuses it, saying the time it read.
    page.select_option("#form-blast select[name=ts_offset]", "-06:00")
    with page.expect_navigation():
        page.click("#form-blast button[type=submit]")
    second = datetime(day.year, day.month, day.day, 1, 30, 20, fold=1, tzinfo=TZ).astimezone(UTC)
    error = page.inner_text("#event-error")
    assert f"ts: {day.isoformat()} 01:30:20 CST ({second:%Y-%m-%dT%H:%M:%SZ}) is " in error, error
    assert page.input_value("#form-blast select[name=ts_offset]") == "-06:00"  # the choice kept


def test_the_evidence_csv_and_the_period_picker_ask_which_reading_and_use_the_one_chosen(
    env: Env, context: BrowserContext
) -> None:
    """The evidence page's sound CSV form (a GET) shown again as typed with the choice, the
    download then over the window from the second reading; the day view's period picker refused
    with a link for each reading, the period shown from the one followed."""
    day = last_fall_back()
    second = datetime(day.year, day.month, day.day, 1, 30, fold=1, tzinfo=TZ).astimezone(UTC)
    page = login(context, env, "town")
    page.goto(f"{env.url}/sites/{SITE}/evidence")
    page.fill("#form-csv input[name=from]", f"{day.isoformat()}T01:30")
    page.fill("#form-csv input[name=to]", f"{day.isoformat()}T03:00")
    with page.expect_navigation():
        page.click("#form-csv button[type=submit]")
    assert page.inner_text("#evidence-error").startswith("from: 01:30 happened twice that night")
    assert page.input_value("#form-csv input[name=from]") == f"{day.isoformat()}T01:30"
    assert page.input_value("#form-csv input[name=to]") == f"{day.isoformat()}T03:00"
    assert page.locator("#form-bundle select[name=from_offset]").count() == 0
    page.select_option("#form-csv select[name=from_offset]", "-06:00")
    with page.expect_download():
        page.click("#form-csv button[type=submit]")
    asked = json.loads(
        sqlite3.connect(env.store)
        .execute("SELECT data FROM portal_actions WHERE action = 'sound_csv_downloaded' ORDER BY id DESC")
        .fetchone()[0]
    )
    assert asked["from"] == second.strftime("%Y-%m-%dT%H:%M:%SZ"), asked

    response = page.goto(
        f"{env.url}/sites/{SITE}/day?from={day.isoformat()}T01:30&to={day.isoformat()}T03:00"
    )
    assert response is not None and response.status == 400
    assert "01:30 happened twice that night" in page.inner_text("main")
    links = page.locator("#twice-choices a")
    assert links.all_inner_texts() == ["from 01:30 CDT, the first", "from 01:30 CST, the second"]
    with page.expect_navigation():
        links.nth(1).click()
    assert page.locator("#period-span").count() == 1, page.inner_text("main")
    span = page.inner_text("#period-span")
    assert "01:30" in span and "CST" in span, span
    # The period form holds the reading shown, and showing it again keeps it.
    assert page.input_value("#period-form select[name=from_offset]") == "-06:00"
    assert page.locator("#period-form select[name=to_offset]").count() == 0
    with page.expect_navigation():
        page.click("#period-form button[type=submit]")
    assert page.inner_text("#period-span") == span
    # A link to a period that ends in the repeated hour names the reading of that end.
    page.goto(
        f"{env.url}/sites/{SITE}/day?from={day.isoformat()}T00:00&to={day.isoformat()}T01:00&to_offset=-06:00"
    )
    assert page.locator("#period-span").count() == 1, page.inner_text("main")
    later = page.get_attribute("#period-next", "href")
    assert later == f"?from={day.isoformat()}T01:00&to={day.isoformat()}T03:00&from_offset=-06:00", later
    with page.expect_navigation():
        page.click("#period-next")
    assert "01:00 CST" in page.inner_text("#period-span"), page.inner_text("#period-span")
