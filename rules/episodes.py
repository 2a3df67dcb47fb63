"""Episodes: consecutive violations of one standard at one sensor (set), told as one story.

A noise problem lasting 40 minutes is 40 one-minute violation findings but one episode
for the notice and the town. ``update_episodes`` is pure: give it the episodes still
open and the new findings, it returns the updated episodes.

Merging: a VIOLATION finding joins an episode of the same site, standard and sensors
when the gap between them (either side, since late data can add an earlier minute) is at
most ``gap`` (the profile's ``episode_gap_s``). A finding that bridges two episodes merges
them. Other finding kinds (exempt, unreliable, warnings, evidence) never make episodes.
Re-sending a finding (same id) does not count it twice.

The id is derived from (site, standard, sensors, start): stable while the episode grows
forward. If late data extends it backwards, its start and so its id change; the returned
episode lists ``replaces`` with the ids it took over so the caller can retire them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from rules.model import Finding, FindingKind, Measurement


@dataclass(frozen=True, slots=True)
class Episode:
    site: str
    standard: str
    section: str
    sensors: tuple[str, ...]
    start: datetime
    end: datetime
    finding_ids: tuple[str, ...]
    worst: Measurement | None
    kind: FindingKind = FindingKind.VIOLATION
    replaces: tuple[str, ...] = field(default=())  # ids of episodes merged into this one

    @property
    def id(self) -> str:
        key = "|".join([self.site, self.standard, ",".join(self.sensors), self.start.isoformat()])
        return "ep-" + hashlib.sha256(key.encode()).hexdigest()[:16]

    @property
    def duration(self) -> timedelta:
        return self.end - self.start

    def is_closed(self, now: datetime, gap: timedelta) -> bool:
        """No later finding can join any more (unless late data arrives)."""
        return now - self.end > gap


def _excess(measurement: Measurement) -> float:
    return measurement.value - measurement.limit if measurement.limit is not None else float("-inf")


def _worse(a: Measurement | None, b: Measurement | None) -> Measurement | None:
    if a is None:
        return b
    if b is None:
        return a
    return b if _excess(b) > _excess(a) else a


def _worst_of(finding: Finding) -> Measurement | None:
    with_limit = [m for m in finding.measurements if m.limit is not None]
    return max(with_limit, key=_excess) if with_limit else None


def _merge(a: Episode, b: Episode, known_ids: set[str]) -> Episode:
    first = a if (a.start, a.id) <= (b.start, b.id) else b
    ids = tuple(sorted(set(a.finding_ids) | set(b.finding_ids)))
    merged = Episode(
        site=a.site,
        standard=a.standard,
        section=first.section,
        sensors=a.sensors,
        start=min(a.start, b.start),
        end=max(a.end, b.end),
        finding_ids=ids,
        worst=_worse(a.worst, b.worst),
        kind=a.kind,
    )
    replaced = (({a.id, b.id} & known_ids) | {*a.replaces, *b.replaces}) - {merged.id}
    return Episode(
        merged.site,
        merged.standard,
        merged.section,
        merged.sensors,
        merged.start,
        merged.end,
        merged.finding_ids,
        merged.worst,
        merged.kind,
        tuple(sorted(replaced)),
    )


def update_episodes(
    open_episodes: Sequence[Episode], findings: Sequence[Finding], gap: timedelta
) -> list[Episode]:
    """Merge VIOLATION findings into episodes; returns every episode (given or new), sorted by start.

    Episodes whose key received no finding come back unchanged.
    """
    groups: dict[tuple[str, str, tuple[str, ...]], list[Episode]] = {}
    known_ids = {episode.id for episode in open_episodes}
    for episode in open_episodes:
        groups.setdefault((episode.site, episode.standard, episode.sensors), []).append(episode)
    for finding in sorted(findings, key=lambda f: (f.start, f.id)):
        if finding.kind != FindingKind.VIOLATION:
            continue
        key = (finding.site, finding.standard, finding.sensors)
        candidate = Episode(
            site=finding.site,
            standard=finding.standard,
            section=finding.section,
            sensors=finding.sensors,
            start=finding.start,
            end=finding.end,
            finding_ids=(finding.id,),
            worst=_worst_of(finding),
        )
        kept: list[Episode] = []
        for episode in groups.get(key, []):
            close = candidate.start - episode.end <= gap and episode.start - candidate.end <= gap
            if close:
                candidate = _merge(episode, candidate, known_ids)
            else:
                kept.append(episode)
        groups[key] = [*kept, candidate]
    return sorted(
        (e for group in groups.values() for e in group), key=lambda e: (e.start, e.standard, e.sensors)
    )
