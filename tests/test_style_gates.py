"""The style gates README.md names, run as tests so that CI holds them: `ruff check`, `ruff
format --check` and `mypy` (strict on monitor, rules and sensors, as pyproject.toml says).
mypy's gate had drifted to 15 errors while nothing ran it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.paths import REPO


@pytest.mark.parametrize(
    "command",
    [
        [sys.executable, "-m", "ruff", "check", "."],
        [sys.executable, "-m", "ruff", "format", "--check", "."],
        [sys.executable, "-m", "mypy"],
    ],
    ids=["ruff-check", "ruff-format", "mypy"],
)
def test_the_style_gate_passes(command: list[str]) -> None:
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
