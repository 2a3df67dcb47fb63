"""Fixtures of the evidence tests: a site with a day of data in its store."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.evidence import Site, build_site


@pytest.fixture
def site(tmp_path: Path) -> Site:
    return build_site(tmp_path)
