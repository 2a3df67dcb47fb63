"""A resident's complaint against the record (pure): which of three things the record says.

The shell (monitor/complaints/check.py) gathers, for the complaint's time with a margin and its
place, what the record holds: each nearby monitor's levels, the violation episodes (as
``rules.episodes`` computed them, read through ``monitor.journal.episodes.site_episodes``),
exempt exceedances, blasts, lighting, findings and notices. ``judge`` decides, and the sentence
it returns always carries the numbers it was decided on:

- "corroborated by the record": an item of the record of the complaint's kind shows the
  condition (an episode, an exempt exceedance, a blast on record, a light finding);
- "not corroborated: all monitors at or below N dB(A)": monitors covering the place and time
  measured, and nothing of the kind is on record -- never a dismissal without the level;
- "no monitor covers it": nothing measured there then (or minewatch measures no such thing),
  so the record can say neither.

A complaint is never judged on the resident's word alone, and never dismissed without the
numbers beside it: the Town triages it with this in front of it.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from rules.quantities import quantity_text

CATEGORIES: dict[str, str] = {
    "noise": "noise",
    "blast": "blast or vibration",
    "light": "light",
    "dust": "dust",
    "other": "something else",
}
# What a kind of monitor can speak to: sound meters hear noise and a blast's airblast, light
# meters see light. Nothing in minewatch measures dust.
MEASURED_BY = {"sound": frozenset({"noise", "blast"}), "light": frozenset({"light"})}
# A monitor covers the window when it sent at least a minute of it (the judgement then says how
# much of the window it sent) or half of a shorter window.
MIN_COVERAGE_S = 60.0


class Verdict(enum.StrEnum):
    CORROBORATED = "corroborated"
    NOT_CORROBORATED = "not_corroborated"
    NO_MONITOR = "no_monitor"


@dataclass(frozen=True, slots=True)
class MonitorLevels:
    """What one monitor measured in the complaint's window (with the margin)."""

    sensor: str
    kind: str  # "sound" or "light"
    seconds: float  # seconds of data received
    window_s: float  # seconds in the window
    highest: float | None  # sound: the highest clock minute's LAeq, dB(A); light: the highest lux
    unit: str  # "dB(A)" or "lx"
    distance_m: float | None = None  # from the complaint's point on the site plan, when both have one

    @property
    def covers(self) -> bool:
        enough = self.seconds >= min(MIN_COVERAGE_S, self.window_s / 2)
        return self.window_s > 0 and enough and self.highest is not None


@dataclass(frozen=True, slots=True)
class RecordItem:
    """One thing on record near the complaint, as the record tells it (``text``): the kinds of
    complaint it speaks to (``categories``), and those for which it shows the condition
    (``shows``; for the others it is context: a blast beside a noise complaint)."""

    kind: str  # episode, exempt_exceedance, blast, light, finding, notice, event
    text: str
    categories: frozenset[str]
    shows: frozenset[str]


@dataclass(frozen=True, slots=True)
class Judgement:
    verdict: Verdict
    text: str  # the one line every surface prints
    basis: tuple[str, ...]  # the items and levels it was decided on


def judge(category: str, monitors: Sequence[MonitorLevels], items: Sequence[RecordItem]) -> Judgement:
    """The record's answer to a complaint of ``category`` (a key of ``CATEGORIES``)."""
    if category not in CATEGORIES:
        raise ValueError(f"unknown complaint category {category!r}")
    speaks = [i for i in items if category in i.categories or category == "other"]
    showing = [i for i in speaks if category in i.shows or (category == "other" and i.shows)]
    covering = [m for m in monitors if m.covers and category in MEASURED_BY.get(m.kind, frozenset())]
    levels = tuple(
        f"{m.sensor}: highest {quantity_text(m.highest, m.unit)}"
        + ("" if m.distance_m is None else f" ({m.distance_m:.0f} m away)")
        for m in covering
        if m.highest is not None
    )
    if showing:
        return Judgement(
            Verdict.CORROBORATED,
            f"corroborated by the record: {showing[0].text}",
            (*(i.text for i in showing), *levels),
        )
    if covering:
        unit = covering[0].unit
        top = max(m.highest for m in covering if m.highest is not None and m.unit == unit)
        measured = "sound level meter" if unit == "dB(A)" else "light meter"
        what = f"all monitors at or below {quantity_text(top, unit)}"
        detail = "highest clock-minute LAeq" if unit == "dB(A)" else "highest illuminance"
        received = sum(m.seconds for m in covering)
        expected = sum(m.window_s for m in covering)
        return Judgement(
            Verdict.NOT_CORROBORATED,
            f"not corroborated: {what} ({detail} at {len(covering)} {measured}"
            f"{'s' if len(covering) != 1 else ''}, {received:,.0f} of {expected:,.0f} seconds received;"
            " nothing of the kind on record)",
            (*levels, *(i.text for i in speaks)),
        )
    if category == "dust":
        reason = "no monitor covers it (minewatch measures no dust)"
    elif category == "other":
        reason = "no monitor covers it (nothing of the kind on record)"
    else:
        reason = "no monitor covers it (no data from a monitor of this kind at that time)"
    return Judgement(Verdict.NO_MONITOR, reason, tuple(i.text for i in speaks))


