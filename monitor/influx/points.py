"""InfluxDB points: one function per measurement of ``monitor.influx.schema.MEASUREMENTS``.

The pipeline says what happened (a sound period, a finding, an alert ...); the shape of
its time-series point (tags, fields, time) is decided here and nowhere else, the way
Telegraf's ``plugins/serializers/influx`` keeps serialisation apart from the inputs.
Each function returns one line of line protocol, or None when the point would carry no
field (every field None): InfluxDB has no such point.
"""

from __future__ import annotations

import hashlib
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


# A record's point is moved into its millisecond by this many nanoseconds at most (``spread_ns``).
SPREAD_NS = 1_000_000


def spread_ns(identity: int | str) -> int:
    """How far (in nanoseconds, under a millisecond) a record's point is moved into its millisecond.

    InfluxDB keeps one point per series and time: two records of one measurement, tag set and
    time (two findings of one window, two trucks at a gate, a burst of rejections) were one
    point, the last replacing the others. A tag per record would keep them apart but make each
    record a series of its own, and InfluxDB 1.x holds its series index in memory and refuses
    writes past ``max-series-per-database`` (a million by default); its guidance is never to
    put unique ids in tags. So the record's identity moves the point's time instead, the same
    on every run and machine, so that a record written again (at least once, or a finding's
    revision: the same id) lands on its earlier point and overwrites it.

    An int (a row id) gives itself modulo ``SPREAD_NS``: a million consecutive rows never share
    an offset. A str (the id of an event, a finding, an alert) gives the first 8 bytes of its
    SHA-256 as an integer, modulo ``SPREAD_NS`` (Python's ``hash`` differs between runs). Two
    such records of one series and millisecond share an offset with probability 1 in
    1,000,000 (k of them: about k(k-1)/2 in 1,000,000), and then InfluxDB keeps the later of
    the two; the store keeps both.
    """
    if isinstance(identity, int):
        if identity < 0:
            raise ValueError(f"a row id is 0 or more, got {identity}")
        return identity % SPREAD_NS
    digest = hashlib.sha256(identity.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % SPREAD_NS


def _point(
    measurement: str,
    tags: Mapping[str, str],
    fields: Mapping[str, Any],
    ts: datetime,
    identity: int | str | None = None,
) -> str | None:
    """The point, at ``ts``; with an ``identity``, at the start of ``ts``'s millisecond plus
    ``spread_ns(identity)``: the point's time read to the millisecond is the record's."""
    clean = {k: v for k, v in fields.items() if v is not None}
    if not clean:
        return None
    if identity is None:
        return line(measurement, tags, clean, ts)
    millisecond = ts.replace(microsecond=ts.microsecond - ts.microsecond % 1000)
    return line(measurement, tags, clean, millisecond, offset_ns=spread_ns(identity))


def sound(levels: SoundLevels, late: bool) -> str | None:
    fields: dict[str, Any] = {k: getattr(levels, k) for k in SOUND_FIELDS}
    if levels.overload:  # the meter was overloaded: the levels are lower bounds (IEC 61672-1 5.11)
        fields["overload"] = True
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
    fields: dict[str, Any] = {"id": event.id, "summary": f"{type(event).__name__} {event.id}"}
    if isinstance(event, TruckPassage):
        fields.update(gate=event.gate, direction=event.direction)
    if isinstance(event, Blast):
        fields["safety_reason"] = event.safety_reason
    if isinstance(event, WorkPeriod | TemporaryLighting):
        fields["end"] = format_ts(event.end)
    tags = {"site": event.site, "kind": event_kind(event)}
    return _point("events", tags, fields, event_span(event).start, event.id)


def findings(finding: Finding) -> str | None:
    first = finding.measurements[0] if finding.measurements else None
    fields = {
        "id": finding.id,
        "section": finding.section,
        "summary": finding.summary,
        "sensors": ",".join(finding.sensors),
        "value": None if first is None else first.value,
        "limit": None if first is None else first.limit,
        "end": format_ts(finding.end),
        "completeness": finding.completeness,
    }
    tags = {"site": finding.site, "standard": finding.standard, "kind": finding.kind.value}
    return _point("findings", tags, fields, finding.start, finding.id)


def alerts(site: str, body: Mapping[str, Any]) -> str | None:
    """The point of a raised alert, from its published body (``AlertBook``)."""
    tags = {"site": site, "audience": ",".join(body["audiences"]), "kind": body["kind"]}
    fields = {"id": body["id"], "message": body["message"], "severity": body["severity"]}
    return _point("alerts", tags, fields, stored_time(body["ts"]), body["id"])


def rejections(site: str, topic: str, reason: str, ts: datetime, rejection_id: int) -> str | None:
    """The point of a rejected message; ``rejection_id`` is its row in the store's ``rejections``.

    Rejections of one instant (a burst within one microsecond; with the data clock, every message
    rejected before the next accepted reading) are one series at one time, and a flood of bad
    messages must not be a flood of series: the point is moved by ``spread_ns(rejection_id)``."""
    fields = {"topic": topic, "reason": reason}
    return _point("rejections", {"site": site}, fields, ts, rejection_id)


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
