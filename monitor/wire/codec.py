"""The payload codec: the one place that turns MQTT topics and payloads into typed
records and back. The daemon decodes with it; the edge publishers and the
simulator encode with it. docs/PROTOCOL.md describes the same contract in prose.

Every rejection is a DecodeError naming the field and the reason, e.g.
``LAeq: not a number`` or ``ts: 2031-01-01T00:00:00Z is 5.1 years in the future``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, TypeAlias

import orjson

from monitor.config import SensorConfig, SiteConfig
from monitor.errors import DecodeError
from monitor.wire.canonical import canonical_json, from_us, half_pair_at
from monitor.wire.protocol import (
    AUDIO_FORMATS,
    AUDIO_MAGIC,
    BUILTIN_EVENTS,
    DB_RANGE,
    DEFAULT_LIMITS,
    KIND_MAX_BYTES,
    LUX_RANGE,
    MAX_BANDS,
    MAX_BURST_SAMPLES,
    MAX_DURATION_S,
    MAX_EVENT_FIELD_CHARS,
    MAX_NAME_CHARS,
    MAX_SEISMIC_RECORD_S,
    MAX_TOPIC_SHOWN,
    MAX_WAVEFORM_CHUNKS,
    NTU_RANGE,
    PROTOCOL_VERSION,
    SEISMIC_CHANNELS,
    SEISMIC_RATE_RANGE,
    SENSOR_MESSAGES,
    WAVEFORM_MAGIC,
    WIND_RANGE,
    Limits,
    LongNumber,
    Topic,
    check_time,
    event_topic,
    format_ts,
    name_shown,
    parse_json_int,
    parse_topic,
    parse_ts,
    sensor_topic,
    shown,
)
from monitor.wire.quick_levels import Parsed, levels_sender, predecode
from rules.model import (
    VEHICLE_PRESENT,
    AxisPeak,
    Blast,
    BlastNotice,
    Event,
    Finding,
    FindingKind,
    GenericEvent,
    LightSummary,
    Measurement,
    Reading,
    SeismicEvent,
    SensorStatus,
    SoundLevels,
    TemporaryLighting,
    TruckPassage,
    TurbidityReading,
    WeatherReading,
    WorkKind,
    WorkPeriod,
)
from rules.numbers import shown_number
from rules.scaled_distance import FT_PER_M, LB_PER_KG


@dataclass(frozen=True, slots=True)
class AudioBlock:
    """Raw PCM from a sound sensor; the daemon runs it through acoustics."""

    site: str
    sensor: str
    ts: datetime  # time of the first sample
    seq: int
    sample_rate: int
    sample_format: str  # key of AUDIO_FORMATS
    pcm: bytes = field(repr=False)

    @property
    def n_samples(self) -> int:
        return len(self.pcm) // AUDIO_FORMATS[self.sample_format][1]


@dataclass(frozen=True, slots=True)
class BandLevels:
    """One-third-octave Z-weighted band levels (nominal Hz -> dB) over one period."""

    site: str
    sensor: str
    ts: datetime
    duration_s: float
    bands: Mapping[float, float]


@dataclass(frozen=True, slots=True)
class WaveformChunk:
    """One part of a seismograph event's waveforms (an event is split under the packet cap).

    ``ts`` is the time of the event's first sample (the same in every chunk of the event);
    ``offset`` the index of this chunk's first sample in the event. Samples are the four
    channels T, V, L (mm/s) and MIC (Pa) interleaved, ``scale`` units per count each.
    """

    site: str
    sensor: str
    event_id: str
    ts: datetime
    chunk: int
    chunks: int
    offset: int
    samples_total: int
    sample_rate: int
    sample_format: str  # key of AUDIO_FORMATS
    scale: tuple[float, ...]
    ranges: tuple[float, ...]  # each channel's full scale in its unit (clipping is judged on it)
    mic_low_hz: float
    data: bytes = field(repr=False)

    @property
    def n_samples(self) -> int:
        return len(self.data) // (AUDIO_FORMATS[self.sample_format][1] * SEISMIC_CHANNELS)

    def header(self) -> dict[str, Any]:
        """The chunk's JSON header (what the wire carries before the samples, less v and sig)."""
        return {
            "ts": format_ts(self.ts),
            "event_id": self.event_id,
            "chunk": self.chunk,
            "chunks": self.chunks,
            "offset": self.offset,
            "samples_total": self.samples_total,
            "sample_rate": self.sample_rate,
            "format": self.sample_format,
            "scale": list(self.scale),
            "range": list(self.ranges),
            "mic_low_hz": self.mic_low_hz,
        }


@dataclass(frozen=True, slots=True)
class SeismicSummary:
    """A seismograph's own summary of an event (computed at the edge), with its instrument."""

    site: str
    sensor: str
    event_id: str
    ts: datetime  # the event's first sample
    duration_s: float
    payload: Mapping[str, Any]  # the message as checked (stored as it came)

    @property
    def end(self) -> datetime:
        return self.ts + timedelta(seconds=self.duration_s)


SensorMessage: TypeAlias = Reading | SensorStatus | BandLevels | SeismicSummary
Message: TypeAlias = Reading | Event | SensorStatus | AudioBlock | BandLevels | WaveformChunk | SeismicSummary


# --------------------------------------------------------------------------- JSON fields


def _reject_constant(token: str) -> Any:
    raise DecodeError("payload", f"{token} is not allowed (values must be finite numbers)")


# orjson (3.8.3 here) recurses without bound and overflows the C stack on a payload nested some
# 200,000 deep: one light message of 1 MB killed the daemon, and again on every redelivery. More
# brackets than any message of the protocol holds go to json, whose recursion is bounded.
_ORJSON_MAX_BRACKETS = 4096


def _load_json(payload: bytes, parsed: Parsed | None = None) -> dict[str, Any]:
    # orjson parses the usual valid payload ~10x faster than json; what it refuses is
    # parsed again by json below, which names the precise reason in the rejection.
    if parsed is not None and parsed.ok:  # parsed ahead already (monitor.wire.quick_levels)
        data = parsed.data
    elif parsed is not None or payload.count(b"[") + payload.count(b"{") > _ORJSON_MAX_BRACKETS:
        data = None
    else:
        try:
            data = orjson.loads(payload)
        except orjson.JSONDecodeError:
            data = None
    # The strict reader names what orjson refused, and refuses a key given twice, which orjson
    # takes (the last one wins): the few payloads whose keys the count cannot vouch for go to it.
    if data is None or keys_may_repeat(payload, data):
        data = _load_json_strictly(payload)
    if not isinstance(data, dict):
        raise DecodeError("payload", f"expected a JSON object, got {type(data).__name__}")
    version = data.get("v", PROTOCOL_VERSION)
    if version != PROTOCOL_VERSION:
        raise DecodeError(
            "v", f"protocol version {version!r} is not supported (this daemon speaks {PROTOCOL_VERSION})"
        )
    return data


def keys_may_repeat(payload: bytes, data: Any) -> bool:
    """Whether a parsed payload might have held a key twice, which orjson and json both take
    silently, the last one winning: {"LAeq": 90, "LAeq": 50} was stored as 50, while a reader
    of the journaled bytes that keeps the first would read 90. Every key is followed by '":',
    so when the payload holds as many of those as the parsed objects hold keys, none repeated.
    More (a string holding '":', a space before a colon) sends it to the strict reader, which
    tells. Lists are walked by their first item: a dict behind a number is missed, which only
    makes the count short and the payload read strictly."""
    return payload.count(b'":') != _keys_in(data)


