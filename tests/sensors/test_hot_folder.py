"""A seismograph's hot folder (`minewatch sensor seismograph --source folder:PATH`): an export is
read once it has settled, checked with the daemon's own decoder, published whole and moved to
done/; anything wrong with one file sets that file aside in rejected/ with a one-line reason, and
the folder goes on. docs/DEPLOY.md, "A seismograph's hot folder"."""

from __future__ import annotations

import errno
import json
import os
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from monitor.cli import main
from monitor.config import SensorConfig, SiteConfig
from monitor.seismic.vendor_csv import VendorEvent, write_event
from monitor.wire.codec import SeismicSummary, WaveformChunk
from rules.model import Placement, SensorKind
from sensors.seismograph import HotFolder, site_law_event
from tests.support.sensors import Subscriber, site_config, wait_for
from tests.support.servers import Mosquitto

START = datetime(2026, 6, 15, 16, 29, 59, 500000, tzinfo=UTC)
SENSOR = SensorConfig("sg1", SensorKind.SEISMOGRAPH, Placement.STRUCTURE, "Smith house")
SITE = SiteConfig("q", "Quarry", "America/Chicago", 45.27, -91.62, sensors=(SENSOR,))
SEISMOGRAPH = '[[sites.sensors]]\nid = "sg1"\nkind = "seismograph"\nlocation = "Smith house"\n'


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def export(path: Path, event_id: str = "ev-a", **wave: float) -> None:
    write_event(path, VendorEvent(event_id, START, site_law_event(500.0, 300.0, record_s=1.0, **wave)))


def scan_now(folder: Path, sent: list[object] | None = None) -> list[tuple[str, bool, str]]:
    """One scan of ``folder`` with nothing left to settle (the files here are complete)."""
    handled = HotFolder(folder, SITE, SENSOR, settle_s=0.0).scan((sent if sent is not None else []).append)
    return [(h.name, h.published, h.problem) for h in handled]


def test_hot_folder_publishes_each_file_once_and_sets_bad_ones_aside(tmp_path: Path) -> None:
    export(tmp_path / "a.csv")
    (tmp_path / "b.csv").write_text("not an export\n")
    sent: list[object] = []
    handled = scan_now(tmp_path, sent)
    assert handled[0] == ("a.csv", True, "") and handled[1][:2] == ("b.csv", False)
    assert "columns: expected" in handled[1][2]
    assert isinstance(sent[0], SeismicSummary) and sent[0].payload["instrument"]["location"] == "Smith house"
    assert all(isinstance(m, WaveformChunk) for m in sent[1:])
    assert (tmp_path / "done" / "a.csv").exists() and (tmp_path / "rejected" / "b.csv.reason").exists()
    assert scan_now(tmp_path, sent) == []


def test_hot_folder_never_writes_over_what_done_and_rejected_hold(tmp_path: Path) -> None:
    """A second export of the same name, or a file someone put in done/ or rejected/, is kept:
    the new one is set aside beside it as ``name-2.csv``."""
    for folder, text in (("done", "USER'S OWN done/a.csv\n"), ("rejected", "USER FILE\n")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / ("a.csv" if folder == "done" else "b.csv")).write_text(text)
    (tmp_path / "rejected" / "b.csv.reason").write_text("user reason\n")
    export(tmp_path / "a.csv")
    (tmp_path / "b.csv").write_text("not an export\n")
    assert [name for name, _, _ in scan_now(tmp_path)] == ["a.csv", "b.csv"]
    assert (tmp_path / "done" / "a.csv").read_text() == "USER'S OWN done/a.csv\n"
    assert (tmp_path / "rejected" / "b.csv").read_text() == "USER FILE\n"
    assert (tmp_path / "rejected" / "b.csv.reason").read_text() == "user reason\n"
    assert (tmp_path / "done" / "a-2.csv").stat().st_size > 1000
    assert (tmp_path / "rejected" / "b-2.csv").read_text() == "not an export\n"
    assert "columns: expected" in (tmp_path / "rejected" / "b-2.csv.reason").read_text()
    assert not list(tmp_path.glob("*.csv"))


def test_an_export_is_read_once_its_size_and_time_have_held_for_the_settle_period(tmp_path: Path) -> None:
    """The reviewer's export, written 500 lines at a time, was published with 991 of its 5120
    samples: the whole recording could then never replace it (the daemon keeps an event's first
    samples_total)."""
    whole = tmp_path / "whole.csv"
    export(whole)
    text = whole.read_text()
    whole.unlink()
    path = tmp_path / "blast.csv"
    clock = Clock()
    folder = HotFolder(tmp_path, SITE, SENSOR, settle_s=5.0, clock=clock)
    sent: list[object] = []
    lines = text.splitlines(keepends=True)
    written = 0
    for part in range(3):  # a writer's bursts, 4 s apart: each one a change
        written = len(lines) * (part + 1) // 4
        path.write_text("".join(lines[:written]))
        os.utime(path, ns=(part * 10**9, part * 10**9))  # a coarse clock: the size tells
        assert folder.scan(sent.append) == []
        clock.now += 4.0
    path.write_text(text)
    assert folder.scan(sent.append) == []  # changed again since the last scan
    clock.now += 4.9
    assert folder.scan(sent.append) == []  # not yet 5 s the same
    clock.now += 0.2
    assert [(h.name, h.published, h.problem) for h in folder.scan(sent.append)] == [("blast.csv", True, "")]
    chunks = [m for m in sent if isinstance(m, WaveformChunk)]
    assert sent and chunks[0].samples_total == 1024 and (tmp_path / "done" / "blast.csv").exists()


