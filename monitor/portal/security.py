"""Security events (failed logins, throttled logins, CSRF refusals) as portal action records,
summarised so that a flood cannot fill the journal.

Per (kind, actor, target, address) the first event is recorded at once; later ones within
INTERVAL_S are only counted, and that count is recorded as one record when the interval has
passed (``count`` events between ``first`` and ``last``); a key is forgotten after a quiet
interval. A kind has at most KEYS_PER_KIND keys at a time; beyond that (many names or
addresses at once) events are counted under one key per kind whose target and address are
``*``. So every kind writes at most KEYS_PER_KIND + 1 records per interval per site whatever
arrives, and every event is counted in some record. Counts wait in memory about INTERVAL_S:
the portal writes due ones as events arrive and every FLUSH_EVERY_S, and all when it stops.

:class:`Summary` is the pure core (times passed in); :class:`SecurityLog` writes its records.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from monitor.portal.data import Portal, Scope, User, format_ts

INTERVAL_S = 60.0
KEYS_PER_KIND = 10
FLUSH_EVERY_S = 15.0
ANY = "*"  # target and address of the key that counts events beyond the budget


@dataclass(frozen=True, slots=True)
class Event:
    kind: str  # the action: login_failed, login_throttled, csrf_refused
    actor: str  # the account, when the event is tied to one; "" when nobody is known
    role: str
    target: str
    address: str
    sites: tuple[str, ...]  # where it is recorded


@dataclass(frozen=True, slots=True)
class Record:
    event: Event
    count: int
    first: float
    last: float


@dataclass(slots=True)
class _Key:
    event: Event
    recorded: float  # when this key last wrote a record
    count: int = 0  # events since, not yet in a record
    first: float = 0.0
    last: float = 0.0


class Summary:
    def __init__(self, all_sites: tuple[str, ...]) -> None:
        self.all_sites = all_sites
        self._keys: OrderedDict[tuple[str, str, str, str], _Key] = OrderedDict()  # oldest record first

    def __len__(self) -> int:
        return len(self._keys)

    def note(self, event: Event, now: float) -> list[Record]:
        """The records to write now for ``event`` (often none: it is counted for later)."""
        out = self.due(now)
        key = (event.kind, event.actor, event.target, event.address)
        if key not in self._keys and sum(k[0] == event.kind for k in self._keys) >= KEYS_PER_KIND:
            event = replace(event, actor="", role="", target=ANY, address=ANY, sites=self.all_sites)
            key = (event.kind, "", ANY, ANY)
        state = self._keys.get(key)
        if state is None:
            self._keys[key] = _Key(event, now)
            out.append(Record(event, 1, now, now))
            return out
        if not state.count:
            state.first = now
        state.count += 1
        state.last = now
        return out

    def due(self, now: float, *, everything: bool = False) -> list[Record]:
        """Records of the counts whose interval has passed (``everything``: all counts); keys
        quiet for a whole interval are forgotten."""
        out = []
        for key, state in list(self._keys.items()):
            if not everything and now - state.recorded < INTERVAL_S:
                break  # ordered by the time of their last record
            del self._keys[key]
            if state.count:
                out.append(Record(state.event, state.count, state.first, state.last))
                self._keys[key] = _Key(state.event, now)
        return out


class SecurityLog:
    """Writes the summary's records as portal actions (one per site of the event)."""

    def __init__(self, portal: Portal, all_sites: tuple[str, ...]) -> None:
        self.portal = portal
        self.summary = Summary(all_sites)
        self._lock = threading.Lock()

    def _now(self) -> float:
        return self.portal.clock().timestamp()

    def note(self, event: Event) -> None:
        """Counts the event and writes what is due (from a worker thread: it may write)."""
        with self._lock:
            records = self.summary.note(event, self._now())
        self._write(records)

    def flush(self, everything: bool = False) -> None:
        with self._lock:
            records = self.summary.due(self._now(), everything=everything)
        self._write(records)

    def _write(self, records: list[Record]) -> None:
        for record in records:
            event = record.event
            scope = Scope(User(event.actor, event.role, ()), self.portal.config)
            data: dict[str, Any] = {
                "count": record.count,
                "first": _ts(record.first),
                "last": _ts(record.last),
            }
            for site in event.sites:
                self.portal.record_action(scope, site, event.kind, event.target, event.address, data)

    @contextlib.asynccontextmanager
    async def running(self, run: Callable[..., Any]) -> AsyncIterator[None]:
        """While the portal serves: due counts written every FLUSH_EVERY_S, all of them at the end.
        ``run`` runs a blocking call off the event loop (Starlette's run_in_threadpool)."""

        async def every() -> None:
            while True:
                await asyncio.sleep(FLUSH_EVERY_S)
                await run(self.flush)

        task = asyncio.create_task(every())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await run(self.flush, True)


def _ts(seconds: float) -> str:
    return format_ts(datetime.fromtimestamp(seconds, UTC))
