"""The sound readings of a site's recent minutes, kept in memory as a mirror of the store.

Evaluation reads every minute with a minute of margin on each side, and twice (a first
look and a final one once the lookahead has passed): re-reading those rows from SQLite
cost more than storing them (bench/ingest.py). A minute here is either absent or a
complete copy of the store's readings for it: it is loaded once, *before* new readings
are inserted into it, and every reading stored afterwards is added to it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from operator import attrgetter

from rules.model import SoundLevels
from rules.times import MINUTE, floor_minute

_BY_TIME = attrgetter("ts")

LoadSound = Callable[[str, datetime, datetime], list[SoundLevels]]  # site, start, end


class RecentSound:
    def __init__(self, site: str, load: LoadSound) -> None:
        self.site = site
        self._load = load
        self._minutes: dict[datetime, list[SoundLevels]] = {}

    def ensure(self, minutes: Iterable[datetime]) -> None:
        """Load the minutes not held yet (call before storing new readings in them)."""
        for minute in minutes:
            if minute not in self._minutes:
                self._minutes[minute] = self._load(self.site, minute, minute + MINUTE)

    def add(self, levels: SoundLevels, minute: datetime) -> None:
        """A reading just stored, in its minute, which ``ensure`` loaded before the store took it."""
        self._minutes[minute].append(levels)

    def between(self, start: datetime, end: datetime) -> list[SoundLevels]:
        """The readings with start <= ts < end, in time order (as the store returns them)."""
        minutes = []
        minute = floor_minute(start)
        while minute < end:
            minutes.append(minute)
            minute += MINUTE
        self.ensure(minutes)
        found = [lv for m in minutes for lv in self._minutes[m] if start <= lv.ts < end]
        found.sort(key=_BY_TIME)
        return found

    def forget_before(self, when: datetime) -> None:
        for minute in [m for m in self._minutes if m < when]:
            del self._minutes[minute]

    def clear(self) -> None:
        """Forget everything (after a rolled-back write: memory may hold what the store does not)."""
        self._minutes.clear()

    def __len__(self) -> int:
        return sum(len(v) for v in self._minutes.values())
