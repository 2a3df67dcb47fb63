"""Temporary lighting days (Dovre 6.C.6: "Temporary lighting that does not conform with this
Section may be allowed for a period of not longer than 30 total days within each year").

Declared TemporaryLighting periods are counted in days of use per calendar year ("each year"
read as January to December, the reading a clerk can check on a calendar).

With ``overnight_counts_as_one_day`` (the default) a use counts one day per started 24 hours
from when it was switched on, each on the local date that day began: 20:00 to 04:00 is one
use and one day (the date it began), not two calendar dates; 20:00 on 31 December to 04:00
on 1 January is a day of the old year only; a use of 24 h is one day, of 24 h and a second
two. A use is what was lit, not what was declared: declared periods of any fixtures that
overlap or follow each other within ``same_use_gap_s`` are one use, dated by its first start
(tower1 20:00-04:00 and tower2 00:30-03:00 are one night; so are 20:00-23:59 and
00:00-04:00). Without ``overnight_counts_as_one_day``, every local calendar date a use touches
counts (20:00-04:00 uses two). Two uses on one date are one day either way. This is a reading
the Town should confirm; findings list it in ``details["considered"]``.

The first day beyond ``max_days_per_year`` is a VIOLATION, and so is every later one;
each such day gives one finding, produced by the evaluation whose interval contains the
moment that day's temporary lighting began (so each day is reported once and the id is
stable). Days declared for the future are counted as planned but only judged once they
have begun (``now``). The counting is ``rules.lighting.lighting_days``, with these params'
``counting``; the profile hands the same counting to the other lighting rules, which treat
declared temporary lighting as exempt only on the days within ``max_days_per_year``: on day
31 the light is judged like any other, and this rule reports the day itself.

Early warning: from ``warn_days_left`` days before the limit, the operator is told how
many days of the year are used (declared future days included).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, timedelta

from rules.base import RuleSpec, Standard, make_finding, only_site
from rules.citation import citation_text
from rules.lighting import TemporaryDays, lighting_days, local_day_bounds
from rules.model import Finding, FindingKind, Measurement, SiteContext, SiteData
from rules.numbers import within
from rules.times import duration_text, iso


@dataclass(frozen=True, slots=True)
class TemporaryLightingParams:
    max_days_per_year: int = field(default=30, metadata=within(minimum=0, maximum=366, unit=" days"))
    warn_days_left: int = field(default=3, metadata=within(minimum=0, maximum=366, unit=" days"))
    # An overnight use is one day (of the date it began), not the two calendar dates it touches.
    overnight_counts_as_one_day: bool = True
    # Declared periods (of any fixtures) that overlap or follow within this are one use, dated by its
    # first start: a light switched off for a minute at midnight has not begun a second day.
    same_use_gap_s: float = field(default=3600.0, metadata=within(minimum=0, maximum=86400, unit=" s"))
    # The ordinance's words for the allowance, which the other lighting rules' texts quote after
    # this standard's section (Dovre: "not longer than 30 total days within each year"); "" quotes none.
    quoted: str = ""

    def __post_init__(self) -> None:
        _ = self.counting  # TemporaryDays checks the counting's own fields

    @property
    def counting(self) -> TemporaryDays:
        """How the days are counted; the profile gives every lighting rule this same counting."""
        return TemporaryDays(
            self.max_days_per_year, self.overnight_counts_as_one_day, self.same_use_gap_s, quoted=self.quoted
        )


def considered(params: TemporaryLightingParams) -> list[str]:
    """The counting this rule chose, which 6.C.6's "30 total days" leaves open (a notice lists it)."""
    if not params.overnight_counts_as_one_day:
        return ["A day of temporary lighting is every local calendar date a declared use touches."]
    return [
        "Declared temporary lighting of any fixtures that overlaps or follows within "
        f"{duration_text(params.same_use_gap_s)} is one use, counted once per started 24 hours on the local "
        "date it began: one night lit by two towers, or switched off briefly at midnight, is one day "
        "(minewatch reading; the ordinance does not say what a day of use is)."
    ]


def evaluate(
    site: SiteContext,
    standard: Standard,
    params: TemporaryLightingParams,
    data: SiteData,
    start: datetime,
    end: datetime,
    now: datetime,
) -> list[Finding]:
    data = only_site(data, site.id)
    findings: list[Finding] = []
    for lit in lighting_days(site, data.temporary_lighting, params.counting):
        if lit.ordinal <= params.max_days_per_year or not start <= lit.first_on < end or lit.first_on > now:
            continue
        summary = (
            f"Temporary lighting was used on {lit.day.isoformat()}, day {lit.ordinal} of {lit.day.year}; "
            f"temporary lighting is allowed on no more than {params.max_days_per_year} days a year "
            f"({citation_text(standard.section)})"
        )
        findings.append(
            make_finding(
                site,
                standard,
                FindingKind.VIOLATION,
                lit.first_on,
                lit.last_off,
                summary,
                measurements=(
                    Measurement(
                        "temporary lighting days this year", lit.ordinal, params.max_days_per_year, "days"
                    ),
                ),
                refs=tuple(f"temporary_lighting:{p}" for p in lit.periods),
                details={
                    "local_date": lit.day.isoformat(),
                    "year": lit.day.year,
                    "counting": "per use, an overnight use is one day"
                    if params.overnight_counts_as_one_day
                    else "per local calendar date touched",
                    "considered": considered(params),
                },
            )
        )
    return findings


def early_warnings(
    site: SiteContext, standard: Standard, params: TemporaryLightingParams, data: SiteData, now: datetime
) -> list[Finding]:
    data = only_site(data, site.id)
    year = now.astimezone(site.tz).year
    days = lighting_days(site, data.temporary_lighting, params.counting)
    this_year = [d for d in days if d.day.year == year]
    used = len(this_year)
    if used < params.max_days_per_year - params.warn_days_left:
        return []
    left = params.max_days_per_year - used
    state = f"{left} left" if left > 0 else ("none left" if left == 0 else f"{-left} over the limit")
    summary = (
        f"{used} of the {params.max_days_per_year} temporary-lighting days allowed in {year} are used or "
        f"declared ({state}) ({citation_text(standard.section)})"
    )
    year_start, _ = local_day_bounds(site, date(year, 1, 1))
    _, year_end = local_day_bounds(site, date(year, 12, 31))
    return [
        make_finding(
            site,
            standard,
            FindingKind.WARNING,
            year_start,
            year_end,
            summary,
            measurements=(
                Measurement("temporary lighting days this year", used, params.max_days_per_year, "days"),
            ),
            refs=tuple(dict.fromkeys(f"temporary_lighting:{p}" for d in this_year for p in d.periods)),
            details={
                "as_of": iso(now),
                "days": [d.day.isoformat() for d in this_year],
                "considered": considered(params),
            },
        )
    ]


def margins(params: TemporaryLightingParams) -> tuple[timedelta, timedelta]:
    return timedelta(0), timedelta(0)  # events, not readings: the daemon holds 400 days of them


RULE: RuleSpec[TemporaryLightingParams] = RuleSpec(
    name="temporary_lighting",
    params_type=TemporaryLightingParams,
    evaluate=evaluate,
    margins=margins,
    early_warnings=early_warnings,
    description="Distinct local days of declared temporary lighting per calendar year against a limit.",
)
