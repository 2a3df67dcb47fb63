"""Violation episodes of a period, from the store: the one source every surface renders.

The facts are computed by ``rules.episodes.episodes_of`` (pure); this module only chooses the
findings: the current violation findings of a site around a period, widened until no episode
is cut at the edge, so that the portal, ``status``, the demo's summary and the notices (which
build the same episodes as findings arrive) tell one episode with one span and one peak.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from monitor.journal import queries
from monitor.times import scope_window
from monitor.wire.codec import finding_from_json
from monitor.wire.protocol import format_ts
from rules.episodes import EpisodeFacts, episode_text, episodes_of, measurement_json
from rules.model import Finding, FindingKind
from rules.times import span_text

# An episode longer than this is still told whole: the query widens a step at a time.
_WIDEN_STEP = timedelta(hours=6)
_WIDEN_MAX = timedelta(days=7)

# The current violation findings of a site starting in [a, b), as the store holds them now.
ViolationsBetween = Callable[[datetime, datetime], list[Finding]]


@dataclass(frozen=True, slots=True)
class ToldEpisode:
    """An episode's facts with the notice it was told in (None: no notice, e.g. not yet)."""

    facts: EpisodeFacts
    notice_id: str | None

    def to_json(self, timezone: str, titles: Mapping[str, str] | None = None) -> dict[str, Any]:
        """As the status, the portal and the API give it: UTC for machines, the span as a person
        reads it (site time) beside, and the one-line text every surface prints."""
        facts = self.facts
        return {
            "id": facts.id,
            "standard": facts.standard,
            "section": facts.section,
            "sensors": list(facts.sensors),
            "start": format_ts(facts.start),
            "end": format_ts(facts.end),
            "span": span_text(facts.start, facts.end, timezone),
            "peak": measurement_json(facts.peak),
            "peak_start": format_ts(facts.peak_start),
            "peak_end": format_ts(facts.peak_end),
            "peak_span": span_text(facts.peak_start, facts.peak_end, timezone),
            "windows": facts.windows,
            "exemptions": list(facts.exemptions),
            "notice": self.notice_id,
            "summary": facts.summary,
            "title": (titles or {}).get(facts.standard, facts.standard),
            "text": episode_text(facts, timezone, self.notice_id, (titles or {}).get(facts.standard, "")),
        }


def _violations(conn: sqlite3.Connection, site: str, start: datetime, end: datetime) -> list[Finding]:
    violation = [FindingKind.VIOLATION.value]
    rows = queries.current_findings(conn, site=site, start=start, end=end, kinds=violation)
    return [finding_from_json(json.loads(r["data"])) for r in rows]


def site_episodes(
    conn: sqlite3.Connection,
    site: str,
    start: datetime,
    end: datetime,
    gap_s: float,
    *,
    as_of: datetime | None = None,
    not_before: datetime | None = None,
    not_after: datetime | None = None,
    between: ViolationsBetween | None = None,
) -> list[ToldEpisode]:
    """Violation episodes of ``site`` that overlap [start, end), whole, in time order.

    ``as_of``: the record as it stood then: only findings that had ended by that time.
    ``not_before``/``not_after``: a reader's time scope, its end held (times.scope_window); no
    finding outside it is read, so an episode is told as far as the reader may see it.
    ``between``: where the violations are read (the store's, by default): the daemon's retained
    status gives the ones it keeps in memory (monitor.daemon.status_findings), so the same
    choice and the same fold tell the same episodes without reading them all back each time.
    """
    gap = timedelta(seconds=gap_s)
    first, last = start - gap, end + gap

    def violations(a: datetime, b: datetime) -> list[Finding]:
        a, b = scope_window(a, b, not_before, not_after)
        if a >= b:
            return []
        return _violations(conn, site, a, b) if between is None else between(a, b)

    findings = violations(first, last)
    # Widen while an episode to tell touches an edge and the slice beyond holds violations: the
    # whole slice, as an episode may run on through it (then it touches the new edge in turn).
    while last - first < _WIDEN_MAX:
        told = [e for e in episodes_of(findings, gap) if e.start < end and e.end > start]
        early = [e for e in told if e.flagged_start - first <= gap]
        late = [e for e in told if last - e.end <= gap]
        more: list[Finding] = []
        if early:
            more += violations(first - _WIDEN_STEP, first)
            first -= _WIDEN_STEP
        if late:
            more += violations(last, last + _WIDEN_STEP)
            last += _WIDEN_STEP
        if not more:
            break
        findings += more
    if as_of is not None:
        findings = [f for f in findings if f.end <= as_of]
    told = [e for e in episodes_of(findings, gap) if e.start < end and e.end > start]
    return [ToldEpisode(e, queries.notice_of_episode(conn, e.id)) for e in told]
