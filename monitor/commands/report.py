"""``minewatch report --config F --site S --month 2026-11``: a site's compliance report, PDF and CSV.

The period: ``--month YYYY-MM``, ``--day YYYY-MM-DD``, ``--from D1 --to D2`` (days, both
included), ``--last-month`` or ``--yesterday`` (site time; what the shipped systemd timers
run). ``--out DIR`` (default: the current folder) receives ``{site}-{period}.pdf`` and
``.csv``, and the report is recorded in the chain (its files' SHA-256, the head it was computed
from: ``minewatch verify --config F file`` checks them). ``--send`` also sends it to the Town
through the configured delivery channels, recorded with its recipients (monitor/reports/sending.py).
"""

from __future__ import annotations

import argparse
import sqlite3
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from monitor.commands.output_paths import new_file, write_whole
from monitor.commands.site_option import add_site_option, chosen_site
from monitor.commands.store_file import writable_store
from monitor.config import load_config
from monitor.errors import UsageError
from monitor.times import FIRST_DAY, LAST_DAY, parse_day


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, help="configuration TOML file")
    add_site_option(parser)
    when = parser.add_mutually_exclusive_group(required=True)
    when.add_argument("--from", dest="start", metavar="D1", help="first day (site time), with --to")
    when.add_argument("--month", metavar="YYYY-MM", help="a calendar month, e.g. 2026-11")
    when.add_argument("--day", metavar="YYYY-MM-DD", help="one day")
    when.add_argument("--last-month", action="store_true", help="the month before today's (site time)")
    when.add_argument("--yesterday", action="store_true", help="the day before today (site time)")
    parser.add_argument("--to", dest="end", metavar="D2", help="last day, included (with --from)")
    parser.add_argument(
        "--out", default=".", metavar="DIR", help="folder for the PDF and CSV (default: here)"
    )
    parser.add_argument("--force", action="store_true", help="replace report files of the same name")
    parser.add_argument(
        "--send",
        action="store_true",
        help="also send it to the Town's recipients (e-mail, webhook, an MQTT topic of their own);"
        " every report made is recorded in the chain, sent or not",
    )


def _month(text: str) -> tuple[int, int]:
    try:
        year, month = (int(part) for part in text.strip().split("-"))
        first = date(year, month, 1)
    except ValueError:
        raise UsageError(f"--month: expected a month like 2026-11 (YYYY-MM), got {text!r}") from None
    if not FIRST_DAY <= first <= LAST_DAY.replace(day=1):
        raise UsageError(
            f"--month: must be a month from {FIRST_DAY:%Y-%m} to {LAST_DAY:%Y-%m}, got {text.strip()!r}"
        )
    return year, month


def run(args: argparse.Namespace) -> int:
    from monitor.reports.content import month_period, not_begun, period_of

    config = load_config(args.config, secrets="defer")
    site = chosen_site(config, args.site)
    zone = ZoneInfo(site.timezone)
    if args.send:
        from monitor.reports.sending import town_recipients

        if not town_recipients(config, site.id):  # before anything is written or recorded as sent
            raise UsageError(
                f"--send: no Town recipient of {site.id} has a channel that carries a report (e-mail,"
                " webhook, or an MQTT topic of its own): add one to [[recipients]], or leave out --send"
            )
    folder = Path(args.out)
    if not folder.is_dir():
        reason = "is not a folder" if folder.exists() else "does not exist; create it or choose another"
        raise UsageError(f"--out {args.out}: {reason} (--out names the folder for the PDF and CSV)")
    today = datetime.now(UTC).astimezone(zone).date()
    if args.month:
        period = month_period(*_month(args.month), zone)
    elif args.day:
        day = parse_day(args.day, "--day")
        period = period_of(day, day, zone, day.isoformat())
    elif args.last_month:
        last = today.replace(day=1) - timedelta(days=1)
        period = month_period(last.year, last.month, zone)
    elif args.yesterday:
        day = today - timedelta(days=1)
        period = period_of(day, day, zone, day.isoformat())
    else:
        first = parse_day(args.start, "--from")
        if not args.end:
            raise UsageError("--from needs --to (the last day, included)")
        last_day = parse_day(args.end, "--to")
        if last_day < first:
            raise UsageError(f"--to {args.end} is before --from {args.start}")
        if (last_day - first).days > 366:
            raise UsageError(f"--to {args.end}: a report covers at most 367 days")
        period = period_of(first, last_day, zone, f"{first.isoformat()}_{last_day.isoformat()}")
    if args.end and not args.start:
        raise UsageError("--to goes with --from")
    name = f"{site.id}-{period.label}"
    from monitor.journal.report_files import csv_beside

    pdf_path = new_file(str(folder / f"{name}.pdf"), force=args.force)
    csv_path = new_file(csv_beside(str(folder / f"{name}.pdf")), force=args.force)  # where the delivery looks
    store_path = writable_store(config.storage.path, args.config)  # a report is recorded in its chain
    from monitor.reports.content import build_report
    from monitor.reports.formats import render_csv, render_pdf
    from rules.profile import load_profile

    profile = load_profile(site.profile, site.agreement)
    now = datetime.now(UTC)
    from monitor.journal.store import Store

    Store(store_path).close()  # the tables of this version (complaints, reports) exist, if not yet
    conn = sqlite3.connect(store_path, timeout=30)
    conn.row_factory = sqlite3.Row
    try:
        if ahead := not_begun(period, now, site.id, zone, conn):  # before a file is written
            raise UsageError(ahead)
        report = build_report(conn, site, profile, period, now)
    finally:
        conn.close()
    pdf, csv = render_pdf(report), render_csv(report)
    for path, body in ((pdf_path, pdf), (csv_path, csv)):
        write_whole(path, body)
    print(
        f"Wrote {pdf_path} and {csv_path}: {site.id} {period.first_day} to {period.last_day}"
        f" ({site.timezone}),"
        f" computed from chain entry {report.chain_seq} (head {report.chain_head[:16]}...)"
    )
    if not args.send:
        from monitor.reports.sending import record_made

        store = Store(store_path)
        try:
            rid = record_made(store, report, pdf, csv, str(pdf_path.resolve()), now)
        finally:
            store.close()
        print(f"Recorded report {rid} in the {site.id} chain (`minewatch verify --config F FILE` checks it)")
    else:
        from monitor.reports.sending import send_report

        config = load_config(args.config)  # the channels' secrets now
        store = Store(store_path)
        try:
            sent = send_report(config, store, report, pdf, csv, str(pdf_path.resolve()), now)
        finally:
            store.close()
        whom = ", ".join(sent["recipients"])
        print(
            f"Sent report {sent['id']} to {whom}: {sent['delivered']} of {sent['queued']} deliveries made now"
            " (the rest are retried by the daemon's delivery worker)"
        )
    return 0
