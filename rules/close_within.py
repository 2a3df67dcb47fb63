"""A record that must be followed by another within a period of days (land-disturbing 28-5(b), 28-5(d)).

28-5(b): "slopes left exposed shall, within 21 calendar days, be planted or otherwise
provided with temporary or permanent ground cover, devices, or structures sufficient to
restrain erosion."

28-5(d): "Except as provided in subsection 28-8(b)(5), provisions for a ground cover
sufficient to restrain erosion must be accomplished within 15 working days or 90 calendar
days, following completion of construction or development whichever period is shorter."

An ``open_kind`` record (``slope-exposed`` "s-3", ``construction-completed`` "lot-7")
must be followed by a ``close_kind`` record with the same id (``slope-covered`` "s-3",
``ground-cover-established`` "lot-7") by the end of the period's last local day. A closing
record counts only from its opening on: a slope "covered" on 20 April and exposed on
1 May was not covered after it was exposed, so it is overdue like one never covered. The
period is ``calendar_days`` or ``working_days`` (the site's working calendar), whichever
ends first; 0 leaves one unset. The day of the opening record is not counted, so a slope
exposed on 1 May may be covered any time on 22 May and is overdue from 23 May 00:00.

Overdue records are a VIOLATION when the period ends and again each local day while they
stay open (see ``rules.deadlines``). Records whose ``area_field`` is at most
``min_area_sqft`` are not subject; a record without an area is judged (the operator can
show it is small by giving the area).

The exception (28-8(b)(5) for ground cover) is a switch: ``exception = true`` in the
site's agreement, or the site flag named by ``exception_flag``. While it applies, the
exception's own periods (``exception_calendar_days`` / ``exception_working_days``) replace
the standard ones; with neither set the deadline is suspended and the passing of the
standard deadline is recorded once as an EXEMPT_EXCEEDANCE.

Early warning: from ``warn_days`` days before the deadline, each open record is named
with its due date (one warning per due date).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, timedelta

from rules.base import RuleSpec, Standard, make_finding
from rules.citation import citation_text
from rules.deadlines import (
    Overdue,
    WorkCalendar,
    check_dates,
    check_weekdays,
    days_text,
    events_of,
    first_by_id,
    flag_set,
    last_day,
    local_date,
    local_midnight,
    number_field,
    occurrences,
    ref,
)
from rules.model import Finding, FindingKind, GenericEvent, Measurement, SiteContext, SiteData
from rules.numbers import within
from rules.times import iso


@dataclass(frozen=True, slots=True)
class CloseWithinParams:
    open_kind: str = "slope-exposed"
    close_kind: str = "slope-covered"
    calendar_days: int = field(default=21, metadata=within(minimum=0, maximum=3650, unit=" days"))
    # 0: no working-day period
    working_days: int = field(default=0, metadata=within(minimum=0, maximum=3650, unit=" days"))
    weekend: tuple[str, ...] = ("saturday", "sunday")
    # Local dates ("2026-07-03") and holiday calendars ("us-federal", "wisconsin": rules.holidays).
    holidays: tuple[str, ...] = ()
    area_field: str = "area_sqft"
    # Records of at most this area are not subject (0: all are)
    min_area_sqft: float = field(default=0.0, metadata=within(minimum=0, maximum=1e9, unit=" sq ft"))
    exception: bool = False  # the exception applies to this site (agreement)
    exception_flag: str = ""  # ... or this site flag is true
    exception_section: str = ""  # cited in findings, e.g. "28-8(b)(5)"
    exception_calendar_days: int = field(default=0, metadata=within(minimum=0, maximum=3650, unit=" days"))
    exception_working_days: int = field(default=0, metadata=within(minimum=0, maximum=3650, unit=" days"))
    warn_days: int = field(default=3, metadata=within(minimum=0, maximum=365, unit=" days"))
    # Words for summaries: "Slope s-3, left exposed on 2026-05-01, was not covered ..."
    subject: str = "slope"
    opened: str = "left exposed"
    closed: str = "planted or given ground cover"

    def __post_init__(self) -> None:
        if not self.open_kind or not self.close_kind:
            raise ValueError("open_kind: both open_kind and close_kind are required")
        if self.calendar_days == 0 and self.working_days == 0:
            raise ValueError("calendar_days: set calendar_days, working_days or both")
        check_weekdays("weekend", self.weekend)
        if len({d.lower() for d in self.weekend}) >= 7:
            raise ValueError("weekend: at least one day of the week must be a working day")
        check_dates("holidays", self.holidays)

    @property
    def calendar(self) -> WorkCalendar:
        return WorkCalendar.of(self.weekend, self.holidays)


def _exception_applies(site: SiteContext, params: CloseWithinParams) -> bool:
    return params.exception or flag_set(site, params.exception_flag)


def _periods(site: SiteContext, params: CloseWithinParams) -> tuple[int, int]:
    """(calendar days, working days) binding this site: the exception's own while it applies."""
    if _exception_applies(site, params):
        return params.exception_calendar_days, params.exception_working_days
    return params.calendar_days, params.working_days


