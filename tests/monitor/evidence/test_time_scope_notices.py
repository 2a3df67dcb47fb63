"""A time-scoped reader sees a notice issued inside its scope though its cure deadline lies after it.

A cure deadline is set when the notice is issued (or extended), from the profile's rule (13.3.A):
it is not a time the notice reports. Counted as one, every notice issued in the last 14 days of a
scope was carried as its digest alone while its "opened" change, which names the same deadline in
local time, was shown. What a notice reports after the scope (an extension granted later, an alert
whose episode reaches past it, a notice issued after it) stays out.
"""

from __future__ import annotations

import json
import sqlite3
import zipfile
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from monitor.config import AccountConfig, Config
from monitor.evidence import verify_bundle
from monitor.evidence.disclosure import TimeScope
from monitor.journal.chain_kinds import change_record, notice_record
from monitor.journal.store import Store
from monitor.notify.alerts import Alert
from monitor.notify.notices import NoticeBook
from monitor.portal.data import Portal, Scope, User
from monitor.wire.canonical import to_us
from tests.support.notices import SITE, TZ, local, make_config, site_and_profile, store_findings, violation

FIRST = local(2026, 6, 15, 11, 30)  # the violation's minute
ISSUED = FIRST + timedelta(minutes=1, seconds=6)
NOT_BEFORE = local(2026, 6, 15, 11, 0)
NOT_AFTER = local(2026, 6, 15, 14, 0)  # the deadline (June 29, end of day) lies two weeks after it


@pytest.fixture
def config(tmp_path: Path) -> Config:
    return make_config(tmp_path / "notices.db")


@pytest.fixture
def store(config: Config) -> Store:
    return Store(config.storage.path)


def _issue(store: Store, config: Config) -> tuple[str, dict[str, Any]]:
    """One notice issued at ISSUED for a violation at FIRST, its opening alert stored as the daemon
    stores it (AlertBook.raise_); returns its id and the alert's data."""
    site, profile = site_and_profile(config)
    found = store_findings(store, [violation(FIRST)], ISSUED)
    [event] = NoticeBook(store).on_findings(site, profile, found, ISSUED)
    alert: Alert = event.alert
    data = json.loads(json.dumps(alert.data, default=str))
    with store.batch():
        store.append_alert(
            "a-opened", SITE, ",".join(alert.audiences), alert.kind, alert.severity, alert.condition,
            alert.message, data, ISSUED,
        )  # fmt: skip
    return event.notice_id, data


def _rows(conn: sqlite3.Connection, notice_id: str) -> dict[str, list[dict[str, Any]]]:
    conn.row_factory = sqlite3.Row
    notice = conn.execute("SELECT * FROM notices WHERE id = ?", (notice_id,)).fetchone()
    changes = conn.execute("SELECT * FROM notice_changes WHERE notice_id = ? ORDER BY seq", (notice_id,))
    alerts = conn.execute("SELECT * FROM alerts ORDER BY created_us")
    return {
        "notice": [notice_record(notice)],
        "notice_change": [change_record(c) for c in changes],
        "alert": [dict(a) for a in alerts],
    }


def _shown(
    scope: TimeScope, conn: sqlite3.Connection, rows: dict[str, list[dict[str, Any]]]
) -> dict[str, list[bool]]:
    return {kind: [scope.shows(conn, SITE, kind, row, TZ) for row in found] for kind, found in rows.items()}


def test_a_notice_issued_inside_the_scope_is_shown_with_a_deadline_after_it(
    store: Store, config: Config
) -> None:
    notice_id, alert_data = _issue(store, config)
    notice = NoticeBook(store).get(notice_id)
    assert notice.deadline > NOT_AFTER + timedelta(days=13)  # the premise: a deadline past the scope
    assert alert_data["deadline"] == notice.data["deadline"]
    scope = TimeScope(to_us(NOT_BEFORE), to_us(NOT_AFTER))
    conn = sqlite3.connect(config.storage.path)
    assert _shown(scope, conn, _rows(conn, notice_id)) == {
        "notice": [True],
        "notice_change": [True],
        "alert": [True],
    }


