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

from collections.abc import Iterator, Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from rules.base import RuleSpec, only_site
from rules.lazy import lazy_import
from rules.model import Finding, SiteContext, SiteData

if TYPE_CHECKING:
    from rules.profile import Profile

__all__ = ["RULES", "data_margins", "early_warnings", "evaluate_site"]

# Rule kind -> the module under rules/ defining its RULE. A module is imported when its rule is
# first looked up, so commands reading the store (status, notices) and modules needing only the
# data model (rules.model) do not load the rules a profile does not name.
_RULE_MODULES: tuple[str, ...] = (
    "noise",
    "blast_window",
    "blast_notice",
    "air_overpressure",
    "unreported_blast",
    "ground_vibration",
    "airblast",
    "light_trespass",
    "flashing_light",
    "high_intensity_light",
    "upward_light",
    "temporary_lighting",
    "haul_hours",
    # General rule kinds for land-disturbing activity profiles (rules/profiles/land-disturbing.toml)
    "turbidity",
    "close_within",
    "area_controls",
    "prior_plan",
    "fill_material",
)


class _Rules(Mapping[str, RuleSpec[Any]]):
    """Rule kind -> RuleSpec; names and membership without importing, a spec at first lookup."""

    def __init__(self, names: tuple[str, ...]) -> None:
        self._modules = {name: lazy_import(f"rules.{name}") for name in names}

    def __getitem__(self, name: str) -> RuleSpec[Any]:
        spec: RuleSpec[Any] = self._modules[name].RULE
        return spec

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __len__(self) -> int:
        return len(self._modules)

    def __contains__(self, name: object) -> bool:
        return name in self._modules


RULES: Mapping[str, RuleSpec[Any]] = _Rules(_RULE_MODULES)


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
