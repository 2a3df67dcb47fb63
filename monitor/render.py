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
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from monitor.config import Config, SiteConfig
from monitor.notices import Notice, NoticeChange, NoticeEpisode, get_notice, local_text, notice_history
from monitor.store import event_from_row, from_us, to_us
from monitor.wire import format_ts
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
_GAP_MIN_S = 5  # missing runs at least this long are shaded "no data"


@dataclass(frozen=True, slots=True)
class Span:
    """A shaded interval on the plot: an exempt activity."""

    start: datetime
    end: datetime
    label: str


# --------------------------------------------------------------------------- loading


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


def render_notice(
    conn: sqlite3.Connection, notice_id: str, fmt: str, *, config: Config | None = None, compress: bool = True
) -> bytes:
    """One notice in one of FORMATS, as bytes (UTF-8 text for md/html/json)."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
    notice, history = load_notice(conn, notice_id)
    if fmt == "json":
        return render_json(notice, history).encode()
    if fmt == "md":
        return render_markdown(notice, history).encode()
    site, profile = _context(config, notice)
    plot = evidence_plot(conn, notice, site=site, profile=profile)
    if fmt == "html":
        return render_html(notice, history, plot).encode()
    return render_pdf(notice, history, plot, compress=compress)


# --------------------------------------------------------------------------- shared content


def _percent(value: Any) -> str:
    return "unknown" if value is None else f"{100 * float(value):.0f} %"


def _sensors_text(facts: Mapping[str, Any]) -> str:
    where = facts.get("sensor_locations") or {}
    return ", ".join(f"{s} ({where[s]})" if s in where else str(s) for s in facts.get("sensors", ()))


def facts_rows(episode: NoticeEpisode) -> list[tuple[str, str]]:
    """The facts table of one episode: (label, value) rows in plain words."""
    f = episode.facts
    minutes = float(f.get("duration_s", 0)) / 60
    rows = [
        (
            "When (local time)",
            f"{f.get('start_local', '')} to {f.get('end_local', '')} ({minutes:.0f} minutes)",
        ),
        ("When (UTC)", f"{f.get('start', '')} to {f.get('end', '')}"),
        ("Sensors", _sensors_text(f) or "none recorded"),
        ("Measured vs limit", f.get("worst_text") or "see the finding"),
        ("Violation intervals", str(f.get("findings", len(episode.finding_ids)))),
        ("What happened", str(f.get("summary", ""))),
        ("Exemptions considered", "; ".join(f.get("exemptions", ())) or "none applied in these intervals"),
    ]
    weather = f.get("weather_affected_s")
    if weather is not None:
        rows.append(
            (
                "Weather considered",
                f"{float(weather):.0f} seconds affected by wind or rain; the violation stands without them"
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


def _header_rows(notice: Notice) -> list[tuple[str, str]]:
    d = notice.data
    tz = notice.timezone
    deadline = local_text(notice.deadline, tz)
    if notice.deadline != notice.first_deadline:
        deadline += f" (extended; first deadline {local_text(notice.first_deadline, tz)})"
    return [
        ("Notice", notice.id),
        ("Status", notice.status.replace("_", " ")),
        ("Operator", str(d.get("operator") or "(not configured)")),
        ("Site", f"{d.get('site_name', notice.site)} ({notice.site})"),
        ("Standard", f"Section {notice.section}: {d.get('title', '')}"),
        ("Issued", f"{local_text(notice.opened, tz)} ({format_ts(notice.opened)})"),
        ("Cure deadline", f"{deadline} ({format_ts(notice.deadline)})"),
    ]


def _cure_text(notice: Notice) -> str:
    d = notice.data
    section = f"section {d['cure_section']}" if d.get("cure_section") else "the ordinance"
    return (
        f"Under {section} the Operator is granted {d.get('cure_days', 14)} days to correct the violation. "
        "If circumstances require more time, the Operator shall immediately provide the Town with a written "
        "explanation of the need for additional time and the amount of additional time required."
    )


def _history_rows(notice: Notice, history: Sequence[NoticeChange]) -> list[tuple[str, str, str, str, str]]:
    tz = notice.timezone
    return [
        (local_text(c.at, tz), c.change.replace("_", " "), c.actor, local_text(c.deadline, tz), c.note)
        for c in history
    ]


def _title(notice: Notice) -> str:
    return f"Notice of violation {notice.id}"


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


def render_markdown(notice: Notice, history: Sequence[NoticeChange]) -> str:
    d = notice.data
    out = [
        f"# {_title(notice)}",
        "",
        f"**{d.get('town', '')}**, {d.get('profile_title', '')}",
        "",
        "| | |",
        "|---|---|",
    ]
    out += [f"| {k} | {_md_cell(v)} |" for k, v in _header_rows(notice)]
    out += ["", f"## Standard violated: section {notice.section}, {d.get('title', '')}", ""]
    out += [f"> {d.get('text', '')}", ""]
    for number, episode in enumerate(notice.episodes, 1):
        label = "Facts" if len(notice.episodes) == 1 else f"Facts, episode {number}"
        out += [f"## {label}", "", "| | |", "|---|---|"]
        out += [f"| {k} | {_md_cell(v)} |" for k, v in facts_rows(episode)]
        out.append("")
    out += ["## Required action", "", str(d.get("required_action", "")), "", _cure_text(notice), ""]
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


def render_html(notice: Notice, history: Sequence[NoticeChange], plot_png: bytes | None) -> str:
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
        _kv_table(_header_rows(notice)),
        f"<h2>Standard violated: section {e(notice.section)}, {e(str(d.get('title', '')))}</h2>",
        f"<blockquote>{e(str(d.get('text', '')))}</blockquote>",
    ]
    for number, episode in enumerate(notice.episodes, 1):
        label = "Facts" if len(notice.episodes) == 1 else f"Facts, episode {number}"
        parts += [f"<h2>{e(label)}</h2>", _kv_table(facts_rows(episode))]
    if plot_png:
        encoded = base64.b64encode(plot_png).decode("ascii")
        parts.append(
            f'<figure><img alt="Evidence plot for {e(notice.id)}" src="data:image/png;base64,{encoded}">'
            "<figcaption>Measured levels around the first episode, with the limit, exempt activities and "
            "periods without data.</figcaption></figure>"
        )
    parts += [
        "<h2>Required action</h2>",
        f"<p>{e(str(d.get('required_action', '')))}</p>",
        f"<p>{e(_cure_text(notice))}</p>",
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


def render_pdf(
    notice: Notice, history: Sequence[NoticeChange], plot_png: bytes | None, *, compress: bool = True
) -> bytes:
    """The notice as a PDF; ``compress=False`` leaves the text searchable in the raw file (tests)."""
    from fpdf import FPDF

    d = notice.data
    pdf = FPDF(format="Letter")
    pdf.set_compression(compress)
    pdf.set_title(_pdf_text(_title(notice)))
    pdf.set_author(_pdf_text(str(d.get("town", ""))))
    pdf.set_auto_page_break(True, margin=15)
    pdf.add_page()
    width = pdf.epw

    def heading(text: str, size: float = 12) -> None:
        pdf.ln(2)
        pdf.set_font("Helvetica", "B", size)
        pdf.multi_cell(width, 7, _pdf_text(text), new_x="LMARGIN", new_y="NEXT")
        pdf.set_font("Helvetica", "", 10)

    def paragraph(text: str) -> None:
        pdf.multi_cell(width, 5, _pdf_text(text), new_x="LMARGIN", new_y="NEXT")

    def kv(rows: Sequence[tuple[str, str]]) -> None:
        pdf.set_font("Helvetica", "", 9.5)
        with pdf.table(
            col_widths=(32, 98), text_align="LEFT", first_row_as_headings=False, line_height=5
        ) as table:
            for key, value in rows:
                row = table.row()
                row.cell(_pdf_text(key))
                row.cell(_pdf_text(value))
        pdf.set_font("Helvetica", "", 10)

    pdf.set_font("Helvetica", "B", 13)
    pdf.multi_cell(width, 7, _pdf_text(str(d.get("town", ""))), new_x="LMARGIN", new_y="NEXT")
    pdf.set_font("Helvetica", "", 10)
    paragraph(str(d.get("profile_title", "")))
    heading(f"{_title(notice)} ({notice.status.replace('_', ' ')})", 16)
    kv(_header_rows(notice))
    heading(f"Standard violated: section {notice.section}, {d.get('title', '')}")
    pdf.set_font("Helvetica", "I", 10)
    paragraph(f'"{d.get("text", "")}"')
    pdf.set_font("Helvetica", "", 10)
    for number, episode in enumerate(notice.episodes, 1):
        heading("Facts" if len(notice.episodes) == 1 else f"Facts, episode {number}")
        kv(facts_rows(episode))
    if plot_png:
        heading("Evidence plot")
        pdf.image(io.BytesIO(plot_png), w=width)
    heading("Required action")
    paragraph(str(d.get("required_action", "")))
    pdf.ln(1)
    paragraph(_cure_text(notice))
    heading("History")
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
    if not notice.episodes:
        return None
    rule = str(notice.data.get("rule", ""))
    episode = notice.episodes[0]
    if rule in NOISE_RULES:
        return _noise_plot(conn, notice, episode, site, profile, margin)
    if rule in LIGHT_RULES:
        return _light_plot(conn, notice, episode, margin)
    return None  # blasting and hours standards: the facts table tells it


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


def _new_axes(title: str, ylabel: str, tz: ZoneInfo, start: datetime) -> tuple[Any, Any]:
    from matplotlib import dates as mdates
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 6.2), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    ax.set_title(title, fontsize=12)
    ax.set_ylabel(ylabel)
    zone = start.astimezone(tz).strftime("%Z")
    ax.set_xlabel(f"Local time at the site ({zone}, {tz.key}), {start.astimezone(tz):%A %d %B %Y}")
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M", tz=tz))  # type: ignore[no-untyped-call]
    ax.xaxis.set_major_locator(mdates.AutoDateLocator(tz=tz, minticks=5, maxticks=12))  # type: ignore[no-untyped-call]
    ax.grid(True, color="#dddddd", linewidth=0.6)
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


def _noise_plot(
    conn: sqlite3.Connection,
    notice: Notice,
    episode: NoticeEpisode,
    site: SiteConfig | None,
    profile: Profile | None,
    margin: timedelta,
) -> bytes | None:
    import numpy as np

    start, end = episode.start - margin, episode.end + margin
    sensors = list(episode.facts.get("sensors", ())) or []
    marks = ",".join("?" * len(sensors))
    rows = conn.execute(
        f"SELECT sensor, ts_us, LAeq FROM sound WHERE site = ? AND sensor IN ({marks}) AND ts_us >= ?"
        " AND ts_us < ? ORDER BY ts_us",
        (notice.site, *sensors, to_us(start), to_us(end)),
    ).fetchall()
    tz = ZoneInfo(notice.timezone)
    worst = episode.facts.get("worst") or {}
    limit = worst.get("limit")
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
    ax.axvspan(episode.start, episode.end, color="#e03131", alpha=0.08, label="violation episode")
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
        ax.axhline(
            float(limit),
            color="#c92a2a",
            linestyle="--",
            linewidth=1.5,
            label=f"Limit {float(limit):g} dB(A) (section {notice.section})",
        )
    if levels_seen:
        low = min(min(levels_seen), float(limit) if limit is not None else math.inf)
        high = max(max(levels_seen), float(limit) if limit is not None else -math.inf)
        ax.set_ylim(math.floor(low / 5) * 5 - 5, math.ceil(high / 5) * 5 + 8)
    elif limit is not None:
        ax.set_ylim(float(limit) - 30, float(limit) + 15)
        ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center", color="#555555")
    ax.set_xlim(start, end)
    _legend_below(ax)
    return _png(fig)


def _light_plot(
    conn: sqlite3.Connection, notice: Notice, episode: NoticeEpisode, margin: timedelta
) -> bytes | None:
    start, end = episode.start - margin, episode.end + margin
    sensors = list(episode.facts.get("sensors", ())) or []
    marks = ",".join("?" * len(sensors))
    rows = conn.execute(
        f"SELECT sensor, ts_us, duration_s, data FROM readings WHERE site = ? AND kind = 'light'"
        f" AND sensor IN ({marks}) AND ts_us >= ? AND ts_us < ? ORDER BY ts_us",
        (notice.site, *sensors, to_us(start), to_us(end)),
    ).fetchall()
    tz = ZoneInfo(notice.timezone)
    fig, ax = _new_axes(
        f"{notice.id}: light at {', '.join(sensors)} around the violation of section {notice.section}",
        "Illuminance, lux",
        tz,
        start,
    )
    gaps: list[tuple[datetime, datetime]] = []
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
            xs.append(ts)
            ys.append(float(json.loads(r[3])["lux_mean"]))
            previous_end = ts + timedelta(seconds=float(r[2]))
        ax.plot(xs, ys, linewidth=1.6, label=f"{sensor}: mean illuminance")
    _shade_gaps(ax, gaps)
    ax.axvspan(episode.start, episode.end, color="#e03131", alpha=0.08, label="violation episode")
    limit = (episode.facts.get("worst") or {}).get("limit")
    if limit is not None:
        ax.axhline(
            float(limit),
            color="#c92a2a",
            linestyle="--",
            linewidth=1.5,
            label=f"Limit {float(limit):g} lux (section {notice.section})",
        )
    ax.set_xlim(start, end)
    _legend_below(ax)
    return _png(fig)


def notice_payload_json(payload: Mapping[str, Any]) -> bytes:
    """The ``…/notices`` topic body, compact JSON."""
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False, default=str).encode()
