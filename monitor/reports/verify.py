"""``minewatch verify --config F report.pdf`` (or ``.csv``): is this the report the chain recorded?

Every report made (``minewatch report``, with or without ``--send``, the timers, the portal's
report jobs) is a chained ``report`` record (monitor/reports/sending.py) holding the SHA-256
of its PDF and CSV and the chain head its figures were computed from. ``verify_report`` hashes
the file and says, one line each:
whether a recorded report has that SHA-256 (a changed file matches none: a FAILED line), which
chain entry records it (and that the record still matches the entry's digest), and the chain
head the report says it was computed from (and that the chain holds that head at that entry).
It reads the store only.
"""

from __future__ import annotations

import csv
import hashlib
import io
import re
import sqlite3
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from monitor.journal import queries
from monitor.journal.chain_kinds import KINDS, digest_of
from monitor.shown_text import one_line
from monitor.wire.canonical import from_us
from rules.times import local_moment

CSV_HEADER = b"section,row,column,value,source"
_STATED = re.compile(r"chain entry (\d+) of site (\S+), head ([0-9a-f]{64})")


@dataclass
class ReportCheck:
    ok: bool = True
    lines: list[str] = field(default_factory=list)

    def say(self, name: str, line: str, ok: bool = True) -> None:
        self.ok = self.ok and ok
        self.lines.append(one_line(f"{name}: {'OK' if ok else 'FAILED'}: {line}"))


def is_report(head: bytes) -> bool:
    """A file's first bytes: a PDF, or the CSV `minewatch report` writes."""
    return head.startswith(b"%PDF-") or head.startswith(CSV_HEADER)


def stated_head(body: bytes) -> tuple[int, str, str] | None:
    """(entry, site, head) the report says it was computed from, when its text shows it: the
    CSV's "Computed from" line; a PDF's text, its streams inflated (None when a line break
    splits it)."""
    if body.startswith(CSV_HEADER):
        for row in csv.reader(io.StringIO(body.decode("utf-8", "replace"))):
            if len(row) >= 4 and row[0] == "report" and row[1] == "Computed from":
                found = _STATED.search(row[3])
                if found:
                    return int(found[1]), found[2], found[3]
        return None
    texts = [body]
    for stream in re.finditer(rb"stream\r?\n(.*?)\r?\nendstream", body, re.S):
        try:
            texts.append(zlib.decompress(stream[1]))
        except zlib.error:
            continue
    for raw in texts:
        words = b" ".join(re.findall(rb"\(((?:[^()\\]|\\.)*)\)\s*Tj", raw)).decode("latin-1")
        found = _STATED.search(words)
        if found:
            return int(found[1]), found[2], found[3]
    return None


def verify_report(
    conn: sqlite3.Connection, path: Path, body: bytes, zones: Mapping[str, str] | None = None
) -> ReportCheck:
    """The check of one report file's bytes against the store; ``zones``: site id -> time zone."""
    name = str(path)
    check = ReportCheck()
    digest = hashlib.sha256(body).hexdigest()
    kind = "PDF" if body.startswith(b"%PDF-") else "CSV"
    matches = queries.reports_with_sha256(conn, digest)
    if not matches:
        check.say(
            name,
            f"its SHA-256 {digest} matches no report recorded in the chain: the file was changed"
            " since it was made, or it was never recorded in this store (`minewatch report` and the"
            " portal record every report they make)",
            ok=False,
        )
        stated = stated_head(body)
        if stated is not None:
            seq, site, head = stated
            held = queries.chain_head_at(conn, site, seq)
            where = (
                "the chain holds that head"
                if held == head
                else "the chain holds no such head there"
                if held is None
                else "the chain holds another head there"
            )
            check.lines.append(
                f"{name}: it says it was computed from chain entry {seq} of site {site},"
                f" head {head} ({where})"
            )
        return check
    row = matches[-1]
    site = str(row["site"])
    tz = (zones or {}).get(site, "UTC")
    start, end = from_us(int(row["period_start_us"])), from_us(int(row["period_end_us"]))
    period = f"{local_moment(start, tz)} to {local_moment(end, tz)}"
    made = local_moment(from_us(int(row["made_us"])), tz)
    check.say(name, f"SHA-256 {digest} is the {kind} of report {row['id']} ({site}, {period}), made {made}")
    entry = queries.chain_entry(conn, site, "report", str(row["id"]))
    if entry is None:
        check.say(name, f"report {row['id']} has no entry in the {site} chain", ok=False)
    elif digest_of(KINDS["report"].record(dict(row))) != entry.digest:
        check.say(name, f"the report's record differs from entry {entry.seq} of the {site} chain", ok=False)
    else:
        check.say(name, f"recorded as entry {entry.seq} of the {site} chain (head {entry.head})")
    seq, head = int(row["chain_seq"]), str(row["chain_head"])
    held = queries.chain_head_at(conn, site, seq)
    if held == head:
        check.say(name, f"computed from chain entry {seq} of site {site}, head {head}: the chain holds it")
    else:
        check.say(
            name,
            f"it says it was computed from chain entry {seq} of site {site}, head {head}; the chain holds"
            + (" no such entry" if held is None else f" {held} there"),
            ok=False,
        )
    return check
