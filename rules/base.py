"""What every rule module shares: the rule shape, the cited standard, small pure helpers.

A rule module exposes a frozen ``Params`` dataclass, an ``evaluate`` function and a
``RULE`` object (a :class:`RuleSpec`) that ``rules/__init__.py`` lists by name::

    profile TOML --load_profile--> Standard(params=NoiseParams(...))
    evaluate_site --> RULE.evaluate(site, standard, params, data, start, end, now) --> [Finding]

Nothing here reads the clock, the environment or files.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from functools import partial
from operator import attrgetter, is_not
from typing import Any, Generic, TypeVar

from rules.model import (
    Finding,
    FindingKind,
    Measurement,
    SensorInfo,
    SensorKind,
    SiteContext,
    SiteData,
)
from rules.quantities import number_text

P = TypeVar("P")


@dataclass(frozen=True, slots=True)
class Standard:
    """One standard of an ordinance profile: what a finding cites and the params its rule runs with."""

    key: str  # profile key, e.g. "noise"; Finding.standard
    rule: str  # rule kind in RULES, e.g. "noise"
    section: str  # e.g. "6.D"
    title: str
    summary: str  # one sentence
    text: str  # the ordinance's own words, quoted in notices
    required_action: str  # what the operator must do to cure
    params: Any  # the rule's frozen Params dataclass
    applies_to_preexisting: bool = True  # section 1.4.C.1 of Dovre; other towns may differ
    # Readings and choices of the project, not the ordinance's words, that the Town should confirm;
    # every finding of the standard carries them in details["considered"] for the notice.
    considered: tuple[str, ...] = ()


Evaluate = Callable[[SiteContext, Standard, P, SiteData, datetime, datetime, datetime], list[Finding]]
EarlyWarnings = Callable[[SiteContext, Standard, P, SiteData, datetime], list[Finding]]
Margins = Callable[[P], tuple[timedelta, timedelta]]
EventKinds = Callable[[P], tuple[str, ...]]


def no_margins(params: Any) -> tuple[timedelta, timedelta]:
    return timedelta(0), timedelta(0)


@dataclass(frozen=True, slots=True)
class RuleSpec(Generic[P]):
    """A rule kind: its params type, its evaluation and what reading data around the interval it needs."""

    name: str
    params_type: type[P]
    evaluate: Evaluate[P]
    margins: Margins[P] = no_margins
    early_warnings: EarlyWarnings[P] | None = None
    description: str = ""
    reads: tuple[str, ...] = ()  # SiteData reading fields the margins apply to: "sound", "light", "weather"
    # Profile-defined operator event kinds (GenericEvent.kind) the rule reads with these params;
    # a profile must declare each of them in its ``event_kinds`` (rules.profile checks).
    event_kinds: EventKinds[P] | None = None
    # Set when each finding is a verdict on one event, the kind its one ref names ("blast": the
    # blasting-hours verdict on a blast): it judges the event by the event's own time, and the other
    # times it names (the event's day, the allowed hours, that day's sunset) are set by the rule for
    # that day, not reported. A time-scoped reader is shown it with the event (Profile.event_verdicts,
    # monitor/evidence/disclosure.py TimeScope); None: every time a finding names is one it reports.
    verdict_on: str | None = None


# ---------------------------------------------------------------------------
# Acoustics kept local on purpose: rules stay self-contained (monitor/acoustics/iec61672.py is the shell's)
# ---------------------------------------------------------------------------


def leq(levels_db: Iterable[float], durations_s: Iterable[float] | None = None) -> float:
    """Energy (duration-weighted) average of levels in dB; -inf for no data."""
    levels = list(levels_db)
    weights = [1.0] * len(levels) if durations_s is None else list(durations_s)
    total = sum(weights)
    if not levels or total <= 0:
        return -math.inf
    energy = sum(w * 10.0 ** (level / 10.0) for level, w in zip(levels, weights, strict=True))
    return 10.0 * math.log10(energy / total) if energy > 0 else -math.inf


# ---------------------------------------------------------------------------
# Time helpers
# ---------------------------------------------------------------------------


# ---------------------------------------------------------------------------
# Site data helpers
# ---------------------------------------------------------------------------


def only_site(data: SiteData, site_id: str) -> SiteData:
    """Drop anything that belongs to another site (the shell should not send it; rules do not trust that)."""
    if data.filtered_for == site_id:
        return data
    # Checked in C (map over attrgetter): the site's minutes of sound are every look's largest input.
    mixed = [name for name in _PER_SITE if not all(map(site_id.__eq__, map(_SITE_OF, getattr(data, name))))]
    if not mixed:
        # Nothing of another site: the same records, marked, their sound not grouped again.
        same = copy.copy(data)
        object.__setattr__(same, "filtered_for", site_id)
        return same
    kept: dict[str, Any] = {
        name: tuple(r for r in getattr(data, name) if r.site == site_id) for name in mixed
    }
    return replace(data, **kept, filtered_for=site_id)


_SITE_OF = attrgetter("site")

# A reading's optional value is given (not None): filter(is_given, map(attrgetter(...), records)) in C.
is_given = partial(is_not, None)


# SiteData's fields that hold records of a site
_PER_SITE = (
    "sound",
    "light",
    "weather",
    "turbidity",
    "blast_notices",
    "blasts",
    "trucks",
    "work",
    "temporary_lighting",
    "other_events",
    "seismic",
)


def sensors_of(site: SiteContext, kind: SensorKind, boundary_only: bool = False) -> dict[str, SensorInfo]:
    return {
        sensor_id: info
        for sensor_id, info in sorted(site.sensors.items())
        if info.kind == kind and (info.at_boundary or not boundary_only)
    }


def sensor_label(info: SensorInfo) -> str:
    """How a clerk reads a sensor: 'boundary meter n2 (north fence)'."""
    place = {
        "boundary": "boundary",
        "conveyor": "conveyor-parcel boundary",
        "sky": "sky-facing",
        "site": "on-site",
        "buffer_line": "buffer-line",
        "reference": "reference",
        "structure": "structure",
    }.get(info.placement.value, info.placement.value)
    noun = {SensorKind.SOUND: "meter", SensorKind.SEISMOGRAPH: "seismograph"}.get(info.kind, "sensor")
    where = f" ({info.location})" if info.location else ""
    return f"{place} {noun} {info.id}{where}"


def make_finding(
    site: SiteContext,
    standard: Standard,
    kind: FindingKind,
    start: datetime,
    end: datetime,
    summary: str,
    *,
    sensors: tuple[str, ...] = (),
    measurements: tuple[Measurement, ...] = (),
    exemptions: tuple[str, ...] = (),
    refs: tuple[str, ...] = (),
    completeness: float = 1.0,
    details: dict[str, Any] | None = None,
) -> Finding:
    """Every finding cites the standard's section from the profile, never one written in code."""
    return Finding(
        site=site.id,
        standard=standard.key,
        section=standard.section,
        kind=kind,
        start=start.astimezone(UTC),
        end=end.astimezone(UTC),
        timezone=site.timezone,
        summary=summary,
        sensors=sensors,
        measurements=measurements,
        exemptions=exemptions,
        refs=refs,
        completeness=max(0.0, min(1.0, completeness)),
        details=_with_considered(standard, details or {}),
    )


def _with_considered(standard: Standard, details: dict[str, Any]) -> dict[str, Any]:
    """The standard's profile-level ``considered`` first, then what the rule itself adds."""
    own = list(details.get("considered", ()))
    if not standard.considered and not own:
        return dict(details)
    return {**details, "considered": list(dict.fromkeys([*standard.considered, *own]))}


def fmt_db(value: float, limit: float | None = None) -> str:
    """A level as every surface prints it (rules.quantities): "84.1" for 84.05, as the notice's facts."""
    return number_text(value, "dB", limit)


def fmt_limit(value: float) -> str:
    return f"{value:g}"
