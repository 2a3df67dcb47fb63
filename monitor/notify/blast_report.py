"""One report per blast, the way a seismograph's event report reads, and more (issue 27).

    journal: the seismograph's summaries and waveforms, the blast and its notice, the findings
        ──► blast_report_data (one dict: every fact once)
        ──► waveform_png (each axis and the microphone), compliance_png (each axis's PPV at its
            frequency on the profile's limit curve)
        ──► render_html (self-contained) / render_pdf (fpdf2) ──► write_blast_report

The report lists the clock findings (window, sunset, notice and its recipients), the
seismographic and airblast record fields a blasting log keeps (30 CFR 816.68, seismographic and
airblast records: instrument type, sensitivity and calibration, exact location, distance from
the blast, date and time, who took the reading, who analysed it, the levels recorded; SPS
307.31(4) asks for "seismographic and airblast records" without its text at hand here) and the
chain entries that prove the record.
"""

from __future__ import annotations

import base64
import html
import json
import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from monitor.config import SiteConfig
from monitor.journal import queries
from monitor.journal.site_law import vibration_params
from monitor.journal.store import Store
from monitor.seismic.agreement import TOLERANCES, disagreements
from monitor.seismic.chunks import join
from monitor.seismic.summary import AXES, MM_PER_IN, Waveform
from monitor.wire.canonical import from_us
from monitor.wire.codec import event_from_row, finding_from_json, seismic_events
from rules.blast_notice import BlastNoticeParams
from rules.citation import citation_text
from rules.model import Blast, BlastNotice, Event, Finding, SeismicEvent
from rules.profile import Profile
from rules.seismic_limits import limit_at
from rules.times import local_stamp

__all__ = [
    "blast_events",
    "blast_notice_not_shown",
    "blast_notices",
    "blast_report_bytes",
    "blast_report_data",
    "curve_verdict",
    "notice_not_shown",
    "render_html",
    "render_pdf",
    "report_events",
    "write_blast_report",
]

NOT_RECORDED = "not recorded"
# Whether the reader may see a stored row of a kind ("finding", "event"): a portal account's
# time scope (TimeScope.shows); None: every row.
Shown = Callable[[str, Mapping[str, Any] | sqlite3.Row], bool]
NOTICE_NOT_SHOWN = (
    "a notice of this blast was given before it; when and to whom are not shown (outside your time scope)"
)
NOTICE_AFTER_NOT_SHOWN = (
    "a notice of this blast was given after it{verdict}; when and to whom are not shown"
    " (outside your time scope)"
)
BLAST_NOT_SHOWN = "a blast record matches this event outside your time scope (not shown)"
_EVER = datetime.max.replace(tzinfo=UTC)
LOG_FIELDS = (  # (label, key in the seismograph's "instrument" object)
    ("Instrument type", "model"),
    ("Serial number", "serial"),
    ("Sensitivity / range", "range"),
    ("Calibration (certificate date)", "calibrated"),
    ("Exact location of the instrument", "location"),
    ("Distance from the blast", "distance_m"),
    ("Set up and reading taken by", "recorded_by"),
    ("Record analysed by", "analysed_by"),
)


def _event(
    store: Store, site: SiteConfig, sensor: str, event_id: str
) -> tuple[SeismicEvent, dict[str, Any], Any]:
    rows = [r for r in store.seismic_rows(site.id, sensor) if json.loads(r["data"])["event_id"] == event_id]
    if not rows:
        raise LookupError(f"event: seismograph {sensor} has no event {event_id!r} on record")
    locations = {s.id: s.location for s in site.sensors}
    [event] = seismic_events(rows, locations)
    edge: dict[str, Any] = next((json.loads(r["data"]) for r in rows if r["kind"] == "seismic"), {})
    waveform_row = next((r for r in rows if r["kind"] == "seismic-waveforms"), None)
    return event, edge, waveform_row


def _events(store: Store, site: str, since: datetime, shown: Shown | None) -> list[tuple[Event, bool]]:
    """The site's events on record from ``since`` on, each with whether the reader sees it."""
    return [
        (event_from_row(r["kind"], r["data"], site), shown is None or shown("event", r))
        for r in queries.events_overlapping(store.conn, site, since, _EVER)
    ]


