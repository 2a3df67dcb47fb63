"""A blast report for an inspector with a time scope: the notice and the blast record it names.

The report looked a blast's notice up 30 days back and its blast record up to 120 s from the
seismograph's, wherever they fell: an inspector scoped to the blast's minutes read when the notice
was given and to whom, and the id and time of a blast recorded after the scope. Each is shown only
when the scope shows its record (TimeScope.shows); a notice it does not show is still said to
have been given (the report must not read as a blast without notice), before the blast or only
after it (which gives no notice ahead of it), its time and recipients left out. Real store, real
portal.
"""

from __future__ import annotations

import html
import json
import zipfile
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from zoneinfo import ZoneInfo

import pytest

from monitor.journal.store import Store
from monitor.notify.blast_report import notice_not_shown
from monitor.portal.data import NotFound, Portal, Scope, User
from monitor.portal.periods import checked_period
from monitor.wire.codec import payload_of
from rules.model import Blast, BlastNotice, Finding, FindingKind, Measurement
from rules.profile import load_profile
from rules.times import local_stamp
from tests.support.evidence import SITE, T0, add_seismograph_event, build_site
from tests.support.paths import REPO
from tests.support.portal_server import Client, portal_serving, scoped_inspector_config

SCOPE_END = T0 + timedelta(seconds=180)
CHICAGO = ZoneInfo("America/Chicago")


def _portal(
    tmp_path: Path, blast: Blast, event_at: datetime, notice: BlastNotice | None
) -> tuple[Portal, Scope, Scope]:
    site = build_site(tmp_path)
    store = Store(site.config.storage.path)
    with store.batch():
        if notice is not None:
            store.append_event(notice, payload_of(notice), notice.issued_ts)
        store.append_event(blast, payload_of(blast), blast.ts + timedelta(seconds=1))
        add_seismograph_event(store, event_at, event_at + timedelta(seconds=5))
    store.close()
    portal = Portal(site.config, clock=lambda: T0 + timedelta(days=2))
    scoped = Scope(User("ida", "inspector", (), T0, SCOPE_END), site.config)
    town = Scope(User("bob", "town", ()), site.config)
    return portal, scoped, town


def test_a_notice_given_before_the_scope_is_said_to_be_given_without_its_time_or_recipients(
    tmp_path: Path,
) -> None:
    blast = Blast(SITE, "B-NOTICED", T0 + timedelta(seconds=60))
    notice = BlastNotice(SITE, "B-NOTICED", T0 - timedelta(days=1), blast.ts, ("Nora Neighbour",))
    portal, scoped, town = _portal(tmp_path, blast, T0 + timedelta(seconds=60), notice)
    assert b"Nora Neighbour" in portal.blast_report(town, SITE, "B-NOTICED", "html", None)
    page = portal.blast_report(scoped, SITE, "B-NOTICED", "html", None).decode()  # the PDF has its rows
    assert "B-NOTICED" in page and "Nora" not in page
    assert "a notice of this blast was given before it" in page
    assert "not shown" in page and "none judged yet" not in page
    # The day view says it under the blast in the same words; it had no word of it.
    [listed] = portal.period(scoped, SITE, checked_period(T0, SCOPE_END + timedelta(minutes=8), CHICAGO))[
        "blasts"
    ]
    assert (
        listed["notice"].startswith("a notice of this blast was given before it") and listed["notice"] in page
    )


def test_a_notice_given_after_the_blast_and_the_scope_is_said_to_be_given_after_it_and_too_late(
    tmp_path: Path,
) -> None:
    """The operator's notice recorded an hour after the scope's end, for a blast inside it: the
    report had no word of it, and read as a blast without notice."""
    blast = Blast(SITE, "B-LATE", T0 + timedelta(seconds=60))
    issued = SCOPE_END + timedelta(hours=1)
    notice = BlastNotice(SITE, "B-LATE", issued, blast.ts, ("Nora Neighbour",))
    portal, scoped, town = _portal(tmp_path, blast, T0 + timedelta(seconds=60), notice)
    assert b"Nora Neighbour" in portal.blast_report(town, SITE, "B-LATE", "html", None)
    page = portal.blast_report(scoped, SITE, "B-LATE", "html", None).decode()
    assert "B-LATE" in page and "Nora" not in page
    assert local_stamp(issued, "America/Chicago") not in page
    assert (
        "a notice of this blast was given after it, which does not give the 24 hours&#x27; notice"
        " required (section 6.F); when and to whom are not shown (outside your time scope)"
    ) in page
    assert "given before it" not in page and "none judged yet" not in page


