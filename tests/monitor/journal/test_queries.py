"""The journal's reads (monitor/journal/queries.py) against a real store: current findings by
each filter, chain entries, events overlapping a window, plot series, the demo's counts, anchors,
the events row every event type is stored as (its span, rules.model.event_span), and what the
portal's pages and caches read (actions, alerts, minute levels, the chain head, versions)."""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from monitor.journal import queries
from monitor.journal.store import Store, to_us
from monitor.wire.codec import payload_of
from rules.model import (
    Blast,
    BlastNotice,
    Event,
    Finding,
    FindingKind,
    LightSummary,
    SensorStatus,
    SoundLevels,
    WorkKind,
    WorkPeriod,
)

ROLES = ("operator", "town", "inspector")
T0 = datetime(2026, 6, 15, 17, 0, tzinfo=UTC)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store(tmp_path / "store.db")
    yield opened
    opened.close()


@pytest.fixture
def plain(store: Store) -> Iterator[sqlite3.Connection]:
    """A second connection without a row factory, as the renderers and the demo open one."""
    conn = sqlite3.connect(store.path)
    yield conn
    conn.close()


def finding(standard: str = "noise", minute: int = 0, summary: str = "over", site: str = "q") -> Finding:
    start = T0 + timedelta(minutes=minute)
    return Finding(
        site, standard, "6.B", FindingKind.VIOLATION, start, start + timedelta(minutes=1), "UTC", summary
    )


def add_event(store: Store, event: Event) -> None:
    with store.batch():
        assert store.append_event(event, payload_of(event), T0).stored


def test_current_findings_are_the_latest_revision_not_retracted(
    store: Store, plain: sqlite3.Connection
) -> None:
    with store.batch():
        store.append_finding(finding(minute=0), T0)
        store.append_finding(finding(minute=0, summary="revised"), T0)  # revision 2 stands
        store.append_finding(finding(minute=1), T0)
        store.append_finding(finding(minute=1), T0, retracted=True)  # gone
        store.append_finding(finding("air_overpressure", minute=2), T0)
        store.append_finding(finding(minute=3, site="elsewhere"), T0)
    everything = queries.current_findings(plain)
    assert [(r["standard"], r["start_us"]) for r in everything] == [
        ("noise", to_us(T0)),
        ("air_overpressure", to_us(T0 + timedelta(minutes=2))),
        ("noise", to_us(T0 + timedelta(minutes=3))),
    ]
    assert '"revised"' in everything[0]["data"] and everything[0]["revision"] == 2
    in_window = queries.current_findings(plain, site="q", start=T0, end=T0 + timedelta(minutes=2))
    assert [r["id"] for r in in_window] == [finding(minute=0).id]
    assert in_window == store.current_findings("q", T0, T0 + timedelta(minutes=2))
    by_standard = queries.current_findings(plain, site="q", standards=["air_overpressure"])
    assert [r["standard"] for r in by_standard] == ["air_overpressure"]
    ids = [finding(minute=0).id, finding(minute=1).id, "never-stored"]
    assert [r["id"] for r in queries.current_findings(plain, ids=ids)] == [finding(minute=0).id]


def test_chain_entry_of_a_keyed_record(store: Store, plain: sqlite3.Connection) -> None:
    with store.batch():
        seq = store.chain("q", "notice", "DOV-2026-0001", {"id": "DOV-2026-0001"}, T0)
    entry = queries.chain_entry(plain, "q", "notice", "DOV-2026-0001")
    assert entry is not None and entry.seq == seq and entry.head == store.head("q")[1]
    assert queries.chain_entry(plain, "q", "notice", "DOV-2026-0002") is None
    with pytest.raises(ValueError, match="chain_seq"):
        queries.chain_entry(plain, "q", "sound", "n1|0")


