"""The portal's own words cite the profile's or the site's sections, never Dovre's by default.

The templates are rendered as the portal renders them (``web.portal_templates``), each with the
context its page gives; the pages themselves, served, are in tests/monitor/test_town_texts.py.
"""

from __future__ import annotations

import re
from types import SimpleNamespace
from typing import Any

import pytest

from monitor.portal.web import portal_templates


def rendered(name: str, block: str | None = None, **context: Any) -> str:
    template = portal_templates().env.get_template(name)
    if block is None:
        return template.render(**context)
    return "".join(template.blocks[block](template.new_context(context)))


SITE = SimpleNamespace(id="q", name="Quarry", timezone="America/Chicago")

# A blast notice that missed someone: the reminder cites the notice standard's section as the
# profile numbers it (recipients_told gives it), none where there is none.
# fmt: off
RECIPIENTS_CASES = [
    pytest.param("6.F", "every adjoining owner (6.F).", id="dovre-6.F"),
    pytest.param("§ 4.7(c)", "every adjoining owner (§ 4.7(c)).", id="fernhill-§4.7(c)"),
    pytest.param("", "every adjoining owner.", id="none-named"),
]
# fmt: on


@pytest.mark.parametrize(("section", "said"), RECIPIENTS_CASES)
def test_a_blast_notice_missing_someone_cites_the_notice_standards_section(section: str, said: str) -> None:
    done = {"kind": "blast-notice", "id": "b1", "missed": ["Township"], "unmatched": "", "section": section}
    page = rendered(
        "events.html", "main", site=SITE, done=done, kinds={}, design_units=("lb", "ft"), recent=[]
    )
    [warning] = re.findall(r'id="event-recipients">(.*?)</p>', page, re.S)
    assert warning.endswith(f"A blast needs notice to the Town and {said}"), warning


# The plan's legend names the parcels' own sections from the site configuration, none if none.
# fmt: off
PARCEL_CASES = [
    pytest.param(["6.G"], "parcel (e.g. a conveyor's, section 6.G)", id="dovre-6.G"),
    pytest.param(["§ 4.3", "§ 4.3"], "parcel (e.g. a conveyor's, § 4.3)", id="fernhill-§4.3"),
    pytest.param([""], "parcel (e.g. a conveyor's)", id="none-named"),
]
# fmt: on


@pytest.mark.parametrize(("sections", "said"), PARCEL_CASES)
def test_the_plan_legend_names_the_parcels_sections(sections: list[str], said: str) -> None:
    plan = {"drawn": True, "parcels": [{"id": f"p{i}", "section": s} for i, s in enumerate(sections)]}
    figure = rendered("plan_figure.html", plan=plan, plan_svg="", site=SITE)
    [legend] = re.findall(r'<span class="key parcel"></span> ([^<]*)</li>', figure)
    assert legend == said
