"""The portal writes a report's PDF and CSV whole or not at all (Portal.make_report).

Each writer has a partial file of its own (``<file>.<hex>.partial``, monitor/unfinished.py):
before, two writers of one report shared ``<file>.partial``, so one truncated what the other was
writing and the second rename found nothing. A write cut short (the disk "fills": a file-size
limit, RLIMIT_FSIZE, makes the kernel refuse it) leaves the previous file as it was and no
partial file. Real store, real reports.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from monitor.journal.store import Store
from monitor.portal.data import Portal, Scope, User
from tests.support.notices import make_config
from tests.support.paths import REPO

MONTH = "2026-11"


def _portal(folder: Path) -> tuple[Portal, Scope]:
    config = make_config(folder / "r.db")
    Store(config.storage.path).close()
    ticks = itertools.count()  # each report made at its own microsecond, as a real clock makes them
    portal = Portal(
        config, clock=lambda: datetime(2026, 12, 10, tzinfo=UTC) + timedelta(microseconds=next(ticks))
    )
    return portal, Scope(User("bob", "town", ()), config)


def test_two_writers_of_one_report_each_end_with_a_whole_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Timing alone rarely makes two writes meet, so the real os.replace is wrapped to wait
    there for the other writer: each has written its file in full and none has renamed it,
    the moment a shared partial name is lost (the second rename found nothing)."""
    portal, town = _portal(tmp_path)
    rename = os.replace
    meet = threading.Barrier(2, timeout=30)

    def meet_then_rename(source: Any, target: Any) -> None:
        meet.wait()
        rename(source, target)

    monkeypatch.setattr(os, "replace", meet_then_rename)
    out = tmp_path / "quarry-2026-11.pdf"
    failed: list[BaseException] = []

    def write() -> None:
        try:
            portal.make_report(town, "quarry", MONTH, out)
        except BaseException as exc:
            failed.append(exc)
            meet.abort()  # the other writer stops waiting at its next rename

    writers = [threading.Thread(target=write) for _ in range(2)]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(120)
    assert [type(exc).__name__ for exc in failed] == []
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("quarry")) == [
        "quarry-2026-11.csv",
        "quarry-2026-11.pdf",
    ]
    pdf = out.read_bytes()
    assert pdf.startswith(b"%PDF") and pdf.rstrip().endswith(b"%%EOF")
    assert out.with_suffix(".csv").read_text(encoding="utf-8").endswith("\n")


FILLED_DISK = """
import resource, signal, sys
from pathlib import Path
from tests.monitor.portal.test_report_files import MONTH, _portal

folder = Path(sys.argv[1])
portal, town = _portal(folder)
portal.store()  # opened before the disk fills: the write of the files is what fails
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG), as on a full disk
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.RLIM_INFINITY))
try:
    portal.make_report(town, "quarry", MONTH, folder / "report.pdf")
except OSError as exc:
    print(exc.strerror)
"""


def test_a_write_cut_short_leaves_the_previous_files_and_no_partial(tmp_path: Path) -> None:
    portal, town = _portal(tmp_path)
    portal.make_report(town, "quarry", MONTH, tmp_path / "report.pdf")
    before = {name: (tmp_path / name).read_bytes() for name in ("report.pdf", "report.csv")}
    assert len(before["report.csv"]) > 4096  # so the CSV's write is cut short, not refused at once
    run = subprocess.run(
        [sys.executable, "-c", FILLED_DISK, str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout == "File too large\n", run.stdout + run.stderr
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("report.")) == sorted(before)
    assert {name: (tmp_path / name).read_bytes() for name in before} == before
