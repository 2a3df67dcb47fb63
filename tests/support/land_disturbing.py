"""Test helpers shared by several test modules (from tests/rules/test_land_disturbing.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from rules import RULES
from rules.model import (
    Finding,
    GenericEvent,
    Placement,
    SensorInfo,
    SensorKind,
    SiteContext,
    SiteData,
)
from rules.profile import Profile, load_profile

NEW_YORK = "America/New_York"


LAND = load_profile("land-disturbing")


SENSORS = {
    "t1": SensorInfo("t1", SensorKind.TURBIDITY, Placement.BUFFER_LINE, "creek, 25 % line"),
    "r1": SensorInfo("r1", SensorKind.TURBIDITY, Placement.REFERENCE, "creek, upstream"),
}


BOUNDARY = SensorInfo("b1", SensorKind.TURBIDITY, Placement.BOUNDARY, "outfall at the south line")


def tract_toml(
    profile: str = "land-disturbing",
    flags: str = "",
    sensors: Sequence[SensorInfo] = (*SENSORS.values(), BOUNDARY),
) -> str:
    """The Hill tract as a configuration's ``[[sites]]`` table (id "tract"): ``profile`` (a name
    or a town's copy), ``flags`` (its TOML line, or none) and a turbidity sensor read each minute
    at each of ``sensors`` (the 25 % line, upstream, the tract's boundary); the site of the
    daemon's and check-config's land-disturbing tests."""
    lines = [
        "[[sites]]",
        'id = "tract"',
        'name = "Hill tract"',
        'operator = "Grader Co"',
        f'timezone = "{NEW_YORK}"',
        "latitude = 35.78",
        "longitude = -78.64",
        f'profile = "{profile}"',
        flags,
    ]
    for sensor in sensors:
        lines += [
            "[[sites.sensors]]",
            f'id = "{sensor.id}"',
            f'kind = "{sensor.kind.value}"',
            f'placement = "{sensor.placement.value}"',
            f'location = "{sensor.location}"',
            "expected_period_s = 60",
        ]
    return "\n".join(lines) + "\n"


def site(flags: Mapping[str, Any] | None = None, site_id: str = "tract1") -> SiteContext:
    return SiteContext(site_id, "Hill tract", NEW_YORK, 35.78, -78.64, False, SENSORS, dict(flags or {}))


def at(text: str) -> datetime:
    """Local wall time 'YYYY-MM-DD HH:MM' at the site -> aware UTC."""
    return datetime.fromisoformat(text).replace(tzinfo=ZoneInfo(NEW_YORK)).astimezone(UTC)


def ev(kind: str, event_id: str, when: str, site_id: str = "tract1", **fields: Any) -> GenericEvent:
    return GenericEvent(site_id, event_id, kind, at(when), fields)


def records(*events: GenericEvent | None) -> SiteData:
    return SiteData(other_events=tuple(e for e in events if e is not None))


def run(
    key: str,
    data: SiteData,
    start: datetime,
    end: datetime,
    *,
    profile: Profile = LAND,
    where: SiteContext | None = None,
    now: datetime | None = None,
) -> list[Finding]:
    standard = profile.standard(key)
    return RULES[standard.rule].evaluate(
        where or site(), standard, standard.params, data, start, end, now or end
    )


def kinds(findings: Sequence[Finding]) -> list[str]:
    return [f.kind.value for f in findings]


def day(text: str) -> tuple[datetime, datetime]:
    """The whole local day."""
    start = at(f"{text} 00:00")
    return start, at((date.fromisoformat(text) + timedelta(days=1)).isoformat() + " 00:00")


def first_minute(text: str) -> tuple[datetime, datetime]:
    start = at(f"{text} 00:00")
    return start, start + timedelta(minutes=1)
