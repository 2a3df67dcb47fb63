"""`minewatch verify --config F report.pdf|csv` (monitor/reports/verify.py): the file's SHA-256
against the chained `report` record, the chain entry, and the head it was computed from, one
line each; a changed file is a FAILED line (exit 1); a user's mistake one line (exit 2)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from datetime import date, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from monitor.cli import main
from monitor.config import load_config
from monitor.journal.store import Store
from monitor.reports.content import build_report, period_of
from monitor.reports.formats import render_csv, render_pdf
from monitor.reports.sending import send_report
from tests.support.notices import CONFIG, add_sample_sound, local, site_and_profile
from tests.support.paths import DATA, REPO


@pytest.fixture
def sent(tmp_path: Path) -> Iterator[dict[str, Path]]:
    """A day's report recorded as sent (no recipient: recorded and chained only), and one built but
    never recorded (as no command leaves one)."""
    db = tmp_path / "store.db"
    config_path = tmp_path / "minewatch.toml"
    config_path.write_text(CONFIG.format(db=db, max_attempts=3))
    config = load_config(config_path, secrets="defer")
    site, profile = site_and_profile(config)
    day = local(2026, 6, 15, 11)
    store = Store(db)
    add_sample_sound(store, day, day + timedelta(minutes=20), (day, day + timedelta(minutes=5)))
    zone = ZoneInfo(site.timezone)
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    report = build_report(
        conn, site, profile, period_of(date(2026, 6, 15), date(2026, 6, 15), zone, "d"), day
    )
    pdf, csv = render_pdf(report), render_csv(report)
    unsent = build_report(
        conn, site, profile, period_of(date(2026, 6, 14), date(2026, 6, 14), zone, "u"), day
    )
    conn.close()
    files = {"config": config_path, "pdf": tmp_path / "r.pdf", "csv": tmp_path / "r.csv"}
    files["pdf"].write_bytes(pdf)
    files["csv"].write_bytes(csv)
    send_report(config, store, report, pdf, csv, str(files["pdf"]), day + timedelta(hours=1))
    store.close()
    files["unsent"] = tmp_path / "unsent.csv"
    files["unsent"].write_bytes(render_csv(unsent))
    files["head"] = Path(f"{report.chain_seq}:{report.chain_head}")
    yield files


def verify(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, list[str], str]:
    code = main(["verify", *(str(a) for a in argv)])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def test_a_sent_report_verifies_pdf_and_csv(
    sent: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    seq, head = str(sent["head"]).split(":")
    for kind in ("pdf", "csv"):
        code, lines, err = verify(capsys, sent[kind], "--config", sent["config"])
        assert code == 0 and err == "", (lines, err)
        assert len(lines) == 3, lines
        assert all(line.startswith(f"{sent[kind]}: OK: ") for line in lines)
        assert f"is the {kind.upper()} of report rp-" in lines[0] and "2026-06-15 00:00:00 CDT" in lines[0]
        assert "recorded as entry " in lines[1] and "of the quarry chain" in lines[1]
        assert lines[2].endswith(
            f"computed from chain entry {seq} of site quarry, head {head}: the chain holds it"
        )


def test_a_changed_report_is_a_failed_line(sent: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    seq, head = str(sent["head"]).split(":")
    text = sent["csv"].read_bytes()
    sent["csv"].write_bytes(text.replace(b"LAeq", b"LAeq ", 1))
    code, lines, _ = verify(capsys, sent["csv"], "--config", sent["config"])
    assert code == 1
    assert (
        lines[0].startswith(f"{sent['csv']}: FAILED: its SHA-256 ")
        and "matches no report recorded" in lines[0]
    )
    assert lines[1].endswith(
        f"computed from chain entry {seq} of site quarry, head {head} (the chain holds that head)"
    )
    raw = bytearray(sent["pdf"].read_bytes())
    raw[len(raw) // 2] ^= 1
    sent["pdf"].write_bytes(bytes(raw))
    code, lines, _ = verify(capsys, sent["pdf"], "--config", sent["config"])
    assert code == 1 and "FAILED: its SHA-256" in lines[0]
    code, lines, _ = verify(capsys, sent["unsent"], "--config", sent["config"])
    assert code == 1 and "or it was never recorded in this store" in lines[0]


def test_mistakes_are_one_line(sent: dict[str, Path], tmp_path: Path) -> None:
    def run(*argv: object) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "monitor.cli", "verify", *(str(a) for a in argv)],
            cwd=REPO,
            capture_output=True,
            text=True,
            env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
            timeout=120,
        )

    plain = tmp_path / "notes.txt"
    plain.write_text("hello")
    for argv, says in (
        ((sent["pdf"],), "a report is checked against the chain in the store: give --config FILE"),
        ((plain, "--config", sent["config"]), "not a report (a PDF or CSV from `minewatch report`)"),
        ((sent["pdf"], "--config", tmp_path / "missing.toml"), "missing.toml: no such file"),
    ):
        result = run(*argv)
        assert result.returncode == 2, result
        assert result.stdout == "" and len(result.stderr.splitlines()) == 1, result.stderr
        assert result.stderr.startswith("minewatch verify: ") and says in result.stderr, result.stderr


def test_a_report_made_without_send_verifies_and_a_changed_byte_fails(tmp_path: Path) -> None:
    """`minewatch report` without --send records the report: verify passes on both files as made;
    one byte changed in either, verify exits 1 with one FAILED line."""
    db = tmp_path / "store.db"
    config_path = tmp_path / "minewatch.toml"
    config_path.write_text(CONFIG.format(db=db, max_attempts=3))
    day = local(2026, 6, 15, 11)
    store = Store(db)
    add_sample_sound(store, day, day + timedelta(minutes=20), (day, day + timedelta(minutes=5)))
    store.close()

    def cli(command: str, *argv: object) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "monitor.cli", command, *(str(a) for a in argv)],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
        )

    made = cli(
        "report", "--config", config_path, "--site", "quarry", "--day", "2026-06-15", "--out", tmp_path
    )
    assert made.returncode == 0, made.stderr
    assert "Recorded report rp-" in made.stdout
    conn = sqlite3.connect(db)
    (recorded,) = conn.execute("SELECT COUNT(*) FROM chain WHERE kind = 'report'").fetchone()
    assert recorded == 1
    assert conn.execute("SELECT recipients FROM reports").fetchone()[0] == "[]"
    conn.close()
    for suffix in ("pdf", "csv"):
        path = tmp_path / f"quarry-2026-06-15.{suffix}"
        ok = cli("verify", "--config", config_path, path)
        assert ok.returncode == 0, ok.stdout + ok.stderr
        assert len(ok.stdout.splitlines()) == 3 and all(": OK: " in line for line in ok.stdout.splitlines())
        raw = bytearray(path.read_bytes())
        raw[len(raw) // 3] ^= 0x20
        path.write_bytes(bytes(raw))
        bad = cli("verify", "--config", config_path, path)
        assert bad.returncode == 1, bad.stdout
        failed = [line for line in bad.stdout.splitlines() if ": FAILED: " in line]
        assert len(failed) == 1 and "matches no report recorded in the chain" in failed[0], bad.stdout


def test_an_older_store_is_said_with_the_command_that_brings_it_to_this_layout(
    sent: dict[str, Path], tmp_path: Path
) -> None:
    """A report against an older minewatch's store (golden.sqlite, layout 2 of commit cd944b8: no
    reports table, no migrations recorded), which verify reads as it is: it said "no such table:
    reports (a store of an older minewatch?)" and not what to do. It says the store is an older
    minewatch's and the command that brings it to this layout, one line, exit 2; that command,
    run as written, does, and verify then gives its answer (a report this store never recorded).
    A store of a newer minewatch is said as the daemon says it: upgrade minewatch."""
    from monitor.journal.store import SCHEMA_VERSION

    def cli(*argv: object) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "monitor.cli", *(str(a) for a in argv)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
            timeout=120,
        )

    older = tmp_path / "older" / "store.db"
    older.parent.mkdir()
    older.write_bytes((DATA / "evidence" / "golden.sqlite").read_bytes())
    config = older.parent / "minewatch.toml"
    config.write_text(CONFIG.format(db=older, max_attempts=3))
    refused = cli("verify", sent["pdf"], "--config", config)
    assert (refused.returncode, refused.stdout) == (2, ""), refused
    assert refused.stderr.splitlines() == [
        f"minewatch verify: the store {str(older)!r} is an older minewatch's: open it once with"
        f" `minewatch status --config {config}` (which brings it to this layout) and verify again"
        f" (storage.path in {config})"
    ], refused.stderr

    named = refused.stderr.split("`")[1].split()
    assert named[0] == "minewatch"
    opened = cli(*named[1:])
    assert opened.returncode == 0 and "Traceback" not in opened.stderr, opened

    verified = cli("verify", sent["pdf"], "--config", config)
    assert (verified.returncode, verified.stderr) == (1, ""), verified
    assert "matches no report recorded in the chain" in verified.stdout, verified.stdout

    with sqlite3.connect(older) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    newer = cli("verify", sent["pdf"], "--config", config)
    assert (newer.returncode, newer.stdout) == (2, ""), newer
    assert newer.stderr.splitlines() == [
        f"minewatch verify: the store {str(older)!r} has layout version {SCHEMA_VERSION + 1}, newer than"
        f" this minewatch reads ({SCHEMA_VERSION}): upgrade minewatch (storage.path in {config})"
    ], newer.stderr
