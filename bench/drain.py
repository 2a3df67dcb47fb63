"""Drain benchmark in process (not a test): the pipeline's CPU per message, storing and judging apart.

The backlog of bench/ingest.py (``--sites`` x ``--sensors`` meters, ``--per-sensor`` seconds each, in
time order, 60-79 dB(A)) handed to ``Pipeline.handle_batch`` in batches of 10,000 with a tick after each,
as the daemon's run loop does, without a broker or worker processes: one worker's share of the drain.
Then the input falls quiet and one more tick judges what the backlog's end left open ("tail").

    python bench/drain.py [--per-sensor 2000] [--sites 5] [--sensors 100] [--varied-levels]
                          [--cross-hour] [--profile]

Prints CPU microseconds per message (``time.process_time``; building the messages is not counted) for
storing (handle_batch) and judging (tick), each by quarter of the drain, so growth with the backlog
shows, and the wall time per message the pipeline holds the store's write lock (two workers' drain
is bound by that: docs/PERFORMANCE.md), and the process's resident memory after each quarter (issue
31's "RSS flat once the evaluation windows are full", without the broker and the workers' other
processes). It also prints the CPU per message of counting the store's hourly histograms
(``Store.keep_sound_hours``, once a site's data reaches a new hour): ``--cross-hour`` places the
backlog so that an hour of data ends at its middle (otherwise where it falls depends on the time
of day, as in bench/ingest.py). ``--profile`` adds cProfile's top functions (which inflates
many small Python calls: compare without it).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from backlog_levels import backlog_levels  # noqa: E402  (bench/, the script's own folder)

from monitor.config import parse_config  # noqa: E402
from monitor.daemon.clock import Clock  # noqa: E402
from monitor.daemon.ingest import Inbound  # noqa: E402
from monitor.daemon.pipeline import BATCH_LIMIT, QUIET_S, Pipeline  # noqa: E402
from monitor.journal.store import Store  # noqa: E402
from monitor.process_settings import freeze_startup_objects, tune_process  # noqa: E402
from monitor.wire.codec import encode  # noqa: E402
from rules.model import SoundLevels  # noqa: E402


def config_text(store: Path, sites: int, sensors: int) -> str:
    lines = ["[broker]", 'url = "mqtt://127.0.0.1:1"', "[storage]", f'path = "{store}"', "[daemon]"]
    lines += ["lateness_s = 3600", "status_interval_s = 30", "offline_after_periods = 100000"]
    for s in range(sites):
        lines += ["[[sites]]", f'id = "site{s}"', 'timezone = "America/Chicago"']
        lines += ["latitude = 45.27", "longitude = -91.62"]
        lines += [
            line for n in range(sensors) for line in ("[[sites.sensors]]", f'id = "n{n}"', 'kind = "sound"')
        ]
    return "\n".join(lines) + "\n"


def batches(
    pipeline: Pipeline, sites: int, sensors: int, seconds: int, start: datetime, varied: bool = False
) -> Iterator[list[Inbound]]:
    """The backlog in time order, decoded ahead as the network thread does (wire_levels.predecode)."""
    batch: list[Inbound] = []
    level_of = backlog_levels(varied)
    for i in range(seconds):
        ts = start + timedelta(seconds=i)
        for s in range(sites):
            for n in range(sensors):
                laeq = level_of(n)
                topic, payload = encode(SoundLevels(f"site{s}", f"n{n}", ts, 1.0, laeq, laeq + 2, laeq + 15))
                batch.append(Inbound(topic, payload, 1, 1, 0.0, pipeline.predecode(topic, payload)))
                if len(batch) == BATCH_LIMIT:
                    yield batch
                    batch = []
    if batch:
        yield batch


def quarters(values: list[float], sizes: list[int]) -> list[float | None]:
    """Microseconds per message in each quarter of the drain's messages (``sizes``: messages per
    batch; a batch counts in the quarter its first message falls in; None for a quarter no batch
    began in, in a drain of a few batches)."""
    spent, counted = [0.0] * 4, [0] * 4
    total, done = sum(sizes), 0
    for value, size in zip(values, sizes, strict=True):
        quarter = min(3, done * 4 // total)
        spent[quarter] += value
        counted[quarter] += size
        done += size
    return [round(s / n * 1e6, 1) if n else None for s, n in zip(spent, counted, strict=True)]


def at_quarters(values: list[float], sizes: list[int]) -> list[float]:
    """The value after the batch that ends each quarter of the drain's messages (or passes its end)."""
    total, done = sum(sizes), 0
    marks: list[float] = []
    for value, size in zip(values, sizes, strict=True):
        done += size
        while len(marks) < 4 and done * 4 >= total * (len(marks) + 1):
            marks.append(value)
    return marks


