"""``minewatch levels RECORDING.wav --calibration DB``: per-period sound levels of a recording."""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys

from monitor.acoustics.filter_cache import weighting_filters
from monitor.acoustics.iec61672 import FAST_TAU_S, PERIOD_FIELDS, PeriodLevels, SoundLevelMeter
from monitor.acoustics.overload import clip_level
from monitor.acoustics.wavfile import read_wav
from monitor.commands.numbers import number
from monitor.config import FULL_SCALE_DB_RANGE

# The shortest recording measured: the Fast time constant (IEC 61672-1, 125 ms). In less, the
# Fast level of a steady sound has risen less than 2 dB short of it (1 - 1/e of its energy) and
# the levels say how long the recording is more than how loud: one sample read -106 dB.
MIN_RECORDING_S = FAST_TAU_S

# Feed the meter in 10 s blocks: bounded temporaries, negligible per-call overhead.
_BLOCK_S = 10


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("recording", metavar="RECORDING.wav", help="WAV file (first channel is used)")
    parser.add_argument(
        "--calibration",
        type=number(*FULL_SCALE_DB_RANGE, unit=" dB"),  # a sensor's own bound (calibration.full_scale_db)
        required=True,
        metavar="DB",
        help="level in dB of a full-scale sine (peak amplitude 1.0), from 60 to 200",
    )
    parser.add_argument(
        "--period",
        # The meter's shortest period, and a day (a sensor's expected_period_s at most).
        type=number(0.1, 86400, unit=" s"),
        default=1.0,
        metavar="S",
        help="measurement period in seconds, 0.1 to 86400 (default 1)",
    )
    parser.add_argument(
        "--format",
        choices=("csv", "json"),
        default="csv",
        help="output format; a level without enough data (LAFmin in the first 0.625 s, while the"
        " Fast detector settles) is an empty cell in CSV, null in JSON",
    )


def _rounded(value: float, digits: int) -> float | None:
    return round(value, digits) if math.isfinite(value) else None


# Each period's length beside its start: the last one of a recording is as long as what is
# left, and a 0.05 s remainder read as a whole second without it.
COLUMNS = ("start_s", "duration_s", *(name for name in PERIOD_FIELDS if name != "start_s"))
_TIMES = frozenset({"start_s", "duration_s"})


def _rows(periods: list[PeriodLevels]) -> list[dict[str, float | None]]:
    return [
        {name: _rounded(getattr(p, name), 3 if name in _TIMES else 2) for name in COLUMNS} for p in periods
    ]


def _too_short(samples: int, rate: int) -> str:
    held = "1 sample" if samples == 1 else f"{samples} samples"
    return (
        f"{held} at {rate} Hz ({1000 * samples / rate:.6g} ms) is too short for a level: a recording"
        f" of at least {1000 * MIN_RECORDING_S:g} ms (the Fast time constant;"
        f" {math.ceil(MIN_RECORDING_S * rate)} samples) is needed"
    )


def run(args: argparse.Namespace) -> int:
    try:
        audio = read_wav(args.recording)
    except ValueError as error:  # it names the file
        print(f"minewatch levels: {error}", file=sys.stderr)
        return 2
    if audio.samples.size < MIN_RECORDING_S * audio.sample_rate:
        print(
            f"minewatch levels: {args.recording}: {_too_short(audio.samples.size, audio.sample_rate)}",
            file=sys.stderr,
        )
        return 2
    try:
        meter = SoundLevelMeter(
            audio.sample_rate,
            period_s=args.period,
            calibration_db=args.calibration,
            filters=weighting_filters(audio.sample_rate),  # designed once, then read from disk
            clip_level=clip_level(audio.bits_per_sample, audio.is_float),
        )
    except ValueError as error:
        print(f"minewatch levels: {args.recording}: {error}", file=sys.stderr)
        return 2
    block = _BLOCK_S * audio.sample_rate
    periods: list[PeriodLevels] = []
    for start in range(0, audio.samples.size, block):
        periods.extend(meter.process(audio.samples[start : start + block]))
    periods.extend(meter.flush())
    overloaded = [p for p in periods if p.overload]
    if overloaded:  # said beside the levels, whose columns stay as they are
        print(
            f"minewatch levels: {args.recording}: the input reached full scale (overload) in"
            f" {len(overloaded)} of {len(periods)} periods, the first at {overloaded[0].start_s:g} s:"
            " their levels are lower bounds",
            file=sys.stderr,
        )

    rows = _rows(periods)
    if args.format == "json":
        json.dump(rows, sys.stdout, indent=None)
        sys.stdout.write("\n")
    else:
        writer = csv.DictWriter(sys.stdout, fieldnames=list(COLUMNS), lineterminator="\n")
        writer.writeheader()
        # Not enough data for a value (LAFmin while the Fast detector settles): an empty cell.
        writer.writerows({k: ("" if v is None else v) for k, v in row.items()} for row in rows)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="minewatch levels", description=__doc__)
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
