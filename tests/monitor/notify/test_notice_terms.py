"""What a notice says beyond the standard (the cure period, the consequence, any hearing or appeal):
only what the profile's ordinance says, attributed to the section that says it."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from pathlib import Path

import pytest

from monitor.notify.document import NoticeContext, document_sections
from monitor.notify.notices import Notice, _citation_section, _deadline_rule
from rules.profile import Profile, load_profile


def _notice(profile_name: str, standard: str = "") -> Notice:
    profile = load_profile(profile_name)
    standard = standard or next(iter(profile.standards))
    issued = datetime(2026, 5, 5, 15, tzinfo=UTC)
    deadline = datetime(2026, 5, 20, 4, 59, 59, 999000, tzinfo=UTC)
    data = {
        "profile": profile.name,
        "timezone": "America/Chicago",
        "standard": standard,
        "section": profile.standards[standard].section,
        "required_action": profile.standards[standard].required_action,
        "cure_days": profile.cure_days,
        "cure_section": profile.cure_section,
        "deadline_rule": _deadline_rule(profile),
    }
    section = profile.standards[standard].section
    return Notice("X-2026-0001", "q1", standard, section, "open", issued, deadline, deadline, data)


def _paragraphs(notice: Notice, title: str, profile: Profile | None = None) -> str:
    context = NoticeContext(profile=profile or load_profile(str(notice.data["profile"])))
    [section] = [s for s in document_sections(notice, [], context) if s.title.startswith(title)]
    return " ".join(section.paragraphs)


def test_dovre_cure_text_is_13_3_a() -> None:
    text = _paragraphs(_notice("dovre", "noise"), "Required action")
    assert "Under section 13.3.A the Operator is granted 14 days to correct the violation" in text
    assert "shall immediately provide the Town with a written explanation" in text


def test_a_profile_naming_no_cure_section_gives_the_period_as_the_towns_setting() -> None:
    """§ 28-5 sets no period to correct and no procedure for more time: the notice neither says the
    ordinance grants the days nor that it requires a written explanation."""
    text = _paragraphs(_notice("land-disturbing", "buffer_zone"), "Required action")
    assert "The Operator has 14 days to correct the violation, counted to the end of" in text
    assert "The 14 days are the Town's setting in profile land-disturbing, not a period set by" in text
    for claim in ("ordinance the Operator is granted", "granted", "shall immediately", "written explanation"):
        assert claim not in text, claim


NOT_STATED = (
    "Hearing or appeal: not stated here; profile {name}, under which this notice was judged, does not"
    " record whether the ordinance provides one."
)


@pytest.mark.parametrize("name", ["dovre", "land-disturbing"])
def test_no_shipped_profile_makes_the_notice_say_the_ordinance_provides_no_hearing(name: str) -> None:
    """Dovre's supplied text stops after 13.3.B, which defers to the Town Citation Ordinance; § 28-5
    has no enforcement text at all. Neither is a source for "the ordinance provides no hearing"."""
    notice = _notice(name)
    text = _paragraphs(notice, "If the violation is not corrected")
    assert "provides no hearing" not in text
    assert NOT_STATED.format(name=name) in text


def test_dovre_says_a_citation_follows_the_town_citation_ordinance() -> None:
    text = _paragraphs(_notice("dovre", "noise"), "If the violation is not corrected (section 13.3.B)")
    assert "may issue a citation in accord with the Town Citation Ordinance (section 13.3.B)" in text


def test_a_profile_with_no_consequence_says_it_records_none() -> None:
    text = _paragraphs(_notice("land-disturbing", "buffer_zone"), "If the violation is not corrected")
    assert text.startswith(
        "Not stated here: profile land-disturbing, under which this notice was judged, does not record what"
        " the ordinance provides."
    )


@pytest.mark.parametrize(
    ("terms", "said"),
    [
        (
            {"hearing": "Appeal to the Town Board within 10 days.", "hearing_section": "9.1"},
            "Hearing or appeal (section 9.1): Appeal to the Town Board within 10 days.",
        ),
        (
            {"no_hearing_source": "13.4"},
            "The ordinance provides no hearing or appeal of a notice of violation (section 13.4); this notice"
            " cites none.",
        ),
        (
            {"no_hearing_source": "Town Citation Ordinance § 2"},
            "The ordinance provides no hearing or appeal of a notice of violation (Town Citation Ordinance"
            " § 2); this notice cites none.",
        ),
        ({}, NOT_STATED.format(name="dovre")),
    ],
)
def test_hearing_or_appeal_is_said_as_the_profile_says_it(terms: dict[str, str], said: str) -> None:
    profile = load_profile("dovre")
    profile = dataclasses.replace(profile, notice=dataclasses.replace(profile.notice, **terms))
    text = _paragraphs(_notice("dovre", "noise"), "If the violation is not corrected", profile)
    assert text.endswith(said)


def _rows(notice: Notice, title: str) -> list[tuple[str, str]]:
    context = NoticeContext(profile=load_profile(str(notice.data["profile"])))
    [section] = [s for s in document_sections(notice, [], context) if s.title.startswith(title)]
    return [*section.rows, *((b, "") for b in section.bullets)]


def test_land_disturbing_turbidity_notice_says_where_its_numbers_come_from() -> None:
    """28-5(a) sets no turbidity number: the notice lists the profile's readings as Considered and
    gives the NTU limits' source, never 28-5(a)."""
    notice = _notice("land-disturbing", "buffer_zone")
    considered = " ".join(b for b, _ in _rows(notice, "Considered"))
    assert "Section 28-5(a) sets no turbidity number for 'visible siltation'" in considered
    assert "15A NCAC 02B .0211" in considered
    sources = dict(_rows(notice, "Numbers used and their sources"))
    assert sources["maximum: 50 NTU"].startswith(
        "North Carolina's surface water standard for streams not designated trout waters (15A NCAC 02B .0211)"
    )
    assert sources["maximum above reference: 25 NTU"].endswith("section 28-5(a) gives no number")
    assert sources["minimum duration: 600 s"] == (
        "set by the Town in profile land-disturbing; the ordinance gives no number"
    )
    assert not any(said.startswith("the ordinance's own") for said in sources.values())