def test_events_are_stored_over_their_span_and_found_overlapping_a_window(
    store: Store, plain: sqlite3.Connection
) -> None:
    blast = Blast("q", "b-7", T0 + timedelta(minutes=10))
    notice = BlastNotice("q", "b-7", T0 - timedelta(hours=25), T0 + timedelta(minutes=10))
    work = WorkPeriod("q", "w-1", T0 - timedelta(hours=1), T0 + timedelta(minutes=5), WorkKind.REPAIR)
    for event in (blast, notice, work):
        add_event(store, event)
    before = queries.events_overlapping(plain, "q", T0 - timedelta(days=3), T0 - timedelta(days=2))
    assert before == []
    found = queries.events_overlapping(plain, "q", T0, T0 + timedelta(minutes=11))
    assert [(r["kind"], r["id"]) for r in found] == [
        ("blast-notice", "b-7"),
        ("work", "w-1"),
        ("blast", "b-7"),
    ]
    spans = {r["kind"]: (r["ts_us"], r["end_us"]) for r in found}
    assert spans["blast-notice"] == (to_us(notice.issued_ts), to_us(notice.planned_ts))
    assert spans["work"] == (to_us(work.start), to_us(work.end))
    assert spans["blast"] == (to_us(blast.ts), None)
    # An instant overlaps a window starting at its moment, not one starting after it.
    later = queries.events_overlapping(
        plain, "q", blast.ts + timedelta(seconds=1), blast.ts + timedelta(hours=1)
    )
    assert [r["kind"] for r in later] == []
    text = queries.event_data(plain, "q", "blast", "b-7")
    assert text is not None and '"blast_id":"b-7"' in text
    assert queries.event_data(plain, "q", "blast", "b-8") is None


def test_plot_series_and_the_demo_counts(store: Store, plain: sqlite3.Connection) -> None:
    assert queries.sound_span(plain, "q") is None
    assert queries.progress(plain, "q") is None
    with store.batch():
        for second in range(3):
            for sensor in ("n1", "n2"):
                levels = SoundLevels(
                    "q", sensor, T0 + timedelta(seconds=second), 1.0, 60.0 + second, 61.0, 75.0
                )
                store.append_sound(levels, source="meter", late=False, now=T0)
        light = LightSummary("q", "l1", T0, 60.0, 0.5, 0.1, 2.0)
        store.append_reading(light, payload_of(light), late=False, now=T0)
        store.set_progress("q", T0 + timedelta(minutes=1), T0)
        store.append_alert("a1", "q", "town", "violation", "high", "c", "m", {}, T0)
        store.append_alert("a2", "q", "town", "violation", "high", "c", "m", {}, T0)
        store.append_alert("a3", "q", "operator", "violation", "high", "c", "m", {}, T0)
        store.record_anchor("q", 5, "ab" * 32, T0)
    laeq = queries.sound_laeq(plain, "q", ["n2"], T0, T0 + timedelta(seconds=2))
    assert [tuple(r) for r in laeq] == [("n2", to_us(T0), 60.0), ("n2", to_us(T0) + 1_000_000, 61.0)]
    [reading] = queries.readings_of(plain, "q", "light", ["l1"], T0, T0 + timedelta(minutes=1))
    assert (reading["sensor"], reading["ts_us"], reading["duration_s"]) == ("l1", to_us(T0), 60.0)
    assert queries.readings_of(plain, "q", "light", ["l2"], T0, T0 + timedelta(minutes=1)) == []
    assert queries.sound_span(plain, "q") == (T0, T0 + timedelta(seconds=2))
    assert queries.progress(plain, "q") == (T0 + timedelta(minutes=1), T0) == store.progress("q")
    assert queries.stored_records(plain) == 7
    assert queries.alert_counts(plain) == {"operator": 1, "town": 2}
    assert queries.anchors(plain, "q") == [queries.Anchor("q", 5, "ab" * 32, T0)]
    assert queries.anchors(plain, "elsewhere") == []


def put_sound(store: Store, sensor: str, second: int, laeq: float, site: str = "q") -> None:
    levels = SoundLevels(site, sensor, T0 + timedelta(seconds=second), 1.0, laeq, laeq + 1, laeq + 10)
    with store.batch():
        store.append_sound(levels, source="meter", late=False, now=T0)


def test_current_findings_without_data_carry_the_fields_a_listing_shows(
    store: Store, plain: sqlite3.Connection
) -> None:
    named = Finding(
        "q",
        "noise",
        "6.B",
        FindingKind.VIOLATION,
        T0,
        T0 + timedelta(minutes=1),
        "UTC",
        "over",
        ("n1", "n2"),
        details={"window_start": "2026-06-15T11:00:20Z", "window_end": "2026-06-15T11:01:20Z"},
    )
    with store.batch():
        store.append_finding(named, T0)
        store.append_finding(finding(minute=1), T0)
        store.append_finding(finding(minute=1), T0, retracted=True)
        store.append_finding(finding(minute=2, site="elsewhere"), T0)
    full = queries.current_findings(plain, site="q", start=T0, end=T0 + timedelta(hours=1))
    brief = queries.current_findings(
        plain, site="q", start=T0, end=T0 + timedelta(hours=1), without_data=True
    )
    assert [r["id"] for r in brief] == [r["id"] for r in full] == [named.id]
    [row] = brief
    assert row.keys() == [
        "id",
        "kind",
        "standard",
        "section",
        "start_us",
        "end_us",
        "summary",
        "sensors",
        "window_start",
        "window_end",
    ]
    assert tuple(row)[:6] == (named.id, "violation", "noise", "6.B", to_us(T0), to_us(T0) + 60_000_000)
    assert (row["summary"], row["sensors"]) == ("over", '["n1","n2"]')
    # The window its summary tells (the worst 60 s of a noise minute), for the listing's header.
    assert (row["window_start"], row["window_end"]) == ("2026-06-15T11:00:20Z", "2026-06-15T11:01:20Z")


