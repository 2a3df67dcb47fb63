"""A notice of violation's content as data: what every format (monitor/notify/formats.py) renders.

    notices tables ──► load_notice ──► (Notice, history)
    configuration, chain, blast facts ──► notice_context ──► NoticeContext
    (Notice, history, NoticeContext) ──► header_rows, document_sections ──► Markdown / HTML / PDF

The document is written for the town, the operator and the inspectors: local time with
the zone named, plain words, the ordinance quoted. Everything reads through a plain
``sqlite3.Connection`` so the CLI, the daemon and the delivery worker (each with its own
connection) can build it.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from monitor.config import Config, SiteConfig, TownConfig
from monitor.journal import queries
from monitor.notify.blast_facts import blast_rows
from monitor.notify.notices import (
    Notice,
    NoticeChange,
    NoticeEpisode,
    duration_text,
    episode_window,
    get_notice,
    limit_text,
    measurement_text,
    notice_history,
    quantity_text,
    service_text,
)
from monitor.wire.canonical import from_us
from monitor.wire.protocol import format_ts, parse_ts
from rules.citation import citation_text, is_section
from rules.profile import Profile, ProfileError, load_profile
from rules.times import local_moment, local_stamp, span_text

__all__ = [
    "PLOT_MARGIN",
    "SIGNATURE",
    "NoticeContext",
    "Section",
    "answered_complaints",
    "change_dates",
    "complaint_rows",
    "deadline_text",
    "document_sections",
    "facts_rows",
    "header_rows",
    "history_rows",
    "load_notice",
    "measurements",
    "notice_context",
    "notice_title",
    "served_text",
]

# The time shown around a notice's episodes: its evidence plot, and the evidence bundle it names.
PLOT_MARGIN = timedelta(minutes=30)


@dataclass(frozen=True, slots=True)
class NoticeContext:
    """What a notice document needs beyond the notice's own rows: who issues it, where to reply,
    the profile's terms, the chain head the notice was recorded under and, for a blast, its facts.

    Built by :func:`notice_context` from the configuration and the store; every field may be
    missing (a store read without its configuration), and the document then says what is missing.
    """

    town: TownConfig | None = None
    operator_address: str = ""
    profile: Profile | None = None
    site: SiteConfig | None = None
    config_path: str = ""
    chain_seq: int | None = None
    chain_head: str = ""
    blast_rows: tuple[tuple[str, str], ...] = ()
    complaints: tuple[Mapping[str, str], ...] = ()  # the residents' complaints it answers


def load_notice(conn: sqlite3.Connection, notice_id: str) -> tuple[Notice, list[NoticeChange]]:
    return get_notice(conn, notice_id), notice_history(conn, notice_id)


def _context(config: Config | None, notice: Notice) -> tuple[SiteConfig | None, Profile | None]:
    site = config.site(notice.site) if config is not None else None
    profile = None
    if site is not None:
        try:
            profile = load_profile(site.profile, site.agreement)
        except ProfileError:
            profile = None
    return site, profile


def notice_context(conn: sqlite3.Connection, notice: Notice, config: Config | None) -> NoticeContext:
    """Everything the formats print besides the notice itself."""
    site, profile = _context(config, notice)
    entry = queries.chain_entry(conn, notice.site, "notice", notice.id)
    return NoticeContext(
        town=config.town if config is not None and config.town.configured else None,
        operator_address=site.operator_address if site is not None else "",
        profile=profile,
        site=site,
        config_path=config.source if config is not None else "",
        chain_seq=entry.seq if entry else None,
        chain_head=entry.head if entry else "",
        blast_rows=tuple(blast_rows(conn, notice, site, profile)),
        complaints=tuple(answered_complaints(conn, notice)),
    )


def answered_complaints(conn: sqlite3.Connection, notice: Notice) -> list[dict[str, str]]:
    """The residents' complaints the Town attached to the notice (monitor/complaints/book.py):
    reference, what, when (site time) and what the record said when each came. Never the
    complainant's contact details: the notice goes to the operator."""
    from rules.complaints import CATEGORIES

    cursor = conn.cursor()
    cursor.row_factory = sqlite3.Row  # the connection's own factory is left as it is
    try:
        rows = cursor.execute(
            "SELECT id, what, start_us, end_us, correlation FROM complaints WHERE id IN"
            " (SELECT complaint_id FROM complaint_changes WHERE notice_id = ? AND change = 'attached')"
            " ORDER BY start_us, id",
            (notice.id,),
        ).fetchall()
    except sqlite3.OperationalError:  # a store from before complaints were kept
        return []
    tz = notice.timezone
    out = []
    for row in rows:
        start, end = from_us(int(row["start_us"])), from_us(int(row["end_us"]))
        said = json.loads(row["correlation"] or "{}")
        out.append(
            {
                "id": str(row["id"]),
                "what": CATEGORIES.get(str(row["what"]), str(row["what"])),
                "when": span_text(start, end, tz, with_date=True) if end > start else local_moment(start, tz),
                "start": format_ts(start),
                "end": format_ts(end),
                "verdict": str(said.get("verdict", "")),
                "record": str(said.get("text", "")) or "not checked against the record",
            }
        )
    return out