@pytest.mark.parametrize(
    ("standard", "row", "said"),
    [
        ("slopes", "calendar days: 21", "the ordinance's own, section 28-5(b)"),
        ("fill_material", "maximum piece: 12 in", "the ordinance's own, section 28-5(c)"),
        ("erosion_control", "maximum area: 5000 sq ft", "the ordinance's own, section 28-5(d)"),
        ("ground_cover", "working days: 15", "the ordinance's own, section 28-5(d)"),
        ("ground_cover", "calendar days: 90", "the ordinance's own, section 28-5(d)"),
        ("prior_plan", "minimum days filed: 30", "the ordinance's own, section 28-5(e)"),
    ],
)
def test_land_disturbing_numbers_28_5_sets_are_cited_to_their_subsection(
    standard: str, row: str, said: str
) -> None:
    sources = dict(_rows(_notice("land-disturbing", standard), "Numbers used and their sources"))
    assert sources[row] == said


FERNHILL = str(Path(__file__).parents[2] / "data" / "profiles" / "fernhill.toml")
OTHERTON = str(Path(__file__).parents[2] / "rules" / "profiles" / "otherton.toml")

# How a rolled cure deadline is counted cites the profile's source for the reading
# (cure_next_business_day_source: Dovre's Wis. Stat. 990.001(4)) and no statute where it names none.
# fmt: off
DEADLINE_RULE_CASES = [
    pytest.param("dovre", ", moved to the next business day when that day is a Sunday or legal holiday"
                 " (Wis. Stat. 990.001(4))", id="dovre-wis-stat"),
    pytest.param(FERNHILL, ", moved to the next business day when that day is a Saturday, Sunday or legal"
                 " holiday", id="fernhill-no-statute"),
]
# fmt: on


@pytest.mark.parametrize(("profile_name", "rolled"), DEADLINE_RULE_CASES)
def test_the_deadline_rule_cites_the_profiles_source_only(profile_name: str, rolled: str) -> None:
    profile = load_profile(profile_name, {"cure_next_business_day": True})
    days = profile.cure_days
    assert (
        _deadline_rule(profile)
        == f"the end of the site's local day {days} days after the day of issue{rolled}"
    )


# The section a recommended citation names is the profile's [notice] consequence_section, never
# one made up from the cure section's name (otherton names none).
@pytest.mark.parametrize(
    ("profile_name", "citation"), [("dovre", "13.3.B"), (FERNHILL, "§ 9.1(b)"), (OTHERTON, "")]
)
def test_the_citation_section_is_the_profiles(profile_name: str, citation: str) -> None:
    assert _citation_section(load_profile(profile_name)) == citation


def test_the_words_on_more_time_are_the_profiles() -> None:
    """Dovre's 13.3.A words on asking for more time ([notice] more_time) follow its period; a town
    whose profile gives none (Fernhill) is granted its period under its own section, without them."""
    text = _paragraphs(_notice(FERNHILL, "noise"), "Required action", load_profile(FERNHILL))
    assert "Under § 9.1(a) the Operator is granted 10 days to correct the violation, counted" in text
    for claim in ("shall immediately", "written explanation", "13.3"):
        assert claim not in text, claim
    dovre = load_profile("dovre").notice.more_time
    assert dovre.startswith("If circumstances require more time, the Operator shall immediately provide")
