"""A site on the land-disturbing profile (§ 28-5) through the real daemon and a real Mosquitto.

Operator records of the profile's own kinds and turbidity readings go in over MQTT; the
daemon's store must hold violations citing each 28-5 section. The data clock lets the test
cross a local midnight, where the day's deadlines (21 calendar days, 15 working days) pass.
"""

from __future__ import annotations

import sqlite3
import zipfile
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from monitor.config import load_config
from monitor.evidence import export_bundle, verify_bundle
from monitor.wire.protocol import format_ts
from rules.deadlines import last_day
from rules.profile import load_profile
from tests.support.daemon import Client, Daemon, store_count, wait_until
from tests.support.land_disturbing import tract_toml
from tests.support.servers import Mosquitto

TZ = ZoneInfo("America/New_York")
CONFIG = """
[broker]
url = "{broker_url}"
client_id = "minewatch-land-test"
protocol = "5"

[storage]
path = "{store}"

[daemon]
clock = "data"
max_age_s = 300000000    # the records reach weeks back (plans, exposed slopes)
lateness_s = 600
status_interval_s = 5
anchor_interval_s = 30

{tract}
[[sites]]
id = "dock"
name = "Boat dock"
timezone = "America/New_York"
latitude = 35.79
longitude = -78.65
profile = "land-disturbing"
flags = {{ activity_over_water = true }}   # 28-5(a)(1)
[[sites.sensors]]
id = "t1"
kind = "turbidity"
placement = "buffer_line"
expected_period_s = 60
[[sites.sensors]]
id = "r1"
kind = "turbidity"
placement = "reference"
expected_period_s = 60
"""

# Tuesday 9 June 2026, 23:40 local: the run crosses midnight into Wednesday 10 June.
T0 = datetime(2026, 6, 9, 23, 40, tzinfo=TZ).astimezone(UTC)
MINUTES = 46
READINGS = 5  # a minute's readings: t1 and r1 at both sites, b1 at the tract


def local(text: str) -> str:
    return format_ts(datetime.fromisoformat(text).replace(tzinfo=TZ).astimezone(UTC))


def findings(store: Path, site: str) -> set[tuple[str, str, str]]:
    conn = sqlite3.connect(store, timeout=30)
    try:
        rows = conn.execute("SELECT standard, kind, section FROM findings WHERE site = ?", (site,)).fetchall()
    finally:
        conn.close()
    return {(r[0], r[1], r[2]) for r in rows}


