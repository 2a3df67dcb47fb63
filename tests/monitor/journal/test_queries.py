"""The journal's reads (monitor/journal/queries.py) against a real store: current findings by
each filter, chain entries, events overlapping a window, plot series, the demo's counts, anchors,
and the events row every event type is stored as (its span, rules.model.event_span)."""

from __future__ import annotations

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
    SoundLevels,
    WorkKind,
    WorkPeriod,
)

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
