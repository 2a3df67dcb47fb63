"""The protocol's vocabulary: version, message kinds, value ranges, topics and the time format.

What both sides of the wire share and the quick levels path needs, kept apart from the codec
(monitor.wire.codec) so that neither imports the other's internals. docs/PROTOCOL.md is the prose.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from monitor.errors import DecodeError
from rules.model import SensorKind

PROTOCOL_VERSION = 1
AUDIO_MAGIC = b"MWA1"
AUDIO_FORMATS: dict[str, tuple[str, int]] = {"s16le": ("<i2", 2), "s32le": ("<i4", 4), "f32le": ("<f4", 4)}
# A seismograph's waveform chunk: b"MWS1", a 4-byte header length, a JSON header and the
# samples of the four channels (T, V, L, MIC) interleaved, in one of AUDIO_FORMATS.
WAVEFORM_MAGIC = b"MWS1"
SEISMIC_CHANNELS = 4
SEISMIC_RATE_RANGE = (1024.0, 65536.0)  # samples/s per channel; 1,024 is the least a blast needs
MAX_SEISMIC_RECORD_S = 120.0
MAX_WAVEFORM_CHUNKS = 4096

# Which input message a sensor kind may send (a message for another kind is rejected).
SENSOR_MESSAGES: dict[SensorKind, frozenset[str]] = {
    SensorKind.SOUND: frozenset({"levels", "audio", "bands", "status"}),
    SensorKind.LIGHT: frozenset({"light", "status"}),
    SensorKind.SKY: frozenset({"light", "status"}),
    SensorKind.WEATHER: frozenset({"weather", "status"}),
    SensorKind.TURBIDITY: frozenset({"turbidity", "status"}),
    SensorKind.SEISMOGRAPH: frozenset({"waveform", "seismic", "status"}),
}
# The largest payload of each sensor message of a fixed, small shape: its fields at their
# bounds (docs/PROTOCOL.md, "Length bounds") and room for whitespace. Checked on the length
# alone, before anything parses the payload, so a padded message costs nothing to refuse.
# audio and light (with a burst) and the events are bounded by daemon.max_payload_bytes.
KIND_MAX_BYTES: dict[str, int] = {
    "levels": 4096,
    "weather": 4096,
    "turbidity": 4096,
    "bands": 16384,  # 64 bands
    "status": 16384,  # firmware: 1000 characters, JSON-escaped up to 6 bytes each
    "seismic": 16384,  # an event's summary and its instrument
    # The cap a seismograph splits an event's waveforms under (10 s at 16,384 samples/s of four
    # float channels is 2.6 MB: eleven chunks); well inside the broker's 2 MiB max_packet_size.
    "waveform": 262_144,
}
BUILTIN_EVENTS = frozenset({"blast-notice", "blast", "truck", "work", "temporary-lighting"})
OUTPUT_TOPICS = frozenset(
    {"violations", "findings", "alerts", "notices", "status", "rejected", "anchors", "daemon"}
)

# Plausible physical ranges; outside them a value is a sensor fault, not a measurement.
DB_RANGE = (-20.0, 200.0)
LUX_RANGE = (0.0, 200_000.0)
WIND_RANGE = (0.0, 100.0)
NTU_RANGE = (0.0, 100_000.0)
MAX_DURATION_S = 3600.0
MAX_BURST_SAMPLES = 100_000
MAX_BANDS = 64  # one-third octaves from 5 Hz to 40 kHz are 40
MAX_EVENT_FIELD_CHARS = 4096  # a generic event field's value, as canonical JSON


@dataclass(frozen=True, slots=True)
class Topic:
    site: str
    group: str  # "sensors" | "events" | an output name
    sensor: str  # "" unless group == "sensors"
    kind: str  # message kind: "levels", "blast", ...


@dataclass(frozen=True, slots=True)
class Limits:
    """How far from `now` a timestamp may lie, and how big a payload may be."""

    max_future_s: float = 120.0
    max_past_s: float = 30 * 86400.0
    max_payload_bytes: int = 1_048_576
    # No timestamp after it, whatever `now` is: the data clock's bound, whose `now` is the data's
    # own time (this machine's clock plus daemon.max_age_s; None: `max_future_s` alone).
    latest: datetime | None = None


DEFAULT_LIMITS = Limits()


# --------------------------------------------------------------------------- topics


def parse_topic(topic: str, prefix: str = "minewatch") -> Topic:
    parts = topic.split("/")
    if len(parts) < 3 or parts[0] != prefix or not parts[1]:
        raise DecodeError("topic", f"{shown(topic, MAX_TOPIC_SHOWN)} is not under {prefix}/{{site}}/")
    site = parts[1]
    if parts[2] == "sensors" and len(parts) == 5 and parts[3] and parts[4]:
        return Topic(site, "sensors", parts[3], parts[4])
    if parts[2] == "events" and len(parts) == 4 and parts[3]:
        return Topic(site, "events", "", parts[3])
    if len(parts) == 3 and parts[2] in OUTPUT_TOPICS:
        return Topic(site, parts[2], "", parts[2])
    raise DecodeError("topic", f"{shown(topic, MAX_TOPIC_SHOWN)} is not a minewatch topic")


INPUT_GROUPS = ("sensors", "events")


def input_filters(sites: Iterable[str], prefix: str = "minewatch") -> list[str]:
    """The topic filters a daemon owning ``sites`` subscribes to: each site's sensors and events."""
    sites = list(sites)
    return [f"{prefix}/{s}/{group}/#" for group in INPUT_GROUPS for s in sites]