def test_current_findings_of_some_kinds(store: Store, plain: sqlite3.Connection) -> None:
    """Only the kinds asked for, latest revisions, not retracted (the episodes read violations so)."""
    violation = finding(minute=3)
    exempt = Finding(
        "q", "noise", "6.B", FindingKind.EXEMPT_EXCEEDANCE, violation.start, violation.end, "UTC", "exempt"
    )
    with store.batch():
        store.append_finding(violation, T0)
        store.append_finding(exempt, T0)
        store.append_finding(finding(minute=4), T0)
        store.append_finding(finding(minute=4), T0, retracted=True)
    chosen = queries.current_findings(plain, site="q", kinds=[FindingKind.VIOLATION.value])
    assert [r["id"] for r in chosen] == [violation.id]
    both = queries.current_findings(plain, site="q", kinds=["violation", "exempt_exceedance"])
    assert {r["id"] for r in both} == {violation.id, exempt.id}


def test_findings_version_grows_with_every_finding_stored(store: Store, plain: sqlite3.Connection) -> None:
    assert queries.findings_version(plain) == 0
    with store.batch():
        store.append_finding(finding(minute=0), T0)
    first = queries.findings_version(plain)
    with store.batch():
        store.append_finding(finding(minute=0, summary="revised"), T0)  # a revision is a new row
    assert queries.findings_version(plain) > first > 0
    with store.batch():
        store.append_finding(finding(minute=0, site="elsewhere"), T0)  # any site counts
    assert queries.findings_version(plain) > first + 1


def test_the_chain_head_seq_and_the_sound_seconds_chained_since(
    store: Store, plain: sqlite3.Connection
) -> None:
    assert queries.chain_head_seq(plain, "q") == 0
    put_sound(store, "n1", 0, 60.0)
    seen = queries.chain_head_seq(plain, "q")
    assert seen == store.head("q")[0] > 0
    put_sound(store, "n1", 1, 61.0)
    put_sound(store, "n|2", 0, 62.0)  # a sensor id with the key's separator in it
    with store.batch():
        store.chain("q", "notice", "DOV-1", {"id": "DOV-1"}, T0)  # not sound: not listed
    put_sound(store, "n1", 5, 60.0, site="elsewhere")
    head = queries.chain_head_seq(plain, "q")
    assert head == store.head("q")[0] == seen + 3
    chained = queries.sound_seconds_chained(plain, "q", seen, head)
    assert sorted(chained) == [("n1", to_us(T0) + 1_000_000), ("n|2", to_us(T0))]
    assert list(queries.sound_seconds_chained(plain, "q", head, head)) == []
    assert list(queries.sound_seconds_chained(plain, "q", 0, seen)) == [("n1", to_us(T0))]


def test_the_readings_chained_since_and_their_counts_by_hour(store: Store, plain: sqlite3.Connection) -> None:
    """What the period view's light and count caches follow: readings of the kinds asked for
    chained since a seq (a sensor id may hold the key's separator), and per sensor and hour
    how many readings of those kinds there are."""
    seen = queries.chain_head_seq(plain, "q")

    def put(reading: LightSummary | SensorStatus) -> None:
        with store.batch():
            store.append_reading(reading, payload_of(reading), late=False, now=T0)

    put(LightSummary("q", "l|1", T0 + timedelta(minutes=5), 10.0, 0.5, 0.1, 2.0))
    put(LightSummary("q", "l|1", T0 + timedelta(hours=1, minutes=1), 10.0, 0.5, 0.1, 2.0))
    put(LightSummary("q", "l2", T0 + timedelta(minutes=7), 10.0, 0.5, 0.1, 2.0))
    put(SensorStatus("q", "n1", T0, battery_pct=90.0))  # a status reading: neither followed nor counted
    put_sound(store, "n1", 3, 60.0)  # a sound second: not a reading
    head = queries.chain_head_seq(plain, "q")
    assert head == seen + 5
    hour = to_us(T0) // 3_600_000_000
    assert sorted(queries.readings_chained(plain, "q", ("light",), seen, head)) == [
        ("l2", to_us(T0 + timedelta(minutes=7))),
        ("l|1", to_us(T0 + timedelta(minutes=5))),
        ("l|1", to_us(T0 + timedelta(hours=1, minutes=1))),
    ]
    assert list(queries.readings_chained(plain, "q", ("light",), seen + 1, seen + 1)) == []
    assert list(queries.readings_chained(plain, "q", ("weather",), seen, head)) == []
    assert list(queries.readings_chained(plain, "q", ("status",), seen, head)) == [("n1", to_us(T0))]
    counted = queries.hourly_reading_counts(
        plain, "q", ("light", "weather"), to_us(T0), to_us(T0) + 2 * 3_600_000_000
    )
    assert sorted((r["sensor"], r["hour"], r["readings"]) for r in counted) == [
        ("l2", hour, 1),
        ("l|1", hour, 1),
        ("l|1", hour + 1, 1),
    ]
    one_hour = queries.hourly_reading_counts(plain, "q", ("light",), to_us(T0), to_us(T0) + 3_600_000_000)
    assert sorted((r["sensor"], r["readings"]) for r in one_hour) == [("l2", 1), ("l|1", 1)]