def complaint_rows(complaints: Sequence[Mapping[str, str]]) -> list[tuple[str, str]]:
    """One row a complaint: 'C-7K3M-Q9TX' | 'noise, 2026-06-15 11:32:00 CDT; the record: corroborated ...'."""
    return [
        (
            f"Complaint {c['id']}",
            f"{c['what']}, {c['when']}; what the record said when it came: {c['record']}",
        )
        for c in complaints
    ]


# --------------------------------------------------------------------------- shared content


def _percent(value: Any) -> str:
    return "unknown" if value is None else f"{100 * float(value):.0f} %"


def _sensors_text(facts: Mapping[str, Any]) -> str:
    where = facts.get("sensor_locations") or {}
    return ", ".join(f"{s} ({where[s]})" if s in where else str(s) for s in facts.get("sensors", ()))


def measurements(facts: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The episode's measurements; notices issued before they were all kept have only the worst."""
    listed = facts.get("measurements")
    if isinstance(listed, list) and listed:
        return [m for m in listed if isinstance(m, Mapping)]
    worst = facts.get("worst")
    return [worst] if isinstance(worst, Mapping) else []


def _when_text(episode: NoticeEpisode, tz: str) -> tuple[str, str]:
    """(local, UTC) of the episode's one window; an instant (a blast) is told to the second."""
    start, end = episode_window(episode.facts, episode.start, episode.end)
    seconds = (end - start).total_seconds()
    zone = ZoneInfo(tz)
    if seconds < 60:
        return start.astimezone(zone).strftime("%Y-%m-%d %H:%M:%S %Z"), format_ts(start)
    return span_text(start, end, tz, with_date=True), f"{format_ts(start)} to {format_ts(end)}"


def _happened_text(notice: Notice, episode: NoticeEpisode) -> str:
    """One sentence from the same facts as the table: what, where, the window, each measurement."""
    f = episode.facts
    limited = [m for m in measurements(f) if m.get("limit") is not None]
    if not limited:
        return str(f.get("summary", ""))  # a blast or a record: the rule's own account
    start, end = episode_window(f, episode.start, episode.end)
    tz = notice.timezone
    seconds = (end - start).total_seconds()
    long = seconds >= 60
    span = f"over {span_text(start, end, tz, with_date=True)}" if long else f"at {local_stamp(start, tz)}"
    where = _sensors_text(f)
    measured = "; ".join(
        f"{m['name']} {quantity_text(float(m['value']), str(m.get('unit') or ''))} against a limit of "
        f"{limit_text(float(m['limit']), str(m.get('unit') or ''))}"
        for m in limited
    )
    title = str(notice.data.get("title") or "Violation")
    return f"{title}{f' at {where}' if where else ''} {span}: {measured} ({citation_text(notice.section)})."


def _intervals_text(episode: NoticeEpisode) -> str:
    """How many findings the episode holds; where the window starts earlier, why."""
    count = int(episode.facts.get("findings", len(episode.finding_ids)))
    text = str(count)
    flagged = episode.facts.get("flagged_start")
    start, _ = episode_window(episode.facts, episode.start, episode.end)
    if isinstance(flagged, str) and flagged != format_ts(start):
        tz = str(episode.facts.get("timezone") or "UTC")
        text += (
            f", from {local_stamp(episode.start, tz)}: before then the condition had not yet lasted "
            "long enough to be a violation"
        )
    return text


def _peak_text(facts: Mapping[str, Any], tz: str) -> str:
    """'LAeq,1min 84.2 dB(A) over 16:12:03-16:13:03 CST (1 minute), the highest of the 11 windows
    judged in violation': where the level the notice states was measured."""
    worst = facts.get("worst")
    first, last = facts.get("peak_start"), facts.get("peak_end")
    if not isinstance(worst, Mapping) or not isinstance(first, str) or not isinstance(last, str):
        return ""  # a notice recorded before episodes kept their peak window
    try:
        start, end = parse_ts(first, "peak_start"), parse_ts(last, "peak_end")
    except ValueError:
        return ""
    windows = int(facts.get("findings") or 1)
    text = f"{measurement_text(worst)} over {span_text(start, end, tz)}"
    if windows > 1:
        text += f", the highest of the {windows} windows judged in violation"
    exempt = float(facts.get("peak_exempt_s") or 0.0)
    if exempt:
        text += f"; {duration_text(exempt)} of exempt activity left out of that window"
    return text


def facts_rows(
    episode: NoticeEpisode, timezone: str = "UTC", notice: Notice | None = None
) -> list[tuple[str, str]]:
    """The facts table of one episode: (label, value) rows in plain words."""
    f = episode.facts
    tz = str(f.get("timezone") or timezone)
    when_local, when_utc = _when_text(episode, tz)
    measured = "; ".join(measurement_text(m) for m in measurements(f))
    rows = [
        ("When (local time)", when_local),
        ("When (UTC)", when_utc),
    ]
    if f.get("sensors"):
        rows.append(("Sensors", _sensors_text(f)))
    if measured:
        rows.append(("Measured vs limit", measured))
    peak = _peak_text(f, tz)
    if peak:
        rows.append(("Highest window", peak))
    rows += [
        ("Intervals judged in violation", _intervals_text(episode)),
        (
            "What happened",
            _happened_text(notice, episode) if notice is not None else str(f.get("summary", "")),
        ),
        ("Exemptions considered", "; ".join(f.get("exemptions", ())) or "none applied in these intervals"),
    ]
    weather = f.get("weather_affected_s")
    if weather is not None:
        rows.append(
            (
                "Weather considered",
                f"{duration_text(float(weather))} affected by wind or rain; the violation stands without them"
                if weather
                else "no judged second was affected by wind or rain",
            )
        )
    rows.append(
        (
            "Data completeness",
            f"{_percent(f.get('completeness_mean'))} of expected data (lowest interval "
            f"{_percent(f.get('completeness_min'))})",
        )
    )
    return rows


def served_text(notice: Notice, history: Sequence[NoticeChange]) -> str:
    """When and by whom the Town served the notice ("" not recorded): '2026-12-07 by clerk' for a
    service given as a day, '2026-12-07 14:10 CST (2026-12-07T20:10:00Z) by clerk' for a time.
    The document's header and the portal's notice page both say it so."""
    served = next((c for c in history if c.change == "served"), None)
    if served is None:
        return ""
    when = service_text(served.data, notice.timezone)
    if not served.data.get("served_day"):  # a time given: the instant too, as the row
        when += f" ({format_ts(parse_ts(served.data['served'], 'served'))})"
    return f"{when} by {served.actor}"


def deadline_text(notice: Notice, history: Sequence[NoticeChange]) -> str:
    """The cure deadline in local time and, where it moved, why and from what: '2026-12-21 23:59
    CST (counted from service; first deadline 2026-12-20 23:59 CST)'. The document's header and
    the portal's notice page both say it so."""
    tz = notice.timezone
    deadline = local_stamp(notice.deadline, tz)
    if notice.deadline != notice.first_deadline:
        moved_by = [
            words
            for words, change in (("counted from service", "served"), ("extended", "extended"))
            if any(c.change == change and c.deadline != notice.first_deadline for c in history)
        ] or ["extended"]
        deadline += f" ({', '.join(moved_by)}; first deadline {local_stamp(notice.first_deadline, tz)})"
    return deadline


def issued_text(notice: Notice) -> str:
    """When the notice was issued: '2026-12-03 09:03 CST (2026-12-03T15:03:00Z)'."""
    return f"{local_stamp(notice.opened, notice.timezone)} ({format_ts(notice.opened)})"


def change_dates(notice: Notice, change: NoticeChange) -> tuple[str, str]:
    """When a change of the notice was made and the cure deadline after it, as the document's
    history says them: ('2026-12-07 14:10 CST', '2026-12-21 23:59 CST')."""
    return local_stamp(change.at, notice.timezone), local_stamp(change.deadline, notice.timezone)


@dataclass(frozen=True, slots=True)
class NoticeDates:
    """When a notice was issued, served ("" not recorded) and is due, in the words its document's
    header says them, and each change's (when, deadline after) in its history's words
    (``change_dates``): the portal's notice page and its notices list show these, no others."""

    issued: str
    served: str
    deadline: str
    changes: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, notice: Notice, history: Sequence[NoticeChange]) -> NoticeDates:
        return cls(
            issued_text(notice),
            served_text(notice, history),
            deadline_text(notice, history),
            tuple(change_dates(notice, c) for c in history),
        )


