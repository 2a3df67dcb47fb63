"""Line protocol, the InfluxDB writer and the forwarder.

The v1 path runs against a real influxd 1.6.7 (fixture ``influxd``), including an
outage; it also holds the read-back of string fields, which only InfluxDB keeps.
1.6.7 has no /api/v2/write (the v2 writer gets 404 from it, checked below), and no
InfluxDB 2.x can run here, so the v2 path runs against VictoriaMetrics
(fixture ``victoria_metrics``), a real server of ``POST /api/v2/write``: every
measurement of monitor.influx.schema is written and read back through its export API (values
and tags), and an outage is ridden out. VictoriaMetrics keeps numbers and booleans,
not the value of a string field, and answers as it does; what it cannot show is checked
against a local HTTP server that records requests and answers as told: the write API's
exact request (``POST /api/v2/write?org=&bucket=&precision=ns`` with ``Authorization:
Token <token>`` and ``Content-Type: text/plain; charset=utf-8``, gzip when enabled) and
the answers a real server gives only when failing (503 with Retry-After, 400, 401, 429).
"""

from __future__ import annotations

import gzip
import http.server
import json
import logging
import socket
import sqlite3
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from monitor import deadline_http
from monitor.config import InfluxConfig, Secret
from monitor.errors import OutputError
from monitor.influx import client
from monitor.influx.client import (
    Backoff,
    FieldValue,
    InfluxForwarder,
    InfluxReader,
    InfluxWriteError,
    InfluxWriter,
    SeriesRead,
    bisect_write,
    line,
    series_key,
    timestamp_ns,
)
from monitor.influx.forwarder_record import META_KEY, STOPPED, ForwarderRecord, ForwarderRecorder
from monitor.influx.outbox import Outbox
from monitor.influx.schema import MEASUREMENTS
from tests.support.servers import Influxd, VictoriaMetrics, free_port, self_signed_cert

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
T0_NS = 1_780_315_200_000_000_000
FAST = Backoff(base_s=0.02, max_s=0.2, jitter=0.1)

# --------------------------------------------------------------------------- line protocol


@pytest.mark.parametrize(
    ("measurement", "tags", "fields", "expected"),
    [
        ("sound", {"site": "dovre", "sensor": "n1"}, {"LAeq": 52.5}, "sound,sensor=n1,site=dovre LAeq=52.5"),
        (
            "sound",
            {"site": "a b", "sensor": "x,y=z"},
            {"LAeq": 1.0},
            r"sound,sensor=x\,y\=z,site=a\ b LAeq=1.0",
        ),
        ("sound", {"site": "s"}, {"LAeq": 50.0, "late": True}, "sound,site=s LAeq=50.0,late=true"),
        ("sound", {"site": "s"}, {"late": False}, "sound,site=s late=false"),
        ("sound", {"site": "s"}, {"duration_s": 60}, "sound,site=s duration_s=60i"),
        ("sound", {"site": "s"}, {"duration_s": -3}, "sound,site=s duration_s=-3i"),
        ("sound", {"site": "s"}, {"LAeq": 1e-05}, "sound,site=s LAeq=1e-05"),
        ("sound", {"site": "s"}, {"LAeq": 50.0, "LCeq": None}, "sound,site=s LAeq=50.0"),
        ("sound", {"site": "s"}, {"LAeq": 50.0, "LCeq": float("nan")}, "sound,site=s LAeq=50.0"),
        ("sound", {"site": "s", "sensor": ""}, {"LAeq": 50.0}, "sound,site=s LAeq=50.0"),  # empty tag omitted
        ("sound", {}, {"LAeq": 50.0}, "sound LAeq=50.0"),
        ("events", {"site": "s"}, {"summary": 'say "hi"'}, r'events,site=s summary="say \"hi\""'),
        ("events", {"site": "s"}, {"summary": "C:\\dir\\"}, r'events,site=s summary="C:\\dir\\"'),
        ("events", {"site": "s"}, {"summary": "two\nlines"}, 'events,site=s summary="two\nlines"'),
        ("events", {"site": "s"}, {"summary": "a,b=c d"}, 'events,site=s summary="a,b=c d"'),
        ("events", {"site": "s"}, {"summary": ""}, 'events,site=s summary=""'),
        ("events", {"site": "Høgås"}, {"summary": "ø"}, 'events,site=Høgås summary="ø"'),
        (
            "findings",
            {"site": "s", "standard": "NS 8141", "kind": "violation"},
            {"value": 61.2, "limit": 55, "section": "f-1"},
            r'findings,kind=violation,site=s,standard=NS\ 8141 limit=55i,section="f-1",value=61.2',
        ),
    ],
)
def test_line_protocol(
    measurement: str, tags: dict[str, str], fields: dict[str, object], expected: str
) -> None:
    assert line(measurement, tags, fields, T0) == f"{expected} {T0_NS}"  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("measurement", "tags", "fields", "match"),
    [
        ("noise", {}, {"LAeq": 1.0}, "unknown measurement"),
        ("sound", {"site": "s"}, {"LAeqq": 1.0}, "unknown fields"),
        ("sound", {"town": "s"}, {"LAeq": 1.0}, "unknown tags"),
        ("sound", {"site": "s"}, {}, "at least one field"),
        ("sound", {"site": "s"}, {"LAeq": None}, "at least one field"),
        ("sound", {"site": "a\nb"}, {"LAeq": 1.0}, "cannot be written"),
        ("sound", {"site": "ends\\"}, {"LAeq": 1.0}, "cannot be written"),
        ("sound", {"site": "s"}, {"duration_s": 2**63}, "int64"),
    ],
)
def test_line_protocol_refuses(
    measurement: str, tags: dict[str, str], fields: dict[str, object], match: str
) -> None:
    with pytest.raises(ValueError, match=match):
        line(measurement, tags, fields, T0)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("tags", "expected"),
    [
        ({"site": "dovre", "sensor": "n1"}, "sound,sensor=n1,site=dovre"),
        ({"site": "a b", "sensor": "x,y=z"}, r"sound,sensor=x\,y\=z,site=a\ b"),  # escaped, not the end
        ({}, "sound"),
    ],
)
def test_a_lines_series_is_its_measurement_and_tags(tags: dict[str, str], expected: str) -> None:
    """The key a point InfluxDB holds for its series limit is kept by (``series_key``): up to the
    first space that is not escaped, so a site named "a b" is one series, not two."""
    assert series_key(line("sound", tags, {"LAeq": 50.0}, T0)) == expected
    assert series_key(line("sound", tags, {"LAeq": 51.0}, T0 + timedelta(seconds=1))) == expected


def test_timestamp_is_the_records_own_and_exact() -> None:
    ts = datetime(2026, 6, 1, 14, 0, 0, 123456, tzinfo=timezone(timedelta(hours=2)))
    assert timestamp_ns(ts) == T0_NS + 123_456_000
    assert line("sound", {}, {"LAeq": 1.0}, ts) == line("sound", {}, {"LAeq": 1.0}, ts)
    with pytest.raises(ValueError, match="time zone"):
        timestamp_ns(datetime(2026, 6, 1))


# --------------------------------------------------------------------------- pure parts


def test_backoff_grows_caps_and_honours_retry_after() -> None:
    b = Backoff(base_s=1.0, max_s=30.0, jitter=0.2)
    assert [b.delay(n, rand=0.5) for n in (1, 2, 3, 4, 5, 6, 7)] == [1, 2, 4, 8, 16, 30, 30]
    assert b.delay(1, rand=0.0) == pytest.approx(0.8)
    assert b.delay(1, rand=1.0) == pytest.approx(1.2)
    assert b.delay(1, retry_after_s=7, rand=0.5) == 7  # the server's floor
    assert b.delay(1, retry_after_s=3600, rand=0.5) == 30  # capped, like Telegraf
    with pytest.raises(ValueError):
        Backoff(base_s=0)


def _fake_send(bad: set[str], *, down_on: str = "") -> tuple[list[list[str]], Callable[[list[str]], None]]:
    calls: list[list[str]] = []

    def send(lines: list[str]) -> None:
        calls.append(lines)
        hit = [x for x in lines if x in bad]
        if hit:
            raise InfluxWriteError(f"bad {hit[0]}", retryable=False, status=400)
        if down_on and down_on in lines:
            raise InfluxWriteError("503", retryable=True, status=503)

    return calls, send


@pytest.mark.parametrize(
    ("bad", "accepted", "rejected"),
    [
        (set(), "abcdefgh", ""),
        ({"c"}, "abdefgh", "c"),
        ({"a", "h"}, "bcdefg", "ah"),
        (set("abcdefg"), "h", "abcdefg"),
        # Every point refused: the server's fault, not theirs (the test below).
    ],
)
def test_bisect_rejects_only_the_bad_points(bad: set[str], accepted: str, rejected: str) -> None:
    items = list(enumerate("abcdefgh"))
    calls, send = _fake_send(bad)
    result = bisect_write(items, send)
    assert "".join("abcdefgh"[i] for i in result.accepted) == accepted
    assert "".join("abcdefgh"[i] for i, _ in result.rejected) == rejected
    assert all(reason.startswith("bad ") for _, reason in result.rejected)
    assert result.error is None
    if len(bad) == 1:
        assert len(calls) <= 1 + 2 * 3  # log2(8) levels, two halves each


def test_bisect_stops_at_a_retryable_error_keeping_order() -> None:
    items = list(enumerate("abcdefgh"))
    _, send = _fake_send({"b"}, down_on="f")
    result = bisect_write(items, send)
    # The first half is settled; the second half failed whole and stays queued.
    assert result.accepted == [0, 2, 3]
    assert [i for i, _ in result.rejected] == [1]
    assert result.error is not None and result.error.retryable


