"""Fixtures of the notices tests: a store file, its configuration and the open store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from monitor.config import Config
from monitor.journal.store import Store
from tests.support.notices import make_config


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "minewatch.db"


@pytest.fixture
def config(db: Path) -> Config:
    return make_config(db)


@pytest.fixture
def store(db: Path) -> Iterator[Store]:
    s = Store(db)
    yield s
    s.close()
