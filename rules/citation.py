"""How a text names a citation (pure): one wording for every surface.

A profile writes its citations its own way: Dovre's sections as bare numbers ("13.3.A", "6.C.6"),
another town's with a section mark ("§ 4.2"), and some sources are statutes ("Wis. Stat.
990.001(4)"). A bare number needs the word "section" before it; anything else is a citation
already and reads as written ("§ 4.2", never "section § 4.2").
"""

from __future__ import annotations

import re

# A section of the ordinance as profiles number it: "6.D", "13.3.B", "28-5(a)", "28-8(b)(5)",
# bare or after a section mark ("§ 4.2").
_NUMBER = r"\d+(?:[.-][0-9A-Za-z]+)*(?:\([0-9A-Za-z]+\))*"
_BARE = re.compile(_NUMBER)
_SECTION = re.compile(rf"(?:§\s*)?{_NUMBER}")


def is_section(source: str) -> bool:
    """Whether ``source`` names a section of the ordinance ("6.D", "§ 4.2"), not "profile" or a
    statute ("Wis. Stat. 990.001(4)")."""
    return _SECTION.fullmatch(source) is not None


def citation_text(source: str, *, capital: bool = False) -> str:
    """'section 13.3.A' for a bare section number ('Section 13.3.A' opening a sentence), any
    other citation as written ('§ 4.2', 'Wis. Stat. 990.001(4)'); '' for none."""
    if _BARE.fullmatch(source) is None:
        return source
    return f"{'Section' if capital else 'section'} {source}"
