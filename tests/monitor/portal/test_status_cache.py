"""The operator's status, live status and status page computed once per change of the store
(the site's chain head) or step of the status moment, and shared between requests and accounts
(monitor.portal.data.LiveCache); what a week or month view reads again after a new second or
light reading (HourCache, LightCache, CountCache).

A real SQLite store (the demo site's configuration, filled as test_siteplan_units fills it) and
the facade called directly; what a request does is counted in SQLite statements (the
connection's trace callback), not timed."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from monitor.config import Config
from monitor.journal.store import Store
from monitor.portal import periods
from monitor.portal.data import Portal
from monitor.wire.canonical import to_us
from rules.model import LightSummary, SoundLevels
from tests.monitor.portal.test_periods import CHICAGO, _second
from tests.monitor.portal.test_periods import _portal as period_portal
from tests.monitor.portal.test_siteplan_units import NOW, SITE, fill, scope
from tests.monitor.portal.test_siteplan_units import config as config  # the fixture
from tests.support.notices import store_findings, violation

HEAD = f"SELECT MAX(seq) FROM chain WHERE site = '{SITE}'"


@pytest.fixture
def store(config: Config) -> Iterator[Store]:
    s = Store(config.storage.path)
    fill(s)
    yield s
    s.close()


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def statements(portal: Portal) -> Callable[[], list[str]]:
    """Every SQL statement the portal's connection (this thread's) runs from here on."""
    seen: list[str] = []
    portal.store().conn.set_trace_callback(seen.append)

    def taken() -> list[str]:
        done = list(seen)
        seen.clear()
        return done

    return taken


def test_a_second_request_with_the_store_unchanged_reads_only_the_chain_head(
    config: Config, store: Store
) -> None:
    clock = Clock(NOW)
    portal = Portal(config, clock=clock)
    operator = scope(config, "operator")
    taken = statements(portal)
    page = portal.status_page(operator, SITE, 30)
    first = taken()
    assert len(first) > 20  # status, trends, warnings, findings, blast reports, forecasts
    assert page["status"]["sensors"]["n2"]["state"] == "violation"
    # The same second, the same head: the kept facts, one indexed lookup each.
    clock.now = NOW + timedelta(milliseconds=900)
    assert portal.status_page(operator, SITE, 30) is page
    assert taken() == [HEAD]
    assert portal.live_status(operator, SITE)["status"] is page["status"]
    assert taken() == [HEAD]
    assert portal.status(operator, SITE) is page["status"]
    assert taken() == [HEAD]
    # Another operator account with the same scope shares them (keyed by scope, not by name).
    colleague = dataclasses.replace(operator, user=dataclasses.replace(operator.user, name="colleague"))
    assert portal.status_page(colleague, SITE, 30) is page
    assert taken() == [HEAD]
    # The next second: the status is told as of then, computed again.
    clock.now = NOW + timedelta(seconds=1)
    later = portal.status_page(operator, SITE, 30)
    assert later is not page and later["status"]["ts"] == "2026-06-15T16:00:31Z"
    assert len(taken()) > 20


def test_the_status_changes_when_a_reading_or_a_finding_arrives(config: Config, store: Store) -> None:
    portal = Portal(config, clock=lambda: NOW)
    operator = scope(config, "operator")
    taken = statements(portal)
    before = portal.live_status(operator, SITE)
    assert len(portal.status_page(operator, SITE, 30)["findings"]) == 3
    assert "LAeq_1min" not in before["status"]["sensors"]["n4"]
    assert before["status"]["sensors"]["n4"]["state"] == "offline"
    assert before["status"]["sensors"]["n1"]["state"] == "ok"
    assert before["trends"]["n4"]["minutes"] == 0
    taken()
    # A second of n4 in the last minute (the daemon's connection, not the portal's).
    with store.batch():
        levels = SoundLevels(SITE, "n4", NOW - timedelta(seconds=10), 1.0, 61.0, 62.0, 75.0)
        store.append_sound(levels, source="levels", late=False, now=NOW)
    reading = portal.live_status(operator, SITE)
    assert len(taken()) > 1  # read again
    assert reading["status"]["sensors"]["n4"]["LAeq_1min"] == 61.0
    assert reading["status"]["sensors"]["n4"]["state"] == "ok"
    assert reading["trends"]["n4"]["minutes"] == 1
    assert portal.live_status(operator, SITE) is reading and taken() == [HEAD]
    # A violation at n1: its state and the status's count of findings follow.
    store_findings(
        store, [dataclasses.replace(violation(NOW - timedelta(minutes=20), sensor="n1"), site=SITE)], NOW
    )
    found = portal.live_status(operator, SITE)["status"]
    assert found["sensors"]["n1"]["state"] == "violation"
    assert found["findings_24h"]["violation"] == before["status"]["findings_24h"]["violation"] + 1
    assert len(portal.status_page(operator, SITE, 30)["findings"]) == 4  # today's, on the page


def test_roles_share_the_status_and_each_sees_only_its_fields(config: Config, store: Store) -> None:
    portal = Portal(config, clock=lambda: NOW)
    operator, town = scope(config, "operator"), scope(config, "town")
    past = scope(config, "inspector", not_before=NOW - timedelta(days=60), not_after=NOW - timedelta(days=30))
    status = portal.status(operator, SITE)
    assert status["sensors"]["n1"]["LAeq_1min"] == 55.0 and "calibration" not in status["sensors"]["n1"]
    taken = statements(portal)
    # The Town's site plan makes its states of the facts kept for the operator's status (no
    # recomputation: the chain head, for its states and for the facts, is all it reads; no early
    # warning is read, none being the Town's) and carries only the plan's fields: no levels,
    # batteries or clock offsets.
    plan = portal.plan(town, SITE)
    assert taken() == [HEAD, HEAD]
    # The same states but n3's: its early warning is the operator's alone.
    assert status["sensors"]["n3"]["state"] == "early_warning"
    assert {m["id"]: m["state"] for m in plan["monitors"]} == {
        k: "ok" if k == "n3" else v["state"] for k, v in status["sensors"].items()
    }
    assert {key for m in plan["monitors"] for key in m} == {
        "id", "kind", "placement", "location", "at", "state", "chart",
    }  # fmt: skip
    told = json.dumps(plan)
    assert not re.search(r"LAeq_1min|battery_pct|clock_offset_s|last_ts|findings_24h|episodes_24h", told)
    # An inspector scoped to the past: no states at all, though the cache holds them.
    assert {m["state"] for m in portal.plan(past, SITE)["monitors"]} == {"not_shown"}


def test_the_live_status_is_kept_per_allowed_window_never_crossing_time_scopes(
    config: Config, store: Store
) -> None:
    """Two operators, one whose time scope starts at 16:00: each gets the trend its scope allows."""
    portal = Portal(config, clock=lambda: NOW)
    everyone = scope(config, "operator")
    from_four = scope(config, "operator", not_before=NOW.replace(minute=0, second=0))
    full = portal.live_status(everyone, SITE)
    cut = portal.live_status(from_four, SITE)
    assert full["trends"]["n1"]["minutes"] == 2  # 15:59 and 16:00
    assert cut["trends"]["n1"]["minutes"] == 1  # 16:00 only
    assert portal.live_status(everyone, SITE) is full
    assert portal.live_status(from_four, SITE) is cut
    # The site's facts depend on no window; the states are each reader's (kept per Sight): a
    # scope from 16:00 does not cover the status's 24 hours, and is shown none.
    assert cut["status"]["episodes_24h"] is full["status"]["episodes_24h"]
    assert {k: v for k, v in cut["status"].items() if k != "sensors"} == {
        k: v for k, v in full["status"].items() if k != "sensors"
    }
    assert full["status"]["sensors"]["n2"]["state"] == "violation"
    assert {s["state"] for s in cut["status"]["sensors"].values()} == {"not_shown"}


def test_a_month_view_after_a_new_second_reads_only_that_hour_again(tmp_path: Path) -> None:
    """An ingest that advances the chain head does not recompute the month's hours: only the
    hour that gained a second is read from the kept histograms (sound_hours)."""
    now = datetime(2026, 6, 20, 12, tzinfo=CHICAGO)
    portal, store, inspector = period_portal(tmp_path, now)
    nine = datetime(2026, 6, 10, 9, tzinfo=CHICAGO)
    for hour in range(48):
        for s in range(0, 3600, 600):
            _second(store, "n1", nine + timedelta(hours=hour, seconds=s), 50.0 + hour % 7)
    with store.batch():  # as the daemon counts each hour once its data has moved on
        store.keep_sound_hours("s1", to_us(nine + timedelta(hours=48)) // 3_600_000_000)
    month = periods.aligned("month", nine, CHICAGO)
    view, _ = portal.period_view(inspector, "s1", month)
    assert len(view["sound"]["n1"]) == 48
    taken = statements(portal)
    assert portal.period_view(inspector, "s1", month)[0] is view
    assert taken() == ["SELECT MAX(seq) FROM chain WHERE site = 's1'"]
    _second(store, "n1", nine + timedelta(hours=30, minutes=5, seconds=1), 80.0)
    changed, _ = portal.period_view(inspector, "s1", month)
    hours_read = [
        (int(lo), int(hi))
        for st in taken()
        for lo, hi in re.findall(r"FROM sound_hours WHERE site = 's1' AND hour >= (\d+) AND hour < (\d+)", st)
    ]
    assert len(hours_read) == 1 and hours_read[0][1] - hours_read[0][0] == 1
    differ = [
        i for i, (a, b) in enumerate(zip(view["sound"]["n1"], changed["sound"]["n1"], strict=True)) if a != b
    ]
    assert differ == [30]
    fresh, _ = Portal(inspector.config, clock=lambda: now).period_view(inspector, "s1", month)
    assert fresh["sound"] == changed["sound"]
    store.close()


def _lux(store: Store, sensor: str, when: datetime, mean: float, peak: float) -> None:
    with store.batch():
        summary = LightSummary("s1", sensor, when, 10.0, mean, 0.0, peak)
        payload = {"ts": when.isoformat(), "lux_mean": mean, "lux_min": 0.0, "lux_max": peak}
        store.append_reading(summary, payload, late=False, now=when)


def test_a_week_view_after_a_new_light_reading_reads_and_counts_only_that_hour_of_that_sensor_again(
    tmp_path: Path,
) -> None:
    """The light and sky panels and the Sensors table's counts are kept as the sound hours are
    (LightCache, CountCache): a reading chained since makes only its sensor's hour be read and
    counted again, and the view equals a fresh one."""
    now = datetime(2026, 6, 20, 12, tzinfo=CHICAGO)
    portal, store, inspector = period_portal(tmp_path, now)
    nine = datetime(2026, 6, 10, 9, tzinfo=CHICAGO)
    for hour in range(24):
        for k in range(0, 3600, 900):
            _lux(store, "l1", nine + timedelta(hours=hour, seconds=k), 0.5 + hour, 2.0 + hour)
            _lux(store, "sky1", nine + timedelta(hours=hour, seconds=k + 5), 0.01 * hour, 0.02 * hour)
    week = periods.aligned("week", nine, CHICAGO)
    view, _ = portal.period_view(inspector, "s1", week)
    assert [len(view["light"][s]) for s in ("l1", "sky1")] == [24, 24]
    assert view["light"]["l1"][3] == ("2026-06-10T17:00:00Z", 3.5, 5.0)
    assert {s["id"]: s["readings"] for s in view["sensors"]} == {"n1": None, "n4": None, "l1": 96, "sky1": 96}
    taken = statements(portal)
    _lux(store, "l1", nine + timedelta(hours=3, minutes=40), 13.5, 40.0)  # in the 4th hour
    changed, _ = portal.period_view(inspector, "s1", week)
    done = taken()
    light_reads = [st for st in done if "json_extract(data, '$.lux_mean')" in st]
    assert len(light_reads) == 1 and "sensor = 'l1'" in light_reads[0]
    lo, hi = map(int, re.findall(r"ts_us >= (\d+) AND ts_us < (\d+)", light_reads[0])[0])
    assert hi - lo == 3_600_000_000
    assert changed["light"]["l1"][3] == ("2026-06-10T17:00:00Z", 5.5, 40.0)  # (4 x 3.5 + 13.5) / 5
    assert changed["light"]["sky1"] == view["light"]["sky1"]
    # The Sensors table's count of readings: that hour counted again, not the week's readings.
    counted = [st for st in done if "COUNT(*)" in st]
    assert len(counted) == 1
    lo, hi = map(int, re.findall(r"ts_us >= (\d+) AND ts_us < (\d+)", counted[0])[0])
    assert hi - lo == 3_600_000_000
    assert {s["id"]: s["readings"] for s in changed["sensors"]} == {
        "n1": None,
        "n4": None,
        "l1": 97,
        "sky1": 96,
    }
    fresh, _ = Portal(inspector.config, clock=lambda: now).period_view(inspector, "s1", week)
    assert fresh["light"] == changed["light"] and fresh["sensors"] == changed["sensors"]
    store.close()
