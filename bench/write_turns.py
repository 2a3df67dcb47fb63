"""Two writers on one store (not a test): how much of the write lock's time is lost between turns.

Two processes write the same store as the daemon's two workers do: each prepares a batch
outside the write lock (CPU, ``--outside-ms``), then holds the lock for a batch
(``--inside-ms`` of CPU and a row), and again, for ``--seconds``. The writers wait in
SQLite's busy handler or take turns (``Store.take_turns``), each way twice, alternated in one
run, so the machine's speed is the same for both.

    python bench/write_turns.py [--outside-ms 60] [--inside-ms 40] [--seconds 10]

Prints, for each of the four runs, the batches per second, the share of the run the lock was
held and the wait for it per batch; last, the ratio of the two ways' best rates.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from monitor.journal.store import Store  # noqa: E402


def spin(seconds: float) -> None:
    """CPU work, as preparing or storing a batch is (sleeping would leave the core to the other)."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def writer(
    path: str,
    turns: bool,
    outside_s: float,
    inside_s: float,
    until: float,
    out: multiprocessing.Queue,  # type: ignore[type-arg]
) -> None:
    store = Store(path)
    if turns:
        store.take_turns()
    batches, waited, held = 0, 0.0, 0.0
    while time.time() < until:
        spin(outside_s)
        asked = time.perf_counter()
        with store.batch():
            taken = time.perf_counter()
            store.set_meta(f"bench-{multiprocessing.current_process().name}", str(batches))
            spin(inside_s)
        held += time.perf_counter() - taken
        waited += taken - asked
        batches += 1
    store.close()
    out.put((batches, waited, held))


def run(turns: bool, args: argparse.Namespace) -> tuple[float, float, float]:
    """(batches/s, lock held share of the run, seconds waited per batch) of two writers."""
    with tempfile.TemporaryDirectory(prefix="minewatch-turns-") as tmp:
        path = str(Path(tmp) / "bench.db")
        Store(path).close()  # the layout, before the writers race to make it
        out: multiprocessing.Queue = multiprocessing.Queue()  # type: ignore[type-arg]
        until = time.time() + args.seconds
        procs = [
            multiprocessing.Process(
                target=writer,
                args=(path, turns, args.outside_ms / 1000, args.inside_ms / 1000, until, out),
                name=f"w{i}",
            )
            for i in (1, 2)
        ]
        started = time.perf_counter()
        for p in procs:
            p.start()
        results = [out.get() for _ in procs]
        for p in procs:
            p.join()
        elapsed = time.perf_counter() - started
    batches = sum(r[0] for r in results)
    return batches / elapsed, sum(r[2] for r in results) / elapsed, sum(r[1] for r in results) / batches


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--outside-ms", type=float, default=60.0, help="CPU per batch outside the lock")
    parser.add_argument("--inside-ms", type=float, default=40.0, help="CPU per batch holding the lock")
    parser.add_argument("--seconds", type=float, default=10.0, help="each way's run")
    args = parser.parse_args()
    for name, value in (("--outside-ms", args.outside_ms), ("--inside-ms", args.inside_ms)):
        if value < 0:
            parser.error(f"{name} must be 0 or more, not {value:g}")
    if args.seconds <= 0:
        parser.error(f"--seconds must be more than 0, not {args.seconds:g}")
    ways = {}
    for turns in (False, True, False, True):  # alternated: a drift of the machine shows
        rate, held, wait = run(turns, args)
        ways.setdefault(turns, []).append(rate)
        name = "taking turns" if turns else "busy handler"
        print(
            f"{name}: {rate:.1f} batches/s, lock held {held:.0%} of the run,"
            f" {wait * 1000:.1f} ms waited a batch"
        )
    best = {turns: max(rates) for turns, rates in ways.items()}
    print(f"write_turns: taking turns / busy handler {best[True] / best[False]:.2f} (best of two runs each)")


if __name__ == "__main__":
    main()
