"""Notices as documents: Markdown, self-contained HTML, JSON and PDF, with an evidence plot.

    notices tables ──► load_notice ──► (Notice, history) ──┬─► render_markdown / render_json
    sound / light readings, events ──► evidence_plot (PNG) ─┴─► render_html (PNG inline, base64)
                                                              └─► render_pdf  (fpdf2, PNG embedded)

Everything reads through a plain ``sqlite3.Connection`` so the CLI, the daemon and the
delivery worker (each with its own connection) can render. Plots use matplotlib's
object API on the Agg canvas, never pyplot, so rendering is safe in a worker thread.
The documents are written for the town, the operator and the inspectors: local time
with the zone named, plain words, the ordinance quoted.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
import re
import sqlite3
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from monitor.config import Config, SiteConfig, TownConfig
from monitor.notify.notices import (
    Notice,
    NoticeChange,
    NoticeEpisode,
    duration_text,
    episode_window,
    get_notice,
    limit_text,
    local_text,
    measurement_text,
    notice_history,
    quantity_text,
)
from monitor.wire.canonical import from_us, to_us
from monitor.wire.codec import event_from_row
from monitor.wire.protocol import format_ts
from rules.model import Blast, TruckPassage, WorkPeriod
from rules.profile import Profile, ProfileError, load_profile

__all__ = [
    "FORMATS",
    "Span",
    "evidence_plot",
    "facts_rows",
    "load_notice",
    "notice_json",
    "notice_payload_json",
    "render_html",
    "render_json",
    "render_markdown",
    "render_notice",
    "render_pdf",
]

FORMATS = ("md", "html", "json", "pdf")
PLOT_MARGIN = timedelta(minutes=30)
NOISE_RULES = frozenset({"noise"})
LIGHT_RULES = frozenset({"light_trespass", "high_intensity_light", "upward_light", "flashing_light"})
TURBIDITY_RULES = frozenset({"turbidity"})
SOUND_UNITS = frozenset({"dB(A)", "dB"})
LUX_FLOOR = 0.01  # the log axis's floor: darker readings are drawn here
_GAP_MIN_S = 5  # missing runs at least this long are shaded "no data"
_READING_GAP = timedelta(minutes=2)  # per-period readings (light, turbidity): a longer silence is "no data"


@dataclass(frozen=True, slots=True)
class Span:
    """A shaded interval on the plot: an exempt activity."""

    start: datetime
    end: datetime
    label: str


# --------------------------------------------------------------------------- loading


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
    """Everything :func:`render_markdown` and its siblings print besides the notice itself."""
    site, profile = _context(config, notice)
    row = conn.execute(
        "SELECT seq, head FROM chain WHERE site = ? AND kind = 'notice' AND key = ?", (notice.site, notice.id)
    ).fetchone()
    return NoticeContext(
        town=config.town if config is not None and config.town.configured else None,
        operator_address=site.operator_address if site is not None else "",
        profile=profile,
        site=site,
        config_path=config.source if config is not None else "",
        chain_seq=int(row[0]) if row else None,
        chain_head=str(row[1]) if row else "",
        blast_rows=tuple(blast_rows(conn, notice, site, profile)),
    )


def render_notice(
    conn: sqlite3.Connection, notice_id: str, fmt: str, *, config: Config | None = None, compress: bool = True
) -> bytes:
    """One notice in one of FORMATS, as bytes (UTF-8 text for md/html/json)."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
    notice, history = load_notice(conn, notice_id)
    if fmt == "json":
        return render_json(notice, history).encode()
    context = notice_context(conn, notice, config)
    if fmt == "md":
        return render_markdown(notice, history, context).encode()
    plot = evidence_plot(conn, notice, site=context.site, profile=context.profile)
    if fmt == "html":
        return render_html(notice, history, plot, context).encode()
    return render_pdf(notice, history, plot, context, compress=compress)


# --------------------------------------------------------------------------- shared content


def _percent(value: Any) -> str:
    return "unknown" if value is None else f"{100 * float(value):.0f} %"


def _sensors_text(facts: Mapping[str, Any]) -> str:
    where = facts.get("sensor_locations") or {}
    return ", ".join(f"{s} ({where[s]})" if s in where else str(s) for s in facts.get("sensors", ()))


def _measurements(facts: Mapping[str, Any]) -> list[Mapping[str, Any]]:
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
    return (
        f"{local_text(start, tz)} to {local_text(end, tz)} ({duration_text(seconds)})",
        f"{format_ts(start)} to {format_ts(end)}",
    )


def _happened_text(notice: Notice, episode: NoticeEpisode) -> str:
    """One sentence from the same facts as the table: what, where, the window, each measurement."""
    f = episode.facts
    limited = [m for m in _measurements(f) if m.get("limit") is not None]
    if not limited:
        return str(f.get("summary", ""))  # a blast or a record: the rule's own account
    start, end = episode_window(f, episode.start, episode.end)
    tz = notice.timezone
    seconds = (end - start).total_seconds()
    span = (
        f"at {local_text(start, tz)}"
        if seconds < 60
        else f"from {local_text(start, tz)} to {local_text(end, tz)} ({duration_text(seconds)})"
    )
    where = _sensors_text(f)
    measured = "; ".join(
        f"{m['name']} {quantity_text(float(m['value']), str(m.get('unit') or ''))} against a limit of "
        f"{limit_text(float(m['limit']), str(m.get('unit') or ''))}"
        for m in limited
    )
    title = str(notice.data.get("title") or "Violation")
    return f"{title}{f' at {where}' if where else ''} {span}: {measured} (section {notice.section})."


def _intervals_text(episode: NoticeEpisode) -> str:
    """How many findings the episode holds; where the window starts earlier, why."""
    count = int(episode.facts.get("findings", len(episode.finding_ids)))
    text = str(count)
    flagged = episode.facts.get("flagged_start")
    start, _ = episode_window(episode.facts, episode.start, episode.end)
    if isinstance(flagged, str) and flagged != format_ts(start):
        tz = str(episode.facts.get("timezone") or "UTC")
        text += (
            f", from {local_text(episode.start, tz)}: before then the condition had not yet lasted "
            "long enough to be a violation"
        )
    return text


