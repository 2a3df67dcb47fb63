"""`minewatch influx ACTION --config FILE`: the InfluxDB outbox's rejected points.

    rejected    how many points InfluxDB refused for good, by the server's reason, with their ids
    requeue     send them again (all, or --id N ...): back into the outbox, behind what waits

A refused point is kept in the store (``outbox_influx_rejected``) with the server's answer.
Once what refused it is put right (a field type, a server that refused everything), `requeue`
moves it back; the daemon's forwarder sends it with the rest, running or at its next start.
A point carries its record's own time and tags, so one sent twice overwrites itself.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable

from monitor.commands.numbers import SQLITE_INTEGER_MAX, whole
from monitor.commands.store_file import existing_store, writable_store
from monitor.config import load_config
from monitor.errors import UsageError
from monitor.shown_text import one_line

ACTIONS = {
    "rejected": "how many points InfluxDB refused for good, by reason, with their ids",
    "requeue": "queue the refused points again for InfluxDB (all, or --id N ...)",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = f"the InfluxDB outbox's refused points: {', '.join(ACTIONS)}"
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", required=True, help="configuration TOML file (the store is storage.path)")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    actions.add_parser("rejected", parents=[common], help=ACTIONS["rejected"])
    requeue = actions.add_parser("requeue", parents=[common], help=ACTIONS["requeue"])
    requeue.add_argument(
        "--id",
        type=whole(1, SQLITE_INTEGER_MAX),  # an id past it ended in an OverflowError from sqlite3
        action="append",
        dest="ids",
        metavar="N",
        help="only this rejected point (repeatable)",
    )


# At most this many runs of ids are printed for a reason; requeue without --id takes them all.
MAX_RUNS = 20


def id_ranges(ids: Iterable[int]) -> str:
    """Ascending ids as runs ("3-7, 12"), the first MAX_RUNS of them and how many ids are left."""
    runs: list[list[int]] = []
    left = 0
    for item in ids:
        if runs and item == runs[-1][1] + 1:
            runs[-1][1] = item
        elif len(runs) < MAX_RUNS:
            runs.append([item, item])
        else:
            left += 1
    shown = ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)
    return f"{shown} and {left} more" if left else shown


def run(args: argparse.Namespace) -> int:
    # Reads and writes the store only: secrets (InfluxDB's token, the broker's password) are not needed.
    config = load_config(args.config, secrets="defer")
    from monitor.influx.outbox import Outbox
    from monitor.journal.store import Store

    path = config.storage.path
    # requeue writes the outbox; rejected only reads it
    (writable_store if args.action == "requeue" else existing_store)(path, args.config)
    if args.action == "requeue" and config.storage.influxdb is None:
        raise UsageError(f"{args.config} has no [storage.influxdb]: nothing would forward the points")
    Store(path).close()  # a file that is no store is refused, a store of an older version migrated
    outbox = Outbox.open(path)
    try:
        reasons = outbox.rejected_reasons()
        if args.action == "rejected":
            if not reasons:
                print("no point refused by InfluxDB")
            for reason, count in reasons:
                print(f"{count:>8}  {one_line(reason)}")
                print(f"{'':>8}  ids {id_ranges(outbox.rejected_ids(reason))}")
            return 0
        moved = outbox.requeue(args.ids)
        print(f"{moved} point(s) queued again for InfluxDB; {outbox.pending()} waiting in all")
        if args.ids is not None and moved < len(set(args.ids)):
            print(f"{len(set(args.ids)) - moved} of the ids given were no refused point")
            return 1
        return 0
    finally:
        outbox.close()
