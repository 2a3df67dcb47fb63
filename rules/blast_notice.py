"""Blast notice (Dovre 6.F).

6.F: "No less than twenty-four (24) hours notice shall be provided to the Town and all
owners of adjacent property lying within one-half (1/2) mile of the nonmetallic mine site
on which blasting is to take place."

Each blast needs a BlastNotice with the same id issued at least ``min_notice_h`` before
the detonation (exactly 24 h is enough: "no less than"). No notice, or a late one, is a
VIOLATION; a timely notice is kept as COMPLIANT evidence. The notice is judged against the
actual detonation, not the planned time: a blast fired earlier than planned can make a
timely notice late.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from rules.base import RuleSpec, Standard, iso, local_stamp, make_finding, only_site
from rules.model import BlastNotice, Finding, FindingKind, Measurement, SiteContext, SiteData


@dataclass(frozen=True, slots=True)
class BlastNoticeParams:
    min_notice_h: float = 24.0

    def __post_init__(self) -> None:
        if self.min_notice_h < 0:
            raise ValueError("min_notice_h: must not be negative")


def _hours_text(delta: timedelta) -> str:
    minutes = int(delta.total_seconds() // 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


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
    tz = site.tz
    needed = timedelta(hours=params.min_notice_h)
    notices: dict[str, BlastNotice] = {}
    for issued in data.blast_notices:
        # Several notices for one blast (a re-issue): the earliest one counts.
        if issued.id not in notices or issued.issued_ts < notices[issued.id].issued_ts:
            notices[issued.id] = issued
    findings: list[Finding] = []
    for blast in data.blasts:
        if not start <= blast.ts < end:
            continue
        notice = notices.get(blast.id)
        when = local_stamp(blast.ts, tz)
        refs: tuple[str, ...] = (f"blast:{blast.id}",)
        measurements: tuple[Measurement, ...] = ()
        details: dict[str, object] = {"required_notice_h": params.min_notice_h}
        if notice is None:
            kind = FindingKind.VIOLATION
            summary = (
                f"Blast {blast.id} at {when} had no recorded notice to the town and neighbours; "
                f"{params.min_notice_h:g} hours' notice is required (section {standard.section})"
            )
        else:
            lead = blast.ts - notice.issued_ts
            refs = (*refs, f"notice:{notice.id}")
            measurements = (
                Measurement(
                    "notice lead time", round(lead.total_seconds() / 3600, 3), params.min_notice_h, "h"
                ),
            )
            details |= {
                "notice_issued": iso(notice.issued_ts),
                "notice_planned": iso(notice.planned_ts),
                "recipients": list(notice.recipients),
            }
            if lead >= needed:
                kind = FindingKind.COMPLIANT
                summary = (
                    f"Blast {blast.id} at {when} was announced {_hours_text(lead)} ahead, meeting the "
                    f"{params.min_notice_h:g}-hour notice rule (section {standard.section})"
                )
            else:
                kind = FindingKind.VIOLATION
                shown = _hours_text(lead) if lead >= timedelta(0) else "only after the blast"
                summary = (
                    f"Blast {blast.id} at {when} was announced {shown} ahead, less than the "
                    f"{params.min_notice_h:g} hours' notice required (section {standard.section})"
                )
        findings.append(
            make_finding(
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
        )
    return findings


def early_warnings(
    site: SiteContext, standard: Standard, params: BlastNoticeParams, data: SiteData, now: datetime
) -> list[Finding]:
    """A notice whose planned time is less than the notice period after it was issued."""
    data = only_site(data, site.id)
    needed = timedelta(hours=params.min_notice_h)
    fired = {blast.id for blast in data.blasts}
    warnings: list[Finding] = []
    for notice in data.blast_notices:
        if notice.id in fired or notice.planned_ts < now:
            continue
        earliest = notice.issued_ts + needed
        if notice.planned_ts >= earliest:
            continue
        summary = (
            f"Blast {notice.id} is planned for {local_stamp(notice.planned_ts, site.tz)}, but its notice was "
            f"issued at {local_stamp(notice.issued_ts, site.tz)}; it may not be fired before "
            f"{local_stamp(earliest, site.tz)} (section {standard.section})"
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
                details={"as_of": iso(now), "earliest_allowed": iso(earliest)},
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
