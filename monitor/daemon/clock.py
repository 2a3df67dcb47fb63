"""The daemon's clock: the wall clock, or the data's own time for simulations (``daemon.clock``)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime


class Clock:
    """Wall clock, or (``clock = "data"``) the newest accepted timestamp, for simulations.

    The data clock is not kept apart: the store holds every accepted reading, so the
    pipeline sets it on start-up from the newest stored one (``Store.newest_data_end``) and
    a restart continues where the data was, not at the wall clock.
    """

    def __init__(self, mode: str, wall: Callable[[], datetime] | None = None) -> None:
        self.mode = mode
        self.wall = wall or (lambda: datetime.now(UTC))
        self.data_now: datetime | None = None
        self.data_start: datetime | None = None  # the first data time seen (data clock)

    def now(self) -> datetime:
        if self.mode == "data":
            return self.data_now or self.wall()
        return self.wall()

    def observe(self, ts: datetime) -> None:
        if self.mode == "data" and (self.data_now is None or ts > self.data_now):
            self.data_start = self.data_start or ts
            self.data_now = ts
