"""When the store refuses writes (a full disk): hold what is not stored, wait, start again from it.

A daemon must not die of its disk filling up, nor reject or drop what it could not store. The
messages not committed stay unacknowledged, so the broker keeps them and queues what follows
(the persistent session), and the daemon tries again after a growing pause. The pipeline that
met the failure may hold in memory what the store rolled back (a tick's findings and progress),
so it is not reused: a new one is made from the store, as a restart would, once the store takes
a write again (making it chains the configuration record, a write).

A nearly full disk may take that small write and refuse the next batch: the outage lasts until
a batch or tick is committed (``stored``), and the pauses keep growing until then.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

from monitor.daemon.daemon_state import DaemonState
from monitor.errors import StoreUnwritable
from monitor.failing_rounds import REMIND_S  # a failure that lasts is said again this often
from monitor.journal.store import what_to_do

log = logging.getLogger("minewatch.pipeline")

PAUSES_S = (1, 2, 5, 10, 30, 60)  # between tries, the last one repeated

T = TypeVar("T")


class StoreOutage(Generic[T]):
    """The run loop's waiting for a store that refuses writes, over one outage.

    ``remake`` makes a pipeline from the store, raising StoreUnwritable while it refuses writes;
    ``told`` publishes when an outage begins and ends (the retained ``…/daemon``).
    """

    def __init__(
        self,
        stop: threading.Event,
        remake: Callable[[], T],
        pauses_s: tuple[float, ...] = PAUSES_S,
        clock: Callable[[], float] = time.monotonic,
        told: DaemonState | None = None,
    ) -> None:
        self.stop, self.remake, self.pauses_s, self.clock, self.told = stop, remake, pauses_s, clock, told
        self.began: float | None = None  # None: the store takes writes
        self._reminded = 0.0
        self._tries = 0

    def wait(self, outage: StoreUnwritable, held: int) -> T | None:
        """Try ``remake`` after each pause until it succeeds, and return what it made; None when
        ``stop`` is set first. ``held``: the messages in hand not stored, for the log."""
        if self.began is None:
            self.began = self._reminded = self.clock()
            log.error(
                "Cannot write the store %s: %s. %d message(s) in hand stay unacknowledged, and the"
                " broker keeps what follows; trying again in %g s, nothing lost meanwhile. %s.",
                outage.path,
                outage.reason,
                held,
                self._pause(),
                what_to_do(outage),
            )
            if self.told is not None:
                self.told.refusing(outage, held)
        else:  # the store took the pipeline's making and refused the next write
            self._remind(outage)
        while not self.stop.wait(self._pause()):
            self._tries += 1
            try:
                return self.remake()
            except StoreUnwritable as again:
                self._remind(again)
        log.warning("Stopped while %s refused writes: what is in hand stays with the broker", outage.path)
        return None

    def stored(self, path: str) -> None:
        """A batch or tick was committed: an outage in progress is over."""
        if self.began is not None:
            log.warning(
                "The store %s takes writes again after %.0f s: carrying on from what it holds",
                path,
                self.clock() - self.began,
            )
            self.began = None
            self._tries = 0
            if self.told is not None:
                self.told.writable()

    def _pause(self) -> float:
        return self.pauses_s[min(self._tries, len(self.pauses_s) - 1)]

    def _remind(self, outage: StoreUnwritable) -> None:
        assert self.began is not None
        if self.clock() - self._reminded >= REMIND_S:
            self._reminded = self.clock()
            log.error(
                "The store %s still refuses writes after %.0f s: %s. %s.",
                outage.path,
                self._reminded - self.began,
                outage.reason,
                what_to_do(outage),
            )
