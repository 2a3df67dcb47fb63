"""A seismograph's event through the pipeline: chunks and summary journaled, the summary
recomputed from the waveforms, judged against the profile's curve, and kept 3 years."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from monitor.journal.store import Store
from monitor.wire.codec import SeismicSummary, WaveformChunk, encode
from sensors.seismograph import event_messages, site_law_event
from tests.support.configs import quarry_config, sensor
from tests.support.paths import REPO
from tests.support.pipeline_world import World

T0 = datetime(2026, 6, 15, 17, 0, tzinfo=UTC)  # 12:00 in Dovre (CDT): inside the blasting window


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    text = quarry_config(
        tmp_path / "store.db",
        retention_days=1,
        sensors=[
            sensor("n1", "sound", expected_period_s=1),
            sensor("sg1", "seismograph", location="Smith house, 412 County Rd", expected_period_s=3600),
        ],
    )
    w = World(tmp_path, text, T0)
    yield w
    w.close()


def messages(ppv_in_s: float, event_id: str = "ev1", ts: datetime = T0 + timedelta(seconds=20)):
    wave = site_law_event(600.0, 200.0, ppv_in_s=ppv_in_s, record_s=4.0, freqs=(6.0, 6.0, 6.0))
    return wave, event_messages(wave, "q", "sg1", event_id, ts, blast_id="b1", max_bytes=16_384)


def judged(world: World) -> dict[str, str]:
    world.levels(T0, 180, 60.0)  # the boundary meter moves the site's data on
    world.advance(200)
    rows = world.store.conn.execute(
        "SELECT standard, kind FROM findings WHERE standard IN ('ground_vibration', 'airblast')"
        " AND retracted = 0 ORDER BY revision"
    )
    return {r["standard"]: r["kind"] for r in rows}


def test_event_is_journaled_recomputed_and_judged_over_the_curve(world: World) -> None:
    _, msgs = messages(0.8)  # 0.8 in/s at 6 Hz: over USBM plaster's 0.50 in/s
    chunks = [m for m in msgs if isinstance(m, WaveformChunk)]
    assert len(chunks) > 4  # split under the 16 KiB cap used here
    assert all(len(encode(c)[1]) <= 16_384 for c in chunks)
    world.send(*msgs)
    assert world.count("SELECT COUNT(*) FROM waveforms") == len(chunks)
    rows = {
        r["kind"]: json.loads(r["data"])
        for r in world.store.seismic_between("q", T0, T0 + timedelta(minutes=1))
    }
    assert set(rows) == {"seismic", "seismic-waveforms"}
    edge, daemon = rows["seismic"]["summary"], rows["seismic-waveforms"]["summary"]
    # float32 on the wire: the daemon's peaks agree with the edge's to float32 precision
    for e, d in zip(edge["axes"], daemon["axes"], strict=True):
        assert d["ppv_mm_s"] == pytest.approx(e["ppv_mm_s"], rel=1e-6)
        assert d["zc_hz"] == pytest.approx(e["zc_hz"], rel=1e-3)
    # Every axis has its zero-crossing frequency. V and L had none before the summary took a
    # sample at rest (exactly 0) as a crossing: their largest half-cycle is the first one after
    # the record's rest, and it is positive, so no sign change preceded it. V's is 15.7 Hz, not
    # its 6 Hz motion, because the simulator (sensors/seismograph.decaying) starts each sine at a
    # random phase: V steps from rest to its peak in one sample, cutting that half-cycle short.
    assert [round(a["zc_hz"], 1) for a in edge["axes"]] == [7.2, 15.7, 8.5]
    assert judged(world)["ground_vibration"] == "violation"
    assert world.alerts("seismic_summary_disagreement") == []  # the edge's summary is the waveforms'
    [summary] = [
        r[0]
        for r in world.store.conn.execute("SELECT data FROM findings WHERE standard = 'ground_vibration'")
    ]
    finding = json.loads(summary)
    assert (
        "Smith house" in finding["summary"] and "blast b1" not in finding["summary"]
    )  # no blast record sent
    assert finding["details"]["source"] == "waveforms" and finding["details"]["blast_id"] is None
    chained = world.count("SELECT COUNT(*) FROM chain WHERE kind = 'waveform'")
    assert chained == len(chunks)


def test_within_the_curve_is_compliant_and_resends_are_duplicates(world: World) -> None:
    _, msgs = messages(0.2)
    world.send(*msgs)
    world.send(*msgs)  # a seismograph resending after a reconnect
    assert world.pipeline.counters.duplicates == len(msgs)
    assert judged(world)["ground_vibration"] == "compliant"


def test_edge_summary_alone_is_judged_and_says_so(world: World) -> None:
    _, msgs = messages(0.8)
    world.send(*msgs[:-1])  # the last chunk never came
    assert world.count("SELECT COUNT(*) FROM readings WHERE kind = 'seismic-waveforms'") == 0
    assert judged(world)["ground_vibration"] == "violation"
    [data] = [
        r[0]
        for r in world.store.conn.execute("SELECT data FROM findings WHERE standard = 'ground_vibration'")
    ]
    assert "seismograph's own summary" in json.loads(data)["summary"]


def test_a_bad_chunk_is_rejected_in_one_line_and_the_daemon_goes_on(world: World) -> None:
    _, msgs = messages(0.3)
    chunk = next(m for m in msgs if isinstance(m, WaveformChunk))
    topic, payload = encode(chunk)
    world.send_raw((topic, payload[:-3]))  # cut mid-sample
    world.send_raw((topic.replace("/waveform", "/levels"), b"{}"))  # a seismograph sending levels
    world.send_raw(encode(replace(chunk, data=b"")))  # a header and no samples
    reasons = [b["reason"] for b in world.published_on("minewatch/q/rejected")]
    assert reasons[0].startswith("samples: ") and "4-channel f32le" in reasons[0]
    assert "seismograph sensor; it cannot send 'levels'" in reasons[1]
    assert reasons[2] == "samples: empty: the frame holds no 4-channel f32le samples after its header"
    changed = replace(chunk, data=chunk.data[:-16] + b"\0" * 16)
    world.send(chunk)
    world.send(changed)  # the same chunk with other samples: refused, the first kept
    assert world.published_on("minewatch/q/rejected")[-1]["reason"].startswith("chunk: 0 of event 'ev1'")


def test_blast_records_outlive_retention_days(world: World) -> None:
    _, msgs = messages(0.3)
    world.send(*msgs)
    store: Store = world.store
    now = T0 + timedelta(days=30)
    store.prune(now - timedelta(days=1), blast_records_before=now - timedelta(days=3 * 366))
    assert world.count("SELECT COUNT(*) FROM waveforms") > 0
    assert world.count("SELECT COUNT(*) FROM readings WHERE kind LIKE 'seismic%'") == 2
    assert world.count("SELECT COUNT(*) FROM sound") == 0  # the sound went with retention_days
    later = T0 + timedelta(days=3 * 366 + 2)
    store.prune(later - timedelta(days=1), blast_records_before=later - timedelta(days=3 * 366))
    assert world.count("SELECT COUNT(*) FROM waveforms") == 0


def test_summary_message_fields_are_checked(world: World) -> None:
    _, msgs = messages(0.3)
    summary = next(m for m in msgs if isinstance(m, SeismicSummary))
    bad = dict(
        summary.payload, summary=dict(summary.payload["summary"], axes=summary.payload["summary"]["axes"][:2])
    )
    world.send(replace(summary, payload=bad))
    [rejection] = world.published_on("minewatch/q/rejected")
    assert rejection["reason"] == "summary.axes: expected three axes (T, V, L)"


def test_blast_report_html_and_pdf(world: World, tmp_path: Path) -> None:
    from monitor.notify.blast_report import blast_report_data, render_html, report_events, write_blast_report
    from rules.model import Blast, BlastNotice

    blast_ts = T0 + timedelta(seconds=19)
    world.send(
        BlastNotice("q", "b1", T0 - timedelta(hours=30), blast_ts, ("Town of Dovre", "Smith")),
        Blast("q", "b1", blast_ts, charge_kg=200.0),
    )
    _, msgs = messages(0.8)
    world.send(*msgs)
    judged(world)
    site = world.config.site("q")
    assert site is not None
    profile = world.pipeline.sites["q"].profile
    assert report_events(world.store, "q") == [("sg1", "ev1")]
    data = blast_report_data(world.store, site, profile, "sg1", "ev1")
    page = render_html(data)
    for expected in (
        "Blast report: b1",
        "ground_vibration (6.F): violation",
        "blast_window (6.F): compliant",
        "Town of Dovre, Smith",
        "Smith house",
        "Chain reference",
        "waveform chunk 1 of",
        "data:image/png;base64,",
        "Record analysed by",
        "the seismograph&#x27;s summary agrees with its waveforms&#x27; within ppv 1%",
    ):
        assert expected in page, expected
    paths = write_blast_report(world.store, site, profile, "sg1", "ev1", tmp_path / "reports")
    assert [p.name for p in paths] == ["blast-b1.html", "blast-b1.pdf"]
    assert paths[1].read_bytes().startswith(b"%PDF")


def _report_blast(world: World, *args: str) -> subprocess.CompletedProcess[str]:
    """`minewatch report-blast` as a real process over the world's store (this checkout first)."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run(
        [sys.executable, "-m", "monitor.cli", "report-blast", "--config", str(world.config_path), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_report_blast_command_writes_pdf_or_html_and_refuses_in_one_line(
    world: World, tmp_path: Path
) -> None:
    from rules.model import Blast

    world.send(Blast("q", "b1", T0 + timedelta(seconds=19), charge_kg=200.0))
    _, msgs = messages(0.8)
    world.send(*msgs)
    judged(world)
    world.store.conn.commit()
    pdf, page = tmp_path / "b1.pdf", tmp_path / "b1.html"
    done = _report_blast(world, "--site", "q", "--blast", "b1", "--out", str(pdf))
    assert done.returncode == 0, done.stderr
    assert pdf.read_bytes().startswith(b"%PDF") and "Wrote" in done.stdout
    done = _report_blast(world, "--blast", "b1", "--out", str(page))  # one site: --site may be left out
    assert done.returncode == 0, done.stderr
    assert "Blast report: b1" in page.read_text() and "ground_vibration (6.F): violation" in page.read_text()
    for args, said in [
        (("--blast", "nope", "--out", str(tmp_path / "x.pdf")), "blast 'nope': no seismograph event"),
        (("--blast", "b1", "--out", str(tmp_path / "x.txt")), "name a .pdf or .html file"),
        (("--blast", "b1", "--out", str(pdf)), "the file exists"),
        (("--site", "zz", "--blast", "b1", "--out", str(tmp_path / "y.pdf")), "unknown site 'zz'"),
        (("--blast", "b1", "--sensor", "n9", "--out", str(tmp_path / "z.pdf")), "has no sensor 'n9'"),
    ]:
        refused = _report_blast(world, *args)
        assert refused.returncode == 2 and refused.stdout == "", (args, refused)
        assert refused.stderr.count("\n") == 1 and said in refused.stderr, (args, refused.stderr)
        assert "Traceback" not in refused.stderr


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (1e38, "samples[0]: a sample of 1e+38 is beyond 508, no reading"),
        (float("nan"), "samples: sample 0 is not a number (NaN or infinite)"),
    ],
)
def test_a_chunk_of_samples_no_instrument_records_is_rejected(
    world: World, value: float, reason: str
) -> None:
    """1e38 on every channel was taken in: its event's airblast read 854 dB and PPV 1e38, the
    site's notice facts raised InvalidOperation, and no noise violation of that minute was
    judged; all-NaN samples were judged compliant at "nan Pa"."""
    _, msgs = messages(0.3)
    chunk = next(m for m in msgs if isinstance(m, WaveformChunk))
    counts = np.full(chunk.n_samples * 4, value, dtype="<f4").tobytes()
    bad = replace(chunk, sample_format="f32le", scale=(1.0, 1.0, 1.0, 1.0), data=counts)
    world.send_raw(encode(bad))
    [(said,)] = world.store.conn.execute("SELECT reason FROM rejections").fetchall()
    assert said == reason
    assert world.store.conn.execute("SELECT COUNT(*) FROM waveforms").fetchone()[0] == 0


def test_a_chunk_that_describes_another_event_than_its_fellows_is_rejected(world: World) -> None:
    """A chunk whose samples_total disagreed with chunk 0's was taken, and the event could never
    be recomputed (a warning in the log only)."""
    _, msgs = messages(0.3)
    chunks = [m for m in msgs if isinstance(m, WaveformChunk)]
    world.send_raw(encode(chunks[0]))
    odd = replace(chunks[1], samples_total=chunks[1].samples_total * 2)
    world.send_raw(encode(odd))
    [(said,)] = world.store.conn.execute("SELECT reason FROM rejections").fetchall()
    assert said == (
        f"samples_total: chunk 1 says {odd.samples_total}, chunk 0 {chunks[0].samples_total} (event ev1)"
    )
    world.send_raw(*(encode(c) for c in chunks[1:]))  # the event's own chunks: whole, recomputed
    assert world.store.conn.execute("SELECT COUNT(*) FROM waveforms").fetchone()[0] == len(chunks)
    kinds = world.store.conn.execute("SELECT kind FROM readings WHERE kind LIKE 'seismic%'").fetchall()
    assert ("seismic-waveforms",) in [tuple(k) for k in kinds]
