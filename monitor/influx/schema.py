"""The time-series schema the daemon writes (InfluxDB v1 and v2 alike).

One place: the Influx writer builds points from it, the Grafana dashboard test
checks every query against it, and docs/ARCHITECTURE.md documents it.

A record's id (events, findings, alerts) is a field, never a tag: a tag per record is a
series per record, and InfluxDB 1.x refuses writes past a million series. Records of one
series and time are kept apart by their points' times instead (``points.spread_ns``).
"""

from __future__ import annotations

from dataclasses import dataclass

from monitor.journal.chain_kinds import SOUND_FIELDS


@dataclass(frozen=True, slots=True)
class Measurement:
    name: str
    tags: tuple[str, ...]
    fields: tuple[str, ...]
    description: str


MEASUREMENTS: dict[str, Measurement] = {
    m.name: m
    for m in (
        Measurement(
            "sound",
            ("site", "sensor"),
            (*SOUND_FIELDS, "duration_s", "late", "overload"),
            "Per-period sound levels in dB (period start is the point time); overload true only where"
            " the meter was overloaded (the levels then lower bounds).",
        ),
        Measurement(
            "light",
            ("site", "sensor"),
            ("lux_mean", "lux_min", "lux_max", "duration_s", "late"),
            "Illuminance summary in lux.",
        ),
        Measurement(
            "weather",
            ("site", "sensor"),
            ("wind_speed_ms", "rain", "rain_mm_h", "duration_s", "late"),
            "Wind and rain at the site's weather station.",
        ),
        Measurement(
            "turbidity",
            ("site", "sensor"),
            ("ntu", "duration_s", "late"),
            "Water turbidity in NTU (land-disturbing profiles).",
        ),
        Measurement(
            "events",
            ("site", "kind"),
            ("id", "summary", "gate", "direction", "safety_reason", "end"),
            "Operator events: blasts, blast notices, trucks, work periods, temporary lighting.",
        ),
        Measurement(
            "findings",
            ("site", "standard", "kind"),
            ("id", "section", "summary", "sensors", "value", "limit", "end", "completeness"),
            "Compliance findings (violations, exempt exceedances, warnings, ...); a revision"
            " overwrites its finding's point.",
        ),
        Measurement(
            "alerts",
            ("site", "audience", "kind"),
            ("id", "message", "severity"),
            "Alerts raised for the town and the operator.",
        ),
        Measurement(
            "rejections",
            ("site",),
            ("topic", "reason"),
            "Messages rejected at the boundary, with the reason.",
        ),
        Measurement(
            "sensor_health",
            ("site", "sensor"),
            ("online", "gap_s", "battery_pct", "clock_offset_s"),
            "Sensor heartbeats, offline/online transitions and gaps.",
        ),
    )
}
