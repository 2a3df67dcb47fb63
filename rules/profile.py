"""Ordinance profiles: a town's ordinance as data, validated once, then passed down.

A profile is a TOML file (shipped ones live in ``rules/profiles/<name>.toml``)::

    name = "dovre"
    title = "Town of Dovre nonmetallic mining ordinance"
    authority = "Town of Dovre, Barron County, Wisconsin"
    notice_prefix = "DOV"
    cure_days = 14
    cure_section = "13.3.A"            # the section granting the cure period; "" = the Town's setting
    cure_next_business_day_source = "" # cited where a deadline rolls past a closed day ("" = none)
    episode_gap_s = 300
    preexisting_exempt = []            # standards that do not bind pre-existing sites
    preexisting_section = "1.4.C"      # cited where a standard does not bind a pre-existing site
    considered = ["..."]               # the project's readings the Town should confirm (notices list them)
    event_kinds = []                   # operator record kinds (minewatch/{site}/events/{kind})
                                       # the daemon accepts for sites on this profile

    [standards.noise]                  # the key findings cite as Finding.standard
    rule = "noise"                     # a rule kind from rules.RULES
    section = "6.D"
    title = "..."; summary = "..."; text = "..."; required_action = "..."
    [standards.noise.params]           # the rule's Params fields; defaults fill the rest
    limit_db = 80.0

    [notice]                           # optional: what notices say beyond the standard
    more_time = "..."                  # how the operator asks for more time ("" = not stated)
    consequence = "..."; consequence_section = "13.3.B"
    hearing = ""                       # the ordinance's hearing or appeal, in its words; "" = not stated
    no_hearing_source = ""             # where the ordinance says there is none (only then notices say so)
    [notice.sources.noise]             # where each number comes from: a section, "profile", a citation
    limit_db = "6.D"

An operations agreement (section 4.1 of Dovre) changes params for one site through
``overrides``: ``{"noise.limit_db": 85}`` or ``{"noise": {"limit_db": 85}}``. Unknown
keys and wrong types are errors, each reported as ``path.to.key: reason``.

A rule reading operator records of profile-defined kinds (``GenericEvent``) says which
through ``RuleSpec.event_kinds``; each of them must be listed in ``event_kinds``, which
may also list kinds no rule reads yet (kept as evidence).

Reading the file here, at configuration time, is the only I/O in ``rules/``.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import re
import tomllib
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from rules import RULES
from rules.base import Standard
from rules.deadlines import WEEKDAYS, WorkCalendar, extra_days_problem
from rules.holidays import check_holidays
from rules.numbers import RANGE, Range, number_problem
from rules.toml_text import toml_document

__all__ = [
    "NoticeTerms",
    "Profile",
    "ProfileError",
    "Standard",
    "available_profiles",
    "load_profile",
]

_PROFILE_PACKAGE = "rules.profiles"
_TOP_LEVEL_FIELDS = {
    "name",
    "title",
    "authority",
    "notice_prefix",
    "cure_days",
    "cure_section",
    "notice",
    "cure_next_business_day",
    "cure_next_business_day_source",
    "cure_closed_days",
    "cure_remind_days",
    "holidays",
    "episode_gap_s",
    "preexisting_exempt",
    "preexisting_section",
    "event_kinds",
    "considered",
    "standards",
}
_STANDARD_FIELDS = {"rule", "section", "title", "summary", "text", "required_action", "params", "considered"}
# Top-level fields an operations agreement may change for one site besides rule params.
_OVERRIDABLE_TOP_LEVEL = {
    "cure_days": int,
    "episode_gap_s": float,
    "cure_next_business_day": bool,
    "cure_remind_days": int,
}
# Event kinds monitor.wire.codec decodes itself (BUILTIN_EVENTS there); a profile cannot redefine them.
_BUILTIN_EVENT_KINDS = frozenset({"blast-notice", "blast", "truck", "work", "temporary-lighting"})
LONGEST_EPISODE_GAP_S = 7 * 86400
_EVENT_KIND = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")


class ProfileError(Exception):
    """A profile or an override is wrong; ``problems`` lists every ``path.to.key: reason``."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = problems
        listing = "\n  ".join(problems)
        super().__init__(f"Invalid ordinance profile {source!r}:\n  {listing}")


