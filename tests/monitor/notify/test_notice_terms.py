"""What a notice says beyond the standard (the cure period, the consequence, any hearing or appeal):
only what the profile's ordinance says, attributed to the section that says it."""

from __future__ import annotations

from datetime import UTC, datetime

from monitor.notify.document import NoticeContext, document_sections
from monitor.notify.notices import Notice, _deadline_rule
from rules.profile import load_profile


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


def _paragraphs(notice: Notice, title: str) -> str:
    context = NoticeContext(profile=load_profile(str(notice.data["profile"])))
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
