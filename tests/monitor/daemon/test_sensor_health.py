"""monitor/daemon/sensor_health.py: offline/online, clock drift, calibration drift, offsets.

The watch runs over a real store; its alerts go through a real AlertBook whose publications
are recorded, and its InfluxDB points are made by the real point functions and recorded.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from monitor.config import Config, SiteConfig, parse_config
from monitor.daemon.sensor_health import HealthWatch, SensorHealth, calibrated
from monitor.journal.store import Store
from monitor.notify.alerts import AlertBook
from monitor.wire.canonical import to_us
from rules.model import SensorStatus, SoundLevels
from tests.support.configs import quarry_config, sensor

T0 = datetime(2026, 6, 15, 17, 0, tzinfo=UTC)
OFFLINE_AFTER_PERIODS = 10
TOWN_OFFLINE_ALERT_S = 900
CLOCK_DRIFT_LIMIT_S = 2.0


class Points(list[str]):
    """A write_point that makes the point as the pipeline would and keeps its line."""

    def __call__(self, make: Callable[..., str | None], /, *args: Any, **kwargs: Any) -> None:
        point = make(*args, **kwargs)
        if point is not None:
            self.append(point)


class Watched:
    def __init__(self, tmp_path: Path) -> None:
        store_path = tmp_path / "store.db"
        self.config: Config = parse_config(
            quarry_config(
                store_path,
                sensors=[
                    sensor("n1", "sound", location="north boundary"),
                    sensor("l1", "light", expected_period_s=10),
                ],
                daemon={
                    "offline_after_periods": OFFLINE_AFTER_PERIODS,
                    "town_offline_alert_s": TOWN_OFFLINE_ALERT_S,
                    "clock_drift_limit_s": CLOCK_DRIFT_LIMIT_S,
                },
                alerts={"min_gap_s": 600},
            )
        )
        site = self.config.site("q")
        assert site is not None
        self.site: SiteConfig = site
        self.store = Store(store_path)
        self.published: list[dict[str, Any]] = []
        self.alerts = AlertBook(
            self.store, self.config.alerts, lambda _site, body: self.published.append(body)
        )
        self.points = Points()
        self.watch = HealthWatch(self.store, self.alerts, self.config.daemon, self.points)
        self.health = {s.id: SensorHealth(T0) for s in self.site.sensors}

    def alerts_of(self, kind: str, sensor_id: str = "n1") -> list[dict[str, Any]]:
        """The alerts of ``kind`` about ``sensor_id`` (a "cleared" one names its condition)."""
        about = {sensor_id, f"offline:{sensor_id}", f"clock:{sensor_id}"}
        return [
            a
            for a in self.published
            if a["kind"] == kind and {a["data"].get("sensor"), a["data"].get("condition")} & about
        ]

    def health_rows(self) -> list[tuple[str, str, int, float | None]]:
        rows = self.store.conn.execute("SELECT sensor, state, ts_us, gap_s FROM health ORDER BY rowid")
        return [tuple(r) for r in rows]  # type: ignore[misc]

    def calibration_rows(self) -> list[tuple[float, float | None, int]]:
        rows = self.store.conn.execute(
            "SELECT measured_db, drift_db, flagged FROM calibration ORDER BY ts_us"
        )
        return [tuple(r) for r in rows]  # type: ignore[misc]

    def check(self, seconds: float) -> None:
        with self.store.batch():
            self.watch.check_silence(self.site, self.health, T0 + timedelta(seconds=seconds))

    def heard(self, sensor_id: str, ts: datetime, seconds: float) -> None:
        with self.store.batch():
            self.watch.heard("q", sensor_id, self.health.get(sensor_id), ts, T0 + timedelta(seconds=seconds))

    def status(self, status: SensorStatus, seconds: float) -> None:
        with self.store.batch():
            self.watch.on_status("q", status, T0 + timedelta(seconds=seconds))


@pytest.fixture
def w(tmp_path: Path) -> Iterator[Watched]:
    watched = Watched(tmp_path)
    yield watched
    watched.store.close()


# --------------------------------------------------------------------------- offline / online


def test_a_sensor_silent_past_its_expected_periods_goes_offline_once(w: Watched) -> None:
    limit = 1.0 * OFFLINE_AFTER_PERIODS  # n1 is expected every second
    w.check(limit)  # silent exactly the limit: still online
    assert w.health["n1"].online and w.published == []
    w.check(limit + 1)
    n1 = w.health["n1"]
    assert not n1.online and n1.offline_since == T0  # offline since it was last heard of
    assert w.health["l1"].online  # expected every 10 s: 11 s of silence is nothing yet
    assert w.health_rows() == [("n1", "offline", to_us(T0), None)]
    detail = w.store.conn.execute("SELECT detail FROM health").fetchone()[0]
    assert detail == "silent for 11 s (expected every 1 s)"
    (alert,) = w.alerts_of("sensor_offline")
    assert alert["audiences"] == ["operator"] and alert["condition"] == "offline:n1"
    assert alert["message"] == "Sensor n1 (north boundary) has sent nothing since 2026-06-15T17:00:00Z"
    assert w.points == ["sensor_health,sensor=n1,site=q online=false 1781542811000000000"]
    w.check(limit + 60)  # still silent: no second record, alert or point
    assert len(w.health_rows()) == 1 and len(w.published) == 1 and len(w.points) == 1


def test_on_the_data_clock_a_sensor_never_heard_is_silent_from_the_datas_start(w: Watched) -> None:
    """Started (wall clock) before the simulated data: an event-only sensor that sends nothing is
    silent from the first data time, so the same simulation gives the same alert text (issue 27)."""
    data_start = T0 + timedelta(days=14)
    w.heard("l1", data_start, 0)
    with w.store.batch():
        w.watch.check_silence(w.site, w.health, data_start + timedelta(seconds=11), data_start)
    assert w.health["l1"].last_seen == data_start and w.health["l1"].online
    (alert,) = w.alerts_of("sensor_offline")
    assert alert["message"] == "Sensor n1 (north boundary) has sent nothing since 2026-06-29T17:00:00Z"


def test_the_town_is_told_once_when_a_sensor_stays_offline(w: Watched) -> None:
    w.check(20)  # offline: the operator is told
    w.check(TOWN_OFFLINE_ALERT_S)  # silent exactly town_offline_alert_s: not yet
    assert [a["audiences"] for a in w.alerts_of("sensor_offline")] == [["operator"]]
    w.check(TOWN_OFFLINE_ALERT_S + 1)
    w.check(TOWN_OFFLINE_ALERT_S + 600)
    town = [a for a in w.alerts_of("sensor_offline") if a["audiences"] == ["town"]]
    assert len(town) == 1 and town[0]["condition"] == "offline-town:n1"
    assert town[0]["message"] == "Sensor n1 at Quarry has been offline for 15 minutes"
    assert w.health["n1"].town_alerted


def test_a_sensor_heard_again_comes_back_online_with_its_gap(w: Watched) -> None:
    w.check(20)
    w.heard("n1", T0 + timedelta(seconds=119), 120)
    n1 = w.health["n1"]
    assert n1.online and n1.last_seen == T0 + timedelta(seconds=119)
    assert w.health_rows() == [
        ("n1", "offline", to_us(T0), None),
        ("n1", "online", to_us(T0 + timedelta(seconds=120)), 120.0),  # the gap is evidence too
    ]
    assert w.points[-1] == "sensor_health,sensor=n1,site=q gap_s=120.0,online=true 1781542920000000000"
    (back,) = w.alerts_of("cleared")
    assert back["message"] == "Sensor n1 is back online after 2.0 minutes without data"
    assert back["audiences"] == ["operator"]  # the town never heard it had gone
    assert w.alerts.last_raised("q", "offline:n1") is None
    w.check(125)  # heard 6 s ago: stays online
    assert n1.online


def test_the_town_hears_of_the_return_when_it_heard_of_the_outage(w: Watched) -> None:
    w.check(20)
    w.check(TOWN_OFFLINE_ALERT_S + 1)
    w.heard("n1", T0 + timedelta(seconds=1000), 1000)
    (back,) = w.alerts_of("cleared")
    assert back["audiences"] == ["operator", "town"]
    assert not w.health["n1"].town_alerted
    # Offline again later: the operator first, the town only after town_offline_alert_s again.
    w.check(1000 + 11)
    assert [a["audiences"] for a in w.alerts_of("sensor_offline")][-1] == ["operator"]
    assert not w.health["n1"].town_alerted


def test_heard_only_moves_last_seen_forward_and_ignores_unconfigured_sensors(w: Watched) -> None:
    w.heard("n1", T0 + timedelta(seconds=5), 5)
    w.heard("n1", T0 + timedelta(seconds=2), 6)  # a late reading of an earlier second
    assert w.health["n1"].last_seen == T0 + timedelta(seconds=5)
    w.heard("x9", T0 + timedelta(seconds=5), 6)  # no health entry: nothing to do
    assert w.health_rows() == [] and w.published == [] and w.points == []
    w.check(5 + OFFLINE_AFTER_PERIODS)  # counted from the newest second heard
    assert w.health["n1"].online


def test_a_last_seen_ahead_of_now_counts_from_now(w: Watched) -> None:
    # The data clock: the state began at the wall time, the data's "now" is earlier.
    w.health["n1"].last_seen = T0 + timedelta(hours=1)
    w.check(0)
    assert w.health["n1"].last_seen == T0 and w.health["n1"].online
    w.check(OFFLINE_AFTER_PERIODS + 1)
    assert not w.health["n1"].online


def test_the_town_is_told_of_a_return_only_after_being_told_of_that_outage(tmp_path: Path) -> None:
    w = Watched(tmp_path)
    w.watch.daemon = replace(w.config.daemon, town_offline_alert_s=60)  # shorter than min_gap_s
    for seconds in (11, 62):
        w.check(seconds)
    w.heard("n1", T0 + timedelta(seconds=100), 100)
    for seconds in (111, 162):  # offline again, past town_offline_alert_s again
        w.check(seconds)
    w.heard("n1", T0 + timedelta(seconds=200), 200)
    about_n1 = w.alerts_of("sensor_offline") + w.alerts_of("cleared")
    told = [
        (a["kind"], a["audiences"])
        for a in sorted(about_n1, key=lambda a: a["ts"])
        if "town" in a["audiences"]
    ]
    w.store.close()
    assert told == [("sensor_offline", ["town"]), ("cleared", ["operator", "town"])] * 2


# --------------------------------------------------------------------------- heartbeats


def test_a_heartbeat_is_a_sensor_health_point(w: Watched) -> None:
    w.status(SensorStatus("q", "n1", T0, battery_pct=80.0, clock_offset_s=0.5), 1)
    assert w.points == [
        "sensor_health,sensor=n1,site=q battery_pct=80.0,clock_offset_s=0.5,online=true 1781542800000000000"
    ]
    assert w.published == []


def test_clock_drift_alerts_once_while_it_lasts_and_again_after_it_was_fixed(w: Watched) -> None:
    w.status(SensorStatus("q", "n1", T0, clock_offset_s=CLOCK_DRIFT_LIMIT_S), 0)  # at the limit: fine
    assert w.alerts_of("clock_drift") == []
    w.status(SensorStatus("q", "n1", T0 + timedelta(seconds=10), clock_offset_s=-3.5), 10)
    w.status(SensorStatus("q", "n1", T0 + timedelta(seconds=20), clock_offset_s=-3.6), 20)
    w.status(SensorStatus("q", "n1", T0 + timedelta(seconds=30)), 30)  # no offset: says nothing
    (drift,) = w.alerts_of("clock_drift")
    assert drift["audiences"] == ["operator"] and drift["condition"] == "clock:n1"
    assert drift["message"] == (
        "Sensor n1 reports its clock -3.5 s off (limit 2 s); its timestamps may be wrong"
    )
    w.status(SensorStatus("q", "n1", T0 + timedelta(seconds=40), clock_offset_s=0.1), 40)  # fixed: cleared
    assert w.alerts.last_raised("q", "clock:n1") is None
    assert len(w.published) == 1  # silently
    w.status(SensorStatus("q", "n1", T0 + timedelta(seconds=50), clock_offset_s=2.5), 50)
    assert len(w.alerts_of("clock_drift")) == 2  # drifting again alerts at once, within min_gap_s


def test_calibration_checks_are_journaled_and_drift_against_the_previous_check(w: Watched) -> None:
    def check(seconds: int, measured: float) -> None:
        ts = T0 + timedelta(seconds=seconds)
        w.status(
            SensorStatus("q", "n1", ts, calibration_reference_db=94.0, calibration_measured_db=measured),
            seconds,
        )

    check(0, 94.0)  # the first check: nothing to drift from
    check(100, 94.3)  # 0.3 dB: within the 0.5 dB limit
    assert w.calibration_rows() == [(94.0, None, 0), (94.3, pytest.approx(0.3), 0)]
    assert w.alerts_of("calibration_drift") == []
    check(200, 93.7)  # -0.6 dB since the previous check (-0.3 from the reference)
    assert w.calibration_rows()[-1] == (93.7, pytest.approx(-0.6), 1)
    (alert,) = w.alerts_of("calibration_drift")
    assert alert["audiences"] == ["operator", "town"]
    assert alert["condition"] == "calibration:n1:2026-06-15T17:03:20Z"
    assert alert["message"].startswith("Sensor n1 calibration moved -0.60 dB since the last check")
    assert alert["data"]["drift_db"] == pytest.approx(-0.6)
    check(300, 93.0)  # each flagged check is its own condition: alerted too
    assert len(w.alerts_of("calibration_drift")) == 2
    w.status(SensorStatus("q", "n1", T0 + timedelta(seconds=400), battery_pct=50.0), 400)  # no check
    assert len(w.calibration_rows()) == 4


def test_checks_with_calibrators_of_different_levels_compare_by_their_offsets(w: Watched) -> None:
    """A 94 dB check read 20 dB low passed unremarked, and a 114 dB check read exactly 114 then
    raised "calibration moved +20.00 dB" to the Town: readings were compared, not offsets."""

    def check(seconds: int, reference: float, measured: float) -> None:
        ts = T0 + timedelta(seconds=seconds)
        w.status(
            SensorStatus("q", "n1", ts, calibration_reference_db=reference, calibration_measured_db=measured),
            seconds,
        )

    check(0, 94.0, 74.0)  # the microphone reads 20 dB low
    (off,) = w.alerts_of("calibration_offset")
    assert off["audiences"] == ["operator", "town"]
    assert off["message"] == (
        "Sensor n1 read its 94 dB calibrator as 74.0 dB (-20.00 dB, more than 1 dB off): its levels are"
        " in doubt until its calibration (full_scale_db) or microphone is corrected"
    )
    check(100, 94.0, 94.1)  # mended: 0.1 dB off its calibrator
    assert len(w.alerts_of("calibration_offset")) == 1
    drift_after_mending = len(w.alerts_of("calibration_drift"))
    check(200, 114.0, 114.0)  # another calibrator, read exactly: no drift
    assert w.calibration_rows()[-1] == (114.0, pytest.approx(-0.1), 0)
    assert len(w.alerts_of("calibration_drift")) == drift_after_mending
    assert len(w.alerts_of("calibration_offset")) == 1


# --------------------------------------------------------------------------- the calibrated offset


def test_calibrated_adds_the_offset_to_every_level_present() -> None:
    full = SoundLevels("q", "n1", T0, 1.0, 60.0, 65.0, 90.0, 64.0, 95.0, 50.0, 70.0, 75.0)
    assert calibrated(full, 1.5) == SoundLevels(
        "q", "n1", T0, 1.0, 61.5, 66.5, 91.5, 65.5, 96.5, 51.5, 71.5, 76.5
    )
    bare = SoundLevels("q", "n1", T0, 0.5, 60.0, 65.0, 90.0)
    shifted = calibrated(bare, -2.0)
    assert shifted == SoundLevels("q", "n1", T0, 0.5, 58.0, 63.0, 88.0)  # absent levels stay absent
    assert calibrated(bare, None) is bare
