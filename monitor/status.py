"""The site status: the daemon's retained status message and `minewatch status`.

Kept apart from monitor.pipeline so that `minewatch status` loads only the store and the wire
format, not the daemon's numpy/scipy acoustics, MQTT and InfluxDB clients: importing the
pipeline made the command take 3-4.5 s on a busy 2-core machine, for a 0.1 s query.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from typing import Any

from monitor.canonical import to_us
from monitor.config import SiteConfig
from monitor.recent import MINUTE
from monitor.store import Store
from monitor.wire import format_ts

# Newest sound second of one sensor. The sound key is (site, ts_us, sensor): walking it
# backwards from the newest second stops at the sensor's last one, where MAX() over a
# UNION with readings read every row of the site.
_LAST_SOUND = "SELECT ts_us FROM sound WHERE site = ? AND sensor = ? ORDER BY ts_us DESC LIMIT 1"
# Newest reading of one sensor. The readings key is (site, sensor, kind, ts_us): one index
# seek per kind (a skip scan over the kinds the sensor has), not a scan of its readings.
_LAST_READING = """
WITH RECURSIVE kinds(kind) AS (
    SELECT MIN(kind) FROM readings WHERE site = :site AND sensor = :sensor
    UNION ALL
    SELECT (SELECT MIN(kind) FROM readings WHERE site = :site AND sensor = :sensor AND kind > kinds.kind)
    FROM kinds WHERE kinds.kind IS NOT NULL
)
SELECT MAX((SELECT MAX(ts_us) FROM readings WHERE site = :site AND sensor = :sensor AND kind = kinds.kind))
FROM kinds WHERE kinds.kind IS NOT NULL
"""


def last_data_us(store: Store, site: str, sensor: str) -> int | None:
    """Microseconds of the newest sound second or reading of a sensor, None if it never sent any."""
    sound = store.conn.execute(_LAST_SOUND, (site, sensor)).fetchone()
    reading = store.conn.execute(_LAST_READING, {"site": site, "sensor": sensor}).fetchone()
    found = [row[0] for row in (sound, reading) if row is not None and row[0] is not None]
    return max(found) if found else None


def site_status(
    store: Store, site: SiteConfig, now: datetime, online: dict[str, bool] | None = None
) -> dict[str, Any]:
    """The last minute per sensor and the open findings: the retained status and `minewatch status`."""
    last_minute: dict[str, list[float]] = defaultdict(list)
    for sensor_id, laeq in store.conn.execute(
        "SELECT sensor, LAeq FROM sound WHERE site = ? AND ts_us >= ? AND ts_us < ?",
        (site.id, to_us(now - MINUTE), to_us(now)),
    ):
        last_minute[sensor_id].append(laeq)
    sensors: dict[str, Any] = {}
    for sensor in site.sensors:
        last_us = last_data_us(store, site.id, sensor.id)
        entry: dict[str, Any] = {
            "kind": sensor.kind.value,
            "last_ts": format_ts(datetime.fromtimestamp(last_us / 1e6, UTC)) if last_us else None,
        }
        if online is not None:
            entry["online"] = online.get(sensor.id, False)
        mine = last_minute.get(sensor.id)
        if mine:
            entry["LAeq_1min"] = round(10 * math.log10(sum(10 ** (v / 10) for v in mine) / len(mine)), 1)
            entry["seconds"] = len(mine)
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
