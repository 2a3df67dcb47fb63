"""The pure compliance core: ordinance rules as functions of data, params and a clock passed in.

    load_profile("dovre", overrides)          (rules.profile, once at startup)
            |
            v
    evaluate_site(site, profile, data, start, end, now)
            |  for each standard the profile enables for this site:
            |      RULES[standard.rule].evaluate(site, standard, standard.params, data, start, end, now)
            v
    [Finding]  -->  update_episodes (rules.episodes)  -->  the daemon stores and notifies

``RULES`` is the one place rule kinds are named; a profile naming any other rule fails
to load and lists these names. No rule reads the clock, the environment or files.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from rules import (
    air_overpressure,
    area_controls,
    blast_notice,
    blast_window,
    close_within,
    fill_material,
    flashing_light,
    haul_hours,
    high_intensity_light,
    light_trespass,
    noise,
    prior_plan,
    temporary_lighting,
    turbidity,
    unreported_blast,
    upward_light,
)
from rules.base import RuleSpec, only_site
from rules.model import Finding, SiteContext, SiteData

if TYPE_CHECKING:
    from rules.profile import Profile

__all__ = ["RULES", "data_margins", "early_warnings", "evaluate_site"]

RULES: Mapping[str, RuleSpec[Any]] = {
    "noise": noise.RULE,
    "blast_window": blast_window.RULE,
    "blast_notice": blast_notice.RULE,
    "air_overpressure": air_overpressure.RULE,
    "unreported_blast": unreported_blast.RULE,
    "light_trespass": light_trespass.RULE,
    "flashing_light": flashing_light.RULE,
    "high_intensity_light": high_intensity_light.RULE,
    "upward_light": upward_light.RULE,
    "temporary_lighting": temporary_lighting.RULE,
    "haul_hours": haul_hours.RULE,
    # General rule kinds for land-disturbing activity profiles (rules/profiles/land-disturbing.toml)
    "turbidity": turbidity.RULE,
    "close_within": close_within.RULE,
    "area_controls": area_controls.RULE,
    "prior_plan": prior_plan.RULE,
    "fill_material": fill_material.RULE,
}


def _sorted(findings: list[Finding]) -> list[Finding]:
    unique = {f.id: f for f in findings}  # a rule must not report the same thing twice
    return sorted(unique.values(), key=lambda f: (f.start, f.standard, f.sensors, f.kind.value))


def evaluate_site(
    site: SiteContext,
    profile: Profile,
    data: SiteData,
    start: datetime,
    end: datetime,
    now: datetime,
) -> list[Finding]:
    """All findings for one site over [start, end), from every standard the profile enables.

    ``data`` should hold readings over [start - lookback, end + lookahead] (see
    ``data_margins``) and all events the daemon keeps for the site. Re-evaluating the same
    interval with the same data gives the same findings and ids.
    """
    findings: list[Finding] = []
    data = only_site(data, site.id)  # once, not once per rule
    for standard in profile.enabled_for(site.preexisting):
        rule = RULES[standard.rule]
        findings.extend(rule.evaluate(site, standard, standard.params, data, start, end, now))
    return _sorted(findings)


def data_margins(profile: Profile, reading: str | None = None) -> tuple[timedelta, timedelta]:
    """(lookback, lookahead): reading data the rules need before ``start`` and after ``end``.

    With ``reading`` ("sound", "light", "weather" or "turbidity") only the rules reading that kind count,
    so the daemon need not load three days of per-second sound because the upward-light
    baseline wants three nights of light summaries. Events are not limited by margins: pass
    all the daemon holds.
    """
    lookback, lookahead = timedelta(0), timedelta(0)
    for standard in profile.standards.values():
        rule = RULES[standard.rule]
        if reading is not None and reading not in rule.reads:
            continue
        before, after = rule.margins(standard.params)
        lookback, lookahead = max(lookback, before), max(lookahead, after)
    return lookback, lookahead


def early_warnings(site: SiteContext, profile: Profile, data: SiteData, now: datetime) -> list[Finding]:
    """Cheap warnings for the operator as readings arrive (kind WARNING; ids stable per subject)."""
    warnings: list[Finding] = []
    data = only_site(data, site.id)
    for standard in profile.enabled_for(site.preexisting):
        rule = RULES[standard.rule]
        if rule.early_warnings is not None:
            warnings.extend(rule.early_warnings(site, standard, standard.params, data, now))
    return _sorted(warnings)
