"""Benchmark: export and verify an evidence bundle of a month of per-second data for 10 sensors.

    python bench/evidence.py                       # 30 days x 10 sensors = 25.9 million rows
    python bench/evidence.py --days 1 --sensors 2  # a quick look first

Fills a store the way the daemon would (the same canonical records, digests and
chain heads as monitor.journal.store.Store, anchors every 15 minutes), then runs
``minewatch evidence`` and ``minewatch verify`` in subprocesses so that the peak
RSS measured (VmHWM from /proc, of each process of the command's tree) is theirs alone.
The store is kept between runs with the same size (``--dir``); ``--refill`` rebuilds it.

Floors, measured in the same run on the same store and bundle (needs the ``sqlite3``,
``gzip``, ``unzip`` and ``sha256sum`` command-line tools; Debian: sqlite3, gzip, unzip, coreutils):
- export floor: the ``sqlite3`` shell writing the window's sound readings (the sound table's
  columns, no chain data) as CSV through ``gzip -1``; its output's size is the bundle's floor.
  It runs right before the export and again right after it, and the export's ratio is taken
  against the mean of the two: the machine's speed drifts over the minutes a month takes (the
  same floor measured 78-113 s on the shared VM), and a floor on one side only would carry that
  drift into the ratio. Both are printed, with the share of CPU the hypervisor took ("stolen")
  during each command;
- verify floor: ``unzip -p`` of the bundle through ``sha256sum``.

Last line: ``evidence: <rows> rows, export <s> s (<r> x floor), verify <s> s (<r> x floor),
bundle <GB> GB (<r> x floor), peak RSS <MB> MB``.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import cast

from cpu_shares import CpuShares  # bench/, the script's own folder

from monitor.journal.chain_kinds import SOUND_FIELDS
from monitor.journal.store import Store, digest_of, next_head, sound_record, to_us

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
                    "INSERT INTO anchors VALUES (?,?,?,?)",
                    (SITE, entry[1], entry[5], cast(int, entry[6]) + 1_000_000),
                )
            conn.execute("COMMIT")
            if hour % 24 == 23:
                rate = seq / (time.monotonic() - started)
                print(f"  filled day {(hour + 1) // 24}/{days}: {seq} rows, {rate:,.0f} rows/s", flush=True)
    mark_judged(store, days)
    store.set_meta("bench_size", f"{days}x{sensors}")
    store.close()
    return seq


def mark_judged(store: Store, days: int) -> None:
    """The filled span as the daemon's final look would have left it: one judged window (table
    judged, the reports' "judged"). Idempotent, for a store filled before the table existed."""
    with store.batch():
        store.record_judged(SITE, START, START + timedelta(days=days))