def test_portal_actions_newest_first_with_their_chain_entry(store: Store, plain: sqlite3.Connection) -> None:
    with store.batch():
        first = store.append_portal_action("q", "ann", "town", "notice_close", "DOV-1", "web", {"a": 1}, T0)
        second = store.append_portal_action(
            "q", "bo", "operator", "event_recorded", "blast|b-1", "api", {}, T0
        )
        store.append_portal_action("elsewhere", "cy", "operator", "event_recorded", "x", "api", {}, T0)
    rows = queries.portal_actions(plain, "q", 10, ROLES)
    assert [r["id"] for r in rows] == [second, first]
    assert (rows[1]["actor"], rows[1]["role"], rows[1]["action"], rows[1]["target"]) == (
        "ann",
        "town",
        "notice_close",
        "DOV-1",
    )
    assert (rows[1]["source"], rows[1]["data"], rows[1]["ts_us"]) == ("web", '{"a":1}', to_us(T0))
    entry = queries.chain_entry(plain, "q", "portal_action", str(first))
    assert entry is not None and rows[1]["seq"] == entry.seq
    assert [r["id"] for r in queries.portal_actions(plain, "q", 1, ROLES)] == [second]
    # Only the roles asked for: the newest is skipped, not cut by the limit first.
    assert [r["id"] for r in queries.portal_actions(plain, "q", 1, {"town"})] == [first]
    assert queries.portal_actions(plain, "q", 10, ()) == []


def test_a_portal_action_without_a_chain_entry_has_no_seq(store: Store, plain: sqlite3.Connection) -> None:
    store.conn.execute(
        "INSERT INTO portal_actions (site, ts_us, actor, role, action, target, source, data)"
        " VALUES ('q', 0, 'ann', 'town', 'x', 'y', 'web', '{}')"
    )
    [row] = queries.portal_actions(plain, "q", 10, ROLES)
    assert row["seq"] is None


def test_minute_laeq_is_the_energy_mean_of_the_minutes_seconds(
    store: Store, plain: sqlite3.Connection
) -> None:
    minute = to_us(T0) // 60_000_000
    for second, laeq in ((0, 60.0), (1, 70.0), (61, 50.0)):
        put_sound(store, "n1", second, laeq)
    put_sound(store, "n2", 30, 40.0)
    put_sound(store, "n1", 0, 99.0, site="elsewhere")
    energy_mean = 10 * math.log10((10**6 + 10**7) / 2)
    start, end = to_us(T0), to_us(T0 + timedelta(hours=1))
    found = {(r[0], r[1]): r[2] for r in queries.minute_laeq_of_site(plain, "q", start, end)}
    assert found.keys() == {("n1", minute), ("n1", minute + 1), ("n2", minute)}
    assert math.isclose(found["n1", minute], energy_mean)
    assert math.isclose(found["n1", minute + 1], 50.0) and math.isclose(found["n2", minute], 40.0)
    # Only the seconds in the window count: a part of a minute has the LAeq of that part.
    later = queries.minute_laeq_of_site(plain, "q", start + 1_000_000, end)
    assert math.isclose({(r[0], r[1]): r[2] for r in later}["n1", minute], 70.0)
    one = queries.minute_laeq_of_sensor(plain, "q", "n1", start, start + 60_000_000)
    assert one is not None and math.isclose(one, energy_mean)
    assert queries.minute_laeq_of_sensor(plain, "q", "n1", start + 1_000_000, start + 2_000_000) == 70.0
    assert queries.minute_laeq_of_sensor(plain, "q", "n3", start, start + 60_000_000) is None