# --------------------------------------------------------------------------- placement signals
#
# A complaint the record does not bear out is a signal too: when the same area keeps
# complaining and the monitors there keep measuring nothing of it, the monitor may not stand
# where the effect is felt. ``placement_signals`` finds, among a site's complaints, the areas
# with at least ``count`` such complaints within ``period``; the shell shows them on the Town's
# complaints page and raises one town alert an area (``placement_alert_due``).

PLACEMENT_COUNT = 3
PLACEMENT_DAYS = 30
UNBORNE = frozenset({Verdict.NOT_CORROBORATED.value, Verdict.NO_MONITOR.value})
# The kind of monitor that would hear a complaint of each category ("" when none measures it).
_MONITOR_KIND = {"noise": "sound", "blast": "sound", "light": "light", "dust": "", "other": ""}


@dataclass(frozen=True, slots=True)
class PlacedComplaint:
    """What the placement decision needs of one complaint."""

    id: str
    start: datetime
    what: str  # a key of CATEGORIES
    verdict: str  # a Verdict value
    when: str  # its time as the Town reads it (site time)
    area: str  # ``complaint_area``'s key ("" when it gives no place)
    area_text: str  # the same as words: "near monitor n1 (north boundary)", "at 12 Elm Road"


@dataclass(frozen=True, slots=True)
class PlacementSignal:
    area: str
    kind: str  # the monitor kind that would measure it: "sound", "light" or "" (none does)
    complaints: tuple[PlacedComplaint, ...]  # oldest first
    text: str

    @property
    def condition(self) -> str:
        """The alert's deduplication key within the site."""
        return f"placement:{self.kind or 'none'}:{self.area}"


def complaint_area(
    what: str, address: str, placed: bool, monitors: Sequence[tuple[str, str, float | None, str]]
) -> tuple[str, str]:
    """(key, words) of the area a complaint speaks of. ``monitors`` are (sensor, kind, distance
    in metres or None, location) as its check listed them, nearest first: with a point on the
    site plan and monitors placed, the nearest monitor of the kind that would measure it; else
    the address as given (case and spacing aside); else none ("", "")."""
    kind = _MONITOR_KIND.get(what, "")
    if placed:
        near = [m for m in monitors if m[2] is not None and (m[1] == kind or not kind)]
        if near:
            sensor, _, _, location = min(near, key=lambda m: m[2] or 0.0)
            where = f" ({location})" if location else ""
            return f"monitor:{sensor}", f"near monitor {sensor}{where}"
    words = " ".join(address.split())
    if words:
        return f"address:{words.casefold()}", f"at {words}"
    return "", ""


def placement_signals(
    complaints: Sequence[PlacedComplaint],
    now: datetime,
    count: int = PLACEMENT_COUNT,
    period: timedelta = timedelta(days=PLACEMENT_DAYS),
) -> list[PlacementSignal]:
    """Areas with at least ``count`` complaints the record did not bear out ("not corroborated"
    or "no monitor covers it") whose time lies within ``period`` before ``now``; most first."""
    groups: dict[tuple[str, str], list[PlacedComplaint]] = {}
    for c in complaints:
        if c.area and c.verdict in UNBORNE and now - period <= c.start <= now:
            groups.setdefault((c.area, _MONITOR_KIND.get(c.what, "")), []).append(c)
    signals = []
    for (area, kind), found in groups.items():
        if len(found) < count:
            continue
        found.sort(key=lambda c: (c.start, c.id))
        days = round(period.total_seconds() / 86400)
        kinds = sorted({CATEGORIES.get(c.what, c.what) for c in found})
        unborne = sum(c.verdict == Verdict.NOT_CORROBORATED.value for c in found)
        said = []
        if unborne:
            said.append(f"{unborne} not corroborated by the monitors there")
        if len(found) - unborne:
            said.append(f"{len(found) - unborne} where no monitor covered it")
        monitor = {"sound": "a sound level meter", "light": "a light meter"}.get(kind, "a monitor")
        text = (
            f"Placement signal: {len(found)} complaints of {' and '.join(kinds)} {found[0].area_text}"
            f" within {days} days ({'; '.join(said)}). The record holds no exceedance there then;"
            f" repeated complaints the monitors do not bear out may mean {monitor} does not stand"
            " where the effect is felt: consider the monitors' placement. Complaints: "
            + "; ".join(f"{c.id} ({CATEGORIES.get(c.what, c.what)}, {c.when})" for c in found)
        )
        signals.append(PlacementSignal(area, kind, tuple(found), text))
    signals.sort(key=lambda s: (-len(s.complaints), s.area))
    return signals


def placement_alert_due(last_alert: datetime | None, now: datetime, period: timedelta) -> bool:
    """One town alert an area a period: not again while the last one is younger than ``period``."""
    return last_alert is None or now - last_alert >= period
