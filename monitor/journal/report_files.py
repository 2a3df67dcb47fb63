"""A recorded report's files, found through its row (table ``reports``): where they were
written and the SHA-256 its chained record holds. A report alert names the report by its id and
never by a path (monitor/reports/sending.py), so its delivery looks the files up here."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

from monitor.journal import queries

# A report alert's data members that once named its files' paths: still in the alerts of stores
# written before, and in the copies of them queued for delivery (monitor/journal/migrations.py).
PATH_MEMBERS = ("report_pdf", "report_csv")


@dataclass(frozen=True, slots=True)
class ReportFile:
    """A recorded report's file: where it was written, its media type and the SHA-256 its
    chained record holds."""

    path: str
    media_type: str
    sha256: str


def csv_beside(pdf_path: str) -> str:
    """A report's CSV: the file beside its PDF, of the same name (as `minewatch report` and
    the portal write them)."""
    return str(Path(pdf_path).with_suffix(".csv"))


def report_files(conn: sqlite3.Connection, rid: str) -> list[ReportFile] | None:
    """The PDF and CSV of the recorded report ``rid``, from its row (None: no such report)."""
    row = queries.report_row(conn, rid)
    if row is None:
        return None
    pdf = str(row["pdf_path"])
    return [
        ReportFile(pdf, "application/pdf", str(row["pdf_sha256"])),
        ReportFile(csv_beside(pdf), "text/csv", str(row["csv_sha256"])),
    ]
