"""WAV reading and the ``minewatch levels`` subcommand."""

from __future__ import annotations

import argparse
import csv
import io
import json
import struct
from pathlib import Path

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy.io import wavfile as scipy_wavfile

from monitor.acoustics.wavfile import parse_wav, read_wav
from monitor.commands import levels
from tests.support.paths import REPO

FS = 16000
COLUMNS = ["start_s", "duration_s", "LAeq", "LAFmax", "LASmax", "LAFmin", "LCeq", "LCpeak", "LZpeak", "LZeq"]


def _tone(seconds: float = 2.5, amplitude: float = 0.5) -> NDArray[np.float64]:
    t = np.arange(round(seconds * FS)) / FS
    return amplitude * np.sin(2 * np.pi * 1000 * t)


def _wav_bytes(payload: bytes, *, tag: int, channels: int, bits: int, extensible: bool = False) -> bytes:
    block_align = channels * bits // 8
    if extensible:
        guid_tail = b"\x00\x00\x00\x00\x10\x00\x80\x00\x00\xaa\x00\x38\x9b\x71"
        fmt = (
            struct.pack("<HHIIHHHHI", 0xFFFE, channels, FS, FS * block_align, block_align, bits, 22, bits, 0)
            + struct.pack("<H", tag)
            + guid_tail
        )
    else:
        fmt = struct.pack("<HHIIHH", tag, channels, FS, FS * block_align, block_align, bits)
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt
    body += b"LIST" + struct.pack("<I", 3) + b"abc\x00"  # odd-sized chunk with pad byte
    body += b"data" + struct.pack("<I", len(payload)) + payload
    return b"RIFF" + struct.pack("<I", len(body)) + body


def _int24_bytes(samples: NDArray[np.float64]) -> bytes:
    ints = np.round(samples * 2**23).astype("<i4")
    return ints.view(np.uint8).reshape(-1, 4)[:, :3].tobytes()


def test_reads_scipy_written_formats(tmp_path: Path) -> None:
    tone = _tone(0.1)
    stereo = np.column_stack([tone, -tone])
    cases = {
        "int16": ((stereo * 32767).astype(np.int16), 16, 1 / 32768),
        "int32": ((stereo * 2**31 * 0.999).astype(np.int32), 32, 1 / 2**31),
        "float32": (stereo.astype(np.float32), 32, 1e-7),
        "float64": (stereo, 64, 1e-15),
    }
    for name, (data, bits, tolerance) in cases.items():
        path = tmp_path / f"{name}.wav"
        scipy_wavfile.write(path, FS, data)
        audio = read_wav(path)
        assert (audio.sample_rate, audio.channels, audio.bits_per_sample) == (FS, 2, bits), name
        expected = tone * (0.999 if name == "int32" else 1.0)
        np.testing.assert_allclose(audio.samples, expected, atol=2 * tolerance)


def test_reads_24_bit_plain_and_extensible() -> None:
    tone = _tone(0.1, amplitude=0.9)
    tone[5] = -1.0  # most negative code exercises sign extension
    mono = _int24_bytes(tone)
    audio = parse_wav(_wav_bytes(mono, tag=1, channels=1, bits=24))
    assert audio.bits_per_sample == 24 and not audio.is_float
    np.testing.assert_allclose(audio.samples, tone, atol=1.0 / 2**23)
    interleaved = np.column_stack([tone, tone * 0.5]).ravel()
    stereo = _int24_bytes(interleaved)
    audio = parse_wav(_wav_bytes(stereo, tag=1, channels=2, bits=24, extensible=True))
    assert audio.channels == 2
    np.testing.assert_allclose(audio.samples, tone, atol=1.0 / 2**23)
    floats = parse_wav(_wav_bytes(tone.astype("<f4").tobytes(), tag=3, channels=1, bits=32, extensible=True))
    np.testing.assert_allclose(floats.samples, tone, atol=1e-7)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "not a RIFF/WAVE"),
        (b"RIFF\x00\x00\x00\x00WAVEjunk", "no fmt chunk"),
        (_wav_bytes(b"\x00\x00" * 4, tag=1, channels=1, bits=16)[:-4] + b"", "truncated data"),
        (_wav_bytes(b"\x00" * 8, tag=0x55, channels=1, bits=16), "unsupported WAV format tag"),
        (_wav_bytes(b"\x00" * 8, tag=1, channels=1, bits=12), "block alignment"),
        (_wav_bytes(b"", tag=1, channels=1, bits=16), "no samples"),
    ],
)
def test_bad_wav_raises_one_line_value_error(data: bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message) as info:
        parse_wav(data)
    assert "\n" not in str(info.value)


