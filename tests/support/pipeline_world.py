"""The daemon's pipeline in-process with a clock the test moves: one harness for every such test.

The broker is replaced by a list that records what would be published (the MQTT path itself
is tested against a real Mosquitto in tests/monitor/daemon/test_daemon.py); the store is real
SQLite in the test's folder.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime, timedelta
from pathlib import Path

from monitor.config import Config, parse_config
from monitor.daemon.clock import Clock
from monitor.daemon.ingest import Inbound
from monitor.daemon.pipeline import Pipeline
from monitor.journal.store import Store
from monitor.wire.codec import encode
from rules.model import SoundLevels


class World:
    """A configured pipeline at ``now``; ``advance`` moves the clock and ticks."""

    def __init__(self, tmp_path: Path, config_text: str, now: datetime) -> None:
        self.now = now
        self.config_path = tmp_path / "c.toml"
        self.config_path.write_text(config_text)
        self.config: Config = parse_config(config_text)
        self.store = Store(self.config.storage.path)
        self.published: list[tuple[str, dict[str, object]]] = []
        self.pipeline = Pipeline(
            self.config,
            self.store,
            lambda t, p, r: self.published.append((t, json.loads(p))),
            Clock("wall", lambda: self.now),
        )

    def send_raw(self, *messages: tuple[str, bytes]) -> None:
        self.pipeline.handle_batch([Inbound(topic, payload, 1, 1, 0.0) for topic, payload in messages])

    def send(self, *records: object) -> None:
        self.send_raw(*[encode(r) for r in records])  # type: ignore[arg-type]

    def levels(self, start: datetime, seconds: int, level: float) -> None:
        """``seconds`` of levels at ``level`` from meter n1 of site q, from ``start``."""
        self.send(
            *[
                SoundLevels("q", "n1", start + timedelta(seconds=s), 1.0, level, level + 1, level + 15)
                for s in range(seconds)
            ]
        )

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)
        self.pipeline.tick()

    def quiet(self, seconds: float) -> None:
        """As if nothing had arrived, and the input been up, for ``seconds`` of wall (monotonic) time."""
        for state in self.pipeline.sites.values():
            state.last_receipt -= seconds
        if self.pipeline.input_since is not None:
            self.pipeline.input_since -= seconds

    def alerts(self, kind: str) -> list[dict[str, object]]:
        return [b for t, b in self.published if t.endswith("/alerts") and b["kind"] == kind]

    def published_on(self, topic: str) -> list[dict[str, object]]:
        return [b for t, b in self.published if t == topic]

    def findings(self, kind: str = "violation") -> list[str]:
        rows = self.store.conn.execute(
            "SELECT id FROM findings WHERE kind = ? AND retracted = 0 GROUP BY id", (kind,)
        )
        return [r[0] for r in rows]

    def count(self, sql: str) -> int:
        return int(self.store.conn.execute(sql).fetchone()[0])

    def close(self) -> None:
        self.store.close()


def in_time_order(by_sensor: Mapping[str, tuple[SoundLevels, ...]]) -> list[SoundLevels]:
    """``RecentSound.by_sensor``'s readings as the store lists them: by time, then sensor."""
    return sorted((r for sensor in sorted(by_sensor) for r in by_sensor[sensor]), key=lambda r: r.ts)
