"""InfluxDB points: one function per measurement of the schema, each point's tags and fields."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from monitor.influx import points
from monitor.influx.client import timestamp_ns
from monitor.influx.schema import MEASUREMENTS
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
        f'events,kind=truck,site=q direction="in",gate="north",id="t-1",summary="TruckPassage t-1" {NS}'
    )
    blast = points.events(Blast("q", "b-7", T0))  # no safety reason: the field is left out
    assert blast == f'events,kind=blast,site=q id="b-7",summary="Blast b-7" {NS}'
    work = WorkPeriod("q", "w-1", T0, T0 + timedelta(hours=2), WorkKind.REPAIR)
    assert points.events(work) == (
        f'events,kind=work,site=q end="2026-06-15T19:00:00Z",id="w-1",summary="WorkPeriod w-1" {NS}'
    )


def test_finding_point_takes_its_first_measurement() -> None:
    finding = Finding(
        "q", "noise", "6.B", FindingKind.VIOLATION, T0, T0 + timedelta(minutes=1), "America/Chicago",
        "loud", ("n1", "n2"), (Measurement("LAeq", 66.0, 65.0, "dB"),),
    )  # fmt: skip
    line = points.findings(finding)
    assert line is not None and line.startswith("findings,kind=violation,site=q,standard=noise ")
    assert 'sensors="n1,n2"' in line and "value=66.0" in line and "limit=65.0" in line
    bare = points.findings(
        Finding("q", "noise", "6.B", FindingKind.WARNING, T0, T0, "America/Chicago", "near")
    )
    assert bare is not None and "value=" not in bare and "limit=" not in bare


def test_alert_rejection_and_health_points() -> None:
    body = {"id": "a1", "ts": "2026-06-15T17:00:00Z", "audiences": ["town", "operator"], "kind": "anchor",
            "message": "m", "severity": "info"}  # fmt: skip
    assert points.alerts("q", body) == (
        f'alerts,audience=town\\,operator,kind=anchor,site=q id="a1",message="m",severity="info" {NS}'
    )
    assert points.rejections("q", "t/x", "bad", T0) == f'rejections,site=q reason="bad",topic="t/x" {NS}'
    assert points.sensor_health("q", "n1", False, T0) == f"sensor_health,sensor=n1,site=q online=false {NS}"
    assert points.sensor_health("q", "n1", True, T0, 90.0) == (
        f"sensor_health,sensor=n1,site=q gap_s=90.0,online=true {NS}"
    )
    status = SensorStatus("q", "n1", T0, battery_pct=80.0)
    assert points.heartbeat(status) == f"sensor_health,sensor=n1,site=q battery_pct=80.0,online=true {NS}"
