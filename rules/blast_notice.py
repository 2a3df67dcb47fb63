"""Blast notice (Dovre 6.F).

6.F: "No less than twenty-four (24) hours notice shall be provided to the Town and all
owners of adjacent property lying within one-half (1/2) mile of the nonmetallic mine site
on which blasting is to take place."

Each blast needs a BlastNotice with the same id that

* was issued at least ``min_notice_h`` before the detonation (exactly 24 h is enough:
  "no less than"), judged against the actual detonation, not the planned time;
* announced a time the blast kept: a blast fired more than ``early_tolerance_h`` before
  the planned time, or on a local day more than ``late_tolerance_days`` after the planned
  day, was not the blast the notice announced (a notice for Friday 14:00 does not warn anyone
  of a blast on Thursday 14:30, nor one for June 3 of a blast on July 15), so that notice does
  not count; of the notices that announced the blast's time, the earliest timely one gives the
  lead;
* reached the Town (a recipient that is one of the site's Town contacts by id or name,
  ``SiteContext.town_contacts``, or one of the profile's ``town_recipients``) and every owner
  the site configuration lists (``SiteContext.adjoining_owners``: 6.F's owners of adjacent
  property within half a mile). A re-issued notice for the same blast that is itself timely
  adds its recipients; one reached only by a late notice is named with the lead they had.

The hours are elapsed time unless ``hours_exclude`` lists whole local days to leave out, as
Wis. Stat. 990.001(4)(a) does Sundays and legal holidays for a time "expressed in hours".

Recipients are identities: ``check_recipients`` tells which of the configured people a list of
recipients reaches, whom it misses, and which names match no one. A name that matches no one
counts for no one; the operator is told at once (the portal's form answer and an early warning
while the blast is pending), so a misspelt name is not first discovered as a violation.

Any of these missing is one VIOLATION for the blast, saying which test failed and naming
who was missed; otherwise the blast is kept as COMPLIANT evidence. Which names count as
"the Town", and the one-hour tolerance, are this project's readings for the Town to confirm
(they are listed in the finding's ``details["considered"]``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from rules.base import RuleSpec, Standard, make_finding, only_site
from rules.citation import citation_text
from rules.deadlines import WEEKDAYS, WorkCalendar
from rules.holidays import CALENDARS, holiday_entry
from rules.model import (
    AdjoiningOwner,
    Blast,
    BlastNotice,
    Finding,
    FindingKind,
    Measurement,
    SiteContext,
    SiteData,
    TownContact,
)
from rules.numbers import within
from rules.times import iso, local_stamp


@dataclass(frozen=True, slots=True)
class BlastNoticeParams:
    min_notice_h: float = field(default=24.0, metadata=within(minimum=0, maximum=8760, unit=" h"))
    # A blast this much earlier than the notice's planned time was not the blast announced.
    early_tolerance_h: float = field(default=1.0, metadata=within(minimum=0, maximum=168, unit=" h"))
    # Recipient names that mean "the Town" (case and spacing ignored).
    town_recipients: tuple[str, ...] = ("Town", "Town Clerk", "Town Board")
    check_recipients: bool = True
    # A notice announces a blast on its planned site-local day: one fired this many local days
    # after it (0: a later day at all) was not the blast announced.
    late_tolerance_days: int = field(default=0, metadata=within(minimum=0, maximum=31, unit=" days"))
    # Whole local days left out of the notice's hours, midnight to midnight: weekday names and
    # holiday calendars or dates (rules.holidays). Wis. Stat. 990.001(4)(a) leaves out Sundays and
    # legal holidays from a time "expressed in hours": ["sunday", "wisconsin"] counts that way.
    hours_exclude: tuple[str, ...] = ()
    # The law on counting a time expressed in hours, cited beside the counting in every finding
    # (Dovre: "Wis. Stat. 990.001(4)(a)"); "" cites none.
    hours_source: str = ""
    # Which owners the ordinance requires notice to, in its words, listed before the owners checked
    # (Dovre: its 6.F owners, not section 2's "adjoining property"); "" says only what is checked.
    owners_reading: str = ""

    def __post_init__(self) -> None:
        for entry in self.hours_exclude:
            if entry.lower() not in WEEKDAYS and not holiday_entry(entry):
                raise ValueError(
                    "hours_exclude: expected weekday names, dates like '2026-07-03' or calendars"
                    f" ({', '.join(CALENDARS)}), got {entry!r}"
                )
        if self.check_recipients and not self.town_recipients:
            raise ValueError("town_recipients: list at least one name that means the Town")


def _norm(name: str) -> str:
    return " ".join(name.split()).casefold()


@dataclass(frozen=True, slots=True)
class RecipientCheck:
    """What a notice's recipients reach, as identities (``check_recipients``)."""

    reached: tuple[str, ...]  # "the Town" (first, when reached) and each owner's label
    missed: tuple[str, ...]  # "the Town" and each listed owner not reached
    unmatched: tuple[str, ...]  # recipients (as written) that are no Town contact or owner


