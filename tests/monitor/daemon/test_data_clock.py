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

from monitor.config import parse_config
from monitor.daemon.clock import Clock
from monitor.daemon.ingest import Inbound
from monitor.daemon.pipeline import Pipeline
from monitor.journal.store import Store
from monitor.wire.codec import encode
from monitor.wire.protocol import parse_ts
from rules.model import SoundLevels
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