def notice_not_shown(
    notices: Iterable[tuple[BlastNotice, bool]],
    blast_id: str | None,
    fired: datetime,
    profile: Profile,
    preexisting: bool,
) -> str | None:
    """What a reader is told of a notice of the blast ``blast_id`` (fired at ``fired``) that it
    may not see (``notices``: each with whether the reader sees it): that one was given before
    the blast, or only after it, which never gives the notice the profile's standard requires
    before a blast (as its finding says); never when or to whom. None: no notice of the blast is
    hidden from the reader. The one text of it: the blast report and the day view say the same."""
    unseen = [n for n, seen in notices if not seen and n.id == blast_id]
    if not unseen:
        return None
    if any(n.issued_ts <= fired for n in unseen):
        return NOTICE_NOT_SHOWN
    standard = next((s for s in profile.enabled_for(preexisting) if s.rule == "blast_notice"), None)
    if standard is None or not isinstance(standard.params, BlastNoticeParams):
        return NOTICE_AFTER_NOT_SHOWN.format(verdict="")
    section = citation_text(standard.section)
    verdict = f", which does not give the {standard.params.min_notice_h:g} hours' notice required" + (
        f" ({section})" if section else ""
    )
    return NOTICE_AFTER_NOT_SHOWN.format(verdict=verdict)


def blast_notices(
    store: Store, site: str, blast_id: str | None, shown: Shown | None
) -> list[tuple[BlastNotice, bool]]:
    """The notices of the blast ``blast_id`` a report considers, earliest first, each with whether
    the reader sees it: every notice on record with the blast's id (a blast-notice event has its
    blast's id), whenever it was given, as the rule judges them (rules.blast_notice). The one
    rule: the report's notice rows, what it and the day view say of a notice not shown."""
    if blast_id is None:
        return []
    return [
        (notice, shown is None or shown("event", r))
        for r in queries.event_rows(store.conn, site, "blast-notice", blast_id)
        if isinstance(notice := event_from_row(r["kind"], r["data"], site), BlastNotice)
    ]


def blast_notice_not_shown(
    store: Store,
    site: SiteConfig,
    profile: Profile,
    blast_id: str | None,
    fired: datetime,
    shown: Shown | None,
) -> str | None:
    """``notice_not_shown`` of the blast's notices (``blast_notices``): what the report and the
    day view tell a reader ``shown`` keeps a notice from; None for a reader who sees every row."""
    if shown is None:
        return None
    notices = blast_notices(store, site.id, blast_id, shown)
    return notice_not_shown(notices, blast_id, fired, profile, site.preexisting)