def why_unread(topic: str, sites: Collection[str], prefix: str = "minewatch") -> str | None:
    """Why a daemon subscribed to ``input_filters(sites, prefix)`` never receives ``topic``.

    None when it receives it (whether it then accepts or rejects the message). The broker
    delivers nothing outside the filters, so such a message is not even rejected: this is what
    ``minewatch check-topics`` tells an installer about each topic it sees.
    """
    parts = topic.split("/")
    if parts[0] != prefix or len(parts) < 2:
        return f"not under {prefix}/ (broker.topic_prefix)"
    site = parts[1]
    if site not in sites:
        return f"site {name_shown(site)} is not configured{_did_you_mean(site, sites)}"
    if len(parts) < 3:  # "a/#" matches "a" itself, but the site's own level is not a filter
        return f"a topic of site {site} needs a third level, one of {', '.join(INPUT_GROUPS)}"
    if parts[2] not in INPUT_GROUPS:
        return f"level {name_shown(parts[2])} is not one of {', '.join(INPUT_GROUPS)}" + _did_you_mean(
            parts[2], INPUT_GROUPS
        )
    return None


def is_output_topic(topic: str, prefix: str = "minewatch") -> bool:
    """One of the daemon's own outputs (``{prefix}/{site}/findings``, ...), of any site or ``_``."""
    parts = topic.split("/")
    return len(parts) == 3 and parts[0] == prefix and parts[2] in OUTPUT_TOPICS


def _did_you_mean(word: str, choices: Collection[str]) -> str:
    close = difflib.get_close_matches(word, sorted(choices), n=1, cutoff=0.75)
    return f" (did you mean {close[0]}?)" if close else ""


def sensor_topic(site: str, sensor: str, kind: str, prefix: str = "minewatch") -> str:
    return f"{prefix}/{site}/sensors/{sensor}/{kind}"


def event_topic(site: str, kind: str, prefix: str = "minewatch") -> str:
    return f"{prefix}/{site}/events/{kind}"


def output_topic(site: str, kind: str, prefix: str = "minewatch") -> str:
    return f"{prefix}/{site}/{kind}"


# --------------------------------------------------------------------------- time


# RFC 3339 section 5.6 date-time (the "T" may be a space or lower case, section 5.6 NOTE),
# ASCII digits only; the fraction is bounded (nanoseconds) like the whole text below.
_RFC3339 = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,9})?([Zz]|[+-][0-9]{2}:[0-9]{2})?"
)
MAX_TIME_CHARS = 35  # "2026-06-15T06:30:00.123456789-05:00"
MAX_NAME_CHARS = 64  # a field or band name, as echoed in a rejection
MAX_SHOWN_CHARS = 40  # of a hostile value quoted back in a rejection


MAX_TOPIC_SHOWN = 200


def name_shown(value: str) -> str:
    """A name from a topic, as a rejection shows it: whole when short, else cut and quoted."""
    return value if len(value) <= MAX_NAME_CHARS else shown(value)


def shown(value: str, limit: int = MAX_SHOWN_CHARS) -> str:
    """``value`` for a rejection message: its repr, cut short (input may be a megabyte long)."""
    if len(value) <= limit:
        return repr(value)
    return f"{value[:limit]!r}... ({len(value)} characters)"