def _town_names(site: SiteContext, params: BlastNoticeParams) -> set[str]:
    contact: TownContact
    names = {_norm(t) for t in params.town_recipients}
    for contact in site.town_contacts:
        names |= {_norm(contact.id), _norm(contact.name)}
    return names - {""}


def _owner_names(owner: AdjoiningOwner) -> set[str]:
    return {_norm(owner.id), _norm(owner.name)} - {""}


def check_recipients(
    site: SiteContext, params: BlastNoticeParams, recipients: tuple[str, ...]
) -> RecipientCheck:
    """Which of the Town and the listed adjoining owners ``recipients`` reach, whom they miss, and
    which of them match no one (each recipient is an id or a name; case and spacing ignored)."""
    given = {_norm(r) for r in recipients} - {""}
    town = _town_names(site, params)
    reached: list[str] = []
    missed: list[str] = []
    (reached if given & town else missed).append("the Town")
    known = set(town)
    for owner in site.adjoining_owners:
        names = _owner_names(owner)
        known |= names
        (reached if given & names else missed).append(owner.label)
    unmatched: dict[str, str] = {}  # one entry per name (case and spacing ignored), as first written
    for r in recipients:
        if _norm(r) and _norm(r) not in known:
            unmatched.setdefault(_norm(r), " ".join(r.split()))
    return RecipientCheck(tuple(reached), tuple(missed), tuple(unmatched.values()))


def missed_recipients(site: SiteContext, params: BlastNoticeParams, recipients: tuple[str, ...]) -> list[str]:
    """Who of the Town and the listed adjoining owners the recipients do not include."""
    return list(check_recipients(site, params, recipients).missed)


def unmatched_text(unmatched: tuple[str, ...]) -> str:
    """The one sentence the operator reads about names that match no one (form answer, warning)."""
    names = ", ".join(repr(n) for n in unmatched)
    return (
        f"{'recipient' if len(unmatched) == 1 else 'recipients'} {names} "
        f"{'matches' if len(unmatched) == 1 else 'match'} no Town contact or adjoining owner in the "
        "configuration and count for no one"
    )


