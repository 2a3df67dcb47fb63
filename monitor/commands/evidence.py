"""``minewatch evidence --config FILE --site S --from T1 --to T2 --out bundle.zip``: an evidence bundle."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from zoneinfo import ZoneInfo

from monitor.config import load_config
from monitor.errors import ConfigError, MinewatchError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, help="configuration TOML file")
    parser.add_argument("--site", required=True, help="site id")
    parser.add_argument(
        "--from",
        dest="start",
        required=True,
        metavar="T1",
        help="window start: 2024-05-01 (site-local midnight), 2024-05-01T06:00 (site time)"
        " or 2024-05-01T11:00:00Z",
    )
    parser.add_argument(
        "--to", dest="end", required=True, metavar="T2", help="window end (exclusive), same forms"
    )
    parser.add_argument(
        "--sensor",
        action="append",
        default=[],
        metavar="ID",
        help="only this sensor's per-second data and plots (repeatable; default: all)",
    )
    parser.add_argument(
        "--out",
        required=True,
        metavar="bundle.zip",
        help="the zip file to write (never replaced without --force)",
    )
    parser.add_argument("--force", action="store_true", help="replace --out if it exists")
    parser.add_argument("--no-plots", action="store_true", help="leave out the PNG plots")


def run(args: argparse.Namespace) -> int:
    from monitor.evidence import EvidenceError, export_bundle, parse_when

    problem = _out_problem(Path(args.out), args.force)
    if problem:
        print(f"minewatch evidence: {problem}", file=sys.stderr)
        return 2
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        print("\n".join(exc.problems), file=sys.stderr)
        return 2
    site = config.site(args.site)
    if site is None:
        known = ", ".join(s.id for s in config.sites)
        print(
            f"minewatch evidence: unknown site {args.site!r}; the configuration has: {known}", file=sys.stderr
        )
        return 2
    zone = ZoneInfo(site.timezone)
    try:
        start, end = parse_when(args.start, zone), parse_when(args.end, zone)
        if site and not start < end:
            raise EvidenceError(f"--from {args.start} is not before --to {args.end}")
        for sensor in args.sensor:
            if site.sensor(sensor) is None:
                known = ", ".join(s.id for s in site.sensors)
                raise EvidenceError(f"site {site.id!r} has no sensor {sensor!r}; it has: {known}")
    except EvidenceError as exc:
        print(f"minewatch evidence: {exc}", file=sys.stderr)
        return 2
    try:
        summary = export_bundle(
            config,
            site.id,
            start,
            end,
            args.out,
            sensors=args.sensor,
            plots=not args.no_plots,
            overwrite=args.force,
        )
    except MinewatchError as exc:
        print(f"minewatch evidence: {exc}", file=sys.stderr)
        return 1
    rows = sum(n for name, n in summary.rows.items() if name.startswith(("data/", "records/")))
    if not rows and not summary.chain_entries:
        print(f"Wrote {summary.path}: EMPTY, no records of site {site.id} in that window")
        return 0
    print(
        f"Wrote {summary.path}: {summary.files} files, {rows} rows, chain seq {summary.first_seq} to "
        f"{summary.last_seq} ({summary.chain_entries} entries),"
        f" {summary.anchors_in_segment} anchor(s) in the segment"
    )
    for name, n in summary.influx_rows.items():
        print(f"  {name}: {n} rows read from InfluxDB (pruned locally; outside the chain)")
    for warning in summary.warnings:
        print(f"  warning: {warning}")
    return 0


def _out_problem(out: Path, force: bool) -> str:
    """What stops the bundle from being written to ``out`` (a user's mistake), or ""."""
    if out.is_dir():
        return f"--out {out} is a directory: give the path of the zip file to write"
    if out.exists() and not force:
        return f"--out {out} exists: choose another name, or add --force to replace it"
    folder = out.parent if str(out.parent) else Path(".")
    if not folder.is_dir():
        return f"--out {out}: the folder {folder} does not exist; create it or choose another path"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"--out {out}: the folder {folder} is not writable; choose another path"
    return ""
