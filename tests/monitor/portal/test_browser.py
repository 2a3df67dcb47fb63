"""The portal in a real browser (Debian's chromium through Playwright) against a real daemon,
broker and store (tests/monitor/portal/conftest.py starts them)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import zipfile
from datetime import UTC, datetime, time, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from playwright.sync_api import BrowserContext

from monitor.evidence.disclosure import TimeScope
from monitor.wire.canonical import to_us
from tests.monitor.portal.conftest import DAY, OTHER, SITE, TOKENS, TZ, Env, local, login


def status_of(context: BrowserContext, url: str, token: str | None = None) -> int:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return context.request.get(url, headers=headers, max_redirects=0).status


def test_each_role_sees_what_it_may(env: Env, context: BrowserContext) -> None:
    page = login(context, env, "op")
    assert page.url == f"{env.url}/"
    nav = page.inner_text("header nav")
    assert "Status" in nav and "Record events" in nav and "Alerts" in nav
    assert "Notices" in nav  # the notices addressed to it (test_operator_notices.py)
    assert "Day view" not in nav and "Evidence" not in nav
    assert "Other quarry" not in page.content()
    page.goto(f"{env.url}/sites/{SITE}/status")
    rows = page.locator("#sensors tbody tr")
    assert rows.count() == 5
    assert page.locator("tr[data-sensor=n2]").inner_text().startswith("n2")
    page.screenshot(path=str(env.artifacts / "operator-status.png"), full_page=True)
    page.goto(f"{env.url}/sites/{SITE}/events")
    page.screenshot(path=str(env.artifacts / "operator-events.png"), full_page=True)
    assert status_of(context, f"{env.url}/sites/{SITE}/notices") == 200
    assert status_of(context, f"{env.url}/notices/{env.notice_id}") == 200
    assert status_of(context, f"{env.url}/sites/{SITE}/day") == 403
    assert status_of(context, f"{env.url}/sites/{SITE}/evidence") == 403
    context.clear_cookies()

    page = login(context, env, "town")
    nav = page.inner_text("header nav")
    assert "Notices" in nav and "Alerts" in nav and "Day view" in nav
    assert "Record events" not in nav and "Status" not in nav
    page.goto(f"{env.url}/sites/{SITE}/notices")
    assert env.notice_id in page.inner_text("#notices")
    page.screenshot(path=str(env.artifacts / "town-notices.png"), full_page=True)
    page.goto(f"{env.url}/sites/{SITE}/evidence")
    assert page.locator("#form-bundle").count() == 1
    assert page.locator("#evidence-scope").count() == 0  # an account without a time scope
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
    # not_before is the UTC midnight starting DAY - 1: the local day before that still reaches
    # past it by the zone's offset (shown from not_before on), the one before that does not.
    early = DAY - timedelta(days=3)
    assert status_of(context, f"{env.url}/sites/{SITE}/day?date={early.isoformat()}") == 404
    assert status_of(context, f"{env.url}/sites/{SITE}/day?date={DAY - timedelta(days=1)}") == 200
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


def test_day_view_plots_levels_against_the_limit_with_blast_window_and_sunset(
    env: Env, context: BrowserContext
) -> None:
    page = login(context, env, "insp")
    page.goto(f"{env.url}/sites/{SITE}/day?date={DAY.isoformat()}")
    svg = page.locator("svg.dayplot")
    # One panel per boundary sound sensor (n1, n2) and one per light sensor (l1).
    assert page.locator("svg.dayplot .limit").count() == 2
    assert page.locator("svg.dayplot .limit").first.get_attribute("data-limit-db") == "80"
    window = page.locator("svg.dayplot .blast-window").first
    assert window.get_attribute("data-start") == local(10).isoformat().replace("+00:00", "Z")
    assert window.get_attribute("data-end") == local(15).isoformat().replace("+00:00", "Z")
    assert page.locator("svg.dayplot .sunset").count() == 3
    blasts = page.locator("svg.dayplot line.blast")
    assert blasts.count() >= 3  # the blast at 11:00:30 on every panel
    assert blasts.first.get_attribute("data-ts") == local(11, 0, 30).isoformat().replace("+00:00", "Z")
    assert page.locator("svg.dayplot polyline.level").count() >= 2
    assert page.locator("svg.dayplot .light-limit").count() >= 1
    assert page.locator("#day-findings li.kind-violation").count() >= 1
    assert "6.D" in page.inner_text("#day-findings li.kind-violation >> nth=0")
    shot = env.artifacts / "day-view.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000
    assert svg.bounding_box() is not None


def test_a_notice_extended_in_the_browser_is_in_its_history_pdf_and_the_chain(
    env: Env, context: BrowserContext, tmp_path: Path
) -> None:
    page = login(context, env, "town")
    page.goto(f"{env.url}/notices/{env.notice_id}")
    before = page.inner_text("#notice-deadline")
    page.fill("#form-extend input[name=days]", "5")
    page.fill("#form-extend textarea[name=reason]", "Operator is replacing the crusher enclosure")
    page.click("#form-extend button[type=submit]")
    page.wait_for_selector("#notice-done")
    assert page.inner_text("#notice-status") == "extended"
    assert page.inner_text("#notice-deadline") != before
    page.screenshot(path=str(env.artifacts / "town-notice.png"), full_page=True)
    last = page.locator("#history tbody tr").last.inner_text()
    assert "extended" in last and "town" in last and "crusher enclosure" in last
    # The PDF (fetched with the browser's session) carries the change.
    pdf = context.request.get(f"{env.url}/notices/{env.notice_id}/document.pdf")
    assert pdf.status == 200 and pdf.headers["content-type"] == "application/pdf"
    (tmp_path / "notice.pdf").write_bytes(pdf.body())
    text = subprocess.run(
        ["pdftotext", "-layout", str(tmp_path / "notice.pdf"), "-"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "crusher enclosure" in text and "town" in text
    html = context.request.get(f"{env.url}/notices/{env.notice_id}/document.html").text()
    assert "crusher enclosure" in html
    # The chain: the NoticeBook's change and the portal's own record of who did it, from where.
    assert (
        env.count("SELECT COUNT(*) FROM chain WHERE kind = 'notice_change' AND key = ?", f"{env.notice_id}|2")
        == 1
    )
    import sqlite3

    conn = sqlite3.connect(env.store)
    conn.row_factory = sqlite3.Row
    action = conn.execute(
        "SELECT p.*, c.seq FROM portal_actions p JOIN chain c ON c.kind = 'portal_action'"
        " AND c.key = CAST(p.id AS TEXT) WHERE p.action = 'notice_extend'"
    ).fetchone()
    conn.close()
    assert action["actor"] == "town" and action["role"] == "town" and action["target"] == env.notice_id
    assert action["source"] == "127.0.0.1" and action["seq"] > 0
    assert json.loads(action["data"])["extra_days"] == 5


def _findings_about(env: Env, text: str) -> list[tuple[str, str, str, str]]:
    import sqlite3

    conn = sqlite3.connect(env.store)
    rows = conn.execute("SELECT standard, section, kind, data FROM findings WHERE retracted = 0").fetchall()
    conn.close()
    out = []
    for standard, section, kind, data in rows:
        summary = json.loads(data)["summary"]
        if text in summary:
            # the same words but the id and the minute
            out.append((standard, section, kind, re.sub(r"16:4[01](:00)?", "T", summary.replace(text, "ID"))))
    return sorted(set(out))


def test_an_event_recorded_through_the_form_is_judged_like_the_same_event_over_mqtt(
    env: Env, context: BrowserContext
) -> None:
    page = login(context, env, "op")
    page.goto(f"{env.url}/sites/{SITE}/events")
    # A late blast (16:40, after the 10:00-15:00 window and after sunset), once from the form...
    page.fill("#form-blast input[name=blast_id]", "FORM-1640")
    page.fill("#form-blast input[name=ts]", f"{DAY.isoformat()}T16:40:00")
    page.click("#form-blast button[type=submit]")
    page.wait_for_selector("#event-done")
    # ...and the same kind of blast a minute later over MQTT (two blasts in one minute are judged
    # as one finding of that minute, so each gets a minute of its own).
    from monitor.wire.protocol import format_ts

    env.pub.publish(
        f"minewatch/{SITE}/events/blast", {"blast_id": "MQTT-1641", "ts": format_ts(local(16, 41))}
    )
    # A mistake in the form is refused by the codec with the field named, and nothing is sent.
    page.fill("#form-blast input[name=blast_id]", "FORM-BAD")
    page.fill("#form-blast input[name=ts]", f"{DAY.isoformat()}T16:42:00")
    page.fill("#form-blast input[name=charge_kg]", "-4")
    page.click("#form-blast button[type=submit]")
    error = page.inner_text("#event-error")
    assert "charge_kg" in error
    # A time typed in site time is said back in site time (UTC beside), not only in UTC.
    page.fill("#form-blast input[name=charge_kg]", "")
    page.fill("#form-blast input[name=blast_id]", "FORM-FUTURE")
    page.fill("#form-blast input[name=ts]", "2099-06-15T16:42:00")
    with page.expect_navigation():
        page.click("#form-blast button[type=submit]")
    error = page.inner_text("#event-error")
    assert "2099-06-15 16:42:00 CDT (2099-06-15T21:42:00Z)" in error and "in the future" in error, error
    # Data after the blasts moves the data clock past them, so their minutes close.
    from tests.monitor.portal.conftest import publish_minutes

    publish_minutes(env.pub, "n1", local(16, 45), 2, 55.0)
    publish_minutes(env.pub, "n2", local(16, 45), 2, 55.0)
    from tests.support.daemon import wait_until

    assert wait_until(lambda: len(_findings_about(env, "MQTT-1641")) >= 1, 60), env.daemon.logs()
    assert wait_until(lambda: _findings_about(env, "FORM-1640") == _findings_about(env, "MQTT-1641"), 30)
    kinds = {(standard, section, kind) for standard, section, kind, _ in _findings_about(env, "FORM-1640")}
    assert any(kind == "violation" for _, _, kind in kinds), kinds
    # Journaled by the daemon like any event (same content columns), and recorded as the operator's action.
    assert env.count("SELECT COUNT(*) FROM events WHERE kind = 'blast' AND id = 'FORM-1640'") == 1
    assert env.count("SELECT COUNT(*) FROM events WHERE id = 'FORM-BAD'") == 0
    assert (
        env.count(
            "SELECT COUNT(*) FROM portal_actions WHERE action = 'event_recorded'"
            " AND target = 'blast|FORM-1640' AND actor = 'op'"
        )
        == 1
    )
    assert env.count("SELECT COUNT(*) FROM chain WHERE kind = 'event' AND key = 'blast|FORM-1640'") == 1
    # A declared work period from its form: journaled, and shaded as exempt on the day view.
    page.fill("#form-work input[name=start]", f"{DAY.isoformat()}T13:00")
    page.fill("#form-work input[name=end]", f"{DAY.isoformat()}T14:30")
    page.select_option("#form-work select[name=work_kind]", "construction")
    page.select_option("#form-work select[name=sensors]", ["n1"])
    page.click("#form-work button[type=submit]")
    page.wait_for_selector("#event-done")
    assert wait_until(lambda: env.count("SELECT COUNT(*) FROM events WHERE kind = 'work'") == 1, 30)
    assert page.url == f"{env.url}/sites/{SITE}/events"  # redirected: a reload records nothing again
    page.reload()
    assert page.locator("#event-done").count() == 0
    assert env.count("SELECT COUNT(*) FROM portal_actions WHERE target LIKE 'work|%'") == 1
    actions = context.request.get(
        f"{env.url}/api/v1/sites/{SITE}/actions", headers={"Authorization": f"Bearer {TOKENS['op']}"}
    ).json()
    recorded = next(a for a in actions if a["target"] == "blast|FORM-1640")
    assert recorded["actor"] == "op" and recorded["action"] == "event_recorded" and recorded["chain_seq"] > 0
    day = context.request.get(
        f"{env.url}/api/v1/sites/{SITE}/day?date={DAY}", headers={"Authorization": f"Bearer {TOKENS['insp']}"}
    ).json()
    assert {
        "start": local(13).isoformat().replace("+00:00", "Z"),
        "end": local(14, 30).isoformat().replace("+00:00", "Z"),
        "why": "work: construction",
        "sensors": ["n1"],
    } in day["exempt"]
    inspector = context.browser.new_context() if context.browser else None
    assert inspector is not None
    view = login(inspector, env, "insp")
    view.goto(f"{env.url}/sites/{SITE}/day?date={DAY.isoformat()}")
    assert view.locator("svg.dayplot rect.exempt").count() == 1  # on n1's panel, the one it names
    assert view.locator("svg.dayplot line.blast").count() == 9  # three blasts, three panels
    view.screenshot(path=str(env.artifacts / "day-view-after-events.png"), full_page=True)
    inspector.close()


def test_a_bundle_downloaded_in_the_browser_verifies_and_an_altered_one_shows_its_first_problem(
    env: Env, context: BrowserContext, tmp_path: Path
) -> None:
    page = login(context, env, "insp")
    # A window the wrong way round, and a time that is not one: the form again, saying why.
    page.goto(f"{env.url}/sites/{SITE}/evidence")
    # The account's time scope (not_before: DAY - 1, the site's local day), in site time, and
    # what a bundle carries of it.
    scoped = page.inner_text("#evidence-scope")
    start = datetime.combine(DAY - timedelta(days=1), time(), tzinfo=TZ)
    assert scoped.startswith(f"This account's time scope: from {start:%Y-%m-%d %H:%M:%S %Z} on. ")
    # The rule in the words the bundle's manifest states it (TimeScope.manifest).
    assert TimeScope(to_us(start), None).manifest()["rule"] in scoped
    assert "cure deadline" in scoped and "digests alone" in scoped
    page.fill("#form-bundle input[name=from]", f"{DAY.isoformat()}T18:00")
    page.fill("#form-bundle input[name=to]", f"{DAY.isoformat()}T08:00")
    with page.expect_response(f"{env.url}/sites/{SITE}/evidence/bundle") as backwards:
        page.click("#form-bundle button[type=submit]")
    assert backwards.value.status == 400
    assert page.inner_text("#evidence-error") == "to: must be after from"
    assert page.locator("#form-bundle").count() == 1
    bundle_url = f"{env.url}/sites/{SITE}/evidence/bundle"
    window = {"from": "yesterday", "to": f"{DAY.isoformat()}T08:00", "csrf": _csrf(page)}
    garbled = context.request.post(bundle_url, form=window, max_redirects=0)
    assert garbled.status == 400
    assert "from" in garbled.text() and "yesterday" in garbled.text()
    # Preparing a bundle is a POST with the form's token; the old link starts nothing.
    old_link = f"{bundle_url}?from={DAY.isoformat()}T08:00&to={DAY.isoformat()}T18:00"
    assert context.request.get(old_link, max_redirects=0).status == 405
    page.goto(f"{env.url}/sites/{SITE}/evidence")
    page.fill("#form-bundle input[name=from]", f"{DAY.isoformat()}T08:00")
    page.fill("#form-bundle input[name=to]", f"{DAY.isoformat()}T18:00")
    with page.expect_download(timeout=120_000) as info:
        page.click("#form-bundle button[type=submit]")
    bundle = tmp_path / "bundle.zip"
    info.value.save_as(bundle)
    # The bundle was prepared as a job (a progress page that reloads itself), then streamed once.
    job = page.url
    assert re.fullmatch(rf"{env.url}/sites/{SITE}/evidence/jobs/[\w-]+", job), job
    assert "Ready" in page.inner_text("#job-done")
    assert context.request.get(f"{job}/{info.value.suggested_filename}").status == 404  # taken
    other = context.browser.new_context() if context.browser else None
    assert other is not None
    town = login(other, env, "town")
    assert town.request.get(job).status == 404  # another account's job is not there
    other.close()
    run = subprocess.run(
        [sys.executable, "-m", "monitor.cli", "verify", str(bundle)], capture_output=True, text=True
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert (
        env.count("SELECT COUNT(*) FROM portal_actions WHERE action = 'bundle_downloaded' AND actor = 'insp'")
        == 1
    )
    # Alter one sound level in the bundle and upload it.
    altered = tmp_path / "altered.zip"
    with zipfile.ZipFile(bundle) as src, zipfile.ZipFile(altered, "w", zipfile.ZIP_DEFLATED) as dst:
        for item in src.infolist():
            data = src.read(item.filename)
            # The first part of the sound rows (format 3; data/sound.csv before it).
            if item.filename in ("data/sound.csv", "data/sound/part-00001.csv"):
                lines = data.decode().splitlines(keepends=True)
                lines[1] = (
                    lines[1].replace(",86.", ",76.", 1)
                    if ",86." in lines[1]
                    else lines[1].replace(",5", ",4", 1)
                )
                data = "".join(lines).encode()
            dst.writestr(item, data)
    cli = subprocess.run(
        [sys.executable, "-m", "monitor.cli", "verify", str(altered)], capture_output=True, text=True
    )
    assert cli.returncode == 1
    from monitor.evidence import verify_bundle

    first = verify_bundle(altered).first_problem
    assert first is not None
    page.goto(f"{env.url}/sites/{SITE}/evidence")
    page.set_input_files("#form-verify input[name=bundle]", str(altered))
    page.click("#form-verify button[type=submit]")
    page.wait_for_selector("#verify-report")
    # The page says what `minewatch verify` says, the bundle named as uploaded.
    assert page.inner_text("#verify-verdict") == cli.stdout.splitlines()[0].replace(
        str(altered), "altered.zip"
    )
    assert page.inner_text("#verify-verdict").startswith("altered.zip: FAILED: ")
    page.screenshot(path=str(env.artifacts / "inspector-verify.png"), full_page=True)
    assert first.message in page.inner_text("#verify-problems li >> nth=0")  # the most severe first
    page.set_input_files("#form-verify input[name=bundle]", str(bundle))
    page.click("#form-verify button[type=submit]")
    page.wait_for_selector("#verify-report")
    # Without anchors: internal consistency only, in the command's words (not "Verified").
    verdict = page.inner_text("#verify-verdict")
    assert verdict == run.stdout.splitlines()[0].replace(str(bundle), "bundle.zip")
    assert verdict.startswith(
        "bundle.zip: internal consistency only: no problem found, but without the heads"
    )
    assert page.get_attribute("#verify-verdict", "class") == "warning"

    # With the Town's anchors: the heads this installation published (its record of them), and
    # the same heads uploaded as the Town's file; each says what `verify --anchors` says.
    import sqlite3

    from monitor.journal import queries

    conn = sqlite3.connect(env.store)
    try:
        published = queries.anchors(conn, SITE)
    finally:
        conn.close()
    assert published
    anchors = tmp_path / "town-anchors.json"
    anchors.write_text(
        json.dumps(
            [{"site": a.site, "seq": a.seq, "head": a.head, "ts": a.published.isoformat()} for a in published]
        )
    )
    anchored = subprocess.run(
        [sys.executable, "-m", "monitor.cli", "verify", str(bundle), "--anchors", str(anchors)],
        capture_output=True,
        text=True,
    )
    assert anchored.returncode == 0, anchored.stdout + anchored.stderr
    said = [line.replace(str(bundle), "bundle.zip") for line in anchored.stdout.splitlines()]
    assert said[0].startswith(("bundle.zip: OK, anchored", "bundle.zip: OK up to seq")), said
    for against in ("published", "file"):
        page.goto(f"{env.url}/sites/{SITE}/evidence")
        page.set_input_files("#form-verify input[name=bundle]", str(bundle))
        page.check(f"#form-verify input[name=against][value={against}]")
        if against == "file":
            page.set_input_files("#form-verify input[name=anchors]", str(anchors))
        page.click("#form-verify button[type=submit]")
        page.wait_for_selector("#verify-report")
        assert page.inner_text("#verify-verdict") == said[0], against
        shown = page.locator("#verify-lines")
        assert (shown.inner_text().splitlines() if shown.count() else []) == said[1:]
        assert "Held against: " + (
            "the chain heads this installation published"
            if against == "published"
            else "the anchors file given"
        ) in page.inner_text("#verify-against")
    page.screenshot(path=str(env.artifacts / "inspector-verify-anchored.png"), full_page=True)
    # The Town's file chosen but not given, or not anchors: refused in the form's words.
    page.goto(f"{env.url}/sites/{SITE}/evidence")
    page.set_input_files("#form-verify input[name=bundle]", str(bundle))
    page.check("#form-verify input[name=against][value=file]")
    page.click("#form-verify button[type=submit]")
    assert page.inner_text("#evidence-error") == (
        "anchors: choose the Town's anchors file (JSON), or verify against another"
    )
    # A choice the form does not offer (a hand-made request) is refused, not taken for "none".
    page.goto(f"{env.url}/sites/{SITE}/evidence")
    page.set_input_files("#form-verify input[name=bundle]", str(bundle))
    page.eval_on_selector("#form-verify input[name=against][value=nothing]", "e => { e.value = 'bogus' }")
    page.click("#form-verify button[type=submit]")
    assert page.inner_text("#evidence-error") == "against: 'bogus' is not one of nothing, published, file"
    actions = env.count(
        "SELECT COUNT(*) FROM portal_actions WHERE action = 'bundle_verified'"
        " AND json_extract(data, '$.against') = 'published'"
    )
    assert actions == 1


def _csrf(page: object) -> str:
    from playwright.sync_api import Page

    assert isinstance(page, Page)
    value = page.locator("input[name=csrf]").first.get_attribute("value")
    assert value
    return value


def test_no_cookie_a_forged_cookie_a_missing_csrf_token_and_wrong_passwords_are_refused(
    env: Env, context: BrowserContext
) -> None:
    import base64

    from itsdangerous import TimestampSigner

    # No session cookie: pages send to the login, changes and the API are refused.
    page = context.new_page()
    page.goto(f"{env.url}/notices/{env.notice_id}")
    assert page.url == f"{env.url}/login"
    no_cookie = context.request.post(
        f"{env.url}/notices/{env.notice_id}/close", form={"reason": "x", "csrf": "x"}, max_redirects=0
    )
    assert no_cookie.status == 401
    assert context.request.get(f"{env.url}/api/v1/sites", max_redirects=0).status == 401
    assert status_of(context, f"{env.url}/api/v1/sites/{SITE}/status", "mw_not_a_token") == 401
    # A cookie signed with another key, claiming to be the Town.
    body = base64.b64encode(json.dumps({"user": "town", "csrf": "forged"}).encode())
    forged = TimestampSigner("not-the-portal-key").sign(body).decode()
    context.add_cookies([{"name": "minewatch_session", "value": forged, "url": env.url}])
    page.goto(f"{env.url}/notices/{env.notice_id}")
    assert page.url == f"{env.url}/login"
    post = context.request.post(
        f"{env.url}/notices/{env.notice_id}/close",
        form={"reason": "forged", "csrf": "forged"},
        max_redirects=0,
    )
    assert post.status == 401
    context.clear_cookies()
    # Logged in, but the change comes without the CSRF token (or with another one).
    page = login(context, env, "town")
    changes = env.count("SELECT COUNT(*) FROM notice_changes")
    for form in ({"reason": "no token"}, {"reason": "wrong token", "csrf": "0" * 32}):
        refused = context.request.post(f"{env.url}/notices/{env.notice_id}/close", form=form, max_redirects=0)
        assert refused.status == 403 and "security token" in refused.text()
    page.goto(f"{env.url}/sites/{SITE}/notices")
    token = _csrf(page)
    refused = context.request.post(
        f"{env.url}/sites/{SITE}/events/blast", form={"blast_id": "X", "csrf": token}, max_redirects=0
    )
    assert refused.status == 403  # a Town account may not record events, token or not
    assert env.count("SELECT COUNT(*) FROM notice_changes") == changes
    assert "Set-Cookie" not in refused.headers
    cookie = next(c for c in context.cookies() if c["name"] == "minewatch_session")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert not cookie["secure"]  # plain HTTP here; Secure under TLS (the next test)
    context.clear_cookies()
    # Wrong passwords: refused, and after login_attempts (5) even the right one is, for a while.
    for _ in range(5):
        page = login(context, env, "ratelimited", "wrong-password")
        assert "Wrong name or password" in page.inner_text(".error")
    page = login(context, env, "ratelimited")
    assert "Too many failed logins" in page.inner_text(".error")
    assert page.url == f"{env.url}/login"
    # Another account from the same address still gets in.
    page = login(context, env, "insp")
    assert page.url == f"{env.url}/"


def test_portal_writes_under_the_daemons_full_ingest_lose_nothing(env: Env, context: BrowserContext) -> None:
    """Events (through the broker) and notice changes (small store transactions, busy timeout and
    retry) while the daemon ingests a stream as fast as the broker delivers it."""
    import threading

    from tests.monitor.portal.conftest import levels
    from tests.support.daemon import Client, wait_until

    loader = Client(env.broker.port, "portal-load")
    stop = threading.Event()
    sent = [0]

    def flood() -> None:
        start = local(12)
        while not stop.is_set() and sent[0] < 40_000:
            loader.publish(*levels("m1", start + timedelta(seconds=sent[0]), 60.0, site=OTHER))
            sent[0] += 1

    before_sound = env.count("SELECT COUNT(*) FROM sound WHERE site = ?", OTHER)
    changes_before = env.count("SELECT COUNT(*) FROM notice_changes WHERE notice_id = ?", env.notice_id)
    thread = threading.Thread(target=flood, daemon=True)
    thread.start()
    try:
        assert wait_until(
            lambda: env.count("SELECT COUNT(*) FROM sound WHERE site = ?", OTHER) > before_sound, 30
        )
        op = browser_session(context, env, "op", f"/sites/{SITE}/events")
        results = []
        for i in range(10):
            r = op.post(
                f"{env.url}/sites/{SITE}/events/truck",
                form={
                    "csrf": op.csrf,
                    "ts": f"{DAY.isoformat()}T16:5{i}:00",
                    "gate": "g1",
                    "direction": "in" if i % 2 else "out",
                    "truck_id": f"LOAD-{i}",
                },
            )
            assert r.status == 303, r.text()  # recorded, then back to the events page
            results.append(200)
        town = browser_session(context, env, "town", f"/notices/{env.notice_id}")
        for i in range(3):
            r = town.post(
                f"{env.url}/notices/{env.notice_id}/extend",
                form={"csrf": town.csrf, "days": "1", "reason": f"under load {i}"},
            )
            assert r.status == 303 and r.headers["location"] == f"/notices/{env.notice_id}", r.text()
            results.append(200)
        ingesting = env.count("SELECT COUNT(*) FROM sound WHERE site = ?", OTHER)
    finally:
        stop.set()
        thread.join(30)
    assert results == [200] * 13
    assert ingesting > before_sound  # the flood was being stored while the portal wrote
    assert wait_until(lambda: env.count("SELECT COUNT(*) FROM events WHERE kind = 'truck'") == 10, 60)
    truck_ids = {
        json.loads(row)["truck_id"] for row in _column(env, "SELECT data FROM events WHERE kind = 'truck'")
    }
    assert truck_ids == {f"LOAD-{i}" for i in range(10)}
    assert (
        env.count("SELECT COUNT(*) FROM notice_changes WHERE notice_id = ?", env.notice_id)
        == changes_before + 3
    )
    assert wait_until(
        lambda: env.count("SELECT COUNT(*) FROM sound WHERE site = ?", OTHER) >= before_sound + sent[0], 120
    )
    loader.close()


def _column(env: Env, sql: str) -> list[str]:
    import sqlite3

    conn = sqlite3.connect(env.store)
    try:
        return [r[0] for r in conn.execute(sql)]
    finally:
        conn.close()


class _Session:
    def __init__(self, context: BrowserContext, csrf: str) -> None:
        self.context = context
        self.csrf = csrf

    def post(self, url: str, form: dict[str, str]) -> Any:
        return self.context.request.post(url, form=form, max_redirects=0, timeout=120_000)


def browser_session(context: BrowserContext, env: Env, name: str, path: str) -> _Session:
    context.clear_cookies()
    page = login(context, env, name)
    page.goto(f"{env.url}{path}")
    return _Session(context, _csrf(page))


def test_alerts_feed_and_acknowledgement_and_the_api_document(env: Env, context: BrowserContext) -> None:
    page = login(context, env, "op")
    page.goto(f"{env.url}/sites/{SITE}/alerts")
    rows = page.locator("#alerts tbody tr")
    assert rows.count() >= 1
    first = rows.first.inner_text()
    rows.first.locator("button").click()
    page.wait_for_load_state()
    assert "op, 20" in page.locator("#alerts tbody tr").first.inner_text(), first
    assert (
        env.count("SELECT COUNT(*) FROM portal_actions WHERE action = 'alert_acknowledged' AND actor = 'op'")
        == 1
    )
    # Alerts for several audiences ("town,operator") are in each one's feed.
    assert "(6.D) violation at" in page.inner_text("#alerts")
    context.clear_cookies()
    page = login(context, env, "town")
    page.goto(f"{env.url}/sites/{SITE}/alerts")
    feed = page.inner_text("#alerts")
    # Chain anchors are told in one line above the list, not as rows that push violations out.
    assert "anchor" not in feed and "Evidence chain" not in feed
    # The list can be narrowed to one kind (the many extensions above would push them out).
    page.click("#alert-kinds a:text('violation')")
    page.wait_for_load_state()
    assert "(6.D) violation at" in page.inner_text("#alerts") and "kind=violation" in page.url
    assert "Evidence chain of quarry" in page.inner_text("#anchors")
    assert "has sent nothing since" not in feed  # the operator's own sensor alerts
    assert page.locator("#alerts button").count() == 0  # acknowledging is the operator's
    context.clear_cookies()
    auth = {"Authorization": f"Bearer {TOKENS['town']}"}
    doc = context.request.get(f"{env.url}/api/v1/openapi.json").json()
    assert doc["openapi"].startswith("3.") and "/sites/{site}/day" in doc["paths"]
    day_params = [p["name"] for p in doc["paths"]["/sites/{site}/day"]["get"]["parameters"]]
    assert day_params == ["site", "date", "from", "to"]
    notices = context.request.get(f"{env.url}/api/v1/sites/{SITE}/notices", headers=auth).json()
    assert env.notice_id in [n["id"] for n in notices]
    one = context.request.get(f"{env.url}/api/v1/notices/{env.notice_id}", headers=auth).json()
    assert one["history"][0]["change"] == "opened" and one["history"][0]["actor"] == "minewatch"
    assert len(one["history"]) == env.count(
        "SELECT COUNT(*) FROM notice_changes WHERE notice_id = ?", env.notice_id
    )
    assert context.request.get(f"{env.url}/api/v1/sites/{SITE}/status", headers=auth).status == 403
    day = context.request.get(f"{env.url}/api/v1/sites/{SITE}/day?date={DAY}", headers=auth).json()
    limits = {s["id"]: s["limit_db"] for s in day["sensors"] if s["kind"] == "sound"}
    assert limits == {"n1": 80, "n2": 80} and set(day["sound"]) == {"n1", "n2"}
    assert [d["blast_window"]["start"] for d in day["days"]] == [local(10).isoformat().replace("+00:00", "Z")]


def test_served_over_tls_the_session_cookie_is_secure(env: Env, browser: Any, tmp_path: Path) -> None:
    """`minewatch serve` with tls_cert/tls_key (a self-signed certificate made here)."""
    from tests.support.portal_server import on_port, portal_serving
    from tests.support.servers import self_signed_cert

    cert, key = self_signed_cert(tmp_path)
    config = tmp_path / "tls.toml"

    def config_for(port: int) -> Path:
        tls = f'tls_cert = "{cert}"\ntls_key = "{key}"\n'
        config.write_text(on_port(env.config.read_text(), port, "portal-tls", tls))
        return config

    with portal_serving(config_for, tmp_path / "portal.log") as (port, _):
        context = browser.new_context(ignore_https_errors=True)
        page = context.new_page()
        page.goto(f"https://127.0.0.1:{port}/login")
        page.fill("input[name=name]", "town")
        page.fill("input[name=password]", "town-secret-1")
        page.click("button[type=submit]")
        page.wait_for_load_state()
        assert page.url == f"https://127.0.0.1:{port}/"
        cookie = next(c for c in context.cookies() if c["name"] == "minewatch_session")
        assert cookie["secure"] and cookie["httpOnly"] and cookie["sameSite"] == "Strict"
        context.close()


def test_the_blast_notice_form_offers_identities_and_says_at_once_who_matches_no_one(
    env: Env, context: BrowserContext
) -> None:
    """Recipients as identities (issue 27): the Town's contacts and the adjoining owners are a
    checklist; a written-in name that matches none is said in the form's answer and raised as
    the operator's early warning while the blast is pending, not found later as a violation."""

    from tests.monitor.portal.conftest import publish_minutes
    from tests.support.daemon import wait_until

    page = login(context, env, "op")
    page.goto(f"{env.url}/sites/{SITE}/events")
    checklist = page.inner_text("#recipient-checklist")
    assert "Town of Dovre clerk" in checklist and "Hansen residence" in checklist
    planned = (datetime.now(TZ) + timedelta(days=2)).replace(hour=11, minute=0, second=0, microsecond=0)
    page.fill("#form-blast-notice input[name=blast_id]", "FORM-NOTICE-1")
    page.fill("#form-blast-notice input[name=planned]", planned.strftime("%Y-%m-%dT%H:%M"))
    page.check("#form-blast-notice input[name=recipient][value=town-clerk]")
    page.fill("#form-blast-notice textarea[name=recipients]", "Hanson residence")
    page.click("#form-blast-notice button[type=submit]")
    told = page.inner_text("#event-recipients")
    assert "'Hanson residence' matches no Town contact or adjoining owner" in told, told
    assert (
        "not gone to Hansen residence (p-1, parcel 012-0412-00);" in told and "gone to the Town" not in told
    )
    page.screenshot(path=str(env.artifacts / "operator-notice-recipients.png"), full_page=True)

    # Journaled by the daemon with the identities checked and the name as written.
    def journaled() -> bool:
        return (
            env.count(
                "SELECT COUNT(*) FROM events WHERE kind = 'blast-notice' AND id = 'FORM-NOTICE-1'"
                " AND data LIKE '%town-clerk%' AND data LIKE '%Hanson residence%'"
            )
            == 1
        )

    assert wait_until(journaled, 30), env.daemon.logs()[-3000:]
    # The daemon's early warning to the operator says the same (data after the newest moves the
    # data clock on; earlier tests may have sent data up to any time).
    import sqlite3

    conn = sqlite3.connect(env.store)
    newest = conn.execute("SELECT MAX(ts_us) FROM sound").fetchone()[0]
    conn.close()
    after = datetime.fromtimestamp(newest / 1e6 + 60, UTC).replace(second=0, microsecond=0)
    publish_minutes(env.pub, "n1", after, 1, 55.0)
    publish_minutes(env.pub, "n2", after, 1, 55.0)

    def warned() -> bool:
        return (
            env.count(
                "SELECT COUNT(*) FROM alerts WHERE kind = 'early_warning' AND message LIKE ?",
                "%FORM-NOTICE-1%'Hanson residence' matches no Town contact%",
            )
            >= 1
        )

    assert wait_until(warned, 60), env.daemon.logs()[-3000:]


