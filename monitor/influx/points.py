"""InfluxDB points: one function per measurement of ``monitor.influx.schema.MEASUREMENTS``.

The pipeline says what happened (a sound period, a finding, an alert ...); the shape of
its time-series point (tags, fields, time) is decided here and nowhere else, the way
Telegraf's ``plugins/serializers/influx`` keeps serialisation apart from the inputs.
Each function returns one line of line protocol, or None when the point would carry no
field (every field None): InfluxDB has no such point.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, ParamSpec, Protocol

from monitor.influx.client import line
from monitor.journal.chain_kinds import SOUND_FIELDS
from monitor.journal.store import event_kind
from monitor.wire.protocol import format_ts
from rules.model import (
    Blast,
    Event,
    Finding,
    LightSummary,
    SensorStatus,
    SoundLevels,
    TemporaryLighting,
    TruckPassage,
    TurbidityReading,
    WeatherReading,
    WorkPeriod,
    event_span,
)
from rules.times import stored_time

P = ParamSpec("P")


class WritePoint(Protocol):
    """Queue the point ``make(*args)`` makes; made only when there is an outbox to queue it in."""

    def __call__(self, make: Callable[P, str | None], /, *args: P.args, **kwargs: P.kwargs) -> None: ...


def _id_tag(record_id: str) -> str:
    """A record's id as a tag value. The id is a tag so that records sharing their time (two
    findings of a minute, two trucks at a gate) are points of their own: InfluxDB keeps one
    point per series and time, and the last of two such lines overwrote the first. A trailing
    backslash cannot end a tag value in line protocol; it is written as ``%5C``."""
    return record_id[:-1] + "%5C" if record_id.endswith("\\") else record_id


def _point(
    measurement: str, tags: Mapping[str, str], fields: Mapping[str, Any], ts: datetime, offset_ns: int = 0
) -> str | None:
    clean = {k: v for k, v in fields.items() if v is not None}
    return line(measurement, tags, clean, ts, offset_ns=offset_ns) if clean else None


def sound(levels: SoundLevels, late: bool) -> str | None:
    fields = {k: getattr(levels, k) for k in SOUND_FIELDS}
    return _point(
        "sound",
        {"site": levels.site, "sensor": levels.sensor},
        {**fields, "duration_s": levels.duration_s, "late": late},
        levels.ts,
    )


def light(reading: LightSummary, late: bool) -> str | None:
    fields = {
        "lux_mean": reading.lux_mean,
        "lux_min": reading.lux_min,
        "lux_max": reading.lux_max,
        "duration_s": reading.duration_s,
        "late": late,
    }
    return _point("light", {"site": reading.site, "sensor": reading.sensor}, fields, reading.ts)


def weather(reading: WeatherReading, late: bool) -> str | None:
    fields = {
        "wind_speed_ms": reading.wind_speed_ms,
        "rain": reading.rain,
        "rain_mm_h": reading.rain_mm_h,
        "duration_s": reading.duration_s,
        "late": late,
    }
    return _point("weather", {"site": reading.site, "sensor": reading.sensor}, fields, reading.ts)


def turbidity(reading: TurbidityReading, late: bool) -> str | None:
    fields = {"ntu": reading.ntu, "duration_s": reading.duration_s, "late": late}
    return _point("turbidity", {"site": reading.site, "sensor": reading.sensor}, fields, reading.ts)


def reading(record: LightSummary | WeatherReading | TurbidityReading, late: bool) -> str | None:
    """The point of a light, weather or turbidity reading."""
    if isinstance(record, LightSummary):
        return light(record, late)
    if isinstance(record, WeatherReading):
        return weather(record, late)
    return turbidity(record, late)


def events(event: Event) -> str | None:
    fields: dict[str, Any] = {"summary": f"{type(event).__name__} {event.id}"}
    if isinstance(event, TruckPassage):
        fields.update(gate=event.gate, direction=event.direction)
    if isinstance(event, Blast):
        fields["safety_reason"] = event.safety_reason
    if isinstance(event, WorkPeriod | TemporaryLighting):
        fields["end"] = format_ts(event.end)
    tags = {"site": event.site, "kind": event_kind(event), "id": _id_tag(event.id)}
    return _point("events", tags, fields, event_span(event).start)


def findings(finding: Finding) -> str | None:
    first = finding.measurements[0] if finding.measurements else None
    fields = {
        "section": finding.section,
        "summary": finding.summary,
        "sensors": ",".join(finding.sensors),
        "value": None if first is None else first.value,
        "limit": None if first is None else first.limit,
        "end": format_ts(finding.end),
        "completeness": finding.completeness,
    }
    tags = {
        "site": finding.site,
        "standard": finding.standard,
        "kind": finding.kind.value,
        "id": _id_tag(finding.id),
    }
    return _point("findings", tags, fields, finding.start)


def alerts(site: str, body: Mapping[str, Any]) -> str | None:
    """The point of a raised alert, from its published body (``AlertBook``)."""
    tags = {
        "site": site,
        "audience": ",".join(body["audiences"]),
        "kind": body["kind"],
        "id": _id_tag(body["id"]),
    }
    fields = {"message": body["message"], "severity": body["severity"]}
    return _point("alerts", tags, fields, stored_time(body["ts"]))


# A rejection's point is moved this many nanoseconds at most past its time (see ``rejections``).
REJECTION_SPREAD_NS = 1_000_000


def rejections(site: str, topic: str, reason: str, ts: datetime, rejection_id: int) -> str | None:
    """The point of a rejected message; ``rejection_id`` is its row in the store's ``rejections``.

    Rejections of one instant (a burst within one microsecond; with the data clock, every message
    rejected before the next accepted reading) are one series at one time, and InfluxDB keeps the
    last point of a series and time. A tag per rejection would make each a series of its own (a
    flood of bad messages, a flood of series), so the point's time is moved instead: by the row id
    modulo ``REJECTION_SPREAD_NS`` in nanoseconds, less than a millisecond. A million rejections
    of one instant are each a point; a line written again (at least once) is the same point."""
    if rejection_id < 0:
        raise ValueError(f"rejection_id must be a row id (0 or more), got {rejection_id}")
    fields = {"topic": topic, "reason": reason}
    return _point("rejections", {"site": site}, fields, ts, rejection_id % REJECTION_SPREAD_NS)


def sensor_health(
    site: str, sensor: str, online: bool, ts: datetime, gap_s: float | None = None
) -> str | None:
    """An offline/online transition (``gap_s``: how long it was offline)."""
    return _point("sensor_health", {"site": site, "sensor": sensor}, {"online": online, "gap_s": gap_s}, ts)


def heartbeat(status: SensorStatus) -> str | None:
    """A sensor's status message: also a ``sensor_health`` point."""
    fields = {"online": True, "battery_pct": status.battery_pct, "clock_offset_s": status.clock_offset_s}
    return _point("sensor_health", {"site": status.site, "sensor": status.sensor}, fields, status.ts)


# Measurement name -> the function(s) that make its points (checked against the schema by tests).
BY_MEASUREMENT: dict[str, tuple[Callable[..., str | None], ...]] = {
    "sound": (sound,),
    "light": (light,),
    "weather": (weather,),
    "turbidity": (turbidity,),
    "events": (events,),
    "findings": (findings,),
    "alerts": (alerts,),
    "rejections": (rejections,),
    "sensor_health": (sensor_health, heartbeat),
}
