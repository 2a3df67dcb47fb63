"""Where the repository and the tests' reference data are, whatever folder a test module sits in."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data"  # reference data, each file's source named in its README
