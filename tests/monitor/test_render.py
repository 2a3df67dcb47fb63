"""Rendering notices: HTML, PDF, Markdown, JSON and the evidence plot, for a sample episode."""

from __future__ import annotations

import base64
import json
import re
import struct
import zlib
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from monitor.cli import main
from monitor.config import Config
from monitor.notices import NoticeBook
from monitor.render import evidence_plot, load_notice, render_html, render_notice, render_pdf
from monitor.store import Store
from rules.model import LightSummary, Measurement
from tests.monitor.test_notices import (
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
    notices = {n.standard: n for n in book.list()}
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
    assert listed["id"] == notice_id and listed["deadline"] == "2026-07-11T04:59:59Z"
    history = NoticeBook(store).history(notice_id)
    assert [(c.change, c.actor) for c in history][-2:] == [
        ("extended", "Town clerk"),
        ("corrected", "Town board"),
    ]
    assert main(["notices", "escalate", notice_id, "--note", "x", "--by", "Town", *args]) == 2
