"""Violation episodes of a period, from the store: the one source every surface renders.

The facts are computed by ``rules.episodes.episodes_of`` (pure); this module only chooses the
findings: the current violation findings of a site around a period, widened until no episode
is cut at the edge, so that the portal, ``status``, the demo's summary and the notices (which
build the same episodes as findings arrive) tell one episode with one span and one peak.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from monitor.journal import queries
from monitor.wire.codec import finding_from_json
from monitor.wire.protocol import format_ts
from rules.episodes import EpisodeFacts, episode_text, episodes_of, measurement_json
from rules.model import Finding, FindingKind
from rules.times import span_text

# An episode longer than this is still told whole: the query widens a step at a time.
_WIDEN_STEP = timedelta(hours=6)
_WIDEN_MAX = timedelta(days=7)


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
) -> list[ToldEpisode]:
    """Violation episodes of ``site`` that overlap [start, end), whole, in time order.

    ``as_of``: the record as it stood then: only findings that had ended by that time.
    ``not_before``/``not_after``: a reader's time scope; no finding outside it is read, so an
    episode is told as far as the reader may see it.
    """
    gap = timedelta(seconds=gap_s)
    first, last = start - gap, end + gap

    def violations(a: datetime, b: datetime) -> list[Finding]:
        a, b = max(a, not_before or a), min(b, not_after or b)
        return _violations(conn, site, a, b) if a < b else []

    findings = violations(first, last)
    # Widen while an episode touches an edge and the slice beyond holds violations to join it.
    while last - first < _WIDEN_MAX:
        episodes = episodes_of(findings, gap)
        early = [e for e in episodes if e.flagged_start - first <= gap]
        late = [e for e in episodes if last - e.end <= gap]
        more: list[Finding] = []
        if early:
            reach = min(e.flagged_start for e in early) - gap
            more += [f for f in violations(first - _WIDEN_STEP, first) if f.end >= reach]
            first -= _WIDEN_STEP
        if late:
            reach = max(e.end for e in late) + gap
            more += [f for f in violations(last, last + _WIDEN_STEP) if f.start <= reach]
            last += _WIDEN_STEP
        if not more:
            break
        findings += more
    if as_of is not None:
        findings = [f for f in findings if f.end <= as_of]
    told = [e for e in episodes_of(findings, gap) if e.start < end and e.end > start]
    return [ToldEpisode(e, queries.notice_of_episode(conn, e.id)) for e in told]
