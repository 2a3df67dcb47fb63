"""Benchmark: a month's compliance report for 10 sensors of per-second data, against the floor.

    python bench/report.py                         # 30 days x 10 sensors = 25.9 million rows
    python bench/report.py --days 3 --sensors 10   # smaller, when the fill would take too long

The store is bench/evidence.py's (the same fill, kept in ``--dir`` between runs of the same
size), with one judged window over the filled span as the daemon's final look would leave it
(``mark_judged``: the report counts judged seconds over the judging gaps). ``minewatch report``
runs in a subprocess (its peak RSS sampled from /proc, as
bench/evidence.py does) over local days covering every row; the floor, measured in the same
run on the same store, is the ``sqlite3`` command-line tool computing each sensor's daily
energy-average LAeq over the same rows (``10*log10(avg(pow(10, LAeq/10)))`` grouped by
sensor and day). Targets (issue 28): within 2 x the floor, peak RSS under 300 MB.

Last line: ``report: <rows> rows, <s> s (<r> x floor <s> s), peak RSS <MB> MB``.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.evidence import CONFIG, SENSOR, SITE, START, fill, mark_judged, measure  # noqa: E402
from monitor.journal.store import Store  # noqa: E402

FLOOR_SQL = (
    "SELECT sensor, ts_us / 86400000000 AS d, 10 * log10(avg(pow(10, LAeq / 10))) FROM sound"
    " GROUP BY sensor, d;"
)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--sensors", type=int, default=10)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/minewatch-bench/evidence"))
    parser.add_argument(
        "--refill", action="store_true", help="rebuild the store even if one of this size exists"
    )
    args = parser.parse_args()
    if shutil.which("sqlite3") is None:
        print(
            "the floor needs the sqlite3 command-line tool (Debian: apt-get install sqlite3)", file=sys.stderr
        )
        return 2
    args.dir.mkdir(parents=True, exist_ok=True)
    store_path = args.dir / f"store-{args.days}x{args.sensors}.db"
    config_path = args.dir / f"minewatch-{args.days}x{args.sensors}.toml"
    config_path.write_text(
        CONFIG.format(store=store_path, site=SITE)
        + "".join(SENSOR.format(id=f"n{s + 1:02d}") for s in range(args.sensors))
    )
    rows = args.days * 86400 * args.sensors
    if args.refill or not store_path.exists():
        for suffix in ("", "-wal", "-shm"):
            Path(f"{store_path}{suffix}").unlink(missing_ok=True)
        print(f"filling {store_path} with {rows:,} rows ...", flush=True)
        started = time.monotonic()
        assert fill(store_path, args.days, args.sensors) == rows
        print(f"fill: {rows} rows in {time.monotonic() - started:.0f} s", flush=True)
    store = Store(store_path)  # this version's tables (a store filled by an older one gains them)
    mark_judged(store, args.days)
    store.close()
    # Warm the page cache for both, so neither pays for the other's first read.
    subprocess.run(
        ["sqlite3", str(store_path), "SELECT COUNT(*) FROM sound;"], check=True, capture_output=True
    )
    started = time.monotonic()
    subprocess.run(["sqlite3", str(store_path), FLOOR_SQL], check=True, capture_output=True)
    floor = time.monotonic() - started
    print(f"floor: {floor:.1f} s (sqlite3: daily energy-average LAeq per sensor)", flush=True)
    out = args.dir / "reports"
    out.mkdir(exist_ok=True)
    # Local days (America/Chicago) covering every row: from the day before START's UTC midnight.
    first = (START - timedelta(days=1)).date()
    last = (START + timedelta(days=args.days)).date() - timedelta(days=1)
    seconds, rss, code = measure(
        [
            sys.executable,
            "-m",
            "monitor.cli",
            "report",
            "--config",
            str(config_path),
            "--site",
            SITE,
            "--from",
            first.isoformat(),
            "--to",
            last.isoformat(),
            "--out",
            str(out),
            "--force",
        ]
    )
    if code != 0:
        print(f"report failed with exit code {code}", file=sys.stderr)
        return 1
    print(
        f"report: {rows} rows, {seconds:.1f} s ({seconds / floor:.2f} x floor {floor:.1f} s),"
        f" peak RSS {rss:.0f} MB"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