def considered(params: BlastNoticeParams, site: SiteContext) -> list[str]:
    """This rule's readings of the notice standard the Town should confirm, for the notice's
    "Considered" list; what the ordinance itself says comes from the params (``hours_source``,
    ``owners_reading``), cited only where the profile gives it."""
    towns = ", ".join(repr(t) for t in params.town_recipients)
    owners = (
        f"{len(site.adjoining_owners)} owner(s) listed in the site configuration"
        if site.adjoining_owners
        else "no owners are listed in the site configuration, so only the Town was checked"
    )
    later = (
        "on the notice's planned local day"
        if params.late_tolerance_days == 0
        else f"within {params.late_tolerance_days} local day(s) after the notice's planned day"
    )
    source = params.hours_source
    whose = f"{source} reading, " if source else ""
    hours = (
        f"The {params.min_notice_h:g} hours are counted leaving out, midnight to midnight, the days of "
        f"{', '.join(params.hours_exclude)} ({whose}for the Town to confirm)."
        if params.hours_exclude
        else f"The {params.min_notice_h:g} hours are counted as elapsed time, Sundays and holidays included"
        + (f"; {source} would leave them out of a time expressed in hours" if source else "")
        + " (minewatch reading, for the Town to confirm)."
    )
    reading = f"{params.owners_reading}; minewatch checks" if params.owners_reading else "minewatch checks"
    return [
        f"A blast more than {params.early_tolerance_h:g} h before the notice's planned time is not "
        "the blast that notice announced (minewatch reading, for the Town to confirm).",
        f"A notice announces a blast {later}: a blast fired later was not the blast that notice"
        " announced (minewatch reading, for the Town to confirm).",
        hours,
        f"A recipient named {towns} counts as notice to the Town (minewatch reading).",
        f"Owners: {reading} the owners the Town listed for the site: {owners}.",
    ] + (
        [f"The Town's notice contacts in the site configuration: {contacts}; each counts as the Town."]
        if (contacts := ", ".join(c.label for c in site.town_contacts))
        else []
    )