def header_rows(
    notice: Notice, context: NoticeContext | None = None, history: Sequence[NoticeChange] = ()
) -> list[tuple[str, str]]:
    d = notice.data
    address = context.operator_address if context is not None else ""
    dates = NoticeDates.of(notice, history)
    operator = str(d.get("operator") or "(operator not configured)")
    rows = [
        ("Notice", notice.id),
        ("Status", notice.status.replace("_", " ")),
        ("To (Operator)", f"{operator}, {', '.join(address.splitlines())}" if address else operator),
        ("Site", f"{d.get('site_name', notice.site)} ({notice.site})"),
        ("Standard", f"{citation_text(notice.section, capital=True)}: {d.get('title', '')}"),
        ("Issued", dates.issued),
    ]
    if dates.served:
        rows.append(("Served", dates.served))
    return [*rows, ("Cure deadline", f"{dates.deadline} ({format_ts(notice.deadline)})")]


def _cure_text(notice: Notice, context: NoticeContext | None) -> str:
    """The period to correct: the ordinance's when the profile names its section (Dovre 13.3.A),
    followed by the profile's words on asking for more time (``[notice] more_time``) where it gives
    them, else the Town's setting in the profile, attributed to no section (land-disturbing: § 28-5
    sets no period and no procedure for more time)."""
    d = notice.data
    days = d.get("cure_days", 14)
    counted = f", counted to {d['deadline_rule']}" if d.get("deadline_rule") else ""
    # minewatch draws a notice up when it finds the violation; serving it is the Town's act.
    served = (
        f" The {days} days count from the time this notice shows as issued, when minewatch drew it up;"
        " where the Town serves it later and records the service (`minewatch notices serve`), they count"
        " from the service."
    )
    if not d.get("cure_section"):
        profile = f"profile {d['profile']}" if d.get("profile") else "the profile"
        return (
            f"The Operator has {days} days to correct the violation{counted}. The {days} days are the"
            f" Town's setting in {profile}, not a period set by a section of the ordinance.{served}"
        )
    terms = context.profile.notice if context is not None and context.profile is not None else None
    more_time = f" {terms.more_time}" if terms is not None and terms.more_time else ""
    return (
        f"Under {citation_text(d['cure_section'])} the Operator is granted {days} days to correct the"
        f" violation{counted}.{more_time}{served}"
    )


