"""The first week or month view's hourly levels (benchmark, not a test): from the hourly
histograms the store keeps (sound_hours) against counting every second, and what keeping them
costs the store's writes.

    python bench/period_hours.py [--sensors 10] [--days 7]

1. ``--days`` local days of per-second levels for ``--sensors`` meters, written and chained
   with the store's own append_sounds (bench/portal.py's fill_day), timed, then their hours
   counted into sound_hours as the daemon counts them (``Store.keep_sound_hours``), timed; then
   the same seconds into a store without the sound_hours triggers (what the triggers cost the
   writes: only seconds stored into hours already counted fire them).
2. ``queries.hourly_levels_of_site`` (kept histograms) and ``queries.hourly_levels_from_seconds``
   (every second: what the first week/month view did before) over the filled days, each timed
   on a cold connection, and their rows compared.

Last line: ``hours: <n> days x <m> meters, from seconds <ms> ms, from sound_hours <ms> ms,
fill <s> s + counting the hours <s> s (without the triggers <s> s)``
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from workdir import KEEP_HELP, scratch_folder  # noqa: E402  (bench/, the script's own folder)

from bench.portal import TZ, fill_days  # noqa: E402
from monitor.journal import queries  # noqa: E402
from monitor.journal.store import Store  # noqa: E402

DROP_TRIGGERS = (
    "DROP TRIGGER sound_hours_insert; DROP TRIGGER sound_hours_delete; DROP TRIGGER sound_hours_update;"
)


def timed_fill(db: Path, last: datetime, days: int, sensors: int, triggers: bool) -> float:
    if not triggers:
        store = Store(db)
        store.conn.executescript(DROP_TRIGGERS)
        store.close()
    t = time.perf_counter()
    fill_days(db, last.date(), days, sensors, 86400, count_hours=False)  # counted apart: timed_keep
    return time.perf_counter() - t


def timed_keep(db: Path, end_us: int) -> float:
    """Every hour before ``end_us`` counted into sound_hours, as the daemon counts them."""
    store = Store(db)
    t = time.perf_counter()
    with store.batch():
        store.keep_sound_hours("bench", end_us // queries.HOUR_US)
    seconds = time.perf_counter() - t
    store.close()
    return seconds


def timed_query(db: Path, name: str, start_us: int, end_us: int) -> tuple[float, list[tuple[Any, ...]]]:
    conn = sqlite3.connect(db)  # a cold connection: no page cache of its own
    t = time.perf_counter()
    rows = [tuple(r) for r in getattr(queries, name)(conn, "bench", start_us, end_us)]
    ms = (time.perf_counter() - t) * 1000
    conn.close()
    return ms, rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sensors", type=int, default=10)
    parser.add_argument("--days", type=int, default=7)
    parser.add_argument("--keep", action="store_true", help=KEEP_HELP)
    args = parser.parse_args()
    with scratch_folder("minewatch-bench-hours-", args.keep) as work:
        return bench_in(work, args)


def bench_in(work: Path, args: argparse.Namespace) -> int:
    """The benchmark with its files in ``work``."""
    last = datetime.now(ZoneInfo(TZ)) - timedelta(days=2)
    fill = timed_fill(work / "kept.db", last, args.days, args.sensors, True)
    bare = timed_fill(work / "bare.db", last, args.days, args.sensors, False)
    first = datetime.combine(last.date() - timedelta(days=args.days - 1), datetime.min.time(), ZoneInfo(TZ))
    start_us = int(first.astimezone(UTC).timestamp() * 1e6)
    end_us = start_us + args.days * 86_400_000_000
    keep = timed_keep(work / "kept.db", end_us)
    seconds_ms, counted = timed_query(work / "kept.db", "hourly_levels_from_seconds", start_us, end_us)
    kept_ms, kept = timed_query(work / "kept.db", "hourly_levels_of_site", start_us, end_us)
    same = [r[:3] + r[4:] for r in counted] == [r[:3] + r[4:] for r in kept] and all(
        abs(float(a[3]) - float(b[3])) < 1e-9 for a, b in zip(counted, kept, strict=True)
    )
    print(f"rows: {len(kept)} hours, equal to the seconds' count: {same}")
    print(
        f"hours: {args.days} days x {args.sensors} meters, from seconds {seconds_ms:.0f} ms,"
        f" from sound_hours {kept_ms:.0f} ms, fill {fill:.0f} s + counting the hours {keep:.1f} s"
        f" (without the triggers {bare:.0f} s)"
    )
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
