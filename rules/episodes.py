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
from typing import Any
from zoneinfo import ZoneInfo

from rules.model import Finding, FindingKind, Measurement
from rules.quantities import measurement_text
from rules.times import local_hms, span_text, stored_time


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


def _excess(measurement: Measurement, unlimited_from: float | None = None) -> float:
    """How far a measurement is above its limit. One without a limit is measured from
    ``unlimited_from`` (its own value against others of its name), or never the worse."""
    if measurement.limit is not None:
        return measurement.value - measurement.limit
    return float("-inf") if unlimited_from is None else measurement.value - unlimited_from


def _worse(a: Measurement | None, b: Measurement | None) -> Measurement | None:
    if a is None:
        return b
    if b is None:
        return a
    return b if _excess(b) > _excess(a) else a


def _worst_of(finding: Finding) -> Measurement | None:
    """The finding's principal level: its first measurement held against a limit, durations
    aside (an episode's length is its span). The rules list that measurement first."""
    return next((m for m in finding.measurements if m.limit is not None and m.unit != "s"), None)


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


# --------------------------------------------------------------------------- what a person reads


@dataclass(frozen=True, slots=True)
class EpisodeFacts:
    """One episode as every surface tells it: computed here once, rendered by the notice, its
    plot, alerts, status, the portal, the API, the demo's summary and the bundle.

    ``start`` is when the condition began: a sustained-condition rule (light above 1 lux for
    more than 300 s) flags minutes only once the condition has lasted, and its findings say
    when it began (``details.run_start``); ``flagged_start`` is the first flagged minute.
    The peak is the judged window with the largest excess over the limit, with its own span.
    """

    id: str
    site: str
    standard: str
    section: str
    sensors: tuple[str, ...]
    start: datetime
    end: datetime
    flagged_start: datetime
    peak: Measurement | None
    peak_start: datetime
    peak_end: datetime
    peak_exempt_s: float  # exempt seconds left out of the peak window
    measurements: tuple[Measurement, ...]  # each measurement named, at its worst
    exemptions: tuple[str, ...]  # exempt activity considered anywhere in the episode
    completeness_min: float
    completeness_mean: float
    weather_affected_s: float | None
    windows: int  # judged windows (findings) underneath
    considered: tuple[str, ...]
    refs: tuple[str, ...]
    summary: str  # the peak window's own sentence
    finding_ids: tuple[str, ...]

    @property
    def duration_s(self) -> float:
        return (self.end - self.start).total_seconds()


def measurement_json(m: Measurement | None) -> dict[str, Any] | None:
    """A measurement as JSON: what notices store and the status and API give."""
    return None if m is None else {"name": m.name, "value": m.value, "limit": m.limit, "unit": m.unit}


def _utc(text: object) -> datetime | None:
    if not isinstance(text, str):
        return None
    try:
        return stored_time(text)
    except ValueError:
        return None


def episode_facts(episode: Episode, findings: Sequence[Finding]) -> EpisodeFacts:
    """The facts of one episode from its findings (those named by ``episode.finding_ids``)."""
    mine = sorted((f for f in findings if f.id in set(episode.finding_ids)), key=lambda f: (f.start, f.id))
    worst: dict[str, Measurement] = {}
    for finding in mine:
        for m in finding.measurements:
            held = worst.get(m.name)
            if held is None or _excess(m, 0.0) > _excess(held, 0.0):
                worst[m.name] = m
    # The peak from the findings as they are now (a re-judged minute may have lowered it), the
    # first of equals: the same whether the episode was built at once or minute by minute.
    levelled = [(f, level) for f in mine if (level := _worst_of(f)) is not None]
    peak_finding: Finding | None = mine[-1] if mine else None
    peak: Measurement | None = None
    if levelled:
        peak_finding, peak = max(levelled, key=lambda pair: (_excess(pair[1]), -pair[0].start.timestamp()))
    begins = [episode.start, *(b for f in mine if (b := _utc(f.details.get("run_start"))) is not None)]
    peak_start, peak_end = episode.start, episode.end
    peak_exempt = 0.0
    if peak_finding is not None:
        details = peak_finding.details
        peak_start = _utc(details.get("window_start")) or peak_finding.start
        peak_end = _utc(details.get("window_end")) or peak_finding.end
        peak_exempt = float(details.get("exempt_s") or 0.0)
    weather = [float(w) for f in mine if (w := f.details.get("weather_affected_s")) is not None]
    completeness = [f.completeness for f in mine] or [1.0]
    considered: dict[str, None] = {}
    for f in mine:
        if isinstance(points := f.details.get("considered"), list | tuple):
            considered.update(dict.fromkeys(str(c) for c in points))
    return EpisodeFacts(
        id=episode.id,
        site=episode.site,
        standard=episode.standard,
        section=episode.section,
        sensors=episode.sensors,
        start=min(begins),
        end=episode.end,
        flagged_start=episode.start,
        peak=peak,
        peak_start=peak_start,
        peak_end=peak_end,
        peak_exempt_s=peak_exempt,
        measurements=tuple(worst.values()),
        exemptions=tuple(dict.fromkeys(e for f in mine for e in f.exemptions)),
        completeness_min=round(min(completeness), 4),
        completeness_mean=round(sum(completeness) / len(completeness), 4),
        weather_affected_s=sum(weather) if weather else None,
        windows=len(episode.finding_ids),
        considered=tuple(considered),
        refs=tuple(dict.fromkeys(r for f in mine for r in f.refs if not r.startswith("sound:")))[:20],
        summary=peak_finding.summary if peak_finding is not None else "",
        finding_ids=episode.finding_ids,
    )


def episodes_of(findings: Sequence[Finding], gap: timedelta) -> list[EpisodeFacts]:
    """Every violation episode in these findings, with its facts, in time order.

    The same merging the notices do as findings arrive (``update_episodes``), done at once:
    merging is by gap only, so the result does not depend on the order findings came in.
    """
    violations = [f for f in findings if f.kind is FindingKind.VIOLATION]
    return [episode_facts(e, violations) for e in update_episodes([], violations, gap)]


def episode_text(facts: EpisodeFacts, timezone: str, notice_id: str | None = None, title: str = "") -> str:
    """The line status, the demo's summary and the portal give for an episode: 'Noise at the mine
    site boundaries (6.D) at n3: 16:09:21-16:20:38 CST (11 minutes 17 seconds); highest LAeq,1min
    84.2 dB(A) (limit 80 dB(A)) over 16:14:10-16:15:10 CST (1 minute); notice DOV-2026-0002'."""
    where = f" at {', '.join(facts.sensors)}" if facts.sensors else ""
    if facts.duration_s <= 1:
        zone = ZoneInfo(timezone)
        when = f"at {local_hms(facts.start, zone)} {facts.start.astimezone(zone):%Z}"
    else:
        when = span_text(facts.start, facts.end, timezone)
    text = f"{title or facts.standard} ({facts.section}){where}: {when}"
    if facts.peak is not None:
        peak_span = span_text(facts.peak_start, facts.peak_end, timezone)
        text += f"; highest {measurement_text(measurement_json(facts.peak))} over {peak_span}"
    if facts.exemptions:
        text += f"; exempt activity left out: {'; '.join(facts.exemptions)}"
    return text + (f"; notice {notice_id}" if notice_id else "")