def _period_text(calendar_days: int, working_days: int) -> str:
    parts = []
    if working_days:
        parts.append(f"{working_days} working days")
    if calendar_days:
        parts.append(f"{calendar_days} calendar days")
    return " or ".join(parts) + (", whichever is shorter" if len(parts) == 2 else "")


@dataclass(frozen=True, slots=True)
class _Subject:
    opened: GenericEvent
    closed: GenericEvent | None
    due: date  # last allowed local day
    area: float | None


def _subjects(
    site: SiteContext, params: CloseWithinParams, data: SiteData, calendar_days: int, working_days: int
) -> list[_Subject]:
    closes = first_by_id(events_of(data, site, params.close_kind))
    subjects = []
    calendar = params.calendar
    for opened in first_by_id(events_of(data, site, params.open_kind)).values():
        area = number_field(opened, params.area_field)
        if params.min_area_sqft > 0 and area is not None and area <= params.min_area_sqft:
            continue
        due = last_day(local_date(site, opened.ts), calendar_days, working_days, calendar)
        if due is None:
            continue
        closed = closes.get(opened.id)
        if closed is not None and closed.ts < opened.ts:
            closed = None  # dated before the opening: it closed something earlier, not this
        subjects.append(_Subject(opened, closed, due, area))
    return sorted(subjects, key=lambda s: (s.opened.ts, s.opened.id))


def evaluate(
    site: SiteContext,
    standard: Standard,
    params: CloseWithinParams,
    data: SiteData,
    start: datetime,
    end: datetime,
    now: datetime,
) -> list[Finding]:
    excepted = _exception_applies(site, params)
    if excepted and params.exception_calendar_days == 0 and params.exception_working_days == 0:
        return _excepted_findings(site, standard, params, data, start, end, now)
    calendar_days, working_days = _periods(site, params)
    findings: list[Finding] = []
    by_id: dict[str, _Subject] = {}
    overdue: list[Overdue] = []
    for subject in _subjects(site, params, data, calendar_days, working_days):
        since = local_midnight(site, subject.due + timedelta(days=1))
        until = subject.closed.ts if subject.closed is not None else None
        if until is not None and until < since:
            continue
        by_id[subject.opened.id] = subject
        refs = (ref(subject.opened),) + ((ref(subject.closed),) if subject.closed else ())
        overdue.append(Overdue(subject.opened.id, since, until, refs))
    period = _period_text(calendar_days, working_days)
    cited = citation_text(standard.section) + (
        f", {params.exception_section}" if excepted and params.exception_section else ""
    )
    for occurrence in occurrences(site, overdue, start, end, now):
        day = local_date(site, occurrence.start)
        parts = []
        worst = 0
        for item in occurrence.subjects:
            subject = by_id[item.subject]
            late = (day - subject.due).days
            worst = max(worst, late)
            opened_on = local_date(site, subject.opened.ts).isoformat()
            state = "" if occurrence.first_for(item) else f", still not done on {day.isoformat()}"
            parts.append(
                f"{params.subject.capitalize()} {subject.opened.id}, {params.opened} on {opened_on}, "
                f"was not {params.closed} within {period} (due by the end of {subject.due.isoformat()}"
                f"{state}; {days_text(late)} overdue)"
            )
        summary = "; ".join(parts) + f" ({cited})"
        findings.append(
            make_finding(
                site,
                standard,
                FindingKind.VIOLATION,
                occurrence.start,
                occurrence.end,
                summary,
                measurements=(Measurement("days overdue", worst, 0, "days"),),
                refs=tuple(r for item in occurrence.subjects for r in item.refs),
                details={
                    "local_date": day.isoformat(),
                    "subjects": [
                        {
                            "id": item.subject,
                            "opened": iso(by_id[item.subject].opened.ts),
                            "due_by_end_of": by_id[item.subject].due.isoformat(),
                            "area_sqft": by_id[item.subject].area,
                        }
                        for item in occurrence.subjects
                    ],
                    "calendar_days": calendar_days,
                    "working_days": working_days,
                },
            )
        )
    return findings