def _consequence_texts(notice: Notice, context: NoticeContext | None) -> list[str]:
    """What follows if the violation is not corrected, and any hearing or appeal: the profile's words.

    That the ordinance provides no hearing or appeal is said only when the profile says so with its
    source (``[notice] no_hearing_source``); a profile silent on it leaves the question open here.
    """
    profile = context.profile if context is not None else None
    terms = profile.notice if profile is not None else None
    name = profile.name if profile is not None else str(notice.data.get("profile") or "")
    judged = f"profile {name}, under which this notice was judged," if name else "the profile"
    out: list[str] = []
    if terms is not None and terms.consequence:
        out.append(terms.consequence)
    elif notice.data.get("citation_section"):
        out.append(
            "If the violation is not corrected in time, a citation may be issued"
            f" ({citation_text(notice.data['citation_section'])})."
        )
    else:
        out.append(f"Not stated here: {judged} does not record what the ordinance provides.")
    if terms is not None and terms.hearing:
        cite = f" ({citation_text(terms.hearing_section)})" if terms.hearing_section else ""
        out.append(f"Hearing or appeal{cite}: {terms.hearing}")
    elif terms is not None and terms.no_hearing_source:
        out.append(
            f"The ordinance provides no hearing or appeal of a notice of violation "
            f"({citation_text(terms.no_hearing_source)}); this notice cites none."
        )
    else:
        out.append(
            f"Hearing or appeal: not stated here; {judged} does not record whether the ordinance"
            " provides one."
        )
    return out


