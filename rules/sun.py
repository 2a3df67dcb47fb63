"""Sunset and civil night for a site, from astral, with the polar cases made explicit.

astral raises ValueError when the sun never sets or never rises on a date (or never
reaches 6 degrees below the horizon). Its message does not reliably say which case it
is (at 78 N in December it says the sun never *reaches* -6 degrees), so we decide by
the sun's elevation at local noon, as the ordinance reader would: bright noon means
polar day / white night, dark noon means polar night.

Results are cached per (latitude, longitude, timezone, date); they are pure functions.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo

import astral
import astral.sun

from rules.model import SiteContext

# The geometric horizon plus refraction and the sun's radius, as astral uses for sunset.
SUNSET_ELEVATION_DEG = -0.833
CIVIL_DEPRESSION_DEG = 6.0

NORMAL = "normal"
POLAR_DAY = "polar_day"
POLAR_NIGHT = "polar_night"


@dataclass(frozen=True, slots=True)
class Sunset:
    """Sunset on one local date; ``at`` is None in the polar cases."""

    local_date: date
    at: datetime | None  # aware, in the site's zone
    case: str  # NORMAL | POLAR_DAY | POLAR_NIGHT

    @property
    def explanation(self) -> str:
        if self.case == POLAR_DAY:
            return "sun does not set (polar day)"
        if self.case == POLAR_NIGHT:
            return "sun does not rise (polar night)"
        assert self.at is not None
        if self.at.date() != self.local_date:
            return f"sunset at {self.at.strftime('%H:%M:%S %Z')} on {self.at.date().isoformat()}"
        return f"sunset at {self.at.strftime('%H:%M:%S %Z')}"


def _noon_elevation(latitude: float, longitude: float, tz_name: str, local_date: date) -> float:
    noon = datetime.combine(local_date, time(12), ZoneInfo(tz_name))
    return float(astral.sun.elevation(astral.Observer(latitude, longitude), noon))


@lru_cache(maxsize=4096)
def _sunset(latitude: float, longitude: float, tz_name: str, local_date: date) -> Sunset:
    tz = ZoneInfo(tz_name)
    try:
        at = astral.sun.sunset(astral.Observer(latitude, longitude), local_date, tzinfo=tz)
    except ValueError:
        bright_noon = _noon_elevation(latitude, longitude, tz_name, local_date) > SUNSET_ELEVATION_DEG
        return Sunset(local_date, None, POLAR_DAY if bright_noon else POLAR_NIGHT)
    return Sunset(local_date, at.astimezone(tz), NORMAL)


def sunset(site: SiteContext, local_date: date) -> Sunset:
    return _sunset(site.latitude, site.longitude, site.timezone, local_date)


@lru_cache(maxsize=4096)
def _sunset_after(
    latitude: float, longitude: float, tz_name: str, local_date: date, after: time, until: time
) -> Sunset:
    tz = ZoneInfo(tz_name)
    start = datetime.combine(local_date, after, tz)
    limit = datetime.combine(local_date + timedelta(days=1), until, tz)
    # astral files a sunset under the date it computes for, which at high latitudes in summer
    # is the one just after the *previous* midnight; so look at the neighbouring dates too.
    candidates = [
        s.at
        for offset in (-1, 0, 1, 2)
        if (s := _sunset(latitude, longitude, tz_name, local_date + timedelta(days=offset))).at is not None
    ]
    elevation = float(astral.sun.elevation(astral.Observer(latitude, longitude), start))
    if elevation <= SUNSET_ELEVATION_DEG:
        # The sun is already down at ``after``: the sunset that counts is the one before it.
        earlier = [at for at in candidates if at <= start]
        if earlier and start - max(earlier) < timedelta(hours=24):
            return Sunset(local_date, max(earlier), NORMAL)
        return Sunset(local_date, None, POLAR_NIGHT)
    later = [at for at in candidates if start < at <= limit]
    if later:
        return Sunset(local_date, min(later), NORMAL)
    return Sunset(local_date, None, POLAR_DAY)


def sunset_after(site: SiteContext, local_date: date, after: time, until: time) -> Sunset:
    """The first sunset after ``after`` (local) on ``local_date``, wherever it falls (6.F).

    At high latitudes in summer the evening's sunset comes after local midnight (Fairbanks,
    21 June: 00:46 on the 22nd), and that is the sunset that bounds an afternoon's blasting,
    not the one astral files under the calendar date. Searched up to ``until`` on the next
    day (the next blasting window); none by then with the sun up at ``after`` is POLAR_DAY.
    With the sun already down at ``after`` the answer is the sunset before it (NORMAL, ``at``
    earlier than ``after``), or POLAR_NIGHT when the sun did not rise.
    """
    return _sunset_after(site.latitude, site.longitude, site.timezone, local_date, after, until)


@lru_cache(maxsize=4096)
def _night_of_day(
    latitude: float, longitude: float, tz_name: str, local_date: date, depression_deg: float
) -> tuple[tuple[datetime, datetime], ...]:
    """The parts of one local day when the sun is more than ``depression_deg`` below the
    horizon: [00:00, dawn) and [dusk, 24:00). 6 degrees is civil night, 12 nautical."""
    tz = ZoneInfo(tz_name)
    observer = astral.Observer(latitude, longitude)
    day_start = datetime.combine(local_date, time(0), tz)
    day_end = datetime.combine(local_date + timedelta(days=1), time(0), tz)
    dark_noon: bool | None = None

    def noon_is_dark() -> bool:
        nonlocal dark_noon
        if dark_noon is None:
            dark_noon = _noon_elevation(latitude, longitude, tz_name, local_date) < -depression_deg
        return dark_noon

    try:
        dawn: datetime | None = astral.sun.dawn(observer, local_date, depression_deg, tzinfo=tz)
    except ValueError:
        dawn = None
    try:
        dusk: datetime | None = astral.sun.dusk(observer, local_date, depression_deg, tzinfo=tz)
    except ValueError:
        dusk = None
    if dawn is None and dusk is None:
        # Polar night deep enough that it never gets civil-light: the whole day is night.
        # Otherwise (white nights, midnight sun) there is no civil night at all.
        return ((day_start, day_end),) if noon_is_dark() else ()
    parts: list[tuple[datetime, datetime]] = []
    if dawn is not None:
        parts.append((day_start, dawn))
    elif noon_is_dark():
        parts.append((day_start, dusk or day_end))
    if dusk is not None:
        parts.append((dusk, day_end))
    elif noon_is_dark():
        parts.append((dawn or day_start, day_end))
    return tuple((a, b) for a, b in parts if a < b)


def civil_night(site: SiteContext, start: datetime, end: datetime) -> list[tuple[datetime, datetime]]:
    """Night intervals (end of civil dusk to start of civil dawn) overlapping [start, end), UTC."""
    return night(site, start, end, CIVIL_DEPRESSION_DEG)


def night(
    site: SiteContext, start: datetime, end: datetime, depression_deg: float
) -> list[tuple[datetime, datetime]]:
    """Intervals with the sun more than ``depression_deg`` below the horizon, overlapping [start, end)."""
    tz = site.tz
    first = start.astimezone(tz).date() - timedelta(days=1)
    last = end.astimezone(tz).date() + timedelta(days=1)
    merged: list[tuple[datetime, datetime]] = []
    day = first
    while day <= last:
        for a, b in _night_of_day(site.latitude, site.longitude, site.timezone, day, depression_deg):
            if merged and a <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], b))
            else:
                merged.append((a, b))
        day += timedelta(days=1)
    return [(a, b) for a, b in merged if a < end and start < b]


def is_night(nights: list[tuple[datetime, datetime]], ts: datetime) -> bool:
    return any(a <= ts < b for a, b in nights)