def _excepted_findings(
    site: SiteContext,
    standard: Standard,
    params: CloseWithinParams,
    data: SiteData,
    start: datetime,
    end: datetime,
    now: datetime,
) -> list[Finding]:
    """Where the standard period would have been missed, once, as EXEMPT_EXCEEDANCE (kept as evidence)."""
    where = params.exception_section or "the exception"
    reason = f"{where} applies to this site" + (
        f" (site flag {params.exception_flag})" if flag_set(site, params.exception_flag) else " (agreement)"
    )
    findings = []
    for subject in _subjects(site, params, data, params.calendar_days, params.working_days):
        since = local_midnight(site, subject.due + timedelta(days=1))
        if not start <= since < end or since > now:
            continue
        if subject.closed is not None and subject.closed.ts < since:
            continue
        summary = (
            f"{params.subject.capitalize()} {subject.opened.id}, {params.opened} on "
            f"{local_date(site, subject.opened.ts).isoformat()}, was not {params.closed} within "
            f"{_period_text(params.calendar_days, params.working_days)}; {reason}, so this is not a "
            f"violation of {citation_text(standard.section)}"
        )
        findings.append(
            make_finding(
                site,
                standard,
                FindingKind.EXEMPT_EXCEEDANCE,
                since,
                since + timedelta(seconds=1),
                summary,
                exemptions=(reason,),
                refs=(ref(subject.opened),),
                details={"due_by_end_of": subject.due.isoformat()},
            )
        )
    return findings


def early_warnings(
    site: SiteContext, standard: Standard, params: CloseWithinParams, data: SiteData, now: datetime
) -> list[Finding]:
    calendar_days, working_days = _periods(site, params)
    if calendar_days == 0 and working_days == 0:
        return []  # the exception suspends the deadline
    today = local_date(site, now)
    by_due: dict[date, list[_Subject]] = {}
    for subject in _subjects(site, params, data, calendar_days, working_days):
        if subject.opened.ts > now or (subject.closed is not None and subject.closed.ts <= now):
            continue
        left = (subject.due - today).days
        if 0 <= left <= params.warn_days:
            by_due.setdefault(subject.due, []).append(subject)
    warnings = []
    for due, subjects in sorted(by_due.items()):
        left = (due - today).days
        when = "today" if left == 0 else f"within {days_text(left)}"
        names = ", ".join(s.opened.id for s in subjects)
        summary = (
            f"{params.subject.capitalize()} {names} must be {params.closed} by the end of {due.isoformat()} "
            f"({when}) ({citation_text(standard.section)})"
        )
        warnings.append(
            make_finding(
                site,
                standard,
                FindingKind.WARNING,
                local_midnight(site, due),
                local_midnight(site, due + timedelta(days=1)),
                summary,
                measurements=(Measurement("days left", left, None, "days"),),
                refs=tuple(ref(s.opened) for s in subjects),
                details={"as_of": iso(now), "due_by_end_of": due.isoformat()},
            )
        )
    return warnings


def event_kinds(params: CloseWithinParams) -> tuple[str, ...]:
    return (params.open_kind, params.close_kind)


def margins(params: CloseWithinParams) -> tuple[timedelta, timedelta]:
    return timedelta(0), timedelta(0)  # records, not readings: the daemon passes all it holds


RULE: RuleSpec[CloseWithinParams] = RuleSpec(
    name="close_within",
    params_type=CloseWithinParams,
    evaluate=evaluate,
    margins=margins,
    early_warnings=early_warnings,
    description="A record must be followed by its closing record within calendar or working days.",
    event_kinds=event_kinds,
)
