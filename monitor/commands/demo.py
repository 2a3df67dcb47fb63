"""`minewatch demo`: simulated site, real broker, daemon, notices and evidence in one command."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out", default="demo-output", help="output folder (replaced), default ./demo-output"
    )
    parser.add_argument(
        "--scenario",
        default="dovre-short",
        help="scenario name or TOML path (dovre-short: 2.5 h; dovre-day: a whole day, slower)",
    )
    parser.add_argument("--speed", default="max", help="simulation speed factor, or 'max' (default)")
    parser.add_argument("--seed", type=int, help="random seed (default: the scenario's)")


def run(args: argparse.Namespace) -> int:
    from monitor.demo import run_demo

    return run_demo(Path(args.out), args.scenario, args.speed, args.seed)
