"""What an inspector scoped to a past window learns of later facts, route by route (the walk).

Two leaks the walk found:
- the day view's cache was keyed by the window shown, not by whose scope it was computed for:
  an inspector asking for the same window as the Town got the Town's view, with a finding that
  reports past the inspector's scope (82.5 dB(A), a truck at 15:00:51 local);
- an episode at the end of the scope named its notice ("notice DOV-2026-0001") on the day view
  and in the bundle's notice_episodes.json, though the notice was issued after the scope closed
  and the bundle left the notice itself out. Now a notice's episode is shown with its notice only;
- a blast inside the scope whose seismograph recorded it after the scope closed was marked on
  the day view as having a report (a link that then answered 404): the link now follows what
  Portal.blast_report serves, the record within the scope;
- a blast report within the scope listed the findings about the blast whatever they reported,
  one reaching past the scope too (an airblast finding to 08:02:00Z); it lists them as the day
  view does (TimeScope.shows);
- a complaint about the scope's hours received five minutes after the scope closed (its record
  chained before the anchor that closes a bundle of the scope's end) was in the scoped bundle
  with its address, description and time of receipt: complaints and their changes are held to
  the scope as findings are.
"""

from __future__ import annotations

import json
import zipfile
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from monitor.evidence import verify_bundle
from monitor.journal.store import Store
from monitor.notify.notices import NoticeBook
from monitor.portal.data import Portal, Scope, User
from monitor.portal.periods import checked_period, day_period
from tests.monitor.portal.test_time_scope_findings import CHICAGO, NOT_AFTER, NOT_BEFORE, _setup
from tests.support.notices import TZ, make_config, minutes, site_and_profile, store_findings
from tests.support.scopes import anchored_scopes


def test_a_day_view_computed_for_the_town_is_not_served_to_a_scoped_inspector(tmp_path: Path) -> None:
    portal, scoped, _, inside, leak = _setup(tmp_path)
    town = Scope(User("bob", "town", ()), portal.config)
    period = checked_period(NOT_BEFORE, NOT_AFTER, CHICAGO)  # the inspector's whole scope
    seen, _ = portal.period_view(town, "s1", period)
    assert {f["id"] for f in seen["findings"]} == {inside, leak}
    view, plot = portal.period_view(scoped, "s1", period)
    assert [f["id"] for f in view["findings"]] == [inside]
    assert leak not in json.dumps(view) and "82.5" not in json.dumps(view) and "82.5" not in plot
    # And the other way round: the Town still gets its whole view after the inspector's.
    again, _ = portal.period_view(town, "s1", period)
    assert {f["id"] for f in again["findings"]} == {inside, leak}


def test_an_episode_names_no_notice_issued_after_the_scope(tmp_path: Path) -> None:
    config = make_config(tmp_path / "n.db")
    store = Store(config.storage.path)
    site, profile = site_and_profile(config)
    not_before, not_after = datetime(2026, 12, 3, 20, tzinfo=UTC), datetime(2026, 12, 3, 21, tzinfo=UTC)
    found = store_findings(
        store, minutes(not_after - timedelta(minutes=3), 2), not_after - timedelta(seconds=30)
    )
    with store.batch():  # the daemon drew the notice up four minutes after the scope closed
        [event] = NoticeBook(store).on_findings(site, profile, found, not_after + timedelta(minutes=4))
    notice = event.notice_id
    portal = Portal(config, clock=lambda: datetime(2026, 12, 10, tzinfo=UTC))
    scoped = Scope(User("ida", "inspector", (), not_before, not_after), config)
    town = Scope(User("bob", "town", ()), config)
    day = day_period(date(2026, 12, 3), TZ)

    view = portal.period(scoped, "quarry", day)
    assert view["episodes"] and view["findings"]  # the violation itself is the inspector's
    assert notice not in json.dumps(view)
    assert {e["notice"] for e in portal.period(town, "quarry", day)["episodes"]} == {notice}

    out = tmp_path / "scoped.zip"
    window = datetime(2026, 12, 3, 14, tzinfo=TZ), datetime(2026, 12, 3, 15, tzinfo=TZ)
    portal.export(scoped, "quarry", *window, out)
    with zipfile.ZipFile(out) as zf:
        links = json.loads(zf.read("records/notice_episodes.json"))
        everything = b"".join(zf.read(n) for n in zf.namelist())
    assert links == [] and notice.encode() not in everything
    assert verify_bundle(out).ok
    whole = tmp_path / "town.zip"
    portal.export(town, "quarry", *window, whole)
    with zipfile.ZipFile(whole) as zf:
        assert [link["row"]["notice_id"] for link in json.loads(zf.read("records/notice_episodes.json"))] == [
            notice
        ]