def blast_report_data(
    store: Store,
    site: SiteConfig,
    profile: Profile,
    sensor: str,
    event_id: str,
    shown: Shown | None = None,
) -> dict[str, Any]:
    """Every fact of the report, read once (LookupError naming what is missing); ``shown``: the
    stored rows (findings, events) the reader may see (a portal account's time scope,
    TimeScope.shows). A notice of the blast that the reader does not see, given before the blast
    or after it, is said to exist (``notice_not_shown``), so that the report does not read as a
    blast without one; a matching blast record it does not see is neither named nor used
    (``blast_not_shown``)."""
    event, edge, waveform_row = _event(store, site, sensor, event_id)
    tz = site.timezone
    blast_id = event.blast_id
    matching = [
        (e, seen)
        for e, seen in _events(store, site.id, event.ts - timedelta(hours=1), shown)
        if isinstance(e, Blast) and abs((e.ts - event.ts).total_seconds()) <= 120
    ]
    blasts = [e for e, seen in matching if seen]
    if blast_id is None and blasts:
        blast_id = blasts[0].id
    refs = {f"seismic:{sensor}:{event_id}", *((f"blast:{blast_id}",) if blast_id else ())}
    findings: list[Finding] = []
    for row in store.current_findings(site.id, event.ts - timedelta(hours=1), event.end + timedelta(hours=1)):
        if shown is not None and not shown("finding", row):
            continue
        finding = finding_from_json(json.loads(row["data"]))
        if refs & set(finding.refs):
            findings.append(finding)
    params = vibration_params(profile)  # the profile's ground-vibration standard, whatever its key
    instrument: Mapping[str, Any] = edge.get("instrument") or {}
    log_rows = []
    for label, key in LOG_FIELDS:
        value = instrument.get(key)
        if key == "location" and not value:
            value = event.location
        if key == "analysed_by" and not value:
            value = "minewatch (the daemon's recomputation from the waveforms)" if waveform_row else None
        if key == "distance_m" and value is not None:
            value = f"{float(value):.0f} m ({float(value) * 3.28084:.0f} ft)"
        log_rows.append((label, str(value) if value not in (None, "") else NOT_RECORDED))
    log_rows.append(("Date and time of the record", local_stamp(event.ts, tz)))
    chain = []
    for row in (waveform_row,):
        if row is not None:
            entry = queries.chain_entry(
                store.conn, site.id, "reading", f"{sensor}|{row['kind']}|{row['ts_us']}"
            )
            if entry is not None:
                chain.append(("daemon's summary", entry))
    chunk_rows = store.waveform_chunks(site.id, sensor, event_id)
    for chunk in chunk_rows[:1] + chunk_rows[-1:] if len(chunk_rows) > 1 else chunk_rows:
        entry = queries.chain_entry(store.conn, site.id, "waveform", f"{sensor}|{event_id}|{chunk['chunk']}")
        if entry is not None:
            chain.append((f"waveform chunk {chunk['chunk'] + 1} of {chunk['chunks']}", entry))
    daemon = json.loads(waveform_row["data"])["summary"] if waveform_row is not None else None
    agreement = _agreement_rows(edge.get("summary"), daemon)
    wave: Waveform | None = None
    if chunk_rows and len(chunk_rows) == chunk_rows[0]["chunks"]:
        try:
            wave = join([(r["header"], bytes(r["samples"])) for r in chunk_rows])
        except ValueError:
            wave = None
    blast = next((b for b in blasts if b.id == blast_id), None)
    # Before or after the blast: its record's time, as the rule and the day view read it.
    fired = blast.ts if blast is not None else event.ts
    notices = blast_notices(store, site.id, blast_id, shown)
    return {
        "site": site,
        "profile": profile,
        "event": event,
        "blast_id": blast_id,
        "blast": blast,
        "notices": [n for n, seen in notices if seen],
        "notice_not_shown": notice_not_shown(notices, blast_id, fired, profile, site.preexisting),
        "blast_not_shown": blast_id is None and len(blasts) < len(matching),
        "findings": findings,
        "units": params.units if params else "mm/s",
        "curve": params.curve if params else None,
        "curve_points": params.curves[params.curve] if params else None,
        "log": log_rows,
        "agreement": agreement,
        "chain": chain,
        "wave": wave,
        "source": event.source,
        "findings_heading": _findings_heading(profile),
    }


# The standards a blast report's findings come from (window, sunset, notice, vibration, airblast).
_BLAST_RULES = ("blast_window", "blast_notice", "ground_vibration", "airblast", "air_overpressure")


def _findings_heading(profile: Profile) -> str:
    """'Findings (6.F)': the sections of the profile's blasting standards, as it numbers them;
    'Findings' where it names none."""
    sections = dict.fromkeys(
        s.section for s in profile.standards.values() if s.rule in _BLAST_RULES and s.section
    )
    return f"Findings ({', '.join(sections)})" if sections else "Findings"


def _agreement_rows(
    edge: Mapping[str, Any] | None, daemon: Mapping[str, Any] | None
) -> list[tuple[str, str]]:
    """The seismograph's summary against the daemon's from the waveforms (seismic.agreement)."""
    if edge is None or daemon is None:
        which = "the seismograph's own" if daemon is None else "the daemon's from the waveforms"
        return [("Compared", f"not compared: only {which} summary is on record")]
    limits = ", ".join(f"{name.replace('_db', ' dB')} {t.text()}" for name, t in TOLERANCES.items())
    found = disagreements(edge, daemon)
    if not found:
        return [("Compared", f"the seismograph's summary agrees with its waveforms' within {limits}")]
    return [
        ("Compared", f"DISAGREES: {len(found)} quantit{'y' if len(found) == 1 else 'ies'} beyond {limits}"),
        *((d.quantity, d.text()) for d in found),
    ]


def _shown(mm_s: float, units: str) -> float:
    return mm_s / MM_PER_IN if units == "in/s" else mm_s