_PARAM_UNITS = (
    ("_lux", "lux"),
    ("_db", "dB"),
    ("_s", "s"),
    ("_h", "hours"),
    ("_hz", "Hz"),
    ("_ms", "m/s"),
    ("_deg", "degrees"),
    ("_min", "minutes"),
    ("_ntu", "NTU"),
    ("_in", "in"),
    ("_sqft", "sq ft"),
)


def _param_label(name: str, value: Any) -> tuple[str, str]:
    """('minimum duration', '300 s') from ('min_duration_s', 300.0)."""
    unit = ""
    words = name
    for suffix, text in _PARAM_UNITS:
        if name.endswith(suffix):
            words, unit = name[: -len(suffix)], text
            break
    # "max_lux" and "max_ntu" leave a bare "max": every limit reads "maximum", never "max".
    words = {"min": "minimum", "max": "maximum"}.get(words, words)
    words = words.replace("min_", "minimum ").replace("max_", "maximum ").replace("_", " ").strip()
    if isinstance(value, float | int) and not isinstance(value, bool):
        shown = f"{float(value):g}"
    elif isinstance(value, tuple | list):
        shown = ", ".join(str(v) for v in value) or "none"
    else:
        shown = str(value)
    return words, f"{shown} {unit}".strip()


def source_rows(notice: Notice, context: NoticeContext | None) -> list[tuple[str, str]]:
    """Each number the notice relies on and its source: the ordinance, the profile or an agreement."""
    if context is None or context.profile is None or notice.standard not in context.profile.standards:
        return []
    profile = context.profile
    params = profile.params(notice.standard)
    agreement = context.site.agreement if context.site is not None else {}
    rows: list[tuple[str, str]] = []
    for name, source in profile.notice.sources.get(notice.standard, {}).items():
        words, shown = _param_label(name, getattr(params, name, ""))
        if f"{notice.standard}.{name}" in agreement or name in (agreement.get(notice.standard) or {}):
            said = "set for this site by its operations agreement (section 4.1)"
        elif source == "profile":
            said = f"set by the Town in profile {profile.name}; the ordinance gives no number"
        elif is_section(source):
            said = f"the ordinance's own, {citation_text(source)}"
        else:
            said = source
        rows.append((f"{words}: {shown}", said))
    return rows


def considered_items(notice: Notice, context: NoticeContext | None) -> list[str]:
    """The project's own choices behind a finding (not the ordinance's), from the profile or the findings."""
    items: dict[str, None] = {}
    if context is not None and context.profile is not None and notice.standard in context.profile.standards:
        standard = context.profile.standards[notice.standard]
        # Read by name: a profile or standard may or may not carry these lists.
        for attribute in ("considered", "interpretations"):
            items.update(dict.fromkeys(_strings(getattr(standard, attribute, ()))))
            items.update(dict.fromkeys(_strings(getattr(context.profile, attribute, ()))))
    items.update(dict.fromkeys(_strings(notice.data.get("considered", ()))))
    for episode in notice.episodes:
        items.update(dict.fromkeys(_strings(episode.facts.get("considered", ()))))
    return list(items)


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value] if value.strip() else []
    if isinstance(value, Mapping):
        return [f"{k}: {v}" for k, v in value.items()]
    if isinstance(value, list | tuple):
        return [str(v) for v in value if str(v).strip()]
    return []


def _evidence_window(notice: Notice) -> tuple[datetime, datetime]:
    starts = [episode_window(e.facts, e.start, e.end) for e in notice.episodes]
    if not starts:
        return notice.opened - PLOT_MARGIN, notice.opened
    first = min(a for a, _ in starts) - PLOT_MARGIN
    last = max(b for _, b in starts) + PLOT_MARGIN
    return first.replace(second=0, microsecond=0), (last + timedelta(seconds=59)).replace(
        second=0, microsecond=0
    )