@pytest.mark.parametrize(
    ("name", "read"),
    [
        ("UPPER.CSV", True),
        ("Mixed.Csv", True),
        (".a.csv", False),  # a hidden name: rsync's and many exporters' while writing
        ("~$a.csv", False),  # Excel's lock file beside an open a.csv
        ("a.csv~", False),
        ("a.csv.part", False),
        ("a.csv.tmp", False),
        ("a.txt", False),
    ],
)
def test_names_a_writer_uses_meanwhile_are_left_alone_and_the_suffix_is_any_case(
    tmp_path: Path, name: str, read: bool
) -> None:
    export(tmp_path / name)
    handled = scan_now(tmp_path)
    assert handled == ([(name, True, "")] if read else [])
    assert (tmp_path / name).exists() is not read


def _with_nan(path: Path) -> None:
    wave = site_law_event(500.0, 300.0, record_s=1.0)
    wave.data[1, 99] = np.nan
    write_event(path, VendorEvent("ev-nan", START, wave))


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (
            lambda p: export(p, rate=1000),
            "x.csv: the daemon would refuse its waveform chunk 0 of 1: sample_rate: 1000 is below the"
            " plausible minimum 1024 (minewatch takes 1024 to 65536 samples a second: record at one of them)",
        ),
        (lambda p: export(p, rate=512), "sample_rate: 512 is below the plausible minimum 1024"),
        (_with_nan, "x.csv: the daemon would refuse its waveform chunk 0 of 1: samples: sample 99 is not a"),
        (lambda p: export(p, "e" * 500), "refuse its waveform chunk 0 of 1: event_id: longer than 128"),
        (lambda p: export(p, "ev\u202ea"), "refuse its waveform chunk 0 of 1: event_id:"),
    ],
    ids=["1000 Hz", "512 Hz", "NaN", "long id", "bidi id"],
)
def test_a_file_the_daemon_would_refuse_is_set_aside_and_nothing_of_it_is_published(
    tmp_path: Path, make: object, reason: str
) -> None:
    """One place for the rules (monitor.wire.codec.decode): what it refuses is not published and
    logged "Published" (the daemon said `payload: NaN is not allowed`), nor does a rate below the
    C weighting's design stop the sensor with a traceback; the next file is handled."""
    make(tmp_path / "x.csv")  # type: ignore[operator]
    export(tmp_path / "y.csv")
    sent: list[object] = []
    handled = scan_now(tmp_path, sent)
    assert handled[0][:2] == ("x.csv", False) and reason in handled[0][2], handled
    assert handled[1] == ("y.csv", True, "")
    assert {m.event_id for m in sent} == {"ev-a"}  # type: ignore[attr-defined]
    kept = (tmp_path / "rejected" / "x.csv.reason").read_text()
    assert kept == handled[0][2] + "\n" and len(kept.splitlines()) == 1


def test_an_unforeseen_error_sets_that_file_aside_and_the_folder_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sensors.seismograph as seismograph

    def summary_fails(*args: object, **kwargs: object) -> object:
        raise ZeroDivisionError("float division by zero")

    export(tmp_path / "x.csv")
    monkeypatch.setattr(seismograph, "summarize", summary_fails)
    assert scan_now(tmp_path) == [("x.csv", False, "x.csv: ZeroDivisionError: float division by zero")]
    assert (tmp_path / "rejected" / "x.csv").exists()


def test_a_file_that_cannot_be_moved_to_done_is_not_published_again_while_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sensors.seismograph as seismograph

    def refuse(path: Path, into: Path) -> Path:
        raise OSError(errno.EROFS, "Read-only file system")

    export(tmp_path / "a.csv")
    folder = HotFolder(tmp_path, SITE, SENSOR, settle_s=0.0)
    sent: list[object] = []
    monkeypatch.setattr(seismograph, "_set_aside", refuse)
    [handled] = folder.scan(sent.append)
    assert handled.published and "not moved to done/" in handled.problem
    count = len(sent)
    assert folder.scan(sent.append) == [] and len(sent) == count