@pytest.mark.parametrize(
    ("size", "limit", "huge", "accepted", "rejected", "fits"),
    [
        (8, 8, "", "abcdefgh", "", None),  # fits: no 413
        (8, 4, "", "abcdefgh", "", 4),
        (8, 3, "", "abcdefgh", "", 2),
        (8, 1, "", "abcdefgh", "", 1),
        (8, 8, "c", "abdefgh", "c", None),  # one point too large alone: rejected, the size stays
        (1, 1, "a", "", "a", None),
    ],
)
def test_bisect_splits_a_batch_too_large(
    size: int, limit: int, huge: str, accepted: str, rejected: str, fits: int | None
) -> None:
    """413 (Request Entity Too Large) splits the batch like a 400; it was retried whole, forever."""

    def send(lines: list[str]) -> None:
        if len(lines) > limit or huge in lines:
            raise InfluxWriteError(
                "InfluxDB answered 413: Request Entity Too Large", retryable=False, status=413
            )

    items = list(enumerate("abcdefgh"[:size]))
    result = bisect_write(items, send)
    assert "".join("abcdefgh"[i] for i in result.accepted) == accepted
    assert "".join("abcdefgh"[i] for i, _ in result.rejected) == rejected
    assert all("413" in reason for _, reason in result.rejected)
    assert (result.error, result.fits) == (None, fits)


def _refusing(status: int = 400) -> tuple[list[list[str]], Callable[[list[str]], None]]:
    """Refuses every request, each in words of its own (as VictoriaMetrics names the request)."""
    calls: list[list[str]] = []

    def send(lines: list[str]) -> None:
        calls.append(lines)
        raise InfluxWriteError(
            f"InfluxDB answered {status}: request {len(calls)}", retryable=False, status=status
        )

    return calls, send


def test_bisect_rejects_nothing_when_the_server_refuses_every_point_alike() -> None:
    """A proxy in front or a wrong path answers 400 to everything: no point is at fault, so
    none is rejected (the whole backlog went to the rejected table, two requests a point)."""
    items = list(enumerate("abcdefgh"))
    calls, send = _refusing()
    result = bisect_write(items, send)
    assert (result.accepted, result.rejected, result.refused_alike) == ([], [], 400)
    assert result.error is not None and result.error.retryable and result.error.status == 400
    assert str(result.error) == (
        "InfluxDB took none of a batch and refused each of the 8 points alone alike, so the server or"
        " the url's path is at fault, not the points; they stay queued and are retried:"
        " InfluxDB answered 400: request 4"
    )
    assert len(calls) == 15  # the bisection, once

    # The same batch again: the batch and its first point, not another bisection.
    calls.clear()
    again = bisect_write(items, send, refused_before=400)
    assert (again.rejected, again.refused_alike, len(calls)) == ([], 400, 2)


@pytest.mark.parametrize(("server_takes_points", "rejected"), [(True, [0]), (False, [])])
def test_bisect_a_single_point_refused_is_its_fault_if_the_server_takes_others(
    server_takes_points: bool, rejected: list[int]
) -> None:
    _, send = _refusing()
    result = bisect_write([(0, "a")], send, server_takes_points=server_takes_points)
    assert [i for i, _ in result.rejected] == rejected
    assert (result.error is None) == server_takes_points


def test_bisect_points_refused_alike_are_rejected_when_the_server_takes_the_probe() -> None:
    """Every point alone refused with one status (a field type conflict over the whole batch)
    while the server takes another point sent alone (the probe): the points are proven bad
    and rejected (they were kept, and the queue behind them stalled). The probe refused too
    (a proxy, a wrong path), they are kept; the probe's retryable failure keeps them too."""
    items = list(enumerate("abcdefgh"))
    calls, send = _fake_send(set("abcdefgh"), down_on="y")
    result = bisect_write(items, send, probe="z")
    assert [i for i, _ in result.rejected] == list(range(8)) and result.accepted == []
    assert (result.error, result.refused_alike, result.probe_taken) == (None, None, True)
    assert calls[-1] == ["z"] and len(calls) == 16  # the bisection, then the probe

    calls.clear()
    again = bisect_write(items, send, refused_before=400, probe="z")  # held before: proven now
    assert [i for i, _ in again.rejected] == list(range(8)) and again.probe_taken
    assert calls[:3] == [list("abcdefgh"), ["a"], ["z"]]

    refusing_calls, refusing = _refusing()
    kept = bisect_write(items, refusing, probe="z")
    assert (kept.rejected, kept.refused_alike, kept.probe_taken) == ([], 400, False)
    assert refusing_calls[-1] == ["z"]
    refusing_calls.clear()
    kept = bisect_write(items, refusing, refused_before=400, probe="z")
    assert (kept.rejected, kept.refused_alike, len(refusing_calls)) == ([], 400, 3)

    down = bisect_write(items, send, probe="y")  # the server went away as the probe was sent
    assert (down.rejected, down.refused_alike) == ([], None)
    assert down.error is not None and down.error.status == 503


@pytest.mark.parametrize("refused_before", [None, 400])
def test_bisect_splits_a_batch_refused_for_a_limit_counted_over_its_points(
    refused_before: int | None,
) -> None:
    """A limit of the server counted over the request's points (influxd's series limit counts
    each point of a new series): the halves are sent until they fit, nothing rejected; a point
    refused so alone is kept with every point of its series (the line up to its first space),
    which is not sent again, and the others are sent on. Also when the batch was refused alike
    before."""

    def refusal() -> InfluxWriteError:
        return InfluxWriteError(
            "InfluxDB answered 400: partial write: max-series-per-database limit exceeded: (4) dropped=3",
            retryable=True,
            status=400,
            held="InfluxDB's [data] max-series-per-database is reached",
            smaller_may_fit=True,
        )

    sent: list[str] = []

    def send(lines: list[str]) -> None:
        sent.extend(lines)
        if len(lines) > 2 or "e" in lines:
            raise refusal()

    texts = ["a", "b", "c", "d", "e", "f", "e 1", "g"]  # "e 1": a later point of e's series
    result = bisect_write(list(enumerate(texts)), send, refused_before=refused_before)
    assert [texts[i] for i in result.accepted] == ["a", "b", "c", "d", "f", "g"]  # e and e 1 kept
    assert result.rejected == [] and result.error is not None and result.error.held
    assert sent.count("e 1") == (1 if refused_before else 0) + 2  # in the batches refused whole only


def test_bisect_points_refused_alike_beside_points_taken_are_rejected() -> None:
    """The server takes some: every refused point is the point's fault, however alike."""
    items = list(enumerate("abcdefgh"))
    _, send = _fake_send(set("abcdefg"))
    result = bisect_write(items, send)
    assert [i for i, _ in result.rejected] == list(range(7)) and result.accepted == [7]
    assert result.error is None and result.refused_alike is None


# --------------------------------------------------------------------------- v1, real influxd


def v1_config(server: Influxd, db: str = "minewatch", **kw: object) -> InfluxConfig:
    return InfluxConfig(version=1, url=server.url, database=db, **kw)  # type: ignore[arg-type]


@dataclass
class Queue:
    """The store's side (its own connection) and the forwarder's side of one outbox file."""

    store: Outbox
    forwarder_side: Outbox

    def put(self, lines: list[str]) -> None:
        self.store.put(lines)
        self.store.conn.commit()


@pytest.fixture
def queue(tmp_path: Path) -> Iterator[Queue]:
    db = tmp_path / "minewatch.db"
    conn = sqlite3.connect(str(db))
    conn.execute("PRAGMA journal_mode=WAL")
    q = Queue(Outbox(conn), Outbox.open(db))
    yield q
    q.store.close()
    q.forwarder_side.close()


def sound(i: int, value: float | int = 50.0, sensor: str = "n1") -> str:
    return line("sound", {"site": "dovre", "sensor": sensor}, {"LAeq": value}, T0 + timedelta(seconds=i))


def start_forwarder(
    queue: Queue, config: InfluxConfig, batch_size: int = 50, backoff: Backoff = FAST
) -> InfluxForwarder:
    forwarder = InfluxForwarder(
        queue.forwarder_side,
        InfluxWriter(config),
        batch_size=batch_size,
        flush_interval_s=0.02,
        backoff=backoff,
    )
    forwarder.start()
    return forwarder


def wait_until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


def test_v1_writes_outbox_to_influxd_creating_the_database(influxd: Influxd, queue: Queue) -> None:
    queue.put([sound(i, 40.0 + i) for i in range(120)])
    forwarder = start_forwarder(queue, v1_config(influxd))
    try:
        assert forwarder.flush(10)
    finally:
        forwarder.close()
    assert "minewatch" in str(influxd.query("SHOW DATABASES"))
    assert influxd.count("minewatch", "sound", "LAeq") == 120
    series = influxd.query('SELECT "LAeq", "sensor", "site" FROM "sound" ORDER BY time LIMIT 2', "minewatch")
    assert series[0]["values"] == [
        ["2026-06-01T12:00:00Z", 40.0, "n1", "dovre"],
        ["2026-06-01T12:00:01Z", 41.0, "n1", "dovre"],
    ]
    assert queue.store.pending() == 0
    stats = forwarder.stats
    assert (stats.written, stats.rejected, stats.up, stats.pending) == (120, 0, True, 0)


def test_v1_string_fields_round_trip(influxd: Influxd) -> None:
    summaries = ['say "hi"', "C:\\dir\\", "two\nlines", "a,b=c d", "Høgås ø", 'back\\slash \\" mix']
    writer = InfluxWriter(v1_config(influxd))
    writer.write(
        [
            line("events", {"site": "s", "kind": "blast"}, {"summary": s}, T0 + timedelta(seconds=i))
            for i, s in enumerate(summaries)
        ]
    )
    series = influxd.query('SELECT "summary" FROM "events" ORDER BY time', "minewatch")
    values = series[0]["values"]
    assert isinstance(values, list)
    assert [row[1] for row in values] == summaries


def test_v1_without_create_database_keeps_points_queued(influxd: Influxd, queue: Queue) -> None:
    writer = InfluxWriter(v1_config(influxd, db="absent"), create_database=False)
    with pytest.raises(InfluxWriteError) as caught:
        writer.write([sound(0)])
    assert caught.value.status == 404 and caught.value.retryable
    assert "database not found" in str(caught.value)


