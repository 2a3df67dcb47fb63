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

import bisect
import hashlib
from collections.abc import Mapping, Sequence
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
    finding_ids: tuple[str, ...]  # sorted (merging keeps them so: _sorted_union)
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


def _sorted_union(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[str, ...]:
    """The sorted union of two sorted tuples of finding ids. An episode grows a finding at a time:
    one id is put in its place, not the whole episode's ids sorted again (that made folding a
    day-long episode quadratic: 0.4 s for 1,440 minutes)."""
    if len(a) == 1 or len(b) == 1:
        many, (one,) = (a, b) if len(b) == 1 else (b, a)
        at = bisect.bisect_left(many, one)
        if at < len(many) and many[at] == one:
            return many
        return (*many[:at], one, *many[at:])
    return tuple(sorted(set(a) | set(b)))


def _merge(a: Episode, b: Episode, known_ids: set[str]) -> Episode:
    first = a if (a.start, a.id) <= (b.start, b.id) else b
    ids = _sorted_union(a.finding_ids, b.finding_ids)
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
    return None if m is None else m.to_json()


def _utc(text: object) -> datetime | None:
    if not isinstance(text, str):
        return None
    try:
        return stored_time(text)
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class _Told:
    """What the facts take from the finding they tell the peak by (or, with no level, the last
    finding): its start (which orders equal peaks), its window, the exempt seconds left out of
    it and its sentence."""

    start: datetime
    window_start: datetime
    window_end: datetime
    exempt_s: float
    summary: str

    @classmethod
    def of(cls, finding: Finding) -> _Told:
        details = finding.details
        return cls(
            finding.start,
            _utc(details.get("window_start")) or finding.start,
            _utc(details.get("window_end")) or finding.end,
            float(details.get("exempt_s") or 0.0),
            finding.summary,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "start": self.start.isoformat(),
            "window_start": self.window_start.isoformat(),
            "window_end": self.window_end.isoformat(),
            "exempt_s": self.exempt_s,
            "summary": self.summary,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> _Told:
        return cls(
            stored_time(d["start"]),
            stored_time(d["window_start"]),
            stored_time(d["window_end"]),
            d["exempt_s"],
            d["summary"],
        )


def _measurement_from_json(d: Mapping[str, Any]) -> Measurement:
    return Measurement.from_json(d)


_REFS_TOLD = 20  # an episode's facts name at most this many references (its first)


@dataclass(slots=True)
class EpisodeFold:
    """An episode's facts folded over its findings in time order ((start, id)): what
    ``episode_facts`` computes, kept from one finding to the next.

    ``episode_facts`` is this fold over every finding of the episode, so the facts of an
    episode told minute by minute (the notices carry the fold in the store, ``to_json``, and
    ``add`` the minute each tick: no finding read back) are those of the episode told at once.
    A finding can only be added after the last one (``extends``): one revised, retracted or
    earlier than the last (late data, a merge) means folding the episode again from its
    findings as they are now.
    """

    last: tuple[datetime, str] | None = None  # (start, id) of the last finding added
    count: int = 0
    worst: dict[str, Measurement] = field(default_factory=dict)  # by name, in order of first appearance
    peak: Measurement | None = None
    peak_told: _Told | None = None
    last_told: _Told | None = None
    run_start: datetime | None = None  # the earliest ``details.run_start``
    weather_s: float | None = None
    completeness_sum: float = 0  # summed in order from 0, as ``sum`` does
    completeness_min: float | None = None
    considered: list[str] = field(default_factory=list)
    exemptions: list[str] = field(default_factory=list)
    refs: list[str] = field(default_factory=list)  # the first _REFS_TOLD, "sound:" ones aside

    @classmethod
    def of(cls, findings: Sequence[Finding]) -> EpisodeFold:
        """The fold over ``findings`` (any order; each once)."""
        fold = cls()
        for finding in sorted(findings, key=lambda f: (f.start, f.id)):
            fold.add(finding)
        return fold

    def extends(self, findings: Sequence[Finding]) -> bool:
        """Whether ``findings`` all come after the last finding added (then ``add`` them in time order)."""
        return self.last is None or all((f.start, f.id) > self.last for f in findings)

    def add(self, finding: Finding) -> None:
        key = (finding.start, finding.id)
        if self.last is not None and key < self.last:
            raise ValueError(f"finding {finding.id} comes before the last one folded ({self.last[1]})")
        self.last = key
        self.count += 1
        for m in finding.measurements:
            held = self.worst.get(m.name)
            if held is None or _excess(m, 0.0) > _excess(held, 0.0):
                self.worst[m.name] = m
        told = _Told.of(finding)
        # The peak: the largest excess, the first of equals (the same whether the episode is told
        # at once or minute by minute).
        level = _worst_of(finding)
        if level is not None and (
            self.peak is None
            or self.peak_told is None
            or (_excess(level), -finding.start.timestamp())
            > (_excess(self.peak), -self.peak_told.start.timestamp())
        ):
            self.peak, self.peak_told = level, told
        self.last_told = told
        begins = _utc(finding.details.get("run_start"))
        if begins is not None and (self.run_start is None or begins < self.run_start):
            self.run_start = begins
        if (weather := finding.details.get("weather_affected_s")) is not None:
            self.weather_s = (0 if self.weather_s is None else self.weather_s) + float(weather)
        self.completeness_sum += finding.completeness
        if self.completeness_min is None or finding.completeness < self.completeness_min:
            self.completeness_min = finding.completeness
        if isinstance(points := finding.details.get("considered"), list | tuple):
            self.considered += [c for c in dict.fromkeys(str(p) for p in points) if c not in self.considered]
        self.exemptions += [e for e in dict.fromkeys(finding.exemptions) if e not in self.exemptions]
        for ref in finding.refs:
            if len(self.refs) >= _REFS_TOLD:
                break
            if not ref.startswith("sound:") and ref not in self.refs:
                self.refs.append(ref)

    def facts(self, episode: Episode) -> EpisodeFacts:
        """The facts of ``episode``, whose findings (those still current) are the ones folded."""
        told = self.peak_told if self.peak is not None else self.last_told
        begins = [episode.start] if self.run_start is None else [episode.start, self.run_start]
        completeness_min = 1.0 if self.completeness_min is None else self.completeness_min
        completeness_mean = self.completeness_sum / self.count if self.count else 1.0
        return EpisodeFacts(
            id=episode.id,
            site=episode.site,
            standard=episode.standard,
            section=episode.section,
            sensors=episode.sensors,
            start=min(begins),
            end=episode.end,
            flagged_start=episode.start,
            peak=self.peak,
            peak_start=episode.start if told is None else told.window_start,
            peak_end=episode.end if told is None else told.window_end,
            peak_exempt_s=0.0 if told is None else told.exempt_s,
            measurements=tuple(self.worst.values()),
            exemptions=tuple(self.exemptions),
            completeness_min=round(completeness_min, 4),
            completeness_mean=round(completeness_mean, 4),
            weather_affected_s=self.weather_s,
            windows=len(episode.finding_ids),
            considered=tuple(self.considered),
            refs=tuple(self.refs),
            summary="" if told is None else told.summary,
            finding_ids=episode.finding_ids,
        )

    def to_json(self) -> dict[str, Any]:
        """The fold as JSON (floats and order kept exactly), for the store to carry it."""
        return {
            "last": None if self.last is None else [self.last[0].isoformat(), self.last[1]],
            "count": self.count,
            "worst": [measurement_json(m) for m in self.worst.values()],
            "peak": measurement_json(self.peak),
            "peak_told": None if self.peak_told is None else self.peak_told.to_json(),
            "last_told": None if self.last_told is None else self.last_told.to_json(),
            "run_start": None if self.run_start is None else self.run_start.isoformat(),
            "weather_s": self.weather_s,
            "completeness_sum": self.completeness_sum,
            "completeness_min": self.completeness_min,
            "considered": self.considered,
            "exemptions": self.exemptions,
            "refs": self.refs,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> EpisodeFold:
        last, peak, peak_told, last_told = d["last"], d["peak"], d["peak_told"], d["last_told"]
        return cls(
            last=None if last is None else (stored_time(last[0]), str(last[1])),
            count=d["count"],
            worst={m["name"]: _measurement_from_json(m) for m in d["worst"]},
            peak=None if peak is None else _measurement_from_json(peak),
            peak_told=None if peak_told is None else _Told.from_json(peak_told),
            last_told=None if last_told is None else _Told.from_json(last_told),
            run_start=None if d["run_start"] is None else stored_time(d["run_start"]),
            weather_s=d["weather_s"],
            completeness_sum=d["completeness_sum"],
            completeness_min=d["completeness_min"],
            considered=list(d["considered"]),
            exemptions=list(d["exemptions"]),
            refs=list(d["refs"]),
        )


def episode_facts(episode: Episode, findings: Sequence[Finding]) -> EpisodeFacts:
    """The facts of one episode from its findings (those named by ``episode.finding_ids``): the
    fold (``EpisodeFold``) over them."""
    ids = set(episode.finding_ids)
    return EpisodeFold.of([f for f in findings if f.id in ids]).facts(episode)


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