def _hwm_kib(pid: int) -> int:
    """VmHWM: the peak RSS of the process's own memory since its exec."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _tree(pid: int) -> list[int]:
    """The process and its descendants (the verifier's worker processes)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for task in Path(f"/proc/{p}/task").iterdir():
                todo.extend(int(c) for c in (task / "children").read_text().split())
        except OSError:
            pass
    return out


def measure(argv: list[str]) -> tuple[float, float, int]:
    """Run a command; (seconds, peak RSS in MB of its largest process, exit code).

    Sampled from /proc every 50 ms rather than taken from ru_maxrss: Linux carries a
    parent's peak RSS into its child's ru_maxrss across fork and exec, and this
    process is large after the fill. Each process of the command's tree (the verifier
    forks workers) is sampled; the figure is the largest one's peak, the sum of all
    peaks is printed beside it.
    """
    started = time.monotonic()
    proc = subprocess.Popen(argv)
    peaks: dict[int, int] = {}
    while proc.poll() is None:
        for pid in _tree(proc.pid):
            peaks[pid] = max(peaks.get(pid, 0), _hwm_kib(pid))
        time.sleep(0.05)
    seconds = time.monotonic() - started
    print(
        f"  {Path(argv[2] if len(argv) > 2 else argv[0]).name} {argv[3] if len(argv) > 3 else ''}:"
        f" {len(peaks)} process(es), peak RSS largest {max(peaks.values(), default=0) / 1024:.0f} MB,"
        f" sum of peaks {sum(peaks.values()) / 1024:.0f} MB",
        flush=True,
    )
    return seconds, max(peaks.values(), default=0) / 1024, proc.returncode


def _pipeline(first: list[str], second: list[str], out: Path) -> float:
    """Seconds for ``first | second > out``."""
    started = time.monotonic()
    with out.open("wb") as sink:
        a = subprocess.Popen(first, stdout=subprocess.PIPE)
        b = subprocess.Popen(second, stdin=a.stdout, stdout=sink)
        assert a.stdout is not None
        a.stdout.close()  # b holds the pipe now
        b.wait()
        a.wait()
    if a.returncode or b.returncode:
        raise SystemExit(f"floor failed: {first[0]} exit {a.returncode}, {second[0]} exit {b.returncode}")
    return time.monotonic() - started


def export_floor(store: Path, start_us: int, end_us: int, out: Path) -> tuple[float, int]:
    """(seconds, bytes) of the sqlite3 shell writing the window's sound rows as CSV through gzip -1."""
    with sqlite3.connect(f"{store.resolve().as_uri()}?mode=ro", uri=True) as conn:
        columns = [r[1] for r in conn.execute("PRAGMA table_info(sound)") if r[1] != "chain_seq"]
    conn.close()
    sql = (
        f"SELECT {', '.join(columns)} FROM sound WHERE site = '{SITE}'"
        f" AND ts_us >= {start_us} AND ts_us < {end_us};"
    )
    seconds = _pipeline(["sqlite3", "-readonly", "-csv", str(store), sql], ["gzip", "-1"], out)
    return seconds, out.stat().st_size


def verify_floor(bundle: Path, out: Path) -> float:
    """Seconds of ``unzip -p bundle | sha256sum``."""
    return _pipeline(["unzip", "-p", str(bundle)], ["sha256sum"], out)


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
    if args.days < 1 or args.sensors < 1:
        parser.error("--days and --sensors must be at least 1")
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
    missing = [tool for tool in ("sqlite3", "gzip", "unzip", "sha256sum") if shutil.which(tool) is None]
    if missing:
        print(
            f"the floors need {', '.join(missing)} (Debian: apt-get install sqlite3 unzip)", file=sys.stderr
        )
        return 2
    bundle = args.dir / f"bundle-{args.days}x{args.sensors}.zip"
    bundle.unlink(missing_ok=True)
    end = START + timedelta(days=args.days)
    floor_file = args.dir / f"floor-{args.days}x{args.sensors}.csv.gz"

    def floor(when: str) -> tuple[float, int]:
        shares = CpuShares()
        e_floor, floor_bytes = export_floor(store_path, to_us(START), to_us(end), floor_file)
        floor_file.unlink()
        print(
            f"export floor {when}: {e_floor:.1f} s, {floor_bytes / 1e9:.3f} GB (sqlite3 -csv | gzip -1),"
            f" stolen {shares.shares()[1]:.0%}",
            flush=True,
        )
        return e_floor, floor_bytes

    floor_before, floor_bytes = floor("before")
    cli = [sys.executable, "-m", "monitor.cli"]
    export_shares = CpuShares()
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
    size = bundle.stat().st_size
    export_stolen = export_shares.shares()[1]
    floor_after, _ = floor("after")
    e_floor = (floor_before + floor_after) / 2
    print(
        f"export: {seconds:.1f} s ({seconds / e_floor:.2f} x the floors' mean {e_floor:.1f} s;"
        f" {seconds / floor_before:.2f} x before, {seconds / floor_after:.2f} x after), stolen"
        f" {export_stolen:.0%}, bundle {size / 1e9:.3f} GB ({size / floor_bytes:.2f} x floor),"
        f" peak RSS {rss:.0f} MB",
        flush=True,
    )
    v_floor = verify_floor(bundle, args.dir / "floor.sha256")
    print(f"verify floor: {v_floor:.1f} s (unzip -p | sha256sum)", flush=True)
    v_seconds, v_rss, v_code = measure([*cli, "verify", str(bundle)])
    print(
        f"verify: exit {v_code} in {v_seconds:.1f} s ({v_seconds / v_floor:.2f} x floor),"
        f" peak RSS {v_rss:.0f} MB",
        flush=True,
    )
    if v_code != 0:
        print("verify failed", file=sys.stderr)
        return 1
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
    print(
        f"evidence: {rows} rows, export {seconds:.0f} s ({seconds / e_floor:.2f} x floor),"
        f" verify {v_seconds:.0f} s ({v_seconds / v_floor:.2f} x floor),"
        f" bundle {size / 1e9:.2f} GB ({size / floor_bytes:.2f} x floor), peak RSS {max(rss, v_rss):.0f} MB"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
