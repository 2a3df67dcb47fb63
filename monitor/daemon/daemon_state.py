"""The retained ``{prefix}/{site}/daemon``: whether the daemon judging a site runs, and whether its
store takes writes.

The site's ``…/status`` is computed from the store and published after a commit, so while the
store refuses writes (a full disk) it only grows old, and the Town and the operator cannot tell
a stopped daemon from one that cannot record. This message needs no store: it is published
when the daemon starts, when its store stops and starts taking writes again, and when it stops.
Times are the wall clock's (the process's own facts), not the data clock's.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from monitor.errors import StoreUnwritable
from monitor.wire.protocol import format_ts, output_topic

log = logging.getLogger("minewatch.pipeline")

Publish = Callable[[str, bytes, bool], None]  # topic, payload, retain

RUNNING, STOPPED = "running", "stopped"
WRITABLE, REFUSING = "writable", "refusing writes"


class DaemonState:
    """What the daemon tells of itself for each of ``sites``; published once ``started``."""

    def __init__(
        self, publish: Publish, prefix: str, sites: Sequence[str], wall: Callable[[], float] = time.time
    ) -> None:
        self.publish, self.prefix, self.sites, self.wall = publish, prefix, list(sites), wall
        self.state: str | None = None  # None: not started, nothing published yet
        self.store: dict[str, Any] = {"store": WRITABLE, "store_since": self._now()}

    def started(self) -> None:
        self.state = RUNNING
        self._publish()

    def refusing(self, outage: StoreUnwritable, held: int) -> None:
        """The store refuses writes: ``held`` messages in hand are not stored (the path stays in
        the log: a reader of the message is told what, not where)."""
        self.store = {"store": REFUSING, "store_since": self._now(), "reason": outage.reason, "held": held}
        self._publish()

    def writable(self) -> None:
        if self.store["store"] != WRITABLE:
            self.store = {"store": WRITABLE, "store_since": self._now()}
            self._publish()

    def stopped(self) -> None:
        if self.state is not None:
            self.state = STOPPED
            self._publish()

    def body(self, site: str) -> dict[str, Any]:
        return {"site": site, "ts": self._now(), "state": self.state, **self.store}

    def _publish(self) -> None:
        if self.state is None:  # before the link exists: said once it starts
            return
        for site in self.sites:
            payload = json.dumps(self.body(site), separators=(",", ":")).encode()
            try:
                self.publish(output_topic(site, "daemon", self.prefix), payload, True)
            except Exception as exc:  # a broker that is away: the next change says it again
                log.warning("Could not publish the daemon's state for %s: %s", site, exc)

    def _now(self) -> str:
        return format_ts(datetime.fromtimestamp(self.wall(), UTC))