def test_a_notice_given_between_the_blast_and_its_seismograph_record_is_after_it_on_both_surfaces(
    tmp_path: Path,
) -> None:
    """The report placed the notice against the seismograph's record (up to 120 s from the blast's),
    the day view against the blast record, as the rule does: a notice given 30 s after the blast
    and 30 s before the seismograph triggered was "given before it" in the report and "after it"
    on the day view. (Planned after the scope, the notice is not shown.)"""
    blast = Blast(SITE, "B-GAP", T0 + timedelta(seconds=60))
    issued = blast.ts + timedelta(seconds=30)
    notice = BlastNotice(SITE, "B-GAP", issued, SCOPE_END + timedelta(hours=1), ("Nora Neighbour",))
    portal, scoped, _ = _portal(tmp_path, blast, blast.ts + timedelta(seconds=60), notice)
    report = html.unescape(portal.blast_report(scoped, SITE, "B-GAP", "html", None).decode())
    [listed] = portal.period(scoped, SITE, checked_period(T0, SCOPE_END + timedelta(minutes=8), CHICAGO))[
        "blasts"
    ]
    assert listed["notice"].startswith("a notice of this blast was given after it,")
    assert listed["notice"] in report and "given before it" not in report


@pytest.mark.parametrize(
    "issued",
    [T0 - timedelta(days=1), SCOPE_END + timedelta(hours=1)],
    ids=["the-day-before", "after-the-scope"],
)
def test_a_notice_outside_the_scope_leaves_the_blasts_other_findings_shown(
    tmp_path: Path, issued: datetime
) -> None:
    """A finding naming the blast ("blast:B-AIR") was held to the times of every event with the
    blast's id, its notice among them: a notice given the day before, as the rule asks, or after
    the scope withheld the blast's airblast violation inside the scope from the report, the day
    view and the inspector's bundle."""
    blast = Blast(SITE, "B-AIR", T0 + timedelta(seconds=60))
    notice = BlastNotice(SITE, "B-AIR", issued, blast.ts, ("Nora Neighbour",))
    portal, scoped, _ = _portal(tmp_path, blast, blast.ts, notice)
    airblast = Finding(
        SITE,
        "airblast",
        "7.B",
        FindingKind.VIOLATION,
        blast.ts,
        blast.ts + timedelta(seconds=5),
        "America/Chicago",
        "airblast 133.7 dB(Z) at sg1",
        ("sg1",),
        (Measurement("LZpeak", 133.7, 133.0, "dB(Z)"),),
        refs=("blast:B-AIR",),
    )
    # One naming the notice ("notice:B-AIR") reports it: still held to the notice's times.
    about_notice = replace(
        airblast, standard="blast_notice", section="6.F", summary="notice judged", refs=("notice:B-AIR",)
    )
    store = Store(portal.config.storage.path)
    with store.batch():
        store.append_finding(airblast, blast.ts + timedelta(seconds=30))
        store.append_finding(about_notice, blast.ts + timedelta(seconds=30))
    store.close()
    report = portal.blast_report(scoped, SITE, "B-AIR", "html", None).decode()
    assert "airblast 133.7 dB(Z) at sg1" in report and "Nora" not in report
    assert "notice judged" not in report
    period = checked_period(T0, T0 + timedelta(minutes=10), CHICAGO)
    assert airblast.summary in [f["summary"] for f in portal.period(scoped, SITE, period)["findings"]]
    bundle = tmp_path / "scoped.zip"
    portal.export(scoped, SITE, T0, SCOPE_END, bundle)
    with zipfile.ZipFile(bundle) as zf:
        findings = [
            json.loads(r["row"]["data"])["summary"] for r in json.loads(zf.read("records/findings.json"))
        ]
    assert airblast.summary in findings and "notice judged" not in findings


def test_a_blast_recorded_after_the_scope_is_not_named_in_its_report_or_list(tmp_path: Path) -> None:
    blast = Blast(SITE, "B-AFTER", SCOPE_END + timedelta(seconds=20))  # 50 s after the seismograph's
    portal, scoped, town = _portal(tmp_path, blast, SCOPE_END - timedelta(seconds=30), None)
    window = (T0 - timedelta(hours=1), T0 + timedelta(hours=1))
    assert [b["blast"] for b in portal.blast_reports(town, SITE, *window)] == ["B-AFTER"]
    assert b"B-AFTER" in portal.blast_report(town, SITE, "B-AFTER", "html", None)
    [listed] = portal.blast_reports(scoped, SITE, *window)
    assert listed["blast"] == "ev1"  # the seismograph's own event id, as for a blast not on record
    with pytest.raises(NotFound):
        portal.blast_report(scoped, SITE, "B-AFTER", "html", None)
    report = portal.blast_report(scoped, SITE, "ev1", "html", None).decode()
    assert "B-AFTER" not in report
    assert "a blast record matches this event outside your time scope" in report


