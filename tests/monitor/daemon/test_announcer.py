"""monitor/daemon/announcer.py: what is written in the caller's transaction, and published after it.

A real store in the test's folder; the broker is a callback that records each message and,
at that moment, what another connection to the store can read: a message must never be
published before the records it announces are committed.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from monitor.config import Config
from monitor.daemon.announcer import Announcer, Outgoing
from monitor.daemon.site_state import SiteState
from monitor.daemon.site_status import site_status
from monitor.journal.store import Store
from monitor.notify.alerts import AlertBook
from monitor.notify.notices import NoticeBook, NoticeEvent
from monitor.wire.canonical import to_us
from monitor.wire.codec import finding_to_json
from rules.model import Finding, FindingKind, SoundLevels
from tests.support.notices import SITE, local, make_config, site_and_profile, violation

NOW = local(2026, 6, 15, 11, 0)  # a weekday morning, site time
MINUTE = local(2026, 6, 15, 10, 30)


@dataclass
class Sent:
    topic: str
    body: Any
    retain: bool
    committed_findings: int  # rows another connection could read when the message went out
    committed_alerts: int


class Broker:
    """The publish callback: records each message with what was committed when it was sent."""

    def __init__(self, db: Path) -> None:
        self.db = db
        self.sent: list[Sent] = []
        self.fail_on: str | None = None

    def __call__(self, topic: str, payload: bytes, retain: bool) -> None:
        if topic == self.fail_on:
            raise OSError("the link is down")
        reader = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True)
        try:
            findings = reader.execute("SELECT COUNT(*) FROM findings").fetchone()[0]
            alerts = reader.execute("SELECT COUNT(*) FROM alerts").fetchone()[0]
        finally:
            reader.close()
        self.sent.append(Sent(topic, json.loads(payload), retain, findings, alerts))

    def topics(self) -> list[str]:
        return [s.topic for s in self.sent]

    def on(self, kind: str) -> list[Any]:
        return [s.body for s in self.sent if s.topic == f"minewatch/{SITE}/{kind}"]


class Harness:
    def __init__(self, db: Path) -> None:
        self.config: Config = make_config(db)
        self.store = Store(db)
        self.broker = Broker(db)
        self.outgoing = Outgoing("minewatch", self.broker)
        # As the pipeline does: an alert is an MQTT message of the same transaction.
        self.alerts = AlertBook(
            self.store, self.config.alerts, lambda site, body: self.outgoing.add(site, "alerts", body)
        )
        self.points: list[str] = []
        self.announcer = Announcer(
            self.store, self.alerts, NoticeBook(self.store), self.outgoing, self._write_point
        )
        site, profile = site_and_profile(self.config)
        self.state = SiteState.restore(site, profile, self.store, None, NOW)

    def _write_point(self, make: Any, /, *args: Any, **kwargs: Any) -> None:
        point = make(*args, **kwargs)
        if point is not None:
            self.points.append(point)

    def record(self, findings: list[Finding], now: datetime = NOW) -> int:
        """Record in one transaction, then publish (the pipeline's order)."""
        with self.store.batch():
            stored = self.announcer.record_findings(self.state, MINUTE, findings, now)
        self.outgoing.flush()
        return stored

    def committed(self, sql: str) -> int:
        return int(self.store.conn.execute(sql).fetchone()[0])


@pytest.fixture
def h(tmp_path: Path) -> Iterator[Harness]:
    harness = Harness(tmp_path / "minewatch.db")
    yield harness
    harness.store.close()


def warning(start: datetime) -> Finding:
    return Finding(
        SITE,
        "noise",
        "6.D",
        FindingKind.WARNING,
        start,
        start + timedelta(minutes=1),
        "America/Chicago",
        "Noise at meter n1 is near the 80 dB limit",
        sensors=("n1",),
    )


# --------------------------------------------------------------------------- findings


def test_findings_are_written_in_the_callers_transaction_and_published_after_its_commit(h: Harness) -> None:
    finding = violation(MINUTE)
    with h.store.batch():
        assert h.announcer.record_findings(h.state, MINUTE, [finding], NOW) == 1
        assert h.broker.sent == []  # nothing goes out inside the transaction
        queued = [topic for topic, _, _ in h.outgoing.messages]
        assert {"minewatch/quarry/findings", "minewatch/quarry/violations", "minewatch/quarry/alerts"} <= set(
            queued
        )
    assert h.broker.sent == []  # nor at the commit itself: the caller flushes
    h.outgoing.flush()
    assert h.outgoing.messages == []
    assert h.broker.topics()[:3] == queued[:3]  # in the order they were queued
    # Each message went out when its records could be read by anyone.
    assert all(s.committed_findings == 1 and s.committed_alerts >= 1 for s in h.broker.sent)
    assert h.broker.on("findings") == [finding_to_json(finding)]
    assert h.broker.on("violations") == [finding_to_json(finding)]
    (alert,) = [a for a in h.broker.on("alerts") if a["kind"] == "violation"]
    # The violation's alert names its episode and the notice that tells it (issue 25).
    told = {"episode_id": alert["data"]["episode_id"], "notice_id": "DOV-2026-0001"}
    assert alert["audiences"] == ["town", "operator"]
    assert alert["data"] == {**finding_to_json(finding), **told}
    assert str(told["episode_id"]).startswith("ep-") and "notice DOV-2026-0001" in alert["message"]
    assert alert["condition"] == "violation:noise:n1:"
    assert [p.split(",")[0] for p in h.points] == ["findings"]
    assert h.committed("SELECT COUNT(*) FROM chain WHERE kind = 'finding'") == 1


def test_a_rolled_back_transaction_publishes_nothing_and_keeps_nothing(h: Harness) -> None:
    with pytest.raises(RuntimeError), h.store.batch():
        h.announcer.record_findings(h.state, MINUTE, [violation(MINUTE)], NOW)
        raise RuntimeError("a later step of the tick fails")
    h.outgoing.clear()  # the caller's part on a rollback (Pipeline.handle_batch)
    h.outgoing.flush()
    assert h.broker.sent == []
    assert h.committed("SELECT COUNT(*) FROM findings") == 0
    assert h.committed("SELECT COUNT(*) FROM alerts") == 0
    assert h.store.meta(f"window:{SITE}|{to_us(MINUTE)}") is None


def test_a_savepoint_rolled_back_takes_its_messages_with_it_and_keeps_the_rest(h: Harness) -> None:
    """One site's unit of work fails inside the tick's transaction (as Pipeline.tick runs each
    site under a savepoint): its findings and their messages go; what came before stays."""
    earlier = MINUTE - timedelta(minutes=1)
    with h.store.batch():
        h.announcer.record_findings(h.state, earlier, [violation(earlier)], NOW)
        with pytest.raises(RuntimeError), h.outgoing.unit(h.store.savepoint()):
            h.announcer.record_findings(h.state, MINUTE, [violation(MINUTE)], NOW)
            raise RuntimeError("this site's periodic work fails")
    h.outgoing.flush()
    published = h.broker.on("violations")
    assert len(published) == 1 and published[0]["start"] == finding_to_json(violation(earlier))["start"]
    assert h.committed("SELECT COUNT(*) FROM findings") == 1
    assert len(h.broker.on("alerts")) == h.committed("SELECT COUNT(*) FROM alerts") > 0


def test_the_same_findings_again_change_nothing(h: Harness) -> None:
    h.record([violation(MINUTE)])
    sent = len(h.broker.sent)
    assert h.record([violation(MINUTE)], NOW + timedelta(minutes=1)) == 0
    assert len(h.broker.sent) == sent
    assert h.committed("SELECT COUNT(*) FROM findings") == 1


def test_a_revision_is_published_but_not_alerted_again(h: Harness) -> None:
    h.record([violation(MINUTE, value=84.2)])
    alerts = len(h.broker.on("alerts"))
    # The minute re-judged with late data: the same finding (same id), another value.
    revised = violation(MINUTE, value=86.0)
    assert h.record([revised], NOW + timedelta(minutes=2)) == 1
    assert h.broker.on("findings")[-1] == finding_to_json(revised)
    assert h.broker.on("violations")[-1] == finding_to_json(revised)
    assert len(h.broker.on("alerts")) == alerts
    assert h.committed("SELECT MAX(revision) FROM findings") == 2


def test_a_withdrawn_finding_is_retracted_and_published_as_such(h: Harness) -> None:
    kept, withdrawn = violation(MINUTE, sensor="n1"), violation(MINUTE, sensor="n2")
    h.record([kept, withdrawn])
    h.record([kept], NOW + timedelta(minutes=2))  # re-judged: n2's finding no longer holds
    last = h.broker.on("findings")[-1]
    assert last == {**finding_to_json(withdrawn), "retracted": True}
    ids = [r["id"] for r in h.store.current_findings(SITE, MINUTE, MINUTE + timedelta(minutes=1))]
    assert ids == [kept.id]
    sent = len(h.broker.sent)
    h.record([kept], NOW + timedelta(minutes=3))  # retracted already: not again
    assert len(h.broker.sent) == sent


def test_a_warning_is_an_operator_alert_and_no_violation(h: Harness) -> None:
    h.record([warning(MINUTE)])
    assert h.broker.on("violations") == []
    (alert,) = h.broker.on("alerts")
    assert (alert["kind"], alert["audiences"], alert["condition"]) == (
        "warning",
        ["operator"],
        "warning:noise:n1",
    )
    h.record([warning(MINUTE + timedelta(minutes=1))], NOW + timedelta(minutes=1))
    assert len(h.broker.on("alerts")) == 1  # the same condition recurring: deduplicated


def test_a_notice_event_is_alerted_undeduplicated_and_its_payload_kept_in_utf8(h: Harness) -> None:
    event = NoticeEvent(
        "N-1",
        SITE,
        "opened",
        1,
        ("town", "operator"),
        "notice",
        "notice",
        "Notice N-1 opened for Dovre Quarry",
        {"notice_id": "N-1", "operator": "Ødegård Aggregates"},
    )
    with h.store.batch():
        h.announcer.notice_event(event, NOW)
        h.announcer.notice_event(event, NOW + timedelta(seconds=1))  # every change is told
    payloads = [p for t, p, _ in h.outgoing.messages if t == "minewatch/quarry/notices"]
    assert payloads == ['{"notice_id":"N-1","operator":"Ødegård Aggregates"}'.encode()] * 2
    h.outgoing.flush()
    assert [a["condition"] for a in h.broker.on("alerts")] == ["notice:N-1:1", "notice:N-1:1"]


# --------------------------------------------------------------------------- early warnings


def test_early_warnings_alert_the_operator_once(h: Harness) -> None:
    now = NOW + timedelta(seconds=30)
    with h.store.batch():
        h.state.recent.ensure((NOW,))
        for s in range(30):  # half the minute far above the limit: it cannot end below it
            levels = SoundLevels(SITE, "n1", NOW + timedelta(seconds=s), 1.0, 99.0, 100.0, 115.0)
            h.store.append_sound(levels, source="levels", late=False, now=now)
            h.state.recent.add(levels, NOW)
    for seconds in (0, 10):  # twice within the minute: one alert
        with h.store.batch():
            h.announcer.early_warnings(h.state, now + timedelta(seconds=seconds))
        h.outgoing.flush()
    (alert,) = h.broker.on("alerts")
    assert (alert["kind"], alert["audiences"]) == ("early_warning", ["operator"])
    assert alert["condition"] == "early:noise:n1"
    assert h.committed("SELECT COUNT(*) FROM findings") == 0  # a warning ahead of judging: not a finding


# --------------------------------------------------------------------------- periodic messages


def test_status_is_retained_and_sent_at_most_every_interval(h: Harness) -> None:
    h.state.health["n2"].online = False
    for seconds in (0, 30, 59, 60):
        with h.store.batch():
            h.announcer.status(h.state, NOW + timedelta(seconds=seconds), 60)
        h.outgoing.flush()
    statuses = [s for s in h.broker.sent if s.topic == "minewatch/quarry/status"]
    assert [s.retain for s in statuses] == [True, True]
    site = h.state.config
    assert statuses[0].body == site_status(h.store, site, NOW, {"n1": True, "n2": False})
    assert statuses[1].body["ts"] == site_status(h.store, site, NOW + timedelta(seconds=60))["ts"]


def test_an_anchor_is_recorded_retained_and_told_the_town(h: Harness) -> None:
    h.record([violation(MINUTE)])
    seq, head = h.store.head(SITE)
    with h.store.batch():
        h.announcer.anchor(h.state, NOW, 900)
        assert h.broker.on("anchors") == []
    h.outgoing.flush()
    (anchor,) = [s for s in h.broker.sent if s.topic == "minewatch/quarry/anchors"]
    assert anchor.retain
    assert anchor.body == {"site": SITE, "seq": seq, "head": head, "ts": "2026-06-15T16:00:00Z"}
    row = h.store.conn.execute("SELECT seq, head FROM anchors WHERE site = ?", (SITE,)).fetchone()
    assert tuple(row) == (seq, head)
    (told,) = [a for a in h.broker.on("alerts") if a["kind"] == "anchor"]
    assert (
        told["audiences"] == ["town"]
        and told["message"] == f"Evidence chain of {SITE} at record {seq}: {head}"
    )
    with h.store.batch():
        h.announcer.anchor(h.state, NOW + timedelta(seconds=899), 900)  # within the interval: nothing
    h.outgoing.flush()
    assert len(h.broker.on("anchors")) == 1


# --------------------------------------------------------------------------- Outgoing


def test_a_failed_publish_is_logged_and_the_rest_still_go_out(
    h: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    h.outgoing.add("quarry", "findings", {"n": 1})
    h.outgoing.add("quarry", "alerts", {"n": 2})
    h.outgoing.add("_", "rejected", {"n": 3}, retain=True)
    h.broker.fail_on = "minewatch/quarry/alerts"
    with caplog.at_level(logging.ERROR, logger="minewatch.pipeline"):
        h.outgoing.flush()
    assert [(s.topic, s.body, s.retain) for s in h.broker.sent] == [
        ("minewatch/quarry/findings", {"n": 1}, False),
        ("minewatch/_/rejected", {"n": 3}, True),
    ]
    assert "Could not publish to 'minewatch/quarry/alerts': the link is down" in caplog.text
    assert h.outgoing.messages == []  # not retried: the store has it
