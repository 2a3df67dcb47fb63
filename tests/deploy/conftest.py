"""Fixtures for the deployment tests; the machinery lives in secure_broker.py so others can import it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.deploy.secure_broker import SecureBroker, free_port, run_secure_broker, wait_for_port

__all__ = ["SecureBroker", "free_port", "wait_for_port"]

# Two sites so cross-site rules can be tested; only ids matter to make-credentials.
TEST_CONFIG = """\
[broker]
topic_prefix = "minewatch"

[[sites]]
id = "north"
timezone = "Europe/Oslo"
latitude = 62.0
longitude = 9.6

[[sites.sensors]]
id = "n1"
kind = "sound"

[[sites.sensors]]
id = "n2"
kind = "sound"

[[sites.sensors]]
id = "l1"
kind = "light"

[[sites]]
id = "south"
timezone = "Europe/Oslo"
latitude = 61.0
longitude = 9.6

[[sites.sensors]]
id = "n1"
kind = "sound"
"""

# A second daemon instance that owns only "north" (scaling by site partition).
EXTRA_ARGS = ("--daemon-instance", "east=north", "--town-user", "town-web")


def write_test_config(path: Path, text: str = TEST_CONFIG) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


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