def test_the_latest_reading_of_a_kind(store: Store, plain: sqlite3.Connection) -> None:
    assert queries.latest_reading_data(plain, "q", "n1", "status") is None
    with store.batch():
        for minutes, battery in ((0, 90.0), (10, 80.0)):
            status = SensorStatus("q", "n1", T0 + timedelta(minutes=minutes), battery_pct=battery)
            store.append_reading(status, payload_of(status), late=False, now=T0)
        late = SensorStatus("q", "n1", T0 - timedelta(minutes=5), battery_pct=99.0)  # arrives last, older
        store.append_reading(late, payload_of(late), late=True, now=T0)
        light = LightSummary("q", "n1", T0 + timedelta(hours=1), 60.0, 0.5, 0.1, 2.0)
        store.append_reading(light, payload_of(light), late=False, now=T0)
    text = queries.latest_reading_data(plain, "q", "n1", "status")
    assert text is not None and '"battery_pct":80' in text
    assert queries.latest_reading_data(plain, "q", "n2", "status") is None


def test_alerts_for_an_audience_and_of_a_kind_newest_first(store: Store, plain: sqlite3.Connection) -> None:
    with store.batch():
        for n, audience, kind in (
            (0, "town", "violation"),
            (1, "town,inspector", "violation"),
            (2, "operator", "early_warning"),
            (3, "townsfolk", "violation"),  # a longer name that starts like one
            (4, "operator", "early_warning"),
            (5, "inspector,town", "violation"),
        ):
            at = T0 + timedelta(minutes=n)
            store.append_alert(f"a{n}", "q", audience, kind, "high", "c", f"m{n}", {}, at)
        store.append_alert("x", "elsewhere", "town", "early_warning", "high", "c", "m", {}, T0)
    end = T0 + timedelta(hours=1)
    town = queries.alerts_for_audience(plain, "q", "town", T0, end, 10)
    assert [r["id"] for r in town] == ["a5", "a1", "a0"]
    assert (town[0]["kind"], town[0]["severity"], town[0]["message"]) == ("violation", "high", "m5")
    assert [r["id"] for r in queries.alerts_for_audience(plain, "q", "town", T0, end, 2)] == ["a5", "a1"]
    window = queries.alerts_for_audience(
        plain, "q", "town", T0 + timedelta(minutes=1), T0 + timedelta(minutes=5), 10
    )
    assert [r["id"] for r in window] == ["a1"]
    warnings = queries.alerts_for_audience(plain, "q", "operator", T0, end, 10, kind="early_warning")
    assert [(r["id"], r["created_us"]) for r in warnings] == [
        ("a4", to_us(T0 + timedelta(minutes=4))),
        ("a2", to_us(T0 + timedelta(minutes=2))),
    ]
    newest = queries.alerts_for_audience(plain, "q", "operator", T0, end, 1, kind="early_warning")
    assert [r["id"] for r in newest] == ["a4"]
    later = end + timedelta(hours=1)
    assert queries.alerts_for_audience(plain, "q", "operator", end, later, 10, kind="early_warning") == []


def test_the_sensors_an_audiences_alerts_name_each_once(store: Store, plain: sqlite3.Connection) -> None:
    with store.batch():
        for n, audience, sensors in (
            (0, "operator", ["n1"]),
            (1, "operator", ["n1", "n2"]),
            (2, "town", ["n3"]),
            (3, "operator", []),
            (4, "town,operator", ["n4"]),
        ):
            at = T0 + timedelta(minutes=n)
            store.append_alert(
                f"w{n}", "q", audience, "early_warning", "warning", "c", "m", {"sensors": sensors}, at
            )
        store.append_alert("v", "q", "operator", "violation", "high", "c", "m", {"sensors": ["n5"]}, T0)
        store.append_alert(
            "x", "elsewhere", "operator", "early_warning", "warning", "c", "m", {"sensors": ["n6"]}, T0
        )
        store.append_alert(
            "b", "q", "operator", "early_warning", "warning", "c", "m", {"refs": ["notice:B"]}, T0
        )
    end = T0 + timedelta(hours=1)
    assert queries.sensors_alerted(plain, "q", "early_warning", "operator", T0, end) == {"n1", "n2", "n4"}
    assert queries.sensors_alerted(plain, "q", "early_warning", "town", T0, end) == {"n3", "n4"}
    between = T0 + timedelta(minutes=1), T0 + timedelta(minutes=4)  # [start, end)
    assert queries.sensors_alerted(plain, "q", "early_warning", "operator", *between) == {"n1", "n2"}
