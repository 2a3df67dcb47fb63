"""`minewatch run --config FILE`: the daemon."""

from __future__ import annotations

import argparse
import logging
import sys

from monitor.config import load_config
from monitor.errors import ConfigError


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
    from monitor.pipeline import run as run_pipeline

    return run_pipeline(config)
