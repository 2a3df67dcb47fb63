"""InfluxDB points: one function per measurement of the schema, each point's tags and fields."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from monitor.config import InfluxConfig
from monitor.influx import points
from monitor.influx.client import InfluxWriter, timestamp_ns
from monitor.influx.schema import MEASUREMENTS
from monitor.journal.store import Store
from rules.model import (
    Blast,
    Finding,
    FindingKind,
    LightSummary,
    Measurement,
    SensorStatus,
    SoundLevels,
    TruckPassage,
    TurbidityReading,
    WeatherReading,
    WorkKind,
    WorkPeriod,
)
from tests.support.servers import Influxd

T0 = datetime(2026, 6, 15, 17, 0, tzinfo=UTC)
NS = timestamp_ns(T0)


def test_every_measurement_of_the_schema_has_its_point_function() -> None:
    assert set(points.BY_MEASUREMENT) == set(MEASUREMENTS)


def test_sound_point_omits_the_levels_a_period_lacks() -> None:
    levels = SoundLevels("q", "n1", T0, 1.0, 60.0, 61.0, 75.0, LASmax=60.5)
    assert points.sound(levels, late=True) == (
        f"sound,sensor=n1,site=q LAFmax=61.0,LASmax=60.5,LAeq=60.0,LCpeak=75.0,duration_s=1.0,late=true {NS}"
    )


def test_readings_points() -> None:
    light = LightSummary("q", "l1", T0, 60.0, 2.0, 1.0, 3.0)
    assert points.reading(light, late=False) == (
        f"light,sensor=l1,site=q duration_s=60.0,late=false,lux_max=3.0,lux_mean=2.0,lux_min=1.0 {NS}"
    )
    weather = WeatherReading("q", "w1", T0, 60.0, 3.5, True, 2.5)
    assert points.reading(weather, late=False) == (
        f"weather,sensor=w1,site=q duration_s=60.0,late=false,rain=true,rain_mm_h=2.5,wind_speed_ms=3.5 {NS}"
    )
    water = TurbidityReading("q", "t1", T0, 60.0, 12.5)
    assert (
        points.reading(water, late=True)
        == f"turbidity,sensor=t1,site=q duration_s=60.0,late=true,ntu=12.5 {NS}"
    )


def test_event_points_carry_what_each_kind_has() -> None:
    truck = points.events(TruckPassage("q", "t-1", T0, "north", "in"))
    assert truck == (
        f'events,id=t-1,kind=truck,site=q direction="in",gate="north",summary="TruckPassage t-1" {NS}'
    )
    blast = points.events(Blast("q", "b-7", T0))  # no safety reason: the field is left out
    assert blast == f'events,id=b-7,kind=blast,site=q summary="Blast b-7" {NS}'
    work = WorkPeriod("q", "w-1", T0, T0 + timedelta(hours=2), WorkKind.REPAIR)
    assert points.events(work) == (
        f'events,id=w-1,kind=work,site=q end="2026-06-15T19:00:00Z",summary="WorkPeriod w-1" {NS}'
    )


def test_finding_point_takes_its_first_measurement() -> None:
    finding = Finding(
        "q", "noise", "6.B", FindingKind.VIOLATION, T0, T0 + timedelta(minutes=1), "America/Chicago",
        "loud", ("n1", "n2"), (Measurement("LAeq", 66.0, 65.0, "dB"),),
    )  # fmt: skip
    line = points.findings(finding)
    assert line is not None and line.startswith(
        f"findings,id={finding.id},kind=violation,site=q,standard=noise "
    )
    assert 'sensors="n1,n2"' in line and "value=66.0" in line and "limit=65.0" in line
    bare = points.findings(
        Finding("q", "noise", "6.B", FindingKind.WARNING, T0, T0, "America/Chicago", "near")
    )
    assert bare is not None and "value=" not in bare and "limit=" not in bare


def test_alert_rejection_and_health_points() -> None:
    body = {"id": "a1", "ts": "2026-06-15T17:00:00Z", "audiences": ["town", "operator"], "kind": "anchor",
            "message": "m", "severity": "info"}  # fmt: skip
    assert points.alerts("q", body) == (
        f'alerts,audience=town\\,operator,id=a1,kind=anchor,site=q message="m",severity="info" {NS}'
    )
    assert (
        points.rejections("q", "t/x", "bad", T0, 7) == f'rejections,site=q reason="bad",topic="t/x" {NS + 7}'
    )
    assert points.sensor_health("q", "n1", False, T0) == f"sensor_health,sensor=n1,site=q online=false {NS}"
    assert points.sensor_health("q", "n1", True, T0, 90.0) == (
        f"sensor_health,sensor=n1,site=q gap_s=90.0,online=true {NS}"
    )
    status = SensorStatus("q", "n1", T0, battery_pct=80.0)
    assert points.heartbeat(status) == f"sensor_health,sensor=n1,site=q battery_pct=80.0,online=true {NS}"


def test_records_sharing_a_time_are_points_of_their_own(influxd: Influxd) -> None:
    """Against influxd 1.6.7: records that differ only in their id (and a finding in its
    sensors) were one series at one time, so InfluxDB kept the last of them (87 findings
    queued, 83 stored). Each is a point now, and a record sent twice is still one."""
    end = T0 + timedelta(minutes=1)
    findings = [
        Finding("q", "noise", "6.B", FindingKind.VIOLATION, T0, end, "UTC", "loud", (f"n{i}",))
        for i in range(5)
    ]
    body = {"ts": "2026-06-15T17:00:00Z", "audiences": ["town"], "kind": "violation", "severity": "warning"}
    alerts = [points.alerts("q", {**body, "id": f"a{i}", "message": f"m{i}"}) for i in range(4)]
    trucks = [TruckPassage("q", f"t-{i}", T0, "north", "in") for i in range(3)]
    lines = [
        *(points.findings(f) for f in findings),
        *alerts,
        *(points.events(t) for t in trucks),
        points.events(Blast("q", "odd\\", T0)),  # a trailing backslash cannot end a tag value
    ]
    writer = InfluxWriter(InfluxConfig(version=1, url=influxd.url, database="minewatch"))
    writer.write([x for x in lines if x is not None])
    writer.write([x for x in lines if x is not None])  # at least once: a replay overwrites itself
    assert influxd.count("minewatch", "findings", "summary") == 5
    assert influxd.count("minewatch", "alerts", "message") == 4
    assert influxd.count("minewatch", "events", "summary") == 4
    [series] = influxd.query('SELECT "summary", "id" FROM "events" WHERE "kind" = \'blast\'', "minewatch")
    assert series["values"] == [["2026-06-15T17:00:00Z", "Blast odd\\", "odd%5C"]]


def test_rejections_of_one_instant_are_each_a_point(tmp_path: Path, influxd: Influxd) -> None:
    """Against influxd 1.6.7: rejections stored at one ``now`` (a burst; with the data clock,
    every message rejected before the next accepted reading) were one series at one time, so
    InfluxDB kept the last of them. Each is a point now, with no tag per rejection, and a
    point written again (at least once) is still one."""
    store = Store(tmp_path / "store.db")
    with store.batch():
        ids = [
            store.append_rejection("q", f"minewatch/q/n{i}/levels", f"bad {i}", "{}", T0) for i in range(6)
        ]
    lines = [
        points.rejections("q", f"minewatch/q/n{i}/levels", f"bad {i}", T0, id_) for i, id_ in enumerate(ids)
    ]
    writer = InfluxWriter(InfluxConfig(version=1, url=influxd.url, database="minewatch"))
    writer.write([x for x in lines if x is not None])
    writer.write([x for x in lines if x is not None])
    assert influxd.count("minewatch", "rejections", "reason") == 6
    [series] = influxd.query('SHOW SERIES FROM "rejections"', "minewatch")
    assert series["values"] == [["rejections,site=q"]]  # one series: no tag per rejection
