"""The year's declared temporary lighting as the rules count it (6.C.6), read from the store.

One reading for every surface: the monthly report's allowance, and the portal's shading of the
days on which declared lighting is exempt, count the days as the lighting rules do
(``rules.lighting.temporary_parts``), from the first of the year, so day 31 reads the same
everywhere.
"""

from __future__ import annotations

import dataclasses
import sqlite3
from datetime import date, datetime, time
from zoneinfo import ZoneInfo

from monitor.config import SiteConfig
from monitor.journal import queries
from monitor.wire.codec import event_from_row
from rules.lighting import TemporaryDays, TemporaryPart, temporary_parts
from rules.model import TemporaryLighting
from rules.profile import Profile


def counting_of(profile: Profile) -> TemporaryDays:
    """How the profile counts the days (its standard of the temporary_lighting rule, whatever its
    key), with that standard's section, or the default."""
    for standard in profile.standards.values():
        if standard.rule == "temporary_lighting":
            counting: TemporaryDays = standard.params.counting
            return dataclasses.replace(counting, section=standard.section)
    return TemporaryDays()


def year_periods(
    conn: sqlite3.Connection, site: SiteConfig, year: int, end: datetime
) -> list[TemporaryLighting]:
    """The temporary lighting declared for ``site`` from the start of ``year`` (site time) to ``end``."""
    year_start = datetime.combine(date(year, 1, 1), time(0), ZoneInfo(site.timezone))
    return [
        e
        for r in queries.events_overlapping(conn, site.id, year_start, end)
        if r["kind"] == "temporary-lighting"
        and isinstance(e := event_from_row(r["kind"], r["data"], site.id), TemporaryLighting)
    ]


def allowed_parts(
    conn: sqlite3.Connection, site: SiteConfig, profile: Profile, start: datetime, end: datetime
) -> list[TemporaryPart]:
    """The parts of declared temporary lighting in [start, end) on days within the year's allowance:
    where a light is exempt as temporary lighting (from day 31 it is judged like any other)."""
    counting = counting_of(profile)
    first_year = start.astimezone(ZoneInfo(site.timezone)).year
    periods = year_periods(conn, site, first_year, end)
    return [
        part
        for part in temporary_parts(site.context(), periods, counting)
        if part.ordinal <= counting.max_days_per_year and part.on < end and part.off > start
    ]
