"""Builders for rule tests: a Dovre site, readings and events in a few words. No fixtures, no clock."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from rules.model import (
    Blast,
    BlastNotice,
    Finding,
    LightSummary,
    Placement,
    SensorInfo,
    SensorKind,
    SiteContext,
    SiteData,
    SoundLevels,
    TemporaryLighting,
    TruckPassage,
    WeatherReading,
)
from rules.profile import Profile, load_profile

CHICAGO = "America/Chicago"
DOVRE = load_profile("dovre")

SENSORS = {
    "n1": SensorInfo("n1", SensorKind.SOUND, Placement.BOUNDARY, "north fence", gates=("north",)),
    "n2": SensorInfo("n2", SensorKind.SOUND, Placement.BOUNDARY, "south fence", gates=("south",)),
    "c1": SensorInfo("c1", SensorKind.SOUND, Placement.CONVEYOR, "conveyor parcel 7"),
    "w1": SensorInfo("w1", SensorKind.WEATHER, Placement.SITE),
    "l1": SensorInfo("l1", SensorKind.LIGHT, Placement.BOUNDARY, "east fence"),
    "l2": SensorInfo("l2", SensorKind.LIGHT, Placement.SITE, "plant yard"),
    "s1": SensorInfo("s1", SensorKind.SKY, Placement.SKY),
}


def make_site(
    site_id: str = "pit1",
    timezone: str = CHICAGO,
    latitude: float = 45.27,
    longitude: float = -91.62,
    preexisting: bool = False,
) -> SiteContext:
    return SiteContext(site_id, "Dovre pit", timezone, latitude, longitude, preexisting, SENSORS)


SITE = make_site()
TROMSO = make_site("tromso", "Europe/Oslo", 69.65, 18.96)


def at(text: str, timezone: str = CHICAGO) -> datetime:
    """Local wall time 'YYYY-MM-DD HH:MM[:SS]' in the zone -> aware UTC datetime."""
    return datetime.fromisoformat(text).replace(tzinfo=ZoneInfo(timezone)).astimezone(UTC)


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def seconds(
    sensor: str,
    start: datetime,
    count: int,
    laeq: float | Callable[[int], float] = 70.0,
    site: str = "pit1",
    peak: Callable[[int], float | None] | None = None,
    lasmax: Callable[[int], float | None] | None = None,
    skip: Sequence[int] = (),
) -> list[SoundLevels]:
    """One SoundLevels per second; ``laeq`` a constant or a function of the second's index."""
    records = []
    for i in range(count):
        if i in skip:
            continue
        level = laeq(i) if callable(laeq) else laeq
        records.append(
            SoundLevels(
                site=site,
                sensor=sensor,
                ts=start + timedelta(seconds=i),
                duration_s=1.0,
                LAeq=level,
                LAFmax=level + 3,
                LCpeak=(peak(i) if peak else None) or level + 15,
                LASmax=lasmax(i) if lasmax else level + 1,
                LZpeak=peak(i) if peak else None,
            )
        )
    return records


def blast(
    ts: datetime, blast_id: str = "b1", reason: str | None = None, site: str = "pit1", **kw: float
) -> Blast:
    return Blast(site, blast_id, ts, safety_reason=reason, **kw)  # type: ignore[arg-type]


def notice(blast_id: str, issued: datetime, planned: datetime, site: str = "pit1") -> BlastNotice:
    return BlastNotice(site, blast_id, issued, planned, ("town clerk",))


def truck(ts: datetime, gate: str = "north", truck_id: str = "t1", site: str = "pit1") -> TruckPassage:
    return TruckPassage(site, truck_id, ts, gate, "in", "T-17")


def wind(start: datetime, count: int, speed: float, rain: bool = False) -> list[WeatherReading]:
    return [
        WeatherReading("pit1", "w1", start + timedelta(seconds=10 * i), 10.0, speed, rain)
        for i in range(count)
    ]


