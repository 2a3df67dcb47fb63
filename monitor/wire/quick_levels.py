"""The quick decoder of the common message: an unsigned levels payload, once per message.

Most of the input is one levels message per sensor per second. ``predecode`` parses it with
orjson and checks the usual shape in line (no field-by-field machinery); what it cannot take
goes to ``wire.decode`` with the parsed payload, so no payload is parsed twice. The daemon
runs it in the network thread (``Pipeline.predecode``), ahead of the pipeline's SQLite writes;
``wire.decode`` runs it itself otherwise. The time check needs the clock and stays in decode.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from monitor.config import SiteConfig
from monitor.errors import DecodeError
from monitor.wire.protocol import (
    DB_RANGE,
    KIND_MAX_BYTES,
    MAX_DURATION_S,
    PROTOCOL_VERSION,
    SENSOR_MESSAGES,
    parse_ts,
)
from rules.model import SoundLevels

_LEVEL_KEYS = frozenset(
    {"v", "ts", "duration_s", "LAeq", "LAFmax", "LCpeak", "LASmax", "LZpeak", "LAFmin", "LCeq", "LZeq"}
)
_REQUIRED_LEVEL_KEYS = frozenset({"ts", "duration_s", "LAeq", "LAFmax", "LCpeak"})
# "overload" (a meter's rare overloaded second) is not among them: such a message takes decode().
_MAX_LEVELS_BYTES = KIND_MAX_BYTES["levels"]


def levels_fast(data: dict[str, Any], site: str, sensor: str) -> SoundLevels | None:
    """The common, valid levels message without the field-by-field machinery; None -> slow path.

    Anything unusual (a missing or unknown field, a non-float, out of range) returns None
    and the full decoder produces the precise rejection.
    """
    lo, hi = DB_RANGE
    if data.keys() == _REQUIRED_LEVEL_KEYS:  # the usual message, its four floats checked in line
        duration, la, lmax, lc = data["duration_s"], data["LAeq"], data["LAFmax"], data["LCpeak"]
        if (
            type(duration) is float
            and type(la) is float
            and type(lmax) is float
            and type(lc) is float
            and 0 < duration <= MAX_DURATION_S
            and lo <= la <= hi
            and lo <= lmax <= hi
            and lo <= lc <= hi
            and lmax >= la - 0.05
        ):
            return SoundLevels(site, sensor, parse_ts(data["ts"]), duration, la, lmax, lc)
    if not _REQUIRED_LEVEL_KEYS <= data.keys() <= _LEVEL_KEYS:
        return None
    if data.get("v", PROTOCOL_VERSION) != PROTOCOL_VERSION:
        return None
    for key, value in data.items():
        if key == "ts" or key == "v":
            continue
        kind = type(value)
        if kind is not float and kind is not int:
            return None
        # NaN fails every comparison and lands in the slow path too.
        if not (0 < value <= MAX_DURATION_S if key == "duration_s" else lo <= value <= hi):
            return None
    la, lmax = float(data["LAeq"]), float(data["LAFmax"])
    if lmax < la - 0.05:
        return None
    get = data.get
    return SoundLevels(
        site,
        sensor,
        parse_ts(data["ts"]),
        float(data["duration_s"]),
        la,
        lmax,
        float(data["LCpeak"]),
        _optional(get("LASmax")),
        _optional(get("LZpeak")),
        _optional(get("LAFmin")),
        _optional(get("LCeq")),
        _optional(get("LZeq")),
    )


def _optional(value: float | None) -> float | None:
    return None if value is None else float(value)


def levels_sender(topic: str, sites: Mapping[str, SiteConfig], prefix: str) -> tuple[str, str] | None:
    """(site, sensor) when ``topic`` is the levels topic of a sensor that sends them unsigned."""
    parts = topic.split("/")
    if len(parts) != 5 or parts[4] != "levels" or parts[2] != "sensors" or parts[0] != prefix:
        return None
    site = sites.get(parts[1])
    if site is None:
        return None
    sensor = site.sensor(parts[3])
    if sensor is None or sensor.require_signature or "levels" not in SENSOR_MESSAGES[sensor.kind]:
        return None
    return site.id, sensor.id


def quick_levels(
    topic: str, payload: bytes, sites: Mapping[str, SiteConfig], prefix: str, max_payload_bytes: int
) -> SoundLevels | None:
    """decode() of the common message, a valid unsigned levels message, except the time check.

    None for anything else, and decode() then takes the message the full way, which names
    the field and the reason of a rejection. Needs no clock, so it can run ahead of the
    pipeline, in the network thread.
    """
    sender = levels_sender(topic, sites, prefix)
    return None if sender is None else quick_levels_payload(payload, *sender, max_payload_bytes)


def quick_levels_payload(
    payload: bytes, site: str, sensor: str, max_payload_bytes: int
) -> SoundLevels | None:
    """quick_levels once the topic is known to be a levels_sender's."""
    ahead = predecode(payload, site, sensor, max_payload_bytes)
    return ahead if isinstance(ahead, SoundLevels) else None


@dataclass(frozen=True, slots=True)
class Parsed:
    """A levels payload parsed ahead that missed the quick path: decode() goes on from it.

    ``ok`` false: orjson refused it (decode() parses it the strict way, to name the reason).
    """

    data: Any
    ok: bool = True


class Predecoder:
    """predecode for one configuration, called with a message's topic from the network thread.

    Depends on the configuration alone, not on a pipeline: the daemon's link keeps one while the
    pipeline is made anew (monitor/daemon/store_outage.py).
    """

    def __init__(self, sites: Mapping[str, SiteConfig], prefix: str, max_payload_bytes: int) -> None:
        self.sites, self.prefix, self.max_payload_bytes = sites, prefix, max_payload_bytes
        self._senders: dict[str, tuple[str, str]] = {}  # topic -> (site, sensor)

    def __call__(self, topic: str, payload: bytes) -> SoundLevels | Parsed | None:
        sender = self._senders.get(topic)
        if sender is None:
            sender = levels_sender(topic, self.sites, self.prefix)
            if sender is None:
                return None
            self._senders[topic] = sender  # configured sensors' topics only: bounded
        return predecode(payload, *sender, self.max_payload_bytes)


def predecode(payload: bytes, site: str, sensor: str, max_payload_bytes: int) -> SoundLevels | Parsed | None:
    """Parse a levels_sender's payload once: its SoundLevels (all but the time check) on the
    quick path, else what was parsed, for decode(..., parsed=) to finish; None if too long
    to parse here (decode() rejects it, unparsed)."""
    if len(payload) > _MAX_LEVELS_BYTES or len(payload) > max_payload_bytes:
        return None
    try:
        data = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return Parsed(None, ok=False)
    # A key given twice ({"LAeq": 90, "LAeq": 50}) leaves fewer keys than '":' marks: decode()
    # reads it strictly and refuses it. One count over ~100 bytes.
    if type(data) is not dict or "sig" in data or payload.count(b'":') != len(data):
        return Parsed(data)
    try:
        levels = levels_fast(data, site, sensor)
    except DecodeError:  # a bad time: decode() says so
        return Parsed(data)
    return Parsed(data) if levels is None else levels