def _keys_in(data: Any) -> int:
    # Only objects and lists go on the stack: a payload of a bare number (``1``) or a list of a
    # list and a number (``[[1], 2]``) has nothing to index, and is refused after for its shape.
    # The type tests are written out, not a helper's: this runs for every message (a call per
    # value cost a sound reading 0.1 us, measured).
    count, stack = 0, [data] if type(data) is dict or type(data) is list else []
    while stack:
        item = stack.pop()
        if type(item) is dict:
            count += len(item)
            stack.extend(v for v in item.values() if type(v) is dict or type(v) is list)
        elif item and (type(item[0]) is dict or type(item[0]) is list):
            stack.extend(v for v in item if type(v) is dict or type(v) is list)
    return count


def _keys_once(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    data = dict(pairs)
    if len(data) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DecodeError(
                    "payload", f"key {shown(key, 40)} is given twice in one object; give each key once"
                )
            seen.add(key)
    return data


def _load_json_strictly(payload: bytes) -> Any:
    try:
        text = payload.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DecodeError(
            "payload", f"not UTF-8 (byte 0x{payload[exc.start]:02x} at offset {exc.start})"
        ) from None
    try:
        data = json.loads(
            text, parse_constant=_reject_constant, parse_int=parse_json_int, object_pairs_hook=_keys_once
        )
    except json.JSONDecodeError as exc:
        raise DecodeError(
            "payload", f"not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        ) from None
    except ValueError as exc:  # a number json cannot convert (parse_json_int takes the known ones)
        raise DecodeError("payload", f"a number cannot be read ({shown(str(exc), 80)})") from None
    except RecursionError:
        raise DecodeError("payload", "JSON nested too deeply") from None
    # Only here can a string hold half a surrogate pair: orjson refuses one.
    found = half_pair_at(data)
    if found is not None:
        raise DecodeError(found[0] or "payload", found[1])
    return data


def _printable(name: str, value: str) -> None:
    """Refuse a name holding what is no printed character: a control (a line break, a terminal's
    ESC), a format character (a right-to-left override) or a separator other than the space.
    Shown as it is, such a name could rewrite what a terminal or a page shows around it."""
    if not value.isprintable():
        bad = next(c for c in value if not c.isprintable())
        raise DecodeError(
            name, f"holds U+{ord(bad):04X}, not a printed character; a name is one line of text"
        )


class _OutOfRange(DecodeError):
    """A number past its plausible bound, shown as sent: an integer in digits, a bound too
    (seq: 1208925819614629174706176 is above the plausible maximum 9223372036854775808).

    orjson reads an integer literal past 64 bits as a float; decode() reads such a payload again
    the strict way (see ``as_sent``) to show the digits sent, not the float's 1.20893e+24."""

    def __init__(self, field: str, value: float, relation: str, bound: float) -> None:
        self.value, self.relation, self.bound = value, relation, bound
        super().__init__(field, f"{shown_number(value)} is {relation} {shown_number(bound)}")

    def as_sent(self, json_text: bytes) -> DecodeError:
        """This refusal with the integer ``json_text`` (the object the field was read from) holds
        for the field, if the parser made a float of it; else itself."""
        if type(self.value) is not float or not self.value.is_integer():
            return self
        try:
            sent = _load_json_strictly(json_text).get(self.field)
        except (DecodeError, AttributeError):
            return self
        if type(sent) is not int or float(sent) != self.value:  # the float the parser made of it
            return self
        return _OutOfRange(self.field, sent, self.relation, self.bound)


class _Fields:
    """Typed reads from a payload object; every unknown field is rejected at the end."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data
        self.used = {"v", "sig"}

    def _raw(self, name: str, required: bool) -> Any:
        self.used.add(name)
        if name not in self.data or self.data[name] is None:
            if required:
                raise DecodeError(name, "missing")
            return None
        return self.data[name]

    def number(
        self, name: str, *, required: bool = True, lo: float | None = None, hi: float | None = None
    ) -> float | None:
        value = self._raw(name, required)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise DecodeError(name, "not a number")
        if isinstance(value, LongNumber):
            raise DecodeError(name, value.reason())
        number = float(value)
        if not math.isfinite(number):
            raise DecodeError(name, "not a finite number")
        if lo is not None and number < lo:
            raise _OutOfRange(name, value, "below the plausible minimum", lo)
        if hi is not None and number > hi:
            raise _OutOfRange(name, value, "above the plausible maximum", hi)
        return number

    def req_number(self, name: str, lo: float | None = None, hi: float | None = None) -> float:
        value = self.number(name, required=True, lo=lo, hi=hi)
        assert value is not None
        return value

    def text(self, name: str, *, required: bool = True, max_len: int = 1000) -> str | None:
        value = self._raw(name, required)
        if value is None:
            return None
        if not isinstance(value, str):
            raise DecodeError(name, f"expected a string, got {type(value).__name__}")
        if len(value) > max_len:  # before anything else reads it
            raise DecodeError(name, f"longer than {max_len} characters")
        if required and not value.strip():
            raise DecodeError(name, "empty")
        return value

    def req_text(self, name: str, max_len: int = 1000) -> str:
        value = self.text(name, required=True, max_len=max_len)
        assert value is not None
        return value

    def ident(self, name: str, max_len: int = 128, *, required: bool = True) -> str | None:
        """A name others will print, link and file under (a blast's id): text, one printable line."""
        value = self.text(name, required=required, max_len=max_len)
        if value is not None:
            _printable(name, value)
        return value

    def req_ident(self, name: str, max_len: int = 128) -> str:
        value = self.ident(name, max_len)
        assert value is not None
        return value

    def time(self, name: str, *, required: bool = True) -> datetime | None:
        value = self._raw(name, required)
        return None if value is None else parse_ts(value, name)

    def req_time(self, name: str) -> datetime:
        value = self.time(name)
        assert value is not None
        return value

    def texts(self, name: str, max_items: int = 100, max_len: int = 200) -> tuple[str, ...]:
        value = self._raw(name, False)
        if value is None:
            return ()
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise DecodeError(name, "expected a list of strings")
        if len(value) > max_items:
            raise DecodeError(name, f"more than {max_items} entries")
        if any(len(v) > max_len for v in value):
            raise DecodeError(name, f"an entry is longer than {max_len} characters")
        for i, v in enumerate(value):
            _printable(f"{name}[{i}]", v)
        return tuple(value)

    def flag(self, name: str) -> bool:
        """An optional true or false (absent or null: false)."""
        value = self._raw(name, False)
        if value is None:
            return False
        if not isinstance(value, bool):
            raise DecodeError(name, "expected true or false")
        return value

    def duration(self, default: float | None = None) -> float:
        value = self.number("duration_s", required=default is None, lo=0.0, hi=MAX_DURATION_S)
        if value is None:
            assert default is not None
            return default
        if value <= 0:
            raise DecodeError("duration_s", "must be positive")
        return value

    def finish(self) -> None:
        unknown = sorted(set(self.data) - self.used)
        if unknown:
            name = unknown[0]
            if len(name) > MAX_NAME_CHARS:  # a hostile name is not echoed whole
                raise DecodeError("payload", f"unknown field {shown(name)}")
            raise DecodeError(name, "unknown field")


def sign(data: Mapping[str, Any], key: bytes) -> str:
    body = {k: v for k, v in data.items() if k != "sig"}
    return hmac.new(key, canonical_json(body), hashlib.sha256).hexdigest()


def _verify_signature(data: Mapping[str, Any], sensor: SensorConfig | None) -> None:
    signature = data.get("sig")
    # The field's shape holds whether or not a key checks it (PROTOCOL.md): not any text.
    if signature is not None and (
        not isinstance(signature, str) or len(signature) != 64 or not _is_hex(signature)
    ):
        raise DecodeError("sig", "expected a hex string (64 characters)")
    if sensor is None or not sensor.signing_key:
        if signature is not None and sensor is not None and sensor.require_signature:
            raise DecodeError("sig", "no key configured to check it")
        return
    if signature is None:
        if sensor.require_signature:
            raise DecodeError("sig", f"sensor {sensor.id} requires a signed payload")
        return
    expected = sign(data, sensor.signing_key.value.encode())
    # Hex is case-insensitive: an HMAC in upper-case hex is the same signature.
    if not hmac.compare_digest(signature.lower(), expected):
        raise DecodeError("sig", "signature does not match the payload")


_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")


def _is_hex(text: str) -> bool:
    return _HEX_DIGITS.issuperset(text)


# --------------------------------------------------------------------------- sensor payloads


def _decode_levels(f: _Fields, site: str, sensor: str) -> SoundLevels:
    lo, hi = DB_RANGE

    def db(name: str, required: bool = True) -> float | None:
        return f.number(name, required=required, lo=lo, hi=hi)

    levels = SoundLevels(
        site=site,
        sensor=sensor,
        ts=f.req_time("ts"),
        duration_s=f.duration(),
        LAeq=f.req_number("LAeq", lo, hi),
        LAFmax=f.req_number("LAFmax", lo, hi),
        LCpeak=f.req_number("LCpeak", lo, hi),
        LASmax=db("LASmax", False),
        LZpeak=db("LZpeak", False),
        LAFmin=db("LAFmin", False),
        LCeq=db("LCeq", False),
        LZeq=db("LZeq", False),
        overload=f.flag("overload"),
    )
    if levels.LAFmax < levels.LAeq - 0.05:
        raise DecodeError("LAFmax", f"{levels.LAFmax:g} is below LAeq {levels.LAeq:g}")
    return levels


def _decode_light(f: _Fields, site: str, sensor: str) -> LightSummary:
    lo, hi = LUX_RANGE
    summary = LightSummary(
        site=site,
        sensor=sensor,
        ts=f.req_time("ts"),
        duration_s=f.duration(),
        lux_mean=f.req_number("lux_mean", lo, hi),
        lux_min=f.req_number("lux_min", lo, hi),
        lux_max=f.req_number("lux_max", lo, hi),
    )
    if not summary.lux_min <= summary.lux_mean <= summary.lux_max:
        raise DecodeError("lux_mean", "must lie between lux_min and lux_max")
    burst_raw = f._raw("burst", False)
    if burst_raw is None:
        f.number("burst_rate_hz", required=False)
        return summary
    if not isinstance(burst_raw, list) or len(burst_raw) > MAX_BURST_SAMPLES:
        raise DecodeError("burst", f"expected a list of at most {MAX_BURST_SAMPLES} numbers")
    burst: list[float] = []
    for i, v in enumerate(burst_raw):
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or not lo <= v <= hi:
            numeric = isinstance(v, int | float)
            what = shown(v) if isinstance(v, str) else repr(v) if numeric else type(v).__name__
            raise DecodeError(f"burst[{i}]", f"{what} is not an illuminance in lux")
        burst.append(float(v))
    rate = f.req_number("burst_rate_hz", 0.1, 10_000.0)
    return LightSummary(
        site,
        sensor,
        summary.ts,
        summary.duration_s,
        summary.lux_mean,
        summary.lux_min,
        summary.lux_max,
        tuple(burst),
        rate,
    )


def _decode_weather(f: _Fields, site: str, sensor: str) -> WeatherReading:
    ts = f.req_time("ts")
    duration = f.duration(default=60.0)
    wind = f.req_number("wind_speed_ms", *WIND_RANGE)
    rain_raw = f._raw("rain", False)
    rain_mm_h: float | None = None
    if rain_raw is None or isinstance(rain_raw, bool):
        rain = bool(rain_raw)
    else:
        rain_mm_h = f.number("rain", lo=0.0, hi=500.0)
        rain = bool(rain_mm_h)
    return WeatherReading(site, sensor, ts, duration, wind, rain, rain_mm_h)


def _decode_turbidity(f: _Fields, site: str, sensor: str) -> TurbidityReading:
    return TurbidityReading(site, sensor, f.req_time("ts"), f.duration(), f.req_number("ntu", *NTU_RANGE))


def _decode_status(f: _Fields, site: str, sensor: str) -> SensorStatus:
    ts = f.req_time("ts")
    battery = f.number("battery_pct", required=False, lo=0.0, hi=100.0)
    offset = f.number("clock_offset_s", required=False, lo=-1e6, hi=1e6)
    f.number("uptime_s", required=False, lo=0.0)
    f.text("firmware", required=False)
    f.number("queued", required=False, lo=0.0)
    f.number("dropped", required=False, lo=0.0)
    reference = measured = None
    calibration = f._raw("calibration", False)
    if calibration is not None:
        if not isinstance(calibration, dict):
            raise DecodeError("calibration", "expected an object with reference_db and measured_db")
        cal = _Fields(calibration)
        reference = cal.req_number("reference_db", *DB_RANGE)
        measured = cal.req_number("measured_db", *DB_RANGE)
        cal.finish()
    return SensorStatus(site, sensor, ts, battery, offset, reference, measured)


def _decode_bands(f: _Fields, site: str, sensor: str) -> BandLevels:
    ts = f.req_time("ts")
    duration = f.duration()
    raw = f._raw("bands", True)
    if not isinstance(raw, dict) or not raw:
        raise DecodeError("bands", "expected an object of nominal frequency (Hz) -> level (dB)")
    if len(raw) > MAX_BANDS:
        raise DecodeError("bands", f"more than {MAX_BANDS} bands")
    bands: dict[float, float] = {}
    for key, value in raw.items():
        if len(key) > 16:  # "40000", "31.5": a frequency never needs more
            raise DecodeError("bands", f"{shown(key)} is not a frequency in Hz")
        try:
            freq = float(key)
        except ValueError:
            raise DecodeError(f"bands.{key}", "not a frequency in Hz") from None
        if not 5.0 <= freq <= 40_000.0:
            raise DecodeError(f"bands.{key}", "frequency outside 5 Hz to 40 kHz")
        if isinstance(value, LongNumber):
            raise DecodeError(f"bands.{key}", value.reason())
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise DecodeError(f"bands.{key}", "not a number")
        if not DB_RANGE[0] <= value <= DB_RANGE[1]:
            raise DecodeError(f"bands.{key}", f"{value:g} dB is outside the plausible range")
        bands[freq] = float(value)
    return BandLevels(site, sensor, ts, duration, bands)


_SUMMARY_AXIS_FIELDS = ("axis", "ppv_mm_s", "ppv_time_s", "zc_hz", "fft_hz", "accel_g", "disp_mm", "clipped")
MAX_PPV_MM_S = 10_000.0  # 400 in/s: beyond any geophone's range
MAX_AIRBLAST_PA = 100_000.0  # 194 dB


def _decode_seismic(f: _Fields, site: str, sensor: str) -> SeismicSummary:
    """The seismograph's summary of one event (docs/PROTOCOL.md, "Seismographs")."""
    ts = f.req_time("ts")
    event_id = f.req_ident("event_id")
    duration = f.req_number("duration_s", 0.0, MAX_SEISMIC_RECORD_S)
    if duration <= 0:
        raise DecodeError("duration_s", "must be positive")
    rate = f.req_number("sample_rate", *SEISMIC_RATE_RANGE)
    chunks = f.req_number("chunks", 1, MAX_WAVEFORM_CHUNKS)
    if chunks != int(chunks) or rate != int(rate):
        raise DecodeError("chunks" if chunks != int(chunks) else "sample_rate", "must be a whole number")
    f.ident("blast_id", required=False)
    raw = f._raw("summary", True)
    if not isinstance(raw, dict):
        raise DecodeError("summary", "expected an object (axes, pvs_mm_s, airblast_pa, mic_low_hz)")
    s = _Fields(raw)
    axes = s._raw("axes", True)
    if not isinstance(axes, list) or len(axes) != 3:
        raise DecodeError("summary.axes", "expected three axes (T, V, L)")
    for i, axis in enumerate(axes):
        if not isinstance(axis, dict):
            raise DecodeError(f"summary.axes[{i}]", "expected an object")
        a = _Fields(axis)
        name = a.req_text("axis", 1)
        if name != "TVL"[i]:
            raise DecodeError(f"summary.axes[{i}].axis", f"expected {'TVL'[i]!r}, got {name!r}")
        for number in ("ppv_mm_s", "ppv_time_s", "accel_g", "disp_mm", "fft_hz", "zc_hz"):
            try:
                a.number(number, required=number == "ppv_mm_s", lo=0.0, hi=MAX_PPV_MM_S)
            except DecodeError as exc:
                raise DecodeError(f"summary.axes[{i}].{exc.field}", exc.reason) from None
        clipped = a._raw("clipped", False)
        if clipped is not None and not isinstance(clipped, bool):
            raise DecodeError(f"summary.axes[{i}].clipped", "expected true or false")
        try:
            a.finish()
        except DecodeError as exc:
            raise DecodeError(f"summary.axes[{i}].{exc.field}", exc.reason) from None
    try:
        s.req_number("pvs_mm_s", 0.0, MAX_PPV_MM_S)
        for name in ("pvs_time_s", "airblast_time_s", "airblast_zc_hz", "duration_s"):
            s.number(name, required=False, lo=0.0, hi=1e6)
        s.number("sample_rate", required=False, lo=0.0, hi=SEISMIC_RATE_RANGE[1])
        s.number("airblast_pa", required=False, lo=0.0, hi=MAX_AIRBLAST_PA)
        s.number("airblast_db", required=False, lo=DB_RANGE[0], hi=DB_RANGE[1])
        s.number("mic_low_hz", required=False, lo=0.0, hi=100.0)
        s.number("airblast_dbc_slow", required=False, lo=DB_RANGE[0], hi=DB_RANGE[1])
        s.texts("clipped", max_items=4, max_len=3)
        s.finish()
    except DecodeError as exc:
        raise DecodeError(f"summary.{exc.field}", exc.reason) from None
    instrument = f._raw("instrument", False)
    if instrument is not None and (
        not isinstance(instrument, dict) or len(canonical_json(instrument)) > MAX_EVENT_FIELD_CHARS
    ):
        raise DecodeError("instrument", f"expected an object of at most {MAX_EVENT_FIELD_CHARS} bytes")
    long_number = _long_number_in(instrument)
    if long_number is not None:
        raise DecodeError("instrument", long_number.reason())
    payload = {k: v for k, v in f.data.items() if k not in ("v", "sig")}
    return SeismicSummary(site, sensor, event_id, ts, duration, payload)


_SENSOR_DECODERS: dict[str, Callable[[_Fields, str, str], SensorMessage]] = {
    "levels": _decode_levels,
    "light": _decode_light,
    "weather": _decode_weather,
    "turbidity": _decode_turbidity,
    "status": _decode_status,
    "bands": _decode_bands,
    "seismic": _decode_seismic,
}


def _header_length(payload: bytes) -> int:
    """A binary frame's header length: the 4 bytes, big-endian, after its magic."""
    length: int = struct.unpack(">I", payload[4:8])[0]
    return length


def _header_bytes(payload: bytes) -> bytes:
    """A binary frame's JSON header, as sent."""
    return payload[8 : 8 + _header_length(payload)]


def _binary_frame(
    payload: bytes, magic: bytes, what: str, digest_field: str, sensor: SensorConfig
) -> tuple[dict[str, Any], bytes]:
    """(header, body) of a binary frame: ``magic``, a 4-byte header length, the JSON header, the
    body. A signed header is signed with the body's SHA-256 as ``digest_field`` (the body itself
    is not in the JSON)."""
    if not payload.startswith(magic) or len(payload) < 8:
        raise DecodeError("payload", f"{what} start with {magic!r} and a 4-byte header length")
    header_len = _header_length(payload)
    if header_len > 4096 or 8 + header_len > len(payload):
        raise DecodeError("header", f"header length {header_len} does not fit the frame")
    header = _load_json(_header_bytes(payload))
    body = payload[8 + header_len :]
    if sensor.signing_key or sensor.require_signature:
        signed = dict(header)
        signed[digest_field] = hashlib.sha256(body).hexdigest()
        _verify_signature(signed, sensor)
    return header, body


def _decode_waveform(
    payload: bytes, site: str, sensor: SensorConfig, now: datetime, limits: Limits
) -> WaveformChunk:
    """One chunk of a seismograph event's waveforms (docs/PROTOCOL.md, "Seismographs")."""
    header, data = _binary_frame(payload, WAVEFORM_MAGIC, "waveform chunks", "samples_sha256", sensor)
    f = _Fields(header)
    ts = f.req_time("ts")
    check_time(ts, now, limits)
    event_id = f.req_ident("event_id")
    whole = {
        name: f.req_number(name, lo, hi)
        for name, lo, hi in (
            ("chunk", 0, MAX_WAVEFORM_CHUNKS - 1),
            ("chunks", 1, MAX_WAVEFORM_CHUNKS),
            ("offset", 0, 2**40),
            ("samples_total", 1, SEISMIC_RATE_RANGE[1] * MAX_SEISMIC_RECORD_S),
            ("sample_rate", *SEISMIC_RATE_RANGE),
        )
    }
    for name, value in whole.items():
        if value != int(value):
            raise DecodeError(name, "must be a whole number")
    if whole["chunk"] >= whole["chunks"]:
        raise DecodeError("chunk", f"{whole['chunk']:g} is not below chunks ({whole['chunks']:g})")
    fmt = f.req_text("format", 8)
    if fmt not in AUDIO_FORMATS:
        raise DecodeError("format", f"{fmt!r} is not one of {', '.join(AUDIO_FORMATS)}")
    scale = _channel_numbers(f, "scale", 1e-12, 1e6)
    ranges = _channel_numbers(f, "range", 0.0, MAX_AIRBLAST_PA)
    mic_low_hz = f.req_number("mic_low_hz", 0.0, 100.0)
    f.finish()
    width = AUDIO_FORMATS[fmt][1] * SEISMIC_CHANNELS
    if not data or len(data) % width:
        raise DecodeError("samples", _body_problem(data, f"4-channel {fmt} samples"))
    if whole["offset"] + len(data) // width > whole["samples_total"]:
        raise DecodeError("offset", "the chunk's samples run past samples_total")
    _plausible_samples(data, fmt, scale, tuple(OVER_RANGE * r for r in ranges))
    return WaveformChunk(
        site,
        sensor.id,
        event_id,
        ts,
        int(whole["chunk"]),
        int(whole["chunks"]),
        int(whole["offset"]),
        int(whole["samples_total"]),
        int(whole["sample_rate"]),
        fmt,
        scale,
        ranges,
        mic_low_hz,
        data,
    )


def _body_problem(body: bytes, samples: str) -> str:
    """Why a frame's body of the wrong length holds no whole ``samples``: none at all (a frame
    sent before its recording was read), or a part of one."""
    if not body:
        return f"empty: the frame holds no {samples} after its header"
    return f"{len(body)} bytes is not a whole number of {samples}"


# How far past its stated range a sample may read: a clipped channel reads at its range, and
# twice it is no reading such an instrument makes. Audio: float samples' full scale is 1.0
# (integer ones cannot pass theirs).
OVER_RANGE = 2.0
OVER_FULL_SCALE = 2.0


def _plausible_samples(
    data: bytes, fmt: str, scale: tuple[float, ...], bounds: tuple[float, ...], field: str = "samples"
) -> None:
    """Refuse samples that are no measurement: not finite (one NaN left a sound meter's filters
    NaN, and every later second of its stream was lost), or beyond ``bounds`` once scaled (a
    seismograph's 1e38 Pa; a bound of 0 is an unknown range, not checked)."""
    import numpy as np  # here: the codec is imported by commands that never see samples

    channels = len(scale)
    values = np.frombuffer(data, dtype=AUDIO_FORMATS[fmt][0]).reshape(-1, channels)
    if fmt.startswith("f"):
        finite = np.isfinite(values).all(axis=1)
        if not finite.all():
            raise DecodeError(field, f"sample {int(np.argmin(finite))} is not a number (NaN or infinite)")
    if not any(bounds):  # no range to hold them to (integer audio): no pass for the peaks
        return
    limit = np.asarray(bounds, dtype=np.float64)
    peaks = np.abs(values).max(axis=0) * np.asarray(scale, dtype=np.float64)
    over = (limit > 0) & (peaks > limit)
    if over.any():
        channel = int(np.argmax(over))
        name = f"{field}[{channel}]" if channels > 1 else field
        raise DecodeError(name, f"a sample of {peaks[channel]:.4g} is beyond {limit[channel]:g}, no reading")


def _long_number_in(value: Any) -> LongNumber | None:
    """The first LongNumber in a (size-bounded) JSON value, if any."""
    if isinstance(value, LongNumber):
        return value
    if isinstance(value, list | dict):
        for item in value.values() if isinstance(value, dict) else value:
            found = _long_number_in(item)
            if found is not None:
                return found
    return None


def _channel_numbers(f: _Fields, name: str, lo: float, hi: float) -> tuple[float, ...]:
    raw = f._raw(name, True)
    if not isinstance(raw, list) or len(raw) != SEISMIC_CHANNELS:
        raise DecodeError(name, f"expected {SEISMIC_CHANNELS} numbers (T, V, L, MIC)")
    values = []
    for i, value in enumerate(raw):
        if isinstance(value, LongNumber):
            raise DecodeError(f"{name}[{i}]", value.reason())
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise DecodeError(f"{name}[{i}]", "not a number")
        if not lo <= value <= hi:
            raise DecodeError(f"{name}[{i}]", f"{shown_number(value)} is outside {lo:g} to {hi:g}")
        values.append(float(value))
    return tuple(values)


# An audio block's seq is read as a float, exact up to 2**53; the store's INTEGER ends at 2**63 - 1,
# and 2**63 (which the bound once let in) was an internal error (OverflowError) in the daemon.
MAX_AUDIO_SEQ = 2**53 - 1


def _decode_audio(
    payload: bytes, site: str, sensor: SensorConfig, now: datetime, limits: Limits
) -> AudioBlock:
    header, pcm = _binary_frame(payload, AUDIO_MAGIC, "audio frames", "pcm_sha256", sensor)
    f = _Fields(header)
    ts = f.req_time("ts")
    check_time(ts, now, limits)
    seq = f.req_number("seq", 0, MAX_AUDIO_SEQ)
    rate = f.req_number("sample_rate", 8000, 384_000)
    fmt = f.req_text("format")
    if fmt not in AUDIO_FORMATS:
        raise DecodeError("format", f"{fmt!r} is not one of {', '.join(AUDIO_FORMATS)}")
    channels = f.number("channels", required=False, lo=1, hi=1)
    del channels  # mono only: the edge sends the measurement channel
    f.finish()
    width = AUDIO_FORMATS[fmt][1]
    if not pcm or len(pcm) % width:
        raise DecodeError("pcm", _body_problem(pcm, f"{fmt} samples"))
    if rate != int(rate) or seq != int(seq):
        raise DecodeError("seq" if seq != int(seq) else "sample_rate", "must be a whole number")
    # integer samples cannot pass their full scale; float ones can
    _plausible_samples(pcm, fmt, (1.0,), (OVER_FULL_SCALE if fmt.startswith("f") else 0.0,), field="pcm")
    return AudioBlock(site, sensor.id, ts, int(seq), int(rate), fmt, pcm)


# --------------------------------------------------------------------------- events


def _event_id(f: _Fields, data: Mapping[str, Any], kind: str) -> str:
    given = f.ident("id", required=False)
    if given:
        return given
    # No id: derive one from the content so a resent event still deduplicates.
    body = {k: v for k, v in data.items() if k not in ("sig", "id")}
    return f"{kind}-" + hashlib.sha256(canonical_json(body)).hexdigest()[:16]


def _decode_event(
    kind: str,
    data: dict[str, Any],
    site: SiteConfig,
    now: datetime,
    limits: Limits,
    generic_kinds: frozenset[str],
) -> tuple[Event, datetime]:
    """Returns the event and the time that must pass the clock checks."""
    f = _Fields(data)
    event: Event
    if kind == "blast-notice":
        event = BlastNotice(
            site.id,
            f.req_ident("blast_id"),
            f.req_time("issued_ts"),
            f.req_time("planned_ts"),
            f.texts("recipients"),
            *_blast_design(f),
        )
        checked = event.issued_ts
    elif kind == "blast":
        event = Blast(
            site.id,
            f.req_ident("blast_id"),
            f.req_time("ts"),
            f.text("safety_reason", required=False),
            f.number("charge_kg", required=False, lo=0.0, hi=1e6),
            f.number("overpressure_db", required=False, lo=DB_RANGE[0], hi=DB_RANGE[1]),
        )
        checked = event.ts
    elif kind == "truck":
        gate = f.req_text("gate", 64)
        if gate not in {g.id for g in site.gates}:
            raise DecodeError("gate", f"gate {gate!r} is not configured for site {site.id}")
        direction = f.req_text("direction", 8)
        if direction not in ("in", "out"):
            raise DecodeError("direction", f"must be 'in' or 'out', got {direction!r}")
        event = TruckPassage(
            site.id,
            _event_id(f, data, kind),
            f.req_time("ts"),
            gate,
            direction,
            f.ident("truck_id", 1000, required=False),
        )
        checked = event.ts
    elif kind in ("work", "temporary-lighting"):
        start, end = f.req_time("start"), f.req_time("end")
        if end <= start:
            raise DecodeError("end", "must be after start")
        if end - start > timedelta(days=366):
            raise DecodeError("end", "a declared period may last at most 366 days")
        if kind == "work":
            work_kind = f.req_text("kind", 32)
            if work_kind not in {k.value for k in WorkKind}:
                raise DecodeError("kind", f"must be one of {', '.join(k.value for k in WorkKind)}")
            sensors = f.texts("sensors")
            for s in sensors:
                if site.sensor(s) is None:
                    raise DecodeError("sensors", f"sensor {s} is not configured for site {site.id}")
            event = WorkPeriod(site.id, _event_id(f, data, kind), start, end, WorkKind(work_kind), sensors)
        else:
            event = TemporaryLighting(
                site.id, _event_id(f, data, kind), start, end, f.text("description", required=False) or ""
            )
        checked = start
    elif kind in generic_kinds:
        event_id = _event_id(f, data, kind)
        ts = f.req_time("ts")
        fields = {k: v for k, v in data.items() if k not in ("v", "sig", "id", "ts")}
        for key, value in fields.items():  # stored and forwarded as they are: bound each
            if len(key) > MAX_NAME_CHARS:
                raise DecodeError("payload", f"field name {shown(key)} is longer than {MAX_NAME_CHARS}")
            if len(canonical_json({key: value})) > MAX_EVENT_FIELD_CHARS:
                raise DecodeError(key, f"longer than {MAX_EVENT_FIELD_CHARS} bytes")
            long_number = _long_number_in(value)
            if long_number is not None:
                raise DecodeError(key, long_number.reason())
        if kind == VEHICLE_PRESENT:
            fields = _vehicle_present_fields(f, site, ts)
        return GenericEvent(site.id, event_id, kind, ts, fields), ts
    else:
        known = sorted(BUILTIN_EVENTS | generic_kinds)
        raise DecodeError("topic", f"unknown event kind {shown(kind)} (known: {', '.join(known)})")
    f.finish()
    return event, checked


MAX_CHARGE_KG = 100_000.0  # per delay: far above any quarry's
MAX_DISTANCE_M = 100_000.0


def _blast_design(f: _Fields) -> tuple[float | None, float | None]:
    """A blast notice's optional charge per delay (kg or lb) and distance to the nearest
    structure (m or ft), in kg and m; both or neither (a scaled distance needs both)."""
    scales = {"charge_per_delay_kg": 1.0, "charge_per_delay_lb": 1 / LB_PER_KG}
    scales |= {"distance_m": 1.0, "distance_ft": 1 / FT_PER_M}
    given: dict[str, float] = {}
    for name, scale in scales.items():
        value = f.number(name, required=False)
        if value is None:
            continue
        if value <= 0:
            raise DecodeError(name, f"must be positive, got {value:g}")
        top = (MAX_CHARGE_KG if name.startswith("charge") else MAX_DISTANCE_M) / scale
        if value > top:
            raise DecodeError(name, f"{value:g} is above the plausible maximum {top:g}")
        given[name] = value * scale
    for a, b in (("charge_per_delay_kg", "charge_per_delay_lb"), ("distance_m", "distance_ft")):
        if a in given and b in given:
            raise DecodeError(b, f"give {a} or {b}, not both")
    charge = given.get("charge_per_delay_kg", given.get("charge_per_delay_lb"))
    distance = given.get("distance_m", given.get("distance_ft"))
    if (charge is None) != (distance is None):
        missing = "distance_m" if distance is None else "charge_per_delay_kg"
        raise DecodeError(missing, "missing: a charge per delay and a distance go together (scaled distance)")
    return charge, distance


def _vehicle_present_fields(f: _Fields, site: SiteConfig, ts: datetime) -> dict[str, Any]:
    """The fields of a ``vehicle-present`` event, checked: a vehicle at a gate or near sensors (6.C.3)."""
    fields: dict[str, Any] = {}
    end = f.time("end", required=False)
    if end is not None:
        if end < ts:
            raise DecodeError("end", "must not be before ts")
        if end - ts > timedelta(days=1):
            raise DecodeError("end", "a vehicle-present event may last at most one day")
        fields["end"] = format_ts(end)
    gate = f.text("gate", required=False, max_len=64)
    if gate is not None:
        if gate not in {g.id for g in site.gates}:
            raise DecodeError("gate", f"gate {gate!r} is not configured for site {site.id}")
        fields["gate"] = gate
    sensors = f.texts("sensors")
    for s in sensors:
        if site.sensor(s) is None:
            raise DecodeError("sensors", f"sensor {s} is not configured for site {site.id}")
    if sensors:
        fields["sensors"] = list(sensors)
    if gate is None and not sensors:
        raise DecodeError("gate", "a vehicle-present event needs a gate or sensors (where the vehicle was)")
    description = f.text("description", required=False, max_len=1000)
    if description:
        fields["description"] = description
    f.finish()
    return fields


# --------------------------------------------------------------------------- entry point


def input_sender(
    topic: str, sites: Mapping[str, SiteConfig], prefix: str = "minewatch"
) -> tuple[SiteConfig, Topic, SensorConfig | None]:
    """The configured site, the parsed topic and (on a sensor's topic) the configured sensor of an
    input message, from its topic alone; raises DecodeError (field ``topic``) for any other topic."""
    parsed = parse_topic(topic, prefix)
    site = sites.get(parsed.site)
    if site is None:
        raise DecodeError("topic", f"site {name_shown(parsed.site)} is not configured")
    if parsed.group == "events":
        return site, parsed, None
    if parsed.group != "sensors":
        raise DecodeError("topic", f"{shown(topic, MAX_TOPIC_SHOWN)} is an output topic, not an input")
    sensor = site.sensor(parsed.sensor)
    if sensor is None:
        raise DecodeError("topic", f"sensor {name_shown(parsed.sensor)}: not configured for site {site.id}")
    if parsed.kind not in SENSOR_MESSAGES[sensor.kind]:
        kind, sent = sensor.kind.value, shown(parsed.kind)
        raise DecodeError("topic", f"sensor {sensor.id} is a {kind} sensor; it cannot send {sent}")
    return site, parsed, sensor


def decode(
    topic: str,
    payload: bytes,
    sites: Mapping[str, SiteConfig],
    now: datetime,
    limits: Limits = DEFAULT_LIMITS,
    generic_event_kinds: Mapping[str, frozenset[str]] | None = None,
    prefix: str = "minewatch",
    ahead: Parsed | None = None,
) -> Message:
    """Decode one input message; raises DecodeError naming the field and the reason.

    ``ahead``: what monitor.wire.quick_levels.predecode made of the payload when it ran ahead and
    missed its quick path (the payload is then not parsed again).
    """
    if ahead is None:
        sender = levels_sender(topic, sites, prefix)
        if sender is not None:
            quick = predecode(payload, *sender, limits.max_payload_bytes)
            if isinstance(quick, SoundLevels):
                check_time(quick.ts, now, limits)
                return quick
            ahead = quick
    if len(payload) > limits.max_payload_bytes:
        raise DecodeError(
            "payload", f"{len(payload)} bytes exceeds the {limits.max_payload_bytes}-byte limit"
        )
    site, parsed, sensor = input_sender(topic, sites, prefix)
    try:  # costs nothing until it catches (Python 3.11)
        if sensor is None:
            data = _load_json(payload)
            kinds = (generic_event_kinds or {}).get(site.id, frozenset())
            event, checked = _decode_event(parsed.kind, data, site, now, limits, kinds)
            check_time(
                checked, now, limits, "ts" if parsed.kind not in ("work", "temporary-lighting") else "start"
            )
            return event
        cap = KIND_MAX_BYTES.get(parsed.kind)
        if cap is not None and len(payload) > cap:
            raise DecodeError(
                "payload", f"{len(payload)} bytes exceeds the {cap}-byte limit of a {parsed.kind} message"
            )
        if parsed.kind == "audio":
            return _decode_audio(payload, site.id, sensor, now, limits)
        if parsed.kind == "waveform":
            return _decode_waveform(payload, site.id, sensor, now, limits)
        data = _load_json(payload, ahead)
        _verify_signature(data, sensor)
        fields = _Fields(data)
        message = _SENSOR_DECODERS[parsed.kind](fields, site.id, sensor.id)
        fields.finish()
        check_time(message.ts, now, limits)
        return message
    except _OutOfRange as refused:
        binary = parsed.kind in ("audio", "waveform")
        raise refused.as_sent(_header_bytes(payload) if binary else payload) from None


# --------------------------------------------------------------------------- encoding (edge side)


def _compact(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if v is not None and v != ()}


def payload_of(record: Message) -> dict[str, Any]:
    """The JSON object for a record (audio excluded: see encode_audio)."""
    if isinstance(record, SoundLevels):
        return _compact(
            {
                "ts": format_ts(record.ts),
                "duration_s": record.duration_s,
                "LAeq": record.LAeq,
                "LAFmax": record.LAFmax,
                "LCpeak": record.LCpeak,
                "LASmax": record.LASmax,
                "LZpeak": record.LZpeak,
                "LAFmin": record.LAFmin,
                "LCeq": record.LCeq,
                "LZeq": record.LZeq,
                # Only when set: a message of a meter not overloaded is as it always was.
                "overload": True if record.overload else None,
            }
        )
    if isinstance(record, LightSummary):
        data = _compact(
            {
                "ts": format_ts(record.ts),
                "duration_s": record.duration_s,
                "lux_mean": record.lux_mean,
                "lux_min": record.lux_min,
                "lux_max": record.lux_max,
            }
        )
        if record.burst:
            data["burst"] = list(record.burst)
            data["burst_rate_hz"] = record.burst_rate_hz
        return data
    if isinstance(record, WeatherReading):
        rain: bool | float = record.rain_mm_h if record.rain_mm_h is not None else record.rain
        return {
            "ts": format_ts(record.ts),
            "duration_s": record.duration_s,
            "wind_speed_ms": record.wind_speed_ms,
            "rain": rain,
        }
    if isinstance(record, TurbidityReading):
        return {"ts": format_ts(record.ts), "duration_s": record.duration_s, "ntu": record.ntu}
    if isinstance(record, SensorStatus):
        data = _compact(
            {
                "ts": format_ts(record.ts),
                "battery_pct": record.battery_pct,
                "clock_offset_s": record.clock_offset_s,
            }
        )
        if record.calibration_reference_db is not None:
            data["calibration"] = {
                "reference_db": record.calibration_reference_db,
                "measured_db": record.calibration_measured_db,
            }
        return data
    if isinstance(record, BandLevels):
        return {
            "ts": format_ts(record.ts),
            "duration_s": record.duration_s,
            "bands": {f"{k:g}": v for k, v in record.bands.items()},
        }
    if isinstance(record, BlastNotice):
        data = {
            "blast_id": record.id,
            "issued_ts": format_ts(record.issued_ts),
            "planned_ts": format_ts(record.planned_ts),
            "recipients": list(record.recipients),
        }
        if record.charge_kg_per_delay is not None:  # absent otherwise: older records stay as they were
            data["charge_per_delay_kg"] = record.charge_kg_per_delay
        if record.distance_m is not None:
            data["distance_m"] = record.distance_m
        return data
    if isinstance(record, Blast):
        return _compact(
            {
                "blast_id": record.id,
                "ts": format_ts(record.ts),
                "safety_reason": record.safety_reason,
                "charge_kg": record.charge_kg,
                "overpressure_db": record.overpressure_db,
            }
        )
    if isinstance(record, TruckPassage):
        return _compact(
            {
                "id": record.id,
                "ts": format_ts(record.ts),
                "gate": record.gate,
                "direction": record.direction,
                "truck_id": record.truck_id,
            }
        )
    if isinstance(record, WorkPeriod):
        return _compact(
            {
                "id": record.id,
                "start": format_ts(record.start),
                "end": format_ts(record.end),
                "kind": record.kind.value,
                "sensors": list(record.sensors) or None,
            }
        )
    if isinstance(record, TemporaryLighting):
        return {
            "id": record.id,
            "start": format_ts(record.start),
            "end": format_ts(record.end),
            "description": record.description,
        }
    if isinstance(record, GenericEvent):
        return {"id": record.id, "ts": format_ts(record.ts), **record.fields}
    if isinstance(record, SeismicSummary):
        return dict(record.payload)
    raise TypeError(f"cannot encode {type(record).__name__}")


EVENT_KINDS: dict[type, str] = {  # an event record type -> its kind (topic, stored kind)
    BlastNotice: "blast-notice",
    Blast: "blast",
    TruckPassage: "truck",
    WorkPeriod: "work",
    TemporaryLighting: "temporary-lighting",
}
SENSOR_KINDS: dict[type, str] = {  # a sensor record type -> its message kind (topic, stored kind)
    SoundLevels: "levels",
    LightSummary: "light",
    WeatherReading: "weather",
    TurbidityReading: "turbidity",
    SensorStatus: "status",
    BandLevels: "bands",
    SeismicSummary: "seismic",
}


def encode(record: Message, key: bytes | None = None, prefix: str = "minewatch") -> tuple[str, bytes]:
    """(topic, payload) for a record; with a key the payload carries its HMAC in ``sig``."""
    if isinstance(record, AudioBlock):
        return encode_audio(record, key, prefix)
    if isinstance(record, WaveformChunk):
        return encode_waveform(record, key, prefix)
    data = payload_of(record)
    if key:
        data["sig"] = sign(data, key)
    body = json.dumps(data, separators=(",", ":")).encode()
    if isinstance(record, GenericEvent):
        return event_topic(record.site, record.kind, prefix), body
    if type(record) in EVENT_KINDS:
        return event_topic(record.site, EVENT_KINDS[type(record)], prefix), body
    sensor = getattr(record, "sensor")  # noqa: B009 - every sensor record has one
    return sensor_topic(record.site, sensor, SENSOR_KINDS[type(record)], prefix), body


def encode_audio(block: AudioBlock, key: bytes | None = None, prefix: str = "minewatch") -> tuple[str, bytes]:
    header: dict[str, Any] = {
        "ts": format_ts(block.ts),
        "seq": block.seq,
        "sample_rate": block.sample_rate,
        "format": block.sample_format,
        "channels": 1,
    }
    if key:
        signed = dict(header, pcm_sha256=hashlib.sha256(block.pcm).hexdigest())
        header["sig"] = sign(signed, key)
    head = json.dumps(header, separators=(",", ":")).encode()
    return sensor_topic(block.site, block.sensor, "audio", prefix), AUDIO_MAGIC + struct.pack(
        ">I", len(head)
    ) + head + block.pcm


def encode_waveform(
    chunk: WaveformChunk, key: bytes | None = None, prefix: str = "minewatch"
) -> tuple[str, bytes]:
    header = chunk.header()
    if key:
        signed = dict(header, samples_sha256=hashlib.sha256(chunk.data).hexdigest())
        header["sig"] = sign(signed, key)
    head = json.dumps(header, separators=(",", ":")).encode()
    body = WAVEFORM_MAGIC + struct.pack(">I", len(head)) + head + chunk.data
    return sensor_topic(chunk.site, chunk.sensor, "waveform", prefix), body


# --------------------------------------------------------------------------- stored JSON -> records
# The stored ``data`` of a reading or event is the payload it arrived with (decoded above);
# these read it back into the record, trusting it (it was checked on the way in).


def _light_from_stored(d: Mapping[str, Any], site: str, sensor: str) -> LightSummary:
    return LightSummary(
        site,
        sensor,
        parse_ts(d["ts"]),
        d["duration_s"],
        d["lux_mean"],
        d["lux_min"],
        d["lux_max"],
        tuple(d.get("burst", ())),
        d.get("burst_rate_hz"),
    )


def _weather_from_stored(d: Mapping[str, Any], site: str, sensor: str) -> WeatherReading:
    rain = d.get("rain", False)
    mm = None if isinstance(rain, bool) else float(rain)
    return WeatherReading(
        site, sensor, parse_ts(d["ts"]), d["duration_s"], d["wind_speed_ms"], bool(rain), mm
    )


def _turbidity_from_stored(d: Mapping[str, Any], site: str, sensor: str) -> TurbidityReading:
    return TurbidityReading(site, sensor, parse_ts(d["ts"]), d["duration_s"], d["ntu"])


# stored reading kind -> its record, read back (the kinds the rules read from the store)
_READINGS_FROM_STORED: dict[str, Callable[[Mapping[str, Any], str, str], Reading]] = {
    "light": _light_from_stored,
    "weather": _weather_from_stored,
    "turbidity": _turbidity_from_stored,
}


def reading_from_row(row: Any) -> Any:  # a sqlite3.Row; the record type follows its kind
    """A stored readings row (site, sensor, kind, data) back as its record."""
    return _READINGS_FROM_STORED[row["kind"]](json.loads(row["data"]), row["site"], row["sensor"])


def seismic_events(rows: Any, locations: Mapping[str, str] | None = None) -> list[SeismicEvent]:
    """Stored seismic summaries (readings rows of kinds "seismic" and "seismic-waveforms") as the
    events the rules judge: one per (sensor, event id), the daemon's summary from the waveforms
    when stored, else the seismograph's own; the blast id from whichever names one."""
    by_event: dict[tuple[str, str], dict[str, Mapping[str, Any]]] = {}
    times: dict[tuple[str, str], tuple[datetime, float]] = {}
    for row in rows:
        d = json.loads(row["data"])
        key = (row["sensor"], d["event_id"])
        by_event.setdefault(key, {})[row["kind"]] = d
        times[key] = (from_us(row["ts_us"]), float(row["duration_s"]))
    events = []
    for (sensor, event_id), kinds in by_event.items():
        chosen = kinds.get("seismic-waveforms") or kinds["seismic"]
        summary = chosen["summary"]
        blast_id = next((k["blast_id"] for k in kinds.values() if k.get("blast_id")), None)
        ts, duration = times[(sensor, event_id)]
        clipped = set(summary.get("clipped") or ())
        events.append(
            SeismicEvent(
                site=rows[0]["site"],
                sensor=sensor,
                id=event_id,
                ts=ts,
                duration_s=duration,
                axes=tuple(
                    AxisPeak(
                        a["axis"],
                        float(a["ppv_mm_s"]),
                        a.get("zc_hz"),
                        a.get("fft_hz"),
                        bool(a.get("clipped")) or a["axis"] in clipped,
                    )
                    for a in summary["axes"]
                ),
                pvs_mm_s=float(summary["pvs_mm_s"]),
                airblast_pa=summary.get("airblast_pa"),
                mic_low_hz=summary.get("mic_low_hz"),
                airblast_dbc_slow=summary.get("airblast_dbc_slow"),
                mic_clipped="MIC" in clipped,
                source="waveforms" if "seismic-waveforms" in kinds else "edge",
                location=(locations or {}).get(sensor, ""),
                blast_id=blast_id,
            )
        )
    return sorted(events, key=lambda e: (e.ts, e.sensor))


def event_from_row(kind: str, data: str, site: str) -> Event:
    """An event read back from its stored JSON (the payload it arrived with)."""
    d = json.loads(data)
    if kind == "blast-notice":
        return BlastNotice(
            site,
            d["blast_id"],
            parse_ts(d["issued_ts"]),
            parse_ts(d["planned_ts"]),
            tuple(d.get("recipients", ())),
            d.get("charge_per_delay_kg"),
            d.get("distance_m"),
        )
    if kind == "blast":
        return Blast(
            site,
            d["blast_id"],
            parse_ts(d["ts"]),
            d.get("safety_reason"),
            d.get("charge_kg"),
            d.get("overpressure_db"),
        )
    if kind == "truck":
        return TruckPassage(site, d["id"], parse_ts(d["ts"]), d["gate"], d["direction"], d.get("truck_id"))
    if kind == "work":
        return WorkPeriod(
            site,
            d["id"],
            parse_ts(d["start"]),
            parse_ts(d["end"]),
            WorkKind(d["kind"]),
            tuple(d.get("sensors") or ()),
        )
    if kind == "temporary-lighting":
        return TemporaryLighting(
            site, d["id"], parse_ts(d["start"]), parse_ts(d["end"]), d.get("description", "")
        )
    fields = {k: v for k, v in d.items() if k not in ("id", "ts")}
    return GenericEvent(site, d["id"], kind, parse_ts(d["ts"]), fields)


def finding_to_json(finding: Finding) -> dict[str, Any]:
    return {
        "id": finding.id,
        "site": finding.site,
        "standard": finding.standard,
        "section": finding.section,
        "kind": finding.kind.value,
        "start": finding.start.isoformat(),
        "end": finding.end.isoformat(),
        "start_local": finding.start_local.isoformat(),
        "end_local": finding.end_local.isoformat(),
        "timezone": finding.timezone,
        "summary": finding.summary,
        "sensors": list(finding.sensors),
        "measurements": [m.to_json() for m in finding.measurements],
        "exemptions": list(finding.exemptions),
        "refs": list(finding.refs),
        "completeness": finding.completeness,
        "details": dict(finding.details),
    }


def finding_from_json(d: Mapping[str, Any]) -> Finding:
    """finding_to_json's inverse: a stored or published finding back as its record."""
    return Finding(
        site=d["site"],
        standard=d["standard"],
        section=d["section"],
        kind=FindingKind(d["kind"]),
        start=datetime.fromisoformat(d["start"]),
        end=datetime.fromisoformat(d["end"]),
        timezone=d["timezone"],
        summary=d["summary"],
        sensors=tuple(d["sensors"]),
        measurements=tuple(Measurement.from_json(m) for m in d["measurements"]),
        exemptions=tuple(d["exemptions"]),
        refs=tuple(d["refs"]),
        completeness=d["completeness"],
        details=d["details"],
    )