def waveform_png(wave: Waveform, units: str) -> bytes:
    import numpy as np

    from monitor.notify.plots import _figure, figure_png

    fig, first = _figure(7.5, 6.0, 110)
    fig.clear()
    t = np.arange(wave.data.shape[1]) / wave.sample_rate
    labels = [f"{a} ({units})" for a in AXES] + ["MIC (Pa)"]
    for i, label in enumerate(labels):
        ax = fig.add_subplot(4, 1, i + 1)
        y = wave.data[i] / (MM_PER_IN if i < 3 and units == "in/s" else 1.0)
        ax.plot(t, y, linewidth=0.6, color="#1f4e79" if i < 3 else "#7a3b00")
        ax.set_ylabel(label, fontsize=8)
        ax.grid(True, color="#dddddd", linewidth=0.6)
        if i < 3:
            ax.tick_params(labelbottom=False)
    fig.axes[-1].set_xlabel("seconds from the record's first sample")
    del first
    return figure_png(fig)


def compliance_png(event: SeismicEvent, points: Sequence[Sequence[float]], curve: str, units: str) -> bytes:
    import numpy as np

    from monitor.notify.plots import _figure, figure_png

    fig, ax = _figure(7.5, 4.5, 110)
    freqs = np.logspace(0, 2, 200)
    ax.plot(freqs, [limit_at(points, f) for f in freqs], color="#b00000", label=f"limit: {curve}")
    for axis, marker in zip(event.axes, "o^s", strict=False):
        hz = axis.judged_hz
        if hz is not None:
            ax.plot([hz], [_shown(axis.ppv_mm_s, units)], marker, markersize=8, label=f"{axis.axis}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("frequency (Hz, zero crossing)")
    ax.set_ylabel(f"peak particle velocity ({units})")
    ax.legend(fontsize=8)
    return figure_png(fig)


def _axis_rows(data: Mapping[str, Any]) -> list[list[str]]:
    event: SeismicEvent = data["event"]
    units = data["units"]
    points = data["curve_points"]
    rows = []
    for a in event.axes:
        limit = limit_at(points, a.judged_hz or 0.0) if points else None
        ppv = _shown(a.ppv_mm_s, units)
        verdict = "" if limit is None else ("ABOVE the limit" if ppv > limit else "within the limit")
        rows.append(
            [
                a.axis,
                f"{ppv:.3f}",
                "-" if a.zc_hz is None else f"{a.zc_hz:.1f}",
                "-" if a.fft_hz is None else f"{a.fft_hz:.1f}",
                "-" if limit is None else f"{limit:.3f}",
                verdict + (" (clipped)" if a.clipped else ""),
            ]
        )
    return rows


def curve_verdict(data: Mapping[str, Any]) -> str:
    """'above the <curve> curve on V' or 'within the <curve> curve' (the report's own reading)."""
    if not data["curve_points"]:
        return "no limit curve in the profile"
    above = [row[0] for row in _axis_rows(data) if row[5].startswith("ABOVE")]
    if above:
        return f"above the {data['curve']} curve on {', '.join(above)}"
    return f"within the {data['curve']} curve"


def _summary_rows(data: Mapping[str, Any]) -> list[tuple[str, str]]:
    event: SeismicEvent = data["event"]
    site: SiteConfig = data["site"]
    units = data["units"]
    db = event.airblast_db
    rows = [
        ("Site", f"{site.name} ({site.id})"),
        (
            "Blast",
            data["blast_id"]
            or (BLAST_NOT_SHOWN if data.get("blast_not_shown") else "no blast record matches this event"),
        ),
        ("Seismograph", f"{event.sensor} at {event.location or 'its configured location'}"),
        ("Event", f"{event.id}, {local_stamp(event.ts, site.timezone)}, {event.duration_s:g} s"),
        (
            "Summary computed by",
            "the daemon from the waveforms" if event.source == "waveforms" else "the seismograph",
        ),
        ("Peak vector sum", f"{_shown(event.pvs_mm_s, units):.3f} {units} (per sample)"),
        (
            "Airblast",
            "not measured"
            if db is None
            else f"{event.airblast_pa:.1f} Pa, {db:.1f} dB(L); microphone flat to {event.mic_low_hz:g} Hz"
            + (
                ""
                if event.airblast_dbc_slow is None
                else f"; C-weighted slow {event.airblast_dbc_slow:.1f} dB(C)"
            ),
        ),
        ("Limit curve", str(data["curve"])),
    ]
    return rows


def _finding_rows(data: Mapping[str, Any]) -> list[tuple[str, str]]:
    rows = [(f"{f.standard} ({f.section}): {f.kind.value}", f.summary) for f in data["findings"]]
    for n in data["notices"]:
        rows.append(("Notice recipients", ", ".join(n.recipients) or "none listed"))
    if data.get("notice_not_shown"):
        rows.append(("Notice", data["notice_not_shown"]))
    return rows or [("Findings", "none judged yet")]


def render_html(data: Mapping[str, Any]) -> str:
    """The report as one self-contained HTML page (plots embedded as PNG)."""

    def table(rows: Sequence[Sequence[str]], head: Sequence[str] | None = None) -> str:
        out = ["<table>"]
        if head:
            out.append("<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>")
        for row in rows:
            out.append("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>")
        out.append("</table>")
        return "\n".join(out)

    def img(png: bytes, alt: str) -> str:
        return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{base64.b64encode(png).decode()}">'

    event: SeismicEvent = data["event"]
    units = data["units"]
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>Blast report {html.escape(str(data['blast_id'] or event.id))}</title>",
        "<style>body{font-family:sans-serif;max-width:60em;margin:2em auto}table{border-collapse:collapse;"
        "margin:0.5em 0}td,th{border:1px solid #bbb;padding:0.2em 0.5em;text-align:left}</style>",
        "</head><body>",
        f"<h1>Blast report: {html.escape(str(data['blast_id'] or event.id))}</h1>",
        table(_summary_rows(data)),
        f"<h2>Ground vibration per axis ({html.escape(units)})</h2>",
        table(_axis_rows(data), ["Axis", "PPV", "Zero-crossing Hz", "FFT Hz", "Limit at that Hz", "Verdict"]),
    ]
    if data["curve_points"]:
        parts.append(
            img(compliance_png(event, data["curve_points"], data["curve"], units), "compliance plot")
        )
    if data["wave"] is not None:
        parts += ["<h2>Waveforms</h2>", img(waveform_png(data["wave"], units), "waveforms")]
    parts += [
        f"<h2>{html.escape(data['findings_heading'])}: window, sunset, notice, vibration, airblast</h2>",
        table(_finding_rows(data)),
        "<h2>Seismographic and airblast record (blasting log)</h2>",
        table(data["log"]),
        "<h2>The seismograph's summary against its waveforms (data quality)</h2>",
        table(data["agreement"]),
        "<h2>Chain reference</h2>",
        table(
            [(label, f"seq {e.seq}", e.digest, e.head) for label, e in data["chain"]],
            ["Record", "Entry", "Digest", "Head"],
        ),
        "</body></html>",
    ]
    return "\n".join(parts)


