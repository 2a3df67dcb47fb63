"""The findings the daemon's retained status tells, kept in memory from one publish to the next.

``site_status`` counts a site's findings of the last 24 hours and folds its violation episodes,
whole (reaching back past the 24 hours while an episode does). Read back from the store at every
publish, that work grew with the length of a loud episode (issue 31). The daemon keeps instead the
site's current findings from a point in time on, and at each publish reads only the finding rows
stored since the last one: findings are only ever inserted (a revision or a retraction is a new
row), in the order of the table's rowid, so replaying those rows keeps "the latest revision of
each finding, unless retracted" (``queries.current_findings``) exactly. ``site_status`` then counts
and folds what it would have read (``site_episodes`` given ``between``): the same choice and the
same functions, so `minewatch status` and the portal, which read from scratch, tell the same.

What it cannot follow with certainty makes it load again from the store: a rollback since it read
(rows it read may be gone and their rowids given again), the row it read last no longer there.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta

from monitor.journal import queries
from monitor.journal.store import Store
from monitor.wire.canonical import from_us, to_us
from monitor.wire.codec import finding_from_json
from rules.model import Finding, FindingKind

STATUS_DAY = timedelta(hours=24)  # the status tells the findings and episodes of this long back


@dataclass(frozen=True, slots=True)
class _Held:
    kind: str
    start_us: int
    end_us: int
    violation: Finding | None  # decoded for violations only: the episodes fold them


def _held(row: sqlite3.Row) -> _Held:
    violation = None
    if row["kind"] == FindingKind.VIOLATION.value:
        violation = finding_from_json(json.loads(row["data"]))
    return _Held(row["kind"], row["start_us"], row["end_us"], violation)


class StatusFindings:
    """A site's current findings starting from a time on (``held_from``), as the store holds them."""

    def __init__(self, store: Store, site: str) -> None:
        self.store = store
        self.site = site
        self._held: dict[str, _Held] = {}  # finding id -> its latest revision, not retracted
        self._from_us: int | None = None  # every current finding starting then or later is held
        self._version = 0  # the last findings row followed (queries.findings_version)
        self._version_row: tuple[str, int] | None = None  # that row's (id, revision)
        self._rollbacks = 0  # the store's rollbacks when it was followed
        self._reached_us: int | None = None  # the earliest start the last status read
        self.loads = 0  # loads from scratch (the first, and after what could not be followed)

    @property
    def held_from(self) -> datetime | None:
        return None if self._from_us is None else from_us(self._from_us)

    def refresh(self, now: datetime, gap: timedelta) -> None:
        """Follow the store up to now. What a status at ``now`` reads and is not held (a clock set
        back, an episode reaching further back) is read from the store when asked for."""
        wanted = to_us(now - STATUS_DAY - gap)  # site_episodes' first read, before it widens
        if not self._follows_store():
            self._load(wanted)
        else:
            self._read_stored_since()
            # What the last status read (an episode reaching back) is kept for the next, which
            # reads it again: let go only of what neither reads.
            self._let_go_before(wanted if self._reached_us is None else min(wanted, self._reached_us))
        self._reached_us = wanted

    def kinds_between(self, start: datetime, end: datetime) -> Iterator[tuple[str, int]]:
        """(kind, end_us) of each current finding starting in [start, end)."""
        lo, hi = to_us(start), to_us(end)
        self._hold_from(lo)
        return ((h.kind, h.end_us) for h in self._held.values() if lo <= h.start_us < hi)

    def between(self, start: datetime, end: datetime) -> list[Finding]:
        """The current violations starting in [start, end), by start (``site_episodes``' ``between``)."""
        lo, hi = to_us(start), to_us(end)
        self._hold_from(lo)
        self._reached_us = lo if self._reached_us is None else min(self._reached_us, lo)
        chosen = [h for h in self._held.values() if h.violation is not None and lo <= h.start_us < hi]
        return [h.violation for h in sorted(chosen, key=lambda h: h.start_us) if h.violation is not None]

    def _follows_store(self) -> bool:
        if self._from_us is None or self.store.rollbacks != self._rollbacks:
            return False
        stored = queries.finding_stored_as(self.store.conn, self._version) if self._version else None
        return stored == self._version_row

    def _mark_version(self, version: int) -> None:
        self._version = version
        self._version_row = queries.finding_stored_as(self.store.conn, version) if version else None
        self._rollbacks = self.store.rollbacks

    def _load(self, from_us_: int) -> None:
        self.loads += 1
        # The version first: a row stored between the two reads is replayed by the next
        # publish, which changes nothing (each row sets its finding's latest revision).
        self._mark_version(queries.findings_version(self.store.conn))
        rows = queries.current_findings(self.store.conn, site=self.site, start=from_us(from_us_))
        self._held = {r["id"]: _held(r) for r in rows}
        self._from_us = from_us_

    def _read_stored_since(self) -> None:
        latest = queries.findings_version(self.store.conn)
        if latest == self._version:
            return
        for row in queries.findings_stored_between(self.store.conn, self.site, self._version, latest):
            if self._from_us is not None and row["start_us"] < self._from_us:
                continue  # not held: read from the store if ever wanted
            if row["retracted"]:
                self._held.pop(row["id"], None)
            else:
                self._held[row["id"]] = _held(row)
        self._mark_version(latest)

    def _let_go_before(self, start_us: int) -> None:
        if self._from_us is not None and start_us > self._from_us:
            self._held = {k: h for k, h in self._held.items() if h.start_us >= start_us}
            self._from_us = start_us

    def _hold_from(self, start_us: int) -> None:
        """Hold the current findings from ``start_us`` on too (read from the store: an episode
        reaching further back than the last status read, or a clock set back)."""
        if self._from_us is None or start_us >= self._from_us:
            return
        rows = queries.current_findings(
            self.store.conn, site=self.site, start=from_us(start_us), end=from_us(self._from_us)
        )
        self._held.update((r["id"], _held(r)) for r in rows)
        self._from_us = start_us
