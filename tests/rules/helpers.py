"""Builders for rule tests: a Dovre site, readings and events in a few words. No fixtures, no clock."""

from __future__ import annotations

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
