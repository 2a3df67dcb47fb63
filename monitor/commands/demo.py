"""`minewatch demo`: simulated site, real broker, daemon, notices and evidence in one command."""

from __future__ import annotations

import argparse
from pathlib import Path

from monitor.commands.numbers import speed_factor, speed_text, whole
from monitor.times import parse_day


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out",
        default="demo-output",
        help="output folder, default ./demo-output; it must be new or empty, or one an earlier demo"
        " made (then with --force)",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace an earlier demo's output in --out (only a folder the demo made; nothing else)",
    )
    parser.add_argument(
        "--scenario",
        default="dovre-short",
        help="scenario name or TOML path (dovre-short: 2.5 h; dovre-day: a whole day, slower)",
    )
    parser.add_argument(
        "--date",
        metavar="YYYY-MM-DD",
        help="the past day to simulate (default: yesterday, site time, or the most recent day on"
        " which the scenario's lights are in the dark)",
    )
    parser.add_argument(
        "--speed",
        type=speed_factor,
        default="max",
        metavar="X",
        help="simulation speed factor, or 'max' (default)",
    )
    parser.add_argument("--seed", type=whole(), help="random seed (default: the scenario's)")
    parser.add_argument(
        "--serve",
        action="store_true",
        help="keep the web portal running after the demo, with the broker and a daemon behind it"
        " (events recorded in the portal are journaled), until Ctrl-C",
    )


def run(args: argparse.Namespace) -> int:
    from monitor.demo.runner import run_demo

    day = parse_day(args.date, "--date") if args.date else None
    return run_demo(
        Path(args.out),
        args.scenario,
        speed_text(args.speed),
        args.seed,
        day=day,
        force=args.force,
        serve=args.serve,
    )
