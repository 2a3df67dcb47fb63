"""The README's first command: `minewatch demo` end to end (real Mosquitto, daemon, simulator)."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

from monitor.demo import EXPECTED, run_demo


def test_demo_runs_and_lists_the_expected_findings(tmp_path: Path) -> None:
    out = io.StringIO()
    code = run_demo(tmp_path / "demo", "dovre-short", "max", None, out)
    text = out.getvalue()
    assert code == 0, text
    for expectation in EXPECTED:
        assert f"[ok] {expectation.label}" in text
    assert "Notices of violation issued:" in text and "DOV-2026-0001" in text
    assert "minewatch verify: OK" in text
    notices = sorted(p.name for p in (tmp_path / "demo" / "notices").iterdir())
    assert any(n.endswith(".pdf") for n in notices) and any(n.endswith("-levels.png") for n in notices)
    with zipfile.ZipFile(tmp_path / "demo" / "evidence-dovre-quarry.zip") as bundle:
        assert "manifest.json" in bundle.namelist()
