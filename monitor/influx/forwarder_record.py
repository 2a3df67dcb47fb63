"""The InfluxDB forwarder's state where `minewatch status` reads it: the store's meta row
``META_KEY``, written by the daemon's own thread (the store's connection is its) once per
change of state, not per retry: writing, or not and why (the line the daemon logged then: a
server holding the points for a state of its own, such as max-series-per-database reached,
refused credentials, unreachable), and since when. A daemon that dies without stopping leaves
its last state: status reads it with the broker link's record, which a running daemon writes
every 30 s (``LinkState.silent_since``), and says how old it is when no daemon reports.

Light on purpose: `minewatch status` imports it, not the forwarder and its HTTP clients.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from monitor.influx.client import ForwarderStats

__all__ = ["META_KEY", "STOPPED", "ForwarderRecord", "ForwarderRecorder"]

META_KEY = "influx_forwarder"
STOPPED = "the daemon stopped; what is queued is written after its next start"


@dataclass(frozen=True, slots=True)
class ForwarderRecord:
    up: bool  # points are being written (or none wait)
    state: str  # while not up: what the daemon said when it began
    since: datetime

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_json(cls, text: str | None) -> ForwarderRecord | None:
        """The record, or None if there is none (no forwarder has run) or it cannot be read."""
        if text is None:
            return None
        try:
            data = json.loads(text)
            return cls(bool(data["up"]), str(data["state"]), datetime.fromisoformat(data["since"]))
        except (ValueError, KeyError, TypeError):
            return None

    def to_dict(self) -> dict[str, object]:
        return {"up": self.up, "state": self.state, "since": self.since.astimezone(UTC).isoformat()}

    def current(self, daemon_silent_since: datetime | None) -> bool:
        """Whether the record still says how things are: a daemon reports (``daemon_silent_since``
        None: ``LinkState.silent_since``), or the record is the daemon's own word that it stopped.
        A daemon killed outright (SIGKILL, power lost) leaves its last state, "writing" included."""
        return daemon_silent_since is None or self.state == STOPPED

    def describe(self, now: datetime, daemon_silent_since: datetime | None = None) -> str:
        """One line for `minewatch status`, saying how old the state is when no daemon reports."""
        if self.up:
            line = f"InfluxDB forwarder: writing since {_utc(self.since)}"
        else:
            line = f"InfluxDB forwarder: not writing since {_utc(self.since)}: {self.state}"
        if daemon_silent_since is None or self.current(daemon_silent_since):
            return line
        age = _age((now - daemon_silent_since).total_seconds())
        return (
            f"{line} (as the daemon left it: no daemon has reported since {_utc(daemon_silent_since)},"
            f" {age} ago)"
        )


class ForwarderRecorder:
    """Writes the forwarder's state (``stats``) with ``write(META_KEY, text)`` when it changed
    since the last write; call ``poll`` from the thread that owns the store's connection."""

    def __init__(self, stats: Callable[[], ForwarderStats], write: Callable[[str, str], None]) -> None:
        self.stats, self.write = stats, write
        self._written: datetime | None = None  # the ``since`` of the state last written

    def poll(self) -> None:
        stats = self.stats()
        if stats.since is None or stats.since == self._written:
            return
        self.write(META_KEY, ForwarderRecord(stats.up, stats.state, stats.since).to_json())
        self._written = stats.since

    def stopped(self) -> None:
        """The daemon stops: nothing is written from now until its next start."""
        stopped = ForwarderRecord(False, STOPPED, datetime.now(UTC))
        self.write(META_KEY, stopped.to_json())
        self._written = stopped.since


def _age(seconds: float) -> str:
    for unit, size, below in (("s", 1, 120), ("min", 60, 7200), ("h", 3600, 172800)):
        if seconds < below:
            return f"{seconds / size:.0f} {unit}"
    return f"{seconds / 86400:.0f} d"


def _utc(ts: datetime) -> str:
    return ts.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")
