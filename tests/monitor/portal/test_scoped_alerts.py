"""The alerts the portal lists, for a reader with a time scope: those its bundle shows in clear.

``Portal.alerts`` (the alerts page's and API's one door) cut a time-scoped reader's list by when
each alert was raised alone, while the bundle of the same account shows an alert only when every
time it names lies in the scope (``TimeScope.shows``): a report's alert raised inside the scope
naming the period "2026-11-01 to 2026-11-30", or a violation's naming an episode after it, was
listed. Now the list, its kinds and its length go through the same check; the Town sees what it
saw. The alerts page and API are the operator's and the Town's (``CAN["alerts"]``), and only an
inspector may have a time scope: a scoped inspector is refused them, as before. Real store, real
export, real `minewatch serve`.
"""

from __future__ import annotations

import html
import json
import zipfile
from datetime import datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

from monitor.credentials import hash_password, hash_token
from monitor.journal.store import Store
from monitor.portal.data import Portal, Scope
from tests.support.notices import CONFIG, SITE, local, make_config
from tests.support.portal_server import PASSWORDS, Client, account, portal_serving, scoped_inspector_config
from tests.support.scopes import anchored_scopes

NOT_BEFORE, NOT_AFTER = local(2026, 12, 3, 14), local(2026, 12, 3, 15)  # 14:00 to 15:00 CST
# id -> (kind, raised at, message, data), all for the Town, newest first.
ALERTS: dict[str, tuple[str, datetime, str, dict[str, str]]] = {
    "after-scope": (
        "violation",
        local(2026, 12, 3, 15, 30),
        "Noise at meter n1 averaged 84.2 dB(A) over 15:20-15:21 local, above the 80 dB limit (section 6.D)",
        {},
    ),
    "cannot-place": (
        "complaint_placement",
        local(2026, 12, 3, 14, 55),
        "Three complaints since yesterday name the north boundary",
        {},
    ),
    "names-episode": (
        "violation",
        local(2026, 12, 3, 14, 50),
        "Violation episode 2026-12-03 16:05 CST to 16:20 CST at meter n1 (section 6.D)",
        {},
    ),
    "names-period": (
        "report",
        local(2026, 12, 3, 14, 40),
        "The compliance report for the period 2026-11-01 to 2026-11-30 is ready",
        {"report_id": "r-2026-11", "period": "2026-11"},
    ),
    "in-scope": (
        "violation",
        local(2026, 12, 3, 14, 30),
        "Noise at meter n1 averaged 84.2 dB(A) over 14:20-14:21 local, above the 80 dB limit (section 6.D)",
        {},
    ),
}
SHOWN = ["in-scope"]  # to the scoped reader: raised inside the scope, naming its own minute only


def _setup(db: Path, unplaced: int = 0) -> tuple[Portal, Scope, Scope]:
    """The store with ALERTS and ``unplaced`` more, raised in the scope after "in-scope", each
    naming a day it cannot place."""
    config = make_config(db)
    store = Store(config.storage.path)
    with store.batch():
        for alert_id, (kind, at, message, data) in ALERTS.items():
            store.append_alert(alert_id, SITE, "town", kind, "warning", alert_id, message, data, at)
        for n in range(unplaced):
            at = ALERTS["in-scope"][1] + timedelta(seconds=1 + n)
            message = "Loud yesterday"
            store.append_alert(f"u{n}", SITE, "town", "violation", "warning", f"u{n}", message, {}, at)
    return anchored_scopes(store, config, NOT_BEFORE, NOT_AFTER)


def _bundle_alerts(portal: Portal, scope: Scope, out: Path) -> set[str]:
    portal.export(scope, SITE, NOT_BEFORE, NOT_AFTER, out)
    with zipfile.ZipFile(out) as zf:
        return {str(r["row"]["id"]) for r in json.loads(zf.read("records/alerts.json"))}


