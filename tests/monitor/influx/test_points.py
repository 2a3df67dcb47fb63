"""InfluxDB points: one function per measurement of the schema, each point's tags and fields."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from monitor.config import InfluxConfig, Secret
from monitor.influx import points
from monitor.influx.client import InfluxWriter, timestamp_ns
from monitor.influx.schema import MEASUREMENTS
from monitor.journal.store import Store
from rules.model import (
    Blast,
    Event,
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
from tests.support.servers import Influxd, VictoriaMetrics

T0 = datetime(2026, 6, 15, 17, 0, tzinfo=UTC)
NS = timestamp_ns(T0)


def test_every_measurement_of_the_schema_has_its_point_function() -> None:
    assert set(points.BY_MEASUREMENT) == set(MEASUREMENTS)


def test_sound_point_omits_the_levels_a_period_lacks() -> None:
    levels = SoundLevels("q", "n1", T0, 1.0, 60.0, 61.0, 75.0, LASmax=60.5)
    assert points.sound(levels, late=True) == (
        f"sound,sensor=n1,site=q LAFmax=61.0,LASmax=60.5,LAeq=60.0,LCpeak=75.0,duration_s=1.0,late=true {NS}"
    )


def test_an_overloaded_period_says_so_in_its_point() -> None:
    """The store and the bundle kept the meter's overload flag, and InfluxDB (Grafana) showed the
    clipped levels as plain readings."""
    levels = SoundLevels("q", "n1", T0, 1.0, 78.0, 79.0, 95.0, overload=True)
    assert points.sound(levels, late=False) == (
        "sound,sensor=n1,site=q LAFmax=79.0,LAeq=78.0,LCpeak=95.0,duration_s=1.0,late=false,"
        f"overload=true {NS}"
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
        'events,kind=truck,site=q direction="in",gate="north",id="t-1",summary="TruckPassage t-1"'
        f" {NS + points.spread_ns('t-1')}"
    )
    blast = points.events(Blast("q", "b-7", T0))  # no safety reason: the field is left out
    assert blast == f'events,kind=blast,site=q id="b-7",summary="Blast b-7" {NS + points.spread_ns("b-7")}'
    work = WorkPeriod("q", "w-1", T0, T0 + timedelta(hours=2), WorkKind.REPAIR)
    assert points.events(work) == (
        'events,kind=work,site=q end="2026-06-15T19:00:00Z",id="w-1",summary="WorkPeriod w-1"'
        f" {NS + points.spread_ns('w-1')}"
    )


def test_finding_point_takes_its_first_measurement() -> None:
    finding = Finding(
        "q", "noise", "6.B", FindingKind.VIOLATION, T0, T0 + timedelta(minutes=1), "America/Chicago",
        "loud", ("n1", "n2"), (Measurement("LAeq", 66.0, 65.0, "dB"),),
    )  # fmt: skip
    line = points.findings(finding)
    assert line is not None and line.startswith("findings,kind=violation,site=q,standard=noise ")
    assert (
        f'id="{finding.id}"' in line
        and 'sensors="n1,n2"' in line
        and "value=66.0" in line
        and "limit=65.0" in line
    )
    bare = points.findings(
        Finding("q", "noise", "6.B", FindingKind.WARNING, T0, T0, "America/Chicago", "near")
    )
    assert bare is not None and "value=" not in bare and "limit=" not in bare


def test_alert_rejection_and_health_points() -> None:
    body = {"id": "a1", "ts": "2026-06-15T17:00:00Z", "audiences": ["town", "operator"], "kind": "anchor",
            "message": "m", "severity": "info"}  # fmt: skip
    assert points.alerts("q", body) == (
        'alerts,audience=town\\,operator,kind=anchor,site=q id="a1",message="m",severity="info"'
        f" {NS + points.spread_ns('a1')}"
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


def records_of_one_instant() -> tuple[list[Finding], list[dict[str, object]], list[Event]]:
    """5 findings, 4 alerts and 4 events of T0 that differ in their id (a finding in its sensors)."""
    end = T0 + timedelta(minutes=1)
    findings = [
        Finding(
            "q", "noise", "6.B", FindingKind.VIOLATION, T0, end, "UTC", "loud", (f"n{i}",),
            (Measurement("LAeq", 66.0 + i, 65.0, "dB"),),
        )
        for i in range(5)
    ]  # fmt: skip
    body = {"ts": "2026-06-15T17:00:00Z", "audiences": ["town"], "kind": "violation", "severity": "warning"}
    alerts: list[dict[str, object]] = [{**body, "id": f"a{i}", "message": f"m{i}"} for i in range(4)]
    events: list[Event] = [TruckPassage("q", f"t-{i}", T0, "north", "in") for i in range(3)]
    events.append(Blast("q", "odd\\", T0))  # a trailing backslash could not end a tag value
    return findings, alerts, events


def lines_of(findings: list[Finding], alerts: list[dict[str, object]], events: list[Event]) -> list[str]:
    made = [
        *(points.findings(f) for f in findings),
        *(points.alerts("q", a) for a in alerts),
        *(points.events(e) for e in events),
    ]
    return [x for x in made if x is not None]


def point_ns(line: str) -> int:
    return int(line.rsplit(" ", 1)[1])


def series_keys(influxd: Influxd, measurement: str) -> list[str]:
    """The series of ``measurement`` in the database "minewatch", as InfluxQL's SHOW SERIES lists them."""
    found = influxd.query(f'SHOW SERIES FROM "{measurement}"', "minewatch")
    return [key for [key] in found[0]["values"]] if found else []


