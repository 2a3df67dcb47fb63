"""Test helpers shared by several test modules (from tests/monitor/notify/test_notices.py)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from monitor.config import Config, SiteConfig, parse_config
from monitor.journal.store import Store
from rules.model import (
    Blast,
    Finding,
    FindingKind,
    Measurement,
    SoundLevels,
    TruckPassage,
    WorkKind,
    WorkPeriod,
)
from rules.profile import Profile, load_profile

TZ = ZoneInfo("America/Chicago")


SITE = "quarry"


CONFIG = """
[storage]
path = "{db}"

[alerts]
min_gap_s = 600
max_attempts = {max_attempts}
retry_base_s = 2
retry_max_s = 60

[[sites]]
id = "quarry"
name = "Dovre Quarry"
operator = "Acme Aggregates LLC"
timezone = "America/Chicago"
latitude = 45.27
longitude = -91.62
profile = "dovre"
[[sites.gates]]
id = "g1"
[[sites.sensors]]
id = "n1"
kind = "sound"
location = "north boundary"
gates = ["g1"]
[[sites.sensors]]
id = "n2"
kind = "sound"
location = "east boundary"
"""


def make_config(db: Path, recipients: str = "", max_attempts: int = 3) -> Config:
    return parse_config(CONFIG.format(db=db, max_attempts=max_attempts) + recipients, "test.toml")


def local(*args: int) -> datetime:
    """A site-local wall time (America/Chicago) as UTC."""
    return datetime(*args, tzinfo=TZ).astimezone(UTC)  # type: ignore[misc]


def violation(
    start: datetime,
    sensor: str = "n1",
    value: float = 84.2,
    standard: str = "noise",
    section: str = "6.D",
    exemptions: Sequence[str] = (),
    completeness: float = 1.0,
    measurement: Measurement | None = None,
) -> Finding:
    """A one-minute noise VIOLATION finding as rules/noise.py words it."""
    return Finding(
        site=SITE,
        standard=standard,
        section=section,
        kind=FindingKind.VIOLATION,
        start=start,
        end=start + timedelta(minutes=1),
        timezone="America/Chicago",
        summary=f"Noise at meter {sensor} averaged {value:.1f} dB(A) over "
        f"{start.astimezone(TZ):%H:%M}-{(start + timedelta(minutes=1)).astimezone(TZ):%H:%M} local, "
        f"above the 80 dB limit (section {section})",
        sensors=(sensor,),
        measurements=(measurement or Measurement("LAeq,1min", value, 80.0, "dB(A)"),),
        exemptions=tuple(exemptions),
        completeness=completeness,
        details={"metric": "LAeq", "weather_affected_s": 0.0, "judged": True},
    )


def minutes(first: datetime, count: int, **kwargs: Any) -> list[Finding]:
    return [violation(first + timedelta(minutes=i), **kwargs) for i in range(count)]


def store_findings(store: Store, findings: Sequence[Finding], now: datetime) -> list[Finding]:
    with store.batch():
        for f in findings:
            store.append_finding(f, now)
    return list(findings)


def site_and_profile(config: Config) -> tuple[SiteConfig, Profile]:
    site = config.site(SITE)
    assert site is not None
    return site, load_profile(site.profile, site.agreement)


def add_sample_sound(
    store: Store,
    start: datetime,
    end: datetime,
    loud: tuple[datetime, datetime],
    gap: tuple[datetime, datetime] | None = None,
    sensor: str = "n1",
) -> None:
    """Per-second levels: ~62 dB(A) background, ~84 dB(A) during ``loud``, nothing during ``gap``."""
    import math

    with store.batch():
        ts = start
        i = 0
        while ts < end:
            if gap is None or not gap[0] <= ts < gap[1]:
                base = 84.0 if loud[0] <= ts < loud[1] else 62.0
                level = base + 2.5 * math.sin(i / 7.0) + 1.2 * math.sin(i / 2.3)
                store.append_sound(
                    SoundLevels(SITE, sensor, ts, 1.0, level, level + 4, level + 20),
                    source="levels",
                    late=False,
                    now=ts,
                )
            ts += timedelta(seconds=1)
            i += 1


def add_sample_events(
    store: Store, truck_at: datetime, blast_at: datetime, work: tuple[datetime, datetime]
) -> None:
    iso = lambda t: t.isoformat().replace("+00:00", "Z")  # noqa: E731
    with store.batch():
        store.append_event(
            TruckPassage(SITE, "t-1", truck_at, "g1", "in", "truck-17"),
            {"id": "t-1", "ts": iso(truck_at), "gate": "g1", "direction": "in", "truck_id": "truck-17"},
            truck_at,
        )
        store.append_event(Blast(SITE, "b-7", blast_at), {"blast_id": "b-7", "ts": iso(blast_at)}, blast_at)
        store.append_event(
            WorkPeriod(SITE, "w-1", work[0], work[1], WorkKind.REPAIR),
            {"id": "w-1", "start": iso(work[0]), "end": iso(work[1]), "kind": "repair"},
            work[0],
        )