def facts_rows(
    episode: NoticeEpisode, timezone: str = "UTC", notice: Notice | None = None
) -> list[tuple[str, str]]:
    """The facts table of one episode: (label, value) rows in plain words."""
    f = episode.facts
    tz = str(f.get("timezone") or timezone)
    when_local, when_utc = _when_text(episode, tz)
    measured = "; ".join(measurement_text(m) for m in _measurements(f))
    rows = [
        ("When (local time)", when_local),
        ("When (UTC)", when_utc),
    ]
    if f.get("sensors"):
        rows.append(("Sensors", _sensors_text(f)))
    if measured:
        rows.append(("Measured vs limit", measured))
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


def _header_rows(notice: Notice, context: NoticeContext | None = None) -> list[tuple[str, str]]:
    d = notice.data
    tz = notice.timezone
    deadline = local_text(notice.deadline, tz)
    if notice.deadline != notice.first_deadline:
        deadline += f" (extended; first deadline {local_text(notice.first_deadline, tz)})"
    address = context.operator_address if context is not None else ""
    operator = str(d.get("operator") or "(operator not configured)")
    return [
        ("Notice", notice.id),
        ("Status", notice.status.replace("_", " ")),
        ("To (Operator)", f"{operator}, {', '.join(address.splitlines())}" if address else operator),
        ("Site", f"{d.get('site_name', notice.site)} ({notice.site})"),
        ("Standard", f"Section {notice.section}: {d.get('title', '')}"),
        ("Issued", f"{local_text(notice.opened, tz)} ({format_ts(notice.opened)})"),
        ("Cure deadline", f"{deadline} ({format_ts(notice.deadline)})"),
    ]


def _cure_text(notice: Notice) -> str:
    d = notice.data
    section = f"section {d['cure_section']}" if d.get("cure_section") else "the ordinance"
    counted = f", counted to {d['deadline_rule']}" if d.get("deadline_rule") else ""
    return (
        f"Under {section} the Operator is granted {d.get('cure_days', 14)} days to correct the violation"
        f"{counted}. If circumstances require more time, the Operator shall immediately provide the Town"
        " with a written explanation of the need for additional time and the amount of additional time"
        " required."
    )


def _consequence_texts(notice: Notice, context: NoticeContext | None) -> list[str]:
    """What follows if the violation is not corrected, and any hearing or appeal: the profile's words."""
    terms = context.profile.notice if context is not None and context.profile is not None else None
    out: list[str] = []
    if terms is not None and terms.consequence:
        out.append(terms.consequence)
    elif notice.data.get("citation_section"):
        out.append(
            f"If the violation is not corrected in time, a citation may be issued (section "
            f"{notice.data['citation_section']})."
        )
    if terms is not None and terms.hearing:
        cite = f" (section {terms.hearing_section})" if terms.hearing_section else ""
        out.append(f"Hearing or appeal{cite}: {terms.hearing}")
    else:
        out.append(
            "The ordinance provides no hearing or appeal of a notice of violation; this notice cites none."
        )
    return out


_SECTION = re.compile(r"\d+(?:\.[0-9A-Za-z]+)*")
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
        elif _SECTION.fullmatch(source):
            said = f"the ordinance's own, section {source}"
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
    config = context.config_path if context is not None and context.config_path else "minewatch.toml"
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


_SIGNATURE = "Signature: ______________________________    Date: ______________"


def _history_rows(notice: Notice, history: Sequence[NoticeChange]) -> list[tuple[str, str, str, str, str]]:
    tz = notice.timezone
    return [
        (local_text(c.at, tz), c.change.replace("_", " "), c.actor, local_text(c.deadline, tz), c.note)
        for c in history
    ]


def _title(notice: Notice) -> str:
    return f"Notice of violation {notice.id}"


@dataclass(frozen=True, slots=True)
class _Section:
    """One titled part of the document: rows (a two-column table), paragraphs, or both."""

    title: str
    rows: tuple[tuple[str, str], ...] = ()
    paragraphs: tuple[str, ...] = ()
    bullets: tuple[str, ...] = ()
    quote: str = ""


def document_sections(
    notice: Notice, history: Sequence[NoticeChange], context: NoticeContext | None
) -> list[_Section]:
    """The notice's body, in order, shared by every format (the plot and history are placed by each)."""
    d = notice.data
    sections = [
        _Section(
            f"Standard violated: section {notice.section}, {d.get('title', '')}", quote=str(d.get("text", ""))
        ),
    ]
    for number, episode in enumerate(notice.episodes, 1):
        label = "Facts" if len(notice.episodes) == 1 else f"Facts, episode {number}"
        rows = facts_rows(episode, notice.timezone, notice)
        if number == 1 and context is not None and context.blast_rows:
            rows = rows[:2] + list(context.blast_rows) + rows[2:]
        sections.append(_Section(label, tuple(rows)))
    considered = considered_items(notice, context)
    if considered:
        sections.append(
            _Section(
                "Considered (choices of this monitoring, not the ordinance's words)",
                bullets=tuple(considered),
            )
        )
    sources = source_rows(notice, context)
    if sources:
        sections.append(_Section("Numbers used and their sources", tuple(sources)))
    sections.append(
        _Section("Required action", paragraphs=(str(d.get("required_action", "")), _cure_text(notice)))
    )
    cite = (
        f" (section {context.profile.notice.consequence_section})"
        if (
            context is not None and context.profile is not None and context.profile.notice.consequence_section
        )
        else ""
    )
    sections.append(
        _Section(
            f"If the violation is not corrected{cite}", paragraphs=tuple(_consequence_texts(notice, context))
        )
    )
    sections.append(_Section("Evidence", tuple(evidence_rows(notice, context))))
    sections.append(_Section("Issued for the Town", tuple(issuer_rows(context)), paragraphs=(_SIGNATURE,)))
    return sections


# --------------------------------------------------------------------------- JSON / Markdown


def notice_json(notice: Notice, history: Sequence[NoticeChange]) -> dict[str, Any]:
    return {
        "id": notice.id,
        "site": notice.site,
        "standard": notice.standard,
        "section": notice.section,
        "status": notice.status,
        "opened": format_ts(notice.opened),
        "first_deadline": format_ts(notice.first_deadline),
        "deadline": format_ts(notice.deadline),
        "notice": dict(notice.data),
        "episodes": [
            {
                "episode_id": e.episode_id,
                "start": format_ts(e.start),
                "end": format_ts(e.end),
                "finding_ids": list(e.finding_ids),
                "facts": dict(e.facts),
            }
            for e in notice.episodes
        ],
        "history": [
            {
                "seq": c.seq,
                "change": c.change,
                "status": c.status,
                "actor": c.actor,
                "note": c.note,
                "at": format_ts(c.at),
                "deadline": format_ts(c.deadline),
                "data": dict(c.data),
            }
            for c in history
        ],
    }