def test_a_blasts_seismograph_report_is_linked_for_whoever_may_see_the_blast(
    env: Env, context: BrowserContext
) -> None:
    """The operator's status page, the Town's and the inspector's day view link the report of a
    blast a seismograph recorded (issue 27); another site's or an unknown blast is a 404."""
    from monitor.wire.codec import encode
    from monitor.wire.protocol import format_ts
    from sensors.seismograph import event_messages, site_law_event
    from tests.support.daemon import wait_until

    blast_at = local(12, 10)
    env.pub.publish(f"minewatch/{SITE}/events/blast", {"blast_id": "B-SG", "ts": format_ts(blast_at)})
    wave = site_law_event(600.0, 200.0, ppv_in_s=0.3, record_s=2.0, freqs=(12.0, 14.0, 24.0))
    for message in event_messages(wave, SITE, "sg1", "sg1-B-SG", blast_at, blast_id="B-SG"):
        env.pub.publish(*encode(message))
    assert wait_until(
        lambda: env.count("SELECT COUNT(*) FROM readings WHERE kind = 'seismic-waveforms'") == 1, 60
    ), env.daemon.logs()[-3000:]
    report = f"{env.url}/sites/{SITE}/blasts/B-SG/report"
    for name in ("op", "town", "insp"):
        page = login(context, env, name)
        if name == "op":
            page.goto(f"{env.url}/sites/{SITE}/status")
            link = page.locator("#blast-reports a", has_text="report").first
        else:
            page.goto(f"{env.url}/sites/{SITE}/day?date={DAY.isoformat()}")
            link = page.locator("a.blast-report")
        assert link.get_attribute("href") == f"/sites/{SITE}/blasts/B-SG/report.html", name
        html = context.request.get(f"{report}.html")
        assert html.status == 200 and "Blast report: B-SG" in html.text(), name
        pdf = context.request.get(f"{report}.pdf")
        assert pdf.status == 200 and pdf.body().startswith(b"%PDF"), name
        assert status_of(context, f"{env.url}/sites/{SITE}/blasts/NOPE/report.html") == 404
        assert status_of(context, f"{env.url}/sites/{OTHER}/blasts/B-SG/report.html") == 404
        context.clear_cookies()
    assert status_of(context, f"{report}.html") in (302, 303, 401)  # not logged in: no report

    # A blast id is the operator's text: one holding a slash, a space and a '#' is linked too.
    odd = "2026/06 #3"
    env.pub.publish(f"minewatch/{SITE}/events/blast", {"blast_id": odd, "ts": format_ts(local(12, 20))})
    for message in event_messages(wave, SITE, "sg1", "sg1-odd", local(12, 20), blast_id=odd):
        env.pub.publish(*encode(message))
    assert wait_until(
        lambda: env.count("SELECT COUNT(*) FROM readings WHERE kind = 'seismic-waveforms'") == 2, 60
    ), env.daemon.logs()[-3000:]
    page = login(context, env, "town")
    page.goto(f"{env.url}/sites/{SITE}/day?date={DAY.isoformat()}")
    href = page.locator("a.blast-report", has_text="seismograph report").nth(1).get_attribute("href")
    assert href == f"/sites/{SITE}/blasts/2026/06%20%233/report.html"
    html = context.request.get(f"{env.url}{href}")
    assert html.status == 200 and "Blast report: 2026/06 #3" in html.text()
    context.clear_cookies()


