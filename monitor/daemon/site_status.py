"""The site status: the daemon's retained status message and `minewatch status`.

Kept apart from monitor.daemon.pipeline so that `minewatch status` loads only the store and the wire
format, not the daemon's numpy/scipy acoustics, MQTT and InfluxDB clients: importing the
pipeline made the command take 3-4.5 s on a busy 2-core machine, for a 0.1 s query.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from monitor.config import SiteConfig
from monitor.daemon.status_findings import STATUS_DAY, StatusFindings
from monitor.journal.episodes import site_episodes
from monitor.journal.queries import notices_in_procedure
from monitor.journal.store import Store
from monitor.wire.canonical import from_us, to_us
from monitor.wire.protocol import format_ts
from rules.deadlines import deadline_words
from rules.quantities import quantity_text
from rules.times import MINUTE, local_stamp

STATUS_EPISODES = 10  # the status names its newest episodes of the day, this many


def site_status(
    store: Store,
    site: SiteConfig,
    now: datetime,
    online: dict[str, bool] | None = None,
    *,
    episode_gap_s: float = 300.0,
    titles: Mapping[str, str] | None = None,
    findings: StatusFindings | None = None,
) -> dict[str, Any]:
    """The last minute per sensor, the findings and the violation episodes of the last 24 hours,
    as the record stood at ``now`` (nothing received for later times counts): the retained
    status, `minewatch status [--at]` and the portal's status page.

    ``episode_gap_s`` is the site profile's: episodes are the ones the notices tell;
    ``titles`` its standards' titles, for the episodes' text.
    ``findings``: the daemon's, followed from one status to the next instead of read back
    (monitor.daemon.status_findings); the same findings, counted and folded the same way.
    """
    # Energy and seconds per sensor: a period counts for its duration (not all meters send 1-s periods).
    last_minute: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for sensor_id, laeq, duration_s in store.sound_laeq_between(site.id, now - MINUTE, now):
        totals = last_minute[sensor_id]
        totals[0] += duration_s * 10 ** (laeq / 10)
        totals[1] += duration_s
    overloaded = store.overloaded_s_between(site.id, now - MINUTE, now)
    sensors: dict[str, Any] = {}
    for sensor in site.sensors:
        last_us = store.last_data_us(site.id, sensor.id, through=now)
        entry: dict[str, Any] = {
            "kind": sensor.kind.value,
            "last_ts": format_ts(datetime.fromtimestamp(last_us / 1e6, UTC)) if last_us else None,
        }
        if online is not None:
            entry["online"] = online.get(sensor.id, False)
        energy, seconds = last_minute.get(sensor.id, (0.0, 0.0))
        if sensor.id in overloaded:  # the meter clipped: its minute reads low (only then in the message)
            entry["overloaded_s"] = round(overloaded[sensor.id], 1)
        if seconds > 0:
            laeq = 10 * math.log10(energy / seconds)
            entry["LAeq_1min"] = round(laeq, 1)
            entry["seconds"] = int(seconds) if seconds.is_integer() else round(seconds, 1)
            # The minute as every surface says it (`minewatch status`, the portal's live status).
            entry["LAeq_1min_text"] = _minute_text(laeq, entry.get("overloaded_s"))
        sensors[sensor.id] = entry
    day_start = now - STATUS_DAY
    kinds: Iterable[tuple[str, int]]  # (kind, end_us) of the current findings starting in the day
    if findings is None:
        kinds = ((r["kind"], r["end_us"]) for r in store.current_findings(site.id, day_start, now))
    else:
        findings.refresh(now, timedelta(seconds=episode_gap_s))
        kinds = findings.kinds_between(day_start, now)
    by_kind = Counter(kind for kind, end_us in kinds if end_us <= to_us(now))  # judged by then
    between = None if findings is None else findings.between
    episodes = site_episodes(store.conn, site.id, day_start, now, episode_gap_s, as_of=now, between=between)
    return {
        "site": site.id,
        "name": site.name,
        "ts": format_ts(now),
        "ts_local": local_stamp(now, site.timezone),
        "timezone": site.timezone,
        "sensors": sensors,
        "findings_24h": dict(sorted(by_kind.items())),
        "episodes_24h": [e.to_json(site.timezone, titles) for e in episodes[-STATUS_EPISODES:]],
        "notices": _notices(store, site, now, titles or {}),
    }


def _minute_text(laeq: float, overloaded_s: float | None) -> str:
    """'62.4 dB(A)', or for a meter overloaded in the minute (its level a lower bound)
    'at least 81.6 dB(A) (meter overloaded 5 s: not judged below the limit)'."""
    level = quantity_text(laeq, "dB(A)")
    if not overloaded_s:
        return level
    return f"at least {level} (meter overloaded {overloaded_s:g} s: not judged below the limit)"


def _notices(
    store: Store, site: SiteConfig, now: datetime, titles: Mapping[str, str]
) -> list[dict[str, Any]]:
    """The site's notices not closed at ``now``, each with its cure deadline as the notice states
    it and how far off it is: what the operator has to act on, and by when."""
    tz = ZoneInfo(site.timezone)
    listed = []
    for row in notices_in_procedure(store.conn, site.id, now):
        deadline = from_us(row["deadline_us"])
        title = titles.get(row["standard"], row["standard"])
        where = f" ({row['section']})" if row["section"] else ""
        deadline_local = local_stamp(deadline, site.timezone)
        # Escalated: the cure period is over, the Town's citation is what follows.
        escalated = row["status"] == "escalated"
        deadline_in = "" if escalated else deadline_words(deadline, now, tz)
        state = (
            f"escalated (citation recommended); its cure deadline was {deadline_local}"
            if escalated
            else f"{row['status'].replace('_', ' ')}, correct by {deadline_local} ({deadline_in})"
        )
        listed.append(
            {
                "id": row["id"],
                "standard": row["standard"],
                "title": title,
                "section": row["section"],
                "status": row["status"],
                "deadline": format_ts(deadline),
                "deadline_local": deadline_local,
                "deadline_in": deadline_in,
                "text": f"{row['id']} {title}{where}: {state}",  # what every surface shows
            }
        )
    return listed
