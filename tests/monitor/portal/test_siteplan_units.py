"""The site plan without a browser: the status's one state per monitor, read from a real SQLite
store, and the SVG drawn from the demo site's configuration (an element for each configured
thing, colours by state, links to the charts, the public page's allow-list)."""

from __future__ import annotations

import dataclasses
import json
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from monitor.config import Config, parse_config
from monitor.journal.store import Store
from monitor.portal import siteplan
from monitor.portal.data import Portal, Scope, User
from rules.model import SoundLevels
from tests.support.notices import store_findings, violation
from tests.support.paths import REPO

DEMO = REPO / "sensors" / "demo" / "dovre-demo.toml"
SITE = "dovre-quarry"
NOW = datetime(2026, 6, 15, 16, 0, 30, tzinfo=UTC)
SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture
def config(tmp_path: Path) -> Config:
    text = DEMO.read_text().replace('path = "minewatch-demo.db"', f'path = "{tmp_path / "store.db"}"')
    return parse_config(text, str(DEMO))


@pytest.fixture
def store(config: Config) -> Iterator[Store]:
    s = Store(config.storage.path)
    yield s
    s.close()


def scope(config: Config, role: str, **times: datetime) -> Scope:
    return Scope(User("someone", role, (), times.get("not_before"), times.get("not_after")), config)


def fill(store: Store) -> None:
    """n1 quiet, n2 with a violation an hour ago, n3 warned of, the others silent."""
    with store.batch():
        for sensor in ("n1", "n2", "n3"):
            for s in range(60):
                ts = NOW - timedelta(seconds=60 - s)
                levels = SoundLevels(SITE, sensor, ts, 1.0, 55.0, 56.0, 70.0)
                store.append_sound(levels, source="levels", late=False, now=NOW)
    first = NOW - timedelta(hours=1)
    store_findings(
        store,
        [
            dataclasses.replace(violation(first + timedelta(minutes=i), sensor="n2"), site=SITE)
            for i in range(3)
        ],
        NOW,
    )
    with store.batch():
        store.append_alert(
            "A-1",
            SITE,
            "operator",
            "early_warning",
            "warning",
            "early:noise:n3",
            "n3 nears the limit",
            {"sensors": ["n3"], "standard": "noise"},
            NOW - timedelta(minutes=5),
        )


def test_a_monitors_state_is_offline_then_violation_then_early_warning_then_ok() -> None:
    assert siteplan.monitor_state(False, True, True) == "offline"
    assert siteplan.monitor_state(True, True, True) == "violation"
    assert siteplan.monitor_state(True, False, True) == "early_warning"
    assert siteplan.monitor_state(True, False, False) == "ok"


def test_the_status_gives_each_monitor_its_state_and_the_plan_draws_that_one(
    config: Config, store: Store
) -> None:
    fill(store)
    portal = Portal(config, clock=lambda: NOW)
    operator = scope(config, "operator")
    status = portal.status(operator, SITE)
    states = {k: v["state"] for k, v in status["sensors"].items()}
    assert states == {
        "n1": "ok",
        "n2": "violation",
        "n3": "early_warning",
        "n4": "offline",
        "l1": "offline",
        "l2": "offline",
        "sky1": "offline",
        "wx1": "offline",
        "sg1": "offline",
    }
    # The status's own episode list names n2: the plan's red is the list's episode.
    assert [e["sensors"] for e in status["episodes_24h"]] == [["n2"]]
    plan = portal.plan(operator, SITE, lambda s: f"/sites/{SITE}/day?sensor={s}")
    assert {m["id"]: m["state"] for m in plan["monitors"]} == states
    assert plan["as_of"] == "2026-06-15T16:00:30Z"
    drawn = ET.fromstring(siteplan.svg(plan))
    fills = {
        a.get("data-sensor"): a.find(f"{SVG}circle").get("fill")  # type: ignore[union-attr]
        for a in drawn.iter(f"{SVG}a")
    }
    assert fills["n1"] == siteplan.STATE_COLOURS["ok"] == "#2e7d32"
    assert fills["n2"] == siteplan.STATE_COLOURS["violation"] == "#c62828"
    assert fills["n3"] == siteplan.STATE_COLOURS["early_warning"] == "#f9a825"
    assert fills["l1"] == siteplan.STATE_COLOURS["offline"] == "#757575"


