"""The land-disturbing profile against the ordinance it models: § 28-5 as the Town provided it
(tests/data/land-disturbing-activity-standards.txt). Each standard quotes the words of the
subsection it cites, each limit is the number those words give, each citation key is written
(as "" where § 28-5 has no such section), and the sentences no standard judges say so on the
findings of the standard beside them."""

from __future__ import annotations

import re
from datetime import datetime

import pytest

from rules.model import SiteData
from rules.profile import citation_gaps_of
from tests.support.land_disturbing import LAND, at, ev, first_minute, records, run
from tests.support.paths import DATA

ORDINANCE = " ".join((DATA / "land-disturbing-activity-standards.txt").read_text().split())
# "(a) Buffer zone. ..." up to the next subsection: the text of each lettered subsection.
SUBSECTIONS = {
    f"28-5({letter})": text
    for letter, text in re.findall(r"\(([a-f])\) (.*?)(?= \([a-f]\) | \(Ord\. No\.)", ORDINANCE)
}

case = pytest.param


def test_the_ordinance_copy_has_subsections_a_to_f() -> None:
    assert list(SUBSECTIONS) == [f"28-5({letter})" for letter in "abcdef"]


@pytest.mark.parametrize("key", list(LAND.standards))
def test_each_standard_quotes_the_subsection_it_cites(key: str) -> None:
    standard = LAND.standard(key)
    assert " ".join(standard.text.split()) in SUBSECTIONS[standard.section]


# fmt: off
LIMIT_CASES = [
    case("slopes", "calendar_days", "within {} calendar days", id="28-5(b)-21-calendar-days"),
    case("fill_material", "max_piece_in", "brick exceeding {:g} inches", id="28-5(c)-12-inches"),
    case("erosion_control", "max_area_sqft", "more than {:,.0f} square feet is uncovered",
         id="28-5(d)-5000-sq-ft-devices"),
    case("sediment_on_tract", "area_over_sqft", "more than {:,.0f} square feet is uncovered",
         id="28-5(d)-5000-sq-ft-sediment-on-tract"),
    case("ground_cover", "min_area_sqft", "more than {:,.0f} square feet is uncovered",
         id="28-5(d)-5000-sq-ft-ground-cover"),
    case("ground_cover", "working_days", "within {} working days", id="28-5(d)-15-working-days"),
    case("ground_cover", "calendar_days", "or {} calendar days", id="28-5(d)-90-calendar-days"),
    case("prior_plan", "min_area_sqft", "disturb more than {:,.0f} square feet", id="28-5(e)-5000-sq-ft"),
    case("prior_plan", "min_days_filed", "unless, {} or more days prior", id="28-5(e)-30-days"),
]
# fmt: on


@pytest.mark.parametrize(("key", "param", "words"), LIMIT_CASES)
def test_each_limit_is_the_number_its_subsection_gives(key: str, param: str, words: str) -> None:
    standard = LAND.standard(key)
    assert words.format(getattr(standard.params, param)) in SUBSECTIONS[standard.section]
    assert standard.section in LAND.notice.sources[key][param]  # the notice cites it for the number


def test_every_citation_key_is_written_and_28_5_has_none_of_those_sections() -> None:
    """§ 28-5 has no enforcement, notice or closed-day text: the keys are written as "" (a
    deliberate none), so no surface is told the profile merely lacks them."""
    for absent in ("notice", "violation", "penalt", "citation", "more time", "additional time", "holiday"):
        assert absent not in ORDINANCE.lower(), absent
    assert citation_gaps_of("land-disturbing") == []
    assert (LAND.notice.more_time, LAND.notice.consequence_section, LAND.cure_next_business_day_source) == (
        "",
        "",
        "",
    )
    assert LAND.cure_section == ""


EXPOSED = ev("slope-exposed", "s-3", "2026-05-01 10:00", area_sqft=1800)
LOT_A = ev("disturbance-started", "lot-a", "2026-06-03 09:15", area_sqft=5500)
STARTED = ev("disturbance-started", "lot-7", "2026-06-01 07:30", area_sqft=12000, plan_id="P-12")

# fmt: off
UNJUDGED_CASES = [
    case("slopes", records(EXPOSED), first_minute("2026-05-23"),
         "The first sentence of 28-5(b)", "the inspector's judgement", id="28-5(b)-slope-angle"),
    case("erosion_control", records(LOT_A), (at("2026-06-03 09:15"), at("2026-06-03 09:16")),
         "retained within the boundaries of the tract", "the standard sediment_on_tract",
         id="28-5(d)-sediment-on-tract"),
    case("prior_plan", records(STARTED), (at("2026-06-01 07:30"), at("2026-06-01 07:31")),
         "approved at or before the start", "The Town should confirm", id="28-5(e)-approval-reading"),
    case("prior_plan", records(STARTED), (at("2026-06-01 07:30"), at("2026-06-01 07:31")),
         "28-5(f) (the activity conducted in accordance with the approved plan)", "not judged",
         id="28-5(f)-conduct-per-plan"),
    case("prior_plan", records(STARTED), (at("2026-06-01 07:30"), at("2026-06-01 07:31")),
         "the Town's duty, not the operator's", "director of the division of water quality",
         id="28-5(e)-plans-forwarded"),
]
# fmt: on


@pytest.mark.parametrize(("key", "data", "window", "sentence", "verdict"), UNJUDGED_CASES)
def test_what_28_5_asks_and_no_standard_judges_is_said_on_the_findings_beside_it(
    key: str, data: SiteData, window: tuple[datetime, datetime], sentence: str, verdict: str
) -> None:
    """The parts of 28-5(b), (d), (e) and (f) no rule can judge from records (no number, the
    plan's contents, the Town's own duty) are named in the considered readings a finding of the
    standard beside them carries to the notice."""
    (finding,) = run(key, data, *window)
    assert finding.kind.value == "violation"
    [reading] = [c for c in finding.details["considered"] if sentence in c]
    assert verdict in reading
