"""The daemon on the data clock (`[daemon] clock = "data"`, as `minewatch demo` runs it) with
data from a past day, the demo's default since it simulates yesterday.

Before the first reading the data clock has no time. The daemon ticks while it waits for the
simulator; those ticks must not stamp the wall clock on the periodic work, or the data's
earlier times never reach the next anchor or status (seen: one anchor in a 2.5 h demo).
In-process pipeline, real SQLite store; the broker is a list (as in test_pipeline.py).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from pathlib import Path

import pytest

from monitor.config import parse_config
from monitor.daemon import pipeline as pipeline_module
from monitor.daemon.clock import Clock
from monitor.daemon.ingest import Inbound
from monitor.daemon.pipeline import Pipeline
from monitor.journal.store import Store
from monitor.wire.codec import encode
from monitor.wire.protocol import parse_ts
from rules.model import SensorStatus, SoundLevels
from tests.support.configs import quarry_config, sensor

WALL = datetime(2026, 11, 30, 18, 0, tzinfo=UTC)
DAY = datetime(2026, 11, 29, 20, 50, tzinfo=UTC)  # yesterday, 14:50 in Dovre


def config_text(store: str | Path) -> str:
    return quarry_config(
        store,
        daemon={
            "clock": "data",
            "max_age_s": 34560000,
            "lateness_s": 300,
            "status_interval_s": 60,
            "anchor_interval_s": 900,
        },
        sensors=[sensor("n1", "sound", expected_period_s=1)],
    )


def test_anchors_and_status_follow_past_data(tmp_path: Path) -> None:
    config = parse_config(config_text(tmp_path / "store.db"))
    store = Store(config.storage.path)
    published: list[tuple[str, dict[str, object]]] = []
    pipeline = Pipeline(
        config, store, lambda t, p, r: published.append((t, json.loads(p))), Clock("data", lambda: WALL)
    )
    try:
        pipeline.tick()  # waiting for the simulator: no data, no time yet
        for minutes in (0, 20, 40):  # 20 minutes apart: beyond the 900 s anchor interval
            start = DAY + timedelta(minutes=minutes)
            pipeline.handle_batch(
                [
                    Inbound(
                        *encode(SoundLevels("q", "n1", start + timedelta(seconds=s), 1.0, 60, 61, 75)),
                        1,
                        1,
                        0.0,
                    )
                    for s in range(3)
                ]
            )
            pipeline.tick()
    finally:
        store.close()
    anchors = [b for t, b in published if t == "minewatch/q/anchors"]
    statuses = [b for t, b in published if t == "minewatch/q/status"]
    assert len(anchors) == 3, anchors
    # On the data clock the periodic work is done every half data minute, as in real time: the
    # status (every 60 s) follows the data minute by minute through the gaps, not once per tick.
    # Every minute (status_interval_s) of data time on the half-minute steps, from the first data
    # to the last (20:50:30 to 21:29:30).
    times = [parse_ts(b["ts"]) for b in statuses]
    assert len(times) == 40 and all(t.second == 30 for t in times), times
    assert all(b - a == timedelta(minutes=1) for a, b in pairwise(times))
    for body in anchors + statuses:
        assert DAY <= parse_ts(body["ts"]) < DAY + timedelta(hours=1)  # the data's time, not the wall's


def _levels(sensor_id: str, s: int) -> Inbound:
    """A sound meter's reading of the second ``s`` after DAY, as it comes from the broker."""
    levels = SoundLevels("q", sensor_id, DAY + timedelta(seconds=s), 1.0, 60, 61, 75)
    return Inbound(*encode(levels), 1, 1, 0.0)


def alerts_told(
    tmp_path: Path, name: str, messages: list[Inbound], batch_size: int
) -> list[tuple[str, str, str]]:
    """``messages`` handed to a data-clock daemon of meters n1 and n2 ``batch_size`` at a time, a
    tick after each batch. The alerts published: (ts, kind or "cleared", message)."""
    config = parse_config(
        quarry_config(
            tmp_path / f"{name}-{batch_size}.db",
            daemon={"clock": "data", "max_age_s": 34560000, "lateness_s": 600},
            sensors=[sensor("n1", "sound", expected_period_s=1), sensor("n2", "sound", expected_period_s=1)],
        )
    )
    store = Store(config.storage.path)
    published: list[tuple[str, dict[str, object]]] = []
    pipeline = Pipeline(
        config, store, lambda t, p, r: published.append((t, json.loads(p))), Clock("data", lambda: WALL)
    )
    try:
        for start in range(0, len(messages), batch_size):
            pipeline.handle_batch(messages[start : start + batch_size])
            pipeline.tick()
    finally:
        store.close()
    told = [
        (str(b["ts"]), str(b.get("kind") if b.get("state") != "cleared" else "cleared"), str(b["message"]))
        for t, b in published
        if t == "minewatch/q/alerts"
    ]
    # The anchors (also on this topic) name the chain's record count, which batching changes.
    return [alert for alert in told if alert[1] != "anchor"]