def test_land_disturbing_site_through_the_daemon(tmp_path: Path, mosquitto: Mosquitto) -> None:
    # The records below put both deadlines at the end of 9 June; check that against the rules.
    ground_cover = load_profile("land-disturbing").params("ground_cover")
    assert last_day(date(2026, 5, 19), 90, 15, ground_cover.calendar) == date(2026, 6, 9)

    config = tmp_path / "minewatch.toml"
    store = tmp_path / "store.db"
    tract = tract_toml(flags="flags = { landfill_permit = false }")
    config.write_text(CONFIG.format(broker_url=mosquitto.url, store=store, tract=tract))
    daemon = Daemon(config).start()
    daemon.wait_ready()
    watcher = Client(mosquitto.port, "watcher", ("minewatch/tract/violations",))
    pub = Client(mosquitto.port, "publisher")

    def reading(site: str, sensor: str, minute: int, ntu: float) -> None:
        ts = T0 + timedelta(minutes=minute)
        pub.publish(
            f"minewatch/{site}/sensors/{sensor}/turbidity",
            {"ts": format_ts(ts), "duration_s": 60, "ntu": ntu},
        )

    def minute_of_readings(minute: int) -> None:
        for site in ("tract", "dock"):
            reading(site, "t1", minute, 40.0)  # 30 NTU above the reference: siltation past the line
            reading(site, "r1", minute, 10.0)
        reading("tract", "b1", minute, 40.0)  # and sediment leaving the tract (28-5(d))

    try:
        # The first readings start each site's evaluation at T0.
        minute_of_readings(0)
        assert wait_until(lambda: store_count(store, "SELECT COUNT(*) FROM readings") == READINGS, 20), (
            daemon.logs()
        )
        records: list[tuple[str, dict[str, Any]]] = [
            # 28-5(b): exposed on 19 May, day 21 is 9 June, still exposed at midnight.
            ("slope-exposed", {"id": "s-3", "ts": local("2026-05-19 15:00"), "area_sqft": 1800}),
            # 28-5(d): completed on 19 May; the 15th working day after is 9 June.
            ("construction-completed", {"id": "lot-7", "ts": local("2026-05-19 16:00"), "area_sqft": 12000}),
            # 28-5(e): plan filed 20 days before the start (not 30), approved before it.
            ("plan-filed", {"id": "P-9", "ts": local("2026-05-20 10:00")}),
            ("plan-approved", {"id": "P-9", "ts": local("2026-06-01 10:00")}),
            # ... and 28-5(d): 9,000 square feet uncovered with no erosion control devices declared,
            # the area under which the sediment at b1 is judged from 23:50 (no area is configured).
            ("disturbance-started", {"id": "lot-9", "ts": local("2026-06-09 23:50"), "area_sqft": 9000,
                                     "plan_id": "P-9"}),
            # 28-5(c): organic fill, and no landfill permit on file.
            ("fill-delivery", {"id": "load-1", "ts": local("2026-06-10 00:05"),
                               "material": "topsoil and stumps", "max_piece_in": 0, "organic": True}),
        ]  # fmt: skip
        for kind, payload in records:
            pub.publish(f"minewatch/tract/events/{kind}", payload)
        assert wait_until(lambda: store_count(store, "SELECT COUNT(*) FROM events") == len(records), 20), (
            daemon.logs()
        )
        for minute in range(1, MINUTES):
            minute_of_readings(minute)
        assert wait_until(
            lambda: store_count(store, "SELECT COUNT(*) FROM readings") == READINGS * MINUTES, 30
        ), daemon.logs()

        expected = {
            ("buffer_zone", "violation", "28-5(a)"),
            ("slopes", "violation", "28-5(b)"),
            ("fill_material", "violation", "28-5(c)"),
            ("erosion_control", "violation", "28-5(d)"),
            ("sediment_on_tract", "violation", "28-5(d)"),
            ("ground_cover", "violation", "28-5(d)"),
            ("prior_plan", "violation", "28-5(e)"),
        }
        assert wait_until(lambda: expected <= findings(store, "tract"), 30), (
            findings(store, "tract"),
            daemon.logs(),
        )
        # The dock works on, over or under the water: the same turbidity is exempt (28-5(a)(1)).
        dock = findings(store, "dock")
        assert ("buffer_zone", "exempt_exceedance", "28-5(a)") in dock
        assert not any(kind == "violation" for _, kind, _ in dock)
        # The violations went out on the site's violations topic too, citing their sections.
        assert wait_until(
            lambda: {m["section"] for m in watcher.received("/violations")} >= {s for _, _, s in expected}, 15
        ), watcher.received("/violations")
        assert store_count(store, "SELECT COUNT(*) FROM rejections") == 0, daemon.logs()
        assert "Traceback" not in daemon.logs()
        # The same notice machinery as for noise: one notice per standard, LDA prefix, 28-5 sections.
        assert wait_until(lambda: notices(store) >= {(s, sec) for s, _, sec in expected}, 15), notices(store)
        assert daemon.alive()
    finally:
        code = daemon.stop()
        watcher.close()
        pub.close()
    assert code == 0, daemon.logs()
    # ... and the same evidence bundles: the violations with the records and readings they cite.
    bundle = tmp_path / "tract.zip"
    export_bundle(load_config(config), "tract", T0 - timedelta(days=30), T0 + timedelta(days=1), bundle)
    report = verify_bundle(bundle)
    assert report.ok, report.lines()
    with zipfile.ZipFile(bundle) as zf:
        text = zf.read("records/findings.json").decode()
        event_text = zf.read("records/events.json").decode()
        turbidity_rows = zf.read("data/turbidity.csv").decode().splitlines()
    for _, _, section in expected:
        assert section in text
    assert "slope-exposed" in event_text and "fill-delivery" in event_text
    assert len(turbidity_rows) > MINUTES  # header + the two sensors' readings


def notices(store: Path) -> set[tuple[str, str]]:
    if not store.exists():
        return set()
    conn = sqlite3.connect(store)
    try:
        rows = conn.execute("SELECT id, standard, section FROM notices WHERE site = 'tract'").fetchall()
    except sqlite3.OperationalError:
        return set()
    finally:
        conn.close()
    assert all(notice_id.startswith("LDA-") for notice_id, _, _ in rows)
    return {(standard, section) for _, standard, section in rows}
