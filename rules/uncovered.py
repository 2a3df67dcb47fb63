"""The area the operator's records say was uncovered, and when (land-disturbing 28-5(d)).

28-5(d) turns on one fact, "where more than 5,000 square feet is uncovered", which two
standards judge: the erosion control devices (``rules.area_controls``) and the sediment at the
tract's boundary (``rules.turbidity``). The fact is computed here only, so the two cannot
disagree about it.

The uncovered area at a moment is the sum of ``area_field`` over ``open_kind`` records
(``disturbance-started``) not yet closed by a ``close_kind`` record with the same id
(``ground-cover-established``). A closing record counts only from its opening on: a cover dated
before the activity started does not close it. A record without a usable area (none, not a
number, 0 or less) is an activity of unknown size, listed while it is open rather than guessed.

All changes at one instant are applied before the area is read: a cover and another opening at
the same time do not make a moment of both, nor does a record opened and covered at once.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from datetime import datetime

from rules.deadlines import events_of, first_by_id, number_field, ref
from rules.model import SiteContext, SiteData


@dataclass(frozen=True, slots=True)
class AreaRecords:
    """Which records give the uncovered area: a profile's record kinds and field."""

    open_kind: str  # "disturbance-started"
    close_kind: str  # "ground-cover-established"; "" : nothing closes an activity
    area_field: str  # "area_sqft"


@dataclass(frozen=True, slots=True)
class Uncovered:
    """The area uncovered from ``since`` until the next change."""

    since: datetime
    known_sqft: float  # the sum of the usable areas of the open records
    unknown: tuple[str, ...]  # ids of open records without a usable area, in the order opened
    open_ids: tuple[str, ...]  # ids of the open records, in the order opened
    changed_by: tuple[str, ...]  # the records opened or closed at ``since``

    def over(self, size_sqft: float) -> bool:
        """More than ``size_sqft``, or possibly so: an open activity of unknown size may be."""
        return self.known_sqft > size_sqft or bool(self.unknown)


@dataclass(frozen=True, slots=True)
class UncoveredArea:
    """Every change of the uncovered area, in time order, and the records without an area."""

    changes: tuple[Uncovered, ...]
    without_area: tuple[str, ...]  # ids of every open-kind record without a usable area, sorted

    def at(self, moment: datetime) -> Uncovered | None:
        """The area uncovered at ``moment`` (None: no activity was recorded by then)."""
        index = bisect.bisect_right(self.changes, moment, key=lambda c: c.since)
        return self.changes[index - 1] if index else None


def uncovered_area(site: SiteContext, records: AreaRecords, data: SiteData) -> UncoveredArea:
    """The uncovered area over time, from the site's records (see the module's docstring)."""
    opened = first_by_id(events_of(data, site, records.open_kind))
    closed = first_by_id(events_of(data, site, records.close_kind))
    # (time, change of the known area, opened (+1) or closed (-1), ref, id, known)
    steps: list[tuple[datetime, float, int, str, str, bool]] = []
    without_area: list[str] = []
    for event in opened.values():
        area = number_field(event, records.area_field)
        known = area is not None and area > 0
        if not known:
            without_area.append(event.id)
        size = area if known and area is not None else 0.0
        steps.append((event.ts, size, 1, ref(event), event.id, known))
        cover = closed.get(event.id)
        if cover is not None and cover.ts >= event.ts:  # a cover before the opening closes nothing
            steps.append((cover.ts, -size, -1, ref(cover), event.id, known))
    steps.sort(key=lambda s: s[0])
    changes: list[Uncovered] = []
    total = 0.0
    open_ids: dict[str, None] = {}  # in the order opened
    open_unknown: dict[str, None] = {}
    index = 0
    while index < len(steps):
        ts = steps[index][0]
        changed_by: list[str] = []
        while index < len(steps) and steps[index][0] == ts:
            _, change, direction, step_ref, subject, known = steps[index]
            total += change
            if direction > 0:
                open_ids[subject] = None
                if not known:
                    open_unknown[subject] = None
            else:
                open_ids.pop(subject, None)
                open_unknown.pop(subject, None)
            changed_by.append(step_ref)
            index += 1
        changes.append(Uncovered(ts, total, tuple(open_unknown), tuple(open_ids), tuple(changed_by)))
    return UncoveredArea(tuple(changes), tuple(sorted(without_area)))
