"""Test helpers shared by several test modules (from tests/monitor/wire/test_codec_decode.py)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from monitor.config import parse_config
from monitor.wire.codec import decode
from monitor.wire.protocol import Limits

NOW = datetime(2026, 6, 15, 12, 0, tzinfo=UTC)


CONFIG = parse_config(
    """
[[sites]]
id = "dovre-north"
timezone = "America/Chicago"
latitude = 45.27
longitude = -91.62
[[sites.gates]]
id = "g1"
[[sites.sensors]]
id = "n1"
kind = "sound"
gates = ["g1"]
[[sites.sensors]]
id = "l1"
kind = "light"
[[sites.sensors]]
id = "wx"
kind = "weather"
[[sites.sensors]]
id = "signed"
kind = "sound"
signing_key = "k3y"
require_signature = true
"""
)


SITES = {s.id: s for s in CONFIG.sites}


P = "minewatch/dovre-north"


DEFAULT_LIMITS = Limits()


def dec(
    topic: str, payload: Any, *, limits: Limits = DEFAULT_LIMITS, generic: frozenset[str] = frozenset()
) -> Any:
    raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return decode(topic, raw, SITES, NOW, limits, {"dovre-north": generic})


LEVELS = {"ts": "2026-06-15T11:59:00Z", "duration_s": 1, "LAeq": 71.2, "LAFmax": 74.0, "LCpeak": 95.5}
