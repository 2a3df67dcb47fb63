"""A report as PDF (fpdf2, Letter, core fonts) and CSV: the same sections, each with its source.

``report_sections`` is the one content; the PDF prints each section as a table under its title
with "Source: ..." beneath, the CSV holds one line per number: section, the row it belongs to
(date, sensor or id), the column, the value and the section's source. Times are site time with
the zone.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from monitor.csv_cells import inert
from monitor.notify.formats import _pdf_text
from monitor.reports.content import Report, db_text
from rules.times import local_moment


@dataclass(frozen=True, slots=True)
class Section:
    key: str  # the CSV's section name
    title: str
    source: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    note: str = ""  # said when there are no rows, or beside them


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:g}" if value != int(value) else f"{value:.1f}"
    if isinstance(value, list | tuple):
        return "; ".join(_text(v) for v in value)
    return str(value)


def _pct(share: float | None) -> str:
    return "" if share is None else f"{share * 100:.1f} %"


def allowance_note(used: Mapping[str, Any]) -> str:
    """The temporary lighting days used (``Report.lighting_allowance``), citing the allowance's
    section as the profile numbers it, none where it names none."""
    days = ", ".join(used.get("days", [])) or "none"
    section = f" ({used['section']})" if used.get("section") else ""
    return (
        f"Temporary lighting{section}: {used.get('used_in_period', 0)} day(s) used in the period ({days});"
        f" {used.get('used_through_period', 0)} of {used.get('allowance', 30)} days used in"
        f" {used.get('year', '')} through the period's end."
    )


def report_sections(report: Report) -> list[Section]:
    tz = report.timezone
    s, p = report.sources, report.period
    head = (
        ("Site", f"{report.site.name} ({report.site.id})"),
        ("Period", f"{p.first_day} to {p.last_day} ({tz}), {p.label}"),
        ("Made", local_moment(report.made, tz)),
        (
            "Computed from",
            f"chain entry {report.chain_seq} of site {report.site.id}, head {report.chain_head}",
        ),
        (
            "To verify",
            # --to is the day after the last (evidence's window ends before it): the whole period
            f"minewatch evidence --config minewatch.toml --site {report.site.id} --from {p.first_day}"
            f" --to {p.last_day + timedelta(days=1)} --out bundle.zip, then minewatch verify bundle.zip:"
            " the bundle's chain reaches this head",
        ),
    )
    lighting_note = allowance_note(report.lighting_allowance)
    return [
        Section(
            "report", "Report", "the store of minewatch at the chain head named", ("item", "value"), head
        ),
        Section(
            "completeness",
            "Data completeness per sensor",
            s["completeness"],
            (
                "sensor",
                "kind",
                "received",
                "expected",
                "received share",
                "judged",
                "judged share",
                "judging gaps",
                "not judged s",
                "offline gaps",
                "offline s",
                "calibration checks",
                "calibration flagged",
                "weather-affected s",
            ),
            tuple(
                (
                    c["sensor"],
                    c["kind"],
                    str(c["received"]),
                    str(c["expected"]),
                    _pct(c["received_share"]),
                    str(c["judged"]),
                    _pct(c["judged_share"]),
                    str(c["judging_gaps"]),
                    str(c["unjudged_s"]),
                    str(c["offline_gaps"]),
                    str(c["offline_s"]),
                    str(c["calibration_checks"]),
                    str(c["calibration_flagged"]),
                    str(c["weather_affected_s"]),
                )
                for c in report.completeness
            ),
        ),
        Section(
            "daily",
            "Daily sound levels at the boundary monitors, dB(A)",
            s["daily"],
            ("date", "sensor", "readings", "LAeq", "L10", "L50", "L90", "LAFmax"),
            tuple(
                (
                    d["date"],
                    d["sensor"],
                    str(d["seconds"]),
                    *(_bound(db_text(d[k]), d) for k in ("LAeq", "L10", "L50", "L90", "LAFmax")),
                )
                for d in report.daily
            ),
            _overload_note(report.daily),
        ),
        Section(
            "episodes",
            "Violation episodes",
            s["episodes"],
            ("id", "section", "episode", "notice"),
            tuple((e["id"], e["section"], e["text"], e["notice"] or "") for e in report.episodes),
            "" if report.episodes else "No violation episode in the period.",
        ),
        Section(
            "findings",
            "Exempt exceedances and other findings of note",
            s["findings"],
            ("id", "kind", "section", "when", "summary"),
            tuple(
                (f["id"], f["kind"].replace("_", " "), f["section"], f["span"], f["summary"])
                for f in report.findings
            ),
            "" if report.findings else "None in the period.",
        ),
        Section(
            "blasts",
            "Blasts",
            s["blasts"],
            ("blast", "time", "safety reason", "charge kg", "overpressure dB", "findings", "notices"),
            tuple(
                (
                    b["id"],
                    b["time"],
                    b["safety_reason"],
                    _text(b["charge_kg"]),
                    _text(b["overpressure_db"]),
                    _text(b["findings"]),
                    _text(b["notices"]),
                )
                for b in report.blasts
            ),
            "" if report.blasts else "No blast on record in the period.",
        ),
        Section(
            "lighting",
            "Lighting",
            s["lighting"],
            ("kind", "when", "summary"),
            tuple((f["kind"].replace("_", " "), f["span"], f["summary"]) for f in report.lighting_days),
            lighting_note,
        ),
        Section(
            "notices",
            "Notices of violation",
            s["notices"],
            ("notice", "section", "status", "issued", "cure deadline", "changes in the period"),
            tuple(
                (
                    n["id"],
                    n["section"],
                    n["status"].replace("_", " "),
                    n["issued"],
                    n["deadline"],
                    _text(n["changes"]),
                )
                for n in report.notices
            ),
            "" if report.notices else "No notice open or changed in the period.",
        ),
        Section(
            "complaints",
            "Residents' complaints and what the record said",
            s["complaints"],
            ("reference", "about", "when", "status", "the record", "notices"),
            tuple(
                (c["id"], c["what"], c["when"], c["status"], c["record"], _text(c["notices"]))
                for c in report.complaints
            ),
            "" if report.complaints else "No complaint about the period.",
        ),
    ]


def _bound(level: str, day: dict[str, Any]) -> str:
    """A day's level as read, or "at least" it where the meter was overloaded that day."""
    return f"at least {level}" if level and day.get("overloaded_s") else level


