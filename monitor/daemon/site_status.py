"""The site status: the daemon's retained status message and `minewatch status`.

Kept apart from monitor.daemon.pipeline so that `minewatch status` loads only the store and the wire
format, not the daemon's numpy/scipy acoustics, MQTT and InfluxDB clients: importing the
pipeline made the command take 3-4.5 s on a busy 2-core machine, for a 0.1 s query.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from typing import Any

from monitor.config import SiteConfig
from monitor.journal.store import Store
from monitor.wire.protocol import format_ts
from rules.times import MINUTE


def site_status(
    store: Store, site: SiteConfig, now: datetime, online: dict[str, bool] | None = None
) -> dict[str, Any]:
    """The last minute per sensor and the open findings: the retained status and `minewatch status`."""
    # Energy and seconds per sensor: a period counts for its duration (not all meters send 1-s periods).
    last_minute: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for sensor_id, laeq, duration_s in store.sound_laeq_between(site.id, now - MINUTE, now):
        totals = last_minute[sensor_id]
        totals[0] += duration_s * 10 ** (laeq / 10)
        totals[1] += duration_s
    sensors: dict[str, Any] = {}
    for sensor in site.sensors:
        last_us = store.last_data_us(site.id, sensor.id)
        entry: dict[str, Any] = {
            "kind": sensor.kind.value,
            "last_ts": format_ts(datetime.fromtimestamp(last_us / 1e6, UTC)) if last_us else None,
        }
        if online is not None:
            entry["online"] = online.get(sensor.id, False)
        energy, seconds = last_minute.get(sensor.id, (0.0, 0.0))
        if seconds > 0:
            entry["LAeq_1min"] = round(10 * math.log10(energy / seconds), 1)
            entry["seconds"] = int(seconds) if seconds.is_integer() else round(seconds, 1)
        sensors[sensor.id] = entry
    day_start = now - timedelta(hours=24)
    open_rows = store.current_findings(site.id, day_start, now + timedelta(days=1))
    by_kind: dict[str, int] = defaultdict(int)
    for r in open_rows:
        by_kind[r["kind"]] += 1
    return {
        "site": site.id,
        "name": site.name,
        "ts": format_ts(now),
        "sensors": sensors,
        "findings_24h": dict(by_kind),
        "violations_24h": [json.loads(r["data"])["summary"] for r in open_rows if r["kind"] == "violation"][
            -10:
        ],
    }
