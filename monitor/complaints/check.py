"""A complaint checked against the record at once: what the record holds around its time and place.

For the complaint's time widened by ``MARGIN`` either side, from the store: each monitor's
levels (sound: every clock minute's energy-average LAeq and the highest LAFmax; light: the
highest illuminance), nearest first when the complaint gives a point on the site plan and the
monitors have positions (``Place``); the violation episodes as ``rules.episodes`` computed them
(read through ``monitor.journal.episodes.site_episodes``, the one source every surface
renders) with the notices that tell them; exempt exceedances and the other findings; blasts,
temporary lighting, work and trucks on record. ``rules.complaints.judge`` decides the
verdict. The result is plain JSON (stored with the complaint, chained) in which every number
names its source.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from monitor import geo
from monitor.config import SensorConfig, SiteConfig
from monitor.journal import queries
from monitor.journal.episodes import site_episodes
from monitor.wire.canonical import from_us, to_us
from monitor.wire.protocol import format_ts
from rules.complaints import MonitorLevels, RecordItem, judge
from rules.model import FindingKind, SensorKind
from rules.quantities import quantity_text
from rules.times import local_moment, span_text

MARGIN = timedelta(minutes=15)
NONE: frozenset[str] = frozenset()
NEAREST = 3  # monitors of each kind considered when the complaint and the monitors have plan points
_LIGHT_WORDS = ("light", "lighting", "lux")
_BLAST_WORDS = ("blast", "overpressure", "airblast", "vibration")


def _categories_of(unit: str, words: str) -> tuple[frozenset[str], frozenset[str]]:
    """The complaint kinds a finding of this unit and standard speaks to, and those it shows:
    a blasting finding is context beside a noise complaint (blasts are exempt from 6.D)."""
    text = words.lower()
    if any(w in text for w in _BLAST_WORDS):
        return frozenset({"blast", "noise"}), frozenset({"blast"})
    if unit in ("lx", "lux") or any(w in text for w in _LIGHT_WORDS):
        return frozenset({"light"}), frozenset({"light"})
    if unit.startswith("dB"):
        return frozenset({"noise"}), frozenset({"noise"})
    return frozenset({"other"}), frozenset({"other"})


@dataclass(frozen=True, slots=True)
class Place:
    """Where a complaint was noticed: a point clicked on the site plan (``position``, WGS84
    latitude and longitude, measured to the monitors' ``position``) or, for older complaints,
    metres typed on the operator's plan (``plan``, measured to the monitors' ``plan``)."""

    plan: tuple[float, float] | None = None
    position: geo.LatLon | None = None


def _distance(sensor: SensorConfig, place: Place | None) -> float | None:
    if place is None:
        return None
    if place.position is not None and sensor.position is not None:
        return geo.great_circle_m(place.position, sensor.position)
    if place.plan is not None and sensor.plan is not None:
        return math.hypot(sensor.plan[0] - place.plan[0], sensor.plan[1] - place.plan[1])
    return None


def _nearest(sensors: Sequence[SensorConfig], plan: Place | None) -> list[SensorConfig]:
    """Nearest first; with distances known, the ``NEAREST`` closest (the others are listed, not judged)."""
    placed = sorted(
        (s for s in sensors if _distance(s, plan) is not None), key=lambda s: _distance(s, plan) or 0
    )
    if placed:
        return placed[:NEAREST]
    return list(sensors)


def _monitors(
    conn: sqlite3.Connection,
    site: SiteConfig,
    start: datetime,
    end: datetime,
    plan: Place | None,
) -> tuple[list[MonitorLevels], list[dict[str, Any]]]:
    tz = site.timezone
    window_s = (end - start).total_seconds()
    span = span_text(start, end, tz, with_date=True)
    levels: list[MonitorLevels] = []
    shown: list[dict[str, Any]] = []
    sound = [s for s in site.sensors if s.kind is SensorKind.SOUND]
    light = [s for s in site.sensors if s.kind is SensorKind.LIGHT]
    minutes: dict[str, list[sqlite3.Row]] = {}
    for row in queries.sound_minutes(conn, site.id, to_us(start), to_us(end)):
        minutes.setdefault(row["sensor"], []).append(row)
    for sensor in _nearest(sound, plan):
        rows = minutes.get(sensor.id, [])
        seconds = float(sum(r["seconds"] for r in rows))
        top = max(rows, key=lambda r: float(r["laeq"]), default=None)
        highest = None if top is None else float(top["laeq"])
        lafmax = max((float(r["lafmax"]) for r in rows), default=None)
        monitor = MonitorLevels(
            sensor.id, "sound", seconds, window_s, highest, "dB(A)", _distance(sensor, plan)
        )
        levels.append(monitor)
        minute_at = None if top is None else from_us(int(top["minute"]) * 60_000_000)
        shown.append(
            {
                "sensor": sensor.id,
                "kind": "sound",
                "placement": sensor.placement.value,
                "location": sensor.location,
                "distance_m": None if monitor.distance_m is None else round(monitor.distance_m),
                "seconds": int(seconds),
                "window_s": int(window_s),
                "covers": monitor.covers,
                "highest_laeq_1min": None if highest is None else quantity_text(highest, "dB(A)"),
                "highest_minute": None if minute_at is None else local_moment(minute_at, tz),
                "highest_lafmax": None if lafmax is None else quantity_text(lafmax, "dB(A)"),
                "source": (
                    f"sound records of {sensor.id}, {span}: each clock minute's energy average of the"
                    " per-second LAeq, and the highest per-second LAFmax"
                ),
            }
        )
    light_rows = (
        queries.readings_of(conn, site.id, "light", [s.id for s in light], start, end) if light else []
    )
    for sensor in _nearest(light, plan):
        mine = [r for r in light_rows if r["sensor"] == sensor.id]
        seconds = float(sum(float(r["duration_s"]) for r in mine))
        values = [float(v) for r in mine if (v := json.loads(r["data"]).get("lux_max")) is not None]
        highest = max(values, default=None)
        monitor = MonitorLevels(sensor.id, "light", seconds, window_s, highest, "lx", _distance(sensor, plan))
        levels.append(monitor)
        shown.append(
            {
                "sensor": sensor.id,
                "kind": "light",
                "placement": sensor.placement.value,
                "location": sensor.location,
                "distance_m": None if monitor.distance_m is None else round(monitor.distance_m),
                "seconds": int(seconds),
                "window_s": int(window_s),
                "covers": monitor.covers,
                "highest_lux": None if highest is None else quantity_text(highest, "lx"),
                "source": f"light records of {sensor.id}, {span}: the highest lux_max of its summaries",
            }
        )
    return levels, shown


def _event_text(kind: str, ts: datetime, end: datetime | None, data: Mapping[str, Any], tz: str) -> str:
    name = str(data.get("blast_id") or data.get("id") or "")
    label = kind.replace("-", " ") + (f" {name}" if name else "")
    when = (
        f"at {local_moment(ts, tz)}" if end is None or end <= ts else span_text(ts, end, tz, with_date=True)
    )
    text = f"{label} {when}"
    numbers = [
        f"{k} {v:g}"
        for k, v in sorted(data.items())
        if isinstance(v, int | float) and not isinstance(v, bool) and k not in ("v", "duration_s")
    ]
    if data.get("safety_reason"):
        numbers.append(f"safety reason: {data['safety_reason']}")
    return text + (f" ({'; '.join(numbers)})" if numbers else "") + " [events on record]"


def check_complaint(
    conn: sqlite3.Connection,
    site: SiteConfig,
    profile: Any,
    what: str,
    start: datetime,
    end: datetime,
    plan: Place | None,
    now: datetime,
) -> dict[str, Any]:
    """What the record says about a complaint of kind ``what`` over [start, end] at ``plan``."""
    tz = site.timezone
    first, last = start - MARGIN, end + MARGIN
    titles = profile.titles
    monitors, shown = _monitors(conn, site, first, last, plan)
    items: list[RecordItem] = []
    notices: dict[str, None] = {}
    for told in site_episodes(conn, site.id, first, last, profile.episode_gap_s, as_of=now):
        facts = told.facts
        unit = facts.peak.unit if facts.peak is not None else ""
        text = told.to_json(tz, titles)["text"]
        speaks, shows = _categories_of(unit, facts.standard)
        items.append(RecordItem("episode", f"violation episode: {text}", speaks, shows))
        if told.notice_id:
            notices[told.notice_id] = None
    other = [FindingKind.EXEMPT_EXCEEDANCE.value, FindingKind.UNREPORTED_BLAST.value]
    other += [FindingKind.SAFETY_EXCEPTION.value, FindingKind.UNRELIABLE.value]
    for row in queries.current_findings(
        conn, site=site.id, start=first - timedelta(hours=1), end=last, kinds=other
    ):
        f_start, f_end = from_us(row["start_us"]), from_us(row["end_us"])
        if f_end < first or f_start >= last:
            continue
        data = json.loads(row["data"])
        units = [str(m.get("unit") or "") for m in data.get("measurements", []) if isinstance(m, Mapping)]
        kind = str(row["kind"])
        label = {
            "exempt_exceedance": "exempt exceedance",
            "unreliable": "exceedance on weather-affected data",
        }
        text = (
            f"{label.get(kind, kind.replace('_', ' '))} ({row['section']}), {span_text(f_start, f_end, tz)}"
        )
        text += f": {data.get('summary', '')} [finding {row['id']}]"
        speaks, shows = _categories_of(units[0] if units else "", str(row["standard"]))
        if kind not in ("exempt_exceedance", "unreported_blast", "safety_exception"):
            shows = NONE
        items.append(RecordItem(kind, text, speaks, shows))
    for row in queries.events_overlapping(conn, site.id, first, last):
        kind = str(row["kind"])
        ts = from_us(row["ts_us"])
        end_at = None if row["end_us"] is None else from_us(row["end_us"])
        data = json.loads(row["data"])
        text = _event_text(kind, ts, end_at, data, tz)
        if kind == "blast":  # shows a blast; beside a noise complaint it is context (exempt activity)
            items.append(RecordItem("blast", text, frozenset({"blast", "noise"}), frozenset({"blast"})))
        elif kind == "temporary-lighting":
            items.append(RecordItem("light", text, frozenset({"light"}), frozenset({"light"})))
        elif kind in ("work", "truck"):
            items.append(RecordItem("event", text, frozenset({"noise", "dust"}), NONE))
        elif kind == "blast-notice":
            items.append(RecordItem("event", text, frozenset({"blast"}), NONE))
    for notice_id in notices:
        items.append(
            RecordItem("notice", f"notice {notice_id}", frozenset({"noise", "blast", "light"}), NONE)
        )
    judgement = judge(what, monitors, items)
    seq, head = queries.chain_head(conn, site.id)
    return {
        "verdict": judgement.verdict.value,
        "text": judgement.text,
        "basis": list(judgement.basis),
        "window": {
            "from": format_ts(first),
            "to": format_ts(last),
            "span": span_text(first, last, tz, with_date=True),
            "margin_s": int(MARGIN.total_seconds()),
        },
        "monitors": shown,
        "record": [{"kind": i.kind, "text": i.text, "shows": what in i.shows} for i in items],
        "notices": list(notices),
        "checked": format_ts(now),
        "checked_local": local_moment(now, tz),
        "chain_seq": seq,
        "chain_head": head,
    }
