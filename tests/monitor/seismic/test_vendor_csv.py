"""A vendor's CSV export read into the same waveform the wire carries, and its mistakes named."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from monitor.seismic.summary import summarize
from monitor.seismic.vendor_csv import VendorEvent, read_event, write_event
from sensors.seismograph import site_law_event

START = datetime(2026, 6, 15, 16, 29, 59, 500000, tzinfo=UTC)


def test_round_trip_in_inches_per_second_keeps_the_summary(tmp_path: Path) -> None:
    wave = site_law_event(500.0, 300.0, record_s=2.0)
    path = tmp_path / "event.csv"
    write_event(
        path, VendorEvent("ev-1", START, wave, {"model": "Minimate Pro4", "calibrated": "2026-03-02"})
    )
    event = read_event(path)
    assert event.event_id == "ev-1" and event.start == START
    assert event.instrument["model"] == "Minimate Pro4"
    before, after = summarize(wave), summarize(event.wave)
    for a, b in zip(before.axes, after.axes, strict=True):
        assert b.ppv_mm_s == pytest.approx(a.ppv_mm_s, rel=1e-6)
    assert after.airblast_pa == pytest.approx(before.airblast_pa, rel=1e-6)
    assert event.wave.ranges == pytest.approx(wave.ranges)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("# start: 2026-06-15T16:30:00Z\n# sample_rate: 1024\nT,V,L,MIC\n0,0,0,0\n", "event_id: missing"),
        (
            "# event_id: e\n# start: 2026-06-15 16:30\n# sample_rate: 1024\nT,V,L,MIC\n0,0,0,0\n",
            "no UTC offset",
        ),
        ("# event_id: e\n# start: 2026-06-15T16:30:00Z\n# sample_rate: 1024\nX,Y\n", "columns: expected"),
        (
            "# event_id: e\n# start: 2026-06-15T16:30:00Z\n# sample_rate: 1024\n# velocity_unit: ft/s\n"
            "T,V,L,MIC\n0,0,0,0\n",
            "header: 'ft/s'",
        ),
    ],
)
def test_mistakes_are_one_line_naming_the_field(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        read_event(path)


def test_hot_folder_publishes_each_file_once_and_sets_bad_ones_aside(tmp_path: Path) -> None:
    from monitor.config import SensorConfig
    from monitor.wire.codec import SeismicSummary, WaveformChunk
    from rules.model import Placement, SensorKind
    from sensors.seismograph import publish_folder

    sensor = SensorConfig("sg1", SensorKind.SEISMOGRAPH, Placement.STRUCTURE, "Smith house")
    write_event(tmp_path / "a.csv", VendorEvent("ev-a", START, site_law_event(500.0, 300.0, record_s=1.0)))
    (tmp_path / "b.csv").write_text("not an export\n")
    sent: list[object] = []
    handled = publish_folder(tmp_path, "q", sensor, sent.append)
    assert handled[0] == ("a.csv", "") and handled[1][0] == "b.csv" and "columns: expected" in handled[1][1]
    assert isinstance(sent[0], SeismicSummary) and sent[0].payload["instrument"]["location"] == "Smith house"
    assert all(isinstance(m, WaveformChunk) for m in sent[1:])
    assert (tmp_path / "done" / "a.csv").exists() and (tmp_path / "rejected" / "b.csv.reason").exists()
    assert publish_folder(tmp_path, "q", sensor, sent.append) == []
