"""Rendering notices: HTML, PDF, Markdown, JSON and the evidence plot, for a sample episode."""

from __future__ import annotations

import base64
import html
import json
import re
import struct
import zlib
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from monitor.cli import main
from monitor.config import Config
from monitor.journal.store import Store
from monitor.notify.document import load_notice
from monitor.notify.formats import render_html, render_notice, render_pdf
from monitor.notify.notices import NoticeBook
from monitor.notify.plots import evidence_plot
from rules.model import LightSummary, Measurement
from tests.support.notices import (
    SITE,
    add_sample_events,
    add_sample_sound,
    local,
    make_config,
    minutes,
    site_and_profile,
    store_findings,
    violation,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
QUOTE = "The Operator shall use best management practices to keep noise"


def pdf_text(raw: bytes) -> str:
    """The text of an uncompressed fpdf2 PDF (core fonts write ``(text) Tj``), lines joined by spaces."""
    strings = re.findall(rb"\(((?:[^()\\]|\\.)*)\)\s*Tj", raw)
    text = " ".join(s.decode("latin-1") for s in strings)
    return re.sub(r"\\([()\\])", r"\1", text)


def png_size(png: bytes) -> tuple[int, int]:
    assert png[:8] == PNG_MAGIC
    width, height = struct.unpack(">II", png[16:24])
    return width, height


@pytest.fixture
def sample(tmp_path: Path) -> Iterator[tuple[Store, Config, str]]:
    """A noise episode 11:30-11:38 local at n1 with a data gap, a truck, a blast and repair work nearby."""
    db = tmp_path / "store.db"
    config = make_config(db)
    store = Store(db)
    site, profile = site_and_profile(config)
    t = local(2026, 6, 15, 11, 30)
    add_sample_sound(
        store,
        t - timedelta(minutes=35),
        t + timedelta(minutes=45),
        (t, t + timedelta(minutes=8)),
        gap=(t + timedelta(minutes=3, seconds=10), t + timedelta(minutes=4, seconds=40)),
    )
    add_sample_events(
        store,
        t - timedelta(minutes=12),
        t + timedelta(minutes=20),
        (t + timedelta(minutes=25), t + timedelta(minutes=32)),
    )
    findings = minutes(t, 8, value=84.2)
    issued = t + timedelta(minutes=8, seconds=6)
    [event] = NoticeBook(store).on_findings(site, profile, store_findings(store, findings, issued), issued)
    NoticeBook(store).request_extension(
        event.notice_id, "Enclosure on order; need 10 more days.", "Acme", issued + timedelta(days=1)
    )
    yield store, config, event.notice_id
    store.close()


def test_html_is_self_contained_with_the_key_facts(sample: tuple[Store, Config, str]) -> None:
    store, config, notice_id = sample
    document = render_notice(store.conn, notice_id, "html", config=config).decode()
    assert document.startswith("<!DOCTYPE html>")
    assert "<style>" in document and "<link" not in document and "<script" not in document
    assert "Town of Dovre, Barron County, Wisconsin" in document
    assert "Town of Dovre nonmetallic mining ordinance" in document
    assert "DOV-2026-0001" in document
    assert "Acme Aggregates LLC" in document
    assert "Section 6.D: Noise at the mine site boundaries" in document
    assert f"<blockquote>{QUOTE}" in document
    assert "Issued</th><td>2026-06-15 11:38 CDT" in document
    # 13.3.A: the end of the local day 14 days after the day of issue.
    assert "Cure deadline</th><td>2026-06-29 23:59 CDT" in document
    assert "LAeq,1min 84.2 dB(A) (limit 80 dB(A))" in document
    assert "n1 (north boundary)" in document
    assert "2026-06-15 11:30 CDT to 2026-06-15 11:38 CDT (8 minutes)" in document
    assert "Reduce noise at the boundary to 80 dB(A)" in document
    assert "Enclosure on order; need 10 more days." in document  # history
    [encoded] = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', document)
    assert base64.b64decode(encoded).startswith(PNG_MAGIC)


def test_pdf_carries_the_key_facts_and_the_plot(sample: tuple[Store, Config, str]) -> None:
    store, config, notice_id = sample
    raw = render_notice(store.conn, notice_id, "pdf", config=config, compress=False)
    assert raw.startswith(b"%PDF-")
    text = pdf_text(raw)
    for expected in [
        "Town of Dovre, Barron County, Wisconsin",
        "Notice of violation DOV-2026-0001",
        "Acme Aggregates LLC",
        "Section 6.D: Noise at the mine site boundaries",
        QUOTE,
        "2026-06-15 11:38 CDT",
        "2026-06-29 23:59 CDT",
        "LAeq,1min 84.2 dB(A) (limit 80 dB(A))",
        "n1 (north boundary)",
        "Reduce noise at the boundary",
        "extension requested",
    ]:
        assert expected in text, expected
    # The plot is embedded as an image XObject.
    assert b"/Subtype /Image" in raw
    # And the default (compressed) PDF is a valid, smaller file.
    compressed = render_notice(store.conn, notice_id, "pdf", config=config)
    assert compressed.startswith(b"%PDF-") and len(compressed) < len(raw)


def test_markdown_and_json(sample: tuple[Store, Config, str]) -> None:
    store, config, notice_id = sample
    markdown = render_notice(store.conn, notice_id, "md", config=config).decode()
    assert markdown.startswith("# Notice of violation DOV-2026-0001")
    assert f"> {QUOTE}" in markdown
    assert "| Cure deadline | 2026-06-29 23:59 CDT (2026-06-30T04:59:59.999Z) |" in markdown
    document = json.loads(render_notice(store.conn, notice_id, "json"))
    assert document["id"] == notice_id and document["section"] == "6.D"
    assert document["deadline"] == "2026-06-30T04:59:59.999Z"
    assert document["episodes"][0]["facts"]["worst"]["value"] == 84.2
    assert [h["change"] for h in document["history"]] == ["opened", "extension_requested"]


def test_evidence_plot_png(sample: tuple[Store, Config, str], tmp_path: Path) -> None:
    store, config, notice_id = sample
    notice, _ = load_notice(store.conn, notice_id)
    site, profile = site_and_profile(config)
    png = evidence_plot(store.conn, notice, site=site, profile=profile)
    assert png is not None and len(png) > 10_000
    width, height = png_size(png)
    assert width >= 1000 and height >= 500
    # IHDR's CRC is intact: a real PNG, not just a header.
    assert zlib.crc32(png[12:29]) == struct.unpack(">I", png[29:33])[0]
    (tmp_path / "plot.png").write_bytes(png)


def test_light_notice_plots_lux_and_blasting_has_no_plot(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    config = make_config(db)
    store = Store(db)
    site, profile = site_and_profile(config)
    t = local(2026, 6, 15, 23, 0)
    with store.batch():
        for i in range(120):
            ts = t - timedelta(minutes=30) + timedelta(seconds=30 * i)
            lux = 2.5 if t <= ts < t + timedelta(minutes=10) else 0.2
            reading = LightSummary(SITE, "n1", ts, 30.0, lux, lux, lux)
            store.append_reading(
                reading,
                {"ts": ts.isoformat(), "duration_s": 30.0, "lux_mean": lux, "lux_min": lux, "lux_max": lux},
                late=False,
                now=ts,
            )
    light = [
        violation(
            t + timedelta(minutes=i),
            standard="light_trespass",
            section="6.C.2",
            measurement=Measurement("illuminance (mean)", 2.5, 1.0, "lx"),
        )
        for i in range(5)
    ]
    blast = [violation(t, standard="blast_window", section="6.F")]
    book = NoticeBook(store)
    book.on_findings(site, profile, store_findings(store, light + blast, t), t + timedelta(minutes=6))
    notices = {n.standard: n for n in book.find()}
    png = evidence_plot(store.conn, notices["light_trespass"], site=site, profile=profile)
    assert png is not None and png.startswith(PNG_MAGIC)
    assert evidence_plot(store.conn, notices["blast_window"], site=site, profile=profile) is None
    # Without a plot the documents still render.
    blast_notice, history = load_notice(store.conn, notices["blast_window"].id)
    assert "data:image/png" not in render_html(blast_notice, history, None)
    assert "6.F" in pdf_text(render_pdf(blast_notice, history, None, compress=False))
    store.close()


# --------------------------------------------------------------------------- the CLI


def test_cli_show_in_every_format(
    sample: tuple[Store, Config, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _store, config, notice_id = sample
    path = tmp_path / "minewatch.toml"
    path.write_text(config.raw_text)
    assert main(["notices", "show", notice_id, "--config", str(path), "--format", "md"]) == 0
    assert "# Notice of violation DOV-2026-0001" in capsys.readouterr().out
    for fmt, magic in [("pdf", b"%PDF-"), ("html", b"<!DOCTYPE html>"), ("json", b"{")]:
        out = tmp_path / f"notice.{fmt}"
        assert (
            main(["notices", "show", notice_id, "--config", str(path), "--format", fmt, "--out", str(out)])
            == 0
        )
        assert out.read_bytes().startswith(magic)
    assert main(["notices", "list", "--config", str(path)]) == 0
    assert "DOV-2026-0001  quarry     6.D    extension requested" in capsys.readouterr().out


def test_cli_errors_are_one_line_exit_2(
    sample: tuple[Store, Config, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _store, config, notice_id = sample
    path = tmp_path / "minewatch.toml"
    path.write_text(config.raw_text)
    capsys.readouterr()
    assert main(["notices", "show", "DOV-2026-0999", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert err == "minewatch notices show: no notice 'DOV-2026-0999'\n"
    assert (
        main(
            [
                "notices",
                "request-extension",
                notice_id,
                "--explanation",
                "again",
                "--by",
                "Acme",
                "--config",
                str(path),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is extension requested" in err
    assert (
        main(["notices", "extend", notice_id, "--until", "next week", "--by", "Town", "--config", str(path)])
        == 2
    )
    assert "--until: expected a date" in capsys.readouterr().err


def test_cli_lifecycle(
    sample: tuple[Store, Config, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store, config, notice_id = sample
    path = tmp_path / "minewatch.toml"
    path.write_text(config.raw_text)
    args = ["--config", str(path)]
    assert (
        main(
            [
                "notices",
                "extend",
                notice_id,
                "--until",
                "2026-07-10",
                "--note",
                "Reasonable",
                "--by",
                "Town clerk",
                *args,
            ]
        )
        == 0
    )
    assert "extended the cure deadline to 2026-07-10 23:59 CDT" in capsys.readouterr().out
    assert (
        main(["notices", "close", notice_id, "--note", "Enclosure installed", "--by", "Town board", *args])
        == 0
    )
    assert "closed by the Town as corrected" in capsys.readouterr().out
    assert main(["notices", "list", "--status", "corrected", "--format", "json", *args]) == 0
    [listed] = json.loads(capsys.readouterr().out)
    assert (
        listed["id"] == notice_id and listed["deadline"] == "2026-07-11T04:59:59.999Z"
    )  # the end of that day, as a counted deadline
    history = NoticeBook(store).history(notice_id)
    assert [(c.change, c.actor) for c in history][-2:] == [
        ("extended", "Town clerk"),
        ("corrected", "Town board"),
    ]
    assert main(["notices", "escalate", notice_id, "--note", "x", "--by", "Town", *args]) == 2


# ------------------------------------------------------------------------ every standard, its plotted limit

LAND_CONFIG = """
[storage]
path = "{db}"

[town]
officer = "Robin Clerk"
title = "Town Clerk"
contact = "Town Hall, 1 Main Street\\nclerk@example.org"

[[sites]]
id = "tract"
name = "Hill tract"
operator = "Grader Co"
timezone = "America/New_York"
latitude = 35.78
longitude = -78.64
profile = "land-disturbing"
[[sites.sensors]]
id = "t1"
kind = "turbidity"
placement = "buffer_line"
location = "creek, 25 % line"
expected_period_s = 60
"""

TOWN = """
[town]
officer = "Robin Clerk"
title = "Town Clerk"
contact = "Town Hall, 1 Main Street\\nclerk@example.org"
"""


def _measurements_for(rule: str, params: Any) -> tuple[Measurement, ...]:
    """The measurements each rule's VIOLATION carries (their names and units as the rules write them),
    with the standard's own params as limits. Every rule of a shipped profile must be listed."""
    table: dict[str, tuple[Measurement, ...]] = {
        "noise": (Measurement("LAeq,1min", 84.2, params.limit_db if rule == "noise" else 0, "dB(A)"),),
        "light_trespass": (
            Measurement("illuminance (mean)", 3.3, getattr(params, "limit_lux", 0), "lx"),
            Measurement("duration above limit", 840.0, getattr(params, "min_duration_s", 0), "s"),
        ),
        "flashing_light": (
            Measurement("flash frequency", 1.0, None, "Hz"),
            Measurement("modulation depth", 0.81, getattr(params, "min_modulation_depth", 0), ""),
            Measurement("flashing duration", 720.0, getattr(params, "min_duration_s", 0), "s"),
        ),
        "high_intensity_light": (
            Measurement("illuminance (max)", 60.0, getattr(params, "max_lux", 0), "lx"),
        ),
        "upward_light": (
            Measurement("sky illuminance", 0.42, 0.15, "lx"),
            Measurement("night baseline (median)", 0.05, None, "lx"),
        ),
        "temporary_lighting": (Measurement("temporary lighting days this year", 31, 30, "days"),),
        "air_overpressure": (
            Measurement("air overpressure (linear peak)", 136.0, getattr(params, "limit_db", 0), "dB"),
        ),
        "ground_vibration": (
            Measurement("PPV V at 6.0 Hz", 0.9, 0.5, "in/s"),
            Measurement("peak vector sum", 1.1, None, "in/s"),
        ),
        "airblast": (Measurement("airblast (linear peak)", 135.0, 133.0, "dB"),),
        "blast_notice": (Measurement("notice lead time", 3.0, getattr(params, "min_notice_h", 0), "h"),),
        "blast_window": (),
        "unreported_blast": (Measurement("peak (LZpeak/LCpeak)", 131.0, 120.0, "dB"),),
        "haul_hours": (),
        "turbidity": (
            Measurement("turbidity", 180.0, getattr(params, "max_ntu", 0), "NTU"),
            Measurement("above reference", 150.0, getattr(params, "max_above_reference_ntu", 0), "NTU"),
            Measurement("duration", 900.0, getattr(params, "min_duration_s", 0), "s"),
        ),
        "close_within": (Measurement("days overdue", 3, 0, "days"),),
        "fill_material": (
            Measurement("largest masonry piece", 20.0, getattr(params, "max_piece_in", 0), "in"),
        ),
        "area_controls": (
            Measurement("uncovered area", 9000.0, getattr(params, "max_area_sqft", 0), "sq ft"),
        ),
        "prior_plan": (
            Measurement("days from filing to start", 2, getattr(params, "min_days_filed", 0), "days"),
        ),
    }
    assert rule in table, f"rule {rule!r} has no sample measurements here: add them"
    return table[rule]


# The plotted quantity's units by rule; rules not listed have no plot (the facts table tells it).
_PLOTTED = {
    "noise": {"dB(A)", "dB"},
    "light_trespass": {"lx"},
    "flashing_light": {"lx"},
    "high_intensity_light": {"lx"},
    "upward_light": {"lx"},
    "turbidity": {"NTU"},
}


# The plotted limits the ordinance gives no number for ([notice.sources]: "profile" or a citation).
_PROFILE_LIMITS = {"light_trespass", "high_intensity_light", "buffer_zone", "sediment_on_tract"}


def _limit_lines(fig: Any) -> list[tuple[float, str]]:
    """(y, label) of every horizontal limit line on the figure's axes."""
    [ax] = fig.axes
    out = []
    for line in ax.get_lines():
        label = str(line.get_label())
        if label.startswith("Limit"):
            ys = set(float(y) for y in line.get_ydata())
            assert len(ys) == 1, label
            out.append((ys.pop(), label))
    return out


def _all_text(fig: Any) -> str:
    [ax] = fig.axes
    return "\n".join(t.get_text() for t in ax.texts)


@pytest.mark.parametrize(
    ("profile_name", "config_text", "site_id"),
    [("dovre", None, SITE), ("land-disturbing", LAND_CONFIG, "tract")],
)
def test_every_standard_renders_and_its_plot_draws_the_notices_limit(
    tmp_path: Path, profile_name: str, config_text: str | None, site_id: str
) -> None:
    """A notice of each standard of the profile: rendered in every format, and where there is a plot,
    the one limit line drawn is the notice's limit of the plotted quantity, in its unit; a duration
    limit is written as text, never drawn on the level axis."""
    from monitor.config import parse_config
    from monitor.notify.plots import evidence_figure
    from rules.model import Finding, FindingKind
    from rules.profile import load_profile

    db = tmp_path / "store.db"
    config = make_config(db) if config_text is None else parse_config(config_text.format(db=db), "land.toml")
    store = Store(db)
    site = config.site(site_id)
    assert site is not None
    profile = load_profile(site.profile, site.agreement)
    assert profile.name == profile_name
    sensor = site.sensors[0].id
    t = local(2026, 6, 15, 23, 0)
    findings = []
    for index, (key, standard) in enumerate(profile.standards.items()):
        start = t + timedelta(hours=index)
        findings.append(
            Finding(
                site=site_id,
                standard=key,
                section=standard.section,
                kind=FindingKind.VIOLATION,
                start=start,
                end=start + timedelta(minutes=1),
                timezone=site.timezone,
                summary=f"sample violation of {key}",
                sensors=(sensor,),
                measurements=_measurements_for(standard.rule, standard.params),
            )
        )
    book = NoticeBook(store)
    book.on_findings(site, profile, store_findings(store, findings, t), t + timedelta(days=1))
    notices = {n.standard: n for n in book.find(site=site_id)}
    assert set(notices) == set(profile.standards)
    for key, notice in notices.items():
        standard = profile.standards[key]
        fig = evidence_figure(store.conn, notice, site=site, profile=profile)
        units = _PLOTTED.get(standard.rule)
        measured = _measurements_for(standard.rule, standard.params)
        if units is None:
            assert fig is None, key
        else:
            assert fig is not None, key
            in_unit = [m for m in measured if m.unit in units and m.limit is not None]
            lines = _limit_lines(fig)
            if in_unit:
                expected = in_unit[0]
                assert lines == [(pytest.approx(expected.limit), lines[0][1])], key
                unit = "lux" if expected.unit == "lx" else expected.unit
                # Whose the number is, as "Numbers used and their sources" says: a limit the section
                # sets is cited to it; one the profile sets is the profile's, the section setting none.
                said = f"section {standard.section}"
                if key in _PROFILE_LIMITS:
                    said = f"profile {profile.name}; section {standard.section} sets no number"
                assert lines[0][1] == f"Limit {expected.limit:g} {unit} ({said})", key
            else:
                assert lines == [], key  # flashing: no level limit, so no line
                assert f"Section {standard.section} sets no" in _all_text(fig)
            for m in measured:
                if m.unit == "s" and m.limit is not None:
                    # the duration threshold is text on the plot, not a line at 300 "lux"
                    assert f"a violation only beyond {m.limit:g} s" in _all_text(fig), key
                    assert all(y != pytest.approx(m.limit) for y, _ in lines), key
            if "lx" in units:
                assert fig.axes[0].get_yscale() == "log"
                low, high = fig.axes[0].get_ylim()
                assert low <= 0.01 and high >= 10
        markdown = render_notice(store.conn, notice.id, "md", config=config).decode()
        for m in measured:
            if m.limit is not None:
                assert f"(limit {m.limit:g}" in markdown, (key, m)
        assert render_notice(store.conn, notice.id, "pdf", config=config).startswith(b"%PDF-")
        assert render_notice(store.conn, notice.id, "html", config=config).startswith(b"<!DOCTYPE html>")
    store.close()


# --------------------------------------------------------------------------- consistent facts


def test_one_window_and_one_rounding(tmp_path: Path) -> None:
    """A sustained-light episode is told from when the light went above the limit (the findings'
    run_start), in the table, the sentence and the plot's shading alike; 84.05 is 84.1 everywhere."""
    from monitor.notify.plots import evidence_figure
    from rules.model import Finding, FindingKind

    db = tmp_path / "store.db"
    config = make_config(db)
    store = Store(db)
    site, profile = site_and_profile(config)
    t = local(2026, 12, 15, 17, 7)
    run_start = local(2026, 12, 15, 17, 2)
    light = [
        Finding(
            site=SITE,
            standard="light_trespass",
            section="6.C.2",
            kind=FindingKind.VIOLATION,
            start=t + timedelta(minutes=i),
            end=t + timedelta(minutes=i + 1),
            timezone="America/Chicago",
            summary="light",
            sensors=("n1",),
            measurements=(
                Measurement("illuminance (mean)", 3.27, 1.0, "lx"),
                Measurement("duration above limit", 300.0 + 60 * (i + 1), 300.0, "s"),
            ),
            details={"run_start": run_start.isoformat().replace("+00:00", "Z")},
        )
        for i in range(9)
    ]
    noise = [violation(local(2026, 12, 15, 16, 10) + timedelta(minutes=i), value=84.05) for i in range(3)]
    book = NoticeBook(store)
    book.on_findings(site, profile, store_findings(store, light + noise, t), t + timedelta(minutes=10))
    notices = {n.standard: n for n in book.find()}
    markdown = render_notice(store.conn, notices["light_trespass"].id, "md", config=config).decode()
    assert "2026-12-15 17:02 CST to 2026-12-15 17:16 CST (14 minutes)" in markdown
    assert "17:07 CST to" not in markdown and "(9 minutes)" not in markdown
    assert "duration above limit 840 s (limit 300 s)" in markdown
    # The flagged minutes are told as part of that window, not as a second window.
    assert (
        "| Intervals judged in violation | 9, from 2026-12-15 17:07 CST: before then the condition"
        in markdown
    )
    fig = evidence_figure(store.conn, notices["light_trespass"], site=site, profile=profile)
    [ax] = fig.axes
    [shade] = [p for p in ax.patches if p.get_label() == "violation episode"]
    # No light readings were stored for this episode: the plot says "no data", not darkness.
    assert any(p.get_label() == "no data" for p in ax.patches)
    from matplotlib.dates import num2date

    left, right = shade.get_x(), shade.get_x() + shade.get_width()  # an axvspan is a Rectangle
    assert abs(num2date(left) - run_start) < timedelta(seconds=1)
    assert abs(num2date(right) - (t + timedelta(minutes=9))) < timedelta(seconds=1)
    markdown = render_notice(store.conn, notices["noise"].id, "md", config=config).decode()
    assert "84.1 dB(A)" in markdown and "84.05" not in markdown and "84.0 " not in markdown
    store.close()


# --------------------------------------------------------------------------- what a legal document needs


def _configured(db: Path) -> Config:
    from monitor.config import parse_config
    from tests.support.notices import CONFIG

    text = TOWN + CONFIG.format(db=db, max_attempts=3).replace(
        'operator = "Acme Aggregates LLC"\n',
        'operator = "Acme Aggregates LLC"\noperator_address = "7 Quarry Road\\nDovre, WI 54000"\n',
    )
    return parse_config(text, "test.toml")


def test_document_names_issuer_reply_operator_consequence_evidence_and_sources(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    config = _configured(db)
    store = Store(db)
    site, profile = site_and_profile(config)
    t = local(2026, 12, 15, 23, 0)
    light = [
        violation(
            t + timedelta(minutes=i),
            standard="light_trespass",
            section="6.C.2",
            measurement=Measurement("illuminance (mean)", 2.5, 1.0, "lx"),
        )
        for i in range(5)
    ]
    noise = minutes(t + timedelta(hours=1), 3)
    book = NoticeBook(store)
    book.on_findings(site, profile, store_findings(store, light + noise, t), t + timedelta(hours=2))
    notices = {n.standard: n for n in book.find()}
    light_id = notices["light_trespass"].id
    [(seq, head)] = store.conn.execute(
        "SELECT seq, head FROM chain WHERE kind = 'notice' AND key = ?", (light_id,)
    ).fetchall()
    for fmt in ("md", "html", "pdf"):
        raw = render_notice(store.conn, light_id, fmt, config=config, compress=False)
        text = pdf_text(raw) if fmt == "pdf" else raw.decode()
        text = text.replace("&#x27;", "'")
        for expected in [
            "Robin Clerk, Town Clerk",  # who issues it
            "Town Hall, 1 Main Street, clerk@example.org",  # the reply address
            "Signature: ____",
            "Acme Aggregates LLC, 7 Quarry Road, Dovre, WI 54000",  # the operator's address
            "the Town Board may issue a citation in accord with the Town Citation Ordinance (section 13.3.B)",
            "Hearing or appeal: not stated here; profile dovre, under which this notice was judged, does not",
            head,  # the chain head the notice was recorded under
            f"entry {seq} of the quarry chain",
            "minewatch evidence --config test.toml --site quarry --from 2026-12-16T04:30:00Z "
            "--to 2026-12-16T05:35:00Z",
            "limit: 1 lux",
            "minimum duration: 300 s",
            "set by the Town in profile dovre; the ordinance gives no number",
        ]:
            assert expected in text, (fmt, expected)
        assert "provides no hearing or appeal" not in text, fmt  # the supplied text never says so
    markdown = render_notice(store.conn, notices["noise"].id, "md", config=config).decode()
    assert "| limit: 80 dB | the ordinance's own, section 6.D |" in markdown
    assert "| interval: 60 s | set by the Town in profile dovre; the ordinance gives no number |" in markdown
    # Without [town] the document says what is missing instead of inventing an issuer.
    bare = render_notice(store.conn, light_id, "md", config=make_config(db)).decode()
    assert "(not configured: set [town] officer, title and contact)" in bare
    store.close()


def test_considered_choices_are_listed_when_the_findings_give_them(tmp_path: Path) -> None:
    from rules.model import Finding, FindingKind

    db = tmp_path / "store.db"
    config = make_config(db)
    store = Store(db)
    site, profile = site_and_profile(config)
    t = local(2026, 6, 15, 11, 0)
    base = violation(t)
    finding = Finding(
        **{
            **{f: getattr(base, f) for f in base.__dataclass_fields__},
            "details": {
                "considered": ["wind above 5 m/s makes a second unreliable (this monitoring's choice)"]
            },
        }
    )
    assert finding.kind is FindingKind.VIOLATION
    book = NoticeBook(store)
    [event] = book.on_findings(site, profile, store_findings(store, [finding], t), t + timedelta(minutes=2))
    markdown = render_notice(store.conn, event.notice_id, "md", config=config).decode()
    assert "## Considered (choices of this monitoring, not the ordinance's words)" in markdown
    assert "- wind above 5 m/s makes a second unreliable (this monitoring's choice)" in markdown
    # 13.3: the Board "may" issue a notice; the deadline counts from when minewatch drew it up.
    assert (
        "The 14 days count from the time this notice shows as issued, when minewatch drew it up; where"
        " the Town serves it later and records the service (`minewatch notices serve`), they count from"
        " the service."
    ) in " ".join(markdown.split())
    plain = render_notice(store.conn, "DOV-2026-0001", "md", config=config).decode()
    assert plain == markdown
    store.close()


# --------------------------------------------------------------------------- blasts


def test_blast_notice_states_time_window_sunset_notice_and_overpressure(tmp_path: Path) -> None:
    from rules.model import Blast, BlastNotice, Finding, FindingKind

    db = tmp_path / "store.db"
    config = make_config(db)
    store = Store(db)
    site, profile = site_and_profile(config)
    blast_at = local(2026, 12, 15, 15, 40)
    issued = local(2026, 12, 14, 14, 0)
    iso = lambda ts: ts.isoformat().replace("+00:00", "Z")  # noqa: E731
    with store.batch():
        store.append_event(
            BlastNotice(SITE, "b-2", issued, local(2026, 12, 15, 14, 30)),
            {"blast_id": "b-2", "issued_ts": iso(issued), "planned_ts": iso(local(2026, 12, 15, 14, 30))},
            issued,
        )
        store.append_event(Blast(SITE, "b-2", blast_at), {"blast_id": "b-2", "ts": iso(blast_at)}, blast_at)
    common = {
        "site": SITE,
        "section": "6.F",
        "start": blast_at,
        "end": blast_at + timedelta(seconds=1),
        "timezone": "America/Chicago",
        "refs": ("blast:b-2",),
    }
    window = Finding(
        standard="blast_window",
        kind=FindingKind.VIOLATION,
        summary="Blast b-2 went off at 15:40:00 local on 2026-12-15, after 15:00 without a safety reason",
        **common,  # type: ignore[arg-type]
    )
    overpressure = Finding(
        standard="blast_overpressure",
        kind=FindingKind.COMPLIANT,
        summary="Air overpressure from blast b-2",
        sensors=("n1",),
        measurements=(Measurement("air overpressure (linear peak)", 126.44, 133.0, "dB"),),
        **common,  # type: ignore[arg-type]
    )
    book = NoticeBook(store)
    [event] = book.on_findings(
        site,
        profile,
        store_findings(store, [window, overpressure], blast_at),
        blast_at + timedelta(minutes=1),
    )
    markdown = render_notice(store.conn, event.notice_id, "md", config=config).decode()
    for expected in [
        "| When (local time) | 2026-12-15 15:40:00 CST |",  # an instant, not "(0 minutes)"
        "| Blast | b-2 at 2026-12-15 15:40:00 CST; safety reason recorded: none |",
        "| Allowed blasting hours | 10:00 to 15:00 local (section 6.F); after 15:00 only before sunset",
        "| Sunset that day | sunset at 16:2",
        "| 24-hour notice | given 2026-12-14 14:00 CST for a blast planned at 2026-12-15 14:30 CST, "
        "25 hours 40 minutes before the blast |",
        # A boundary meter's LZpeak says it is a secondary indication (issue 27).
        "| Air overpressure | air overpressure (linear peak) 126.4 dB (limit 133 dB) at n1 (compliant)"
        "; a boundary sound meter's LZpeak is a secondary indication: its Z weighting is flat only"
        " down to 10 Hz",
    ]:
        assert expected in markdown, expected
    assert "none recorded" not in markdown and "see the finding" not in markdown
    store.close()


def test_a_blast_notice_given_after_the_blast_is_said_to_be_after_it(tmp_path: Path) -> None:
    """The 24-hour notice row read a notice given 1 h 2 min after the blast as "-2 hours 58
    minutes before the blast" (a negative lead in hours and minutes)."""
    from rules.model import Blast, BlastNotice, Finding, FindingKind

    db = tmp_path / "store.db"
    config = make_config(db)
    store = Store(db)
    site, profile = site_and_profile(config)
    blast_at = local(2026, 12, 15, 14, 30)
    issued = blast_at + timedelta(hours=1, minutes=2)
    iso = lambda ts: ts.isoformat().replace("+00:00", "Z")  # noqa: E731
    with store.batch():
        store.append_event(Blast(SITE, "b-9", blast_at), {"blast_id": "b-9", "ts": iso(blast_at)}, blast_at)
        store.append_event(
            BlastNotice(SITE, "b-9", issued, blast_at),
            {"blast_id": "b-9", "issued_ts": iso(issued), "planned_ts": iso(blast_at)},
            issued,
        )
    late = Finding(
        site=SITE,
        standard="blast_notice",
        section="6.F",
        kind=FindingKind.VIOLATION,
        start=blast_at,
        end=blast_at + timedelta(seconds=1),
        timezone="America/Chicago",
        summary="Blast b-9 was announced only 1 h 02 min after it went off (section 6.F)",
        refs=("blast:b-9", "notice:b-9"),
    )
    book = NoticeBook(store)
    [event] = book.on_findings(site, profile, store_findings(store, [late], issued), issued)
    markdown = render_notice(store.conn, event.notice_id, "md", config=config).decode()
    assert (
        "| 24-hour notice | given 2026-12-15 15:32 CST for a blast planned at 2026-12-15 14:30 CST, "
        "1 hour 2 minutes after the blast |"
    ) in markdown
    assert "-" + "2 hours" not in markdown
    store.close()


# --------------------------------------------------------------------------- the PDF's pages


def test_pdf_is_letter_and_no_page_ends_with_a_heading(tmp_path: Path) -> None:
    """A long notice (many episodes, a long history) over several pages, read back per page with
    pdftotext (poppler-utils): no page's last line is a heading, and every page is US Letter."""
    import shutil
    import subprocess

    from monitor.notify.document import document_sections

    if shutil.which("pdftotext") is None:
        pytest.fail("pdftotext (poppler-utils) is needed: bash .ci/run installs it")
    db = tmp_path / "store.db"
    config = _configured(db)
    store = Store(db)
    site, profile = site_and_profile(config)
    t = local(2026, 6, 15, 8, 0)
    book = NoticeBook(store)
    findings = []
    for episode in range(14):  # episodes 20 minutes apart: each is its own facts table
        findings += minutes(t + timedelta(minutes=20 * episode), 2 + episode % 3)
    book.on_findings(site, profile, store_findings(store, findings, t), t + timedelta(hours=6))
    [notice] = book.find()
    for day in range(1, 9):
        book.request_extension(
            notice.id, "More time for the enclosure. " * (day % 4 + 1), "Acme", t + timedelta(days=day)
        )
        book.extend(
            notice.id,
            notice.deadline + timedelta(days=day),
            "Town clerk",
            "Reasonable.",
            t + timedelta(days=day, hours=1),
        )
    raw = render_notice(store.conn, notice.id, "pdf", config=config)
    path = tmp_path / "long.pdf"
    path.write_bytes(raw)
    loaded, history = load_notice(store.conn, notice.id)
    headings = {s.title for s in document_sections(loaded, history, None)} | {
        s.title for s in document_sections(loaded, history, notice_context_for(store, loaded, config))
    }
    headings |= {"History", "Evidence plot", "Facts"}
    info = subprocess.run(["pdfinfo", str(path)], capture_output=True, text=True, check=True).stdout
    pages = int(re.search(r"Pages:\s+(\d+)", info).group(1))  # type: ignore[union-attr]
    listed = subprocess.run(["pdfimages", "-list", str(path)], capture_output=True, text=True, check=True)
    pages_with_images = {int(line.split()[0]) for line in listed.stdout.splitlines()[2:] if line.strip()}
    assert pages >= 3
    for page in range(1, pages + 1):
        text = subprocess.run(
            ["pdftotext", "-layout", "-f", str(page), "-l", str(page), str(path), "-"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        assert lines, page
        if lines[-1] == "Evidence plot":  # its content is an image, which has no text: on this page?
            assert page in pages_with_images, (page, pages_with_images)
            continue
        assert lines[-1] not in headings, (page, lines[-1])
        assert not re.fullmatch(r"Facts, episode \d+", lines[-1]), (page, lines[-1])
        size = subprocess.run(
            ["pdfinfo", "-f", str(page), "-l", str(page), str(path)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert re.search(rf"Page\s+{page} size:\s+612(\.0+)? x 792(\.0+)? pts", size), size
    store.close()


def notice_context_for(store: Store, notice: Any, config: Config) -> Any:
    from monitor.notify.document import notice_context

    return notice_context(store.conn, notice, config)


# --------------------------------------------------------------------------- the evidence bundle's day plots


def test_evidence_day_plot_of_light_has_its_limits_on_a_log_axis(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bundle's light plot (monitor/evidence/export.py draws it through plots.day_plot): night levels
    of 0.05 lux and a day of 7,000 lux both visible, with the 1 lux trespass and 25 lux
    high-intensity limits as lines; the sky sensor, judged against its own baseline, has none."""
    from datetime import date
    from zoneinfo import ZoneInfo

    from monitor.config import load_config
    from monitor.notify.plots import day_plot, plot_limits
    from tests.support.paths import REPO

    monkeypatch.setenv("MINEWATCH_MQTT_PASSWORD", "x")
    site = load_config(REPO / "deploy" / "dovre-quarry.toml").sites[0]
    limits = plot_limits(site)
    assert [value for _, value in limits["l1"]] == [1.0, 25.0]
    assert limits["l1"][0][0] == "6.C.2 limit 1 lux at night, longer than 300 s"
    assert [value for _, value in limits["n1"]] == [80.0]
    assert "sky1" not in limits
    zone = ZoneInfo("America/Chicago")
    first = int(datetime(2026, 12, 15, tzinfo=zone).timestamp() // 60)
    minutes = {first + m: ((7000.0 if 8 * 60 <= m < 16 * 60 else 0.05) * 6, 6, 7500.0) for m in range(1440)}
    fig = day_plot("light", "l1", "Quarry", date(2026, 12, 15), zone, minutes, limits["l1"])
    [ax] = fig.axes
    assert ax.get_yscale() == "log"
    low, high = ax.get_ylim()
    assert low <= 0.05 and high >= 7500
    drawn = {str(line.get_label()): set(line.get_ydata()) for line in ax.get_lines()}
    assert drawn["6.C.2 limit 1 lux at night, longer than 300 s"] == {1.0}
    assert drawn["6.C.4 limit 25 lux"] == {25.0}


def test_notice_names_the_profile_version_and_how_its_deadline_was_counted(tmp_path: Path) -> None:
    """Issue 16: the notice names the chained profile it was judged under; issue 17: how the
    13.3.A deadline was counted is stated, not left to the reader."""
    import hashlib

    db = tmp_path / "store.db"
    config = _configured(db)
    store = Store(db)
    site, profile = site_and_profile(config)
    t = local(2026, 12, 15, 13, 0)
    profile_text = "name = 'dovre'\n"
    store.append_config_record(site.id, "dovre", profile_text, "[broker]\n", t - timedelta(hours=1))
    book = NoticeBook(store)
    book.on_findings(site, profile, store_findings(store, minutes(t, 3), t), t + timedelta(minutes=5))
    [notice] = book.find()
    version = hashlib.sha256(profile_text.encode()).hexdigest()[:12]
    markdown = render_notice(store.conn, notice.id, "md", config=config).decode()
    assert f"| Judged under | profile dovre version {version} " in markdown, markdown
    assert "counted to the end of the site's local day 14 days after the day of issue." in markdown
    store.close()


# --------------------------------------------------------------------------- the complaints a notice answers


def test_notice_lists_the_complaints_it_answers_without_contact_details(
    sample: tuple[Store, Config, str],
) -> None:
    """Issue 28: a complaint the Town attached to a notice is listed in every format -- its
    reference, what, when in site time and what the record said -- and its complainant's contact
    details never (the notice goes to the operator); a complaint not attached is not listed."""
    from monitor.complaints.book import ComplaintBook
    from monitor.complaints.check import check_complaint

    store, config, notice_id = sample
    before = {fmt: render_notice(store.conn, notice_id, fmt, config=config) for fmt in ("md", "json")}
    site, profile = site_and_profile(config)
    book = ComplaintBook(store)
    heard = local(2026, 6, 15, 11, 33)
    now = heard + timedelta(hours=2)
    correlation = check_complaint(store.conn, site, profile, "noise", heard, heard, None, now)
    assert correlation["verdict"] == "corroborated"
    contact = {"name": "Ann Resident", "email": "ann@example.org", "phone": "555-0199"}
    with store.batch():
        answered = book.submit(
            SITE, "noise", heard, heard, "N 1234 Road", None, "loud", contact, correlation, now
        )
        other = book.submit(SITE, "light", heard, heard, "", None, "bright", contact, correlation, now)
        book.attach(answered.id, notice_id, "town", "", now)

    markdown = render_notice(store.conn, notice_id, "md", config=config).decode()
    document = html.unescape(render_notice(store.conn, notice_id, "html", config=config).decode())
    text = pdf_text(render_notice(store.conn, notice_id, "pdf", config=config, compress=False))
    data = json.loads(render_notice(store.conn, notice_id, "json"))
    for rendered in (markdown, document, text):
        assert "Residents' complaints this notice answers" in rendered
        assert f"Complaint {answered.id}" in rendered
        assert "noise, 2026-06-15 11:33:00 CDT" in rendered
        assert "corroborated by the record" in rendered
        assert other.id not in rendered
        for detail in (*contact.values(), "N 1234 Road"):
            assert detail not in rendered, detail
    [listed] = data["complaints"]
    assert listed["id"] == answered.id and listed["verdict"] == "corroborated"
    assert listed["when"] == "2026-06-15 11:33:00 CDT" and listed["what"] == "noise"
    assert listed["record"] == correlation["text"]
    assert not set(contact.values()) & set(listed.values())

    # A notice that answers none says nothing of complaints.
    assert "omplaint" not in before["md"].decode()
    assert "complaints" not in json.loads(before["json"])


def test_a_complaint_is_attached_only_to_its_sites_notices_and_others_are_not_told_apart(
    sample: tuple[Store, Config, str],
) -> None:
    """A Town account scoped to one site attaches its complaints; "is a notice of another site"
    against "no notice" told it which notice numbers exist at sites it may not see."""
    from monitor.complaints.book import ComplaintBook, ComplaintError

    store, _, notice_id = sample
    book = ComplaintBook(store)
    now = local(2026, 6, 15, 12, 0)
    with store.batch():
        elsewhere = book.submit("other-pit", "noise", now, now, "", None, "loud", {}, {}, now)
    said = []
    for notice in (notice_id, "DOV-2099-0999"):
        with pytest.raises(ComplaintError) as refused, store.batch():
            book.attach(elsewhere.id, notice, "town", "", now)
        said.append(str(refused.value))
    assert said == [
        f"notice: no notice {notice_id!r} of site other-pit",
        "notice: no notice 'DOV-2099-0999' of site other-pit",
    ]


def test_show_writes_the_format_its_out_file_names_and_list_names_an_unknown_site(
    sample: tuple[Store, Config, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`notices show ID --out n2.pdf` wrote Markdown into n2.pdf; `notices list --site nosuch`
    said "No notices." as if the site were quiet."""
    _store, config, notice_id = sample
    path = tmp_path / "minewatch.toml"
    path.write_text(config.raw_text)
    for name, magic in (
        ("n.pdf", b"%PDF"),
        ("n.html", b"<!DOCTYPE html>"),
        ("n.json", b"{"),
        ("n.md", b"# "),
    ):
        out = tmp_path / name
        assert main(["notices", "show", notice_id, "--config", str(path), "--out", str(out)]) == 0
        assert out.read_bytes().startswith(magic), name
    capsys.readouterr()
    clash = tmp_path / "clash.pdf"
    assert (
        main(["notices", "show", notice_id, "--config", str(path), "--format", "md", "--out", str(clash)])
        == 2
    )
    assert capsys.readouterr().err == (
        f"minewatch notices show: --format md and --out {clash} disagree:"
        " give a matching suffix, or leave --format out\n"
    )
    assert not clash.exists()
    assert main(["notices", "list", "--config", str(path), "--site", "nosuch"]) == 2
    assert capsys.readouterr().err == (
        "minewatch notices list: unknown site 'nosuch'; the configuration has: quarry\n"
    )
