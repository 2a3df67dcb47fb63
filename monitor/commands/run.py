"""`minewatch run --config FILE`: the daemon."""

from __future__ import annotations

import argparse
import logging
import sys

from monitor.config import load_config
from monitor.errors import ConfigError

EXIT_LOGIN_REFUSED = 3  # the broker refused broker.username/password (2: a bad configuration)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, help="configuration TOML file")
    parser.add_argument("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"))


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = load_config(args.config)
    except ConfigError as exc:  # bad config exits before any connection is made
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        return 2
    from monitor.linkstate import LoginRefused
    from monitor.pipeline import run as run_pipeline

    try:
        return run_pipeline(config)
    except LoginRefused as exc:  # not retryable: one line, and a status systemd can tell apart
        print(f"minewatch run: {exc}", file=sys.stderr)
        return EXIT_LOGIN_REFUSED
