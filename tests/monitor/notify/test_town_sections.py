"""Texts beside a notice that cite a section: the profile's own numbering, none where it names none.

Dovre's texts stay as they were (its profile names 1.4.C, 6.F, 6.C.6); a made-up town's profile
(tests/data/profiles/fernhill.toml, "§ 4.7" blasting, "§ 4.5(f)" temporary lighting, no section
sparing pre-existing sites) is cited by its own sections and never by Dovre's.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from monitor.config import Config
from monitor.notify.blast_facts import _not_judged_reason
from monitor.notify.blast_report import _findings_heading
from monitor.reports.formats import allowance_note
from rules.profile import load_profile
from tests.support.notices import site_and_profile
from tests.support.paths import DATA, REPO

FERNHILL = str(DATA / "profiles" / "fernhill.toml")
OTHERTON = str(REPO / "tests" / "rules" / "profiles" / "otherton.toml")

# The blast report's findings are headed by the sections of the profile's blasting standards.
# fmt: off
HEADING_CASES = [
    pytest.param("dovre", "Findings (6.F)", id="dovre-6.F"),
    pytest.param(FERNHILL, "Findings (§ 4.7, § 4.7(c), § 4.7(d), § 4.7(e), § 4.7(f))", id="fernhill-§4.7"),
    pytest.param(OTHERTON, "Findings (§ 12-7(a), § 12-7(c))", id="otherton-§12-7"),
    pytest.param("land-disturbing", "Findings", id="land-disturbing-no-blasting-standard"),
]
# fmt: on


@pytest.mark.parametrize(("profile_name", "heading"), HEADING_CASES)
def test_the_blast_reports_findings_are_headed_by_the_profiles_sections(
    profile_name: str, heading: str
) -> None:
    assert _findings_heading(load_profile(profile_name)) == heading


# A pre-existing site's overpressure not judged: the section sparing it is the profile's
# preexisting_section (Dovre 1.4.C); a profile naming none cites none.
# fmt: off
PREEXISTING_CASES = [
    pytest.param("1.4.C", "; not judged against the limit: the site is a pre-existing operation (section"
                 " 1.4.C), which the overpressure standard does not bind", id="dovre-1.4.C"),
    pytest.param("", "; not judged against the limit: the site is a pre-existing operation, which the"
                 " overpressure standard does not bind", id="none-named"),
]
# fmt: on


@pytest.mark.parametrize(("section", "said"), PREEXISTING_CASES)
def test_a_pre_existing_site_is_spared_citing_the_profiles_section(
    config: Config, section: str, said: str
) -> None:
    site, profile = site_and_profile(config)
    standards = {k: s for k, s in profile.standards.items() if s.rule == "air_overpressure"}
    assert standards and not any(s.applies_to_preexisting for s in standards.values())
    assert _not_judged_reason(dataclasses.replace(site, preexisting=True), standards, section) == said


# The monthly report's temporary lighting line cites the allowance's section as the profile numbers it.
# fmt: off
ALLOWANCE_NOTE_CASES = [
    pytest.param({"section": "6.C.6", "allowance": 30}, "Temporary lighting (6.C.6): 0 day(s)",
                 id="dovre-6.C.6"),
    pytest.param({"section": "§ 4.5(f)", "allowance": 20}, "Temporary lighting (§ 4.5(f)): 0 day(s)",
                 id="fernhill-§4.5(f)"),
    pytest.param({"section": "", "allowance": 30}, "Temporary lighting: 0 day(s)", id="none-named"),
]
# fmt: on


@pytest.mark.parametrize(("used", "said"), ALLOWANCE_NOTE_CASES)
def test_the_reports_temporary_lighting_line_cites_the_profiles_section(
    used: dict[str, Any], said: str
) -> None:
    note = allowance_note({**used, "year": 2026, "used_in_period": 0, "used_through_period": 0, "days": []})
    assert note.startswith(said) and f"0 of {used['allowance']} days used in 2026" in note


def test_the_report_counts_the_allowance_of_the_profiles_temporary_lighting_standard() -> None:
    """The report reads the section with the counting (journal/temporary_lighting.counting_of)."""
    from monitor.journal.temporary_lighting import counting_of

    assert counting_of(load_profile("dovre")).section == "6.C.6"
    fernhill = counting_of(load_profile(FERNHILL))
    assert (fernhill.section, fernhill.max_days_per_year) == ("§ 4.5(f)", 20)
    assert counting_of(load_profile(OTHERTON)).section == ""  # no temporary lighting standard
