"""Early warnings colour the operator's monitors alone.

The daemon raises its early warnings for the operator (alerts addressed to it: its own
self-monitoring, carried in no bundle but as digests). A monitor's state (``Portal._states_at``,
every surface's) is made of the records its reader may see, so an early warning makes a monitor
``early_warning`` on the operator's plan, status page, live status and API, and leaves it ``ok``
on the Town's plan and an inspector's (scoped or not), whose legend does not offer the state.
Every early warning of the status's 24 hours counts, however many were raised. Real store, real
`minewatch serve` (and the facade on the same store for the count).
"""

from __future__ import annotations

import html
import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

from monitor.config import parse_config
from monitor.credentials import hash_password
from monitor.journal.store import Store
from monitor.portal.data import Portal, Scope, User
from rules.model import SoundLevels
from tests.support.paths import REPO
from tests.support.portal_server import PASSWORDS, Client, account, portal_serving, scoped_inspector_config

DEMO = REPO / "sensors" / "demo" / "dovre-demo.toml"
SITE = "dovre-quarry"
SOUND = ("n1", "n2", "n3", "n4")
IAN_PASSWORD = "ian-secret-1"


def _demo(tmp_path: Path) -> tuple[Path, str]:
    """The demo's configuration on a store of its own, with no default port in it."""
    db = tmp_path / "store.db"
    text = DEMO.read_text().replace('path = "minewatch-demo.db"', f'path = "{db}"')
    text = text.replace('url = "mqtt://localhost:1883"', 'url = "mqtt://127.0.0.1:1"')
    config = tmp_path / "minewatch.toml"
    config.write_text(text)
    return config, text


def _online(store: Store, now: datetime) -> None:
    """The four meters sending from a minute before ``now`` to five minutes past it (online while
    the portal runs)."""
    with store.batch():
        for sensor in SOUND:
            for s in range(-60, 300):
                levels = SoundLevels(SITE, sensor, now + timedelta(seconds=s), 1.0, 55.0, 56.0, 70.0)
                store.append_sound(levels, source="levels", late=False, now=now)


def _warn(store: Store, warning_id: str, sensor: str, at: datetime) -> None:
    """An early warning about ``sensor`` as the daemon raises one (announcer.early_warnings)."""
    store.append_alert(
        warning_id, SITE, "operator", "early_warning", "warning", f"early:noise:{sensor}",
        f"{sensor} nears the limit", {"sensors": [sensor], "standard": "noise"}, at,
    )  # fmt: skip


def _states(body: str) -> dict[str, str]:
    """The plan's sound meters' states as its SVG draws them (siteplan.svg)."""
    drawn = re.findall(r'class="monitor state-[a-z_]+" data-sensor="([^"]+)" data-state="([a-z_]+)"', body)
    return {k: v for k, v in drawn if k in SOUND}


def _legend(body: str) -> list[str]:
    """The states the plan's legend offers (plan_figure.html)."""
    legend = re.search(r'<ul class="legend plan-legend" id="plan-legend">(.*?)</ul>', body, re.S)
    assert legend is not None
    return re.findall(r'<li data-state="([a-z_]+)">', legend.group(1))


def _status_states(body: str) -> dict[str, str]:
    """The states of the status page's (or its live part's) sensor table (status_live.html)."""
    rows = re.findall(
        r'id="sensor-(n\d)">.*?<td class="state"[^>]*>.*?</span>\s*([^<]+?)\s*</td>', body, re.S
    )
    return dict(rows)