def alerts_of_backfill(tmp_path: Path, batch_size: int) -> list[tuple[str, str, str]]:
    """n1 and n2 send every second; n2 falls silent after 10 s and sends its backlog (10-180 s)
    after n1's 180 s are in: the messages in that order, handed to the daemon ``batch_size``
    at a time."""
    messages = [_levels(n, s) for s in range(10) for n in ("n1", "n2")]
    messages += [_levels("n1", s) for s in range(10, 180)]
    messages += [_levels("n2", s) for s in range(10, 180)]  # the backfill, after n1's later data
    return alerts_told(tmp_path, "store", messages, batch_size)


def test_a_backfill_s_silence_does_not_depend_on_how_the_messages_were_batched(tmp_path: Path) -> None:
    """A real-time daemon sees n2 silent while n1's data come in, then back with its backlog.
    On the data clock the periodic work is done as the data pass each step, between a
    batch's messages too, so one batch of everything and batches of one message tell it alike
    (before: the one batch had the backfill in hand at every step and told nothing)."""
    one_batch = alerts_of_backfill(tmp_path, 10_000)
    one_by_one = alerts_of_backfill(tmp_path, 1)
    assert one_batch == one_by_one
    offline = [a for a in one_batch if a[1] == "sensor_offline"]
    back = [a for a in one_batch if a[1] == "cleared" and "n2 is back online" in a[2]]
    assert len(offline) == 1, one_batch
    assert "Sensor n2 (sound) has sent nothing since 2026-11-29T20:50:09Z" in offline[0][2]
    assert len(back) == 1 and "after 2.4 minutes" in back[0][2], one_batch
    assert len(one_batch) == 2, one_batch  # no flapping while the backlog comes in
    # Back at the last step before its backlog came in (20:52:30; its readings are older).
    assert offline[0][0] == "2026-11-29T20:50:30Z" and back[0][0] == "2026-11-29T20:52:30Z"


def alerts_of_a_return(tmp_path: Path, batch_size: int) -> list[tuple[str, str, str]]:
    """n1 and n2 send every second; n2 falls silent from 10 s to 170 s, then comes back: its
    readings of 170-176 s, then its heartbeat stamped 177 s, then its later readings, in that
    order (as the demo's simulator publishes them), handed over ``batch_size`` at a time."""
    heartbeat = Inbound(*encode(SensorStatus("q", "n2", DAY + timedelta(seconds=177), 90.0, 0.0)), 1, 1, 0.0)
    messages = [_levels(n, s) for s in range(10) for n in ("n1", "n2")]
    messages += [_levels("n1", s) for s in range(10, 170)]
    messages += [m for s in range(170, 177) for m in (_levels("n1", s), _levels("n2", s))]
    messages += [heartbeat, *(m for s in range(177, 200) for m in (_levels("n1", s), _levels("n2", s)))]
    return alerts_told(tmp_path, "return", messages, batch_size)


def test_a_sensors_return_is_told_at_its_first_message_however_the_messages_were_batched(
    tmp_path: Path,
) -> None:
    """A sensor's readings were taken in at the end of the batch's part, a heartbeat as it was
    handled, so a heartbeat that came after the sensor's first readings but in the same batch
    said the return at its own time: the demo run twice on one day told "back online after
    20.1 minutes" at 22:45:07 once and "after 20.0 minutes" at 22:45:00 the other time. Each
    message is now taken in in the order it came."""
    one_batch = alerts_of_a_return(tmp_path, 10_000)
    one_by_one = alerts_of_a_return(tmp_path, 1)
    assert one_batch == one_by_one
    back = [a for a in one_batch if a[1] == "cleared" and "n2 is back online" in a[2]]
    assert len(back) == 1 and "after 2.7 minutes" in back[0][2], one_batch


