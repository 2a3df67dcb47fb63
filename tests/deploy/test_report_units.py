"""The shipped report timers and their service (deploy/systemd/minewatch-report*), checked
statically (no systemd as PID 1 here): they run `minewatch report --send` for the instance's
site, hardened like the daemon's unit, and `systemd-analyze verify` accepts them."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import REPO

SYSTEMD = REPO / "deploy" / "systemd"
UNITS = ("minewatch-report@.service", "minewatch-report-daily@.service")


def keys(path: Path) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for line in path.read_text().splitlines():
        if line and not line.startswith(("#", "[")):
            key, _, value = line.partition("=")
            found.setdefault(key.strip(), []).append(value.strip())
    return found


@pytest.mark.parametrize(("unit", "period"), [(UNITS[0], "--last-month"), (UNITS[1], "--yesterday")])
def test_the_report_units_send_the_sites_report(unit: str, period: str) -> None:
    service = keys(SYSTEMD / unit)
    command = service["ExecStart"][0].split()
    assert command[1] == "report" and command[command.index("--site") + 1] == "%i"
    assert "--send" in command and "$MINEWATCH_REPORT_PERIOD" in command
    assert service["Environment"][0] == f"MINEWATCH_REPORT_PERIOD={period}"
    for key, value in {
        "NoNewPrivileges": "yes",
        "ProtectSystem": "strict",
        "CapabilityBoundingSet": "",
    }.items():
        assert service[key] == [value], key
    assert service["User"] == ["minewatch"] and service["Type"] == ["oneshot"]


def test_the_timers_start_them() -> None:
    monthly = keys(SYSTEMD / "minewatch-report@.timer")
    assert monthly["OnCalendar"] == ["*-*-01 06:00:00"] and monthly["Unit"] == ["minewatch-report@%i.service"]
    daily = keys(SYSTEMD / "minewatch-report-daily@.timer")
    assert daily["Unit"] == ["minewatch-report-daily@%i.service"] and daily["Persistent"] == ["true"]


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed")
def test_systemd_analyze_verifies_them(tmp_path: Path) -> None:
    stand_in = shutil.which("minewatch") or sys.executable
    names = [*UNITS, "minewatch-report@.timer", "minewatch-report-daily@.timer"]
    for name in names:
        text = (SYSTEMD / name).read_text().replace("/opt/minewatch/bin/minewatch", stand_in)
        (tmp_path / name.replace("@", "@quarry")).write_text(text)
    result = subprocess.run(
        ["systemd-analyze", "verify", *(str(tmp_path / n.replace("@", "@quarry")) for n in names)],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    ours = [line for line in (result.stdout + result.stderr).splitlines() if "minewatch-report" in line]
    assert result.returncode == 0 and not ours, result.stdout + result.stderr