def render_json(notice: Notice, history: Sequence[NoticeChange]) -> str:
    return json.dumps(notice_json(notice, history), indent=2, ensure_ascii=False)


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(
    notice: Notice, history: Sequence[NoticeChange], context: NoticeContext | None = None
) -> str:
    d = notice.data
    out = [
        f"# {_title(notice)}",
        "",
        f"**{d.get('town', '')}**, {d.get('profile_title', '')}",
        "",
        "| | |",
        "|---|---|",
    ]
    out += [f"| {k} | {_md_cell(v)} |" for k, v in _header_rows(notice, context)]
    out.append("")
    for section in document_sections(notice, history, context):
        out += [f"## {section.title}", ""]
        if section.quote:
            out += [f"> {section.quote}", ""]
        if section.rows:
            out += ["| | |", "|---|---|"]
            out += [f"| {k} | {_md_cell(v)} |" for k, v in section.rows]
            out.append("")
        out += [f"- {item}" for item in section.bullets]
        if section.bullets:
            out.append("")
        for paragraph in section.paragraphs:
            out += [paragraph, ""]
    out += ["## History", "", "| When | Change | By | Deadline after | Note |", "|---|---|---|---|---|"]
    out += [f"| {' | '.join(_md_cell(x) for x in row)} |" for row in _history_rows(notice, history)]
    out.append("")
    return "\n".join(out)


# --------------------------------------------------------------------------- HTML

_CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color: #1b1b1b;
       max-width: 60rem; margin: 2rem auto; padding: 0 1rem; line-height: 1.45; }