def _read_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Making a file anywhere fails as on a read-only mount (the tests run as root, whom a
    folder's mode does not stop)."""

    def mkstemp(*args: object, **kwargs: object) -> tuple[int, str]:
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(tempfile, "mkstemp", mkstemp)


def test_a_read_only_hot_folder_is_refused_in_one_line_before_anything_is_published(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each run published the event, failed to move it to done/ and exited 2: a duplicate on
    every restart."""
    config = site_config(tmp_path, "mqtt://127.0.0.1:1")
    config.write_text(config.read_text() + SEISMOGRAPH)
    hot = tmp_path / "hot"
    hot.mkdir()
    export(hot / "a.csv")
    _read_only(monkeypatch)
    queue = tmp_path / "sg1.queue.db"
    argv = ["--sensor", "sg1", "--source", f"folder:{hot}", "--queue", str(queue), "--poll", "0.1"]
    code = main(
        ["sensor", "seismograph", "--config", str(config), *argv, "--duration", "1", "--drain-timeout", "0"]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert err.startswith(f"minewatch sensor seismograph: {hot}: cannot write there (Read-only file system)")
    assert "make the folder writable for this user" in err
    assert (hot / "a.csv").exists() and not queue.exists()


def test_a_hot_folder_that_goes_away_is_waited_for(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A folder removed (a share unmounted) while the sensor ran ended it with a traceback."""
    folder = tmp_path / "hot"
    folder.mkdir()
    hot = HotFolder(folder, SITE, SENSOR, settle_s=0.0)
    folder.rmdir()
    with caplog.at_level("INFO", logger="minewatch.sensors.seismograph"):
        assert hot.scan([].append) == [] and hot.scan([].append) == []
        folder.mkdir()
        export(folder / "a.csv")
        sent: list[object] = []
        assert [h.name for h in hot.scan(sent.append)] == ["a.csv"] and sent
    said = [r.getMessage() for r in caplog.records]
    assert said[0] == f"Hot folder {folder} cannot be read (No such file or directory); waiting for it"
    assert said[1] == f"Hot folder {folder} can be read again"
    assert len([m for m in said if "cannot be read" in m]) == 1


def test_done_and_rejected_are_made_at_start(tmp_path: Path) -> None:
    from sensors.seismograph import check_hot_folder

    check_hot_folder(tmp_path)
    assert (tmp_path / "done").is_dir() and (tmp_path / "rejected").is_dir()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["done", "rejected"]  # no probe left
    (tmp_path / "done").rmdir()
    (tmp_path / "done").write_text("")
    with pytest.raises(ValueError, match="done: is a file where the hot folder keeps its done/"):
        check_hot_folder(tmp_path)


def _waveform_header(payload: bytes) -> dict[str, object]:
    (length,) = struct.unpack(">I", payload[4:8])
    header: dict[str, object] = json.loads(payload[8 : 8 + length])
    return header


def test_the_sensor_publishes_an_export_written_in_bursts_whole(tmp_path: Path, mosquitto: Mosquitto) -> None:
    """Against a real broker: the vendor's software writes 500 lines at a time, pausing; the
    sensor, polling every 0.2 s with the default settle period, publishes the whole recording
    once, and the bad file beside it goes to rejected/ without stopping the sensor."""
    config = site_config(tmp_path, mosquitto.url)
    config.write_text(config.read_text() + SEISMOGRAPH)
    hot = tmp_path / "hot"
    hot.mkdir()
    source = tmp_path / "source.csv"
    write_event(source, VendorEvent("ev-bursts", START, site_law_event(500.0, 300.0, record_s=2.0)))
    export(hot / "a-1000hz.csv", "ev-1000", rate=1000)
    lines = source.read_text().splitlines(keepends=True)
    sub = Subscriber(mosquitto.port, "minewatch/dovre-quarry/sensors/sg1/#")
    argv = [sys.executable, "-m", "monitor.cli", "sensor", "seismograph", "--config", str(config)]
    argv += [
        "--sensor",
        "sg1",
        "--source",
        f"folder:{hot}",
        "--poll",
        "0.2",
        "--queue",
        str(tmp_path / "q.db"),
    ]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def write_in_bursts() -> None:
        with (hot / "blast.csv").open("w") as out:
            for at in range(0, len(lines), 500):
                out.writelines(lines[at : at + 500])
                out.flush()
                time.sleep(0.8)

    writer = threading.Thread(target=write_in_bursts)
    try:
        writer.start()
        writer.join()
        assert wait_for(lambda: (hot / "done" / "blast.csv").exists(), timeout=30)
        assert wait_for(lambda: len(sub.received("/waveform")) == 1)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        sub.close()
    assert proc.returncode == 0, err
    assert "Traceback" not in err and err.count("Published event file 'blast.csv'") == 1, err
    summaries = [json.loads(p) for _, p in sub.received("/seismic")]
    assert [s["event_id"] for s in summaries] == ["ev-bursts"]
    [(_, chunk)] = sub.received("/waveform")
    assert _waveform_header(chunk)["samples_total"] == 2048
    assert (hot / "done" / "blast.csv").read_text() == source.read_text()
    assert "sample_rate: 1000 is below" in (hot / "rejected" / "a-1000hz.csv.reason").read_text()
