"""A blast notice's facts: the blast, the allowed hours, that day's sunset, the 24-hour notice
given for it and the air overpressure measured, each read from the journal and the profile.

Rows of the notice document's facts table (monitor/notify/document.py) for the blasting
standards; notices of other standards have none.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from monitor.config import SiteConfig
from monitor.journal import queries
from monitor.notify.notices import (
    Notice,
    NoticeEpisode,
    duration_text,
    measurement_text,
    quantity_text,
)
from rules.air_overpressure import SECONDARY
from rules.citation import citation_text
from rules.profile import Profile
from rules.times import local_stamp, span_text, stored_time

__all__ = ["blast_rows"]

_BLAST_RULES = frozenset({"blast_window", "blast_notice", "air_overpressure"})
_BLAST_ID = re.compile(r"[Bb]last (\S+) ")


def _blast_id(episode: NoticeEpisode) -> str | None:
    for ref in episode.facts.get("refs", ()):
        if str(ref).startswith("blast:"):
            return str(ref)[len("blast:") :]
    match = _BLAST_ID.search(str(episode.facts.get("summary", "")))  # notices issued before refs were kept
    return match.group(1).rstrip(",") if match else None


def _event_data(conn: sqlite3.Connection, site: str, kind: str, event_id: str) -> dict[str, Any] | None:
    text = queries.event_data(conn, site, kind, event_id)
    return None if text is None else dict(json.loads(text))


def blast_rows(
    conn: sqlite3.Connection, notice: Notice, site: SiteConfig | None, profile: Profile | None
) -> list[tuple[str, str]]:
    """A blast notice's facts: the blast time, the allowed window, that day's sunset, the 24-hour
    notice given for it, and the air overpressure measured, each from the store and the profile."""
    rule = str(notice.data.get("rule", ""))
    if rule not in _BLAST_RULES or not notice.episodes:
        return []
    blast_id = _blast_id(notice.episodes[0])
    if blast_id is None:
        return []
    tz = ZoneInfo(notice.timezone)
    rows: list[tuple[str, str]] = []
    blast = _event_data(conn, notice.site, "blast", blast_id)
    blast_ts = stored_time(str(blast["ts"])) if blast else None
    if blast_ts is None:
        rows.append(("Blast", f"{blast_id}: no blast record in the store"))
    else:
        reason = str(blast.get("safety_reason") or "") if blast else ""
        rows.append(
            (
                "Blast",
                f"{blast_id} at {blast_ts.astimezone(tz).strftime('%Y-%m-%d %H:%M:%S %Z')}"
                f"; safety reason recorded: {reason or 'none'}",
            )
        )
    if profile is not None:
        window = next((s for s in profile.standards.values() if s.rule == "blast_window"), None)
        if window is not None:
            p = window.params
            late = (
                f"; after {p.window_end[:5]} only before sunset, for safety reasons beyond the "
                "Operator's control"
                if p.safety_exception_until_sunset
                else ""
            )
            rows.append(
                (
                    "Allowed blasting hours",
                    f"{p.window_start[:5]} to {p.window_end[:5]} local"
                    f" ({citation_text(window.section)}){late}",
                )
            )
    if blast_ts is not None and site is not None:
        from rules import sun

        rows.append(
            ("Sunset that day", sun.sunset(site.context(), blast_ts.astimezone(tz).date()).explanation)
        )
    announced = _event_data(conn, notice.site, "blast-notice", blast_id)
    if announced is None:
        rows.append(("24-hour notice", "none recorded for this blast"))
    else:
        issued = stored_time(str(announced["issued_ts"]))
        planned = stored_time(str(announced["planned_ts"]))
        ahead = ""
        if blast_ts is not None:  # a notice given after the blast says so, never a negative lead
            lead = (blast_ts - issued).total_seconds()
            ahead = f", {duration_text(abs(lead))} {'before' if lead >= 0 else 'after'} the blast"
        rows.append(
            (
                "24-hour notice",
                f"given {local_stamp(issued, notice.timezone)} for a blast planned at "
                f"{local_stamp(planned, notice.timezone)}{ahead}",
            )
        )
    overpressure = _overpressure_text(conn, notice.site, site, blast_id, blast, blast_ts, profile)
    rows.append(("Air overpressure", overpressure))
    return rows


def _overpressure_text(
    conn: sqlite3.Connection,
    site_id: str,
    site: SiteConfig | None,
    blast_id: str,
    blast: Mapping[str, Any] | None,
    blast_ts: datetime | None,
    profile: Profile | None,
) -> str:
    """The overpressure judged for the blast, else what the boundary meters' stored rows say.

    Read from the same ``sound`` rows an evidence bundle carries, so the notice never says
    "not measured" beside a bundle that holds linear peaks for the blast's window.
    """
    listed = profile.standards.items() if profile else ()
    standards = {k: s for k, s in listed if s.rule == "air_overpressure"}
    rows = queries.current_findings(conn, site=site_id, standards=list(standards)) if standards else []
    for row in rows:
        finding = json.loads(row["data"])
        if f"blast:{blast_id}" in finding.get("refs", ()):
            measured = "; ".join(measurement_text(m) for m in finding.get("measurements", ()))
            sensors = ", ".join(finding.get("sensors", ()))
            secondary = SECONDARY if sensors else ""
            return f"{measured}{f' at {sensors}' if sensors else ''} ({finding.get('kind', '')}){secondary}"
    why = _not_judged_reason(site, standards, profile.preexisting_section if profile else "")
    if blast and blast.get("overpressure_db") is not None:
        recorded = quantity_text(float(blast["overpressure_db"]), "dB")
        return f"{recorded} (linear peak, from the blast record){why}"
    standard = next(iter(standards.values()), None)
    if site is None or blast_ts is None or standard is None:
        return f"no boundary meter's linear peak is recorded for this blast{why}"
    params = standard.params
    start = blast_ts - timedelta(seconds=float(getattr(params, "window_before_s", 5.0)))
    end = blast_ts + timedelta(seconds=float(getattr(params, "window_after_s", 10.0)))
    meters = [s.id for s in site.sensors if s.kind.value == "sound" and s.info().at_boundary]
    peaks = queries.linear_peaks(conn, site.id, meters, start, end) if meters else []
    window = span_text(start, end, site.timezone)
    if not peaks:
        return f"no boundary meter reported a linear peak over {window}{why}"
    loudest: dict[str, float] = {}
    for row in peaks:  # loudest first: the first row of a meter is its peak
        loudest.setdefault(str(row["sensor"]), float(row["LZpeak"]))
    told = ", ".join(f"{quantity_text(db, 'dB')} at {sensor}" for sensor, db in loudest.items())
    return f"boundary meters' linear peak (LZpeak) over {window}: {told}{SECONDARY}{why}"


def _not_judged_reason(
    site: SiteConfig | None, standards: Mapping[str, Any], preexisting_section: str
) -> str:
    """Why no overpressure finding exists where the meters did measure; the section sparing
    pre-existing sites is the profile's (``preexisting_section``), cited only where it names one."""
    if not standards:
        return "; the profile sets no overpressure limit"
    binding = any(s.applies_to_preexisting for s in standards.values())
    if site is not None and site.preexisting and not binding:
        return (
            "; not judged against the limit: the site is a pre-existing operation"
            + (f" ({citation_text(preexisting_section)})" if preexisting_section else "")
            + ", which the overpressure standard does not bind"
        )
    return ""
