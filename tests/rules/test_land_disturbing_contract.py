"""The rule contract of tests/rules/test_contract.py for the land-disturbing rule kinds: Findings only,
citing the standard's section, deterministic, blind to other sites' data, frozen Params with defaults.
Between them the two files cover every registered rule."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from rules import RULES
from rules.base import Standard
from rules.model import Finding, GenericEvent, SiteContext, SiteData, TurbidityReading
from rules.profile import load_profile
from tests.support.land_disturbing import at, site
from tests.support.rule_builders import assert_rule_contract, merged

DOVRE = load_profile("dovre")
PROFILE = load_profile("land-disturbing")
LAND_RULES = sorted({s.rule for s in PROFILE.standards.values()})
# Midnight starts the interval: the day's continuing deadline violations fall in it.
START = at("2026-06-10 00:00")
END = START + timedelta(minutes=15)
SITE = site()
OTHER = site(site_id="other")


def busy_morning(site_id: str, louder: float) -> SiteData:
    """Something for every land-disturbing rule, a little before and inside [START, END)."""

    def ev(kind: str, event_id: str, ts: datetime, **fields: object) -> GenericEvent:
        return GenericEvent(site_id, event_id, kind, ts, fields)

    turbidity = []
    for i in range(-15, 15):
        ts = START + timedelta(minutes=i)
        turbidity.append(TurbidityReading(site_id, "t1", ts, 60.0, 40.0 + louder))
        turbidity.append(TurbidityReading(site_id, "r1", ts, 60.0, 10.0))
    events = (
        ev("slope-exposed", "s-1", at("2026-05-01 10:00"), area_sqft=2000 + louder),
        ev("construction-completed", "lot-1", at("2026-05-01 10:00"), area_sqft=9000 + louder),
        ev("disturbance-started", "lot-1", at("2026-04-01 10:00"), area_sqft=9000 + louder),
        ev("plan-filed", "P-1", at("2026-05-30 10:00")),
        ev(
            "disturbance-started",
            "lot-2",
            START + timedelta(minutes=3),
            area_sqft=6000 + louder,
            plan_id="P-1",
        ),
        ev(
            "fill-delivery",
            "load-1",
            START + timedelta(minutes=5),
            material="soil",
            max_piece_in=20,
            organic=False,
        ),
    )
    return SiteData(turbidity=tuple(turbidity), other_events=events)


OWN = busy_morning("tract1", 0.0)
FOREIGN = busy_morning("other", 7.0)


def standard_for(rule_name: str) -> Standard:
    return next(s for s in PROFILE.standards.values() if s.rule == rule_name)


def evaluate(rule_name: str, where: SiteContext, data: SiteData) -> list[Finding]:
    findings = []
    for standard in PROFILE.standards.values():
        if standard.rule == rule_name:
            findings += RULES[rule_name].evaluate(where, standard, standard.params, data, START, END, END)
    return findings


def test_every_registered_rule_has_a_contract_test() -> None:
    assert {s.rule for s in DOVRE.standards.values()} | set(LAND_RULES) == set(RULES)


@pytest.mark.parametrize("rule_name", LAND_RULES)
def test_rule_contract(rule_name: str) -> None:
    assert_rule_contract(rule_name, evaluate, PROFILE, (SITE, OTHER), (OWN, FOREIGN), (START, END))


@pytest.mark.parametrize("rule_name", [name for name in LAND_RULES if RULES[name].early_warnings])
def test_early_warning_contract(rule_name: str) -> None:
    standard = standard_for(rule_name)
    hook = RULES[rule_name].early_warnings
    assert hook is not None
    now = START + timedelta(seconds=30)
    warnings = hook(SITE, standard, standard.params, OWN, now)
    assert warnings == hook(SITE, standard, standard.params, merged(OWN, FOREIGN), now)
    assert all(w.section == standard.section and w.site == "tract1" for w in warnings)


@pytest.mark.parametrize("rule_name", LAND_RULES)
def test_event_kinds_are_declared_by_the_profile(rule_name: str) -> None:
    for standard in PROFILE.standards.values():
        reads = RULES[standard.rule].event_kinds
        if standard.rule == rule_name and reads is not None:
            assert set(reads(standard.params)) <= set(PROFILE.event_kinds)