def _overload_note(daily: list[dict[str, Any]]) -> str:
    """Which days' levels are lower bounds, and why (IEC 61672-1 5.11: an overloaded reading is
    not a valid measurement; clipped sound reads low)."""
    days = [f"{d['date']} {d['sensor']} ({d['overloaded_s']:g} s)" for d in daily if d.get("overloaded_s")]
    if not days:
        return ""
    return (
        "at least: the meter was overloaded for some seconds of the day (" + ", ".join(days) + "); "
        "clipped sound reads low, so the day's levels are lower bounds."
    )


def render_csv(report: Report) -> bytes:
    """One line per value: section, row (its first column's value), column, value, source.

    The row and value cells carry text the operator wrote (a blast's id, its safety reason):
    each is written so that a spreadsheet takes it for text (monitor/csv_cells.py)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(("section", "row", "column", "value", "source"))
    for section in report_sections(report):
        for row in section.rows:
            key = row[0] if section.key not in ("daily",) else f"{row[0]} {row[1]}"
            for column, value in zip(section.columns[1:], row[1:], strict=True):
                writer.writerow((section.key, inert(key), column, inert(value), section.source))
        if section.note:
            writer.writerow((section.key, "", "note", inert(section.note), section.source))
    return out.getvalue().encode()


def render_pdf(report: Report, *, compress: bool = True) -> bytes:
    from fpdf import FPDF

    pdf = FPDF(orientation="landscape", unit="mm", format="Letter")
    pdf.set_compression(compress)
    title = f"Compliance report: {report.site.name}, {report.period.label}"
    pdf.set_title(_pdf_text(title))
    pdf.set_margins(12, 12, 12)
    pdf.set_auto_page_break(True, margin=12)
    pdf.add_page()
    width = pdf.epw
    pdf.set_font("Helvetica", "B", 15)
    pdf.multi_cell(width, 8, _pdf_text(title), new_x="LMARGIN", new_y="NEXT")
    for section in report_sections(report):
        pdf.set_font("Helvetica", "B", 12)
        if pdf.get_y() + 30 > pdf.page_break_trigger:
            pdf.add_page()
        pdf.ln(3)
        pdf.multi_cell(width, 7, _pdf_text(section.title), new_x="LMARGIN", new_y="NEXT")
        pdf.set_font("Helvetica", "", 8)
        if section.rows:
            _table(pdf, section.columns, section.rows)
        if section.note:
            pdf.set_font("Helvetica", "", 9)
            pdf.multi_cell(width, 5, _pdf_text(section.note), new_x="LMARGIN", new_y="NEXT")
        pdf.set_font("Helvetica", "I", 7.5)
        pdf.multi_cell(width, 4, _pdf_text(f"Source: {section.source}"), new_x="LMARGIN", new_y="NEXT")
    return bytes(pdf.output())


def _table(pdf: Any, columns: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """A table with columns as wide as their text asks (up to a point); a section whose cells run
    long (a notice's history, a blast's findings) is written as one paragraph per row instead, as
    a table row taller than a page cannot be printed."""
    if any(len(cell) > 240 for row in rows for cell in row):
        for values in rows:
            text = "; ".join(f"{c}: {v}" for c, v in zip(columns, values, strict=True) if v)
            pdf.multi_cell(pdf.epw, 4, _pdf_text(text), new_x="LMARGIN", new_y="NEXT")
            pdf.ln(1)
        return
    weights = [min(60, max(len(c), *(len(r[i]) for r in rows))) + 4 for i, c in enumerate(columns)]
    with pdf.table(
        text_align="LEFT", line_height=4, first_row_as_headings=True, col_widths=tuple(weights)
    ) as table:
        header = table.row()
        for column in columns:
            header.cell(_pdf_text(column))
        for values in rows:
            row = table.row()
            for value in values:
                row.cell(_pdf_text(value))