def resident_mb() -> float:
    """This process's resident memory now (Linux: /proc/self/statm), MB."""
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def count_the_hours(store: Store) -> list[float]:
    """The CPU seconds of each ``store.keep_sound_hours`` call from now on (the list filled as it runs)."""
    spent: list[float] = []
    keep = store.keep_sound_hours

    def timed(site: str, until_hour: int) -> int:
        t0 = time.process_time()
        try:
            return keep(site, until_hour)
        finally:
            spent.append(time.process_time() - t0)

    store.keep_sound_hours = timed  # type: ignore[method-assign]
    return spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-sensor", type=int, default=2000, help="seconds of backlog per meter")
    parser.add_argument("--sites", type=int, default=5)
    parser.add_argument("--sensors", type=int, default=100, help="meters per site")
    parser.add_argument("--profile", action="store_true", help="cProfile's top functions (CPU time)")
    parser.add_argument(
        "--varied-levels",
        action="store_true",
        help="each second's LAeq drawn anew, as real meters' move (bench/backlog_levels.py)",
    )
    parser.add_argument(
        "--cross-hour",
        action="store_true",
        help="an hour of data ends at the backlog's middle (its count falls in the drain)",
    )
    args = parser.parse_args()
    if args.per_sensor < 1 or args.sites < 1 or args.sensors < 1:
        parser.error("--per-sensor, --sites and --sensors must be at least 1")
    # The daemon's process settings (monitor/cli.py, Pipeline's run) and WAL checkpoints in a
    # thread of their own. With Python's default thresholds the collector's full passes over
    # the recent windows grew with the backlog (8.4 us a message at 2,000 per meter), which
    # the daemon does not pay.
    tune_process()
    with tempfile.TemporaryDirectory(prefix="minewatch-drain-") as tmp:
        config = parse_config(config_text(Path(tmp) / "store.db", args.sites, args.sensors))
        store = Store(config.storage.path)
        store.checkpoint_in_background()  # as the daemon's (its CPU is the process's, counted)
        now = datetime.now(UTC)
        if args.cross_hour:  # the data's hour ends at its middle; the clock no later than the wall's
            half = timedelta(seconds=args.per_sensor // 2)
            hour = (now - half - timedelta(seconds=120)).replace(minute=0, second=0, microsecond=0)
            now = hour - half + timedelta(seconds=args.per_sensor + 120)
        counting = count_the_hours(store)
        pipeline = Pipeline(config, store, lambda topic, payload, retain: None, Clock("wall", lambda: now))
        freeze_startup_objects()
        start = now.replace(microsecond=0) - timedelta(seconds=args.per_sensor + 120)  # as bench/ingest.py
        profile = cProfile.Profile(time.process_time)
        storing: list[float] = []
        judging: list[float] = []
        sizes: list[int] = []
        resident: list[float] = []
        total = args.sites * args.sensors * args.per_sensor
        left = total
        for batch in batches(pipeline, args.sites, args.sensors, args.per_sensor, start, args.varied_levels):
            if args.profile:
                profile.enable()
            t0 = time.process_time()
            pipeline.handle_batch(batch)
            left -= len(batch)
            pipeline.set_input(True, left)
            t1 = time.process_time()
            pipeline.tick()
            judging.append(time.process_time() - t1)
            storing.append(t1 - t0)
            sizes.append(len(batch))
            resident.append(resident_mb())
            if args.profile:
                profile.disable()
        # The input falls quiet: what the backlog's end left open is judged.
        for state in pipeline.sites.values():
            state.last_receipt -= QUIET_S + 1
        assert pipeline.input_since is not None
        pipeline.input_since -= QUIET_S + 1
        t0 = time.process_time()
        pipeline.tick()
        tail = time.process_time() - t0
        held = pipeline.counters.lock_held_s
        store.close()
    memory = " / ".join(f"{mb:.0f}" for mb in at_quarters(resident, sizes))
    print(
        f"{total} messages ({args.per_sensor} per meter, {args.sites} x {args.sensors} meters):"
        f" storing {sum(storing) / total * 1e6:.1f} us/msg by quarter {quarters(storing, sizes)},"
        f" judging {sum(judging) / total * 1e6:.1f} us/msg by quarter {quarters(judging, sizes)},"
        f" tail {tail / total * 1e6:.2f} us/msg;"
        f" counting the hours (within judging and tail) {sum(counting) / total * 1e6:.2f} us/msg"
        f" ({len(counting)} calls);"
        f" all {(sum(storing) + sum(judging) + tail) / total * 1e6:.1f} us/msg;"
        f" holding the store's write lock {held / total * 1e6:.1f} us/msg (wall);"
        f" resident memory after each quarter {memory} MB"
    )
    if args.profile:
        pstats.Stats(profile).sort_stats("cumulative").print_stats(30)


if __name__ == "__main__":
    main()
