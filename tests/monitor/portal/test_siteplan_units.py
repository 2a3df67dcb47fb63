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

from monitor import geo
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


def intersecting(placed: dict[str, siteplan.Label], plan: dict[str, object]) -> list[tuple[str, str]]:
    """Pairs of labels whose boxes meet, and labels over a mark (other than their own)."""
    out = []
    keys = sorted(placed)
    for i, a in enumerate(keys):
        for b in keys[i + 1 :]:
            if placed[a].box.meets(placed[b].box):
                out.append((a, b))
    marks = siteplan._mark_boxes(plan)
    for key, label in placed.items():
        out += [(key, mark) for mark, box in marks.items() if label.box.meets(box)]
    return out


def test_no_label_prints_over_another_on_the_demo_plan(config: Config) -> None:
    """sky1 and wx1 stand 18 m apart in the processing yard: their labels printed over each
    other; sg1 stands at the Hansen farmstead."""
    site = config.sites[0]
    for layers, font in ((siteplan.ALL_LAYERS, siteplan.FONT_UNITS), (siteplan.PUBLIC_LAYERS, 34.0)):
        plan = siteplan.view(site, layers)
        placed = siteplan.labels(plan, font)
        expected = len(plan.get("monitors", ())) + len(plan["gates"]) + len(plan["dwellings"])
        assert len(placed) == expected + len(plan.get("parcels", ()))
        assert intersecting(placed, plan) == []
        for label in placed.values():  # on the canvas, above the scale bar
            assert label.box.x0 >= 0 and label.box.x1 <= plan["width"]
            assert label.box.y0 >= 0 and label.box.y1 <= plan["height"] - siteplan.FOOT
        # Deterministic: the same plan, the same places.
        assert siteplan.labels(plan, font) == placed
    plan = siteplan.view(site, siteplan.ALL_LAYERS)
    placed = siteplan.labels(plan)
    assert not placed["monitor:sky1"].box.meets(placed["monitor:wx1"].box)
    # Each label is drawn where it was placed.
    drawn = ET.fromstring(siteplan.svg(plan))
    texts = {
        "".join(t.itertext()): (float(t.get("x", "0")), float(t.get("y", "0")))
        for t in drawn.iter(f"{SVG}text")
        if "monitor-label" in (t.get("class") or "")
    }
    assert texts["sky1"] == (round(placed["monitor:sky1"].x, 1), round(placed["monitor:sky1"].y, 1))


def test_labels_of_monitors_standing_together_are_set_apart(config: Config) -> None:
    """Every monitor of the demo moved onto one point (and a gate and a dwelling a metre away):
    each label finds its own place around them, joined to its mark by a leader line when set
    further out."""
    site = config.sites[0]
    point = (45.27050, -91.61900)
    crowded = dataclasses.replace(
        site,
        sensors=tuple(
            dataclasses.replace(s, position=(point[0] + i * 1e-6, point[1]))
            for i, s in enumerate(site.sensors)
        ),
        gates=tuple(dataclasses.replace(g, position=(point[0], point[1] + 1e-5)) for g in site.gates),
        dwellings=tuple(
            dataclasses.replace(d, position=(point[0] - 1e-5, point[1])) for d in site.dwellings[:1]
        )
        + site.dwellings[1:],
    )
    plan = siteplan.view(crowded, siteplan.ALL_LAYERS)
    placed = siteplan.labels(plan)
    assert len([k for k in placed if k.startswith("monitor:")]) == len(site.sensors) == 9
    # Nine monitors on one point hide each other's marks; their labels must still not meet
    # each other or any label of the gates and dwellings beside them.
    keys = sorted(placed)
    pairs = [(a, b) for i, a in enumerate(keys) for b in keys[i + 1 :] if placed[a].box.meets(placed[b].box)]
    assert pairs == []
    assert any(label.leader for label in placed.values())
    text = siteplan.svg(plan)
    assert text.count('class="leader"') == sum(label.leader for label in placed.values())


def test_place_labels_takes_the_first_free_side_nearest_the_preferred_one() -> None:
    mark = siteplan.Box(100, 100, 110, 110)
    [east] = siteplan.place_labels([("a", "label", mark, (1.0, 0.0))], [mark], 400, 400, 20)
    assert east.anchor == "start" and east.box.x0 == 110 + siteplan.LABEL_GAP and not east.leader
    # East, north-east and south-east taken by another mark: north, the next side by angle
    # (before south, on the first ring).
    other = siteplan.Box(114, 90, 160, 120)
    [moved] = siteplan.place_labels([("a", "label", mark, (1.0, 0.0))], [mark, other], 400, 400, 20)
    assert moved.anchor == "middle" and moved.box.y1 == 100 - siteplan.LABEL_GAP and not moved.leader
    assert not moved.box.meets(other)
    # Every side of the first ring taken: further out, with a leader line.
    ring = siteplan.Box(60, 60, 150, 150)
    [far] = siteplan.place_labels([("a", "label", mark, (1.0, 0.0))], [mark, ring], 400, 400, 20)
    assert far.leader and not far.box.meets(ring)
    # No room on the canvas's left edge: never outside it.
    edge = siteplan.Box(0, 100, 10, 110)
    [kept] = siteplan.place_labels([("a long name", "label", edge, (-1.0, 0.0))], [edge], 400, 400, 20)
    assert kept.box.x0 >= 2


def test_a_click_on_the_complaint_plan_is_mapped_by_the_width_it_was_drawn_at(config: Config) -> None:
    """The same point clicked on the plan drawn 340 px wide (no JavaScript: no pick_width) and
    720 px wide (the page's script sends pick_width) is the same place; a pick_width that is no
    width is refused naming the field."""
    from starlette.datastructures import FormData

    from monitor.portal.complaint_pages import PICK_WIDTH_PX, picked
    from monitor.portal.data import Refused

    site = config.sites[0]
    frame = siteplan.canvas(site, siteplan.PUBLIC_LAYERS)
    assert frame is not None
    gate = next(g.position for g in site.gates if g.id == "gate-east")
    assert gate is not None
    u, v = frame.at(gate)
    for width in (PICK_WIDTH_PX, 720.0):
        px, py = u * width / siteplan.WIDTH, v * width / siteplan.WIDTH
        form = {f"pick-{site.id}.x": f"{px:.3f}", f"pick-{site.id}.y": f"{py:.3f}"}
        if width != PICK_WIDTH_PX:
            form["pick_width"] = f"{width:g}"
        point = picked(FormData(form), site)
        assert geo.great_circle_m(point, gate) < 0.01, (width, point)
    # The script's width at the 390-px phone, with a fraction of a pixel.
    px, py = u * 358.4 / siteplan.WIDTH, v * 358.4 / siteplan.WIDTH
    form = {f"pick-{site.id}.x": str(px), f"pick-{site.id}.y": str(py), "pick_width": "358.4"}
    assert geo.great_circle_m(picked(FormData(form), site), gate) < 0.01
    for bad in ("wide", "0", "-340", "nan", "1e9"):
        form["pick_width"] = bad
        with pytest.raises(Refused, match=r"^pick_width: expected the plan's width in pixels, 100 to 4000"):
            picked(FormData(form), site)
