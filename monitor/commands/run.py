"""`minewatch run --config FILE`: the daemon."""

from __future__ import annotations

import argparse
import logging
import sys
import threading

from monitor.config import load_config
from monitor.daemon.stopping import stop_on_signals, stopped_while_starting
from monitor.errors import ConfigError, StoreError

EXIT_LOGIN_REFUSED = 3  # the broker refused broker.username/password (2: a bad configuration)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, help="configuration TOML file")
    parser.add_argument(
        "--log-level", default="INFO", type=str.upper, choices=("DEBUG", "INFO", "WARNING", "ERROR")
    )
    parser.add_argument(
        "--partition",
        metavar="I/N",
        help="run as worker I of N, owning every Nth site (started so by the daemon when daemon.workers > 1)",
    )


def run(args: argparse.Namespace) -> int:
    # A worker's lines name it: the workers and their supervisor write to one stream.
    who = f"worker {args.partition} " if args.partition else ""
    logging.basicConfig(level=args.log_level, format=f"%(asctime)s %(levelname)s {who}%(name)s: %(message)s")
    # From here SIGTERM and SIGINT stop the daemon, while it starts as while it runs: each stage
    # below ends at its next safe point (stopped_while_starting), the run loop as it always did.
    stop = threading.Event()
    stop_on_signals(stop)
    try:
        config = load_config(args.config)
    except ConfigError as exc:  # bad config exits before any connection is made
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        return 2
    from monitor.claims import claim_sites
    from monitor.commands.store_file import daemon_refusal
    from monitor.journal.store import Store
    from monitor.wire.link_state import LoginRefused

    # A store this user can read and not write would take the daemon into the outage loop
    # (kept for a disk that fills up while it runs) for good: a mistake of the set-up, said
    # as check-config says it, before a file is made or the broker connected. Every process
    # that writes it checks: the daemon, a supervisor, and a worker, whether its supervisor
    # started it or a person did (`--partition I/N` by hand, as another user).
    if (refused := daemon_refusal(config.storage.path)) is not None:
        raise StoreError(refused)
    if stop.is_set():  # before a file is made or a site claimed
        return stopped_while_starting()
    # The process that owns the sites claims them for its run: this one, or for the workers
    # of a supervisor (started with --partition), the supervisor. SiteTaken is one line, exit 2.
    claims = None
    if not args.partition:
        Store(config.storage.path).close()  # a path that is no store: refused before a claim file is made
        claims = claim_sites(config.storage.path, [s.id for s in config.owned_sites])
    try:
        if config.daemon.workers > 1 and not args.partition:
            # The supervisor: no pipeline (numpy, scipy, paho) loaded in a process that runs none.
            from monitor.daemon.workers import supervise

            return supervise(config, args.config, args.log_level, stop)
        from monitor.daemon.pipeline import run as run_pipeline

        if args.partition:
            from monitor.daemon.workers import parse_partition, watch_parent

            partition = parse_partition(args.partition, config)
            watch_parent(stop)
            return run_pipeline(partition.apply(config), stop=stop, partition=partition)
        return run_pipeline(config, stop=stop)
    except LoginRefused as exc:  # not retryable: one line, and a status systemd can tell apart
        print(f"minewatch run: {exc}", file=sys.stderr)
        return EXIT_LOGIN_REFUSED
    finally:
        if claims is not None:
            claims.release()
