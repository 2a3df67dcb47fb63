"""The site plan's monitor states, for an inspector with a time scope: only from what its scope shows.

A monitor's state on the plan (``Portal.plan``) is made of records: its last reading (online or
offline), the violation episodes of the status's 24 hours and the early warnings raised in them.
The plan took them all from the status kept for the operator, for any account whose scope merely
touched those 24 hours: an early warning raised inside the scope but naming a time before it, or
a violation doing so, coloured the inspector's plan, and one scoped to hours that ended before
now was shown the present. Now a scoped reader sees states only while its scope covers the 24
hours, each from the episodes the bundle's check shows it (``TimeScope.shows``). The early
warnings are the operator's (alerts addressed to it): they colour neither the Town's plan nor an
inspector's (tests/monitor/portal/test_plan_early_warnings.py); a reader they are addressed to
with a time scope (the facade's, no account has one) is coloured by those its scope shows. The
operator's plan is as it was, and its live status, which lists the warnings, stays the
operator's. Real store, real `minewatch serve`.
"""

from __future__ import annotations

import dataclasses
import html
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

from monitor.config import parse_config
from monitor.credentials import hash_password
from monitor.journal.store import Store
from monitor.portal.data import Portal, Scope, User
from rules.model import SoundLevels
from tests.support.notices import store_findings, violation
from tests.support.paths import REPO
from tests.support.portal_server import PASSWORDS, Client, account, portal_serving, scoped_inspector_config

DEMO = REPO / "sensors" / "demo" / "dovre-demo.toml"
SITE = "dovre-quarry"
SOUND = ("n1", "n2", "n3", "n4")
IVY_PASSWORD = "ivy-secret-1"