def test_records_of_one_millisecond_are_apart_within_it() -> None:
    """A record's point is moved by its id, under a millisecond: records of one series and
    time are at times of their own (they were at one time), the same each time they are made,
    and read to the millisecond each is at its record's millisecond, a time with microseconds
    (17:00:00.000900, a rejection's) included (a rejection of row 200,000 was moved into the next)."""
    ts = T0 + timedelta(microseconds=900)
    trucks = [points.events(TruckPassage("q", f"t-{i}", ts, "north", "in")) for i in range(50)]
    rejected = [points.rejections("q", "t/x", "bad", ts, row) for row in (1, 200_000, 999_999)]
    times = [point_ns(x) for x in (*trucks, *rejected) if x is not None]
    assert len(set(times)) == len(times) == 53
    assert {t // 1_000_000 for t in times} == {NS // 1_000_000}
    assert [points.events(TruckPassage("q", f"t-{i}", ts, "north", "in")) for i in range(50)] == trucks


def test_records_of_one_instant_are_points_of_one_series(influxd: Influxd) -> None:
    """Against influxd 1.6.7: findings, alerts and events of one instant that differ in their
    id are each a point (InfluxDB keeps one point per series and time), in one series per tag
    set: with the id a tag, every record was a series of its own, and influxd 1.x refuses
    writes past max-series-per-database (a million). A finding's revision (the same id)
    overwrites its point, and a replay (at least once) overwrites itself."""
    findings, alerts, events = records_of_one_instant()
    writer = InfluxWriter(InfluxConfig(version=1, url=influxd.url, database="minewatch"))
    writer.write(lines_of(findings, alerts, events))
    writer.write(lines_of(findings, alerts, events))
    revised = replace(findings[0], summary="louder", measurements=(Measurement("LAeq", 75.0, 65.0, "dB"),))
    assert revised.id == findings[0].id
    writer.write(lines_of([revised], [], []))

    assert influxd.count("minewatch", "findings", "summary") == 5
    assert influxd.count("minewatch", "alerts", "message") == 4
    assert influxd.count("minewatch", "events", "summary") == 4
    keys = {m: series_keys(influxd, m) for m in ("findings", "alerts", "events")}
    assert keys == {
        "findings": ["findings,kind=violation,site=q,standard=noise"],
        "alerts": ["alerts,audience=town,kind=violation,site=q"],
        "events": ["events,kind=blast,site=q", "events,kind=truck,site=q"],
    }
    [series] = influxd.query('SELECT "id", "summary", "value" FROM "findings"', "minewatch")
    rows = {row[1]: row[2:] for row in series["values"]}
    assert rows == {
        f.id: ["louder", 75.0] if f.id == revised.id else ["loud", f.measurements[0].value] for f in findings
    }
    [series] = influxd.query('SELECT "id" FROM "alerts"', "minewatch")
    assert sorted(row[1] for row in series["values"]) == ["a0", "a1", "a2", "a3"]
    [series] = influxd.query('SELECT "id", "summary" FROM "events" WHERE "kind" = \'blast\'', "minewatch")
    [[time, *blast]] = series["values"]
    assert blast == ["odd\\", "Blast odd\\"] and time.startswith("2026-06-15T17:00:00.000")


def test_v2_records_of_one_instant_are_one_series_without_an_id(victoria_metrics: VictoriaMetrics) -> None:
    """Through the v2 API to VictoriaMetrics (a real server of ``POST /api/v2/write``): the
    findings, alerts and events of one instant are one series per field and tag set, with no
    id label (with the id a tag, each record was a series), each record a sample at its
    record's millisecond. VictoriaMetrics keeps milliseconds and every sample written, so
    overwriting (a revision, a replay) is shown against influxd in the test above."""
    findings, alerts, events = records_of_one_instant()
    config = InfluxConfig(version=2, url=victoria_metrics.url, org="quarry", bucket="b", token=Secret("t"))
    writer = InfluxWriter(config)
    try:
        writer.write(lines_of(findings, alerts, events))
    finally:
        writer.close()
    stored = victoria_metrics.export('{__name__=~"findings_value|alerts_severity|events_summary"}')
    by_series = {tuple(sorted(s["metric"].items())): s for s in stored}
    assert len(by_series) == len(stored)
    assert sorted(by_series) == sorted(
        tuple(sorted(labels.items()))
        for labels in (
            {"__name__": "findings_value", "site": "q", "standard": "noise", "kind": "violation"},
            {"__name__": "alerts_severity", "site": "q", "audience": "town", "kind": "violation"},
            {"__name__": "events_summary", "site": "q", "kind": "truck"},
            {"__name__": "events_summary", "site": "q", "kind": "blast"},
        )
    )
    samples = {s["metric"]["__name__"] + "/" + s["metric"]["kind"]: s for s in stored}
    assert sorted(samples["findings_value/violation"]["values"]) == [66.0, 67.0, 68.0, 69.0, 70.0]
    assert [
        len(samples[name]["values"]) for name in ("alerts_severity/violation", "events_summary/truck")
    ] == [4, 3]
    assert {t for s in stored for t in s["timestamps"]} == {NS // 1_000_000}


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


def deploy_guide_statements() -> list[str]:
    """The InfluxQL docs/DEPLOY.md gives to copy and drop the previous version's series."""
    text = (Path(__file__).parents[3] / "docs" / "DEPLOY.md").read_text()
    [block] = [b for b in re.findall(r"```sql\n(.*?)```", text, re.S) if "DROP SERIES" in b]
    return [statement for statement in block.splitlines() if statement.strip()]


def test_points_of_earlier_versions_are_read_copied_and_dropped_as_deploy_says(influxd: Influxd) -> None:
    """Against influxd 1.6.7, a database holding the three ways the id was written: a field
    (before), a tag (the previous version: a series per record) and a field of points moved
    within their millisecond (now, no series of their own). ``"id"::field`` and ``"id"::tag``
    tell them apart, and docs/DEPLOY.md's statements leave every point with its id a field
    and no series per record."""
    hour = 3600 * 10**9
    earlier = [
        f'events,kind=blast,site=q id="b-1",summary="Blast b-1" {NS - 2 * hour}',
        f'findings,kind=warning,site=q,standard=noise id="f-1",summary="near",value=64.0 {NS - 2 * hour}',
        f'alerts,audience=town,kind=violation,site=q id="a-1",message="m",severity="warning" {NS - 2 * hour}',
    ]
    previous = [
        f'events,id=t-8,kind=truck,site=q gate="north",summary="TruckPassage t-8" {NS - hour}',
        f'events,id=t-9,kind=truck,site=q gate="north",summary="TruckPassage t-9" {NS - hour + 10**9}',
        f'findings,id=f-2,kind=violation,site=q,standard=noise summary="loud",value=70.0 {NS - hour}',
        f'findings,id=f-3,kind=violation,site=q,standard=noise summary="loud",value=71.0 {NS - hour + 10**9}',
        f'alerts,audience=town,id=a-2,kind=violation,site=q message="m",severity="warning" {NS - hour}',
    ]
    findings, alerts, events = records_of_one_instant()
    writer = InfluxWriter(InfluxConfig(version=1, url=influxd.url, database="minewatch"))
    writer.write([*earlier, *previous, *lines_of(findings, alerts, events)])

    always = {"events": "summary", "findings": "summary", "alerts": "message"}  # a field every point has

    def ids(measurement: str, kind: str) -> set[str]:
        query = f'SELECT "{always[measurement]}", "id"::{kind} FROM "{measurement}"'
        [series] = influxd.query(query, "minewatch")
        return {row[2] for row in series["values"] if row[2] is not None}

    now_ids = {
        "events": {e.id for e in events},
        "findings": {f.id for f in findings},
        "alerts": {"a0", "a1", "a2", "a3"},
    }
    tagged = {"events": {"t-8", "t-9"}, "findings": {"f-2", "f-3"}, "alerts": {"a-2"}}
    fielded = {"events": {"b-1"}, "findings": {"f-1"}, "alerts": {"a-1"}}
    for measurement in ("events", "findings", "alerts"):
        assert ids(measurement, "tag") == tagged[measurement]
        assert ids(measurement, "field") == fielded[measurement] | now_ids[measurement]
        tag_series = influxd.query(f'SHOW SERIES FROM "{measurement}" WHERE "id"::tag =~ /./', "minewatch")
        assert len(tag_series[0]["values"]) == len(tagged[measurement])  # the new points add none

    for statement in deploy_guide_statements():
        influxd.execute(statement, "minewatch")

    for measurement in ("events", "findings", "alerts"):
        assert ids(measurement, "tag") == set()
        assert ids(measurement, "field") == fielded[measurement] | tagged[measurement] | now_ids[measurement]
        assert not [key for key in series_keys(influxd, measurement) if ",id=" in key]