def _hours_text(delta: timedelta) -> str:
    minutes = int(delta.total_seconds() // 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def notice_hours(issued: datetime, fired: datetime, params: BlastNoticeParams, tz: ZoneInfo) -> timedelta:
    """The notice's lead, less the whole local days ``hours_exclude`` leaves out (midnight to
    midnight, so a Sunday of 23 or 25 hours is left out as it stands)."""
    issued, fired = issued.astimezone(UTC), fired.astimezone(UTC)
    lead = fired - issued
    if not params.hours_exclude or lead <= timedelta(0):
        return lead
    days = WorkCalendar.of(
        [e for e in params.hours_exclude if e.lower() in WEEKDAYS],
        [e for e in params.hours_exclude if e.lower() not in WEEKDAYS],
    )
    day = issued.astimezone(tz).date()
    while day <= fired.astimezone(tz).date():
        if not days.is_working(day):
            left_out = min(fired, _midnight(day + timedelta(days=1), tz)) - max(issued, _midnight(day, tz))
            lead -= max(left_out, timedelta(0))
        day += timedelta(days=1)
    return lead


def earliest_allowed(issued: datetime, params: BlastNoticeParams, tz: ZoneInfo) -> datetime:
    """The first moment a blast may go off after a notice issued at ``issued``."""
    needed = timedelta(hours=params.min_notice_h)
    earliest = issued.astimezone(UTC) + needed
    for _ in range(1000):  # each step passes at least one more left-out day; a year has 366
        short = needed - notice_hours(issued, earliest, params, tz)
        if short <= timedelta(0):
            break
        earliest += short
    return earliest


def _midnight(day: date, tz: ZoneInfo) -> datetime:
    # In UTC: Python subtracts two times of one zone object by their wall clocks, which a
    # daylight-saving change makes an hour wrong.
    return datetime.combine(day, time(0), tzinfo=tz).astimezone(UTC)


def announces(notice: BlastNotice, blast: Blast, params: BlastNoticeParams, tz: ZoneInfo) -> bool:
    """Whether the notice announced this blast's time: not fired more than the tolerance before
    the planned time, nor on a local day past the planned day and its tolerance."""
    if blast.ts < notice.planned_ts - timedelta(hours=params.early_tolerance_h):
        return False
    late_days = (blast.ts.astimezone(tz).date() - notice.planned_ts.astimezone(tz).date()).days
    return late_days <= params.late_tolerance_days


def evaluate(
    site: SiteContext,
    standard: Standard,
    params: BlastNoticeParams,
    data: SiteData,
    start: datetime,
    end: datetime,
    now: datetime,
) -> list[Finding]:
    data = only_site(data, site.id)
    by_blast: dict[str, list[BlastNotice]] = {}
    for issued in sorted(data.blast_notices, key=lambda n: n.issued_ts):
        by_blast.setdefault(issued.id, []).append(issued)
    return [
        _judge(site, standard, params, blast, by_blast.get(blast.id, []))
        for blast in data.blasts
        if start <= blast.ts < end
    ]


def _judge(
    site: SiteContext,
    standard: Standard,
    params: BlastNoticeParams,
    blast: Blast,
    notices: list[BlastNotice],
) -> Finding:
    """The notices (of this blast's id, earliest issued first) that announced the blast's time
    decide: the earliest of them that is timely gives the lead; a timely notice's recipients are
    reached, those of a late one reached too late."""
    tz = site.tz
    needed = timedelta(hours=params.min_notice_h)
    when = local_stamp(blast.ts, tz)
    section = f"({citation_text(standard.section)})"
    refs: tuple[str, ...] = (f"blast:{blast.id}",)
    details: dict[str, object] = {
        "required_notice_h": params.min_notice_h,
        "early_tolerance_h": params.early_tolerance_h,
        "considered": considered(params, site),
    }
    problems: list[str] = []
    if not notices:
        details["decided_by"] = "no_notice"
        problems.append(
            f"had no recorded notice to the Town and neighbours; {params.min_notice_h:g} hours' "
            "notice is required"
        )
        details["problems"] = problems
        details["missed_recipients"] = missed_recipients(site, params, ()) if params.check_recipients else []
        summary = f"Blast {blast.id} at {when} {problems[0]} {section}"
        return make_finding(
            site,
            standard,
            FindingKind.VIOLATION,
            blast.ts,
            blast.ts + timedelta(seconds=1),
            summary,
            refs=refs,
            details=details,
        )
    matching = [n for n in notices if announces(n, blast, params, tz)]
    timely = [n for n in matching if notice_hours(n.issued_ts, blast.ts, params, tz) >= needed]
    late = [n for n in matching if n not in timely]
    counted = timely or matching or notices
    first = counted[0]  # the earliest issued of those that count: the longest lead they gave
    lead = notice_hours(first.issued_ts, blast.ts, params, tz)
    refs = (*refs, f"notice:{first.id}")
    measurements = (
        Measurement("notice lead time", round(lead.total_seconds() / 3600, 3), params.min_notice_h, "h"),
    )
    recipients = tuple(dict.fromkeys(r for n in (timely or matching) for r in n.recipients))
    details |= {
        "notice_issued": iso(first.issued_ts),
        "notice_planned": iso(first.planned_ts),
        "recipients": list(recipients),
    }
    if not matching:
        announced = notices[-1]  # the latest word on this blast
        planned = announced.planned_ts
        if blast.ts < planned:
            details["decided_by"] = "fired_early"
            details["fired_early_h"] = round((planned - blast.ts).total_seconds() / 3600, 3)
            how = (
                f"was fired {_hours_text(planned - blast.ts)} before the time its notice announced "
                f"({local_stamp(planned, tz)}), more than the {params.early_tolerance_h:g} h allowed"
            )
        else:
            details["decided_by"] = "fired_late"
            details["fired_late_h"] = round((blast.ts - planned).total_seconds() / 3600, 3)
            how = (
                f"was fired {_hours_text(blast.ts - planned)} after the time its notice announced "
                f"({local_stamp(planned, tz)}), on a later day than the notice gave"
            )
        problems.append(f"{how}, so that notice did not give notice of this blast")
    elif not timely:
        details["decided_by"] = "lead_time"
        if lead >= timedelta(0):
            problems.append(
                f"was announced {_hours_text(lead)} ahead, less than the {params.min_notice_h:g} hours'"
                " notice required"
            )
        else:
            problems.append(
                f"was announced only {_hours_text(-lead)} after it went off; {params.min_notice_h:g} hours'"
                " notice is required before"
            )
    check = check_recipients(site, params, recipients)
    missed = list(check.missed) if params.check_recipients else []
    details["missed_recipients"] = missed
    if params.check_recipients and check.unmatched:
        details["unmatched_recipients"] = list(check.unmatched)
    if missed:
        details.setdefault("decided_by", "recipients")
        too_late = _reached_late(site, params, blast, late, missed) if timely else {}
        never = [who for who in missed if who not in too_late]
        if never:
            problems.append(f"was not announced to {', '.join(never)}")
        problems.extend(
            f"was announced to {who} only {_hours_text(hours)} ahead" for who, hours in too_late.items()
        )
    details["problems"] = problems
    if problems:
        summary = f"Blast {blast.id} at {when} {'; and '.join(problems)} {section}"
        kind = FindingKind.VIOLATION
    else:
        details["decided_by"] = "compliant"
        summary = (
            f"Blast {blast.id} at {when} was announced {_hours_text(lead)} ahead to the Town and every "
            f"listed owner, meeting the {params.min_notice_h:g}-hour notice rule {section}"
        )
        kind = FindingKind.COMPLIANT
    return make_finding(
        site,
        standard,
        kind,
        blast.ts,
        blast.ts + timedelta(seconds=1),
        summary,
        measurements=measurements,
        refs=refs,
        details=details,
    )


def _reached_late(
    site: SiteContext, params: BlastNoticeParams, blast: Blast, late: list[BlastNotice], missed: list[str]
) -> dict[str, timedelta]:
    """Of those the timely notices missed, who a late notice of this blast's time reached, with
    the lead the first such notice gave them."""
    reached: dict[str, timedelta] = {}
    for notice in late:  # earliest issued first
        for who in check_recipients(site, params, notice.recipients).reached:
            if who in missed and who not in reached:
                reached[who] = notice_hours(notice.issued_ts, blast.ts, params, site.tz)
    return reached


def early_warnings(
    site: SiteContext, standard: Standard, params: BlastNoticeParams, data: SiteData, now: datetime
) -> list[Finding]:
    """A pending blast whose notice came too late for its planned time, or missed someone.

    One warning per notice (its id keys on the planned time), saying every problem, so the
    operator can re-issue the notice in time or move the blast.
    """
    data = only_site(data, site.id)
    # As of ``now`` (the data clock may hold records ahead of it): the blasts fired by then. A
    # notice is known as soon as it is in (one given in the portal while a simulated day is
    # replayed carries the wall clock's time, after the data's).
    fired = {blast.id for blast in data.blasts if blast.ts <= now}
    sent: dict[str, list[str]] = {}
    for issued in data.blast_notices:
        sent.setdefault(issued.id, []).extend(issued.recipients)
    warnings: list[Finding] = []
    for notice in data.blast_notices:
        if notice.id in fired or notice.planned_ts < now:
            continue
        earliest = earliest_allowed(notice.issued_ts, params, site.tz)
        late = notice.planned_ts < earliest
        check = check_recipients(site, params, tuple(sent[notice.id]))
        missed = list(check.missed) if params.check_recipients else []
        unmatched = check.unmatched if params.check_recipients else ()
        if not late and not missed and not unmatched:
            continue
        problems = []
        if late:
            problems.append(
                f"its notice was issued at {local_stamp(notice.issued_ts, site.tz)}; it may not be fired "
                f"before {local_stamp(earliest, site.tz)}"
            )
        if missed:
            problems.append(f"its notice has not gone to {', '.join(missed)}")
        if unmatched:
            problems.append(f"its notice's {unmatched_text(unmatched)}")
        summary = (
            f"Blast {notice.id} is planned for {local_stamp(notice.planned_ts, site.tz)}, but "
            f"{'; and '.join(problems)} ({citation_text(standard.section)})"
        )
        warnings.append(
            make_finding(
                site,
                standard,
                FindingKind.WARNING,
                notice.planned_ts,
                notice.planned_ts + timedelta(seconds=1),
                summary,
                refs=(f"notice:{notice.id}",),
                details={
                    "as_of": iso(now),
                    "earliest_allowed": iso(earliest),
                    "missed_recipients": missed,
                    "unmatched_recipients": list(unmatched),
                },
            )
        )
    return warnings


RULE: RuleSpec[BlastNoticeParams] = RuleSpec(
    name="blast_notice",
    params_type=BlastNoticeParams,
    evaluate=evaluate,
    early_warnings=early_warnings,
    description="Each blast needs a notice issued a minimum time before detonation.",
)
