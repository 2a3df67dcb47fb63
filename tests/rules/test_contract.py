"""Contract every registered rule meets: Findings only, citing the standard's section, deterministic,
blind to other sites' data, and its Params a frozen dataclass with defaults (style guide, section 9)."""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np
import pytest

from rules import RULES, data_margins
from rules.base import Standard
from rules.model import AxisPeak, Finding, SeismicEvent, SiteData, WorkKind, WorkPeriod
from rules.profile import load_profile
from tests.support.rule_builders import (
    assert_rule_contract,
    at,
    blast,
    light,
    make_site,
    merged,
    notice,
    seconds,
    temporary,
    truck,
    wind,
)

PROFILE = load_profile("dovre", {"haul_hours.windows": ["06:00-19:00"]})
# The land-disturbing rule kinds meet the same contract in test_land_disturbing_contract.py.
DOVRE_RULES = sorted({s.rule for s in PROFILE.standards.values()})
START = at("2026-06-15 23:30")  # after sunset (20:56), in nautical night (from ~22:30)
END = START + timedelta(minutes=15)
SITE = make_site("pit1")
OTHER = make_site("other")


def busy_evening(site: str, shift: timedelta, louder: float) -> SiteData:
    """Something for every rule: loud minutes, a late blast with no notice, an unlogged impulse,
    trespassing, flashing, searchlight and upward light, 31 temporary-lighting days, a late truck."""
    t = START + shift
    sound = seconds(
        "n1", t - timedelta(minutes=1), 17 * 60, lambda i: 82.0 + louder if i % 120 < 90 else 60.0, site=site
    )
    impulse_at = t + timedelta(minutes=12)
    sound += seconds(
        "n2",
        impulse_at - timedelta(seconds=40),
        81,
        lambda i: 75.0 if i == 40 else 55.0,
        site=site,
        peak=lambda i: 131.0 if i == 40 else None,
    )
    square = tuple(float(v) for v in np.where((np.arange(600) / 10.0) % 1.0 < 0.5, 20.0, 0.0))
    sky_history = light("s1", t - timedelta(hours=72), 72 * 6, 0.02, step_s=600.0, site=site)
    lights = (
        light("l1", t - timedelta(minutes=10), 25, 3.0 + louder, lux_max=300.0, site=site)
        + light("l2", t - timedelta(minutes=10), 25, 10.0, burst=lambda i: square, rate=10.0, site=site)
        + [r for r in sky_history if r.ts < t]
        + light("s1", t, 15, 0.6, site=site)
    )
    days = [temporary(at("2026-05-01 12:00") + timedelta(days=i), 2, f"tl{i}", site=site) for i in range(30)]
    days.append(temporary(t + timedelta(minutes=1), 1, "tl-31", site=site))
    return SiteData(
        sound=tuple(sorted(sound, key=lambda r: (r.ts, r.sensor))),
        light=tuple(sorted(lights, key=lambda r: r.ts)),
        weather=tuple(wind(t, 90, 2.0)),
        blasts=(blast(t + timedelta(minutes=1), "late", site=site, overpressure_db=135.0 + louder),),
        blast_notices=(notice("late", t - timedelta(hours=2), t, site=site),),
        trucks=(truck(t + timedelta(minutes=3), site=site),),
        work=(WorkPeriod(site, "w1", t + timedelta(minutes=5), t + timedelta(minutes=6), WorkKind.REPAIR),),
        temporary_lighting=tuple(days),
        seismic=(seismograph_event(site, t + timedelta(minutes=1, seconds=1), louder),),
    )


def seismograph_event(site: str, ts: datetime, louder: float) -> SeismicEvent:
    """The late blast as the seismograph at the nearest house recorded it: over the curve."""
    axes = (AxisPeak("T", 20.0 + louder, 8.0), AxisPeak("V", 9.0, 12.0), AxisPeak("L", 5.0, 25.0))
    return SeismicEvent(site, "sg1", "ev-late", ts, 10.0, axes, 21.0 + louder, 150.0, 2.0)


OWN = busy_evening("pit1", timedelta(0), 0.0)
FOREIGN = busy_evening("other", timedelta(minutes=2, seconds=17), 6.0)


def standard_for(rule_name: str) -> Standard:
    return next(s for s in PROFILE.standards.values() if s.rule == rule_name)


def evaluate(rule_name: str, site, data: SiteData) -> list[Finding]:
    standard = standard_for(rule_name)
    return RULES[rule_name].evaluate(site, standard, standard.params, data, START, END, END)


@pytest.mark.parametrize("rule_name", DOVRE_RULES)
def test_rule_contract(rule_name: str) -> None:
    # A finding may start up to an hour before the interval (a sustained condition's onset).
    window = (START - timedelta(hours=1), END)
    assert_rule_contract(rule_name, evaluate, PROFILE, (SITE, OTHER), (OWN, FOREIGN), window)


@pytest.mark.parametrize("rule_name", [name for name in DOVRE_RULES if RULES[name].early_warnings])
def test_early_warning_contract(rule_name: str) -> None:
    standard = standard_for(rule_name)
    hook = RULES[rule_name].early_warnings
    assert hook is not None
    now = START + timedelta(seconds=30)
    warnings = hook(SITE, standard, standard.params, OWN, now)
    assert warnings == hook(SITE, standard, standard.params, merged(OWN, FOREIGN), now)
    assert all(w.section == standard.section and w.site == "pit1" for w in warnings)


def test_margins_are_non_negative_for_every_rule() -> None:
    for name, rule in RULES.items():
        before, after = rule.margins(rule.params_type())
        assert before >= timedelta(0) and after >= timedelta(0), name
    assert data_margins(PROFILE)[0] > timedelta(0)