def _stamp(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _fill(store: Store, now: datetime, before_scope: datetime) -> None:
    """The four meters sending up to five minutes past ``now`` (online while the portal starts);
    n2 with a violation an hour ago; n1 with one an hour ago naming a time before the scope
    (``before_scope``); n3 warned of five minutes ago; n4 warned of then, the warning's window
    reaching back before the scope."""
    with store.batch():
        for sensor in SOUND:
            for s in range(-60, 300):
                levels = SoundLevels(SITE, sensor, now + timedelta(seconds=s), 1.0, 55.0, 56.0, 70.0)
                store.append_sound(levels, source="levels", late=False, now=now)
    hour_ago = now - timedelta(hours=1)
    in_scope = dataclasses.replace(violation(hour_ago, sensor="n2"), site=SITE)
    named = violation(hour_ago, sensor="n1")
    naming = dataclasses.replace(
        named, site=SITE, summary=f"{named.summary}, first since {_stamp(before_scope)}"
    )
    store_findings(store, [in_scope, naming], now)
    warned = now - timedelta(minutes=5)
    with store.batch():
        store.append_alert(
            "W-n3", SITE, "operator", "early_warning", "warning", "early:noise:n3", "n3 nears the limit",
            {"sensors": ["n3"], "standard": "noise"}, warned,
        )  # fmt: skip
        store.append_alert(
            "W-n4", SITE, "operator", "early_warning", "warning", "early:noise:n4", "n4 nears the limit",
            {"sensors": ["n4"], "standard": "noise", "window_start": _stamp(before_scope),
             "window_end": _stamp(warned)},
            warned,
        )  # fmt: skip


def _states(body: str) -> dict[str, str]:
    """The plan's monitors' states as its SVG draws them (siteplan.svg)."""
    return dict(
        re.findall(r'class="monitor state-[a-z_]+" data-sensor="([^"]+)" data-state="([a-z_]+)"', body)
    )


def test_a_scoped_inspectors_plan_is_coloured_only_by_what_its_scope_shows(tmp_path: Path) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    not_before, not_after = now - timedelta(days=2), now + timedelta(days=1)
    db = tmp_path / "store.db"
    text = DEMO.read_text().replace('path = "minewatch-demo.db"', f'path = "{db}"')
    text = text.replace('url = "mqtt://localhost:1883"', 'url = "mqtt://127.0.0.1:1"')  # never a default port
    config = tmp_path / "minewatch.toml"
    config.write_text(text)
    store = Store(db)
    _fill(store, now, not_before - timedelta(hours=3))
    store.close()

    # The bundle's check itself: the warning and the violation naming a time before the scope
    # are not the inspector's; the others are.
    portal = Portal(parse_config(text, str(config)))
    shown = portal._shown(
        Scope(User("ida", "inspector", (), not_before, not_after), portal.config), portal.config.sites[0]
    )
    assert shown is not None
    alerts = {r["id"]: shown("alert", r) for r in portal.store().conn.execute("SELECT * FROM alerts")}
    assert alerts == {"W-n3": True, "W-n4": False}
    findings = {r["sensor"]: shown("finding", r) for r in portal.store().conn.execute(
        "SELECT *, json_extract(data, '$.sensors[0]') AS sensor FROM findings")}  # fmt: skip
    assert findings == {"n1": False, "n2": True}
    portal.store().close()

    # ivy: an inspector whose scope ended an hour ago (it does not cover the status's 24 hours).
    ivy = account(
        "ivy", "inspector", f'["{SITE}"]', hash_password(IVY_PASSWORD),
        f'not_before = "{not_before.isoformat()}"\nnot_after = "{(now - timedelta(hours=1)).isoformat()}"\n',
    )  # fmt: skip
    ann = account("ann", "operator", f'["{SITE}"]', hash_password(PASSWORDS["ann"]))
    bob = account("bob", "town", "[]", hash_password(PASSWORDS["bob"]))
    token = "inspector-token-for-the-plan-test-012345"
    config_for = scoped_inspector_config(
        config, SITE, token, not_before, not_after, "plan-secret", ivy + ann + bob
    )
    plan, status = f"/sites/{SITE}/plan", f"/sites/{SITE}/status"
    with portal_serving(config_for, tmp_path / "portal.log") as (port, _):

        def client() -> Client:
            return Client(SimpleNamespace(port=port))  # type: ignore[arg-type]

        ida, ivy_client, operator, town = client(), client(), client(), client()
        assert ida.login("ida").status == 303 and ivy_client.login("ivy", IVY_PASSWORD).status == 303
        assert operator.login("ann").status == 303 and town.login("bob").status == 303
        ida_plan, ivy_plan = ida.get(plan), ivy_client.get(plan)
        operator_plan, town_plan = operator.get(plan), town.get(plan)
        operator_status, operator_live = operator.get(status), operator.get(f"{status}/live")
        ida_status, ida_live = ida.get(status), ida.get(f"{status}/live")
        ida_api = client().get(f"/api/v1{status}", headers={"Authorization": f"Bearer {token}"})

    assert {r.status for r in (ida_plan, ivy_plan, operator_plan, town_plan)} == {200}
    everything = {"n1": "violation", "n2": "violation", "n3": "early_warning", "n4": "early_warning"}
    # The operator's plan: every record of the 24 hours, as before; the Town's every violation,
    # the early warnings being the operator's.
    assert {k: v for k, v in _states(operator_plan.body).items() if k in SOUND} == everything
    town_states = {k: v for k, v in _states(town_plan.body).items() if k in SOUND}
    assert town_states == {"n1": "violation", "n2": "violation", "n3": "ok", "n4": "ok"}
    # The inspector's: n1's violation names a time before its scope: it does not colour its
    # plan; n2's does. No early warning is the inspector's.
    ida_states = {k: v for k, v in _states(ida_plan.body).items() if k in SOUND}
    assert ida_states == {"n1": "ok", "n2": "violation", "n3": "ok", "n4": "ok"}
    assert "that this account's time scope shows" in html.unescape(ida_plan.body)
    # Scoped to hours that ended before now: no state at all.
    assert set(_states(ivy_plan.body).values()) == {"not_shown"}
    assert 'id="plan-not-shown"' in ivy_plan.body
    # The live status lists the early warnings (Portal.early_warnings, kept per window, not per
    # account): the operator's, never a scoped inspector's.
    assert operator_status.status == 200 and operator_live.status == 200
    assert "n4 nears the limit" in operator_live.body and "n3 nears the limit" in operator_live.body
    assert (ida_status.status, ida_live.status, ida_api.status) == (403, 403, 403)
    assert "nears the limit" not in ida_status.body + ida_live.body + ida_api.body


def test_the_live_status_lists_a_scoped_reader_the_warnings_its_scope_shows(tmp_path: Path) -> None:
    """``Portal.early_warnings``, the live status that keeps it (per site, window and sight, not
    per account) and the states of a reader the warnings are addressed to with a time scope,
    should one exist (only an inspector has a scope, and neither the status nor the warnings are
    an inspector's: 403 above): the warnings the bundle's check shows, never those kept for an
    unscoped reader whose windows are the same; an inspector with that scope is shown none."""
    now = datetime(2026, 12, 3, 18, 0, 30, tzinfo=UTC)  # 12:00:30 at the site: today's warnings
    db = tmp_path / "store.db"
    text = DEMO.read_text().replace('path = "minewatch-demo.db"', f'path = "{db}"')
    config = parse_config(text, str(DEMO))
    store = Store(db)
    _fill(store, now, now - timedelta(days=2, hours=3))
    store.close()
    portal = Portal(config, clock=lambda: now)
    everyone = Scope(User("ann", "operator", ()), config)
    scoped = Scope(User("ann", "operator", (), now - timedelta(days=2), now + timedelta(days=1)), config)
    inspector = Scope(User("ida", "inspector", (), now - timedelta(days=2), now + timedelta(days=1)), config)
    assert [w["message"] for w in portal.live_status(everyone, SITE)["warnings"]] == [
        "n4 nears the limit",
        "n3 nears the limit",
    ]
    assert [w["message"] for w in portal.live_status(scoped, SITE)["warnings"]] == ["n3 nears the limit"]
    assert [w["message"] for w in portal.early_warnings(scoped, SITE, now - timedelta(hours=1), now)] == [
        "n3 nears the limit"
    ]
    assert len(portal.early_warnings(everyone, SITE, now - timedelta(hours=1), now)) == 2
    assert portal.early_warnings(inspector, SITE, now - timedelta(hours=1), now) == []
    # The plan: n4's warning names a time before the scope and colours nothing; n3's does.
    planned = {m["id"]: m["state"] for m in portal.plan(scoped, SITE)["monitors"] if m["id"] in ("n3", "n4")}
    assert planned == {"n3": "early_warning", "n4": "ok"}
    portal.store().close()
