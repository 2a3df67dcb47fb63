"""A site's compliance report for a period: the figures, each with its source, from the store.

Read once, then written as PDF and CSV by formats.py (the same ``Report`` value):

- completeness per sensor: seconds of data received against the period, the share of them
  judged (those inside the site's judged windows, table judged: counted in SQLite over the
  judging gaps, ``queries.unjudged_counts``), and the gaps with their causes: judging gaps,
  offline periods (the health records), calibration checks (flagged or not), weather-affected
  findings;
- per local day, at each boundary sound meter: LAeq, L10, L50, L90 and LAFmax, aggregated in
  SQLite (``queries.sound_histogram``: one pass, energy sums and a 0.1 dB histogram per meter);
- every violation episode (``monitor.journal.episodes.site_episodes``: the one set of facts),
  exempt exceedance and other finding of note; every blast with its window, notice and
  overpressure; lighting findings and the temporary-lighting days used of the year's allowance;
  the notices, their states and deadlines; the complaints and what the record said of each;
- the chain head (seq, head) the figures were computed from: an evidence bundle of the period
  verifies the records beneath them.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from monitor.config import SiteConfig
from monitor.journal import queries
from monitor.journal.episodes import site_episodes
from monitor.wire.canonical import from_us, to_us
from monitor.wire.protocol import format_ts
from rules.model import FindingKind, Placement, SensorKind
from rules.quantities import number_text
from rules.times import local_moment, span_text

PERCENTILES = (10, 50, 90)  # L10, L50, L90: the level exceeded 10 %, 50 %, 90 % of the seconds


@dataclass(frozen=True, slots=True)
class Period:
    start: datetime  # UTC, the first local midnight
    end: datetime  # UTC, exclusive
    first_day: date
    last_day: date  # inclusive
    label: str  # "2026-11", "2026-11-27", "2026-11-01 to 2026-11-15"

    def days(self, zone: ZoneInfo) -> list[tuple[date, datetime, datetime]]:
        out, day = [], self.first_day
        while day <= self.last_day:
            nxt = day + timedelta(days=1)
            out.append((day, local_midnight(day, zone), local_midnight(nxt, zone)))
            day = nxt
        return out


def not_begun(
    period: Period, now: datetime, site_id: str, zone: ZoneInfo, conn: sqlite3.Connection
) -> str | None:
    """Why no report is made of ``period`` at ``now``: it has not begun in the site's time and
    the record holds nothing of it (made, chained and sent, it would be a record of nothing; a
    simulated day the store holds data of may lie ahead). None: there is something to report."""
    today = now.astimezone(zone).date()
    if period.first_day <= today:
        return None
    held = queries.sound_span(conn, site_id)
    if held is not None and held[1] >= period.start:
        return None
    return (
        f"{period.first_day} has not begun yet at {site_id} (today is {today} there):"
        " a report covers days that have begun"
    )


def local_midnight(day: date, zone: ZoneInfo) -> datetime:
    return datetime.combine(day, time(0), zone).astimezone(UTC)


def period_of(first_day: date, last_day: date, zone: ZoneInfo, label: str) -> Period:
    return Period(
        local_midnight(first_day, zone),
        local_midnight(last_day + timedelta(days=1), zone),
        first_day,
        last_day,
        label,
    )


def month_period(year: int, month: int, zone: ZoneInfo) -> Period:
    first = date(year, month, 1)
    following = date(year + month // 12, month % 12 + 1, 1)
    return period_of(first, following - timedelta(days=1), zone, f"{year:04d}-{month:02d}")


@dataclass
class Report:
    site: SiteConfig
    period: Period
    made: datetime
    chain_seq: int
    chain_head: str
    completeness: list[dict[str, Any]] = field(default_factory=list)
    daily: list[dict[str, Any]] = field(default_factory=list)
    episodes: list[dict[str, Any]] = field(default_factory=list)
    findings: list[dict[str, Any]] = field(default_factory=list)
    blasts: list[dict[str, Any]] = field(default_factory=list)
    lighting_days: list[dict[str, Any]] = field(default_factory=list)
    lighting_allowance: dict[str, Any] = field(default_factory=dict)
    notices: list[dict[str, Any]] = field(default_factory=list)
    complaints: list[dict[str, Any]] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)

    @property
    def timezone(self) -> str:
        return self.site.timezone


def level_statistics(bins: Mapping[int, tuple[int, float, float]]) -> dict[str, float] | None:
    """LAeq, L10, L50, L90 and LAFmax from a meter's histogram: bin (round(LAeq x 10)) ->
    (seconds, energy sum, highest LAFmax). Lx is the bin of the ceil(x % of n)-th loudest second."""
    seconds = sum(n for n, _, _ in bins.values())
    if not seconds:
        return None
    energy = sum(e for _, e, _ in bins.values())
    stats = {
        "seconds": float(seconds),
        "LAeq": 10 * math.log10(energy / seconds),
        "LAFmax": max(m for _, _, m in bins.values()),
    }
    loudest_first = sorted(bins, reverse=True)
    for x in PERCENTILES:
        rank = math.ceil(x * seconds / 100)
        count = 0
        for b in loudest_first:
            count += bins[b][0]
            if count >= rank:
                stats[f"L{x}"] = b / 10
                break
    return stats


def _days_of(rows: list[sqlite3.Row]) -> dict[str, dict[int, tuple[int, float, float]]]:
    per: dict[str, dict[int, tuple[int, float, float]]] = {}
    for r in rows:
        per.setdefault(str(r["sensor"]), {})[int(r["bin"])] = (
            int(r["seconds"]),
            float(r["energy"]),
            float(r["lafmax"]),
        )
    return per


def build_report(
    conn: sqlite3.Connection, site: SiteConfig, profile: Any, period: Period, now: datetime
) -> Report:
    """The report of ``site`` for ``period`` as the store holds it now."""
    zone = ZoneInfo(site.timezone)
    tz = site.timezone
    seq, head = queries.chain_head(conn, site.id)
    report = Report(site, period, now, seq, head)
    span = span_text(period.start, period.end, tz, with_date=True)
    start_us, end_us = to_us(period.start), to_us(period.end)
    report.sources = {
        "completeness": (
            f"sound rows (one per second) and readings of site {site.id} over {span}, against the"
            " sensor's expected period; judged: those of them inside the windows the daemon has judged"
            " finally (table judged), against the expected period; gaps: the period's spans outside"
            " the judged windows, health records (offline/online), calibration checks, weather-affected"
            " findings"
        ),
        "daily": (
            "sound rows of each boundary meter over the local day, aggregated in SQLite: LAeq the energy"
            " average of the per-second LAeq; L10/L50/L90 the per-second LAeq exceeded 10/50/90 % of the"
            " seconds received (to 0.1 dB); LAFmax the highest per-second LAFmax"
        ),
        "episodes": "violation findings, merged into episodes by rules/episodes.py (the notices' own facts)",
        "findings": "current findings (latest revision, not retracted) of the kinds listed",
        "blasts": "blast events on record, the blasting findings of each and their notices",
        "lighting": "light findings; temporary-lighting events counted by rules/temporary_lighting.py",
        "notices": "notices and their chained changes (monitor/notify/notices.py)",
        "complaints": "complaints received and the check against the record made when each came",
    }

    # --------------------------------------------------------------- sound: per day, per meter
    boundary = [s for s in site.sensors if s.kind is SensorKind.SOUND and s.placement is Placement.BOUNDARY]
    totals: dict[str, float] = {}
    for day, d_start, d_end in period.days(zone):
        per_sensor = _days_of(queries.sound_histogram(conn, site.id, to_us(d_start), to_us(d_end)))
        overloaded = queries.overloaded_seconds(conn, site.id, to_us(d_start), to_us(d_end))
        for sensor in site.sensors:
            if sensor.kind is SensorKind.SOUND and sensor.id in per_sensor:
                totals[sensor.id] = totals.get(sensor.id, 0.0) + sum(
                    n for n, _, _ in per_sensor[sensor.id].values()
                )
        for sensor in boundary:
            stats = level_statistics(per_sensor.get(sensor.id, {}))
            report.daily.append(
                {
                    "date": day.isoformat(),
                    "sensor": sensor.id,
                    "seconds": int(stats["seconds"]) if stats else 0,
                    "expected_s": int((d_end - d_start).total_seconds() / sensor.expected_period_s),
                    # Seconds the meter was overloaded in: the day's levels are then lower bounds.
                    "overloaded_s": overloaded.get(sensor.id, 0.0),
                    **{
                        k: (round(stats[k], 1) if stats else None)
                        for k in ("LAeq", "L10", "L50", "L90", "LAFmax")
                    },
                }
            )

    # --------------------------------------------------------------- completeness per sensor
    readings = {(r["sensor"], r["kind"]): r for r in queries.reading_counts(conn, site.id, start_us, end_us)}
    unjudged = {(r["sensor"], r["kind"]): r for r in queries.unjudged_counts(conn, site.id, start_us, end_us)}
    gaps = queries.judging_gaps(conn, site.id, start_us, end_us)
    unjudged_s = sum(e - s for s, e in gaps) / 1_000_000
    health = queries.health_between(conn, site.id, start_us, end_us)
    calibration = queries.calibration_between(conn, site.id, start_us, end_us)
    weather = queries.current_findings(
        conn, site=site.id, start=period.start, end=period.end, kinds=[FindingKind.UNRELIABLE.value]
    )
    period_s = (period.end - period.start).total_seconds()
    for sensor in site.sensors:
        expected = period_s / sensor.expected_period_s
        if sensor.kind is SensorKind.SOUND:
            received = totals.get(sensor.id, 0.0)
        else:
            row = readings.get((sensor.id, sensor.kind.value))
            received = float(row["seconds"] or 0.0) / sensor.expected_period_s if row else 0.0
        outside = unjudged.get((sensor.id, sensor.kind.value))
        if outside is None:
            judged = received
        elif sensor.kind is SensorKind.SOUND:
            judged = received - int(outside["rows"])
        else:
            judged = received - float(outside["seconds"] or 0.0) / sensor.expected_period_s
        offline = [h for h in health if h["sensor"] == sensor.id and h["state"] == "online" and h["gap_s"]]
        checks = [c for c in calibration if c["sensor"] == sensor.id]
        weather_s = sum(
            float(json.loads(f["data"]).get("details", {}).get("weather_affected_s") or 0.0)
            for f in weather
            if sensor.id in json.loads(f["data"]).get("sensors", [])
        )
        report.completeness.append(
            {
                "sensor": sensor.id,
                "kind": sensor.kind.value,
                "received": round(received),
                "expected": round(expected),
                "received_share": round(received / expected, 4) if expected else None,
                "judged": round(judged),
                "judged_share": round(judged / expected, 4) if expected else None,
                "judging_gaps": len(gaps),
                "unjudged_s": round(unjudged_s),
                "offline_gaps": len(offline),
                "offline_s": round(sum(float(h["gap_s"]) for h in offline)),
                "calibration_checks": len(checks),
                "calibration_flagged": sum(int(c["flagged"]) for c in checks),
                "weather_affected_s": round(weather_s),
            }
        )

    # --------------------------------------------------------------- episodes and findings
    titles = profile.titles
    for told in site_episodes(conn, site.id, period.start, period.end, profile.episode_gap_s):
        report.episodes.append(told.to_json(tz, titles))
    kinds = [
        FindingKind.EXEMPT_EXCEEDANCE.value,
        FindingKind.UNRELIABLE.value,
        FindingKind.SAFETY_EXCEPTION.value,
        FindingKind.UNREPORTED_BLAST.value,
    ]
    for row in queries.current_findings(conn, site=site.id, start=period.start, end=period.end, kinds=kinds):
        data = json.loads(row["data"])
        report.findings.append(
            {
                "id": row["id"],
                "kind": row["kind"],
                "standard": row["standard"],
                "section": row["section"],
                "span": span_text(from_us(row["start_us"]), from_us(row["end_us"]), tz, with_date=True),
                "summary": data.get("summary", ""),
                "sensors": data.get("sensors", []),
            }
        )

    # --------------------------------------------------------------- blasts, lighting
    from monitor.complaints.book import ComplaintBook
    from monitor.notify.notices import list_notices, notice_history

    all_notices = list_notices(conn, site=site.id)
    notice_of = {fid: n.id for n in all_notices for e in n.episodes for fid in e.finding_ids}
    events = queries.events_overlapping(conn, site.id, period.start, period.end)
    blast_findings = queries.current_findings(
        conn, site=site.id, start=period.start - timedelta(days=1), end=period.end
    )
    for row in events:
        if row["kind"] != "blast":
            continue
        data = json.loads(row["data"])
        blast_id = str(data.get("blast_id", row["id"]))
        # the findings that name the blast (rules' refs "blast:<id>"): window, notice, overpressure
        mine = [f for f in blast_findings if f"blast:{blast_id}" in json.loads(f["data"]).get("refs", [])]
        report.blasts.append(
            {
                "id": blast_id,
                "time": local_moment(from_us(row["ts_us"]), tz),
                "ts": format_ts(from_us(row["ts_us"])),
                "safety_reason": data.get("safety_reason") or "",
                "charge_kg": data.get("charge_kg"),
                "overpressure_db": data.get("overpressure_db"),
                "findings": [
                    f"{f['kind']} ({f['section']}): {json.loads(f['data']).get('summary', '')}" for f in mine
                ],
                "notices": sorted({notice_of[f["id"]] for f in mine if f["id"] in notice_of}),
            }
        )
    light_sensors = {s.id for s in site.sensors if s.kind is SensorKind.LIGHT}
    for f in report.findings + [
        {"kind": "violation", **e, "span": e["span"], "summary": e["summary"]} for e in report.episodes
    ]:
        if set(f.get("sensors", [])) & light_sensors:
            report.lighting_days.append({"kind": f["kind"], "span": f["span"], "summary": f["summary"]})
    from monitor.journal.temporary_lighting import counting_of, year_periods
    from rules.lighting import lighting_days

    periods = year_periods(conn, site, period.first_day.year, period.end)
    counting = counting_of(profile)
    allowance = counting.max_days_per_year
    year = period.first_day.year
    used = [d for d in lighting_days(site.context(), periods, counting) if d.day.year == year]
    in_period = [d for d in used if period.first_day <= d.day <= period.last_day]
    through = [d for d in used if d.day <= period.last_day]
    report.lighting_allowance = {
        "year": period.first_day.year,
        "section": counting.section,  # as the profile numbers it; "" without a temporary lighting standard
        "allowance": allowance,
        "used_in_period": len(in_period),
        "used_through_period": len(through),
        "days": [d.day.isoformat() for d in in_period],
    }

    # --------------------------------------------------------------- notices, complaints
    for notice in all_notices:
        history = notice_history(conn, notice.id)
        if notice.opened >= period.end or not (
            notice.opened >= period.start or notice.status != "corrected" or history[-1].at >= period.start
        ):
            continue
        report.notices.append(
            {
                "id": notice.id,
                "section": notice.section,
                "status": notice.status,
                "issued": local_moment(notice.opened, tz),
                "deadline": local_moment(notice.deadline, tz),
                "changes": [
                    f"{local_moment(c.at, tz)} {c.change} by {c.actor}"
                    for c in history
                    if period.start <= c.at < period.end
                ],
            }
        )
    for complaint in ComplaintBook.reader(conn).find(site.id, period.start, period.end):
        report.complaints.append(
            {
                "id": complaint.id,
                "what": complaint.what,
                "when": span_text(complaint.start, complaint.end, tz, with_date=True)
                if complaint.end > complaint.start
                else local_moment(complaint.start, tz),
                "status": complaint.status,
                "record": complaint.correlation.get("text", ""),
                "notices": list(complaint.notices),
            }
        )
    return report


def db_text(value: float | None) -> str:
    return "" if value is None else number_text(value, "dB(A)")