def test_v1_outage_backlog_written_once(influxd: Influxd, queue: Queue) -> None:
    config = v1_config(influxd)
    forwarder = start_forwarder(queue, config, batch_size=40)
    try:
        queue.put([sound(i) for i in range(100)])
        assert forwarder.flush(10)
        assert influxd.count("minewatch", "sound", "LAeq") == 100

        influxd.stop()
        for chunk in range(5):  # the daemon keeps storing while InfluxDB is down
            queue.put([sound(i) for i in range(100 + 20 * chunk, 120 + 20 * chunk)])
            time.sleep(0.05)
        wait_until(lambda: forwarder.stats.retries >= 3)
        assert not forwarder.stats.up
        assert "unreachable" in forwarder.stats.last_error
        assert queue.store.pending() == 100
        assert not forwarder.flush(0.2)  # cannot drain while down; nothing lost
        assert queue.store.pending() == 100

        influxd.start()  # same workdir and ports
        assert forwarder.flush(15)
        assert forwarder.stats.up
        assert influxd.count("minewatch", "sound", "LAeq") == 200  # nothing missing, nothing doubled

        # Replaying every point (as after a crash between write and ack) changes nothing.
        queue.put([sound(i) for i in range(200)])
        assert forwarder.flush(10)
        assert influxd.count("minewatch", "sound", "LAeq") == 200
        assert forwarder.stats.written == 400 and forwarder.stats.rejected == 0
    finally:
        forwarder.close()


def test_v1_outage_logs_state_changes_not_retries(
    influxd: Influxd, queue: Queue, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="monitor.influx.client")
    forwarder = start_forwarder(queue, v1_config(influxd))
    try:
        influxd.stop()
        queue.put([sound(0)])
        wait_until(lambda: forwarder.stats.retries >= 5)
        influxd.start()
        assert forwarder.flush(15)
    finally:
        forwarder.close()
    messages = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO]
    assert len([m for m in messages if "failing" in m]) == 1
    assert len([m for m in messages if "resumed" in m]) == 1


def test_v1_type_conflict_rejected_neighbours_written(influxd: Influxd, queue: Queue) -> None:
    queue.put([sound(i, 50.0) for i in range(10)])  # LAeq is a float field from here on
    bad = sound(10, 1)  # LAeq=1i: influxd 1.x answers 400 "field type conflict"
    garbled = "sound,site=dovre LAeq= 5"  # not line protocol at all: 400 "unable to parse"
    queue.put(
        [*[sound(i, 60.0) for i in range(11, 20)], bad, *[sound(i, 60.0) for i in range(20, 30)], garbled]
    )
    queue.put([sound(i, 70.0) for i in range(30, 40)])
    forwarder = start_forwarder(queue, v1_config(influxd), batch_size=25)
    try:
        assert forwarder.flush(10)
    finally:
        forwarder.close()
    assert influxd.count("minewatch", "sound", "LAeq") == 39  # every point but the bad one
    rejected = queue.store.rejected()
    assert [r.item for r in rejected] == [bad, garbled]
    assert "field type conflict" in rejected[0].reason and rejected[0].reason.startswith(
        "InfluxDB answered 400"
    )
    assert "unable to parse" in rejected[1].reason
    assert queue.store.pending() == 0
    assert forwarder.stats.rejected == 2 and forwarder.stats.written == 39


def test_v1_a_batch_all_in_type_conflict_is_rejected_not_held(
    influxd: Influxd, queue: Queue, tmp_path: Path
) -> None:
    """Against influxd 1.6.7: a whole batch of points in field type conflict (LAeq an integer
    once it is a float) is refused point by point with one status, as a proxy refuses
    everything; it was kept, retried for ever, and every point behind it waited. The server
    takes a point sent alone (the last it took; after a restart, the newest queued), so the
    batch is rejected with influxd's words and the points behind it are written."""
    queue.put([sound(i, 50.0) for i in range(10)])  # LAeq is a float field from here on
    queue.put([sound(i, 1) for i in range(10, 20)])  # LAeq=1i: "field type conflict", each
    queue.put([sound(i, 60.0) for i in range(20, 25)])
    forwarder = start_forwarder(queue, v1_config(influxd), batch_size=10)
    try:
        assert forwarder.flush(10)
    finally:
        forwarder.close()
    assert influxd.count("minewatch", "sound", "LAeq") == 15
    rejected = queue.store.rejected()
    assert [r.item for r in rejected] == [sound(i, 1) for i in range(10, 20)]
    assert all("field type conflict" in r.reason for r in rejected)

    # A restart: nothing taken yet, the queue's head all in conflict, good points behind it.
    queue.put([sound(i, 2) for i in range(30, 40)])
    queue.put([sound(i, 70.0) for i in range(40, 45)])
    forwarder = start_forwarder(
        Queue(queue.store, Outbox.open(tmp_path / "minewatch.db")), v1_config(influxd), batch_size=10
    )
    try:
        assert forwarder.flush(10)
    finally:
        forwarder.close()
    assert influxd.count("minewatch", "sound", "LAeq") == 20
    assert len(queue.store.rejected()) == 20 and queue.store.pending() == 0


def test_v1_a_batch_refused_for_the_series_limit_is_split_until_its_parts_fit(
    tmp_path: Path, queue: Queue
) -> None:
    """influxd 1.6.7 counts each point of a new series in a request against
    ``max-series-per-database`` (4 here, 2 series held): it refuses 8 points of a third sensor
    in one request ("limit exceeded: (4) dropped=8") and takes them 2 at a time. Held whole,
    the batch was sent again and refused for ever; it is split like a batch too large, and
    every point is written."""
    server = Influxd(tmp_path / "influxd", limits={"max-series-per-database": 4}).start()
    try:
        server.create_database("minewatch")
        writer = InfluxWriter(v1_config(server))
        for sensor in ("n1", "n2"):
            writer.write([sound(0, sensor=sensor)])
        writer.close()
        queue.put([sound(i, sensor="n3") for i in range(8)])
        forwarder = start_forwarder(queue, v1_config(server), batch_size=8)
        try:
            assert forwarder.flush(5)
        finally:
            forwarder.close()
        assert queue.store.rejected() == [] and queue.store.pending() == 0
        assert (forwarder.stats.written, forwarder.stats.rejected, forwarder.stats.up) == (8, 0, True)
        [series] = server.query('SELECT count("LAeq") FROM "sound" WHERE sensor = \'n3\'', "minewatch")
        assert series["values"] == [["1970-01-01T00:00:00Z", 8]]
    finally:
        server.stop()


def test_v1_after_a_restart_a_batch_in_conflict_up_to_the_newest_point_is_rejected(
    influxd: Influxd, queue: Queue, tmp_path: Path
) -> None:
    """Against influxd 1.6.7: after a restart, every point queued is in field type conflict,
    the newest too. The point sent alone to tell the points' fault from the server's was the
    newest queued (nothing taken since the start), refused like the rest, so the batch was held
    until a point the server takes was queued. The last point the server took is kept in the
    store: sent alone after the restart, it is taken, and the batch is rejected at once."""
    queue.put([sound(i, 50.0) for i in range(5)])  # LAeq is a float field from here on
    forwarder = start_forwarder(queue, v1_config(influxd), batch_size=10)
    try:
        assert forwarder.flush(10)
    finally:
        forwarder.close()

    queue.put([sound(i, 1) for i in range(10, 20)])  # LAeq=1i: "field type conflict", each
    restarted = Queue(queue.store, Outbox.open(tmp_path / "minewatch.db"))
    forwarder = start_forwarder(restarted, v1_config(influxd), batch_size=10)
    try:
        assert forwarder.flush(5)
    finally:
        forwarder.close()
    assert [r.item for r in queue.store.rejected()] == [sound(i, 1) for i in range(10, 20)]
    assert queue.store.pending() == 0 and forwarder.stats.up
    assert influxd.count("minewatch", "sound", "LAeq") == 5  # the probe overwrote itself


def test_the_target_kept_with_the_last_point_taken_holds_no_secret() -> None:
    """The store keeps the last point each target took under the target's name: the url's
    user:password@ and query (InfluxDB 1.x reads u= and p= there) are left out of it."""
    v1 = InfluxConfig(version=1, url="http://u:s3cr3t@influx:8086/proxy/?p=s3cr3t", database="mw")
    v2 = InfluxConfig(
        version=2, url="https://influx", org="quarry", bucket="minewatch", token=Secret("s3cr3t")
    )
    assert InfluxWriter(v1).target == "v1 http://influx:8086/proxy db=mw rp="
    assert InfluxWriter(v2).target == "v2 https://influx org=quarry bucket=minewatch"


