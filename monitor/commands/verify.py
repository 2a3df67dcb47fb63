"""``minewatch verify bundle.zip [--anchors FILE]``: check an evidence bundle; exit 0 if sound, 1 if not.

``minewatch verify --config F report.pdf`` (or the report's ``.csv``): check a compliance report
against the chained ``report`` record in the store (monitor/reports/verify.py); the file is
recognised by its first bytes.
"""

from __future__ import annotations

import argparse
import sys
import zipfile
from pathlib import Path

from monitor.named_file import NamedFileError, open_named_file


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "bundle",
        metavar="FILE",
        help="an evidence bundle (zip) from `minewatch evidence`, or a report (PDF or CSV) from"
        " `minewatch report` (with --config)",
    )
    parser.add_argument(
        "--config", help="configuration TOML file: its store holds the chained record of a report"
    )
    parser.add_argument(
        "--anchors",
        metavar="FILE",
        help="JSON list of {site, seq, head[, ts]}: the chain heads the town received on"
        " minewatch/{site}/anchors",
    )


def run(args: argparse.Namespace) -> int:
    from monitor.evidence import EvidenceError, load_anchors, verify_bundle

    bundle = Path(args.bundle)
    try:
        with open_named_file(bundle, "bundle or report") as handle:
            first = handle.read(64)
    except NamedFileError as exc:
        print(f"minewatch verify: {exc}", file=sys.stderr)
        return 2
    if args.config or (not zipfile.is_zipfile(bundle) and _is_report(first)):
        return _verify_report(args, bundle)
    if not zipfile.is_zipfile(bundle):
        # Nothing was checked: the failure alone, without the (empty) statistics of a check.
        print(f"{args.bundle}: FAILED: not a zip file, so not an evidence bundle from `minewatch evidence`")
        return 1
    try:
        anchors = load_anchors(args.anchors) if args.anchors else None
    except EvidenceError as exc:
        print(f"minewatch verify: {exc}", file=sys.stderr)
        return 2
    from monitor.evidence.progress import Progress

    report = verify_bundle(args.bundle, anchors, progress=Progress.on_terminal("verify"))
    print("\n".join(report.lines()))
    return 0 if report.ok else 1


def _is_report(first: bytes) -> bool:
    from monitor.reports.verify import is_report

    return is_report(first)


def _verify_report(args: argparse.Namespace, path: Path) -> int:
    """A report file against the store of ``--config``: one line each, exit 0 if it is the one recorded."""
    import sqlite3

    from monitor.commands.store_file import existing_store
    from monitor.config import load_config
    from monitor.errors import StoreError, UsageError
    from monitor.journal.migrations import layout_refusal
    from monitor.reports.verify import verify_report

    body = path.read_bytes()
    if not _is_report(body[:64]):
        raise UsageError(
            f"{args.bundle}: not a report (a PDF or CSV from `minewatch report`); an evidence bundle"
            " is verified without --config"
        )
    if not args.config:
        raise UsageError(
            f"{args.bundle}: a report is checked against the chain in the store: give --config FILE"
        )
    config = load_config(args.config, secrets="defer")  # reads the store only: no channel's secret
    store = existing_store(config.storage.path, args.config)
    conn = sqlite3.connect(f"{store.resolve().as_uri()}?mode=ro", uri=True, timeout=30)
    try:
        # Read as it is (read-only): an older minewatch's store lacks the reports' table.
        if (refusal := layout_refusal(conn, config.storage.path, args.config, "verify again")) is not None:
            raise StoreError(refusal)
        check = verify_report(conn, path, body, {s.id: s.timezone for s in config.sites})
    except sqlite3.OperationalError as exc:
        raise StoreError(f"cannot read the store {config.storage.path!r}: {exc}") from None
    finally:
        conn.close()
    print("\n".join(check.lines))
    return 0 if check.ok else 1
