"""Who a rejected message is journaled under, and rate-limited log lines and publications for
rejections and conflicts.

A hostile or broken sensor can send thousands of bad messages a second, with invented
sensor and field names: every one is journaled (the store), but ``…/rejected`` carries at most
PUBLISHED_PER_MINUTE a minute per sender, and the log one line per configured sensor and field
per minute: each through a LogGate, whose table is bounded. (300,000 publications filled the
MQTT client's queue, and the findings and alerts of that minute were never published; the
next one published says how many were held back.)
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from typing import Any

from monitor.config import SiteConfig
from monitor.wire.protocol import format_ts, shown

# The daemon's rejection lines have always come from the pipeline's logger: kept, for log filters.
log = logging.getLogger("minewatch.pipeline")

LOG_GATE_S = 60.0  # a rejection log line per gate key per minute
MAX_LOG_GATES = 1024
MAX_GATES_PER_SENSOR = 16  # field names come from the payload: a sensor's distinct keys are capped
UNATTRIBUTED_SITE = "_"  # the site level of …/rejected for topics of no configured site

GateKey = tuple[str, str, str]  # site, sensor, field ("" for a site's shared key)
PUBLISHED_PER_MINUTE = 60  # …/rejected messages per sender (site, configured sensor or "")


def sender_of(topic: str, prefix: str, sites: Mapping[str, SiteConfig]) -> tuple[str, str]:
    """(site, sensor) a rejected message is journaled and logged under.

    The site is the topic's second level when that is a configured site, whatever the
    shape of the rest (a topic of the wrong shape is still that site's business); "*"
    otherwise. The sensor is "" unless it is configured for that site: invented names
    are not keys of anything.
    """
    parts = topic.split("/", 4)
    if len(parts) < 2 or parts[0] != prefix or parts[1] not in sites:
        return "*", ""
    site = parts[1]
    if len(parts) >= 4 and parts[2] == "sensors":
        sensor = parts[3]
        if sites[site].sensor(sensor) is not None:
            return site, sensor
    return site, ""


class LogGate:
    """At most ``per_window`` log lines (or publications) per key in each LOG_GATE_S from the
    first, counting those held back. ``clock``: monotonic seconds (default: time.monotonic)."""

    def __init__(self, per_window: int = 1, clock: Callable[[], float] | None = None) -> None:
        self.per_window, self._clock = per_window, clock
        self.gates: dict[GateKey, list[Any]] = {}  # key -> [window start, let through, held back]

    def __len__(self) -> int:
        return len(self.gates)

    def __iter__(self) -> Iterator[GateKey]:
        return iter(self.gates)

    def admit(self, key: GateKey) -> int | None:
        """None if ``key`` had its ``per_window`` in the current window, else how many were held
        back since (said with this one)."""
        wall = time.monotonic() if self._clock is None else self._clock()
        gate = self.gates.get(key)
        if gate is None:
            if len(self.gates) >= MAX_LOG_GATES:
                self.gates = {k: g for k, g in self.gates.items() if wall - g[0] < LOG_GATE_S}
            if len(self.gates) >= MAX_LOG_GATES:
                key = (key[0], "", "")  # still full within the minute: the site's shared key
            elif key[2] and sum(k[:2] == key[:2] for k in self.gates) >= MAX_GATES_PER_SENSOR:
                key = (*key[:2], "*")  # a sensor's reasons beyond the first few share a line
            gate = self.gates.get(key)
        if gate is not None and wall - gate[0] < LOG_GATE_S:
            if gate[1] < self.per_window:
                gate[1] += 1
                return 0
            gate[2] += 1
            return None
        self.gates[key] = [wall, 1, 0]
        return 0 if gate is None else int(gate[2])

    def rejection(self, site: str, sensor: str, field_name: str, topic: str, reason: str) -> None:
        """One log line per configured sensor and field per minute; per site for everything else.

        Unconfigured sensors share their site's gate, so a thousand invented names make one
        line a minute, and the gate table holds at most MAX_LOG_GATES keys (expired ones are
        dropped first; past the cap, a site's rejections share one key).
        """
        suppressed = self.admit((site, sensor, field_name if sensor else ""))
        if suppressed is None:
            return
        more = f" ({suppressed} more like it in the last minute not logged)" if suppressed else ""
        if sensor:
            log.warning("Rejected message on %s: %s%s", shown(topic, 200), reason, more)
        else:
            log.warning(
                "Rejected message on %s: %s%s; rejections of unconfigured sensors and topics of site %s"
                " are logged once a minute",
                shown(topic, 200),
                reason,
                more,
                site,
            )

    def conflict(self, site: str, sensor: str, kind: str, ts: datetime) -> None:
        """A resend of a kept reading with other content (journaled by the store): a line a minute."""
        suppressed = self.admit((site, sensor, "conflict"))
        if suppressed is None:
            return
        more = f" ({suppressed} more in the last minute not logged)" if suppressed else ""
        log.warning(
            "Sensor %s/%s resent its %s of %s with other content: the first is kept, the conflict"
            " journaled%s",
            site,
            sensor,
            kind,
            format_ts(ts),
            more,
        )