def test_what_a_notice_reports_after_the_scope_stays_out(store: Store, config: Config) -> None:
    notice_id, _ = _issue(store, config)
    book = NoticeBook(store)
    book.extend(
        notice_id,
        None,
        "town-clerk",
        "granted inside the scope",
        NOT_AFTER - timedelta(hours=1),
        extra_days=7,
    )
    book.extend(
        notice_id, None, "town-clerk", "granted after it", NOT_AFTER + timedelta(hours=1), extra_days=3
    )
    conn = sqlite3.connect(config.storage.path)
    rows = _rows(conn, notice_id)
    assert [c["change"] for c in rows["notice_change"]] == ["opened", "extended", "extended"]
    # The first extension names its new deadline (set, after the scope) and is shown; the second
    # was granted after the scope and is not.
    assert "new_deadline" in rows["notice_change"][1]["data"]
    scope = TimeScope(to_us(NOT_BEFORE), to_us(NOT_AFTER))
    assert _shown(scope, conn, rows)["notice_change"] == [True, True, False]
    # A scope that ends before the issue shows neither the notice, its changes nor its alert.
    before = TimeScope(to_us(NOT_BEFORE), to_us(ISSUED - timedelta(seconds=1)))
    assert _shown(before, conn, rows) == {
        "notice": [False],
        "notice_change": [False, False, False],
        "alert": [False],
    }
    # A scope that begins after the violation's minute: the alert reports the episode (its
    # facts' times), which lies before it, so the alert is out; the notice names only its issue.
    later = TimeScope(to_us(FIRST + timedelta(seconds=30)), to_us(NOT_AFTER))
    assert _shown(later, conn, rows)["alert"] == [False]
    assert _shown(later, conn, rows)["notice"] == [True]


@pytest.mark.parametrize(("day", "when"), [(29, "today"), (28, "tomorrow")])
def test_a_cure_reminder_naming_its_deadlines_day_is_shown(
    store: Store, config: Config, day: int, when: str
) -> None:
    """A reminder's change said "the cure deadline is 2026-06-29 23:59 CDT, tomorrow": the word
    was read as a day the text cannot place, so no scoped reader saw the change, whatever its
    scope; the deadline is one the notice sets, and "tomorrow" its day. (The change's data names
    the deadline as an RFC 3339 time, which a scope must hold: this one does.)"""
    notice_id, _ = _issue(store, config)
    site, profile = site_and_profile(config)
    at = local(2026, 6, day, 8, 0)
    NoticeBook(store).remind(site, profile, at)
    conn = sqlite3.connect(config.storage.path)
    changes = _rows(conn, notice_id)["notice_change"]
    assert [c["change"] for c in changes] == ["opened", "deadline_near"]
    assert f"the cure deadline is 2026-06-29 23:59 CDT, {when}." in changes[1]["note"]
    scope = TimeScope(to_us(NOT_BEFORE), to_us(local(2026, 6, 30, 0, 0)))
    assert _shown(scope, conn, {"notice_change": changes}) == {"notice_change": [True, True]}


@pytest.mark.parametrize(
    ("at", "scope", "change", "shown"),
    [
        # "the cure deadline is 2026-06-29 23:59 CDT, tomorrow", said inside a scope ending a day
        # before that deadline: the deadline is the notice's, the reminder the scope's
        (local(2026, 6, 28, 8, 0), (NOT_BEFORE, local(2026, 6, 28, 12, 0)), "deadline_near", [True, True]),
        # said after the scope: out
        (local(2026, 6, 28, 8, 0), (NOT_BEFORE, local(2026, 6, 28, 7, 59)), "deadline_near", [True, False]),
        # "the cure deadline 2026-06-29 23:59 CDT has passed", said inside a scope that begins after
        # it (the notice's "opened" change lies before the scope)
        (
            local(2026, 6, 30, 8, 0),
            (local(2026, 6, 30, 0, 0), local(2026, 6, 30, 12, 0)),
            "deadline_passed",
            [False, True],
        ),
    ],
)
def test_a_cure_reminder_is_shown_by_its_own_time_not_its_deadlines(
    store: Store,
    config: Config,
    at: datetime,
    scope: tuple[datetime, datetime],
    change: str,
    shown: list[bool],
) -> None:
    """A reminder's change names the notice's deadline in its data ("deadline", RFC 3339), which
    was held to the scope as a time it reports: a reminder made inside a scope ending before the
    deadline was hidden (and one made after a deadline before the scope began). The deadline is
    the one the notice set; the change reports its own time, which the scope holds."""
    notice_id, _ = _issue(store, config)
    site, profile = site_and_profile(config)
    NoticeBook(store).remind(site, profile, at)
    conn = sqlite3.connect(config.storage.path)
    changes = _rows(conn, notice_id)["notice_change"]
    assert [c["change"] for c in changes] == ["opened", change]
    assert json.loads(changes[1]["data"])["deadline"] == "2026-06-30T04:59:59.999Z"  # the premise
    reader = TimeScope(to_us(scope[0]), to_us(scope[1]))
    assert _shown(reader, conn, {"notice_change": changes}) == {"notice_change": shown}


