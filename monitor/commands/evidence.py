"""``minewatch evidence --config FILE --site S --from T1 --to T2 --out bundle.zip``: an evidence bundle."""

from __future__ import annotations

import argparse
import sys
from zoneinfo import ZoneInfo

from monitor.commands.output_paths import format_named, new_file
from monitor.commands.site_option import add_site_option, chosen_site
from monitor.commands.store_file import existing_store
from monitor.config import load_config
from monitor.errors import MinewatchError, UsageError
from monitor.times import parse_time


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, help="configuration TOML file")
    add_site_option(parser)
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
    parser.add_argument("--force", action="store_true", help="replace the --out file if it exists")
    parser.add_argument("--no-plots", action="store_true", help="leave out the PNG plots")


def run(args: argparse.Namespace) -> int:
    from monitor.evidence import export_bundle
    from monitor.evidence.progress import Progress

    # Reads the store (and InfluxDB for pruned data); never needs the broker's password.
    config = load_config(args.config, secrets="defer")
    site = chosen_site(config, args.site)
    zone = ZoneInfo(site.timezone)
    start, end = parse_time(args.start, zone, "--from"), parse_time(args.end, zone, "--to")
    if not start < end:
        raise UsageError(f"--from {args.start} is not before --to {args.end}")
    for sensor in args.sensor:
        if site.sensor(sensor) is None:
            known = ", ".join(s.id for s in site.sensors)
            raise UsageError(f"site {site.id!r} has no sensor {sensor!r}; it has: {known}")
    format_named(args.out, {".zip": "zip"})  # a bundle is a zip, whatever the name says
    out = new_file(args.out, force=args.force)
    existing_store(config.storage.path, args.config)
    try:
        summary = export_bundle(
            config,
            site.id,
            start,
            end,
            out,
            sensors=args.sensor,
            plots=not args.no_plots,
            overwrite=args.force,
            progress=Progress.on_terminal("evidence"),
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
