"""Signed payloads from the edge: accepted by the daemon's codec when genuine, rejected when forged."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from monitor.config import load_config
from monitor.errors import DecodeError
from monitor.wire.codec import decode
from monitor.wire.protocol import Limits
from rules.model import SensorStatus, SoundLevels
from sensors.publisher import encode_status, signing_key
from tests.support.sensors import Subscriber, site_config, wait_for
from tests.support.servers import Mosquitto

NOW = datetime(2026, 12, 31, tzinfo=UTC)
LIMITS = Limits(max_past_s=1e9)
SIGNED = 'signing_key = "n1-secret"\nrequire_signature = true'


def test_signed_levels_accepted_and_forgeries_rejected(tmp_path: Path, mosquitto: Mosquitto) -> None:
    config_path = site_config(tmp_path, mosquitto.url, n1_extra=SIGNED)
    sites = {s.id: s for s in load_config(config_path).sites}
    sub = Subscriber(mosquitto.port, "minewatch/dovre-quarry/sensors/n1/#")
    try:
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "monitor.cli",
                "sensor",
                "sound",
                "--config",
                str(config_path),
                "--sensor",
                "n1",
                "--source",
                "synthetic:65",
                "--speed",
                "max",
                "--duration",
                "3",
                "--start",
                "2026-06-15T11:00",
                "--queue",
                str(tmp_path / "q.db"),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 0, result.stderr
        assert wait_for(lambda: len(sub.received("/levels")) == 3)
        messages = sub.received()
    finally:
        sub.close()
    for topic, payload in messages:  # every payload, heartbeats included, carries a valid signature
        assert "sig" in json.loads(payload)
        assert decode(topic, payload, sites, NOW, LIMITS).sensor == "n1"
    topic, payload = next((t, p) for t, p in messages if t.endswith("/levels"))
    forged = json.loads(payload)
    forged["LAeq"] = forged["LAeq"] - 20  # quieter than measured, signature kept
    with pytest.raises(DecodeError, match="signature does not match"):
        decode(topic, json.dumps(forged).encode(), sites, NOW, LIMITS)
    del forged["sig"]
    with pytest.raises(DecodeError, match="requires a signed payload"):
        decode(topic, json.dumps(forged).encode(), sites, NOW, LIMITS)


def test_status_with_queue_fields_is_signed(tmp_path: Path) -> None:
    sites = {s.id: s for s in load_config(site_config(tmp_path, "mqtt://127.0.0.1:1", n1_extra=SIGNED)).sites}
    sensor = sites["dovre-quarry"].sensor("n1")
    assert sensor is not None
    status = SensorStatus("dovre-quarry", "n1", datetime(2026, 6, 15, 16, tzinfo=UTC), 88.0, 0.01, 94.0, 94.2)
    topic, payload = encode_status(status, {"queued": 3, "dropped": 7}, signing_key(sensor))
    decoded = decode(topic, payload, sites, NOW, LIMITS)
    assert decoded == status
    wrong = encode_status(status, {"queued": 3, "dropped": 0}, b"not-the-key")
    with pytest.raises(DecodeError, match="signature"):
        decode(*wrong, sites, NOW, LIMITS)
    assert not isinstance(decoded, SoundLevels)
