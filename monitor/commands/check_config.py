"""`minewatch check-config FILE`: validate a configuration, print every problem."""

from __future__ import annotations

import argparse
import sys

from monitor.config import load_config
from monitor.errors import ConfigError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="configuration TOML file")


def run(args: argparse.Namespace) -> int:
    try:
        config = load_config(args.file)
    except ConfigError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        print(f"{args.file}: {len(exc.problems)} problem(s)", file=sys.stderr)
        return 2
    sensors = sum(len(s.sensors) for s in config.sites)
    influx = f"InfluxDB v{config.storage.influxdb.version}" if config.storage.influxdb else "no InfluxDB"
    print(
        f"{args.file}: OK ({len(config.sites)} site(s), {sensors} sensor(s), "
        f"store {config.storage.path}, {influx})"
    )
    return 0