def test_a_blast_notice_with_its_charge_and_distance_shows_the_scaled_distance(
    env: Env, context: BrowserContext
) -> None:
    """Scaled distance before the blast (issue 27): the form takes the charge per delay and the
    distance in the profile's units (Dovre: in/s, so lb and ft); the answer and the status page
    show the scaled distance, and say why no PPV is predicted while the site has too few
    recorded events with their blast's charge."""

    from tests.support.daemon import wait_until

    page = login(context, env, "op")
    page.goto(f"{env.url}/sites/{SITE}/events")
    planned = (datetime.now(TZ) + timedelta(days=2)).replace(hour=11, minute=30, second=0, microsecond=0)
    page.fill("#form-blast-notice input[name=blast_id]", "FORM-SD-1")
    page.fill("#form-blast-notice input[name=planned]", planned.strftime("%Y-%m-%dT%H:%M"))
    page.check("#form-blast-notice input[name=recipient][value=town-clerk]")
    page.fill("#form-blast-notice input[name=charge_per_delay_lb]", "100")
    page.fill("#form-blast-notice input[name=distance_ft]", "1500")
    page.click("#form-blast-notice button[type=submit]")
    told = page.inner_text("#event-forecast")
    assert "Blast FORM-SD-1: scaled distance 150.0 ft/lb^0.5" in told, told
    assert "no PPV predicted: the site law needs at least 3 recorded seismograph events" in told, told
    page.screenshot(path=str(env.artifacts / "operator-notice-scaled-distance.png"), full_page=True)
    # A bad number is one line naming the field.
    page.fill("#form-blast-notice input[name=blast_id]", "FORM-SD-2")
    page.fill("#form-blast-notice input[name=planned]", planned.strftime("%Y-%m-%dT%H:%M"))
    page.fill("#form-blast-notice input[name=charge_per_delay_lb]", "100")
    page.click("#form-blast-notice button[type=submit]")
    error = page.inner_text("#event-error")
    assert "distance_m: missing: a charge per delay and a distance go together" in error, error

    def journaled() -> bool:
        return (
            env.count("SELECT COUNT(*) FROM events WHERE id = 'FORM-SD-1' AND data LIKE '%distance_m%'") == 1
        )

    assert wait_until(journaled, 30), env.daemon.logs()[-3000:]
    page.goto(f"{env.url}/sites/{SITE}/status")
    listed = page.inner_text("#blast-forecasts")
    assert "Blast FORM-SD-1: scaled distance 150.0 ft/lb^0.5; no PPV predicted" in listed, listed


