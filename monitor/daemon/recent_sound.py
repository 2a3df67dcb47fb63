"""The sound readings of a site's recent minutes, kept in memory as a mirror of the store.

Evaluation reads every minute with a minute of margin on each side, and twice (a first
look and a final one once the lookahead has passed): re-reading those rows from SQLite
cost more than storing them (bench/ingest.py). A minute here is either absent or a
complete copy of the store's readings for it: it is loaded once, *before* new readings
are inserted into it, and every reading stored afterwards is added to it.

Each minute is held per sensor, in time order, as the rules read it (``SiteData.grouped``):
a reading is filed once, when it arrives, and a look at a minute's neighbourhood joins
whole minute lists, instead of filtering, sorting and regrouping the neighbourhood's
readings on every look (issue 31).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable
from datetime import datetime
from operator import attrgetter

from rules.model import SoundLevels
from rules.times import MINUTE, floor_minute

_BY_TIME = attrgetter("ts")

LoadSound = Callable[[str, datetime, datetime], list[SoundLevels]]  # site, start, end
Series = dict[str, list[SoundLevels]]  # sensor -> its readings of one minute, in time order


class RecentSound:
    def __init__(self, site: str, load: LoadSound) -> None:
        self.site = site
        self._load = load
        self._minutes: dict[datetime, Series] = {}

    def ensure(self, minutes: Iterable[datetime]) -> None:
        """Load the minutes not held yet (call before storing new readings in them)."""
        for minute in minutes:
            if minute not in self._minutes:
                series: Series = {}
                for levels in self._load(self.site, minute, minute + MINUTE):  # in time order
                    series.setdefault(levels.sensor, []).append(levels)
                self._minutes[minute] = series

    def add(self, levels: SoundLevels, minute: datetime) -> None:
        """A reading just stored, in its minute, which ``ensure`` loaded before the store took it."""
        series = self._minutes[minute].setdefault(levels.sensor, [])
        if series and levels.ts < series[-1].ts:  # a sensor resending an earlier second
            bisect.insort(series, levels, key=_BY_TIME)
        else:
            series.append(levels)

    def by_sensor(self, start: datetime, end: datetime) -> dict[str, tuple[SoundLevels, ...]]:
        """The readings with start <= ts < end, per sensor, each in time order."""
        joined: dict[str, list[SoundLevels]] = {}
        minute = floor_minute(start)
        while minute < end:
            self.ensure((minute,))
            edge = minute < start or minute + MINUTE > end  # only part of this minute is asked for
            for sensor, series in self._minutes[minute].items():
                if edge:
                    lo = bisect.bisect_left(series, start, key=_BY_TIME)
                    series = series[lo : bisect.bisect_left(series, end, key=_BY_TIME)]
                joined.setdefault(sensor, []).extend(series)
            minute += MINUTE
        return {sensor: tuple(series) for sensor, series in joined.items() if series}

    def forget_before(self, when: datetime) -> None:
        for minute in [m for m in self._minutes if m < when]:
            del self._minutes[minute]

    def clear(self) -> None:
        """Forget everything (after a rolled-back write: memory may hold what the store does not)."""
        self._minutes.clear()

    def __len__(self) -> int:
        return sum(len(series) for minute in self._minutes.values() for series in minute.values())
