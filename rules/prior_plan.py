"""Plan filed and approved before an activity starts (land-disturbing 28-5(e)).

28-5(e): "No person shall initiate any land-disturbing activity that will disturb more than
5,000 square feet on a tract unless, 30 or more days prior to initiating the activity, a
soil erosion and sedimentation control plan is filed with and approved by the town. An
erosion and sedimentation control plan may be filed less than 30 days prior to
initialization of a land-disturbing activity if the plan is submitted under an approved
express permit program. The land-disturbing activity may be initiated and conducted in
accordance with the plan once the plan has been approved."

Each ``start_kind`` record (``disturbance-started``) whose ``area_field`` is more than
``min_area_sqft`` is judged at its time against its plan: the ``filed_kind`` and
``approved_kind`` records whose id is the start record's ``plan_field`` (or, without
one, the start record's own id). The plan must be filed ``min_days_filed`` or more local
calendar days before the start day (filed on 2 May, started on 1 June: 30 days, enough)
and approved at or before the start. Under an express permit program (``express_permit``
in the site's agreement, or the site flag named by ``express_flag``) the days do not
apply; filing and approval before the start still do.

A failed check is a VIOLATION naming every reason; a start that meets them is kept as
COMPLIANT evidence. A start record without an area is judged (an activity over the size
is the one that needs the plan; the operator shows it is smaller by giving the area).

Early warning: a plan filed but not yet followed by a start tells the operator the
earliest day the activity may begin, and that approval is still needed if it is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from rules.base import RuleSpec, Standard, make_finding
from rules.citation import citation_text
from rules.deadlines import (
    events_of,
    first_by_id,
    flag_set,
    local_date,
    local_midnight,
    number_field,
    ref,
    text_field,
)
from rules.model import Finding, FindingKind, GenericEvent, Measurement, SiteContext, SiteData
from rules.numbers import within
from rules.times import iso, local_stamp


@dataclass(frozen=True, slots=True)
class PriorPlanParams:
    start_kind: str = "disturbance-started"
    filed_kind: str = "plan-filed"
    approved_kind: str = "plan-approved"
    area_field: str = "area_sqft"
    # "more than 5,000 square feet"
    min_area_sqft: float = field(default=5000.0, metadata=within(minimum=0, maximum=1e9, unit=" sq ft"))
    plan_field: str = "plan_id"
    min_days_filed: int = field(default=30, metadata=within(minimum=0, maximum=3650, unit=" days"))
    express_permit: bool = False  # the site's plans go through an approved express permit program
    express_flag: str = "express_permit"

    def __post_init__(self) -> None:
        if not self.start_kind or not self.filed_kind or not self.approved_kind:
            raise ValueError("start_kind: start_kind, filed_kind and approved_kind are required")


def _express(site: SiteContext, params: PriorPlanParams) -> str | None:
    if params.express_permit:
        return "express permit program (agreement)"
    if flag_set(site, params.express_flag):
        return f"express permit program (site flag {params.express_flag})"
    return None


def _plan_id(params: PriorPlanParams, started: GenericEvent) -> str:
    return text_field(started, params.plan_field) or started.id


def evaluate(
    site: SiteContext,
    standard: Standard,
    params: PriorPlanParams,
    data: SiteData,
    start: datetime,
    end: datetime,
    now: datetime,
) -> list[Finding]:
    filed = first_by_id(events_of(data, site, params.filed_kind))
    approved = first_by_id(events_of(data, site, params.approved_kind))
    express = _express(site, params)
    findings = []
    for started in first_by_id(events_of(data, site, params.start_kind)).values():
        if not start <= started.ts < end:
            continue
        area = number_field(started, params.area_field)
        if area is not None and area <= params.min_area_sqft:
            continue
        plan_id = _plan_id(params, started)
        plan_filed, plan_approved = filed.get(plan_id), approved.get(plan_id)
        when = local_stamp(started.ts, site.tz)
        reasons: list[str] = []
        measurements: list[Measurement] = []
        refs = [ref(started)]
        details: dict[str, object] = {
            "plan_id": plan_id,
            "area_sqft": area,
            "express_permit": express is not None,
        }
        if plan_filed is None:
            reasons.append(f"no plan {plan_id} was filed" + (" or approved" if plan_approved is None else ""))
        else:
            refs.append(ref(plan_filed))
            days = (local_date(site, started.ts) - local_date(site, plan_filed.ts)).days
            details["filed"] = iso(plan_filed.ts)
            measurements.append(Measurement("days from filing to start", days, params.min_days_filed, "days"))
            if plan_filed.ts > started.ts:
                reasons.append(f"plan {plan_id} was filed only after the start")
            elif express is None and days < params.min_days_filed:
                reasons.append(
                    f"plan {plan_id} was filed {days} days before the start, less than the "
                    f"{params.min_days_filed} days required"
                )
        if plan_filed is not None and (plan_approved is None or plan_approved.ts > started.ts):
            reasons.append(f"plan {plan_id} was not approved before the start")
        if plan_approved is not None:
            refs.append(ref(plan_approved))
            details["approved"] = iso(plan_approved.ts)
        size = "an unstated area" if area is None else f"{area:,.0f} square feet"
        under = f" under an {express}" if express else ""
        if reasons:
            kind = FindingKind.VIOLATION
            summary = (
                f"Land-disturbing activity {started.id} ({size}) started at {when}{under}, but "
                f"{'; '.join(reasons)} ({citation_text(standard.section)})"
            )
        else:
            kind = FindingKind.COMPLIANT
            summary = (
                f"Land-disturbing activity {started.id} ({size}) started at {when}{under} with plan "
                f"{plan_id} filed and approved beforehand ({citation_text(standard.section)})"
            )
        findings.append(
            make_finding(
                site,
                standard,
                kind,
                started.ts,
                started.ts + timedelta(seconds=1),
                summary,
                measurements=tuple(measurements),
                exemptions=(express,) if express and kind is FindingKind.COMPLIANT else (),
                refs=tuple(refs),
                details=details,
            )
        )
    return findings


def early_warnings(
    site: SiteContext, standard: Standard, params: PriorPlanParams, data: SiteData, now: datetime
) -> list[Finding]:
    used = {_plan_id(params, e) for e in events_of(data, site, params.start_kind)}
    approved = first_by_id(events_of(data, site, params.approved_kind))
    express = _express(site, params)
    warnings = []
    for plan in first_by_id(events_of(data, site, params.filed_kind)).values():
        if plan.id in used or plan.ts > now:
            continue
        earliest_day = local_date(site, plan.ts) + timedelta(days=0 if express else params.min_days_filed)
        approval = approved.get(plan.id)
        waiting = approval is None or approval.ts > now
        if not waiting and local_date(site, now) >= earliest_day:
            continue  # free to start
        needs = []
        if local_date(site, now) < earliest_day:
            needs.append(f"on {earliest_day.isoformat()} at the earliest")
        if waiting:
            needs.append("only once the plan is approved")
        summary = (
            f"Land-disturbing activity under plan {plan.id} may start {', and '.join(needs)} "
            f"({citation_text(standard.section)})"
        )
        warnings.append(
            make_finding(
                site,
                standard,
                FindingKind.WARNING,
                local_midnight(site, earliest_day),
                local_midnight(site, earliest_day + timedelta(days=1)),
                summary,
                refs=(ref(plan),),
                details={
                    "as_of": iso(now),
                    "earliest_day": earliest_day.isoformat(),
                    "approved": not waiting,
                },
            )
        )
    return warnings


def event_kinds(params: PriorPlanParams) -> tuple[str, ...]:
    return (params.start_kind, params.filed_kind, params.approved_kind)


def margins(params: PriorPlanParams) -> tuple[timedelta, timedelta]:
    return timedelta(0), timedelta(0)  # records, not readings


RULE: RuleSpec[PriorPlanParams] = RuleSpec(
    name="prior_plan",
    params_type=PriorPlanParams,
    evaluate=evaluate,
    margins=margins,
    early_warnings=early_warnings,
    description="An activity over a size needs a plan filed days ahead and approved before it starts.",
    event_kinds=event_kinds,
)