def two_sites_text(store: Path, order: tuple[str, str]) -> str:
    sites = "".join(
        f'[[sites]]\nid = "{site}"\ntimezone = "America/Chicago"\nlatitude = 45.27\nlongitude = -91.62\n'
        '[[sites.sensors]]\nid = "n1"\nkind = "sound"\nexpected_period_s = 1\n'
        for site in order
    )
    return f'[storage]\npath = "{store}"\n[daemon]\nclock = "data"\nmax_age_s = 34560000\n{sites}'


def test_a_restart_resumes_the_data_clock_at_the_newest_sites_end_whatever_the_sites_order(
    tmp_path: Path,
) -> None:
    """Each site's stored end was observed in the file's order, and the first set where the data
    steps began again: with the site that stopped days earlier listed first, a restart walked
    every step from its end to the other's, work done before the restart, and listed second it
    did not."""
    store_path = tmp_path / "store.db"
    stopped, running = DAY - timedelta(days=3), DAY
    store = Store(str(store_path))
    first = Pipeline(
        parse_config(two_sites_text(store_path, ("a", "b"))),
        store,
        lambda *_: None,
        Clock("data", lambda: WALL),
    )
    for n, (site, ts) in enumerate([("a", stopped), ("b", running)]):
        topic, payload = encode(SoundLevels(site, "n1", ts, 1.0, 60.0, 61.5, 75.0))
        first.handle_batch([Inbound(topic, payload, n + 1, 1, 0.0)])
    for order in (("a", "b"), ("b", "a")):
        clock = Clock("data", lambda: WALL)
        Pipeline(parse_config(two_sites_text(store_path, order)), store, lambda *_: None, clock)
        assert clock.data_now == running + timedelta(seconds=1), order
        assert clock.data_start == running + timedelta(seconds=1), order
    store.close()


def caught_up(
    tmp_path: Path, name: str, looks: int, monkeypatch: pytest.MonkeyPatch
) -> tuple[list[int], list[tuple[object, ...]]]:
    """A reading at DAY, then three hours later three hours of one meter's data, loud (85 dB) from
    04:30 to 04:32 after DAY: a stop was asked for, so the data clock's walk over the jump is left
    to the next start and nothing after DAY is judged. A restart then ticks until nothing is left
    (LOOKS_PER_TICK = ``looks``). The minutes each tick took in first looks, and the findings."""
    config = parse_config(config_text(tmp_path / f"{name}.db"))
    store = Store(config.storage.path)
    first = Pipeline(config, store, lambda *_: None, Clock("data", lambda: WALL))
    first.stopping = lambda: True
    loud = range(270 * 60, 272 * 60)
    messages = [
        Inbound(
            *encode(SoundLevels("q", "n1", DAY + timedelta(seconds=s), 1.0, 85 if s in loud else 60, 86, 99)),
            1,
            1,
            0.0,
        )
        for s in [0, *range(3 * 3600, 6 * 3600)]
    ]
    for start in range(0, len(messages), 10_000):
        first.handle_batch(messages[start : start + 10_000])
    assert first.walk_left is not None
    monkeypatch.setattr(pipeline_module, "LOOKS_PER_TICK", looks)
    restarted = Pipeline(config, store, lambda *_: None, Clock("data", lambda: WALL))
    restarted.tick()  # a start's first tick on the data clock sets its mark and judges nothing
    taken: list[int] = []
    for _ in range(100):
        before = restarted.sites["q"].evaluated_until
        restarted.tick()
        after = restarted.sites["q"].evaluated_until
        assert before is not None and after is not None
        taken.append(int((after - before).total_seconds() // 60))
        if not restarted.behind:
            break
    findings = store.conn.execute(
        "SELECT id, revision, standard, kind, start_us, end_us, retracted, data, created_us"
        " FROM findings ORDER BY id, revision"
    ).fetchall()
    store.close()
    return taken, findings


def test_a_site_hours_behind_its_data_is_judged_over_ticks_of_at_most_an_hour_each(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A start whose site's progress lay days behind its data (a stop had left the data clock's
    walk) judged every minute in one tick, some 18 s for 8 days of one meter, heeding no stop.
    Each tick now takes at most LOOKS_PER_TICK minutes' looks, and the findings are the same."""
    taken, findings = caught_up(tmp_path, "capped", 60, monkeypatch)
    assert len(taken) >= 6 and max(taken) == 60, taken
    assert sum(taken) >= 355, taken  # six hours, less the last minutes still open
    _, at_once = caught_up(tmp_path, "at-once", 100_000, monkeypatch)
    assert findings and findings == at_once
