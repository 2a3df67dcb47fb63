"""Fill material deliveries against the fill standard (land-disturbing 28-5(c)).

28-5(c): "Unless a permit from the departments division of waste management to operate a
landfill is on file for the official site, acceptable fill material shall be free of
organic or other degradable materials, masonry, concrete and brick exceeding 12 inches,
and any materials which would cause the site to be regulated as a landfill of the state."

Each ``delivery_kind`` record (``fill-delivery``) is judged at its time from what the
operator recorded: ``organic_field`` (true if the load holds organic or other degradable
material), ``piece_field`` (the largest piece of masonry, concrete or brick, in inches;
0 if none) and ``material_field`` (the description, screened for ``prohibited_terms`` as
whole words, case-insensitively). The screen is only as good as the description; a clean
record is COMPLIANT evidence, not proof.

A load failing any check is a VIOLATION naming every reason; with the landfill permit on
file (the site flag named by ``permit_flag``) it is an EXEMPT_EXCEEDANCE instead. A record
missing the organic or piece-size entry, or the material description (nothing then shows
the load free of materials that would make the site a landfill), cannot be judged and is
INFO, naming what is missing, unless something recorded already fails the standard; it is
never reported compliant.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from rules.base import RuleSpec, Standard, make_finding
from rules.citation import citation_text
from rules.deadlines import events_of, first_by_id, flag_set, number_field, ref, text_field
from rules.model import Finding, FindingKind, Measurement, SiteContext, SiteData
from rules.numbers import within
from rules.times import local_stamp


@dataclass(frozen=True, slots=True)
class FillMaterialParams:
    delivery_kind: str = "fill-delivery"
    material_field: str = "material"
    piece_field: str = "max_piece_in"
    organic_field: str = "organic"
    # "masonry, concrete and brick exceeding 12 inches"
    max_piece_in: float = field(default=12.0, metadata=within(minimum=0, maximum=1200, unit=" in"))
    prohibited_terms: tuple[str, ...] = ()
    permit_flag: str = "landfill_permit"

    def __post_init__(self) -> None:
        if not self.delivery_kind:
            raise ValueError("delivery_kind: required")
        if any(not term.strip() for term in self.prohibited_terms):
            raise ValueError("prohibited_terms: terms must not be empty")


def _matches(description: str, terms: tuple[str, ...]) -> list[str]:
    found = []
    for term in terms:
        if re.search(rf"\b{re.escape(term.strip())}\b", description, flags=re.IGNORECASE):
            found.append(term.strip())
    return found


def evaluate(
    site: SiteContext,
    standard: Standard,
    params: FillMaterialParams,
    data: SiteData,
    start: datetime,
    end: datetime,
    now: datetime,
) -> list[Finding]:
    permit = flag_set(site, params.permit_flag)
    findings = []
    for load in first_by_id(events_of(data, site, params.delivery_kind)).values():
        if not start <= load.ts < end:
            continue
        description = text_field(load, params.material_field) or ""
        organic = load.fields.get(params.organic_field)
        piece = number_field(load, params.piece_field)
        reasons: list[str] = []
        missing: list[str] = []
        if organic is True:
            reasons.append("it contains organic or other degradable material")
        elif organic is not False:
            missing.append(params.organic_field)
        if piece is None:
            missing.append(params.piece_field)
        elif piece > params.max_piece_in:
            reasons.append(
                f"it holds masonry, concrete or brick pieces of {piece:g} inches, more than "
                f"{params.max_piece_in:g} inches"
            )
        if params.material_field and not description:
            missing.append(params.material_field)  # no description: the screen has nothing to clear
        terms = _matches(description, params.prohibited_terms)
        if terms:
            reasons.append(f"its description names {', '.join(repr(t) for t in terms)}")
        what = f"Fill delivery {load.id}" + (f" ({description})" if description else "")
        when = local_stamp(load.ts, site.tz)
        exemptions: tuple[str, ...] = ()
        if reasons and permit:
            kind = FindingKind.EXEMPT_EXCEEDANCE
            reason = f"a landfill permit is on file for the site (site flag {params.permit_flag})"
            exemptions = (reason,)
            summary = (
                f"{what} at {when} would not be acceptable fill because {'; '.join(reasons)}, but {reason} "
                f"({citation_text(standard.section)})"
            )
        elif reasons:
            kind = FindingKind.VIOLATION
            summary = (
                f"{what} at {when} is not acceptable fill: {'; '.join(reasons)}"
                f" ({citation_text(standard.section)})"
            )
        elif missing:
            kind = FindingKind.INFO
            summary = (
                f"{what} at {when} cannot be checked against the fill standard: the record lacks "
                f"{', '.join(missing)} ({citation_text(standard.section)})"
            )
        else:
            kind = FindingKind.COMPLIANT
            summary = (
                f"{what} at {when} meets the fill standard as recorded ({citation_text(standard.section)})"
            )
        findings.append(
            make_finding(
                site,
                standard,
                kind,
                load.ts,
                load.ts + timedelta(seconds=1),
                summary,
                measurements=(
                    (Measurement("largest masonry piece", piece, params.max_piece_in, "in"),)
                    if piece is not None
                    else ()
                ),
                exemptions=exemptions,
                refs=(ref(load),),
                details={
                    "material": description,
                    "organic": organic if isinstance(organic, bool) else None,
                    "missing": missing,
                    "landfill_permit": permit,
                },
            )
        )
    return findings


def event_kinds(params: FillMaterialParams) -> tuple[str, ...]:
    return (params.delivery_kind,)


def margins(params: FillMaterialParams) -> tuple[timedelta, timedelta]:
    return timedelta(0), timedelta(0)  # records, not readings


RULE: RuleSpec[FillMaterialParams] = RuleSpec(
    name="fill_material",
    params_type=FillMaterialParams,
    evaluate=evaluate,
    margins=margins,
    description="Each fill delivery record against organic content, piece size and prohibited materials.",
    event_kinds=event_kinds,
)
