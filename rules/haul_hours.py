"""Haul hours (Dovre 5.A.6: "The Town reserves the right to impose time-of-day use
restrictions so as to avoid conflict of use for hauling ... with other uses of the highway
including, but not limited to, school buses").

The restriction itself comes from the profile or, usually, from a site's operations or
highway use agreement (``overrides={"haul_hours.windows": ["06:00-07:30", "08:30-15:00"]}``).
With no windows the rule is idle. A truck passage (in or out, at one of ``gates`` or any
gate when empty) whose local time lies outside every window is a VIOLATION. Windows are
inclusive and may wrap past midnight ("22:00-02:00").
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from rules.base import RuleSpec, Standard, make_finding, only_site
from rules.citation import citation_text
from rules.model import Finding, FindingKind, SiteContext, SiteData
from rules.times import in_clock_window, local_hms, parse_clock_window


@dataclass(frozen=True, slots=True)
class HaulHoursParams:
    windows: tuple[str, ...] = ()  # local "HH:MM-HH:MM"; empty: no restriction
    gates: tuple[str, ...] = ()  # empty: every gate
    weekdays_only: bool = False  # if true, no hauling on Saturday or Sunday at all

    def __post_init__(self) -> None:
        for window in self.windows:
            try:
                parse_clock_window(window)
            except ValueError as exc:
                raise ValueError(f"windows: {exc}") from None


def evaluate(
    site: SiteContext,
    standard: Standard,
    params: HaulHoursParams,
    data: SiteData,
    start: datetime,
    end: datetime,
    now: datetime,
) -> list[Finding]:
    if not params.windows and not params.weekdays_only:
        return []
    data = only_site(data, site.id)
    windows = [parse_clock_window(w) for w in params.windows]
    tz = site.tz
    findings: list[Finding] = []
    for truck in data.trucks:
        if not start <= truck.ts < end or (params.gates and truck.gate not in params.gates):
            continue
        local = truck.ts.astimezone(tz)
        clock = local.time()
        weekend = params.weekdays_only and local.weekday() >= 5
        if not weekend and (not windows or any(in_clock_window(clock, w) for w in windows)):
            continue
        allowed = ", ".join(params.windows) if params.windows else "any time"
        when = "on a weekend" if weekend else f"outside the allowed hauling hours ({allowed})"
        which = f" {truck.truck_id}" if truck.truck_id else ""
        moved = "entered" if truck.direction == "in" else "left"
        summary = (
            f"Haul truck{which} {moved} at {site.gate_label(truck.gate)} at "
            f"{local_hms(truck.ts, tz)} local on {local.date().isoformat()}, {when} "
            f"({citation_text(standard.section)})"
        )
        findings.append(
            make_finding(
                site,
                standard,
                FindingKind.VIOLATION,
                truck.ts,
                truck.ts + timedelta(seconds=1),
                summary,
                refs=(f"truck:{truck.id}",),
                details={"gate": truck.gate, "direction": truck.direction, "windows": list(params.windows)},
            )
        )
    return findings


RULE: RuleSpec[HaulHoursParams] = RuleSpec(
    name="haul_hours",
    params_type=HaulHoursParams,
    evaluate=evaluate,
    description="Truck passages outside agreed local hauling hours.",
)