@pytest.mark.parametrize(("last_hour", "shown"), [(12, [True, True]), (8, [True, False])])
def test_a_service_recorded_inside_the_scope_is_shown_with_the_deadline_it_counts(
    store: Store, config: Config, last_hour: int, shown: list[bool]
) -> None:
    """A "served" change names the deadline counted from the service ("counted_deadline"), a time
    the profile's rule sets as it does at issue; held to the scope as one the change reports, it
    hid every service recorded in the cure period's last two weeks before the scope's end."""
    notice_id, _ = _issue(store, config)
    at = local(2026, 6, 17, 9, 0)
    NoticeBook(store).serve(notice_id, local(2026, 6, 17, 8, 0), "town-clerk", "served by hand", at)
    conn = sqlite3.connect(config.storage.path)
    changes = _rows(conn, notice_id)["notice_change"]
    assert [c["change"] for c in changes] == ["opened", "served"]
    assert json.loads(changes[1]["data"])["counted_deadline"] == "2026-07-02T04:59:59.999Z"  # the premise
    # the scope ends on the day of service, after the change is recorded (09:00) or before it
    reader = TimeScope(to_us(NOT_BEFORE), to_us(local(2026, 6, 17, last_hour, 0)))
    assert _shown(reader, conn, {"notice_change": changes}) == {"notice_change": shown}


def test_a_scoped_bundle_carries_the_notice_and_verifies(
    store: Store, config: Config, tmp_path: Path
) -> None:
    notice_id, _ = _issue(store, config)
    portal = Portal(config, clock=lambda: NOT_AFTER + timedelta(days=30))
    scoped = Scope(User("ida", "inspector", (), NOT_BEFORE, NOT_AFTER), config)
    out = tmp_path / "scoped.zip"
    portal.export(
        scoped, SITE, datetime(2026, 6, 15, 10, tzinfo=TZ), datetime(2026, 6, 15, 15, tzinfo=TZ), out
    )
    with zipfile.ZipFile(out) as zf:
        notices = json.loads(zf.read("records/notices.json"))
        manifest = json.loads(zf.read("manifest.json"))
    assert [n["row"]["id"] for n in notices] == [notice_id]
    assert "deadline" in json.loads(notices[0]["row"]["data"])
    assert "notice" not in manifest["disclosure"]["digest_only"]
    assert "cure deadline" in manifest["disclosure"]["time_scope"]["rule"]
    assert verify_bundle(out).ok


def test_a_bundle_for_an_account_scoped_by_dates_states_its_whole_last_day(
    store: Store, config: Config, tmp_path: Path
) -> None:
    """The manifest states the scope the bundle was cut to: a date-only not_after was 23:59:59,
    the last second of the day given left out."""
    notice_id, _ = _issue(store, config)
    account = AccountConfig("ida", "inspector", "scrypt$", not_before="2026-06-15", not_after="2026-06-15")
    scoped = Scope(User.of(account), config)
    out = tmp_path / "dated.zip"
    portal = Portal(config, clock=lambda: NOT_AFTER + timedelta(days=30))
    portal.export(scoped, SITE, local(2026, 6, 15, 10, 0), local(2026, 6, 15, 15, 0), out)
    with zipfile.ZipFile(out) as zf:
        manifest = json.loads(zf.read("manifest.json"))
        notices = json.loads(zf.read("records/notices.json"))
    time_scope = manifest["disclosure"]["time_scope"]
    # The site's local day (CDT), to its last microsecond.
    assert time_scope["not_before_us"] == to_us(local(2026, 6, 15, 0, 0))
    assert time_scope["not_after_us"] == to_us(local(2026, 6, 16, 0, 0)) - 1
    assert [n["row"]["id"] for n in notices] == [notice_id]
    assert verify_bundle(out).ok