def test_the_town_records_serving_a_notice_in_the_browser(env: Env, context: BrowserContext) -> None:
    """13.3.A's days count from the Town's service of a notice, which minewatch's drawing it up is
    not: the Town's notice page records the day it was served and how, once; a day before the
    notice is refused in the form's words."""
    from monitor.journal.store import Store
    from monitor.notify.notices import NoticeBook

    store = Store(env.store)
    try:
        notice = NoticeBook(store).get(env.notice_id)
    finally:
        store.close()
    issued = notice.opened.astimezone(ZoneInfo(notice.timezone)).date()
    page = login(context, env, "town")
    page.goto(f"{env.url}/notices/{env.notice_id}")
    page.fill("#form-serve input[name=served_on]", (issued - timedelta(days=1)).isoformat())
    page.fill("#form-serve textarea[name=reason]", "by hand at the scale house")
    with page.expect_navigation():
        page.click("#form-serve button[type=submit]")
    assert "before that" in page.inner_text("#notice-error")
    page.fill("#form-serve input[name=served_on]", issued.isoformat())
    page.fill("#form-serve textarea[name=reason]", "by hand at the scale house")
    with page.expect_navigation():
        page.click("#form-serve button[type=submit]")
    done = page.inner_text("#notice-done")
    assert f"Notice {env.notice_id} was served on the Operator" in done and "by town" in done, done
    last = page.locator("#history tbody tr").last.inner_text()
    assert "served" in last and "scale house" in last
    assert page.locator("#form-serve").count() == 0  # once
    assert page.inner_text("#notice-served").endswith(" by town")  # as the document says it