def render_pdf(data: Mapping[str, Any]) -> bytes:
    """The report as a Letter-size PDF (fpdf2, plots embedded)."""
    import io

    from fpdf import FPDF

    def latin(text: str) -> str:
        return text.encode("latin-1", "replace").decode("latin-1")

    event: SeismicEvent = data["event"]
    pdf = FPDF(orientation="portrait", unit="mm", format="Letter")
    pdf.set_margins(18, 16, 18)
    pdf.set_auto_page_break(True, margin=16)
    pdf.add_page()
    pdf.set_font("Helvetica", "B", 14)
    pdf.cell(0, 8, latin(f"Blast report: {data['blast_id'] or event.id}"), new_x="LMARGIN", new_y="NEXT")

    def rows(title: str, items: Sequence[Sequence[str]]) -> None:
        pdf.set_font("Helvetica", "B", 11)
        pdf.cell(0, 7, latin(title), new_x="LMARGIN", new_y="NEXT")
        pdf.set_font("Helvetica", "", 9)
        for item in items:
            pdf.multi_cell(0, 4.5, latin(" | ".join(str(c) for c in item)), new_x="LMARGIN", new_y="NEXT")

    rows("Event", _summary_rows(data))
    rows(
        f"Ground vibration per axis ({data['units']})",
        [["Axis", "PPV", "ZC Hz", "FFT Hz", "Limit", ""], *_axis_rows(data)],
    )
    if data["curve_points"]:
        pdf.image(
            io.BytesIO(compliance_png(event, data["curve_points"], data["curve"], data["units"])), w=150
        )
    if data["wave"] is not None:
        pdf.image(io.BytesIO(waveform_png(data["wave"], data["units"])), w=150)
    rows(data["findings_heading"], _finding_rows(data))
    rows("Seismographic and airblast record (blasting log)", data["log"])
    rows("The seismograph's summary against its waveforms (data quality)", data["agreement"])
    rows("Chain reference", [(label, f"seq {e.seq}", e.digest) for label, e in data["chain"]])
    return bytes(pdf.output())