def test_a_scoped_reader_is_listed_the_alerts_its_bundle_shows_and_their_kinds_alone(tmp_path: Path) -> None:
    portal, scoped, town = _setup(tmp_path / "a.db")
    listed = [a["id"] for a in portal.alerts(scoped, SITE, "town")]
    assert listed == SHOWN
    assert _bundle_alerts(portal, scoped, tmp_path / "scoped.zip") == set(SHOWN)  # one set of facts
    # The newest shown, however many newer ones are not: the list's length tells nothing of them.
    assert [a["id"] for a in portal.alerts(scoped, SITE, "town", 1)] == SHOWN
    # The page's filter by kind names no kind of an alert it does not show (a report's, a
    # complaint placement's): it told that one was raised.
    assert portal.alert_kinds(scoped, SITE, "town") == ["violation"]
    assert [a["id"] for a in portal.alerts(scoped, SITE, "town", kind="report")] == []

    # The Town's list, kinds and bundle are what they were.
    assert [a["id"] for a in portal.alerts(town, SITE, "town")] == list(ALERTS)
    assert portal.alert_kinds(town, SITE, "town") == ["complaint_placement", "report", "violation"]
    assert _bundle_alerts(portal, town, tmp_path / "town.zip") == set(ALERTS) - {"after-scope"}


def test_a_scoped_readers_list_is_read_past_pages_of_alerts_it_does_not_show(tmp_path: Path) -> None:
    """250 newer alerts it does not show (more than a page of them) before the one it does."""
    portal, scoped, town = _setup(tmp_path / "a.db", unplaced=250)
    assert [a["id"] for a in portal.alerts(scoped, SITE, "town", 1)] == SHOWN
    assert [a["id"] for a in portal.alerts(scoped, SITE, "town")] == SHOWN
    assert len(portal.alerts(town, SITE, "town")) == 100


def test_the_alerts_page_and_api_are_the_towns_and_refused_to_a_scoped_inspector(tmp_path: Path) -> None:
    """Through `minewatch serve`: the Town's page and API list every alert as before; the scoped
    inspector is refused both (403), so it sees none of them, in the scope or not."""
    db = tmp_path / "a.db"
    _setup(db)
    config = tmp_path / "minewatch.toml"
    config.write_text(CONFIG.format(db=db, max_attempts=3) + '\n[broker]\nurl = "mqtt://127.0.0.1:1"\n')
    ida_token, bob_token = "inspector-token-for-the-alerts-test-0123", "town-token-for-the-alerts-test-01234"
    bob_hash = f'token_hash = "{hash_token(bob_token)}"\n'
    bob = account("bob", "town", "[]", hash_password(PASSWORDS["bob"]), bob_hash)
    config_for = scoped_inspector_config(config, SITE, ida_token, NOT_BEFORE, NOT_AFTER, "alerts-secret", bob)
    path = f"/sites/{SITE}/alerts"
    with portal_serving(config_for, tmp_path / "portal.log") as (port, _):
        town, inspector = Client(SimpleNamespace(port=port)), Client(SimpleNamespace(port=port))  # type: ignore[arg-type]
        assert town.login("bob").status == 303 and inspector.login("ida").status == 303
        town_page, inspector_page = town.get(path), inspector.get(path)

        def api(token: str) -> tuple[int, str]:
            reply = Client(SimpleNamespace(port=port)).get(  # type: ignore[arg-type]
                f"/api/v1{path}", headers={"Authorization": f"Bearer {token}"}
            )
            return reply.status, reply.body

        (town_status, town_api), (inspector_status, inspector_api) = api(bob_token), api(ida_token)
    assert town_page.status == 200 and town_status == 200
    assert all(message in html.unescape(town_page.body) for _, _, message, _ in ALERTS.values())
    assert [a["id"] for a in json.loads(town_api)] == list(ALERTS)
    assert inspector_page.status == 403 and inspector_status == 403
    assert not any(message in inspector_page.body + inspector_api for _, _, message, _ in ALERTS.values())
