"""``minewatch verify bundle.zip [--anchors FILE]``: check an evidence bundle; exit 0 if sound, 1 if not."""

from __future__ import annotations

import argparse
import sys
import zipfile
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("bundle", metavar="bundle.zip", help="an evidence bundle from `minewatch evidence`")
    parser.add_argument(
        "--anchors",
        metavar="FILE",
        help="JSON list of {site, seq, head[, ts]}: the chain heads the town received on"
        " minewatch/{site}/anchors",
    )


def run(args: argparse.Namespace) -> int:
    from monitor.evidence import EvidenceError, load_anchors, verify_bundle

    bundle = Path(args.bundle)
    if not bundle.is_file():
        what = "is a folder, not a bundle" if bundle.is_dir() else "no such file"
        print(f"minewatch verify: {args.bundle}: {what}", file=sys.stderr)
        return 2
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