def light(
    sensor: str,
    start: datetime,
    count: int,
    lux: float,
    step_s: float = 60.0,
    lux_max: float | None = None,
    burst: Callable[[int], tuple[float, ...]] | None = None,
    rate: float | None = None,
    site: str = "pit1",
) -> list[LightSummary]:
    return [
        LightSummary(
            site,
            sensor,
            start + timedelta(seconds=step_s * i),
            step_s,
            lux,
            lux * 0.9,
            lux if lux_max is None else lux_max,
            burst(i) if burst else (),
            rate,
        )
        for i in range(count)
    ]


def temporary(day_start: datetime, hours: float, period_id: str, site: str = "pit1") -> TemporaryLighting:
    return TemporaryLighting(site, period_id, day_start, day_start + timedelta(hours=hours), "crusher repair")


def with_overrides(**overrides: object) -> Profile:
    return load_profile("dovre", {k.replace("__", "."): v for k, v in overrides.items()})


def run(
    key: str,
    data: object,
    start: datetime,
    end: datetime,
    now: datetime | None = None,
    profile: Profile = DOVRE,
    site: SiteContext = SITE,
) -> list[Finding]:
    """Evaluate one standard of a profile over [start, end)."""
    from rules import RULES

    standard = profile.standard(key)
    assert isinstance(data, SiteData)
    return RULES[standard.rule].evaluate(site, standard, standard.params, data, start, end, now or end)


def kinds(findings: Sequence[Finding]) -> list[str]:
    return [f.kind.value for f in findings]


def merged(a: SiteData, b: SiteData) -> SiteData:
    """Two sites' data in one SiteData, as a shell that does not filter would pass it."""
    return SiteData(
        **{
            f.name: getattr(a, f.name) + getattr(b, f.name)
            for f in dataclasses.fields(SiteData)
            if f.init and f.name != "filtered_for"
        }
    )


def assert_rule_contract(
    rule_name: str,
    evaluate: Callable[[str, SiteContext, SiteData], list[Finding]],
    profile: Profile,
    sites: tuple[SiteContext, SiteContext],
    data: tuple[SiteData, SiteData],
    window: tuple[datetime, datetime],
) -> None:
    """What every rule promises, whatever its profile: findings of its standards only, citing
    their sections, in UTC, deterministic, and blind to other sites' data.

    ``sites`` and ``data`` are (own, other); each site's data gives its rule something to find.
    ``window`` is (earliest finding start allowed, end of the evaluated interval).
    """

    from rules import RULES

    rule = RULES[rule_name]
    assert rule.name == rule_name
    assert dataclasses.is_dataclass(rule.params_type)
    assert rule.params_type.__dataclass_params__.frozen  # type: ignore[attr-defined]
    rule.params_type()  # every param has a default
    standards = {s.key: s for s in profile.standards.values() if s.rule == rule_name}
    own_site, other_site = sites
    own, foreign = data
    earliest, end = window

    findings = evaluate(rule_name, own_site, own)
    assert findings, f"the test data should give {rule_name} something to find"
    for finding in findings:
        standard = standards[finding.standard]
        assert isinstance(finding, Finding) and finding.site == own_site.id
        assert finding.section == standard.section and f"section {standard.section}" in finding.summary
        assert earliest <= finding.start < end
        assert isinstance(finding.start, datetime) and finding.start.utcoffset() == timedelta(0)
        assert 0.0 <= finding.completeness <= 1.0

    # Deterministic: the same input gives the same findings and ids.
    again = evaluate(rule_name, own_site, own)
    assert again == findings and [f.id for f in again] == [f.id for f in findings]
    both = merged(own, foreign)
    # Another site's data changes nothing for this site ...
    assert evaluate(rule_name, own_site, both) == findings
    # ... although it has plenty to find for its own site.
    assert evaluate(rule_name, other_site, both) != []
