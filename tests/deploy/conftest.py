"""Fixtures for the deployment tests; the machinery lives in secure_broker.py so others can import it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.secure_broker import (
    EXTRA_ARGS,
    SecureBroker,
    free_port,
    run_secure_broker,
    wait_for_port,
    write_test_config,
)

__all__ = ["SecureBroker", "free_port", "wait_for_port"]


@pytest.fixture(scope="module")
def secure_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    """One TLS + password + ACL Mosquitto per test module, on a free port."""
    tmp = tmp_path_factory.mktemp("secure-broker")
    config = write_test_config(tmp / "minewatch.toml")
    with run_secure_broker(config, tmp / "broker", EXTRA_ARGS) as broker:
        yield broker


@pytest.fixture
def fresh_secure_broker(tmp_path: Path) -> Iterator[SecureBroker]:
    """A broker of its own, for tests that restart it or fill its queues."""
    config = write_test_config(tmp_path / "minewatch.toml")
    with run_secure_broker(config, tmp_path / "broker", EXTRA_ARGS) as broker:
        yield broker
