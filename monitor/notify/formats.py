"""A notice of violation written out: Markdown, self-contained HTML, JSON and PDF.

    (Notice, history) ──────────────────────────────► render_json
    document.py: header rows, sections (content) ──┬─► render_markdown
    plots.py: evidence_plot (PNG) ─────────────────┴─► render_html (PNG inline, base64)
                                                     └─► render_pdf  (fpdf2, PNG embedded)

``render_notice`` is the entry point the CLI, the delivery worker, the portal and the demo
call: one notice, one format, as bytes. Every format but JSON prints the same content
(monitor/notify/document.py); each only lays it out. fpdf2 is imported when a PDF is made.
"""

from __future__ import annotations

import base64
import html
import io
import json
import sqlite3
import struct
from collections.abc import Mapping, Sequence
from typing import Any

from monitor.config import Config
from monitor.notify.document import (
    SIGNATURE,
    NoticeContext,
    answered_complaints,
    document_sections,
    header_rows,
    history_rows,
    load_notice,
    notice_context,
    notice_title,
)
from monitor.notify.notices import Notice, NoticeChange
from monitor.notify.plots import evidence_plot
from monitor.wire.protocol import format_ts

__all__ = [
    "FORMATS",
    "notice_json",
    "render_html",
    "render_json",
    "render_markdown",
    "render_notice",
    "render_pdf",
]

FORMATS = ("md", "html", "json", "pdf")


def render_notice(
    conn: sqlite3.Connection, notice_id: str, fmt: str, *, config: Config | None = None, compress: bool = True
) -> bytes:
    """One notice in one of FORMATS, as bytes (UTF-8 text for md/html/json)."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
    notice, history = load_notice(conn, notice_id)
    if fmt == "json":
        return render_json(notice, history, answered_complaints(conn, notice)).encode()
    context = notice_context(conn, notice, config)
    if fmt == "md":
        return render_markdown(notice, history, context).encode()
    plot = evidence_plot(conn, notice, site=context.site, profile=context.profile)
    if fmt == "html":
        return render_html(notice, history, plot, context).encode()
    return render_pdf(notice, history, plot, context, compress=compress)


# --------------------------------------------------------------------------- JSON / Markdown


def notice_json(
    notice: Notice, history: Sequence[NoticeChange], complaints: Sequence[Mapping[str, str]] = ()
) -> dict[str, Any]:
    """The notice as data; ``complaints`` (document.answered_complaints: no contact details), when
    the notice answers any, as a list under "complaints" (absent otherwise)."""
    out: dict[str, Any] = {
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
        "history": [{**change_json(c), "data": dict(c.data)} for c in history],
    }
    if complaints:
        out["complaints"] = [dict(c) for c in complaints]
    return out


def change_json(change: NoticeChange) -> dict[str, Any]:
    """One step of a notice's history as the notice's JSON and the portal's API both give it."""
    return {
        "seq": change.seq,
        "change": change.change,
        "status": change.status,
        "actor": change.actor,
        "note": change.note,
        "at": format_ts(change.at),
        "deadline": format_ts(change.deadline),
    }


def render_json(
    notice: Notice, history: Sequence[NoticeChange], complaints: Sequence[Mapping[str, str]] = ()
) -> str:
    return json.dumps(notice_json(notice, history, complaints), indent=2, ensure_ascii=False)


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(
    notice: Notice, history: Sequence[NoticeChange], context: NoticeContext | None = None
) -> str:
    d = notice.data
    out = [
        f"# {notice_title(notice)}",
        "",
        f"**{d.get('town', '')}**, {d.get('profile_title', '')}",
        "",
        "| | |",
        "|---|---|",
    ]
    out += [f"| {k} | {_md_cell(v)} |" for k, v in header_rows(notice, context, history)]
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
    out += [f"| {' | '.join(_md_cell(x) for x in row)} |" for row in history_rows(notice, history)]
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
        f"<title>{e(notice_title(notice))}</title><style>{_CSS}</style></head><body>",
        f'<header><p class="town">{e(str(d.get("town", "")))}</p>'
        f'<p class="profile">{e(str(d.get("profile_title", "")))}</p>'
        f"<h1>{e(notice_title(notice))} "
        f'<span class="status status-{e(notice.status)}">{e(notice.status.replace("_", " "))}</span>'
        "</h1></header>",
        _kv_table(header_rows(notice, context, history)),
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
        "<tr>" + "".join(f"<td>{e(x)}</td>" for x in row) + "</tr>" for row in history_rows(notice, history)
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
    pdf.set_title(_pdf_text(notice_title(notice)))
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
    heading(f"{notice_title(notice)} ({notice.status.replace('_', ' ')})", 20, 16)
    kv(header_rows(notice, context, history))
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
            if text == SIGNATURE:
                pdf.ln(10)
            paragraph(text)
            pdf.ln(1)
    heading("History", 14)
    pdf.set_font("Helvetica", "", 8.5)
    with pdf.table(col_widths=(24, 18, 18, 24, 46), text_align="LEFT", line_height=4.5) as table:
        header = table.row()
        for title in ("When", "Change", "By", "Deadline after", "Note"):
            header.cell(title)
        for entry in history_rows(notice, history):
            row = table.row()
            for value in entry:
                row.cell(_pdf_text(value))
    return bytes(pdf.output())


def _png_size(png: bytes) -> tuple[int, int]:
    width, height = struct.unpack(">II", png[16:24])
    return int(width), int(height)
