"""How a citation reads (rules/citation.py): a bare section number after the word "section", any
other citation as the profile writes it."""

from __future__ import annotations

import pytest

from rules.citation import citation_text, is_section


@pytest.mark.parametrize(
    ("source", "text", "opening"),
    [
        pytest.param("13.3.A", "section 13.3.A", "Section 13.3.A", id="dovre"),
        pytest.param("28-8(b)(5)", "section 28-8(b)(5)", "Section 28-8(b)(5)", id="land-disturbing"),
        pytest.param("§ 4.2", "§ 4.2", "§ 4.2", id="section-mark"),
        pytest.param("§ 9.1(a)", "§ 9.1(a)", "§ 9.1(a)", id="section-mark-subsection"),
        pytest.param("Wis. Stat. 990.001(4)", "Wis. Stat. 990.001(4)", "Wis. Stat. 990.001(4)", id="statute"),
        pytest.param("", "", "", id="none"),
    ],
)
def test_citation_text(source: str, text: str, opening: str) -> None:
    assert citation_text(source) == text
    assert citation_text(source, capital=True) == opening


@pytest.mark.parametrize(
    ("source", "section"),
    [
        ("6.D", True),
        ("28-5(a)", True),
        ("§ 4.2", True),
        ("§4.7(c)", True),
        ("profile", False),
        ("Wis. Stat. 990.001(4)", False),
        ("Wis. Adm. Code Ch. SPS 307, which section 6.F adopts", False),
        ("", False),
    ],
)
def test_is_section_names_a_section_of_the_ordinance_bare_or_marked(source: str, section: bool) -> None:
    assert is_section(source) is section