def test_v1_batches_too_large_are_split_and_kept_smaller(
    tmp_path: Path, queue: Queue, caplog: pytest.LogCaptureFixture
) -> None:
    """influxd with ``[http] max-body-size`` 4000: a write larger is answered 413. The batch
    is split until the server takes it, later batches keep that size, and a point too large
    alone is rejected with the server's reason (the whole batch was retried forever)."""
    server = Influxd(tmp_path / "influxd", max_body_size=4000).start()
    try:
        server.create_database("minewatch")
        huge = line("events", {"site": "dovre", "kind": "blast"}, {"summary": "x" * 5000}, T0)
        queue.put([sound(i) for i in range(150)])  # ~56 bytes each: 8.4 kB a batch of 150
        queue.put([huge])
        queue.put([sound(i) for i in range(150, 300)])
        forwarder = start_forwarder(queue, v1_config(server), batch_size=150)
        try:
            assert forwarder.flush(20)
        finally:
            forwarder.close()
        assert server.count("minewatch", "sound", "LAeq") == 300
        [rejected] = queue.store.rejected()
        assert rejected.item == huge
        assert rejected.reason.startswith("InfluxDB answered 413")
        assert queue.store.pending() == 0
        assert forwarder.batch_size == 38  # 75 points (4.2 kB) were too many, 37 and 38 were not
        assert (forwarder.stats.written, forwarder.stats.rejected) == (300, 1)
        lowered = [r.getMessage() for r in caplog.records if "too large" in r.getMessage()]
        assert lowered == [
            "InfluxDB refused a batch of 150 points as too large (413); sending at most 38 a batch"
            " from now on (storage.influxdb.batch_size is 150)"
        ]
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("limit", "answer"),
    [
        ("max-series-per-database", "max-series-per-database limit exceeded: (2)"),
        ("max-values-per-tag", 'max-values-per-tag limit exceeded (2/2): measurement="sound" tag="sensor"'),
    ],
)
def test_v1_points_refused_for_a_limit_of_the_server_are_held_not_rejected(
    tmp_path: Path, queue: Queue, caplog: pytest.LogCaptureFixture, limit: str, answer: str
) -> None:
    """influxd 1.6.7 with ``[data] max-series-per-database = 2`` (or ``max-values-per-tag = 2``)
    holding two sensors' series: the points of a third sensor are answered 400 "partial write:
    max-series-per-database limit exceeded: (2) dropped=N" while the server takes the others, and
    they were rejected as the points' fault. The limit is the server's state: the third sensor's
    points stay queued (in order), the others are written, the forwarder is down and says why
    once, and once the limit is raised (influxd restarted) every point is written and none
    rejected."""
    caplog.set_level(logging.DEBUG, logger="monitor.influx.client")
    server = Influxd(tmp_path / "influxd", limits={limit: 2}).start()
    try:
        server.create_database("minewatch")
        writer = InfluxWriter(v1_config(server))
        for sensor in ("n1", "n2"):  # one at a time: influxd counts each point of a new series
            writer.write([sound(0, sensor=sensor)])
        writer.close()
        queue.put([sound(i, sensor=sensor) for i in range(5) for sensor in ("n1", "n2")])
        queue.put([sound(i, sensor=sensor) for i in range(5, 10) for sensor in ("n1", "n2", "n3")])
        forwarder = start_forwarder(queue, v1_config(server), batch_size=10)
        try:
            wait_until(lambda: forwarder.stats.retries >= 3)
            assert not forwarder.flush(0.2)
            # The third sensor's points are held: 5 wait, in order; the others are written.
            assert queue.store.rejected() == []
            assert [text for _, text in queue.store.peek(10)] == [sound(i, sensor="n3") for i in range(5, 10)]
            stats = forwarder.stats
            assert (stats.written, stats.rejected, stats.up) == (20, 0, False)
            assert stats.held == f"InfluxDB's [data] {limit} is reached"
            assert answer in stats.last_error
            logged = [
                r for r in caplog.records if r.levelno >= logging.INFO and r.name == "monitor.influx.client"
            ]
            assert [r.levelno for r in logged] == [logging.ERROR]  # once, not per retry
            assert (
                logged[0]
                .getMessage()
                .startswith(
                    "InfluxDB refuses points for a state of its own, not for the points"
                    f" (InfluxDB's [data] {limit} is reached): they stay queued"
                )
            )

            server.stop()
            server.limits = {limit: 0}  # the operator lifts the limit
            server.start()
            assert forwarder.flush(15)
            assert forwarder.stats.up and forwarder.stats.held == ""
        finally:
            forwarder.close()
        assert queue.store.rejected() == [] and queue.store.pending() == 0
        for sensor, count in (("n1", 10), ("n2", 10), ("n3", 5)):
            [series] = server.query(
                f'SELECT count("LAeq") FROM "sound" WHERE sensor = \'{sensor}\'', "minewatch"
            )
            values = series["values"]
            assert isinstance(values, list) and values[0][1] == count, sensor
    finally:
        server.stop()


def test_v1_a_point_in_type_conflict_behind_points_held_for_the_series_limit_is_rejected(
    tmp_path: Path, queue: Queue
) -> None:
    """influxd 1.6.7 with ``[data] max-series-per-database = 2`` holding n1's and n2's series; a
    batch of a third sensor's points (held for the limit) and, behind the first, a point of n1
    whose LAeq is a string. influxd names one reason a request, the limit before the field type
    conflict (a request holding both reads "max-series-per-database limit exceeded"), and the
    batch stopped at the first point held, so the point waited with the held ones until the
    limit was lifted. The third sensor's series is held (its points kept, not sent again that round) and
    the rest of the batch sent on: the point in conflict is rejected for its own fault while the
    hold goes on, n2's point is written, and n3's once the limit is raised."""
    server = Influxd(tmp_path / "influxd", limits={"max-series-per-database": 2}).start()
    try:
        server.create_database("minewatch")
        writer = InfluxWriter(v1_config(server))
        for sensor in ("n1", "n2"):
            writer.write([sound(0, sensor=sensor)])
        writer.close()
        conflict = line(
            "sound", {"site": "dovre", "sensor": "n1"}, {"LAeq": "loud"}, T0 + timedelta(seconds=1)
        )
        queue.put([sound(1, sensor="n3"), conflict, sound(1, sensor="n2"), sound(2, sensor="n3")])
        forwarder = start_forwarder(queue, v1_config(server), batch_size=10)
        try:
            wait_until(lambda: forwarder.stats.rejected == 1)
            [rejected] = queue.store.rejected()
            assert rejected.item == conflict
            assert "field type conflict" in rejected.reason, rejected.reason
            assert [text for _, text in queue.store.peek(10)] == [
                sound(1, sensor="n3"),
                sound(2, sensor="n3"),
            ]
            stats = forwarder.stats
            assert (stats.written, stats.up) == (1, False)
            assert stats.held == "InfluxDB's [data] max-series-per-database is reached"
            assert server.count("minewatch", "sound", "LAeq") == 3  # n1's and n2's first, n2's second

            server.stop()
            server.limits = {"max-series-per-database": 0}  # the operator lifts the limit
            server.start()
            assert forwarder.flush(15)
        finally:
            forwarder.close()
        assert len(queue.store.rejected()) == 1 and queue.store.pending() == 0
        [series] = server.query('SELECT count("LAeq") FROM "sound" WHERE sensor = \'n3\'', "minewatch")
        assert series["values"] == [["1970-01-01T00:00:00Z", 2]]
    finally:
        server.stop()


def test_v1_points_held_for_the_series_limit_do_not_hold_the_points_queued_behind_them(
    tmp_path: Path, queue: Queue
) -> None:
    """influxd 1.6.7 with ``[data] max-series-per-database = 2`` holding n1's and n2's series,
    and a new sensor n3 past it with more points queued than a batch holds (6, batch_size 4):
    every batch was n3's points, held, and n1's points queued behind them waited for the limit
    too. One point of a held series goes in a batch (the oldest, trying the hold again), the
    rest of its points wait in order, and n1's are written meanwhile (as the state that
    status shows says), a batch after a batch
    that wrote some at once (it was after the backoff of a failure, 8 s here, each time); once
    the limit is raised n3's are written, none rejected."""
    server = Influxd(tmp_path / "influxd", limits={"max-series-per-database": 2}).start()
    try:
        server.create_database("minewatch")
        writer = InfluxWriter(v1_config(server))
        for sensor in ("n1", "n2"):
            writer.write([sound(0, sensor=sensor)])
        writer.close()
        held = [sound(i, sensor="n3") for i in range(1, 7)]
        queue.put(held)
        queue.put([sound(i) for i in range(7, 13)])
        began = time.monotonic()
        forwarder = start_forwarder(
            queue, v1_config(server), batch_size=4, backoff=Backoff(base_s=8, max_s=8, jitter=0)
        )
        try:
            wait_until(lambda: forwarder.stats.written == 6, timeout=30)  # 3 a batch beside n3's oldest
            # One backoff (the first batch, all n3's: 8 s), not two (16 s); 5 s for a busy machine.
            assert time.monotonic() - began < 13
            assert [text for _, text in queue.store.peek(10)] == held
            stats = forwarder.stats
            assert (stats.rejected, stats.up) == (0, False)
            assert stats.held == "InfluxDB's [data] max-series-per-database is reached"
            # What status shows ("not writing since ...: ") says that the others are written.
            assert "until it takes them (the points of other series are written meanwhile): " in stats.state

            server.stop()
            server.limits = {"max-series-per-database": 0}  # the operator lifts the limit
            server.start()
            assert forwarder.flush(15)
        finally:
            forwarder.close()
        assert queue.store.rejected() == [] and queue.store.pending() == 0
        assert server.count("minewatch", "sound", "LAeq") == 2 + 6 + 6
    finally:
        server.stop()