def test_an_early_warning_colours_the_operators_plan_and_status_not_the_towns_nor_an_inspectors(
    tmp_path: Path,
) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    config, _ = _demo(tmp_path)
    store = Store(tmp_path / "store.db")
    _online(store, now)
    with store.batch():
        _warn(store, "W-n3", "n3", now - timedelta(minutes=5))
    store.close()

    # ida: an inspector scoped to hours that cover the status's 24; ian: one with no scope.
    ian = account("ian", "inspector", f'["{SITE}"]', hash_password(IAN_PASSWORD))
    ann = account("ann", "operator", f'["{SITE}"]', hash_password(PASSWORDS["ann"]))
    bob = account("bob", "town", "[]", hash_password(PASSWORDS["bob"]))
    token = "inspector-token-for-the-warning-test-0123"
    config_for = scoped_inspector_config(
        config, SITE, token, now - timedelta(days=2), now + timedelta(days=1), "warn-secret", ian + ann + bob
    )
    plan, status = f"/sites/{SITE}/plan", f"/sites/{SITE}/status"
    with portal_serving(config_for, tmp_path / "portal.log") as (port, _):

        def client() -> Client:
            return Client(SimpleNamespace(port=port))  # type: ignore[arg-type]

        operator, town, ida, ian_client = client(), client(), client(), client()
        assert operator.login("ann").status == 303 and town.login("bob").status == 303
        assert ida.login("ida").status == 303 and ian_client.login("ian", IAN_PASSWORD).status == 303
        pages = {
            who: (c.get(plan), c.get(status), c.get(f"{status}/live"), c.get(f"/api/v1{status}"))
            for who, c in (("operator", operator), ("town", town), ("ida", ida), ("ian", ian_client))
        }
        ida_api = client().get(f"/api/v1{status}", headers={"Authorization": f"Bearer {token}"})

    # The operator: n3 warned of on the plan, the status page, its live part and the API.
    op_plan, op_status, op_live, op_api = pages["operator"]
    assert (op_plan.status, op_status.status, op_live.status, op_api.status) == (200, 200, 200, 200)
    assert _states(op_plan.body) == {"n1": "ok", "n2": "ok", "n3": "early_warning", "n4": "ok"}
    assert _states(op_status.body)["n3"] == "early_warning"  # the status page's plan
    assert _status_states(op_status.body)["n3"] == _status_states(op_live.body)["n3"] == "early warning"
    assert json.loads(op_api.body)["sensors"]["n3"]["state"] == "early_warning"
    assert "early_warning" in _legend(op_plan.body) and "n3 nears the limit" in op_live.body
    assert "or an early warning of the last 24 hours" in html.unescape(op_plan.body)
    # The Town and the inspectors: n3 is ok, the legend and the hint name no early warning, and
    # the status (page, live part, API) is not theirs.
    for who in ("town", "ida", "ian"):
        reader_plan, reader_status, reader_live, reader_api = pages[who]
        assert reader_plan.status == 200, who
        assert _states(reader_plan.body) == {"n1": "ok", "n2": "ok", "n3": "ok", "n4": "ok"}, who
        assert _legend(reader_plan.body) == ["ok", "violation", "offline"], who
        assert "early warning" not in html.unescape(reader_plan.body), who
        assert (reader_status.status, reader_live.status, reader_api.status) == (403, 403, 403), who
        assert "nears the limit" not in reader_plan.body + reader_status.body + reader_live.body
    assert ida_api.status == 403 and "nears the limit" not in ida_api.body


def test_every_early_warning_of_the_24_hours_colours_however_many_were_raised(tmp_path: Path) -> None:
    """1,001 early warnings in the status's 24 hours: the newest 1,000 name n3, the oldest alone
    names n4. n4 is warned of too: for a reader with no time scope the monitors named are read
    at once (queries.sensors_alerted), for a time-scoped one every warning is read, each through
    its bundle's check (the facade's: no account the warnings are addressed to has a scope)."""
    now = datetime(2026, 12, 3, 18, 0, 30, tzinfo=UTC)
    config, text = _demo(tmp_path)
    store = Store(tmp_path / "store.db")
    _online(store, now)
    with store.batch():
        _warn(store, "W-n4", "n4", now - timedelta(hours=23))
        for i in range(1000):
            _warn(store, f"W-n3-{i:04d}", "n3", now - timedelta(hours=22) + timedelta(seconds=i))
    store.close()
    portal = Portal(parse_config(text, str(config)), clock=lambda: now)
    operator = Scope(User("ann", "operator", ()), portal.config)
    scoped = Scope(
        User("ann", "operator", (), now - timedelta(days=2), now + timedelta(days=1)), portal.config
    )
    town = Scope(User("bob", "town", ()), portal.config)

    def plan_states(scope: Scope) -> dict[str, str]:
        return {m["id"]: m["state"] for m in portal.plan(scope, SITE)["monitors"] if m["id"] in SOUND}

    warned = {"n1": "ok", "n2": "ok", "n3": "early_warning", "n4": "early_warning"}
    assert plan_states(scoped) == warned
    assert plan_states(operator) == warned
    assert {
        k: v["state"] for k, v in portal.status(operator, SITE)["sensors"].items() if k in SOUND
    } == warned
    assert set(plan_states(town).values()) == {"ok"}
    portal.store().close()