def _run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser()
    levels.add_arguments(parser)
    code = levels.run(parser.parse_args(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_cli_csv_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "tone.wav"
    scipy_wavfile.write(path, FS, (_tone() * 32767).astype(np.int16))
    code, out, err = _run_cli([str(path), "--calibration", "94"], capsys)
    assert code == 0 and err == ""
    rows = list(csv.DictReader(io.StringIO(out)))
    assert out.splitlines()[0] == ",".join(COLUMNS)
    assert [float(r["start_s"]) for r in rows] == [0.0, 1.0, 2.0]
    # The last one is a half period, and says so: it read as a whole second before.
    assert [float(r["duration_s"]) for r in rows] == [1.0, 1.0, 0.5]
    # Amplitude 0.5 is 6.02 dB below full scale.
    assert float(rows[1]["LAeq"]) == pytest.approx(94.0 - 6.02, abs=0.05)
    assert float(rows[1]["LCpeak"]) == pytest.approx(97.01 - 6.02, abs=0.1)


def test_cli_json_output_with_short_period(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "tone.wav"
    scipy_wavfile.write(path, FS, _tone(1.0).astype(np.float32))
    code, out, _ = _run_cli(
        [str(path), "--calibration", "100", "--period", "0.25", "--format", "json"], capsys
    )
    assert code == 0
    rows = json.loads(out)
    assert [r["start_s"] for r in rows] == [0.0, 0.25, 0.5, 0.75]
    assert list(rows[0]) == COLUMNS
    assert rows[0]["LAFmin"] is None  # Fast detector still settling: NaN becomes null
    assert rows[-1]["LAeq"] == pytest.approx(100.0 - 6.02, abs=0.05)


def test_cli_bad_file_exits_2_with_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "broken.wav"
    path.write_bytes(b"RIFF....WAVEfmt garbage")
    code, out, err = _run_cli([str(path), "--calibration", "94"], capsys)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "broken.wav" in err
    code, _, err = _run_cli([str(tmp_path / "missing.wav"), "--calibration", "94"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("samples", "said"),
    [
        (1, "1 sample at 16000 Hz (0.0625 ms)"),
        (1999, "1999 samples at 16000 Hz (124.938 ms)"),
    ],
)
def test_cli_a_recording_shorter_than_the_fast_time_constant_is_refused(
    samples: int, said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One sample printed a period of duration_s 0.0 at -106 dB (the silence floor), exit 0."""
    path = tmp_path / "short.wav"
    scipy_wavfile.write(path, FS, (_tone(1.0)[:samples] * 32767).astype(np.int16))
    code, out, err = _run_cli([str(path), "--calibration", "94"], capsys)
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        f"minewatch levels: {path}: {said} is too short for a level: a recording of at least 125 ms"
        " (the Fast time constant; 2000 samples) is needed"
    ]


def test_cli_a_recording_of_the_fast_time_constant_is_measured(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "short.wav"
    scipy_wavfile.write(path, FS, (_tone(0.125) * 32767).astype(np.int16))
    code, out, err = _run_cli([str(path), "--calibration", "94"], capsys)
    assert (code, err) == (0, "")
    [row] = csv.DictReader(io.StringIO(out))
    assert (float(row["start_s"]), float(row["duration_s"])) == (0.0, 0.125)
    assert float(row["LAeq"]) == pytest.approx(94.0 - 6.02, abs=0.05)


@pytest.mark.parametrize(
    ("calibration", "reason"),
    [
        ("1e308", "must be at most 200 dB, got 1e+308"),
        ("-94", "must be at least 60 dB, got -94"),
        ("59.9", "must be at least 60 dB, got 59.9"),
        ("200.1", "must be at most 200 dB, got 200.1"),
    ],
)
def test_cli_calibration_outside_what_a_sensor_may_have_is_refused(
    calibration: str, reason: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The configuration's own bound on a sensor's full_scale_db (config.FULL_SCALE_DB_RANGE):
    --calibration 1e308 once printed levels of 1e+308 dB."""
    from monitor.cli import build_parser

    path = tmp_path / "tone.wav"
    scipy_wavfile.write(path, FS, _tone(1.0).astype(np.float32))
    with pytest.raises(SystemExit) as exited:  # refused by the CLI's parser, before the file is read
        build_parser().parse_args(["levels", str(path), "--calibration", calibration])
    assert exited.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.strip().splitlines() == [
        f"minewatch levels: argument --calibration: {reason} (see minewatch levels --help)"
    ]


def test_cli_csv_leaves_lafmin_empty_without_enough_data(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A 0.25 s period ends before the Fast detector settles: no LAFmin, an empty cell, never 'nan'."""
    path = tmp_path / "tone.wav"
    scipy_wavfile.write(path, FS, _tone(1.0).astype(np.float32))
    code, out, _ = _run_cli([str(path), "--calibration", "100", "--period", "0.25"], capsys)
    assert code == 0 and "nan" not in out.lower()
    rows = list(csv.DictReader(io.StringIO(out)))
    assert rows[0]["LAFmin"] == ""
    assert float(rows[-1]["LAFmin"]) > 0  # settled by then


def test_output_into_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    """`minewatch levels rec.wav | head -1`: the reader leaves early; no traceback, exit 0."""
    import subprocess
    import sys

    path = tmp_path / "long.wav"
    scipy_wavfile.write(path, FS, (_tone(60.0) * 32767).astype(np.int16))
    repo = REPO
    proc = subprocess.Popen(
        [sys.executable, "-m", "monitor.cli", "levels", str(path), "--calibration", "94"],
        cwd=repo,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline()  # the header, then the reader goes away
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 0, err
    assert "Traceback" not in err and "BrokenPipe" not in err, err


@pytest.mark.parametrize(
    ("period", "reason"),
    [
        ("0", "must be at least 0.1 s, got 0"),
        ("0.05", "must be at least 0.1 s, got 0.05"),
        ("-1", "must be at least 0.1 s, got -1"),
        ("nan", "expected a finite number, got nan"),
        ("inf", "expected a finite number, got inf"),
        ("1e9", "must be at most 86400 s, got 1e+09"),
    ],
)
def test_cli_period_outside_what_a_meter_takes_is_refused_before_the_file_is_read(
    period: str, reason: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """--period had a check of its own (finite) and the meter's (0.1 s at least), the second
    only once the recording was read; a period of 1e9 s was taken. One bound, by the parser."""
    from monitor.cli import build_parser

    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["levels", "missing.wav", "--calibration", "94", "--period", period])
    assert exited.value.code == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"minewatch levels: argument --period: {reason} (see minewatch levels --help)"
    ]


@pytest.mark.parametrize("seconds", [1.0, 60.0])  # the output flushed at the end, and on the way
def test_output_to_a_full_disk_is_one_line(tmp_path: Path, seconds: float) -> None:
    """`minewatch levels rec.wav > /dev/full` (the disk fills): one line and exit 1, no traceback."""
    import subprocess
    import sys

    path = tmp_path / "tone.wav"
    scipy_wavfile.write(path, FS, (_tone(seconds) * 32767).astype(np.int16))
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "monitor.cli", "levels", str(path), "--calibration", "100"],
            cwd=REPO,
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    assert done.returncode == 1
    assert done.stderr == "minewatch levels: cannot write the output: No space left on device\n"


def test_an_argument_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "monitor.cli", "notices", "show", b"DOV\xff", "--config", "x.toml"],
        cwd=REPO,
        capture_output=True,
        env={**os.environ, "LC_ALL": "C.UTF-8"},
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr == b"minewatch: argument 3 (DOV\\xff) is not UTF-8 text: write it in UTF-8\n"


def test_cli_says_when_the_recording_reached_full_scale(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A clipped second's levels are lower bounds (IEC 61672-1 5.11): said on stderr, the output as ever."""
    tone = _tone(3.0, amplitude=0.5)
    tone[FS : 2 * FS] *= 4.0  # the second second driven past full scale
    path = tmp_path / "clipped.wav"
    scipy_wavfile.write(path, FS, np.clip(np.round(tone * 32768), -32768, 32767).astype(np.int16))
    code, out, err = _run_cli([str(path), "--calibration", "94"], capsys)
    assert code == 0
    assert next(csv.reader(io.StringIO(out))) == COLUMNS
    assert err == (
        f"minewatch levels: {path}: the input reached full scale (overload) in 1 of 3 periods, the first"
        " at 1 s: their levels are lower bounds\n"
    )
    quiet = tmp_path / "quiet.wav"
    scipy_wavfile.write(quiet, FS, np.round(_tone(3.0) * 32767).astype(np.int16))
    assert _run_cli([str(quiet), "--calibration", "94"], capsys)[2] == ""
