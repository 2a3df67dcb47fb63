"""A vendor's CSV export read into the same waveform the wire carries, and its mistakes named."""

from __future__ import annotations

import warnings
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


def test_hot_folder_never_writes_over_what_done_and_rejected_hold(tmp_path: Path) -> None:
    """A second export of the same name, or a file someone put in done/ or rejected/, is kept:
    the new one is set aside beside it as ``name-2.csv``."""
    from monitor.config import SensorConfig
    from rules.model import Placement, SensorKind
    from sensors.seismograph import publish_folder

    sensor = SensorConfig("sg1", SensorKind.SEISMOGRAPH, Placement.STRUCTURE, "Smith house")
    for folder, text in (("done", "USER'S OWN done/a.csv\n"), ("rejected", "USER FILE\n")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / ("a.csv" if folder == "done" else "b.csv")).write_text(text)
    (tmp_path / "rejected" / "b.csv.reason").write_text("user reason\n")
    write_event(tmp_path / "a.csv", VendorEvent("ev-a", START, site_law_event(500.0, 300.0, record_s=1.0)))
    (tmp_path / "b.csv").write_text("not an export\n")
    handled = publish_folder(tmp_path, "q", sensor, lambda _: None)
    assert [name for name, _ in handled] == ["a.csv", "b.csv"]
    assert (tmp_path / "done" / "a.csv").read_text() == "USER'S OWN done/a.csv\n"
    assert (tmp_path / "rejected" / "b.csv").read_text() == "USER FILE\n"
    assert (tmp_path / "rejected" / "b.csv.reason").read_text() == "user reason\n"
    assert (tmp_path / "done" / "a-2.csv").stat().st_size > 1000
    assert (tmp_path / "rejected" / "b-2.csv").read_text() == "not an export\n"
    assert "columns: expected" in (tmp_path / "rejected" / "b-2.csv.reason").read_text()
    assert not list(tmp_path.glob("*.csv"))


def _export(path: Path, record_s: float = 1.0) -> str:
    write_event(path, VendorEvent("ev-1", START, site_law_event(500.0, 300.0, record_s=record_s)))
    return path.read_text()


def test_a_byte_order_mark_as_excel_saves_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "bom.csv"
    text = _export(path)
    path.write_bytes(b"\xef\xbb\xbf" + text.encode())
    assert read_event(path).event_id == "ev-1"


def test_a_header_only_export_is_said_in_one_line_without_numpys_warning(tmp_path: Path) -> None:
    path = tmp_path / "head.csv"
    text = _export(path)
    path.write_text(text[: text.index("T,V,L,MIC\n") + len("T,V,L,MIC\n")])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's UserWarning reached stderr before the reason
        with pytest.raises(
            ValueError, match=r"^head.csv: samples: none after the T,V,L,MIC line \(line 8\)$"
        ):
            read_event(path)


def test_a_file_cut_mid_row_is_said_in_the_technicians_words(tmp_path: Path) -> None:
    """Not numpy's "the number of columns changed from 4 to 3 at row 2949; use `usecols`..."."""
    path = tmp_path / "cut.csv"
    text = _export(path)
    path.write_text(text[: text.index("\n", len(text) // 2) + 12])  # a row and a bit of the next
    with pytest.raises(ValueError) as raised:
        read_event(path)
    message = str(raised.value)
    assert "usecols" not in message
    assert message.startswith("cut.csv:") and "samples: the last row has" in message
    assert "the file is cut short" in message and "renamed once complete" in message


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("# sample_rate: 1024", "# sample_rate: 1024.5"), "sample_rate: '1024.5' is not a positive whole"),
        (("# sample_rate: 1024", "# sample_rate: nan"), "sample_rate: 'nan' is not a positive whole"),
        (("# sample_rate: 1024", "# sample_rate: 0"), "sample_rate: '0' is not a positive whole"),
        (("T,V,L,MIC\n", "T,V,L,MIC\n0.1,0.2,x,0.3\n"), r"bad.csv:10: samples: 'x' is not a number"),
        (("T,V,L,MIC\n", "T,V,L,MIC\n0.1,0.2,0.3\n"), r"bad.csv:10: samples: 3 values, expected 4"),
        (
            ("# location: Smith house", "# location: Smith h\xe9use"),
            "bad.csv: not UTF-8 text .a byte 0xe9.: export it as UTF-8",
        ),
    ],
)
def test_the_samples_mistakes_are_one_line_naming_where(
    tmp_path: Path, change: tuple[str, str], message: str
) -> None:
    path = tmp_path / "bad.csv"
    wave = site_law_event(500.0, 300.0, record_s=1.0)
    write_event(path, VendorEvent("ev-1", START, wave, {"location": "Smith house"}))
    text = path.read_text().replace(*change, 1)
    path.write_bytes(text.encode("latin-1") if "\xe9" in change[1] else text.encode())
    with pytest.raises(ValueError, match=message):
        read_event(path)
