"""The README's first command: `minewatch demo` end to end (real Mosquitto, daemon, simulator)."""

from __future__ import annotations

import io
import json
import re
import signal
import socket
import subprocess
import sys
import zipfile
from datetime import date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from monitor.demo.runner import EXPECTED, MARKER, run_demo
from tests.support.paths import REPO


def test_demo_runs_and_lists_the_expected_findings(tmp_path: Path) -> None:
    out = io.StringIO()
    today = datetime.now(ZoneInfo("America/Chicago")).date()
    # A fixed past day on which dovre-short's lights are in the dark, so the test does not
    # depend on the season (the default day, yesterday or the last fitting one: test_demo_output).
    day = date(today.year - 1, 12, 10)
    code = run_demo(tmp_path / "demo", "dovre-short", "max", None, out, day=day)
    text = out.getvalue()
    assert code == 0, text
    for expectation in EXPECTED:
        assert f"[ok] {expectation.label}" in text
    assert "Notices of violation issued:" in text and f"DOV-{day.year}-0001" in text
    # Verified against the heads the daemon published to the town, saying how much they prove.
    assert "minewatch verify evidence-dovre-quarry.zip --anchors town-anchors.json: OK up to seq" in text
    assert (tmp_path / "demo" / "town-anchors.json").is_file()
    # The web portal ran beside the daemon: its URL and a demo account of each role printed.
    shown = r"^portal      (http://127\.0\.0\.1:\d+/)  accounts \(name / password\): (.*)$"
    portal = re.search(shown, text, re.MULTILINE)
    assert portal is not None, text
    assert portal[2] == "operator / demo-operator, town / demo-town, inspector / demo-inspector"
    assert "minewatch portal on " + portal[1] in (tmp_path / "demo" / "portal.log").read_text()
    folder = tmp_path / "demo"
    assert (folder / MARKER).is_file()
    notices = sorted(p.name for p in (folder / "notices").iterdir())
    assert any(n.endswith(".pdf") for n in notices) and any(n.endswith("-levels.png") for n in notices)
    with zipfile.ZipFile(folder / "evidence-dovre-quarry.zip") as bundle:
        assert "manifest.json" in bundle.namelist()

    # summary.json holds what the console showed.
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["ok"] is True and summary["date"] == day.isoformat()
    assert f"site dovre-quarry, {day.isoformat()}" in text
    for row in summary["findings"]:
        told = "-" if row["episodes"] is None else str(row["episodes"])
        line = f"  {row['standard']:<22}{row['section']:<9}{row['finding']:<20}{told:>9}{row['windows']:>9}"
        assert line in text.splitlines()
    assert [e["label"] for e in summary["expected"]] == [e.label for e in EXPECTED]
    assert all(e["ok"] for e in summary["expected"])
    shown = re.findall(r"^  (DOV-\d{4}-\d{4})  ", text, re.MULTILINE)
    assert [n["id"] for n in summary["notices"]] == shown and shown
    for notice in summary["notices"]:
        # Site time, as every notice states it: the end of the local day 14 days on (13.3.A).
        assert notice["cure_by"] == f"{day + timedelta(days=14)} 23:59 CST", notice
        assert f"{notice['id']}  " in text and f"cure by {notice['cure_by']}" in text
    assert summary["evidence"]["verify"].startswith("OK up to seq") and summary["evidence"]["rows"] > 0
    # The notice of the blast two days on carries its charge per delay (500 kg) and distance (300 m): the
    # operator's forecast shows its scaled distance, 300 m / sqrt(500 kg) = 13.4 m/kg^0.5, which is
    # 29.6 ft/lb^0.5, and says the site law needs a third event (today's two blasts are its data).
    [forecast] = summary["forecasts"]
    assert forecast.startswith("Blast b-1217-1: scaled distance 29.6 ft/lb^0.5; no PPV predicted"), forecast
    assert forecast.endswith("and 2 are recorded") and f"  {forecast}" in text.splitlines()

    # Repeatable (issue 25): the same day again through the broker gives the same alerts, said
    # at the same (data) times, and the same notices; only the anchors' chain positions differ
    # (the chain also holds receipt times, which are the wall clock's).
    again = tmp_path / "again"
    assert run_demo(again, "dovre-short", "max", None, io.StringIO(), day=day) == 0
    assert _record(again / "minewatch.db") == _record(folder / "minewatch.db")
    assert json.loads((again / "summary.json").read_text())["episodes"] == summary["episodes"]


def _record(store: Path) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    import sqlite3

    conn = sqlite3.connect(store)
    try:
        alerts = conn.execute(
            "SELECT created_us, audience, kind, message FROM alerts WHERE kind <> 'anchor'"
            " ORDER BY created_us, kind, message"
        ).fetchall()
        notices = conn.execute(
            "SELECT id, standard, opened_us, deadline_us, data FROM notices ORDER BY id"
        ).fetchall()
    finally:
        conn.close()
    assert alerts and notices
    return alerts, notices


def test_a_served_demo_stopped_with_sigterm_takes_its_broker_daemon_and_portal_along(tmp_path: Path) -> None:
    """`kill` of `minewatch demo --serve` stops it as Ctrl-C does: nothing it started runs on."""
    folder = tmp_path / "served"
    day = date(datetime.now(ZoneInfo("America/Chicago")).year - 1, 12, 10)
    argv = [sys.executable, "-m", "monitor.cli", "demo", "--serve", "--out", str(folder), "--date", str(day)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO)
    assert proc.stdout is not None
    lines: list[str] = []
    for line in proc.stdout:
        lines.append(line)
        if "(Ctrl-C stops it)" in line:
            break
    port = int(re.search(r"http://127\.0\.0\.1:(\d+)/", "".join(lines))[1])  # type: ignore[index]
    socket.create_connection(("127.0.0.1", port), timeout=5).close()  # the portal is up
    proc.send_signal(signal.SIGTERM)
    proc.wait(60)
    started = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _runs_in(p, folder)]
    assert started == [], "still running: " + ", ".join(p.name for p in started)
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        raise AssertionError(f"the portal still answers on port {port}")
    except OSError:
        pass


def _runs_in(proc_dir: Path, folder: Path) -> bool:
    try:
        return str(folder) in (proc_dir / "cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:  # it ended while we looked
        return False
