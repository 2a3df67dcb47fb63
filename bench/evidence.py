"""Benchmark: export (and verify) an evidence bundle of a month of per-second data for 10 sensors.

    python bench/evidence.py                       # 30 days x 10 sensors = 25.9 million rows
    python bench/evidence.py --days 1 --sensors 2  # a quick look first

Fills a store the way the daemon would (the same canonical records, digests and
chain heads as monitor.store.Store, anchors every 15 minutes), then runs
``minewatch evidence`` and ``minewatch verify`` in subprocesses so that the peak
RSS measured (VmHWM from /proc) is theirs alone. The store is kept between runs with the
same size (``--dir``); ``--refill`` rebuilds it.

Last line: ``evidence: <rows> rows in <s> s, peak RSS <MB> MB``.
"""

from __future__ import annotations

import argparse
import multiprocessing
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

from monitor.chain import SOUND_FIELDS
from monitor.store import Store, digest_of, next_head, sound_record, to_us

SITE = "quarry"
START = datetime(2024, 3, 1, tzinfo=UTC)  # crosses the US DST change on 2024-03-10
ANCHOR_EVERY_S = 900
CHUNK_S = 3600  # one transaction per simulated hour

CONFIG = """
[broker]
url = "mqtt://127.0.0.1:1883"
[storage]
path = "{store}"
[[sites]]
id = "{site}"
name = "Benchmark quarry"
timezone = "America/Chicago"
latitude = 45.27
longitude = -91.62
profile = "dovre"
"""
SENSOR = """
[[sites.sensors]]
id = "{id}"
kind = "sound"
"""


def _hour(args: tuple[int, int]) -> list[tuple[object, ...]]:
    """Rows of one hour, in the order the daemon would chain them, each with its record's digest."""
    hour, sensors = args
    rng = random.Random(hour)
    rows: list[tuple[object, ...]] = []
    base_us = to_us(START) + hour * CHUNK_S * 1_000_000
    for second in range(CHUNK_S):
        ts_us = base_us + second * 1_000_000
        for s in range(sensors):
            laeq = 55.0 + 20.0 * rng.random()
            row = {
                "site": SITE,
                "sensor": f"n{s + 1:02d}",
                "ts_us": ts_us,
                "duration_s": 1.0,
                "LAeq": laeq,
                "LAFmax": laeq + 3.0 * rng.random(),
                "LASmax": laeq + 1.5 * rng.random(),
                "LAFmin": None,
                "LCeq": None,
                "LCpeak": laeq + 15.0 + 5.0 * rng.random(),
                "LZpeak": None,
                "LZeq": None,
                "source": "levels",
            }
            rows.append((*row.values(), digest_of(sound_record(row))))
    return rows


def fill(path: Path, days: int, sensors: int) -> int:
    store = Store(path, synchronous="OFF")
    conn = store.conn
    conn.execute("PRAGMA cache_size=-262144")
    seq = 0
    hours = days * 24
    started = time.monotonic()
    columns = ("site", "sensor", "ts_us", "duration_s", *SOUND_FIELDS, "source")
    insert_sound = (
        f"INSERT INTO sound ({', '.join(columns)}, late, received_us, chain_seq)"
        f" VALUES ({', '.join('?' * (len(columns) + 3))})"
    )
    # Digests on the other core while this one chains and inserts.
    with multiprocessing.get_context("fork").Pool(1) as pool:
        chunks: Iterator[list[tuple[object, ...]]] = pool.imap(_hour, ((h, sensors) for h in range(hours)))
        head = "0" * 64
        for hour, rows in enumerate(chunks):
            sound, chain = [], []
            for row in rows:
                seq += 1
                digest = row[-1]
                head = next_head(head, digest)  # type: ignore[arg-type]
                ts_us = row[2]
                sound.append((*row[:-1], 0, ts_us, seq))
                chain.append((SITE, seq, "sound", f"{row[1]}|{ts_us}", digest, head, ts_us))
            conn.execute("BEGIN")
            conn.executemany(insert_sound, sound)
            conn.executemany(
                "INSERT INTO chain (site, seq, kind, key, digest, head, recorded_us) VALUES (?,?,?,?,?,?,?)",
                chain,
            )
            # anchors every 15 minutes of simulated time: here, every quarter of the hour's rows
            quarter = len(chain) // (CHUNK_S // ANCHOR_EVERY_S)
            for q in range(1, CHUNK_S // ANCHOR_EVERY_S + 1):
                entry = chain[q * quarter - 1]
                conn.execute(
                    "INSERT INTO anchors VALUES (?,?,?,?)", (SITE, entry[1], entry[5], entry[6] + 1_000_000)
                )
            conn.execute("COMMIT")
            if hour % 24 == 23:
                rate = seq / (time.monotonic() - started)
                print(f"  filled day {(hour + 1) // 24}/{days}: {seq} rows, {rate:,.0f} rows/s", flush=True)
    store.set_meta("bench_size", f"{days}x{sensors}")
    store.close()
    return seq


def _hwm_kib(pid: int) -> int:
    """VmHWM: the peak RSS of the process's own memory since its exec."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def measure(argv: list[str]) -> tuple[float, float, int]:
    """Run a command; (seconds, peak RSS in MB, exit code) of that process alone.

    Sampled from /proc every 50 ms rather than taken from ru_maxrss: Linux carries a
    parent's peak RSS into its child's ru_maxrss across fork and exec, and this
    process is large after the fill.
    """
    started = time.monotonic()
    proc = subprocess.Popen(argv)
    peak = 0
    while proc.poll() is None:
        peak = max(peak, _hwm_kib(proc.pid))
        time.sleep(0.05)
    return time.monotonic() - started, peak / 1024, proc.returncode


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
    parser.add_argument("--no-verify", action="store_true")
    args = parser.parse_args()
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
        filled = fill(store_path, args.days, args.sensors)
        assert filled == rows
        print(
            f"fill: {rows} rows in {time.monotonic() - started:.0f} s, "
            f"{store_path.stat().st_size / 1e9:.1f} GB",
            flush=True,
        )
    bundle = args.dir / f"bundle-{args.days}x{args.sensors}.zip"
    end = START + timedelta(days=args.days)
    cli = [sys.executable, "-m", "monitor.cli"]
    seconds, rss, code = measure(
        [
            *cli,
            "evidence",
            "--config",
            str(config_path),
            "--site",
            SITE,
            "--from",
            START.isoformat(),
            "--to",
            end.isoformat(),
            "--out",
            str(bundle),
        ]
    )
    if code != 0:
        print(f"export failed with exit code {code}", file=sys.stderr)
        return 1
    print(f"bundle: {bundle.stat().st_size / 1e9:.2f} GB", flush=True)
    if not args.no_verify:
        v_seconds, v_rss, v_code = measure([*cli, "verify", str(bundle)])
        print(f"verify: exit {v_code} in {v_seconds:.0f} s, peak RSS {v_rss:.0f} MB", flush=True)
    print(f"evidence: {rows} rows in {seconds:.0f} s, peak RSS {rss:.0f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