@dataclass(frozen=True, slots=True)
class NoticeTerms:
    """The ``[notice]`` table: what a notice tells beyond the standard, from the ordinance's own text.

    ``sources`` says where each number a notice relies on comes from, per standard and param:
    a section of the ordinance (``"6.D"``), ``"profile"`` (set by the town in this profile, the
    ordinance gives no number) or any other citation (``"Wis. Adm. Code SPS 307"``).
    """

    # How the operator asks for more time to correct, in the ordinance's words (Dovre 13.3.A's
    # written explanation); "" = the notice states no procedure.
    more_time: str = ""
    consequence: str = ""  # what follows if the violation is not corrected (Dovre 13.3.B)
    consequence_section: str = ""
    hearing: str = ""  # the hearing or appeal the ordinance provides; "" = not stated in the profile
    hearing_section: str = ""
    # The section or citation saying the ordinance provides no hearing or appeal: a notice says
    # "the ordinance provides no hearing or appeal" only with it, never from an empty ``hearing``.
    no_hearing_source: str = ""
    sources: Mapping[str, Mapping[str, str]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Profile:
    name: str
    title: str
    authority: str
    notice_prefix: str
    cure_days: int  # Dovre 13.3.A: fourteen days to correct a violation
    episode_gap_s: float  # violations this close together form one episode
    standards: Mapping[str, Standard]
    cure_section: str = ""
    notice: NoticeTerms = field(default_factory=NoticeTerms)  # what a notice says beyond the standard
    source: str = ""  # the file it came from, for messages
    event_kinds: tuple[str, ...] = ()  # operator record kinds (GenericEvent.kind) sites on it accept
    # Profile-wide readings the Town should confirm; each standard's own are Standard.considered.
    considered: tuple[str, ...] = ()
    # 13.3.A deadlines: a last day that is a closed day or holiday moves to the next business
    # day (the Wis. Stat. 990.001(4) reading) when cure_next_business_day is set.
    cure_next_business_day: bool = False
    # Where that reading comes from, cited beside it ("Wis. Stat. 990.001(4)" for Dovre); "" cites none.
    cure_next_business_day_source: str = ""
    cure_closed_days: tuple[str, ...] = ("sunday",)
    holidays: tuple[str, ...] = ()  # ISO dates and calendars of rules.holidays ("us-federal", "wisconsin")
    # The operator is reminded of an open notice's cure deadline from the local day this many
    # days before it (0: not reminded); the Town's setting, no ordinance's (rules.notice_decision).
    cure_remind_days: int = 3
    # The section sparing pre-existing operations some standards (Dovre "1.4.C"), cited where a
    # surface says a standard does not bind the site; "" cites none.
    preexisting_section: str = ""

    def cure_calendar(self) -> WorkCalendar | None:
        """The calendar a cure deadline is rolled forward on, or None when it is not rolled."""
        if not self.cure_next_business_day:
            return None
        return WorkCalendar.of(self.cure_closed_days, self.holidays)

    def standard(self, key: str) -> Standard:
        return self.standards[key]

    @property
    def titles(self) -> dict[str, str]:
        """Each standard's title by its key ('Noise at the mine site boundaries'): how every
        surface names a standard."""
        return {key: standard.title for key, standard in self.standards.items()}

    def event_verdicts(self) -> dict[str, str]:
        """The standards whose findings are each a verdict on one event, by key, with the kind of
        event judged (their rule's ``verdict_on``): whatever the profile names the standard."""
        return {
            key: kind for key, standard in self.standards.items() if (kind := RULES[standard.rule].verdict_on)
        }

    def params(self, key: str) -> Any:
        """The validated Params dataclass of a standard, e.g. ``profile.params("noise")``."""
        return self.standards[key].params

    def enabled_for(self, preexisting: bool) -> list[Standard]:
        """Standards that bind a site; section 1.4.C.1 lets a profile spare pre-existing sites some."""
        return [s for s in self.standards.values() if s.applies_to_preexisting or not preexisting]


def available_profiles() -> list[str]:
    """Names of the profiles shipped in rules/profiles/."""
    folder = resources.files(_PROFILE_PACKAGE)
    return sorted(entry.name[: -len(".toml")] for entry in folder.iterdir() if entry.name.endswith(".toml"))


def load_profile(name_or_path: str, overrides: Mapping[str, Any] | None = None) -> Profile:
    """Load a shipped profile by name, or a ``.toml`` file by path, and apply one site's overrides."""
    raw, source = _read_profile(name_or_path)
    return build_profile(raw, source=source, overrides=overrides)


def episode_gap_of(name_or_path: str, overrides: Mapping[str, Any] | None = None) -> float:
    """The profile's ``episode_gap_s`` with the site's override, read without building the
    standards (whose parameters need every rule module): for readers of the store such as
    `minewatch status`. An invalid profile raises as :func:`load_profile` would."""
    profile_overrides = overrides or {}
    if "episode_gap_s" not in profile_overrides:
        raw, _ = _read_profile(name_or_path)
        return float(raw.get("episode_gap_s", 300.0))
    return float(profile_overrides["episode_gap_s"])


def standard_titles_of(name_or_path: str) -> dict[str, str]:
    """Each standard's title ('Noise at the mine site boundaries'), read as :func:`episode_gap_of`."""
    raw, _ = _read_profile(name_or_path)
    standards = raw.get("standards")
    if not isinstance(standards, Mapping):
        return {}
    return {str(k): str(v.get("title") or k) for k, v in standards.items() if isinstance(v, Mapping)}


# The keys another town's texts are cited from (docs/CONFIG.md), each with the rule whose standards
# read it (None: the profile's own key) and what the texts do without it. A profile copied from an
# older one lacks them and would cite nothing there, silently; a key written as "" says the
# ordinance has no such section and is not reported.
_CITATION_KEYS: tuple[tuple[str, str | None, str], ...] = (
    ("cure_section", None, "notices give the period to correct as the Town's setting, citing no section"),
    ("notice.more_time", None, "notices and cure-deadline reminders state no way to ask for more time"),
    (
        "notice.consequence_section",
        None,
        "a citation recommended and an early escalation refused cite no section",
    ),
    (
        "cure_next_business_day_source",
        None,
        "a cure deadline moved past a closed day (cure_next_business_day) cites no source",
    ),
    (
        "preexisting_section",
        None,
        "a standard of preexisting_exempt is said not to bind a pre-existing site, citing no section",
    ),
    (
        "quoted",
        "temporary_lighting",
        "the lighting findings cite the temporary lighting allowance without the ordinance's words",
    ),
    (
        "fixed_sources_section",
        "high_intensity_light",
        "a vehicle's lights are said to be allowed, citing no section",
    ),
    (
        "hours_source",
        "blast_notice",
        "the notice hours are counted as minewatch's reading, citing no source",
    ),
    (
        "owners_reading",
        "blast_notice",
        "blast notice findings say which owners minewatch checks, not whom the ordinance requires",
    ),
    (
        "reading",
        "turbidity",
        "turbidity findings say 'turbidity beyond the line', not what the ordinance calls it",
    ),
    (
        "exempt_source",
        "turbidity",
        "the exemption the site's flag stands for cites no section",
    ),
    (
        "exempt_reading",
        "turbidity",
        "the exemption the site's flag stands for is said as 'the site is exempt'",
    ),
)


def citation_gaps_of(name_or_path: str) -> list[str]:
    """Each citation key the profile lacks, as 'path.to.key: not given; what the texts do' (empty:
    none), read as :func:`episode_gap_of`. A key written as "" is a choice and not listed."""
    raw, _ = _read_profile(name_or_path)
    return citation_gaps(raw)


def citation_gaps(raw: Mapping[str, Any]) -> list[str]:
    """:func:`citation_gaps_of` of a parsed profile."""
    notice = _table(raw.get("notice"))
    standards = _table(raw.get("standards"))
    gaps: list[str] = []
    for key, rule, without in _CITATION_KEYS:
        if rule is not None:
            for name, standard in standards.items():
                if not isinstance(standard, Mapping) or standard.get("rule") != rule:
                    continue
                if key not in _table(standard.get("params")):
                    gaps.append(f"standards.{name}.params.{key}: not given; {without}")
            continue
        if key == "preexisting_section" and not raw.get("preexisting_exempt"):
            continue  # no standard spares a pre-existing site: the section is never cited
        table, leaf = (notice, key.removeprefix("notice.")) if key.startswith("notice.") else (raw, key)
        if leaf not in table:
            gaps.append(f"{key}: not given; {without}")
    return gaps


def _table(value: Any) -> Mapping[str, Any]:
    """A TOML table, or an empty one for anything else (build_profile reports that)."""
    return value if isinstance(value, Mapping) else {}


def _read_profile(name_or_path: str) -> tuple[dict[str, Any], str]:
    if name_or_path.endswith(".toml"):
        source = name_or_path
        # A profile named by path is read as every file a person names is (stdlib only; the
        # one thing of the daemon's package the rules use, and only for a file).
        from monitor.named_file import NamedFileError, read_named_text

        try:
            raw_text = read_named_text(name_or_path, "profile")
        except NamedFileError as exc:
            raise ProfileError(source, [f"profile: {exc}"]) from None
    else:
        source = name_or_path
        known = ", ".join(available_profiles())
        if not name_or_path or not name_or_path.replace("-", "").replace("_", "").isalnum():
            # a path or a stray name ("/tmp", "dovre.txt"): joined to the package, "/tmp" would
            # even be read as /tmp.toml
            raise ProfileError(
                source,
                [f"profile: {name_or_path!r} is neither a shipped profile ({known}) nor a .toml file's path"],
            )
        resource = resources.files(_PROFILE_PACKAGE).joinpath(f"{name_or_path}.toml")
        if not resource.is_file():
            raise ProfileError(source, [f"profile: unknown profile {name_or_path!r}; available: {known}"])
        raw_text = resource.read_text(encoding="utf-8")
    try:
        return toml_document(raw_text), source
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(source, [f"profile: not valid TOML in {source!r}: {exc}"]) from None


def build_profile(
    raw: Mapping[str, Any], source: str = "", overrides: Mapping[str, Any] | None = None
) -> Profile:
    """Validate a parsed profile mapping (the TOML document) and apply overrides."""
    problems: list[str] = []
    for key in sorted(set(raw) - _TOP_LEVEL_FIELDS):
        problems.append(f"{key}: unknown key; expected one of {', '.join(sorted(_TOP_LEVEL_FIELDS))}")

    def text_field(key: str, required: bool = True) -> str:
        value = raw.get(key, "")
        if required and key not in raw:
            problems.append(f"{key}: missing")
        elif not isinstance(value, str):
            problems.append(f"{key}: expected a string, got {value!r}")
            return ""
        return str(value)

    name = text_field("name")
    title = text_field("title")
    authority = text_field("authority")
    notice_prefix = text_field("notice_prefix")
    cure_section = text_field("cure_section", required=False)
    next_business_day_source = text_field("cure_next_business_day_source", required=False)
    preexisting_section = text_field("preexisting_section", required=False)
    cure_days = _expect(raw.get("cure_days", 14), int, "cure_days", problems)
    episode_gap_s = _expect(raw.get("episode_gap_s", 300.0), float, "episode_gap_s", problems)
    preexisting_exempt = _expect(
        raw.get("preexisting_exempt", []), tuple[str, ...], "preexisting_exempt", problems
    )
    considered = _expect(raw.get("considered", []), tuple[str, ...], "considered", problems)

    overrides_by_standard, top_overrides = _split_overrides(overrides or {}, raw, problems)
    if "cure_days" in top_overrides:
        cure_days = _expect(top_overrides["cure_days"], int, "cure_days", problems)
    if "episode_gap_s" in top_overrides:
        episode_gap_s = _expect(top_overrides["episode_gap_s"], float, "episode_gap_s", problems)
    # A cure period of -3 days (a deadline before the notice) or 10**9 (past the calendar: every
    # notice then failed to open) was taken; the bounds are those of an extension's days.
    if cure_days is not None and (problem := extra_days_problem(cure_days)):
        problems.append(f"cure_days: {problem}")
    # Violations this far apart are one episode: beyond a week, one episode would run for months.
    if episode_gap_s is not None and (
        problem := number_problem(episode_gap_s, more_than=0, maximum=LONGEST_EPISODE_GAP_S, unit=" s")
    ):
        problems.append(f"episode_gap_s: {problem}")
    next_business_day = _expect(
        top_overrides.get("cure_next_business_day", raw.get("cure_next_business_day", False)),
        bool,
        "cure_next_business_day",
        problems,
    )
    closed_days = _expect(
        raw.get("cure_closed_days", ["sunday"]), tuple[str, ...], "cure_closed_days", problems
    )
    for day in closed_days or ():
        if day.lower() not in WEEKDAYS:
            problems.append(f"cure_closed_days: {day!r} is not a weekday; use {', '.join(WEEKDAYS)}")
    if closed_days is not None and len({d.lower() for d in closed_days}) >= 7:
        problems.append("cure_closed_days: every weekday is closed; no deadline could fall on a business day")
    remind_days = _expect(
        top_overrides.get("cure_remind_days", raw.get("cure_remind_days", 3)),
        int,
        "cure_remind_days",
        problems,
    )
    if remind_days is not None and (
        problem := number_problem(remind_days, whole=True, minimum=0, maximum=365, unit=" days")
    ):
        problems.append(f"cure_remind_days: {problem}")
    holidays = _expect(raw.get("holidays", []), tuple[str, ...], "holidays", problems)
    try:
        check_holidays("holidays", holidays or ())
    except ValueError as exc:
        problems.append(str(exc))

    raw_standards = raw.get("standards", {})
    standards: dict[str, Standard] = {}
    if not isinstance(raw_standards, Mapping) or not raw_standards:
        problems.append("standards: expected at least one [standards.<key>] table")
        raw_standards = {}
    for key, raw_standard in raw_standards.items():
        standard = _build_standard(
            key,
            raw_standard,
            overrides_by_standard.get(key, {}),
            applies_to_preexisting=key not in (preexisting_exempt or ()),
            problems=problems,
        )
        if standard is not None:
            standards[key] = standard
    for key in preexisting_exempt or ():
        if key not in raw_standards:
            problems.append(f"preexisting_exempt: {key!r} is not a standard of this profile")
    standards = _link_standards(standards, problems)
    event_kinds = _event_kinds(raw.get("event_kinds", []), problems)
    notice = _notice_terms(raw.get("notice", {}), raw_standards, standards, problems)
    for key, standard in standards.items():
        reads = RULES[standard.rule].event_kinds
        for kind in reads(standard.params) if reads is not None else ():
            if kind not in event_kinds:
                problems.append(
                    f"standards.{key}.params: reads event kind {kind!r}, which is not listed in event_kinds"
                )
    if problems:
        raise ProfileError(source or name, problems)
    return Profile(
        name=name,
        title=title,
        authority=authority,
        notice_prefix=notice_prefix,
        cure_days=int(cure_days),
        episode_gap_s=float(episode_gap_s),
        standards=types.MappingProxyType(standards),
        cure_section=cure_section,
        notice=notice,
        source=source,
        event_kinds=event_kinds,
        considered=tuple(" ".join(c.split()) for c in considered or ()),
        cure_next_business_day=bool(next_business_day),
        cure_next_business_day_source=next_business_day_source,
        preexisting_section=preexisting_section,
        cure_closed_days=tuple(d.lower() for d in closed_days or ()) or ("sunday",),
        holidays=tuple(holidays or ()),
        cure_remind_days=int(remind_days or 0),
    )


def _link_standards(standards: dict[str, Standard], problems: list[str]) -> dict[str, Standard]:
    """Fill each param marked ``linked`` (a rule kind) from the profile's standard of that kind.

    One such link today: every lighting rule's ``temporary_days`` is the temporary_lighting
    standard's ``counting`` (rules.lighting.TemporaryDays), overrides included, so a light is
    exempt as declared temporary lighting on exactly the days 6.C.6 counts as allowed. Without
    a standard of the kind, the field keeps its default (citing no section).
    """
    linked: dict[str, Standard] = {}
    for key, standard in standards.items():
        values: dict[str, Any] = {}
        for f in dataclasses.fields(standard.params):
            if "linked" not in f.metadata:
                continue
            sources = [s for s in standards.values() if s.rule == f.metadata["linked"]]
            if len(sources) > 1:
                names = ", ".join(s.key for s in sources)
                problems.append(
                    f"standards.{key}.params.{f.name}: follows the {f.metadata['linked']} standard, "
                    f"and this profile has several ({names})"
                )
            elif sources:
                # with the standard's section, which the lighting rules' texts cite
                values[f.name] = dataclasses.replace(sources[0].params.counting, section=sources[0].section)
        params = dataclasses.replace(standard.params, **values) if values else standard.params
        linked[key] = dataclasses.replace(standard, params=params)
    return linked


_NOTICE_TEXT_FIELDS = (
    "more_time",
    "consequence",
    "consequence_section",
    "hearing",
    "hearing_section",
    "no_hearing_source",
)


def _notice_terms(
    raw: Any, declared: Mapping[str, Any], standards: Mapping[str, Standard], problems: list[str]
) -> NoticeTerms:
    """The ``[notice]`` table; every source names a standard of the profile and one of its params."""
    if not isinstance(raw, Mapping):
        problems.append(f"notice: expected a table, got {raw!r}")
        return NoticeTerms()
    for unknown in sorted(set(raw) - {*_NOTICE_TEXT_FIELDS, "sources"}):
        problems.append(
            f"notice.{unknown}: unknown key; expected one of {', '.join(_NOTICE_TEXT_FIELDS)}, sources"
        )
    texts: dict[str, str] = {}
    for name in _NOTICE_TEXT_FIELDS:
        value = raw.get(name, "")
        if not isinstance(value, str):
            problems.append(f"notice.{name}: expected a string, got {value!r}")
        else:
            texts[name] = " ".join(value.split())
    if texts.get("hearing") and texts.get("no_hearing_source"):
        problems.append(
            "notice.no_hearing_source: the profile also states a hearing or appeal (notice.hearing)"
        )
    sources: dict[str, dict[str, str]] = {}
    raw_sources = raw.get("sources", {})
    if not isinstance(raw_sources, Mapping):
        problems.append(f"notice.sources: expected a table of standards, got {raw_sources!r}")
        raw_sources = {}
    for key, params in raw_sources.items():
        path = f"notice.sources.{key}"
        if key not in declared:
            problems.append(f"{path}: {key!r} is not a standard of this profile")
            continue
        if key not in standards:
            continue  # the standard itself is wrong, and reported

        if not isinstance(params, Mapping):
            problems.append(f"{path}: expected a table of param = source, got {params!r}")
            continue
        fields = {f.name for f in dataclasses.fields(standards[key].params)}
        for name, source in params.items():
            if name not in fields:
                problems.append(f"{path}.{name}: not a param of {key!r}; it has {', '.join(sorted(fields))}")
            elif not isinstance(source, str) or not source.strip():
                problems.append(f'{path}.{name}: expected a section, "profile" or a citation, got {source!r}')
            else:
                sources.setdefault(key, {})[name] = source.strip()
    return NoticeTerms(sources=types.MappingProxyType(sources), **texts)


def _event_kinds(raw: Any, problems: list[str]) -> tuple[str, ...]:
    """The profile's operator record kinds: topic-safe names, not built-in kinds, no repeats."""
    kinds = _expect(raw, tuple[str, ...], "event_kinds", problems)
    if kinds is None:
        return ()
    for index, kind in enumerate(kinds):
        path = f"event_kinds[{index}]"
        if not _EVENT_KIND.fullmatch(kind) or len(kind) > 64:
            problems.append(f"{path}: {kind!r} is not a kind name; use lowercase words joined by '-'")
        elif kind in _BUILTIN_EVENT_KINDS:
            problems.append(f"{path}: {kind!r} is a built-in event kind; choose another name")
        elif kind in kinds[:index]:
            problems.append(f"{path}: {kind!r} is listed twice")
    return tuple(kinds)


def _split_overrides(
    overrides: Mapping[str, Any], raw: Mapping[str, Any], problems: list[str]
) -> tuple[dict[str, dict[str, tuple[str, Any]]], dict[str, Any]]:
    """Flatten ``{"noise": {"limit_db": 85}}`` and ``{"noise.limit_db": 85}`` into per-standard params.

    Each param keeps the path the caller wrote, so messages point at their own key.
    """
    known_standards = raw.get("standards", {}) if isinstance(raw.get("standards"), Mapping) else {}
    by_standard: dict[str, dict[str, tuple[str, Any]]] = {}
    top: dict[str, Any] = {}

    def visit(path: str, value: Any) -> None:
        parts = path.split(".")
        if len(parts) == 1 and parts[0] in _OVERRIDABLE_TOP_LEVEL:
            top[parts[0]] = value
            return
        if parts[0] not in known_standards:
            known = ", ".join(sorted([*known_standards, *_OVERRIDABLE_TOP_LEVEL]))
            problems.append(f"{path}: unknown key; this profile has {known}")
            return
        if len(parts) == 1:
            if isinstance(value, Mapping):
                for sub_key, sub_value in value.items():
                    visit(f"{path}.{sub_key}", sub_value)
            else:
                problems.append(f"{path}: expected a table of params, got {value!r}")
            return
        if len(parts) == 2 and isinstance(value, Mapping):
            # e.g. {"noise": {"params": {...}}} is not supported: params are addressed directly
            problems.append(f"{path}: expected a value, got a table")
            return
        if len(parts) != 2:
            problems.append(f"{path}: unknown key; write <standard>.<param>")
            return
        by_standard.setdefault(parts[0], {})[parts[1]] = (path, value)

    for key, value in overrides.items():
        visit(str(key), value)
    return by_standard, top


def _build_standard(
    key: str,
    raw: Any,
    overrides: Mapping[str, tuple[str, Any]],
    applies_to_preexisting: bool,
    problems: list[str],
) -> Standard | None:
    path = f"standards.{key}"
    if not isinstance(raw, Mapping):
        problems.append(f"{path}: expected a table, got {raw!r}")
        return None
    count_before = len(problems)
    for unknown in sorted(set(raw) - _STANDARD_FIELDS):
        problems.append(
            f"{path}.{unknown}: unknown key; expected one of {', '.join(sorted(_STANDARD_FIELDS))}"
        )
    strings: dict[str, str] = {}
    for field_name in ("rule", "section", "title", "summary", "text", "required_action"):
        value = raw.get(field_name)
        if value is None:
            problems.append(f"{path}.{field_name}: missing")
        elif not isinstance(value, str):
            problems.append(f"{path}.{field_name}: expected a string, got {value!r}")
        else:
            strings[field_name] = " ".join(value.split())
    rule_name = strings.get("rule")
    if rule_name is not None and rule_name not in RULES:
        problems.append(f"{path}.rule: unknown rule {rule_name!r}; known rules: {', '.join(sorted(RULES))}")
        return None
    raw_params = raw.get("params", {})
    if not isinstance(raw_params, Mapping):
        problems.append(f"{path}.params: expected a table, got {raw_params!r}")
        return None
    if rule_name is None:
        return None
    params_type = RULES[rule_name].params_type
    values: dict[str, tuple[str, Any]] = {
        name: (f"{path}.params.{name}", v) for name, v in raw_params.items()
    }
    values.update(overrides)
    params = parse_params(params_type, values, problems)
    considered = _expect(raw.get("considered", []), tuple[str, ...], f"{path}.considered", problems)
    if params is None or len(problems) > count_before:
        return None
    return Standard(
        key=key,
        rule=rule_name,
        section=strings["section"],
        title=strings["title"],
        summary=strings["summary"],
        text=strings["text"],
        required_action=strings["required_action"],
        params=params,
        applies_to_preexisting=applies_to_preexisting,
        considered=tuple(" ".join(c.split()) for c in considered or ()),
    )


def parse_params(params_type: type[Any], values: Mapping[str, tuple[str, Any]], problems: list[str]) -> Any:
    """Build a rule's frozen Params from ``{field: (path for messages, raw value)}``.

    Types come from the dataclass annotations (float, int, bool, str, tuple[str, ...],
    tuple[float, ...], Mapping[str, ...] of those: a TOML table; ``X | None`` for one of them
    whose default None means "not given"). A number is checked against its field's range
    (``rules.numbers.within`` in the metadata) here, every mistake its own line; the dataclass's
    ``__post_init__`` raises ValueError("field: reason") for what no range says (a name, a
    comparison of two fields), and only once each number is in its range.
    """
    hints = typing.get_type_hints(params_type)
    fields = {f.name for f in dataclasses.fields(params_type)}
    linked = {f.name: f.metadata["linked"] for f in dataclasses.fields(params_type) if "linked" in f.metadata}
    ranges: dict[str, Range] = {
        f.name: f.metadata[RANGE] for f in dataclasses.fields(params_type) if RANGE in f.metadata
    }
    kwargs: dict[str, Any] = {}
    ok = True
    base_path = ""
    for name, (path, raw_value) in values.items():
        base_path = path.rsplit(".", 1)[0]
        if name not in fields:
            problems.append(f"{path}: unknown key; {params_type.__name__} has {', '.join(sorted(fields))}")
            ok = False
            continue
        if name in linked:
            problems.append(f"{path}: not set here; it follows the profile's {linked[name]} standard")
            ok = False
            continue
        before = len(problems)
        kwargs[name] = _expect(raw_value, hints[name], path, problems, ranges.get(name))
        ok = ok and len(problems) == before
    if not ok:
        return None
    try:
        return params_type(**kwargs)
    except ValueError as exc:
        message = str(exc)
        field_name, _, reason = message.partition(": ")
        if field_name in fields and reason:
            where = values[field_name][0] if field_name in values else f"{base_path}.{field_name}".lstrip(".")
            problems.append(f"{where}: {reason}")
        else:
            problems.append(f"{base_path or params_type.__name__}: {message}")
        return None


def _describe(value: Any) -> str:
    return repr(value)


def _expect(value: Any, expected: Any, path: str, problems: list[str], bounds: Range | None = None) -> Any:
    """Check a TOML/override value against a type annotation and, for numbers, the param's range
    (each number of a list or table); record a problem and return None if wrong."""
    origin = typing.get_origin(expected)
    if origin in (types.UnionType, typing.Union) and type(None) in typing.get_args(expected):
        # ``X | None``: TOML has no null, so a value given is an X (None is the default's "absent")
        [expected] = [a for a in typing.get_args(expected) if a is not type(None)]
        return _expect(value, expected, path, problems, bounds)
    if origin in (Mapping, dict, collections.abc.Mapping):
        value_type = typing.get_args(expected)[1]
        if not isinstance(value, Mapping):
            problems.append(f"{path}: expected a table, got {_describe(value)}")
            return None
        entries = {}
        for key, item in value.items():
            checked = _expect(item, value_type, f"{path}.{key}", problems, bounds)
            if checked is None:
                return None
            entries[str(key)] = checked
        return types.MappingProxyType(entries)
    if origin is tuple:
        item_type = typing.get_args(expected)[0]
        if not isinstance(value, list | tuple):
            problems.append(f"{path}: expected a list, got {_describe(value)}")
            return None
        items = []
        for index, item in enumerate(value):
            checked = _expect(item, item_type, f"{path}[{index}]", problems, bounds)
            if checked is None:
                return None
            items.append(checked)
        return tuple(items)
    if expected is bool:
        if not isinstance(value, bool):
            problems.append(f"{path}: expected true or false, got {_describe(value)}")
            return None
        return value
    if expected is int or expected is float:
        # TOML's nan passes every comparison (a limit never met), true is an int to Python, and
        # an integer may be past a float's range: one check for every TOML reader (rules.numbers).
        whole = expected is int
        problem = number_problem(value, whole=whole) if bounds is None else bounds.problem(value, whole=whole)
        if problem is not None:
            problems.append(f"{path}: {problem}")
            return None
        return expected(value)
    if expected is str:
        if not isinstance(value, str):
            problems.append(f"{path}: expected a string, got {_describe(value)}")
            return None
        return value
    raise TypeError(f"{path}: unsupported params annotation {expected!r}")  # programmer error
