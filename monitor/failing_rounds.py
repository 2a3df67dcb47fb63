"""A task done in rounds (a WAL checkpoint, a round of deliveries) that fails for as long as its
cause lasts (a full disk): the log says so once, again every ``remind_s``, and once when it works
again, not once a second."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

REMIND_S = 600.0


class FailingRounds:
    def __init__(
        self,
        log: logging.Logger,
        what: str,
        remind_s: float = REMIND_S,
        clock: Callable[[], float] = time.monotonic,
        *,
        traceback: bool = False,
    ) -> None:
        """``traceback``: the first failure is logged with it (a bug's, not a full disk's)."""
        self.log, self.what, self.remind_s, self.clock = log, what, remind_s, clock
        self.traceback = traceback
        self.since: float | None = None  # failing since (None: working)
        self._said = 0.0

    def failed(self, exc: BaseException) -> None:
        now = self.clock()
        if self.since is None:
            self.since = self._said = now
            self.log.error(
                "%s failed: %s (tried again every round)",
                self.what,
                exc,
                exc_info=exc if self.traceback else None,
            )
        elif now - self._said >= self.remind_s:
            self._said = now
            self.log.error("%s still fails after %.0f s: %s", self.what, now - self.since, exc)

    def worked(self) -> None:
        if self.since is not None:
            self.log.warning("%s works again, after %.0f s", self.what, self.clock() - self.since)
            self.since = None
