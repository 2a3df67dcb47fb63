"""monitor/notify/alerts.py: a condition alerts once, stays silent while it recurs, clears.

The book runs over a real store in the test's folder; what it publishes is recorded in a list.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from monitor.config import AlertsConfig
from monitor.journal.store import Store
from monitor.notify.alerts import Alert, AlertBook
from monitor.wire.canonical import to_us

T0 = datetime(2026, 6, 15, 17, 0, tzinfo=UTC)
GAP_S = 600.0


class Published(list[tuple[str, dict[str, Any]]]):
    def __call__(self, site: str, body: dict[str, Any]) -> None:
        self.append((site, body))

    def conditions(self) -> list[str]:
        return [body["condition"] for _, body in self]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(tmp_path / "store.db")
    yield s
    s.close()


@pytest.fixture
def published() -> Published:
    return Published()


@pytest.fixture
def book(store: Store, published: Published) -> AlertBook:
    return AlertBook(store, AlertsConfig(min_gap_s=GAP_S), published)


def noise(condition: str = "violation:noise:n2:", site: str = "q", **data: Any) -> Alert:
    return Alert(
        site, ("town", "operator"), "violation", "violation", condition, "Noise at meter n2 above 80 dB", data
    )


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def alert_rows(store: Store) -> list[dict[str, Any]]:
    return [dict(r) for r in store.conn.execute("SELECT * FROM alerts ORDER BY created_us, id")]


def test_a_condition_alerts_once_and_stays_silent_while_it_recurs(
    book: AlertBook, store: Store, published: Published
) -> None:
    assert book.raise_(noise(), at(0)) is True
    # Each recurrence within min_gap_s of the previous one keeps it active: half an hour of
    # noise, each minute less than the gap after the last, is one alert.
    for seconds in (60, 500, 1000, 1500, 2000):
        assert book.raise_(noise(), at(seconds)) is False
    assert len(published) == 1
    assert len(alert_rows(store)) == 1
    assert book.last_raised("q", "violation:noise:n2:") == at(2000)  # the last recurrence, not the first


def test_a_condition_quiet_for_min_gap_s_alerts_again(book: AlertBook, published: Published) -> None:
    assert book.raise_(noise(), at(0))
    assert not book.raise_(noise(), at(599))
    # Measured from the last recurrence: one microsecond short of the gap is still active.
    assert not book.raise_(noise(), at(599 + GAP_S) - timedelta(microseconds=1))
    last = at(599 + GAP_S) - timedelta(microseconds=1)
    assert book.raise_(noise(), last + timedelta(seconds=GAP_S))
    assert len(published) == 2
    assert published[0][1]["id"] != published[1][1]["id"]


def test_conditions_are_kept_apart_by_site_and_key(book: AlertBook, published: Published) -> None:
    assert book.raise_(noise("violation:noise:n2:"), at(0))
    assert book.raise_(noise("violation:noise:n1:"), at(1))  # another meter: its own condition
    assert book.raise_(noise("violation:noise:n2:", site="other"), at(2))  # another site
    assert not book.raise_(noise("violation:noise:n2:"), at(3))
    assert [(site, body["condition"]) for site, body in published] == [
        ("q", "violation:noise:n2:"),
        ("q", "violation:noise:n1:"),
        ("other", "violation:noise:n2:"),
    ]


def test_dedupe_false_always_alerts_and_keeps_the_condition_active(
    book: AlertBook, published: Published
) -> None:
    anchor = Alert("q", ("town",), "anchor", "info", "anchor:12", "Evidence chain of q at record 12", {})
    assert book.raise_(anchor, at(0), dedupe=False)
    assert book.raise_(anchor, at(1), dedupe=False)
    assert len(published) == 2
    assert not book.raise_(anchor, at(2))  # an ordinary raise of the same condition is suppressed


def test_the_published_body_and_the_journaled_row(
    book: AlertBook, store: Store, published: Published
) -> None:
    listened: list[dict[str, Any]] = []
    book.listeners.append(listened.append)
    when = at(0.25)
    book.raise_(noise(minute=when, value=84.2), when)  # a datetime in data: journaled as its text
    ((site, body),) = published
    assert site == "q"
    assert body == {
        "id": body["id"],
        "site": "q",
        "ts": "2026-06-15T17:00:00.250Z",
        "audiences": ["town", "operator"],
        "kind": "violation",
        "severity": "violation",
        "condition": "violation:noise:n2:",
        "message": "Noise at meter n2 above 80 dB",
        "data": {"minute": when, "value": 84.2},
    }
    assert len(body["id"]) == 20 and int(body["id"], 16) >= 0
    assert listened == [body]  # listeners (deliveries) get the very body that was published
    (row,) = alert_rows(store)
    assert row["id"] == body["id"]
    assert row["audience"] == "town,operator"
    assert (row["kind"], row["severity"], row["condition"]) == (
        "violation",
        "violation",
        "violation:noise:n2:",
    )
    assert json.loads(row["data"]) == {"minute": str(when), "value": 84.2}
    assert row["created_us"] == to_us(when)
    # Every journaled alert is a chain record of its site.
    chained = store.conn.execute("SELECT key FROM chain WHERE site = 'q' AND kind = 'alert'").fetchall()
    assert [r[0] for r in chained] == [body["id"]]


def test_audiences_are_as_raised(book: AlertBook, store: Store, published: Published) -> None:
    operator_only = Alert("q", ("operator",), "warning", "warning", "warning:noise:n1", "Near the limit", {})
    town_only = Alert("q", ("town",), "anchor", "info", "anchor:3", "Evidence chain", {})
    book.raise_(operator_only, at(0))
    book.raise_(town_only, at(0))
    assert [body["audiences"] for _, body in published] == [["operator"], ["town"]]
    assert sorted(r["audience"] for r in alert_rows(store)) == ["operator", "town"]


def test_clear_ends_a_condition_and_says_so_to_the_audiences_given(
    book: AlertBook, store: Store, published: Published
) -> None:
    offline = Alert("q", ("operator",), "sensor_offline", "warning", "offline:n1", "Sensor n1 silent", {})
    book.raise_(offline, at(0))
    book.clear("q", "offline:n1", "Sensor n1 is back online", at(30), audiences=("operator", "town"))
    cleared = published[-1][1]
    assert (cleared["kind"], cleared["severity"], cleared["audiences"]) == (
        "cleared",
        "info",
        ["operator", "town"],
    )
    assert cleared["message"] == "Sensor n1 is back online"
    assert cleared["data"] == {"condition": "offline:n1"}
    assert cleared["condition"] == f"cleared:offline:n1:{to_us(at(30))}"
    assert book.last_raised("q", "offline:n1") is None
    # Cleared: the condition alerts again at once, well within min_gap_s.
    assert book.raise_(offline, at(40))
    assert published.conditions() == ["offline:n1", cleared["condition"], "offline:n1"]


def test_clear_without_a_message_is_silent_and_clearing_an_inactive_condition_does_nothing(
    book: AlertBook, store: Store, published: Published
) -> None:
    drift = Alert("q", ("operator",), "clock_drift", "warning", "clock:n1", "Clock 3.5 s off", {})
    book.raise_(drift, at(0))
    book.clear("q", "clock:n1", "", at(10), audiences=())
    assert len(published) == 1  # ended without a word
    book.clear("q", "clock:n1", "Clock fine again", at(20), audiences=("operator",))  # no longer active
    book.clear("q", "never-raised", "Nothing", at(20), audiences=("operator",))
    assert len(published) == 1
    assert book.raise_(drift, at(30))  # the ended condition alerts again


def test_active_conditions_survive_a_restart(tmp_path: Path, published: Published) -> None:
    path = tmp_path / "store.db"
    store = Store(path)
    book = AlertBook(store, AlertsConfig(min_gap_s=GAP_S), published)
    with store.batch():
        book.raise_(noise(), at(0))
        book.raise_(noise("violation:noise:n1:"), at(0))
        book.clear("q", "violation:noise:n1:", "", at(5), audiences=())
    store.close()

    store = Store(path)
    again = AlertBook(store, AlertsConfig(min_gap_s=GAP_S), published)
    assert again.last_raised("q", "violation:noise:n2:") == at(0)
    assert not again.raise_(noise(), at(100))  # still active: a restart does not re-alert it
    assert again.raise_(noise("violation:noise:n1:"), at(100))  # cleared before the restart
    assert len(published) == 3
    store.close()


def test_the_condition_and_the_alert_are_written_in_the_callers_transaction(
    book: AlertBook, store: Store, tmp_path: Path
) -> None:
    with pytest.raises(RuntimeError), store.batch():
        book.raise_(noise(), at(0))
        # Another connection sees only what is committed.
        reader = sqlite3.connect(f"file:{tmp_path / 'store.db'}?mode=ro", uri=True)
        assert reader.execute("SELECT COUNT(*) FROM alerts").fetchone()[0] == 0
        reader.close()
        raise RuntimeError("the batch fails")
    assert alert_rows(store) == []
    assert store.conn.execute("SELECT COUNT(*) FROM alert_conditions").fetchone()[0] == 0


def test_a_rolled_back_alert_is_raised_again(book: AlertBook, store: Store, published: Published) -> None:
    with pytest.raises(RuntimeError), store.batch():
        book.raise_(noise(), at(0))
        raise RuntimeError("the batch fails")
    published.clear()  # what the caller does with the rolled-back transaction's messages
    assert book.raise_(noise(), at(1))
