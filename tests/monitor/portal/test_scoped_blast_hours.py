"""The blasting-hours verdict (6.F) for an inspector whose time scope holds the blast's hour only.

The verdict judges the blast by its own time and names the blast's day, the allowed hours
("10:00-15:00") and that day's sunset, times its rule and the sun set for the day, not times it
reports; read as reported, they kept the verdict from every reader whose scope did not hold the
blast's whole day, though the blast was inside it. It is shown when the blast is (its record's
times and texts, through the blast's ref, REF_EVENT_KINDS): on the day page, the day's JSON, the
findings API, the blast report and the bundle; nothing else is shown with it (the notice verdict
naming a notice given the day before, a verdict on a blast whose record names a time outside the
scope). Real rules, real store, real `minewatch serve`, real export and verify.
"""

from __future__ import annotations

import html
import json
import zipfile
from datetime import datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from zoneinfo import ZoneInfo

import pytest

from monitor.config import load_config
from monitor.evidence import verify_bundle
from monitor.evidence.disclosure import TimeScope
from monitor.journal import queries
from monitor.journal.store import Store
from monitor.portal.data import Portal, Scope, User
from monitor.wire.codec import payload_of
from rules import blast_notice, blast_window
from rules.model import Blast, BlastNotice, Finding, FindingKind, SiteData
from rules.profile import load_profile
from tests.support.evidence import SITE, add_seismograph_event, build_site
from tests.support.paths import REPO
from tests.support.portal_server import Client, portal_serving, scoped_inspector_config

CHICAGO = ZoneInfo("America/Chicago")
DAY = "2024-03-12"
TOKEN = "inspector-token-for-the-blast-hours-test-0123"


# Another town's profile, whose blasting-hours standard (rule blast_window) is "blasting_hours".
OTHERTON = str(REPO / "tests" / "rules" / "profiles" / "otherton.toml")


def _judged(
    tmp_path: Path, fired: datetime, reason: str | None, profile_name: str = "dovre"
) -> tuple[Path, Finding, Finding]:
    """A site on ``profile_name`` whose blast at ``fired`` was noticed the day before, its
    seismograph record, the daemon's two verdicts on it (blasting hours, notice) by the real
    rules, and an anchor after the blast's hour; returns the configuration and the two findings."""
    site = build_site(tmp_path, profile=profile_name)
    blast = Blast(SITE, "B-HOURS", fired, safety_reason=reason)
    notice = BlastNotice(SITE, "B-HOURS", fired - timedelta(days=1), fired, ("Nora Neighbour",))
    config = site.config.site(SITE)
    assert config is not None
    profile = load_profile(config.profile)
    data = SiteData.grouped({}, blasts=(blast,), blast_notices=(notice,))
    span = (fired - timedelta(hours=1), fired + timedelta(hours=1), fired + timedelta(minutes=1))
    [hours] = [s for s in profile.standards.values() if s.rule == "blast_window"]
    told = profile.standards["blast_notice"]
    [window] = blast_window.evaluate(config.context(), hours, hours.params, data, *span)
    [noticed] = blast_notice.evaluate(config.context(), told, told.params, data, *span)
    store = Store(site.config.storage.path)
    with store.batch():
        store.append_event(notice, payload_of(notice), notice.issued_ts)
        store.append_event(blast, payload_of(blast), fired + timedelta(seconds=1))
        add_seismograph_event(store, fired, fired + timedelta(seconds=5))
        store.append_finding(window, fired + timedelta(seconds=30))
        store.append_finding(noticed, fired + timedelta(seconds=30))
    seq, head = queries.chain_head(store.conn, SITE)
    with store.batch():
        store.record_anchor(SITE, seq, head, fired + timedelta(hours=1))
    store.close()
    return site.config_path, window, noticed


def _hour(fired: datetime) -> tuple[datetime, datetime]:
    start = fired.replace(minute=0, second=0)
    return start, start + timedelta(hours=1) - timedelta(seconds=1)