def evidence_rows(notice: Notice, context: NoticeContext | None) -> list[tuple[str, str]]:
    """How to check the facts: the chain head under which the notice was recorded and the export command."""
    first, last = _evidence_window(notice)
    # The file's name, not the server's path to it: the notice goes to the operator.
    given = context.config_path if context is not None else ""
    config = Path(given).name if given else "minewatch.toml"
    command = (
        f"minewatch evidence --config {config} --site {notice.site} --from {format_ts(first)} "
        f"--to {format_ts(last)} --out {notice.id}-evidence.zip"
    )
    head = (
        f"{context.chain_head} (entry {context.chain_seq} of the {notice.site} chain)"
        if context is not None and context.chain_head
        else "not available when this document was made"
    )
    version = str(notice.data.get("profile_version") or "")
    profile = str(notice.data.get("profile") or "")
    judged = (
        f"profile {profile} version {version} (the first 12 hex digits of its SHA-256, chained by the daemon)"
        if version
        else "profile version not recorded (a notice issued before profiles were chained)"
    )
    return [
        ("Chain head at issue", head),
        ("Judged under", judged),
        ("Evidence bundle", command),
        ("Verify it", f"minewatch verify {notice.id}-evidence.zip"),
    ]


def issuer_rows(context: NoticeContext | None) -> list[tuple[str, str]]:
    town = context.town if context is not None else None
    if town is None:
        return [("Issued for the Town by", "(not configured: set [town] officer, title and contact)")]
    return [
        ("Issued for the Town by", f"{town.officer}, {town.title}"),
        ("Reply to", ", ".join(town.contact.splitlines())),
    ]


SIGNATURE = "Signature: ______________________________    Date: ______________"


def history_rows(notice: Notice, history: Sequence[NoticeChange]) -> list[tuple[str, str, str, str, str]]:
    """(when, change, by, deadline after, note) of each change: the document's history table."""
    return [
        (when, c.change.replace("_", " "), c.actor, deadline, c.note)
        for c in history
        for when, deadline in (change_dates(notice, c),)
    ]


def notice_title(notice: Notice) -> str:
    return f"Notice of violation {notice.id}"


@dataclass(frozen=True, slots=True)
class Section:
    """One titled part of the document: rows (a two-column table), paragraphs, or both."""

    title: str
    rows: tuple[tuple[str, str], ...] = ()
    paragraphs: tuple[str, ...] = ()
    bullets: tuple[str, ...] = ()
    quote: str = ""


def document_sections(
    notice: Notice, history: Sequence[NoticeChange], context: NoticeContext | None
) -> list[Section]:
    """The notice's body, in order, shared by every format (the plot and history are placed by each)."""
    d = notice.data
    sections = [
        Section(
            f"Standard violated: {citation_text(notice.section)}, {d.get('title', '')}",
            quote=str(d.get("text", "")),
        ),
    ]
    for number, episode in enumerate(notice.episodes, 1):
        label = "Facts" if len(notice.episodes) == 1 else f"Facts, episode {number}"
        rows = facts_rows(episode, notice.timezone, notice)
        if number == 1 and context is not None and context.blast_rows:
            rows = rows[:2] + list(context.blast_rows) + rows[2:]
        sections.append(Section(label, tuple(rows)))
    if context is not None and context.complaints:
        sections.append(
            Section(
                "Residents' complaints this notice answers",
                tuple(complaint_rows(context.complaints)),
                paragraphs=(
                    "Each was checked against the record when it came (monitor/complaints); the"
                    " complainants' details stay with the Town.",
                ),
            )
        )
    considered = considered_items(notice, context)
    if considered:
        sections.append(
            Section(
                "Considered (choices of this monitoring, not the ordinance's words)",
                bullets=tuple(considered),
            )
        )
    sources = source_rows(notice, context)
    if sources:
        sections.append(Section("Numbers used and their sources", tuple(sources)))
    sections.append(
        Section(
            "Required action", paragraphs=(str(d.get("required_action", "")), _cure_text(notice, context))
        )
    )
    cite = (
        f" ({citation_text(context.profile.notice.consequence_section)})"
        if (
            context is not None and context.profile is not None and context.profile.notice.consequence_section
        )
        else ""
    )
    sections.append(
        Section(
            f"If the violation is not corrected{cite}", paragraphs=tuple(_consequence_texts(notice, context))
        )
    )
    sections.append(Section("Evidence", tuple(evidence_rows(notice, context))))
    sections.append(Section("Issued for the Town", tuple(issuer_rows(context)), paragraphs=(SIGNATURE,)))
    return sections
