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
