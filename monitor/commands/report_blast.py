"""``minewatch report-blast --config F --site S --blast ID --out FILE.pdf|FILE.html``: one blast's report.

The report a seismograph's software prints for an event, and more (monitor/notify/blast_report.py):
each axis's waveform, the compliance plot on the profile's limit curve, airblast, the clock findings
(window, sunset, notice and its recipients), the blasting-log fields and the chain reference. It
reads the store only; the format follows the --out file's suffix.
"""

from __future__ import annotations

import argparse

from monitor.commands.output_paths import format_named, new_file, write_whole
from monitor.commands.site_option import add_site_option, chosen_site
from monitor.commands.store_file import existing_store
from monitor.config import load_config
from monitor.errors import UsageError

FORMATS = {".pdf": "pdf", ".html": "html", ".htm": "html"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, help="configuration TOML file")
    add_site_option(parser)
    parser.add_argument("--blast", required=True, metavar="ID", help="the blast id (as recorded)")
    parser.add_argument(
        "--sensor", metavar="ID", help="the seismograph, when more than one recorded the blast"
    )
    parser.add_argument(
        "--out",
        required=True,
        metavar="FILE.pdf|FILE.html",
        help="the report to write; its suffix chooses PDF or HTML (never replaced without --force)",
    )
    parser.add_argument("--force", action="store_true", help="replace the --out file if it exists")


def run(args: argparse.Namespace) -> int:
    from monitor.journal.store import Store
    from monitor.notify.blast_report import blast_report_bytes
    from rules.profile import load_profile

    fmt = format_named(args.out, FORMATS)
    config = load_config(args.config, secrets="defer")  # reads the store only: no broker password
    site = chosen_site(config, args.site)
    chosen = site.sensor(args.sensor) if args.sensor is not None else None
    if args.sensor is not None and (chosen is None or chosen.kind.value != "seismograph"):
        known = ", ".join(s.id for s in site.sensors if s.kind.value == "seismograph") or "none"
        what = (
            f"site {site.id!r} has no sensor {args.sensor!r}"
            if chosen is None
            else f"{args.sensor!r} is a {chosen.kind.value} sensor, not a seismograph"
        )
        raise UsageError(f"--sensor: {what}; its seismographs: {known}")
    out = new_file(args.out, force=args.force)
    existing_store(config.storage.path, args.config)
    store = Store(config.storage.path)
    try:
        profile = load_profile(site.profile, site.agreement)
        try:
            body = blast_report_bytes(store, site, profile, args.blast, fmt, args.sensor)
        except LookupError as exc:
            raise UsageError(str(exc).strip("'\"")) from None
    finally:
        store.close()
    write_whole(out, body)  # a file replaced with --force: whole, or left as it was
    print(f"Wrote {out}: blast {args.blast} at site {site.id} ({fmt.upper()})")
    return 0