def test_the_day_page_its_json_and_the_report_say_the_unseen_notice_in_the_same_words(tmp_path: Path) -> None:
    """One set of facts: the scoped inspector's day page, the day's JSON (API, token) and the blast
    report (logged in) each say the notice given after the blast and the scope, in one text; the
    day view had no word of it. The Town's day view has no such line. Real `minewatch serve`."""
    blast = Blast(SITE, "B-LATE", T0 + timedelta(seconds=60))
    notice = BlastNotice(SITE, "B-LATE", SCOPE_END + timedelta(hours=1), blast.ts, ("Nora Neighbour",))
    portal, _, town = _portal(tmp_path, blast, blast.ts, notice)
    config = tmp_path / "minewatch.toml"
    token = "inspector-token-for-the-scoped-blast-test-0123"
    config_for = scoped_inspector_config(config, SITE, token, T0, SCOPE_END, "scoped-blast-secret")

    said = "a notice of this blast was given after it, which does not give the 24 hours' notice required"
    day = f"/sites/{SITE}/day?date=2024-03-10"
    with portal_serving(config_for, tmp_path / "portal.log") as (port, _):
        browser = Client(SimpleNamespace(port=port))  # type: ignore[arg-type]
        assert browser.login("ida").status == 303
        page = html.unescape(browser.get(day).body)
        report = html.unescape(browser.get(f"/sites/{SITE}/blasts/B-LATE/report.html").body)
        api = Client(SimpleNamespace(port=port)).get(  # type: ignore[arg-type]
            f"/api/v1{day}", headers={"Authorization": f"Bearer {token}"}
        )
    [listed] = json.loads(api.body)["blasts"]
    assert listed["id"] == "B-LATE" and listed["notice"].startswith(said)
    assert f"Notice: {listed['notice']}" in page and listed["notice"] in report
    assert "Nora" not in page + report + api.body
    [told] = portal.period(town, SITE, checked_period(T0, SCOPE_END + timedelta(minutes=8), CHICAGO))[
        "blasts"
    ]
    assert "notice" not in told


@pytest.mark.parametrize(
    ("profile", "verdict"),
    [
        ("dovre", ", which does not give the 24 hours' notice required (section 6.F)"),
        (
            str(REPO / "tests/data/profiles/fernhill.toml"),
            ", which does not give the 36 hours' notice required (§ 4.7(c))",
        ),
        ("land-disturbing", ""),  # no notice standard: no verdict of one
    ],
    ids=["dovre", "fernhill", "no-notice-standard"],
)
def test_the_verdict_on_a_notice_after_the_blast_is_the_profiles(profile: str, verdict: str) -> None:
    """Another town's notice rule is its profile's hours and section, not Dovre's 24 and 6.F."""
    fired = T0 + timedelta(seconds=60)
    late = BlastNotice(SITE, "B-1", fired + timedelta(hours=2), fired)
    said = notice_not_shown([(late, False)], "B-1", fired, load_profile(profile), preexisting=False)
    assert said == (
        f"a notice of this blast was given after it{verdict}; when and to whom are not shown"
        " (outside your time scope)"
    )
    assert notice_not_shown([(late, True)], "B-1", fired, load_profile(profile), preexisting=False) is None


@pytest.mark.parametrize(
    ("reader", "sees"),
    [("town", True), ("inspector-from-the-notice", True), ("inspector-of-the-blast", False)],
)
def test_a_notice_for_40_days_before_the_blast_is_the_blasts_notice_on_every_surface(
    tmp_path: Path, reader: str, sees: bool
) -> None:
    """The report named a notice's recipients only for notices on record in the 30 days before
    the blast, while what it and the day view say of a notice not shown counted the blast's
    notices from any time: a notice of the blast's id given 41 days ahead for a time 40 days
    ahead (the blast put off; the rule judges every notice of the blast's id) was no notice in
    the Town's report, nor in that of an inspector whose scope holds it, yet was "given before
    it" to one whose scope does not. Now every surface considers the same notices
    (``blast_notices``): the report's recipients row for a reader who sees it, the report's and
    the day's JSON words for one who does not."""
    blast = Blast(SITE, "B-EARLY", T0 + timedelta(seconds=60))
    planned = blast.ts - timedelta(days=40)
    issued = planned - timedelta(days=1)
    notice = BlastNotice(SITE, "B-EARLY", issued, planned, ("Nora Neighbour",))
    portal, scoped, town = _portal(tmp_path, blast, blast.ts, notice)
    scope = {
        "town": town,
        "inspector-from-the-notice": Scope(
            User("ida", "inspector", (), issued - timedelta(hours=1), SCOPE_END), portal.config
        ),
        "inspector-of-the-blast": scoped,
    }[reader]
    report = html.unescape(portal.blast_report(scope, SITE, "B-EARLY", "html", None).decode())
    [listed] = portal.period(scope, SITE, checked_period(T0, SCOPE_END + timedelta(minutes=8), CHICAGO))[
        "blasts"
    ]
    if sees:
        assert "Notice recipients" in report and "Nora Neighbour" in report
        assert "notice" not in listed and "a notice of this blast was given" not in report
    else:
        assert "Nora" not in report
        said = "a notice of this blast was given before it; when and to whom are not shown"
        assert listed["notice"].startswith(said) and listed["notice"] in report