def write_blast_report(
    store: Store, site: SiteConfig, profile: Profile, sensor: str, event_id: str, folder: Path
) -> list[Path]:
    """blast-<id>.html and .pdf in ``folder``; their paths."""
    data = blast_report_data(store, site, profile, sensor, event_id)
    folder.mkdir(parents=True, exist_ok=True)
    stem = f"blast-{data['blast_id'] or event_id}"
    html_path, pdf_path = folder / f"{stem}.html", folder / f"{stem}.pdf"
    html_path.write_text(render_html(data), encoding="utf-8")
    pdf_path.write_bytes(render_pdf(data))
    return [html_path, pdf_path]


def report_events(store: Store, site: str) -> list[tuple[str, str]]:
    """(sensor, event id) of every seismograph event of the site on record, oldest first."""
    seen: dict[tuple[str, str], None] = {}
    for r in store.seismic_rows(site):
        seen[(r["sensor"], json.loads(r["data"])["event_id"])] = None
    return list(seen)


def blast_events(
    store: Store,
    site: SiteConfig,
    start: datetime | None = None,
    end: datetime | None = None,
    shown: Shown | None = None,
) -> dict[str, list[tuple[str, str, datetime]]]:
    """Blast id -> [(sensor, event id, event time)] of the seismograph events on record for it
    (events starting in [start, end) when given).

    An event names its blast, or is the one of a blast recorded within two minutes of it (as in
    ``blast_report_data``; a blast record ``shown`` does not allow is not one); an event of no
    blast is listed under its own event id.
    """
    locations = {s.id: s.location for s in site.sensors}
    rows = [
        r
        for r in store.seismic_rows(site.id)
        if (start is None or from_us(r["ts_us"]) >= start) and (end is None or from_us(r["ts_us"]) < end)
    ]
    found: dict[str, list[tuple[str, str, datetime]]] = {}
    if not rows:
        return found
    events = seismic_events(rows, locations)
    first = min(e.ts for e in events)
    blasts = [
        b
        for b, seen in _events(store, site.id, first - timedelta(hours=1), shown)
        if seen and isinstance(b, Blast)
    ]
    for event in sorted(events, key=lambda e: e.ts):
        blast_id = event.blast_id or next(
            (b.id for b in blasts if abs((b.ts - event.ts).total_seconds()) <= 120), None
        )
        found.setdefault(blast_id or event.id, []).append((event.sensor, event.id, event.ts))
    return found


def blast_report_bytes(
    store: Store,
    site: SiteConfig,
    profile: Profile,
    blast_id: str,
    fmt: str,
    sensor: str | None = None,
    within: tuple[datetime, datetime] | None = None,
    shown: Shown | None = None,
) -> bytes:
    """The report of ``blast_id`` as HTML or PDF bytes (LookupError saying what is missing or
    ambiguous, in one line); ``within``: only an event recorded in that window counts, and
    ``shown``: only the findings and events it allows (a portal account's time scope)."""
    start, end = within or (None, None)
    events = blast_events(store, site, start, end, shown).get(blast_id)
    if not events:
        raise LookupError(f"blast {blast_id!r}: no seismograph event of it is on record at site {site.id}")
    if sensor is not None:
        events = [e for e in events if e[0] == sensor]
        if not events:
            raise LookupError(f"blast {blast_id!r}: seismograph {sensor!r} recorded no event of it")
    if len(events) > 1:
        sensors = ", ".join(e[0] for e in events)
        raise LookupError(f"blast {blast_id!r} was recorded by several seismographs ({sensors}); name one")
    sensor_id, event_id, _ = events[0]
    data = blast_report_data(store, site, profile, sensor_id, event_id, shown)
    return render_pdf(data) if fmt == "pdf" else render_html(data).encode("utf-8")