def test_the_towns_notice_page_states_the_facts_and_offers_only_what_its_state_allows(
    env: Env, context: BrowserContext
) -> None:
    """The notice's facts as its document states them; refusals in the form's words; the forms a
    state allows and no others; the PDF saved under the notice's id (issue 25's one set of facts,
    issue 26's Town walk). Last in the module: it escalates the shared notice."""
    page = login(context, env, "town")
    page.goto(f"{env.url}/notices/{env.notice_id}")
    facts = page.inner_text("table.facts")
    assert "When (local time)" in facts and " CST" in facts and "Measured vs limit" in facts
    assert "(limit 80 dB(A))" in facts and "Highest window" in facts
    # Escalating before the cure deadline without saying why: told which field to fill in.
    page.fill("#form-escalate textarea[name=reason]", "Repeated violations")
    with page.expect_navigation():
        page.click("#form-escalate button[type=submit]")
    error = page.inner_text("#notice-error")
    assert "has not passed" in error and "'Before the cure deadline, because'" in error, error
    assert "--before-deadline" not in error
    page.fill("#form-escalate textarea[name=reason]", "Repeated violations")
    page.fill("#form-escalate input[name=before_deadline_reason]", "three complaints this week")
    with page.expect_navigation():
        page.click("#form-escalate button[type=submit]")
    page.wait_for_selector("#notice-done")
    assert "escalated" in page.inner_text("#notice-status")
    # An escalated notice can be closed as corrected, not extended or escalated again.
    assert page.locator("#form-close").count() == 1
    assert page.locator("#form-extend").count() == 0 and page.locator("#form-escalate").count() == 0
    pdf = context.request.get(f"{env.url}/notices/{env.notice_id.lower()}/document.pdf")
    assert pdf.headers["content-disposition"] == f'inline; filename="{env.notice_id}.pdf"'
