"""Test helpers shared by several test modules (from tests/deploy/test_daemon_through_broker.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from monitor.wire.codec import encode
from rules.model import SoundLevels
from tests.support.secure_broker import SecureBroker

SITES = """
[[sites]]
id = "{site}"
timezone = "America/Chicago"
latitude = 45.27
longitude = -91.62
[[sites.sensors]]
id = "n1"
kind = "sound"
"""


def config_text(broker: SecureBroker, username: str, store: Path, owned: list[str], sites: list[str]) -> str:
    owned_list = ", ".join(f'"{s}"' for s in owned)
    return (
        broker.broker_toml(username=username, client_id=username)
        + f'[storage]\npath = "{store}"\n'
        + f"[daemon]\nsites = [{owned_list}]\nstatus_interval_s = 5\n"
        + "".join(SITES.format(site=s) for s in sites)
    )


def minute_ago(n: int) -> datetime:
    return datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=n)


def publish_minute(sensor_client: object, site: str, level: float, start: datetime) -> None:
    for s in range(60):
        topic, payload = encode(
            SoundLevels(site, "n1", start + timedelta(seconds=s), 1.0, level, level + 1, level + 15)
        )
        rc = sensor_client.publish(topic, payload)  # type: ignore[attr-defined]
        assert not rc.is_failure, rc