def test_a_blast_is_not_marked_as_reported_by_a_seismograph_record_after_the_scope(tmp_path: Path) -> None:
    from monitor.portal.data import NotFound
    from monitor.wire.codec import payload_of
    from rules.model import Blast
    from tests.support.evidence import SITE, T0, add_seismograph_event, build_site

    site = build_site(tmp_path)
    store = Store(site.config.storage.path)
    blast = Blast(SITE, "B-LATE", T0 + timedelta(seconds=170))
    with store.batch():  # the blast inside the scope, its seismograph record 20 s after it closed
        store.append_event(blast, payload_of(blast), T0 + timedelta(seconds=171))
        add_seismograph_event(store, T0 + timedelta(seconds=200), T0 + timedelta(seconds=205))
    store.close()
    portal = Portal(site.config, clock=lambda: T0 + timedelta(days=2))
    scoped = Scope(User("ida", "inspector", (), T0, T0 + timedelta(seconds=180)), site.config)
    town = Scope(User("bob", "town", ()), site.config)
    period = checked_period(T0 - timedelta(hours=1), T0 + timedelta(hours=1), CHICAGO)
    assert portal.period(scoped, SITE, period)["blasts"] == [
        {"id": "B-LATE", "ts": "2024-03-10T08:00:50Z", "report": False}
    ]
    with pytest.raises(NotFound):  # as before: the record is not the inspector's
        portal.blast_report(scoped, SITE, "B-LATE", "html", None)
    assert portal.period(town, SITE, period)["blasts"][0]["report"] is True
    assert b"B-LATE" in portal.blast_report(town, SITE, "B-LATE", "html", None)


def test_a_blast_report_lists_no_finding_reporting_past_the_scope(tmp_path: Path) -> None:
    from monitor.wire.codec import payload_of
    from rules.model import Blast, Finding, FindingKind, Measurement
    from tests.support.evidence import SITE, T0, add_seismograph_event, build_site

    site = build_site(tmp_path)
    store = Store(site.config.storage.path)
    blast = Blast(SITE, "B-EDGE", T0 + timedelta(seconds=170))
    past = Finding(
        SITE,
        "airblast",
        "7.B",
        FindingKind.VIOLATION,
        T0 + timedelta(seconds=170),
        T0 + timedelta(seconds=240),  # the scope ends at T0 + 180 s
        "America/Chicago",
        "airblast 133.7 dB(Z) at sg1, heard until 02:02 local",
        ("sg1",),
        (Measurement("LZpeak", 133.7, 133.0, "dB(Z)"),),
        refs=("blast:B-EDGE",),
    )
    with store.batch():
        store.append_event(blast, payload_of(blast), T0 + timedelta(seconds=171))
        add_seismograph_event(store, T0 + timedelta(seconds=172), T0 + timedelta(seconds=175))
        store.append_finding(past, T0 + timedelta(seconds=250))
    store.close()
    portal = Portal(site.config, clock=lambda: T0 + timedelta(days=2))
    scoped = Scope(User("ida", "inspector", (), T0, T0 + timedelta(seconds=180)), site.config)
    town = Scope(User("bob", "town", ()), site.config)
    assert b"133.7" in portal.blast_report(town, SITE, "B-EDGE", "html", None)
    report = portal.blast_report(scoped, SITE, "B-EDGE", "html", None)
    assert b"B-EDGE" in report and b"133.7" not in report


def test_a_complaint_received_after_the_scope_is_not_in_its_bundle(tmp_path: Path) -> None:
    from monitor.complaints.book import ComplaintBook

    config = make_config(tmp_path / "c.db")
    store = Store(config.storage.path)
    not_before, not_after = datetime(2026, 12, 3, 20, tzinfo=UTC), datetime(2026, 12, 3, 21, tzinfo=UTC)
    store_findings(store, minutes(not_before + timedelta(minutes=30), 1), not_before + timedelta(minutes=32))
    with store.batch():  # about 14:30-14:40 local, received at 15:05, after the scope
        complaint = ComplaintBook(store).submit(
            "quarry",
            "noise",
            not_before + timedelta(minutes=30),
            not_before + timedelta(minutes=40),
            "12 Birch Lane",
            None,
            "banging all afternoon",
            {"name": "Ann"},
            {},
            not_after + timedelta(minutes=5),
        )
    portal, scoped, town = anchored_scopes(store, config, not_before, not_after)
    window = datetime(2026, 12, 3, 14, tzinfo=TZ), datetime(2026, 12, 3, 15, tzinfo=TZ)

    out = tmp_path / "scoped.zip"
    portal.export(scoped, "quarry", *window, out)
    with zipfile.ZipFile(out) as zf:
        everything = b"".join(zf.read(n) for n in zf.namelist())
        assert json.loads(zf.read("records/complaints.json")) == []
        assert json.loads(zf.read("records/complaint_changes.json")) == []
    assert b"Birch" not in everything and complaint.id.encode() not in everything
    assert verify_bundle(out).ok
    whole = tmp_path / "town.zip"
    portal.export(town, "quarry", *window, whole)
    with zipfile.ZipFile(whole) as zf:
        assert [c["row"]["id"] for c in json.loads(zf.read("records/complaints.json"))] == [complaint.id]