def test_an_inspector_scoped_to_the_past_sees_the_plan_but_not_the_present_states(
    config: Config, store: Store
) -> None:
    fill(store)
    portal = Portal(config, clock=lambda: NOW)
    past = scope(config, "inspector", not_before=NOW - timedelta(days=60), not_after=NOW - timedelta(days=30))
    plan = portal.plan(past, SITE)
    assert {m["state"] for m in plan["monitors"]} == {"not_shown"}
    assert plan["as_of"] is None
    current = scope(config, "inspector", not_before=NOW - timedelta(days=2))
    assert {m["id"]: m["state"] for m in portal.plan(current, SITE)["monitors"]}["n2"] == "violation"


def test_the_svg_has_an_element_for_each_configured_thing(config: Config) -> None:
    site = config.sites[0]
    plan = siteplan.view(site, siteplan.ALL_LAYERS, {"n1": "ok"}, lambda s: f"/sites/{SITE}/day?sensor={s}")
    drawn = ET.fromstring(siteplan.svg(plan))
    assert drawn.get("viewBox") == f"0 0 800 {plan['height']:g}" and drawn.get("width") is None

    def of(cls: str) -> list[ET.Element]:
        return [e for e in drawn.iter() if (e.get("class") or "").split()[:1] == [cls]]

    [boundary] = of("boundary")
    assert len(boundary.get("points", "").split()) == len(site.boundary) == 5
    assert [p.get("data-parcel") for p in of("parcel")] == ["conveyor-east"]
    assert [g.get("data-gate") for g in of("gate")] == ["gate-north", "gate-east"]
    assert [d.get("data-dwelling") for d in of("dwelling")] == ["hansen", "olsen", "lindgren"]
    monitors = of("monitor")
    assert [m.get("data-sensor") for m in monitors] == [s.id for s in site.sensors]
    assert {m.get("href") for m in monitors} == {f"/sites/{SITE}/day?sensor={s.id}" for s in site.sensors}
    assert [m.get("data-state") for m in monitors][:2] == ["ok", "not_shown"]  # n2 has no state given
    [bar] = of("scale-bar")
    assert bar.get("data-metres") == "200"
    assert len(of("north-arrow")) == 1


def test_the_scale_bar_is_as_long_as_its_metres_on_the_plan(config: Config) -> None:
    """The bar's canvas length over the canvas distance of two monitors equals their metres ratio."""
    site = config.sites[0]
    plan = siteplan.view(site, siteplan.ALL_LAYERS)
    frame = siteplan.canvas(site)
    assert frame is not None
    n2, n3 = (next(s for s in site.sensors if s.id == i).position for i in ("n2", "n3"))
    assert n2 is not None and n3 is not None
    (u1, v1), (u2, v2) = frame.at(n2), frame.at(n3)
    canvas_units = ((u2 - u1) ** 2 + (v2 - v1) ** 2) ** 0.5
    from monitor import geo

    metres = geo.great_circle_m(n2, n3)
    assert canvas_units / plan["scale_units"] * plan["scale_m"] == pytest.approx(metres, rel=0.01)
    # A click on the canvas goes back to the point drawn there.
    assert frame.latlon(u1, v1) == pytest.approx(n2, abs=1e-7)


def test_the_public_plan_shows_the_boundary_gates_and_unnamed_dwellings_only(config: Config) -> None:
    site = config.sites[0]
    plan = siteplan.view(site, siteplan.PUBLIC_LAYERS)
    assert set(plan) == {
        "site", "name", "layers", "drawn", "missing", "width", "height", "scale_m", "scale_units",
        "boundary", "gates", "dwellings",
    }  # fmt: skip
    text = siteplan.svg(plan)
    assert 'class="monitor' not in text and 'class="parcel' not in text and "data-sensor" not in text
    assert "Hansen" not in text and "Olsen" not in json.dumps(plan)
    assert [d["name"] for d in plan["dwellings"]] == ["dwelling"] * 3
    assert "North gate on 10th Avenue" in text