@pytest.mark.parametrize(
    ("fired", "reason", "kind", "profile_name"),
    [
        (datetime(2024, 3, 12, 16, 5, tzinfo=CHICAGO), "wind gusts", FindingKind.SAFETY_EXCEPTION, "dovre"),
        (datetime(2024, 3, 12, 8, 20, tzinfo=CHICAGO), None, FindingKind.VIOLATION, "dovre"),
        # The rule says its verdict is on one blast, whatever a profile names its standard.
        (datetime(2024, 3, 12, 17, 30, tzinfo=CHICAGO), None, FindingKind.VIOLATION, OTHERTON),
    ],
    ids=["after-hours-before-sunset", "before-the-hours", "another-towns-standard-name"],
)
def test_the_blasting_hours_verdict_is_shown_to_a_scope_of_the_blasts_hour(
    tmp_path: Path, fired: datetime, reason: str | None, kind: FindingKind, profile_name: str
) -> None:
    config_path, window, noticed = _judged(tmp_path, fired, reason, profile_name)
    assert window.kind is kind and DAY in window.summary  # it names the blast's day
    not_before, not_after = _hour(fired)
    secret = "blast-hours-secret"
    config_for = scoped_inspector_config(config_path, SITE, TOKEN, not_before, not_after, secret)

    bearer = {"Authorization": f"Bearer {TOKEN}"}
    with portal_serving(config_for, tmp_path / "portal.log") as (port, _):
        browser = Client(SimpleNamespace(port=port))  # type: ignore[arg-type]
        assert browser.login("ida").status == 303
        page = html.unescape(browser.get(f"/sites/{SITE}/day?date={DAY}").body)
        report = html.unescape(browser.get(f"/sites/{SITE}/blasts/B-HOURS/report.html").body)
        api = Client(SimpleNamespace(port=port))  # type: ignore[arg-type]
        day = json.loads(api.get(f"/api/v1/sites/{SITE}/day?date={DAY}", headers=bearer).body)
        listed = json.loads(api.get(f"/api/v1/sites/{SITE}/findings?date={DAY}", headers=bearer).body)
    assert window.summary in page and window.summary in report
    assert window.summary in [f["summary"] for f in day["findings"]]
    assert window.summary in [f["summary"] for f in listed]
    # Nothing else comes with it: the notice's verdict names the notice given the day before.
    for shown in (page, report, json.dumps(day), json.dumps(listed)):
        assert noticed.summary not in shown and "Nora" not in shown

    portal = Portal(load_config(config_path), clock=lambda: fired + timedelta(days=2))
    scoped = Scope(User("ida", "inspector", (), not_before, not_after), portal.config)
    bundle = tmp_path / "scoped.zip"
    portal.export(scoped, SITE, not_before, not_after, bundle)
    with zipfile.ZipFile(bundle) as zf:
        carried = [json.loads(r["row"]["data"]) for r in json.loads(zf.read("records/findings.json"))]
    assert [f["summary"] for f in carried] == [window.summary]
    checked = verify_bundle(bundle)
    assert checked.ok, checked.problems


def test_a_verdict_on_a_blast_whose_record_names_a_time_outside_the_scope_stays_out(tmp_path: Path) -> None:
    """The verdict quotes the blast's safety reason; one naming 12:30 tells of the day outside a
    scope of 16:00-17:00, and the blast record itself is not shown, so neither is its verdict.
    With a reason naming no time, the same verdict on the same blast is shown."""
    fired = datetime(2024, 3, 12, 16, 5, tzinfo=CHICAGO)
    scope = TimeScope.of(*_hour(fired), load_profile("dovre").event_verdicts())
    assert scope is not None
    for n, (reason, shown) in enumerate((("gusts since the 12:30 forecast", False), ("wind gusts", True))):
        folder = tmp_path / str(n)
        folder.mkdir()
        config_path, window, _ = _judged(folder, fired, reason)
        assert reason in window.summary
        store = Store(load_config(config_path).storage.path)
        row = store.conn.execute("SELECT * FROM findings WHERE id = ?", (window.id,)).fetchone()
        [blast] = queries.event_rows(store.conn, SITE, "blast", "B-HOURS")
        assert scope.shows(store.conn, SITE, "event", blast, CHICAGO) is shown
        assert scope.shows(store.conn, SITE, "finding", row, CHICAGO) is shown
        store.close()