@lru_cache(maxsize=4096)  # a site's sensors all send the same second: parse it once
def _rfc3339_utc(text: str) -> datetime | None:
    """The UTC time of an RFC 3339 string; None if it has no offset; ValueError if not a time.

    Callers bound ``text`` to MAX_TIME_CHARS first: the cache is keyed by it.
    """
    match = _RFC3339.fullmatch(text)
    if match is None:
        raise ValueError(text)
    # fromisoformat keeps microseconds of a longer fraction (3.11) and checks the calendar.
    parsed = datetime.fromisoformat(text.replace("z", "Z").replace("t", "T"))
    return None if match.group(1) is None else parsed.astimezone(UTC)


# An integer literal of more digits than this cannot be a double (10**309 > max float):
# the strict JSON parse reads it as a LongNumber, never as a Python int (which would make
# float(), math.isfinite() and, past 4,300 digits, int() itself raise).
MAX_INT_DIGITS = 308


class LongNumber(float):
    """An integer literal too long for a double, as parsed: an infinite float (so every check
    for a finite number refuses it) that remembers its length for the rejection."""

    digits: int

    def __new__(cls, digits: int) -> LongNumber:
        number = super().__new__(cls, math.inf)
        number.digits = digits
        return number

    def reason(self) -> str:
        return f"number too long ({self.digits} digits)"

    def __repr__(self) -> str:  # as quoted in a rejection; JSON output is float's own
        return f"a {self.digits}-digit number"


def parse_json_int(text: str) -> int | float:
    """json.loads(parse_int=): an int, or a LongNumber for a literal no double can hold."""
    digits = len(text) - (text[0] == "-")
    return int(text) if digits <= MAX_INT_DIGITS else LongNumber(digits)


def parse_ts(value: Any, name: str = "ts") -> datetime:
    """RFC 3339 with an offset, or Unix epoch seconds; returned in UTC."""
    if isinstance(value, str):  # first: every levels message's time, once per message
        # Bounded before anything else looks at it (the parse cache is keyed by the text).
        if len(value) > MAX_TIME_CHARS:
            raise DecodeError(
                name, f"{shown(value)} is not an RFC 3339 time (longer than {MAX_TIME_CHARS} characters)"
            )
        try:
            parsed = _rfc3339_utc(value)
        except ValueError:
            raise DecodeError(name, f"{value!r} is not an RFC 3339 time") from None
        if parsed is None:
            raise DecodeError(name, f"{value!r} has no UTC offset (add Z or +hh:mm)")
        return parsed
    if isinstance(value, bool):
        raise DecodeError(name, "expected an RFC 3339 time or epoch seconds, got a boolean")
    if isinstance(value, int | float):
        if isinstance(value, LongNumber):
            raise DecodeError(name, value.reason())
        if not math.isfinite(value):
            raise DecodeError(name, "not a finite number")
        try:
            return datetime.fromtimestamp(value, UTC)
        except (OverflowError, OSError, ValueError):
            raise DecodeError(name, f"{value} is out of range for a time") from None
    raise DecodeError(name, f"expected an RFC 3339 time or epoch seconds, got {type(value).__name__}")


def format_ts(ts: datetime) -> str:
    """UTC, RFC 3339, millisecond precision at most, 'Z' suffix."""
    ts = ts.astimezone(UTC)
    text = ts.isoformat(timespec="milliseconds" if ts.microsecond else "seconds")
    return text.replace("+00:00", "Z")


def _span(seconds: float) -> str:
    for unit, size in (("years", 365.25 * 86400), ("days", 86400), ("hours", 3600), ("minutes", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} s"


def check_time(ts: datetime, now: datetime, limits: Limits, name: str = "ts") -> None:
    ahead = (ts - now).total_seconds()
    if ahead > limits.max_future_s:
        raise DecodeError(name, f"{format_ts(ts)} is {_span(ahead)} in the future")
    if limits.latest is not None and ts > limits.latest:
        raise DecodeError(
            name,
            f"{format_ts(ts)} is after {format_ts(limits.latest)}, the latest time the data clock"
            " takes (this machine's clock plus daemon.max_age_s)",
        )
    if -ahead > limits.max_past_s:
        raise DecodeError(name, f"{format_ts(ts)} is {_span(-ahead)} in the past")
