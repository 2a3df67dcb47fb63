"""The README's first command: `minewatch demo` end to end (real Mosquitto, daemon, simulator)."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import zipfile
from datetime import date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from monitor.demo.runner import EXPECTED, MARKER, run_demo
from tests.support.daemon import store_count, wait_until
from tests.support.paths import REPO
from tests.support.portal_server import Client, Portal


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
    # The blast ids carry the day they are fired on: the demo's day, not the scenario's 2026-12-15.
    two_days_on = day + timedelta(days=2)
    assert forecast.startswith(
        f"Blast b-{two_days_on:%m%d}-1: scaled distance 29.6 ft/lb^0.5; no PPV predicted"
    ), forecast
    assert forecast.endswith("and 2 are recorded") and f"  {forecast}" in text.splitlines()

    # Repeatable (issue 25): the same day again through the broker gives the same alerts, said
    # at the same (data) times, and the same notices; only the anchors' chain positions differ
    # (the chain also holds receipt times, which are the wall clock's). A sensor's offline/online
    # alerts too: the data clock does its periodic work between a batch's messages, so how the
    # batches fall on a loaded machine does not change them (test_data_clock.py).
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


def test_a_served_demo_journals_portal_events_and_sigterm_stops_all_it_started(tmp_path: Path) -> None:
    """`minewatch demo --serve` keeps the broker and a daemon behind the portal: an event recorded
    through the portal's form (HTTP, as the demo's operator account) is journaled in the store by
    that daemon. `kill` (SIGTERM) then stops it as Ctrl-C does: every process it started ends."""
    folder = tmp_path / "served"
    day = date(datetime.now(ZoneInfo("America/Chicago")).year - 1, 12, 10)
    argv = [sys.executable, "-m", "monitor.cli", "demo", "--serve", "--out", str(folder), "--date", str(day)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO)
    assert proc.stdout is not None
    lines: list[str] = []
    try:
        for line in proc.stdout:
            lines.append(line)
            if "(Ctrl-C stops them all)" in line:
                break
        text = "".join(lines)
        assert "daemon      running again for the portal (pid " in text, text
        port = int(re.search(r"still at http://127\.0\.0\.1:(\d+)/", text)[1])  # type: ignore[index]
        children = _children(proc.pid)
        names = sorted(
            Path(cmd.split()[0]).name if "monitor.cli" not in cmd else cmd.split()[3]
            for cmd in children.values()
        )
        # The broker, the portal and the daemon started again (the simulator and the first
        # daemon have ended).
        assert names == ["mosquitto", "run", "serve"], children

        client = Client(Portal(tmp_path, port=port))
        assert client.login("operator", "demo-operator").status == 303
        events = "/sites/dovre-quarry/events"
        reply = client.request(
            "POST",
            f"{events}/blast",
            {"csrf": client.csrf(events), "blast_id": "SERVED-1640", "ts": f"{day}T16:40:00"},
        )
        assert reply.status == 303 and reply.location == events, reply.body
        store = folder / "minewatch.db"
        query = "SELECT COUNT(*) FROM events WHERE kind = 'blast' AND id = 'SERVED-1640'"
        assert wait_until(lambda: store_count(store, query) == 1, 30), (folder / "daemon.log").read_text()
        chained = "SELECT COUNT(*) FROM chain WHERE kind = 'event' AND key = 'blast|SERVED-1640'"
        assert store_count(store, chained) == 1
        broker_dirs = list(Path(tempfile.gettempdir()).glob("minewatch-demo-broker-*"))
        mine = [d for d in broker_dirs if str(d) in " ".join(children.values())]
        assert len(mine) == 1, children
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    # Stopped by the signal, it still ends with its own verdict (no traceback): 0 when the
    # summary is all right.
    summary = json.loads((folder / "summary.json").read_text())
    assert proc.returncode == (0 if summary["ok"] else 1), "".join(lines)
    alive = {pid: cmd for pid, cmd in children.items() if _cmdline(pid) == cmd}
    assert alive == {}, f"still running: {alive}"
    assert not mine[0].exists()  # the broker's folder went with it
    started = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _runs_in(p, folder)]
    assert started == [], "still running: " + ", ".join(p.name for p in started)
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        raise AssertionError(f"the portal still answers on port {port}")
    except OSError:
        pass


def _cmdline(pid: int) -> str:
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:  # it has ended
        return ""


def _children(parent: int) -> dict[int, str]:
    """The processes whose parent is ``parent``, with their command lines."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may hold spaces, so split after its closing bracket.
        if int(stat.rsplit(")", 1)[1].split()[1]) == parent:
            found[int(entry.name)] = _cmdline(int(entry.name))
    return found


def _runs_in(proc_dir: Path, folder: Path) -> bool:
    try:
        return str(folder) in (proc_dir / "cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:  # it ended while we looked
        return False


def test_an_interrupted_demo_says_its_folder_is_incomplete(tmp_path: Path) -> None:
    """Ctrl-C exited 130 with nothing said: only summary.json's "ok": false told a half-made
    folder from a failed check."""
    folder = tmp_path / "cut"
    argv = [sys.executable, "-m", "monitor.cli", "demo", "--out", str(folder)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO)
    assert proc.stdout is not None
    lines = [proc.stdout.readline()]  # the demo has begun
    proc.send_signal(signal.SIGINT)
    lines.append(proc.stdout.readline())
    proc.send_signal(signal.SIGINT)  # pressed again while it cleans up
    lines += proc.stdout.readlines()
    assert proc.wait(60) == 130, "".join(lines)
    said = "".join(lines)
    assert f"interrupted: {folder}/ holds what was done so far, incomplete (summary.json: ok false)" in said
    assert "Traceback" not in said, said
    assert json.loads((folder / "summary.json").read_text())["ok"] is False
    # Interrupted as it started the daemon (the line before says the broker is up), it left that
    # daemon running with nobody to stop it, four runs in six.
    started = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _runs_in(p, folder)]
    for leaked in started:
        os.kill(int(leaked.name), signal.SIGKILL)
    assert started == [], "still running: " + ", ".join(p.name for p in started)