header { border-bottom: 3px solid #1b1b1b; margin-bottom: 1.5rem; }
header .town { font-size: 1.1rem; font-weight: 600; margin: 0; }
header .profile { color: #555; margin: 0 0 .5rem 0; }
h1 { font-size: 1.6rem; margin: .2rem 0 .8rem 0; }
h2 { font-size: 1.15rem; margin-top: 1.8rem; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; width: 100%; margin: .5rem 0; }
th, td { text-align: left; vertical-align: top; padding: .3rem .5rem; border-bottom: 1px solid #e3e3e3; }
table.kv th { width: 13rem; color: #444; font-weight: 600; }
blockquote { margin: .5rem 0; padding: .5rem 1rem; border-left: 4px solid #888; background: #f5f5f5; }
.status { display: inline-block; padding: .1rem .5rem; border-radius: .3rem; background: #eee; }
.status-escalated { background: #f6c4c4; } .status-corrected { background: #cdeccd; }
figure { margin: 1rem 0; } figure img { max-width: 100%; border: 1px solid #ddd; }
figcaption { color: #555; font-size: .9rem; }
"""


def _kv_table(rows: Sequence[tuple[str, str]]) -> str:
    body = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in rows)
    return f'<table class="kv">{body}</table>'


def render_html(
    notice: Notice,
    history: Sequence[NoticeChange],
    plot_png: bytes | None,
    context: NoticeContext | None = None,
) -> str:
    d = notice.data
    e = html.escape
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{e(_title(notice))}</title><style>{_CSS}</style></head><body>",
        f'<header><p class="town">{e(str(d.get("town", "")))}</p>'
        f'<p class="profile">{e(str(d.get("profile_title", "")))}</p>'
        f"<h1>{e(_title(notice))} "
        f'<span class="status status-{e(notice.status)}">{e(notice.status.replace("_", " "))}</span>'
        "</h1></header>",
        _kv_table(_header_rows(notice, context)),
    ]
    for section in document_sections(notice, history, context):
        if section.title == "Required action" and plot_png:
            encoded = base64.b64encode(plot_png).decode("ascii")
            parts.append(
                "<h2>Evidence plot</h2>"
                f'<figure><img alt="Evidence plot for {e(notice.id)}" src="data:image/png;base64,{encoded}">'
                "<figcaption>Measured levels around the first episode, with the limit, exempt activities and "
                "periods without data.</figcaption></figure>"
            )
        parts.append(f"<h2>{e(section.title)}</h2>")
        if section.quote:
            parts.append(f"<blockquote>{e(section.quote)}</blockquote>")
        if section.rows:
            parts.append(_kv_table(section.rows))
        if section.bullets:
            parts.append("<ul>" + "".join(f"<li>{e(item)}</li>" for item in section.bullets) + "</ul>")
        parts += [f"<p>{e(paragraph)}</p>" for paragraph in section.paragraphs]
    parts += [
        "<h2>History</h2>",
        "<table><tr><th>When</th><th>Change</th><th>By</th><th>Deadline after</th><th>Note</th></tr>",
    ]
    parts += [
        "<tr>" + "".join(f"<td>{e(x)}</td>" for x in row) + "</tr>" for row in _history_rows(notice, history)
    ]
    parts += ["</table>", "</body></html>", ""]
    return "\n".join(parts)


# --------------------------------------------------------------------------- PDF

_LATIN1 = str.maketrans(
    {
        "\u2013": "-",
        "\u2014": "-",
        "\u2212": "-",
        "\u2018": "'",
        "\u2019": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u2026": "...",
        "\u2264": "<=",
        "\u2265": ">=",
        "\u2192": "->",
        "\u00a0": " ",
        "\u2009": " ",
    }
)


def _pdf_text(text: str) -> str:
    """The PDF core fonts are Latin-1: typographic characters become their plain equivalents."""
    return text.translate(_LATIN1).encode("latin-1", "replace").decode("latin-1")


_PDF_BODY = 10.0  # points
_PDF_LINE = 5.0  # mm per body line
_PDF_KEY_W = 45.0  # mm, the label column of two-column tables


def render_pdf(
    notice: Notice,
    history: Sequence[NoticeChange],
    plot_png: bytes | None,
    context: NoticeContext | None = None,
    *,
    compress: bool = True,
) -> bytes:
    """The notice as a Letter-size PDF; ``compress=False`` leaves the text searchable in the raw file.

    A heading never ends a page: before each one the height of the heading and of the start of
    its content (the first rows, the first paragraph or the whole plot) is measured, and a page
    that cannot hold both is ended first.
    """
    from fpdf import FPDF

    d = notice.data
    pdf = FPDF(orientation="portrait", unit="mm", format="Letter")
    pdf.set_compression(compress)
    pdf.set_title(_pdf_text(_title(notice)))
    pdf.set_author(_pdf_text(str(d.get("town", ""))))
    pdf.set_margins(18, 16, 18)
    pdf.set_auto_page_break(True, margin=16)
    pdf.add_page()
    width = pdf.epw

    def text_height(text: str, w: float, line: float) -> float:
        lines = pdf.multi_cell(w, line, _pdf_text(text), dry_run=True, output="LINES")
        return max(1, len(lines) if isinstance(lines, list) else 1) * line

    def rows_height(rows: Sequence[tuple[str, str]]) -> float:
        pdf.set_font("Helvetica", "", 9.5)
        total = sum(
            max(text_height(k, _PDF_KEY_W - 2, 5), text_height(v, width - _PDF_KEY_W - 2, 5)) + 2
            for k, v in rows
        )
        pdf.set_font("Helvetica", "", _PDF_BODY)
        return total

    def heading(text: str, keep_mm: float, size: float = 12) -> None:
        """The heading, on a new page if it and ``keep_mm`` of what follows do not fit on this one."""
        pdf.set_font("Helvetica", "B", size)
        needed = 3 + text_height(text, width, 7) + keep_mm
        if pdf.get_y() + needed > pdf.page_break_trigger:
            pdf.add_page()
        pdf.ln(3)
        pdf.multi_cell(width, 7, _pdf_text(text), new_x="LMARGIN", new_y="NEXT")
        pdf.set_font("Helvetica", "", _PDF_BODY)

    def paragraph(text: str) -> None:
        pdf.multi_cell(width, _PDF_LINE, _pdf_text(text), new_x="LMARGIN", new_y="NEXT")

    def kv(rows: Sequence[tuple[str, str]]) -> None:
        pdf.set_font("Helvetica", "", 9.5)
        with pdf.table(
            col_widths=(_PDF_KEY_W, width - _PDF_KEY_W),
            text_align="LEFT",
            first_row_as_headings=False,
            line_height=5,
        ) as table:
            for key, value in rows:
                row = table.row()
                row.cell(_pdf_text(key))
                row.cell(_pdf_text(value))
        pdf.set_font("Helvetica", "", _PDF_BODY)

    def image_height(png: bytes) -> float:
        w_px, h_px = _png_size(png)
        return width * h_px / w_px

    pdf.set_font("Helvetica", "B", 13)
    pdf.multi_cell(width, 7, _pdf_text(str(d.get("town", ""))), new_x="LMARGIN", new_y="NEXT")
    pdf.set_font("Helvetica", "", _PDF_BODY)
    paragraph(str(d.get("profile_title", "")))
    heading(f"{_title(notice)} ({notice.status.replace('_', ' ')})", 20, 16)
    kv(_header_rows(notice, context))
    for section in document_sections(notice, history, context):
        if section.title == "Required action" and plot_png:
            heading("Evidence plot", image_height(plot_png))
            pdf.image(io.BytesIO(plot_png), w=width)
        # What must stay with the heading: the quote or first paragraph, or the first two rows.
        if section.quote:
            pdf.set_font("Helvetica", "I", _PDF_BODY)
            keep = min(text_height(f'"{section.quote}"', width, _PDF_LINE), 40)
        elif section.rows:
            keep = rows_height(section.rows[:2])
        elif section.bullets:
            keep = text_height(section.bullets[0], width - 6, _PDF_LINE)
        else:
            keep = min(text_height(section.paragraphs[0], width, _PDF_LINE), 40) if section.paragraphs else 0
        if section.title == "Issued for the Town":
            keep = rows_height(section.rows) + 20  # the signature block is never split
        heading(section.title, keep)
        if section.quote:
            pdf.set_font("Helvetica", "I", _PDF_BODY)
            paragraph(f'"{section.quote}"')
            pdf.set_font("Helvetica", "", _PDF_BODY)
        if section.rows:
            kv(section.rows)
        for item in section.bullets:
            pdf.set_x(pdf.l_margin + 2)
            pdf.multi_cell(width - 2, _PDF_LINE, _pdf_text(f"- {item}"), new_x="LMARGIN", new_y="NEXT")
        for text in section.paragraphs:
            if text == _SIGNATURE:
                pdf.ln(10)
            paragraph(text)
            pdf.ln(1)
    heading("History", 14)
    pdf.set_font("Helvetica", "", 8.5)
    with pdf.table(col_widths=(24, 18, 18, 24, 46), text_align="LEFT", line_height=4.5) as table:
        header = table.row()
        for title in ("When", "Change", "By", "Deadline after", "Note"):
            header.cell(title)
        for entry in _history_rows(notice, history):
            row = table.row()
            for value in entry:
                row.cell(_pdf_text(value))
    return bytes(pdf.output())


def _png_size(png: bytes) -> tuple[int, int]:
    width, height = struct.unpack(">II", png[16:24])
    return int(width), int(height)


# --------------------------------------------------------------------------- blast facts

_BLAST_RULES = frozenset({"blast_window", "blast_notice", "air_overpressure"})
_BLAST_ID = re.compile(r"[Bb]last (\S+) ")


def _blast_id(episode: NoticeEpisode) -> str | None:
    for ref in episode.facts.get("refs", ()):
        if str(ref).startswith("blast:"):
            return str(ref)[len("blast:") :]
    match = _BLAST_ID.search(str(episode.facts.get("summary", "")))  # notices issued before refs were kept
    return match.group(1).rstrip(",") if match else None


def _event_data(conn: sqlite3.Connection, site: str, kind: str, event_id: str) -> dict[str, Any] | None:
    row = conn.execute(
        "SELECT data FROM events WHERE site = ? AND kind = ? AND id = ?", (site, kind, event_id)
    ).fetchone()
    return None if row is None else dict(json.loads(row[0]))


def blast_rows(
    conn: sqlite3.Connection, notice: Notice, site: SiteConfig | None, profile: Profile | None
) -> list[tuple[str, str]]:
    """A blast notice's facts: the blast time, the allowed window, that day's sunset, the 24-hour
    notice given for it, and the air overpressure measured, each from the store and the profile."""
    rule = str(notice.data.get("rule", ""))
    if rule not in _BLAST_RULES or not notice.episodes:
        return []
    blast_id = _blast_id(notice.episodes[0])
    if blast_id is None:
        return []
    tz = ZoneInfo(notice.timezone)
    rows: list[tuple[str, str]] = []
    blast = _event_data(conn, notice.site, "blast", blast_id)
    blast_ts = datetime.fromisoformat(str(blast["ts"]).replace("Z", "+00:00")) if blast else None
    if blast_ts is None:
        rows.append(("Blast", f"{blast_id}: no blast record in the store"))
    else:
        reason = str(blast.get("safety_reason") or "") if blast else ""
        rows.append(
            (
                "Blast",
                f"{blast_id} at {blast_ts.astimezone(tz).strftime('%Y-%m-%d %H:%M:%S %Z')}"
                f"; safety reason recorded: {reason or 'none'}",
            )
        )
    if profile is not None:
        window = next((s for s in profile.standards.values() if s.rule == "blast_window"), None)
        if window is not None:
            p = window.params
            late = (
                f"; after {p.window_end[:5]} only before sunset, for safety reasons beyond the "
                "Operator's control"
                if p.safety_exception_until_sunset
                else ""
            )
            rows.append(
                (
                    "Allowed blasting hours",
                    f"{p.window_start[:5]} to {p.window_end[:5]} local (section {window.section}){late}",
                )
            )
    if blast_ts is not None and site is not None:
        from rules import sun

        rows.append(
            ("Sunset that day", sun.sunset(site.context(), blast_ts.astimezone(tz).date()).explanation)
        )
    announced = _event_data(conn, notice.site, "blast-notice", blast_id)
    if announced is None:
        rows.append(("24-hour notice", "none recorded for this blast"))
    else:
        issued = datetime.fromisoformat(str(announced["issued_ts"]).replace("Z", "+00:00"))
        planned = datetime.fromisoformat(str(announced["planned_ts"]).replace("Z", "+00:00"))
        ahead = f", {duration_text((blast_ts - issued).total_seconds())} before the blast" if blast_ts else ""
        rows.append(
            (
                "24-hour notice",
                f"given {local_text(issued, notice.timezone)} for a blast planned at "
                f"{local_text(planned, notice.timezone)}{ahead}",
            )
        )
    rows.append(("Air overpressure", _overpressure_text(conn, notice.site, blast_id, blast, profile)))
    return rows


def _overpressure_text(
    conn: sqlite3.Connection,
    site: str,
    blast_id: str,
    blast: Mapping[str, Any] | None,
    profile: Profile | None,
) -> str:
    keys = [k for k, s in profile.standards.items() if s.rule == "air_overpressure"] if profile else []
    marks = ",".join("?" * len(keys))
    rows = (
        conn.execute(
            f"SELECT data FROM findings f WHERE site = ? AND standard IN ({marks}) AND retracted = 0"
            " AND revision = (SELECT MAX(revision) FROM findings g WHERE g.id = f.id) ORDER BY start_us",
            (site, *keys),
        ).fetchall()
        if keys
        else []
    )
    for (data,) in rows:
        finding = json.loads(data)
        if f"blast:{blast_id}" in finding.get("refs", ()):
            measured = "; ".join(measurement_text(m) for m in finding.get("measurements", ()))
            sensors = ", ".join(finding.get("sensors", ()))
            return f"{measured}{f' at {sensors}' if sensors else ''} ({finding.get('kind', '')})"
    if blast and blast.get("overpressure_db") is not None:
        return f"{quantity_text(float(blast['overpressure_db']), 'dB')} (linear peak, from the blast record)"
    return "not measured: no boundary meter reported a linear peak in the blast's window"


# --------------------------------------------------------------------------- the evidence plot


def evidence_plot(
    conn: sqlite3.Connection,
    notice: Notice,
    *,
    site: SiteConfig | None = None,
    profile: Profile | None = None,
    margin: timedelta = PLOT_MARGIN,
) -> bytes | None:
    """A PNG of the levels around the notice's first episode, or None when the standard has no series."""
    fig = evidence_figure(conn, notice, site=site, profile=profile, margin=margin)
    return None if fig is None else _png(fig)


def evidence_figure(
    conn: sqlite3.Connection,
    notice: Notice,
    *,
    site: SiteConfig | None = None,
    profile: Profile | None = None,
    margin: timedelta = PLOT_MARGIN,
) -> Any | None:
    """The plot as a matplotlib Figure (tests read its limit line), or None without a series."""
    if not notice.episodes:
        return None
    rule = str(notice.data.get("rule", ""))
    episode = notice.episodes[0]
    if rule in NOISE_RULES:
        return _noise_plot(conn, notice, episode, site, profile, margin)
    if rule in LIGHT_RULES:
        return _readings_plot(conn, notice, episode, profile, margin, _LIGHT_SERIES)
    if rule in TURBIDITY_RULES:
        return _readings_plot(conn, notice, episode, profile, margin, _TURBIDITY_SERIES)
    return None  # blasting and hours standards: the facts table tells it


# Which profile param is the limit of the plotted quantity, by rule, where a notice's own
# measurements do not carry it (notices issued before every measurement was kept).
_LIMIT_PARAMS = {
    "noise": "limit_db",
    "light_trespass": "limit_lux",
    "high_intensity_light": "max_lux",
    "turbidity": "max_ntu",
}


def _plotted_measurement(episode: NoticeEpisode, units: frozenset[str]) -> Mapping[str, Any] | None:
    """The notice's measurement of the plotted quantity (the first in its unit with a limit)."""
    return next(
        (m for m in _measurements(episode.facts) if m.get("unit") in units and m.get("limit") is not None),
        None,
    )


def plotted_limit(
    notice: Notice, episode: NoticeEpisode, units: frozenset[str], profile: Profile | None
) -> float | None:
    """The limit of the plotted quantity, in the plotted unit: the notice's own limit for it."""
    measured = _plotted_measurement(episode, units)
    if measured is not None:
        return float(measured["limit"])
    name = _LIMIT_PARAMS.get(str(notice.data.get("rule", "")))
    if profile is not None and name and notice.standard in profile.standards:
        value = getattr(profile.params(notice.standard), name, None)
        return float(value) if isinstance(value, int | float) else None
    return None


def _other_limits_text(episode: NoticeEpisode, units: frozenset[str]) -> str:
    """The notice's limits other than the plotted line's (a duration, a depth, a rise), as text."""
    drawn = _plotted_measurement(episode, units)
    lines = []
    for m in _measurements(episode.facts):
        if m.get("limit") is None or m is drawn:
            continue
        if m.get("unit") == "s":
            lines.append(
                f"{m['name']}: {quantity_text(float(m['value']), 's')} ({duration_text(float(m['value']))}); "
                f"a violation only beyond {limit_text(float(m['limit']), 's')}"
            )
        else:
            lines.append(measurement_text(m))
    return "\n".join(lines)


def _limit_line(ax: Any, limit: float, unit: str, section: str) -> None:
    ax.axhline(
        limit,
        color="#c92a2a",
        linestyle="--",
        linewidth=1.5,
        label=f"Limit {limit_text(limit, unit)} (section {section})",
    )


def _note_box(ax: Any, text: str) -> None:
    if text:
        ax.text(
            0.01,
            0.98,
            text,
            transform=ax.transAxes,
            ha="left",
            va="top",
            fontsize=8.5,
            color="#222222",
            bbox={"facecolor": "white", "edgecolor": "#999999", "alpha": 0.9, "pad": 3.0},
        )


def _second_grid(start: datetime, end: datetime) -> list[datetime]:
    first = start.replace(microsecond=0)
    count = int((end - first).total_seconds())
    return [first + timedelta(seconds=i) for i in range(count)]


def _exempt_spans(
    conn: sqlite3.Connection,
    notice: Notice,
    sensors: Sequence[str],
    site: SiteConfig | None,
    profile: Profile | None,
    start: datetime,
    end: datetime,
) -> list[Span]:
    from rules.noise import NoiseParams

    params = NoiseParams()
    if profile is not None and notice.standard in profile.standards:
        candidate = profile.params(notice.standard)
        if isinstance(candidate, NoiseParams):
            params = candidate
    gates: set[str] | None = None
    if site is not None:
        gates = {g for s in sensors if (info := site.sensor(s)) is not None for g in info.gates}
    rows = conn.execute(
        "SELECT kind, data FROM events WHERE site = ? AND ts_us < ? AND COALESCE(end_us, ts_us) >= ?",
        (notice.site, to_us(end), to_us(start - timedelta(minutes=5))),
    ).fetchall()
    spans: list[Span] = []
    for kind, data in rows:
        if kind not in ("blast", "truck", "work"):
            continue
        event = event_from_row(kind, data, notice.site)
        if isinstance(event, Blast):
            spans.append(
                Span(
                    event.ts - timedelta(seconds=params.blast_margin_before_s),
                    event.ts + timedelta(seconds=params.blast_margin_after_s),
                    f"blast {event.id}",
                )
            )
        elif isinstance(event, TruckPassage) and (gates is None or event.gate in gates):
            spans.append(
                Span(
                    event.ts - timedelta(seconds=params.truck_margin_before_s),
                    event.ts + timedelta(seconds=params.truck_margin_after_s),
                    f"truck at gate {event.gate}",
                )
            )
        elif (
            isinstance(event, WorkPeriod)
            and event.kind.value in params.exempt_work_kinds
            and (not event.sensors or set(event.sensors) & set(sensors))
        ):
            spans.append(Span(event.start, event.end, f"{event.kind.value.replace('_', ' ')} work"))
    return _merge_spans(spans)


def _merge_spans(spans: Sequence[Span]) -> list[Span]:
    """Overlapping spans of the same label become one (a queue of trucks is one shaded band)."""
    merged: list[Span] = []
    for span in sorted(spans, key=lambda s: (s.label, s.start)):
        if merged and merged[-1].label == span.label and span.start <= merged[-1].end:
            merged[-1] = Span(merged[-1].start, max(merged[-1].end, span.end), span.label)
        else:
            merged.append(span)
    return sorted(merged, key=lambda s: s.start)


def _missing_runs(grid: Sequence[datetime], present: set[datetime]) -> list[tuple[datetime, datetime]]:
    runs: list[tuple[datetime, datetime]] = []
    run_start: datetime | None = None
    for ts in grid:
        if ts not in present:
            run_start = run_start or ts
        elif run_start is not None:
            runs.append((run_start, ts))
            run_start = None
    if run_start is not None:
        runs.append((run_start, grid[-1] + timedelta(seconds=1)))
    return [(a, b) for a, b in runs if (b - a).total_seconds() >= _GAP_MIN_S]


def _figure(width_in: float, height_in: float, dpi: int) -> tuple[Any, Any]:
    """One figure set-up for every plot (notices and evidence bundles): Agg canvas, never pyplot."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width_in, height_in), dpi=dpi)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    ax.grid(True, color="#dddddd", linewidth=0.6)
    return fig, ax


def _time_axis(ax: Any, tz: ZoneInfo, label: str) -> None:
    from matplotlib import dates as mdates

    ax.set_xlabel(label)
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M", tz=tz))  # type: ignore[no-untyped-call]
    ax.xaxis.set_major_locator(mdates.AutoDateLocator(tz=tz, minticks=5, maxticks=12))  # type: ignore[no-untyped-call]


def _log_lux_axis(ax: Any, values: Sequence[float], limit: float | None) -> None:
    """Illuminance spans 0.01 (a dark night) to 10,000 lux (an overcast day): a log axis shows both."""
    top = max([*values, limit or 0.0, 10.0])
    ax.set_yscale("log")
    ax.set_ylim(LUX_FLOOR, 10 ** math.ceil(math.log10(top * 1.5)))


def _new_axes(title: str, ylabel: str, tz: ZoneInfo, start: datetime) -> tuple[Any, Any]:
    fig, ax = _figure(11, 6.2, 100)
    ax.set_title(title, fontsize=12)
    ax.set_ylabel(ylabel)
    zone = start.astimezone(tz).strftime("%Z")
    _time_axis(ax, tz, f"Local time at the site ({zone}, {tz.key}), {start.astimezone(tz):%A %d %B %Y}")
    return fig, ax


def _shade_gaps(ax: Any, gaps: Sequence[tuple[datetime, datetime]]) -> None:
    """Hatched, labelled "no data": a reader must see that nothing was measured, not that it was quiet."""
    for index, (gap_start, gap_end) in enumerate(gaps):
        ax.axvspan(
            gap_start,
            gap_end,
            facecolor="none",
            edgecolor="#999999",
            hatch="///",
            linewidth=0,
            label="no data" if index == 0 else None,
        )
        ax.text(
            gap_start + (gap_end - gap_start) / 2,
            0.03,
            "no data",
            transform=ax.get_xaxis_transform(),
            rotation=90,
            ha="center",
            va="bottom",
            fontsize=7.5,
            color="#444444",
            bbox={"facecolor": "white", "edgecolor": "none", "pad": 1.0},
        )


def _legend_below(ax: Any) -> None:
    """Under the plot, so it never hides a level or a label of a shaded period."""
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), fontsize=8.5, ncol=3, frameon=False)


def _png(fig: Any) -> bytes:
    buffer = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buffer, format="png")
    return buffer.getvalue()


def figure_png(fig: Any) -> bytes:
    return _png(fig)


def _noise_plot(
    conn: sqlite3.Connection,
    notice: Notice,
    episode: NoticeEpisode,
    site: SiteConfig | None,
    profile: Profile | None,
    margin: timedelta,
) -> Any:
    import numpy as np

    window_start, window_end = episode_window(episode.facts, episode.start, episode.end)
    start, end = window_start - margin, window_end + margin
    sensors = list(episode.facts.get("sensors", ())) or []
    marks = ",".join("?" * len(sensors))
    rows = conn.execute(
        f"SELECT sensor, ts_us, LAeq FROM sound WHERE site = ? AND sensor IN ({marks}) AND ts_us >= ?"
        " AND ts_us < ? ORDER BY ts_us",
        (notice.site, *sensors, to_us(start), to_us(end)),
    ).fetchall()
    tz = ZoneInfo(notice.timezone)
    limit = plotted_limit(notice, episode, SOUND_UNITS, profile)
    where = ", ".join(sensors)
    fig, ax = _new_axes(
        f"{notice.id}: sound level at {where} around the violation of section {notice.section}",
        "Sound level at the boundary, dB(A)",
        tz,
        start,
    )
    grid = _second_grid(start, end)
    colors = ["#1f5fa8", "#7a3e9d", "#2b8a3e", "#b35c00"]
    levels_seen: list[float] = []
    gaps: list[tuple[datetime, datetime]] = []
    for index, sensor in enumerate(sensors):
        values = {from_us(r[1]).replace(microsecond=0): float(r[2]) for r in rows if r[0] == sensor}
        levels_seen += values.values()
        series = np.array([values.get(ts, math.nan) for ts in grid], dtype=np.float64)  # NaN breaks the line
        color = colors[index % len(colors)]
        ax.plot(
            grid, series, color=color, linewidth=0.6, alpha=0.45, label=f"{sensor}: each second (LAeq,1s)"
        )
        by_minute: dict[datetime, list[float]] = {}
        for ts, value in values.items():
            by_minute.setdefault(ts.replace(second=0), []).append(value)
        minute_x: list[datetime] = []
        minute_y: list[float] = []
        minute = start.replace(second=0, microsecond=0)
        while minute < end:
            chunk = by_minute.get(minute, [])
            minute_x += [minute, minute + timedelta(minutes=1)]
            # A minute's energy average; a minute without data is a break in the line.
            level = 10 * math.log10(sum(10 ** (v / 10) for v in chunk) / len(chunk)) if chunk else math.nan
            minute_y += [level, level]
            minute += timedelta(minutes=1)
        ax.plot(
            minute_x, minute_y, color=color, linewidth=2.2, label=f"{sensor}: 1-minute average (LAeq,1min)"
        )
        gaps += _missing_runs(grid, set(values))
    _shade_gaps(ax, gaps)
    ax.axvspan(window_start, window_end, color="#e03131", alpha=0.08, label="violation episode")
    exempt_labelled = False
    for span in _exempt_spans(conn, notice, sensors, site, profile, start, end):
        ax.axvspan(
            max(span.start, start),
            min(span.end, end),
            color="#f2b705",
            alpha=0.30,
            label=None if exempt_labelled else "exempt activity (not counted)",
        )
        exempt_labelled = True
        ax.text(
            max(span.start, start) + (min(span.end, end) - max(span.start, start)) / 2,
            0.97,
            span.label,
            transform=ax.get_xaxis_transform(),
            rotation=90,
            ha="center",
            va="top",
            fontsize=7.5,
            color="#6b4f00",
        )
    if limit is not None:
        _limit_line(ax, limit, "dB(A)", notice.section)
    _note_box(ax, _other_limits_text(episode, SOUND_UNITS))
    if levels_seen:
        low = min(min(levels_seen), float(limit) if limit is not None else math.inf)
        high = max(max(levels_seen), float(limit) if limit is not None else -math.inf)
        ax.set_ylim(math.floor(low / 5) * 5 - 5, math.ceil(high / 5) * 5 + 8)
    elif limit is not None:
        ax.set_ylim(float(limit) - 30, float(limit) + 15)
        ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center", color="#555555")
    ax.set_xlim(start, end)
    _legend_below(ax)
    return fig


@dataclass(frozen=True, slots=True)
class _Series:
    """A per-period reading kind plotted around an episode: its table kind, field and unit."""

    kind: str
    field: str
    unit: str
    units: frozenset[str]  # measurement units of this quantity
    what: str  # "light", "turbidity"
    ylabel: str
    log: bool


_LIGHT_SERIES = _Series(
    "light", "lux_mean", "lx", frozenset({"lx", "lux"}), "light", "Illuminance, lux (log scale)", True
)
_TURBIDITY_SERIES = _Series(
    "turbidity", "ntu", "NTU", frozenset({"NTU"}), "turbidity", "Turbidity, NTU", False
)


def _readings_plot(
    conn: sqlite3.Connection,
    notice: Notice,
    episode: NoticeEpisode,
    profile: Profile | None,
    margin: timedelta,
    series: _Series,
) -> Any:
    window_start, window_end = episode_window(episode.facts, episode.start, episode.end)
    start, end = window_start - margin, window_end + margin
    sensors = list(episode.facts.get("sensors", ())) or []
    marks = ",".join("?" * len(sensors))
    rows = conn.execute(
        f"SELECT sensor, ts_us, duration_s, data FROM readings WHERE site = ? AND kind = ?"
        f" AND sensor IN ({marks}) AND ts_us >= ? AND ts_us < ? ORDER BY ts_us",
        (notice.site, series.kind, *sensors, to_us(start), to_us(end)),
    ).fetchall()
    tz = ZoneInfo(notice.timezone)
    where = ", ".join(sensors)
    fig, ax = _new_axes(
        f"{notice.id}: {series.what} at {where} around the violation of section {notice.section}",
        series.ylabel,
        tz,
        start,
    )
    gaps: list[tuple[datetime, datetime]] = []
    seen: list[float] = []
    for sensor in sensors:
        xs: list[datetime] = []
        ys: list[float] = []
        previous_end: datetime | None = None
        for r in rows:
            if r[0] != sensor:
                continue
            ts = from_us(r[1])
            if previous_end is not None and (ts - previous_end).total_seconds() > 2 * float(r[2]):
                xs.append(previous_end)
                ys.append(math.nan)  # a gap in the readings breaks the line
                gaps.append((previous_end, ts))
            value = float(json.loads(r[3])[series.field])
            seen.append(value)
            xs.append(ts)
            # On the log axis darkness (0 lux) is drawn at its floor, not dropped.
            ys.append(max(value, LUX_FLOOR) if series.log else value)
            previous_end = ts + timedelta(seconds=float(r[2]))
        ax.plot(xs, ys, linewidth=1.6, label=f"{sensor}: {series.field.replace('_', ' ')}")
        # Before the first and after the last reading nothing was measured either: say so.
        first = next((from_us(r[1]) for r in rows if r[0] == sensor), None)
        if first is None or first - start > _READING_GAP:
            gaps.append((start, first or end))
        if previous_end is not None and end - previous_end > _READING_GAP:
            gaps.append((previous_end, end))
    _shade_gaps(ax, gaps)
    ax.axvspan(window_start, window_end, color="#e03131", alpha=0.08, label="violation episode")
    limit = plotted_limit(notice, episode, series.units, profile)
    if limit is not None:
        _limit_line(ax, limit, series.unit, notice.section)
    note = _other_limits_text(episode, series.units)
    if limit is None:
        note = f"Section {notice.section} sets no {series.what} level limit.\n" + note
    _note_box(ax, note.strip())
    if series.log:
        _log_lux_axis(ax, seen, limit)
    ax.set_xlim(start, end)
    _legend_below(ax)
    return fig


# --------------------------------------------------------------------------- evidence bundle day plots


def plot_limits(site: SiteConfig, profile: Profile | None = None) -> dict[str, list[tuple[str, float]]]:
    """sensor -> [(label, value)]: the limit lines of the standards that judge it, in its plot's unit.

    Sound: each noise standard whose placements include the sensor's (dB). Light at the boundary:
    the light trespass limit (night only) and the high-intensity limit (lux). Durations and
    relative thresholds (upward light) have no line.
    """
    if profile is None:
        profile = load_profile(site.profile, site.agreement)
    limits: dict[str, list[tuple[str, float]]] = {}
    for sensor in site.sensors:
        for standard in profile.standards.values():
            params = standard.params
            if sensor.kind.value == "sound" and standard.rule == "noise":
                if sensor.placement.value in getattr(params, "placements", ()):
                    metric = getattr(params, "metric", "LAeq")
                    limits.setdefault(sensor.id, []).append(
                        (
                            f"{standard.section} limit {params.limit_db:g} dB ({metric})",
                            float(params.limit_db),
                        )
                    )
            elif sensor.kind.value == "light":
                if standard.rule == "light_trespass" and sensor.info().at_boundary:
                    value = float(params.limit_lux)
                    limits.setdefault(sensor.id, []).append(
                        (
                            f"{standard.section} limit {value:g} lux at night, "
                            f"longer than {params.min_duration_s:g} s",
                            value,
                        )
                    )
                elif standard.rule == "high_intensity_light":
                    value = float(params.max_lux)
                    limits.setdefault(sensor.id, []).append(
                        (f"{standard.section} limit {value:g} lux", value)
                    )
    return limits


def day_plot(
    measurement: str,
    sensor: str,
    site_name: str,
    day: date,
    zone: ZoneInfo,
    minutes: Mapping[int, tuple[float, float, float]],
    limits: Sequence[tuple[str, float]],
) -> Any:
    """One sensor's day, per minute, for an evidence bundle: sound in dB(A), light in lux (log)."""
    keys = sorted(minutes)
    times: Any = [datetime.fromtimestamp(m * 60, zone) for m in keys]  # matplotlib's stubs want numbers
    fig, ax = _figure(11, 4, 90)
    if measurement == "sound":
        mean = [10 * math.log10(minutes[m][0] / minutes[m][1]) for m in keys]
        peak = [minutes[m][2] for m in keys]
        ax.plot(times, peak, lw=0.6, color="tab:orange", label="loudest second LAeq,1s in the minute")
        ax.plot(times, mean, lw=0.9, color="tab:blue", label="LAeq per minute (from the per-second LAeq)")
        ax.set_ylabel("dB(A)")
        seen = peak
    else:
        mean = [max(minutes[m][0] / minutes[m][1], LUX_FLOOR) for m in keys]
        peak = [max(minutes[m][2], LUX_FLOOR) for m in keys]
        ax.plot(times, mean, lw=0.8, label="mean lux per minute")
        ax.plot(times, peak, lw=0.5, color="tab:orange", label="max lux per minute")
        ax.set_ylabel("lux (log scale)")
        seen = peak
    for label, value in limits:
        ax.axhline(value, color="tab:red", lw=1.0, ls="--", label=label)
    if measurement != "sound":
        _log_lux_axis(ax, seen, max((v for _, v in limits), default=None))
    _time_axis(ax, zone, f"local time ({zone.key})")
    ax.set_title(f"{site_name}: {sensor} {measurement}, {day.isoformat()}")
    ax.legend(loc="upper right", fontsize=7)
    return fig


def notice_payload_json(payload: Mapping[str, Any]) -> bytes:
    """The ``…/notices`` topic body, compact JSON."""
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False, default=str).encode()