def test_v1_a_held_backlog_is_read_once_not_every_batch(
    tmp_path: Path, queue: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    """influxd 1.6.7 with ``[data] max-series-per-database = 2`` holding a new sensor n3's 3,000
    points at the head of the queue: every batch read all of them again to find what was queued
    behind (a second a batch for a week of one sensor's seconds). The held head is read once;
    points queued later are found past it (the outbox's reads counted, and left to do their
    work)."""
    server = Influxd(tmp_path / "influxd", limits={"max-series-per-database": 2}).start()
    try:
        server.create_database("minewatch")
        writer = InfluxWriter(v1_config(server))
        for sensor in ("n1", "n2"):
            writer.write([sound(0, sensor=sensor)])
        writer.close()
        queue.put([sound(i, sensor="n3") for i in range(1, 3001)])
        queue.put([sound(i) for i in range(3001, 3004)])
        read: list[int] = []
        real_peek = queue.forwarder_side.peek

        def counted(limit: int, *, after: int = 0) -> list[tuple[int, str]]:
            page = real_peek(limit, after=after)
            read.append(len(page))
            return page

        monkeypatch.setattr(queue.forwarder_side, "peek", counted)
        forwarder = start_forwarder(queue, v1_config(server), batch_size=100)
        try:
            wait_until(lambda: forwarder.stats.written == 3)
            read.clear()
            for i in range(3004, 3010):  # as the daemon queues them, a batch apart
                queue.put([sound(i)])
                wait_until(lambda i=i: forwarder.stats.written == i - 3000)
            assert 0 < sum(read) < 100, sum(read)
            assert queue.store.pending() == 3000 and forwarder.stats.rejected == 0
        finally:
            forwarder.close()
    finally:
        server.stop()


def test_v1_connection_refused_is_retryable() -> None:
    writer = InfluxWriter(
        InfluxConfig(version=1, url=f"http://127.0.0.1:{free_port()}", database="x", timeout_s=2)
    )
    with pytest.raises(OutputError) as caught:
        writer.write([sound(0)])
    assert caught.value.retryable
    assert "unreachable" in str(caught.value)


def test_v2_client_against_influxd_16_gets_404_and_keeps_points(influxd: Influxd) -> None:
    writer = InfluxWriter(InfluxConfig(version=2, url=influxd.url, org="o", bucket="b", token=Secret("t")))
    with pytest.raises(InfluxWriteError) as caught:
        writer.write([sound(0)])
    assert caught.value.status == 404 and caught.value.retryable  # a wrong URL/version must not drop data
    writer.close()


def test_flush_without_a_running_loop_drains_inline(influxd: Influxd, queue: Queue) -> None:
    queue.put([sound(i) for i in range(30)])
    forwarder = InfluxForwarder(
        queue.forwarder_side, InfluxWriter(v1_config(influxd)), batch_size=7, backoff=FAST
    )
    assert forwarder.flush(10)
    assert influxd.count("minewatch", "sound", "LAeq") == 30
    forwarder.close()


# --------------------------------------------------------------------------- v2, recording HTTP server


@dataclass
class Request:
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: str
    at: float
    method: str = "POST"


Reply = tuple[int, dict[str, str], bytes]


@dataclass
class Recorder:
    """Records each request; ``reply`` decides the answer (204 unless told)."""

    url: str = ""
    requests: list[Request] = field(default_factory=list)
    reply: Callable[[Request], Reply] = lambda _: (204, {}, b"")


def serve(rec: Recorder, host: str = "127.0.0.1") -> Iterator[Recorder]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as influxdb-client's pool expects

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if self.headers.get("Content-Encoding") == "gzip":
                raw = gzip.decompress(raw)
            url = urllib.parse.urlsplit(self.path)
            request = Request(
                url.path,
                dict(urllib.parse.parse_qsl(url.query)),
                dict(self.headers),
                raw.decode(),
                time.monotonic(),
                self.command,
            )
            rec.requests.append(request)
            status, headers, body = rec.reply(request)
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST  # a followed redirect arrives as a GET

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer((host, 0), Handler)
    rec.url = f"http://{host}:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield rec
    server.shutdown()
    server.server_close()


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    yield from serve(Recorder())


@pytest.fixture
def elsewhere() -> Iterator[Recorder]:
    """Another host (127.0.0.2, loopback too) that a redirect points to."""
    yield from serve(Recorder(), "127.0.0.2")


def v2_config(rec: Recorder) -> InfluxConfig:
    return InfluxConfig(version=2, url=rec.url, org="quarry", bucket="minewatch", token=Secret("s3cr3t"))


def delivered(rec: Recorder) -> list[str]:
    """Lines from the requests answered 2xx (the reply is recomputed: replies here are pure)."""
    return [x for r in rec.requests if rec.reply(r)[0] < 300 for x in r.body.split("\n")]


@pytest.mark.parametrize("use_gzip", [False, True])
def test_v2_request_follows_the_write_api_contract(recorder: Recorder, use_gzip: bool) -> None:
    """The recording server: the exact URL, query and headers of a request, which
    VictoriaMetrics accepts without showing (it ignores the token and the charset)."""
    lines = [sound(0), sound(1), line("events", {"site": "s"}, {"summary": "Høgås"}, T0)]
    writer = InfluxWriter(v2_config(recorder), gzip=use_gzip)
    writer.write(lines)
    writer.close()
    [request] = recorder.requests
    assert request.path == "/api/v2/write"
    assert request.query == {"org": "quarry", "bucket": "minewatch", "precision": "ns"}
    assert request.headers["Authorization"] == "Token s3cr3t"
    assert request.headers["Content-Type"] == "text/plain; charset=utf-8"
    assert request.headers.get("Content-Encoding") == ("gzip" if use_gzip else None)
    assert request.body.split("\n") == lines


def test_v2_503_with_retry_after_then_delivered_once(recorder: Recorder, queue: Queue) -> None:
    """The recording server: a 503 with Retry-After, which VictoriaMetrics cannot be made to answer."""
    answers = iter([(503, {"Retry-After": "1"}, b'{"code":"unavailable","message":"busy"}')])
    recorder.reply = lambda _: next(answers, (204, {}, b""))
    queue.put([sound(i) for i in range(5)])
    # max_s above Retry-After so it is honoured in full (it is capped at max_s).
    forwarder = start_forwarder(queue, v2_config(recorder), backoff=Backoff(base_s=0.02, max_s=5.0))
    try:
        assert forwarder.flush(10)
    finally:
        forwarder.close()
    first, second = recorder.requests
    assert first.body == second.body == "\n".join(sound(i) for i in range(5))
    assert second.at - first.at >= 0.9  # Retry-After honoured over the (tiny) backoff
    assert forwarder.stats.retries == 1 and forwarder.stats.written == 5
    assert "503" in forwarder.stats.last_error and "busy" in forwarder.stats.last_error


def test_v2_400_is_bisected_and_only_the_bad_point_rejected(recorder: Recorder, queue: Queue) -> None:
    """The recording server: InfluxDB 2's 400 for a field type conflict; VictoriaMetrics has
    no field types and takes the point (and skips lines it cannot parse with a 204)."""
    bad = sound(3, 1)

    def reply(request: Request) -> Reply:
        if bad in request.body.split("\n"):
            message = (
                'failure writing points to database: partial write: field type conflict: input field "LAeq"'
            )
            return (
                400,
                {"Content-Type": "application/json"},
                json.dumps({"code": "invalid", "message": message}).encode(),
            )
        return 204, {}, b""

    recorder.reply = reply
    good = [sound(i) for i in range(8) if i != 3]
    queue.put([*good[:3], bad, *good[3:]])
    forwarder = start_forwarder(queue, v2_config(recorder))
    try:
        assert forwarder.flush(10)
    finally:
        forwarder.close()
    assert sorted(delivered(recorder)) == sorted(good)  # each good point written exactly once
    [rejected] = queue.store.rejected()
    assert rejected.item == bad
    assert rejected.reason.startswith("InfluxDB answered 400: failure writing points")
    assert forwarder.stats.rejected == 1 and forwarder.stats.retries == 0


def test_v1_a_retention_policy_not_found_holds_the_points_and_says_why(
    influxd: Influxd, queue: Queue, caplog: pytest.LogCaptureFixture
) -> None:
    """influxd 1.6.7 answers a write to a retention policy it does not have with 500 "retention
    policy not found: year": retried (a 5xx), the log said only that writes were failing. It
    names the server's state: the forwarder says so, once, and writes the points once the policy
    is created."""
    caplog.set_level(logging.INFO, logger="monitor.influx.client")
    influxd.create_database("minewatch")
    queue.put([sound(i) for i in range(3)])
    forwarder = start_forwarder(queue, v1_config(influxd, retention_policy="year"))
    try:
        wait_until(lambda: forwarder.stats.retries >= 3)
        assert queue.store.rejected() == [] and queue.store.pending() == 3
        assert forwarder.stats.held == "the retention policy (retention_policy) does not exist"
        assert "retention policy not found: year" in forwarder.stats.last_error
        influxd.execute('CREATE RETENTION POLICY "year" ON "minewatch" DURATION 0s REPLICATION 1')
        assert forwarder.flush(10)
    finally:
        forwarder.close()
    logged = [r.getMessage() for r in caplog.records if r.name == "monitor.influx.client"]
    assert len(logged) == 2, logged  # once held, once resumed
    assert logged[0].startswith(
        "InfluxDB refuses points for a state of its own, not for the points (the retention policy"
        " (retention_policy) does not exist)"
    )
    [series] = influxd.query('SELECT count("LAeq") FROM "year"."sound"', "minewatch")
    assert series["values"] == [["1970-01-01T00:00:00Z", 3]]


def test_v1_a_full_disk_holds_the_points(recorder: Recorder, queue: Queue) -> None:
    """The recording server answers a write as InfluxDB 1.7 does when its disk is full (400
    "partial write: ...: no space left on device dropped=1", influxdata/docs.influxdata.com-ARCHIVE
    #2368; no influxd here can be made to run out of disk): the point was rejected as its own
    fault. It is held, queued and retried, and written once the server takes points again."""
    message = (
        "partial write: write /var/lib/influxdb/data/tafstat/_series/06/0002:"
        " no space left on device dropped=1"
    )
    disk_full = threading.Event()
    disk_full.set()
    body = json.dumps({"error": message}).encode()
    recorder.reply = lambda _: (400, {}, body) if disk_full.is_set() else (204, {}, b"")
    forwarder = start_forwarder(queue, InfluxConfig(version=1, url=recorder.url, database="mw"))
    queue.put([sound(0)])
    try:
        wait_until(lambda: forwarder.stats.retries >= 2)
        assert queue.store.rejected() == [] and queue.store.pending() == 1
        assert (forwarder.stats.held, forwarder.stats.up) == ("InfluxDB's disk is full", False)
        disk_full.clear()  # space freed
        assert forwarder.flush(10)
    finally:
        forwarder.close()
    assert (forwarder.stats.written, forwarder.stats.rejected, queue.store.pending()) == (1, 0, 0)
    assert recorder.requests[-1].body == sound(0)


def test_v2_401_is_retried_and_logged_as_an_error(
    recorder: Recorder, queue: Queue, caplog: pytest.LogCaptureFixture
) -> None:
    """The recording server: a 401 for a bad token; VictoriaMetrics checks no token."""
    token_fixed = threading.Event()
    recorder.reply = lambda _: (
        (204, {}, b"")
        if token_fixed.is_set()
        else (401, {}, b'{"code":"unauthorized","message":"unauthorized access"}')
    )
    queue.put([sound(0)])
    forwarder = start_forwarder(queue, v2_config(recorder))
    try:
        wait_until(lambda: forwarder.stats.retries >= 3)
        assert queue.store.pending() == 1 and not queue.store.rejected()
        assert queue.forwarder_side.attempts(queue.store.peek(1)[0][0]) >= 3
        token_fixed.set()  # e.g. the operator fixed the token
        assert forwarder.flush(10)
    finally:
        forwarder.close()
    errors = [r for r in caplog.records if r.levelno == logging.ERROR and r.name == "monitor.influx.client"]
    assert len(errors) == 1  # once per state change, not per retry
    assert "credentials" in errors[0].getMessage() and "401" in errors[0].getMessage()
    assert forwarder.stats.written == 1


def test_the_forwarders_state_says_its_age_when_no_daemon_reports() -> None:
    """A record left by a daemon killed outright read as current; given when a daemon last
    reported (``LinkState.silent_since``), it says how old it is, except the daemon's own word
    that it stopped, which stays true."""
    since = datetime(2026, 6, 15, 12, 0, 5, tzinfo=UTC)
    silent = since + timedelta(minutes=10)
    writing = ForwarderRecord(True, "", since)
    assert (
        writing.describe(silent + timedelta(hours=3))
        == "InfluxDB forwarder: writing since 2026-06-15 12:00:05Z"
    )
    assert writing.current(None) and not writing.current(silent)
    assert writing.describe(silent + timedelta(minutes=12), silent) == (
        "InfluxDB forwarder: writing since 2026-06-15 12:00:05Z (as the daemon left it: no daemon has"
        " reported since 2026-06-15 12:10:05Z, 12 min ago)"
    )
    held = ForwarderRecord(False, "InfluxDB refuses points", since)
    assert held.describe(silent + timedelta(days=3), silent).endswith("12:10:05Z, 3 d ago)")
    stopped = ForwarderRecord(False, STOPPED, since)
    assert stopped.current(silent)
    assert stopped.describe(silent + timedelta(days=3), silent) == (
        f"InfluxDB forwarder: not writing since 2026-06-15 12:00:05Z: {STOPPED}"
    )


def test_the_forwarders_state_is_recorded_once_per_change_not_per_retry(
    recorder: Recorder, queue: Queue
) -> None:
    """The recording server answers 503 (no real server does on demand) while the forwarder
    retries, then 204. The state `minewatch status` reads (ForwarderRecorder, here writing to a
    list instead of the store's meta row) is written when it changes: writing, not writing and
    why, writing again; not on each retry."""
    recorder.reply = lambda _: (503, {}, b'{"code":"unavailable","message":"busy"}')
    queue.put([sound(0)])
    forwarder = start_forwarder(queue, v2_config(recorder))
    written: list[tuple[str, str]] = []
    record = ForwarderRecorder(lambda: forwarder.stats, lambda key, value: written.append((key, value)))
    try:
        record.poll()
        wait_until(lambda: forwarder.stats.retries >= 1)
        for _ in range(5):
            record.poll()
            time.sleep(0.05)
        assert forwarder.stats.retries >= 3
        recorder.reply = lambda _: (204, {}, b"")
        assert forwarder.flush(10)
        record.poll()
        record.poll()
    finally:
        forwarder.close()
    assert [key for key, _ in written] == [META_KEY] * 3
    states = [ForwarderRecord.from_json(value) for _, value in written]
    assert [(s.up, s.state) for s in states if s is not None] == [
        (True, ""),
        (False, "InfluxDB writes failing, points stay queued and are retried: InfluxDB answered 503: busy"),
        (True, ""),
    ]


@pytest.mark.parametrize(
    ("status", "retryable"),
    [(400, False), (413, False), (422, False), (401, True), (403, True), (429, True), (500, True)],
)
def test_v2_status_classification(recorder: Recorder, status: int, retryable: bool) -> None:
    """The recording server: each error status on demand, which no real server answers at will."""
    recorder.reply = lambda _: (status, {"Retry-After": "2"}, b'{"code":"x","message":"m"}')
    writer = InfluxWriter(v2_config(recorder))
    with pytest.raises(InfluxWriteError) as caught:
        writer.write([sound(0)])
    writer.close()
    assert (caught.value.status, caught.value.retryable) == (status, retryable)
    assert str(caught.value) == f"InfluxDB answered {status}: m"
    assert caught.value.retry_after_s == (2.0 if retryable else None)


def test_v2_connection_refused_is_retryable() -> None:
    config = InfluxConfig(version=2, url=f"http://127.0.0.1:{free_port()}", org="o", bucket="b", timeout_s=2)
    writer = InfluxWriter(config)
    with pytest.raises(OutputError) as caught:
        writer.write([sound(0)])
    writer.close()
    assert caught.value.retryable


def test_v1_basic_auth_and_params_on_the_wire(recorder: Recorder) -> None:
    """The recording server: the exact v1 query and Basic auth header (influxd 1.6.7 runs
    here without authentication, and no rp named "year")."""
    config = InfluxConfig(
        version=1,
        url=recorder.url,
        database="mw",
        username="u",
        password=Secret("p"),
        retention_policy="year",
    )
    InfluxWriter(config).write([sound(0)])
    [request] = recorder.requests
    assert (request.path, request.query) == ("/write", {"db": "mw", "rp": "year", "precision": "ns"})
    assert request.headers["Authorization"] == "Basic dTpw"
    assert request.body == sound(0)


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
@pytest.mark.parametrize("version", [1, 2])
def test_a_redirect_is_never_followed_and_the_points_stay_queued(
    recorder: Recorder,
    elsewhere: Recorder,
    queue: Queue,
    caplog: pytest.LogCaptureFixture,
    version: int,
    status: int,
) -> None:
    """The recording server answers every write with a redirect to another host (no real
    InfluxDB redirects). urllib followed a 301/302/303 as a GET without the body, counted
    its 200 as written and sent the Basic auth header there: nothing may reach that host."""
    target = f"{elsewhere.url}/write?db=mw"
    recorder.reply = lambda _: (status, {"Location": target}, b"")
    elsewhere.reply = lambda _: (200, {}, b"ok")
    if version == 1:
        config = InfluxConfig(version=1, url=recorder.url, database="mw", username="u", password=Secret("p"))
    else:
        config = v2_config(recorder)
    queue.put([sound(i) for i in range(3)])
    forwarder = start_forwarder(queue, config)
    try:
        wait_until(lambda: forwarder.stats.retries >= 3)
        assert not forwarder.flush(0.2)
    finally:
        forwarder.close()
    assert elsewhere.requests == []  # neither the points nor the credentials went there
    assert queue.store.pending() == 3 and not queue.store.rejected()
    stats = forwarder.stats
    assert (stats.written, stats.rejected, stats.up) == (0, 0, False)
    expected = (
        f"InfluxDB at {recorder.url} answered {status} (a redirect to {target}):"
        " minewatch does not follow redirects; set url to the final address"
    )
    assert stats.last_error == expected
    logged = [r.getMessage() for r in caplog.records if r.name == "monitor.influx.client"]
    assert logged == [expected]  # once, not per retry
    assert [r.levelno for r in caplog.records if r.name == "monitor.influx.client"] == [logging.ERROR]


def test_the_reader_follows_no_redirect(recorder: Recorder, elsewhere: Recorder) -> None:
    """The recording server redirects the v1 /query of evidence export: the credentials stay here."""
    recorder.reply = lambda _: (302, {"Location": f"{elsewhere.url}/query"}, b"")
    elsewhere.reply = lambda _: (200, {}, b'{"results":[{}]}')
    config = InfluxConfig(version=1, url=recorder.url, database="mw", username="u", password=Secret("p"))
    with pytest.raises(OutputError, match="302"):
        list(InfluxReader(config).rows(SeriesRead("sound", "dovre", "n1", 0, 10**6, ("LAeq",))))
    assert elsewhere.requests == []


@pytest.mark.parametrize("version", [1, 2])
def test_the_timeout_bounds_the_whole_request(dripping: str, version: int) -> None:
    """timeout_s bounded each socket read, not the request: a byte every 0.2 s held a write
    with timeout_s=1 until the whole answer had dripped in (12 s; 45 s in the review), v2's
    (influxdb-client's urllib3) as v1's."""
    if version == 1:
        config = InfluxConfig(version=1, url=dripping, database="mw", timeout_s=1)
    else:
        config = InfluxConfig(version=2, url=dripping, org="o", bucket="b", timeout_s=1)
    writer = InfluxWriter(config)
    began = time.monotonic()
    with pytest.raises(InfluxWriteError) as caught:
        writer.write([sound(0)])
    took = time.monotonic() - began
    writer.close()
    assert 0.9 <= took < 2.0, took
    assert caught.value.retryable and caught.value.status is None
    assert "no whole answer within 1 s" in str(caught.value)


@pytest.mark.parametrize("version", [1, 2])
def test_the_timeout_bounds_each_whole_read_of_an_export(dripping: str, version: int) -> None:
    """The read-back of an evidence export (v1 /query, v2 /api/v2/query) had timeout_s bound each
    socket read only: the server answering a byte every 0.2 s held the read for the 12 s its
    answer took (and a longer answer for ever). It gives up at timeout_s, in one line."""
    if version == 1:
        config = InfluxConfig(version=1, url=dripping, database="mw", timeout_s=1)
    else:
        config = InfluxConfig(version=2, url=dripping, org="o", bucket="b", timeout_s=1)
    began = time.monotonic()
    with pytest.raises(OutputError) as caught:
        list(InfluxReader(config).rows(SeriesRead("sound", "dovre", "n1", 0, 10**6, ("LAeq",))))
    took = time.monotonic() - began
    assert 0.9 <= took < 2.0, took
    assert str(caught.value) == (
        f"cannot read sound of 'n1' from InfluxDB at {dripping}:"
        " InfluxDB unreachable: TimeoutError: no whole answer within 1 s"
    )


def test_the_reader_reads_a_long_window_in_parts_each_whole(
    influxd: Influxd, monkeypatch: pytest.MonkeyPatch
) -> None:
    """influxd 1.6.7 holding 14 h of a sensor's minutes, read back as an export reads a pruned
    window: in three requests of at most six hours, each bounded as a whole by timeout_s
    (deadline_http.post, counted here and left to do its work), every row once, in order, the
    window's end excluded. It was one request, its socket reads bounded one by one."""
    minutes = 14 * 60
    writer = InfluxWriter(v1_config(influxd))
    writer.write([sound(60 * i, float(i % 90)) for i in range(minutes)])
    writer.write([sound(60 * i, sensor="n2") for i in range(minutes)])  # another series: not read
    writer.close()
    posted: list[float] = []
    real_post = deadline_http.post

    def counted(*args: Any, **kwargs: Any) -> deadline_http.Answer:
        posted.append(kwargs["timeout_s"])
        return real_post(*args, **kwargs)

    monkeypatch.setattr(deadline_http, "post", counted)
    start_us = timestamp_ns(T0) // 1000
    end_us = start_us + (minutes - 1) * 60_000_000  # the last minute is the window's end: excluded
    config = v1_config(influxd, timeout_s=5)
    rows = list(InfluxReader(config).rows(SeriesRead("sound", "dovre", "n1", start_us, end_us, ("LAeq",))))
    assert posted == [5, 5, 5]
    assert [ts for ts, _ in rows] == [start_us + 60_000_000 * i for i in range(minutes - 1)]
    assert [values["LAeq"] for _, values in rows] == [float(i % 90) for i in range(minutes - 1)]


def test_a_part_whose_answer_is_too_large_is_read_again_in_halves(
    influxd: Influxd, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A six-hour part of a sensor read many times a second answers more than READ_MAX_BODY
    (64 MiB): the export stopped there. Shown with influxd 1.6.7 and the bound lowered to a size
    six hours of minutes exceed and ninety minutes do not: each part is read again as halves,
    every row once and in order; a part still too large after READ_MAX_HALVINGS is one line."""
    minutes = 6 * 60
    writer = InfluxWriter(v1_config(influxd))
    writer.write([sound(60 * i, float(i % 90)) for i in range(minutes)])
    writer.close()
    start_us = timestamp_ns(T0) // 1000
    end_us = start_us + minutes * 60_000_000
    config = v1_config(influxd, timeout_s=5)
    sizes: list[int] = []
    real_post = deadline_http.post

    def measured(*args: Any, **kwargs: Any) -> deadline_http.Answer:
        answer = real_post(*args, **kwargs)
        sizes.append(len(answer.body))
        return answer

    monkeypatch.setattr(deadline_http, "post", measured)
    whole = list(InfluxReader(config).rows(SeriesRead("sound", "dovre", "n1", start_us, end_us, ("LAeq",))))
    [six_hours] = sizes
    assert len(whole) == minutes
    sizes.clear()
    monkeypatch.setattr(client, "READ_MAX_BODY", six_hours * 2 // 3)
    rows = list(InfluxReader(config).rows(SeriesRead("sound", "dovre", "n1", start_us, end_us, ("LAeq",))))
    assert rows == whole
    # The six hours (cut at the bound), then its halves, each under it.
    assert len(sizes) == 3 and sizes[0] > six_hours * 2 // 3 >= max(sizes[1:]), (six_hours, sizes)

    monkeypatch.setattr(client, "READ_MAX_BODY", 50)  # not even a minute fits
    with pytest.raises(OutputError) as caught:
        list(InfluxReader(config).rows(SeriesRead("sound", "dovre", "n1", start_us, end_us, ("LAeq",))))
    assert str(caught.value) == (
        f"cannot read sound of 'n1' from InfluxDB at {config.url}: the answer for 5.6 min is over 50"
        " bytes, after 6 halvings of the six-hour part"
    )


def test_v2_the_reader_reads_a_long_window_in_parts(recorder: Recorder) -> None:
    """No server of Flux runs here (VictoriaMetrics reads no Flux, influxd 1.6.7 has no v2 API):
    the recording server answers each /api/v2/query with a row at its range's start, in Flux's
    annotated CSV. A 13 h window was one query; it is three of at most six hours, each through
    influxdb-client's pool bounded by deadline_pool, the rows in order."""

    def answer(request: Request) -> Reply:
        start = json.loads(request.body)["query"].split("range(start: ")[1].split(",")[0]
        csv = (
            "#datatype,string,long,dateTime:RFC3339,double\r\n#group,false,false,false,false\r\n"
            f"#default,_result,,,\r\n,result,table,_time,LAeq\r\n,,0,{start},50\r\n\r\n"
        )
        return 200, {"Content-Type": "text/csv"}, csv.encode()

    recorder.reply = answer
    config = InfluxConfig(version=2, url=recorder.url, org="o", bucket="b", token=Secret("t"), timeout_s=2)
    start_us = timestamp_ns(T0) // 1000
    hour = 3_600_000_000
    read = SeriesRead("sound", "dovre", "n1", start_us, start_us + 13 * hour, ("LAeq",))
    rows = list(InfluxReader(config).rows(read))
    assert [r.path for r in recorder.requests] == ["/api/v2/query"] * 3
    assert rows == [(start_us + part * hour, {"LAeq": 50.0}) for part in (0, 6, 12)]
    assert "stop: 2026-06-02T01:00:00Z" in json.loads(recorder.requests[-1].body)["query"]


@dataclass
class KeptAlive:
    """A server keeping its connections alive that answers the first request on each at once
    and every later one a byte every 0.2 s; ``connections``: how many were opened to it."""

    url: str
    cert: Path | None = None  # over https: its certificate
    connections: int = 0


@pytest.fixture(params=["http", "https"])
def kept_alive(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[KeptAlive]:
    """No real InfluxDB answers slowly on demand, hence this stand-in. Over https its
    certificate is self-signed, trusted only where a test names it (SSL_CERT_FILE)."""

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        answered = 0  # on this connection

        def setup(self) -> None:
            super().setup()
            server.connections += 1

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            answer = b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\nServer: drip\r\n\r\n"
            self.answered += 1
            try:
                if self.answered == 1:
                    self.wfile.write(answer)
                    return
                for byte in answer:
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(0.2)
            except OSError:
                self.close_connection = True  # the client gave up

        def log_message(self, format: str, *args: object) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    server = KeptAlive(f"{request.param}://127.0.0.1:{httpd.server_address[1]}")
    if request.param == "https":
        server.cert, key = self_signed_cert(tmp_path)
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(server.cert, key)
        httpd.socket = tls.wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield server
    httpd.shutdown()
    httpd.server_close()


def test_v2_a_connection_kept_alive_gives_each_request_a_deadline_of_its_own(
    kept_alive: KeptAlive, monkeypatch: pytest.MonkeyPatch
) -> None:
    """influxdb-client keeps its connection alive: a write on it was bounded by no deadline
    (12 s for an answer dripping in with timeout_s=1), and must not be by the first write's,
    passed long before it began. Over https (its certificate trusted through SSL_CERT_FILE,
    which urllib3's default context reads) the same."""
    if kept_alive.cert is not None:
        monkeypatch.setenv("SSL_CERT_FILE", str(kept_alive.cert))
    writer = InfluxWriter(InfluxConfig(version=2, url=kept_alive.url, org="o", bucket="b", timeout_s=1))
    writer.write([sound(0)])  # answered at once
    time.sleep(1.2)  # the first write's deadline passes
    began = time.monotonic()
    with pytest.raises(InfluxWriteError) as caught:
        writer.write([sound(1)])
    took = time.monotonic() - began
    writer.close()
    assert 0.9 <= took < 2.0, took
    assert kept_alive.connections == 1  # the second write went on the first one's connection
    assert caught.value.retryable and caught.value.status is None
    assert str(caught.value) == "InfluxDB unreachable: TimeoutError: no whole answer within 1 s"


def test_v2_a_certificate_not_trusted_is_refused_in_one_line(tmp_path: Path) -> None:
    """A local https server whose certificate is self-signed and not trusted (a real InfluxDB's
    would be the same; none runs here): urllib3 refuses it as before, and it reads as no answer,
    in one line. It read "InfluxDB answered 0: SSLError" and a second line: influxdb-client
    turns urllib3's SSLError into an answer of status 0."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.send_response(204)
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    cert, key = self_signed_cert(tmp_path)
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert, key)
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.socket = tls.wrap_socket(httpd.socket, server_side=True)
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    url = f"https://127.0.0.1:{httpd.server_address[1]}"
    writer = InfluxWriter(InfluxConfig(version=2, url=url, org="o", bucket="b", timeout_s=5))
    try:
        with pytest.raises(InfluxWriteError) as caught:
            writer.write([sound(0)])
    finally:
        writer.close()
        httpd.shutdown()
        httpd.server_close()
    assert caught.value.retryable and caught.value.status is None
    message = str(caught.value)
    assert message.startswith("InfluxDB unreachable: SSLError: [SSL: CERTIFICATE_VERIFY_FAILED]"), message
    assert "\n" not in message


def test_v2_a_host_name_whose_lookup_hangs_ends_at_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """urllib3 looks the name up with getaddrinfo, which cannot be interrupted, before any timeout
    of its own applies: a resolver that did not answer held the write as long as it took (here
    3 s). A resolver that holds its answers cannot be made real here (it would take editing
    /etc/resolv.conf), so ``socket.getaddrinfo`` is replaced by one that blocks, then answers
    127.0.0.1 (where nothing listens on port 9); the request and its deadline are the real ones."""
    released = threading.Event()
    real = socket.getaddrinfo

    def hanging(host: str, *args: object, **kwargs: object) -> object:
        released.wait(3)
        return real("127.0.0.1", *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(socket, "getaddrinfo", hanging)
    config = InfluxConfig(version=2, url="http://influx.example:9", org="o", bucket="b", timeout_s=0.5)
    writer = InfluxWriter(config)
    began = time.monotonic()
    try:
        with pytest.raises(InfluxWriteError) as caught:
            writer.write([sound(0)])
        took = time.monotonic() - began
    finally:
        released.set()
        writer.close()
    assert took < 1.5, took
    assert caught.value.retryable
    assert str(caught.value) == "InfluxDB unreachable: TimeoutError: no whole answer within 0.5 s"


def test_outbox_failure_does_not_stop_the_loop(
    victoria_metrics: VictoriaMetrics,
    queue: Queue,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real_peek = queue.forwarder_side.peek
    failures = iter(range(3))

    def flaky_peek(limit: int) -> list[tuple[int, str]]:
        if next(failures, None) is not None:
            raise sqlite3.OperationalError("database is locked")
        return real_peek(limit)

    monkeypatch.setattr(queue.forwarder_side, "peek", flaky_peek)
    queue.put([sound(0)])
    forwarder = start_forwarder(queue, vm_config(victoria_metrics))
    try:
        assert forwarder.flush(10)
    finally:
        forwarder.close()
    assert forwarder.stats.retries == 3 and forwarder.stats.written == 1
    assert len([r for r in caplog.records if r.exc_info]) == 1  # one traceback, not one per retry
    [series] = victoria_metrics.export('{__name__="sound_LAeq"}')
    assert (series["values"], series["timestamps"]) == ([50.0], [T0_NS // 1_000_000])  # written once


def test_pending_counts_the_points_queued_while_the_store_is_locked(
    victoria_metrics: VictoriaMetrics, queue: Queue, tmp_path: Path
) -> None:
    """A store lock held longer than the outbox waits (another connection's write transaction):
    each batch was written and its ack refused ("database is locked"), and ``pending`` kept
    the 0 it started with while 5 points were queued. Reading still works under the lock (WAL)."""
    queue.put([sound(i) for i in range(5)])
    lock = sqlite3.connect(str(tmp_path / "minewatch.db"), isolation_level=None)
    lock.execute("BEGIN IMMEDIATE")
    forwarder = InfluxForwarder(
        Outbox.open(tmp_path / "minewatch.db", busy_timeout_s=0.1),
        InfluxWriter(vm_config(victoria_metrics)),
        flush_interval_s=0.02,
        backoff=FAST,
    )
    forwarder.start()
    try:
        wait_until(lambda: forwarder.stats.retries >= 2)
        assert (forwarder.stats.pending, forwarder.stats.up) == (5, False)
        lock.execute("ROLLBACK")
        assert forwarder.flush(10)
        assert (forwarder.stats.pending, forwarder.stats.up) == (0, True)
    finally:
        lock.close()
        forwarder.close()
    assert queue.store.pending() == 0


# --------------------------------------------------------------------------- v2, real VictoriaMetrics

# A point of every measurement with every tag and field of monitor.influx.schema; tag values
# that need escaping in line protocol, strings that need quoting.
SAMPLES: dict[str, tuple[dict[str, str], dict[str, FieldValue]]] = {
    "sound": (
        {"site": "dovre", "sensor": "n1"},
        {
            "LAeq": 71.2,
            "LAFmax": 74.5,
            "LASmax": 73.0,
            "LAFmin": 60.25,
            "LCeq": 80.0,
            "LCpeak": 95.5,
            "LZpeak": 99.0,
            "LZeq": 82.0,
            "duration_s": 1.0,
            "late": False,
            "overload": True,
        },
    ),
    "light": (
        {"site": "dovre", "sensor": "l1"},
        {"lux_mean": 0.5, "lux_min": 0.125, "lux_max": 2.0, "duration_s": 10.0, "late": True},
    ),
    "weather": (
        {"site": "dovre", "sensor": "wx"},
        {"wind_speed_ms": 3.5, "rain": True, "rain_mm_h": 1.25, "duration_s": 60.0, "late": False},
    ),
    "turbidity": ({"site": "dovre", "sensor": "t1"}, {"ntu": 12.5, "duration_s": 60.0, "late": True}),
    "events": (
        {"site": "dovre", "kind": "temporary-lighting"},
        {
            "id": "e1",
            "summary": 'TemporaryLighting "e1", night',
            "gate": "g1",
            "direction": "in",
            "safety_reason": "wind=strong",
            "end": "2026-06-01T13:00:00Z",
        },
    ),
    "findings": (
        {"site": "dovre", "standard": "noise, night", "kind": "violation"},
        {
            "id": "f1",
            "section": "6.D",
            "summary": "LAeq 82.5 dB(A) over the 80 dB(A) limit",
            "sensors": "n1,n2",
            "value": 82.5,
            "limit": 80.0,
            "end": "2026-06-01T12:01:00Z",
            "completeness": 0.95,
        },
    ),
    "alerts": (
        {"site": "dovre", "audience": "town", "kind": "violation"},
        {"id": "a1", "message": "Høgås: limit exceeded", "severity": "warning"},
    ),
    "rejections": (
        {"site": "dovre"},
        {"topic": "minewatch/dovre/sensors/x/levels", "reason": "LAeq: not a number"},
    ),
    "sensor_health": (
        {"site": "dovre", "sensor": "n1"},
        {"online": True, "gap_s": 42.5, "battery_pct": 87.0, "clock_offset_s": -0.25},
    ),
}


def sample_lines() -> list[str]:
    return [
        line(name, tags, fields, T0 + timedelta(seconds=i))
        for i, (name, (tags, fields)) in enumerate(SAMPLES.items())
    ]


def test_samples_cover_the_schema() -> None:
    assert set(SAMPLES) == set(MEASUREMENTS)
    for name, (tags, fields) in SAMPLES.items():
        assert (set(tags), set(fields)) == (set(MEASUREMENTS[name].tags), set(MEASUREMENTS[name].fields)), (
            name
        )


def vm_config(server: VictoriaMetrics) -> InfluxConfig:
    return InfluxConfig(version=2, url=server.url, org="quarry", bucket="minewatch", token=Secret("s3cr3t"))


@pytest.mark.parametrize("batch_size", [50, 5])
def test_v2_a_wrong_path_answered_400_keeps_every_point_queued(
    victoria_metrics: VictoriaMetrics,
    queue: Queue,
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
    batch_size: int,
) -> None:
    """VictoriaMetrics answers 400 "unsupported path requested" to a url with a wrong path:
    every point alone is refused alike, and so is the point sent alone to tell the server's
    fault from the points' (batch_size 5: the newest queued point), so none is rejected;
    the points stay queued, the forwarder is down and says so once with the server's
    answer, and once the url is put right they are written (they were all moved to the
    rejected table)."""
    caplog.set_level(logging.DEBUG, logger="monitor.influx.client")
    queue.put([sound(i) for i in range(20)])
    wrong = replace(vm_config(victoria_metrics), url=f"{victoria_metrics.url}/proxy")
    forwarder = start_forwarder(queue, wrong, batch_size=batch_size)
    try:
        wait_until(lambda: forwarder.stats.retries >= 3)
        assert not forwarder.flush(0.2)
    finally:
        forwarder.close()
    assert queue.store.pending() == 20 and queue.store.rejected() == []
    stats = forwarder.stats
    assert (stats.written, stats.rejected, stats.up) == (0, 0, False)
    logged = [r for r in caplog.records if r.levelno >= logging.INFO and r.name == "monitor.influx.client"]
    assert len(logged) == 1 and logged[0].levelno == logging.ERROR
    message = logged[0].getMessage()
    assert f"refused each of the {min(batch_size, 20)} points alone alike" in message
    assert (
        'unsupported path requested: \\"/influx/api/v2/write\\"' in message or "unsupported path" in message
    )

    fixed = Queue(queue.store, Outbox.open(tmp_path / "minewatch.db"))  # the url put right, a restart
    forwarder = start_forwarder(fixed, vm_config(victoria_metrics))
    try:
        assert forwarder.flush(10)
    finally:
        forwarder.close()
    [series] = victoria_metrics.export('{__name__="sound_LAeq"}')
    assert len(series["values"]) == 20


def test_victoria_metrics_fixture_is_on_a_free_port(victoria_metrics: VictoriaMetrics) -> None:
    assert victoria_metrics.port != 8428  # never the default
    assert victoria_metrics.export('{__name__=~".+"}') == []


@pytest.mark.parametrize("use_gzip", [False, True])
def test_v2_writes_every_measurement_to_a_real_v2_server(
    victoria_metrics: VictoriaMetrics, queue: Queue, use_gzip: bool
) -> None:
    """Through the outbox and the forwarder, influxdb-client writes one point of each
    measurement; VictoriaMetrics stores each field as series ``<measurement>_<field>``
    labelled with the point's tags: values (booleans as 1/0) and tags read back exactly.
    String values are not kept by it (the series exists, its value is 0): they are read
    back from influxd 1.6.7 in test_v1_every_measurement_round_trips."""
    queue.put(sample_lines())
    forwarder = InfluxForwarder(
        queue.forwarder_side, InfluxWriter(vm_config(victoria_metrics), gzip=use_gzip), flush_interval_s=0.02
    )
    forwarder.start()
    try:
        assert forwarder.flush(10)
    finally:
        forwarder.close()
    assert (forwarder.stats.written, forwarder.stats.rejected, queue.store.pending()) == (len(SAMPLES), 0, 0)
    stored = {
        series["metric"]["__name__"]: series
        for series in victoria_metrics.export('{__name__=~".+"}')
        if not series["metric"]["__name__"].startswith(("vm_", "go_", "process_"))
    }
    expected = {f"{name}_{f}" for name, (_, fields) in SAMPLES.items() for f in fields}
    assert set(stored) == expected
    for i, (name, (tags, fields)) in enumerate(SAMPLES.items()):
        when_ms = (T0_NS // 1_000_000) + 1000 * i
        for field_name, value in fields.items():
            series = stored[f"{name}_{field_name}"]
            assert series["metric"] == {"__name__": f"{name}_{field_name}", **tags}
            assert series["timestamps"] == [when_ms]
            if isinstance(value, bool):
                assert series["values"] == [1.0 if value else 0.0]
            elif isinstance(value, float):
                assert series["values"] == [value]


def test_v1_every_measurement_round_trips(influxd: Influxd) -> None:
    """The same points through the v1 API to influxd 1.6.7, read back with InfluxQL, string
    fields included (what only InfluxDB stores)."""
    writer = InfluxWriter(v1_config(influxd))
    writer.write(sample_lines())
    for i, (name, (tags, fields)) in enumerate(SAMPLES.items()):
        columns = [*fields, *tags]
        quoted = ", ".join(f'"{c}"' for c in columns)
        [series] = influxd.query(f'SELECT {quoted} FROM "{name}"', "minewatch")
        values = series["values"]
        assert isinstance(values, list)
        [row] = values
        assert row[0] == format_influx_time(T0 + timedelta(seconds=i))
        assert dict(zip(columns, row[1:], strict=True)) == {**fields, **tags}


def format_influx_time(ts: datetime) -> str:
    return ts.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_v2_outage_backlog_written_once(victoria_metrics: VictoriaMetrics, queue: Queue) -> None:
    """A real v2 server stopped while points keep coming: they stay queued, retried with
    backoff, and arrive once it is back, each exactly once."""
    forwarder = start_forwarder(queue, vm_config(victoria_metrics), batch_size=40)
    try:
        queue.put([sound(i, 40.0 + i % 50) for i in range(100)])
        assert forwarder.flush(10)

        victoria_metrics.stop()
        for chunk in range(5):  # the daemon keeps storing while InfluxDB is down
            queue.put([sound(i, 40.0 + i % 50) for i in range(100 + 20 * chunk, 120 + 20 * chunk)])
            time.sleep(0.05)
        wait_until(lambda: forwarder.stats.retries >= 3)
        assert not forwarder.stats.up
        assert "unreachable" in forwarder.stats.last_error
        assert queue.store.pending() == 100
        assert not forwarder.flush(0.2)  # cannot drain while down; nothing lost
        assert queue.store.pending() == 100

        victoria_metrics.start()  # same data directory and port
        assert forwarder.flush(15)
        assert forwarder.stats.up
    finally:
        forwarder.close()
    assert forwarder.stats.written == 200 and forwarder.stats.rejected == 0
    [series] = victoria_metrics.export('{__name__="sound_LAeq"}')
    assert series["metric"] == {"__name__": "sound_LAeq", "site": "dovre", "sensor": "n1"}
    samples = sorted(zip(series["timestamps"], series["values"], strict=True))
    start_ms = T0_NS // 1_000_000
    assert samples == [(start_ms + 1000 * i, 40.0 + i % 50) for i in range(200)]  # none missing or doubled
