"""The message contract: every topic and payload kind, valid and invalid (docs/PROTOCOL.md)."""

from __future__ import annotations

import json
import struct
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest

from monitor.errors import DecodeError
from monitor.wire.codec import AudioBlock, BandLevels, encode
from monitor.wire.protocol import check_time, format_ts, parse_topic, parse_ts
from monitor.wire.quick_levels import quick_levels
from rules.model import (
    Blast,
    BlastNotice,
    GenericEvent,
    LightSummary,
    SensorStatus,
    SoundLevels,
    TemporaryLighting,
    TruckPassage,
    WeatherReading,
    WorkKind,
    WorkPeriod,
)
from tests.support.paths import REPO
from tests.support.wire_samples import DEFAULT_LIMITS, LEVELS, NOW, SITES, P, dec


def rejected(topic: str, payload: Any, **kw: Any) -> str:
    with pytest.raises(DecodeError) as info:
        dec(topic, payload, **kw)
    return str(info.value)


# ------------------------------------------------------------------ valid messages, one per kind


def test_levels() -> None:
    m = dec(f"{P}/sensors/n1/levels", {**LEVELS, "LASmax": 73.1, "LZpeak": 99.0})
    assert isinstance(m, SoundLevels)
    assert (m.site, m.sensor, m.LAeq, m.LASmax, m.LZpeak) == ("dovre-north", "n1", 71.2, 73.1, 99.0)
    assert m.ts == datetime(2026, 6, 15, 11, 59, tzinfo=UTC)


def test_ts_epoch_and_offset_are_utc() -> None:
    epoch = dec(f"{P}/sensors/n1/levels", {**LEVELS, "ts": NOW.timestamp() - 60})
    offset = dec(f"{P}/sensors/n1/levels", {**LEVELS, "ts": "2026-06-15T06:59:00-05:00"})
    assert epoch.ts == offset.ts == datetime(2026, 6, 15, 11, 59, tzinfo=UTC)
    assert epoch.ts.tzinfo == UTC


def test_light_with_burst() -> None:
    m = dec(
        f"{P}/sensors/l1/light",
        {
            "ts": "2026-06-15T11:59:00Z",
            "duration_s": 10,
            "lux_mean": 0.5,
            "lux_min": 0.1,
            "lux_max": 2.0,
            "burst": [0.1, 2.0, 0.1, 2.0],
            "burst_rate_hz": 20,
        },
    )
    assert isinstance(m, LightSummary) and m.burst == (0.1, 2.0, 0.1, 2.0) and m.burst_rate_hz == 20


@pytest.mark.parametrize(
    ("rain", "flag", "mm"), [(True, True, None), (False, False, None), (2.5, True, 2.5), (0, False, 0.0)]
)
def test_weather(rain: Any, flag: bool, mm: float | None) -> None:
    m = dec(f"{P}/sensors/wx/weather", {"ts": "2026-06-15T11:59:00Z", "wind_speed_ms": 6.1, "rain": rain})
    assert isinstance(m, WeatherReading) and m.rain is flag and m.rain_mm_h == mm and m.duration_s == 60


def test_status_with_calibration() -> None:
    m = dec(
        f"{P}/sensors/n1/status",
        {
            "ts": "2026-06-15T11:59:00Z",
            "battery_pct": 88,
            "clock_offset_s": 0.2,
            "uptime_s": 3600,
            "calibration": {"reference_db": 94.0, "measured_db": 94.3},
        },
    )
    assert isinstance(m, SensorStatus) and m.calibration_measured_db == 94.3 and m.battery_pct == 88


def test_bands() -> None:
    m = dec(
        f"{P}/sensors/n1/bands",
        {"ts": "2026-06-15T11:59:00Z", "duration_s": 1, "bands": {"1000": 60, "31.5": 55}},
    )
    assert isinstance(m, BandLevels) and m.bands == {1000.0: 60.0, 31.5: 55.0}


def test_audio_round_trip() -> None:
    pcm = (np.sin(np.arange(480) / 10) * 1000).astype("<i2").tobytes()
    block = AudioBlock("dovre-north", "n1", NOW - timedelta(seconds=5), 7, 48000, "s16le", pcm)
    topic, payload = encode(block)
    assert topic == f"{P}/sensors/n1/audio"
    m = dec(topic, payload)
    assert m == block and m.n_samples == 480


def test_events() -> None:
    notice = dec(
        f"{P}/events/blast-notice",
        {
            "blast_id": "b1",
            "issued_ts": "2026-06-14T09:00:00Z",
            "planned_ts": "2026-06-15T16:30:00Z",
            "recipients": ["town"],
        },
    )
    assert isinstance(notice, BlastNotice) and notice.id == "b1" and notice.recipients == ("town",)
    blast = dec(
        f"{P}/events/blast", {"blast_id": "b1", "ts": "2026-06-15T11:30:00Z", "safety_reason": "misfire"}
    )
    assert isinstance(blast, Blast) and blast.safety_reason == "misfire"
    truck = dec(f"{P}/events/truck", {"ts": "2026-06-15T11:30:00Z", "gate": "g1", "direction": "in"})
    assert isinstance(truck, TruckPassage) and truck.id.startswith("truck-")
    again = dec(f"{P}/events/truck", {"ts": "2026-06-15T11:30:00Z", "gate": "g1", "direction": "in"})
    assert again.id == truck.id  # a resent event without id deduplicates
    work = dec(
        f"{P}/events/work",
        {
            "id": "w1",
            "start": "2026-06-15T08:00:00Z",
            "end": "2026-06-15T10:00:00Z",
            "kind": "repair",
            "sensors": ["n1"],
        },
    )
    assert isinstance(work, WorkPeriod) and work.kind is WorkKind.REPAIR and work.sensors == ("n1",)
    light = dec(
        f"{P}/events/temporary-lighting",
        {
            "id": "t1",
            "start": "2026-06-15T01:00:00Z",
            "end": "2026-06-15T05:00:00Z",
            "description": "night repair",
        },
    )
    assert isinstance(light, TemporaryLighting) and light.description == "night repair"


def test_generic_event_kind_from_profile() -> None:
    payload = {"id": "s7", "ts": "2026-06-15T11:00:00Z", "area_sqft": 6000}
    m = dec(f"{P}/events/slope-exposed", payload, generic=frozenset({"slope-exposed"}))
    assert isinstance(m, GenericEvent) and m.fields == {"area_sqft": 6000} and m.kind == "slope-exposed"
    assert "unknown event kind 'slope-exposed'" in rejected(f"{P}/events/slope-exposed", payload)


@pytest.mark.parametrize(
    "record",
    [
        SoundLevels("dovre-north", "n1", NOW, 1.0, 70.0, 72.0, 90.0, LASmax=71.0),
        LightSummary("dovre-north", "l1", NOW, 10.0, 1.0, 0.5, 2.0, (0.5, 2.0), 10.0),
        WeatherReading("dovre-north", "wx", NOW, 60.0, 3.0, True, 1.5),
        SensorStatus("dovre-north", "n1", NOW, 90.0, 0.1, 94.0, 94.1),
        BandLevels("dovre-north", "n1", NOW, 1.0, {1000.0: 60.0}),
        BlastNotice("dovre-north", "b1", NOW - timedelta(days=1), NOW),
        Blast("dovre-north", "b1", NOW, "misfire", 120.0, 128.0),
        TruckPassage("dovre-north", "t1", NOW, "g1", "out", "truck-9"),
        WorkPeriod("dovre-north", "w1", NOW, NOW + timedelta(hours=1), WorkKind.CONSTRUCTION),
        TemporaryLighting("dovre-north", "tl", NOW, NOW + timedelta(hours=1), "x"),
    ],
)
def test_encode_decode_round_trip(record: Any) -> None:
    topic, payload = encode(record)
    assert dec(topic, payload) == record


# ------------------------------------------------------------------ signatures


def test_signature_accepted_and_forged_rejected() -> None:
    good = SoundLevels("dovre-north", "signed", NOW, 1.0, 70.0, 72.0, 90.0)
    topic, payload = encode(good, key=b"k3y")
    assert dec(topic, payload) == good
    forged = json.loads(payload)
    forged["LAeq"] = 40.0  # a spoofed low reading
    assert rejected(topic, forged) == "sig: signature does not match the payload"
    _, unsigned = encode(good)
    assert rejected(topic, unsigned) == "sig: sensor signed requires a signed payload"
    _, wrong_key = encode(good, key=b"other")
    assert "does not match" in rejected(topic, wrong_key)


def test_signed_audio() -> None:
    block = AudioBlock("dovre-north", "signed", NOW, 1, 16000, "f32le", np.zeros(16, "<f4").tobytes())
    topic, payload = encode(block, key=b"k3y")
    assert dec(topic, payload) == block
    tampered = payload[:-4] + b"\x00\x00\x80\x3f"
    assert "does not match" in rejected(topic, tampered)


# ------------------------------------------------------------------ invalid messages


def far(years: float) -> str:
    return format_ts(NOW + timedelta(days=365.25 * years))


@pytest.mark.parametrize(
    ("topic", "payload", "expected"),
    [
        ("levels", {**LEVELS, "LAeq": "loud"}, "LAeq: not a number"),
        ("levels", {**LEVELS, "LAeq": True}, "LAeq: not a number"),
        ("levels", {k: v for k, v in LEVELS.items() if k != "LCpeak"}, "LCpeak: missing"),
        ("levels", {**LEVELS, "LAeq": 250.0}, "LAeq: 250 is above the plausible maximum 200"),
        ("levels", {**LEVELS, "LAeq": -40.0}, "LAeq: -40 is below the plausible minimum -20"),
        ("levels", {**LEVELS, "LAFmax": 60.0}, "LAFmax: 60 is below LAeq 71.2"),
        ("levels", {**LEVELS, "duration_s": 0}, "duration_s: must be positive"),
        ("levels", {**LEVELS, "extra": 1}, "extra: unknown field"),
        ("levels", {**LEVELS, "v": 2}, "v: protocol version 2 is not supported"),
        ("levels", {**LEVELS, "ts": far(5)}, "is 5.0 years in the future"),
        ("levels", {**LEVELS, "ts": far(-2)}, "is 2.0 years in the past"),
        ("levels", {**LEVELS, "ts": "yesterday"}, "ts: 'yesterday' is not an RFC 3339 time"),
        ("levels", {**LEVELS, "ts": "2026-06-15T11:59:00"}, "has no UTC offset"),
        ("levels", [1, 2], "payload: expected a JSON object, got list"),
        (
            "light",
            {"ts": "2026-06-15T11:59:00Z", "duration_s": 1, "lux_mean": -1, "lux_min": -1, "lux_max": 1},
            "lux_mean: -1 is below the plausible minimum 0",
        ),
        (
            "light",
            {"ts": "2026-06-15T11:59:00Z", "duration_s": 1, "lux_mean": 5, "lux_min": 1, "lux_max": 2},
            "lux_mean: must lie between lux_min and lux_max",
        ),
        (
            "light",
            {
                "ts": "2026-06-15T11:59:00Z",
                "duration_s": 1,
                "lux_mean": 1,
                "lux_min": 1,
                "lux_max": 1,
                "burst": [1, "x"],
                "burst_rate_hz": 10,
            },
            "burst[1]: 'x' is not an illuminance in lux",
        ),
        (
            "light",
            {
                "ts": "2026-06-15T11:59:00Z",
                "duration_s": 1,
                "lux_mean": 1,
                "lux_min": 1,
                "lux_max": 1,
                "burst": [1, 2],
            },
            "burst_rate_hz: missing",
        ),
        ("weather", {"ts": "2026-06-15T11:59:00Z", "wind_speed_ms": 300}, "wind_speed_ms: 300 is above"),
        (
            "status",
            {"ts": "2026-06-15T11:59:00Z", "calibration": {"reference_db": 94}},
            "measured_db: missing",
        ),
        (
            "bands",
            {"ts": "2026-06-15T11:59:00Z", "duration_s": 1, "bands": {"abc": 1}},
            "bands.abc: not a frequency",
        ),
        ("bands", {"ts": "2026-06-15T11:59:00Z", "duration_s": 1, "bands": {}}, "bands: expected an object"),
    ],
)
def test_invalid_payloads(topic: str, payload: Any, expected: str) -> None:
    sensor = {"light": "l1", "weather": "wx"}.get(topic, "n1")
    assert expected in rejected(f"{P}/sensors/{sensor}/{topic}", payload)


def test_nan_and_infinity_rejected() -> None:
    raw = b'{"ts": "2026-06-15T11:59:00Z", "duration_s": 1, "LAeq": NaN, "LAFmax": 1, "LCpeak": 1}'
    assert "NaN is not allowed" in rejected(f"{P}/sensors/n1/levels", raw)
    raw = raw.replace(b"NaN", b"Infinity")
    assert "Infinity is not allowed" in rejected(f"{P}/sensors/n1/levels", raw)
    assert "ts: not a finite number" in rejected(f"{P}/sensors/n1/levels", b'{"ts": 1e400}')


def test_oversized_and_non_utf8() -> None:
    huge = b"{" + b" " * 2_000_000 + b"}"
    assert rejected(f"{P}/sensors/n1/levels", huge) == "payload: 2000002 bytes exceeds the 1048576-byte limit"
    assert rejected(f"{P}/sensors/n1/levels", b"\xff\xfe{}") == "payload: not UTF-8 (byte 0xff at offset 0)"
    assert rejected(f"{P}/sensors/n1/levels", b"{not json").startswith("payload: not JSON")


@pytest.mark.parametrize(
    ("topic", "expected"),
    [
        (f"{P}/sensors/n9/levels", "sensor n9: not configured for site dovre-north"),
        ("minewatch/elsewhere/sensors/n1/levels", "topic: site elsewhere is not configured"),
        (f"{P}/sensors/l1/levels", "sensor l1 is a light sensor; it cannot send 'levels'"),
        (f"{P}/sensors/n1/light", "sensor n1 is a sound sensor; it cannot send 'light'"),
        (f"{P}/sensors/n1", "is not a minewatch topic"),
        ("other/dovre-north/sensors/n1/levels", "is not under minewatch/{site}/"),
        (f"{P}/violations", "is an output topic, not an input"),
        (f"{P}/events/fireworks", "unknown event kind 'fireworks'"),
    ],
)
def test_bad_topics(topic: str, expected: str) -> None:
    assert expected in rejected(topic, LEVELS)


@pytest.mark.parametrize(
    ("kind", "payload", "expected"),
    [
        (
            "truck",
            {"ts": "2026-06-15T11:00:00Z", "gate": "g9", "direction": "in"},
            "gate: gate 'g9' is not configured",
        ),
        (
            "truck",
            {"ts": "2026-06-15T11:00:00Z", "gate": "g1", "direction": "up"},
            "direction: must be 'in' or 'out'",
        ),
        (
            "work",
            {"start": "2026-06-15T11:00:00Z", "end": "2026-06-15T10:00:00Z", "kind": "repair"},
            "end: must be after start",
        ),
        (
            "work",
            {"start": "2026-06-15T09:00:00Z", "end": "2026-06-15T10:00:00Z", "kind": "mining"},
            "kind: must be one of",
        ),
        (
            "work",
            {
                "start": "2026-06-15T09:00:00Z",
                "end": "2026-06-15T10:00:00Z",
                "kind": "repair",
                "sensors": ["zz"],
            },
            "sensors: sensor zz is not configured",
        ),
        ("blast", {"ts": "2026-06-15T11:00:00Z"}, "blast_id: missing"),
        ("blast", {"blast_id": "b", "ts": far(3)}, "ts: "),
        ("blast-notice", {"blast_id": "b", "issued_ts": "2026-06-15T11:00:00Z"}, "planned_ts: missing"),
        ("temporary-lighting", {"start": "2026-06-15T11:00:00Z"}, "end: missing"),
    ],
)
def test_bad_events(kind: str, payload: Any, expected: str) -> None:
    assert expected in rejected(f"{P}/events/{kind}", payload)


def test_bad_audio_frames() -> None:
    topic = f"{P}/sensors/n1/audio"
    assert "audio frames start with" in rejected(topic, b"RIFF....")
    header = json.dumps({"ts": format_ts(NOW), "seq": 1, "sample_rate": 48000, "format": "s24le"}).encode()
    frame = b"MWA1" + struct.pack(">I", len(header)) + header + b"\x00" * 6
    assert "format: 's24le' is not one of" in rejected(topic, frame)
    header = json.dumps({"ts": format_ts(NOW), "seq": 1, "sample_rate": 48000, "format": "s16le"}).encode()
    frame = b"MWA1" + struct.pack(">I", len(header)) + header + b"\x00" * 3
    assert "pcm: 3 bytes is not a whole number of s16le samples" in rejected(topic, frame)
    frame = b"MWA1" + struct.pack(">I", 10_000) + header
    assert "header length 10000" in rejected(topic, frame)


def _audio_frame(pcm: bytes, **header: Any) -> bytes:
    fields = {"ts": format_ts(NOW), "seq": 1, "sample_rate": 48000, "format": "s16le", "channels": 1}
    encoded = json.dumps({**fields, **header}).encode()
    return b"MWA1" + struct.pack(">I", len(encoded)) + encoded + pcm


@pytest.mark.parametrize(
    ("pcm", "header", "expected"),
    [
        # a frame with its header and nothing after: no samples, not a length's arithmetic
        (b"", {}, "pcm: empty: the frame holds no s16le samples after its header"),
        # a whole number as sent, and its bound, in digits (not 1.20893e+24 ... 9.22337e+18)
        (
            b"\0\0",
            {"seq": 2**80},
            "seq: 1208925819614629174706176 is above the plausible maximum 9007199254740991",
        ),
        (b"\0\0", {"seq": -12345678}, "seq: -12345678 is below the plausible minimum 0"),
        (b"\0\0", {"sample_rate": 1_000_000}, "sample_rate: 1000000 is above the plausible maximum 384000"),
        # a fraction in seq is seq's, not sample_rate's
        (b"\0\0", {"seq": 1.5}, "seq: must be a whole number"),
        (b"\0\0", {"sample_rate": 48000.5}, "sample_rate: must be a whole number"),
    ],
)
def test_an_audio_frames_refusal_names_its_field_and_the_number_as_sent(
    pcm: bytes, header: dict[str, Any], expected: str
) -> None:
    assert rejected(f"{P}/sensors/n1/audio", _audio_frame(pcm, **header)) == expected


@pytest.mark.parametrize(
    ("seq", "refused"),
    [
        # a seq the store cannot hold: the daemon's 'internal error (OverflowError)'
        (2**63, "seq: 9223372036854775808 is above the plausible maximum 9007199254740991"),
        (2**63 - 1, "seq: 9223372036854775807 is above the plausible maximum 9007199254740991"),
        # one a float cannot hold, stored as 2**53 before
        (2**53 + 1, "seq: 9007199254740993 is above the plausible maximum 9007199254740991"),
        (2**53 - 1, None),
        (0, None),
    ],
)
def test_an_audio_blocks_seq_is_one_the_store_holds_as_sent(seq: int, refused: str | None) -> None:
    frame = _audio_frame(b"\0\0", seq=seq)
    if refused is None:
        assert dec(f"{P}/sensors/n1/audio", frame).seq == seq
    else:
        assert rejected(f"{P}/sensors/n1/audio", frame) == refused


@pytest.mark.parametrize(
    ("laeq", "expected"),
    [
        # orjson reads an integer past 64 bits as a float: the refusal shows the digits sent
        ("1208925819614629174706176", "LAeq: 1208925819614629174706176 is above the plausible maximum 200"),
        ("-18446744073709551617", "LAeq: -18446744073709551617 is below the plausible minimum -20"),
        ("1e24", "LAeq: 1e+24 is above the plausible maximum 200"),  # a float as a float
        ("250.0", "LAeq: 250 is above the plausible maximum 200"),
    ],
)
def test_a_number_out_of_range_is_shown_as_sent(laeq: str, expected: str) -> None:
    payload = json.dumps({**LEVELS, "LAeq": 0}).replace('"LAeq": 0', f'"LAeq": {laeq}').encode()
    assert rejected(f"{P}/sensors/n1/levels", payload) == expected


def test_parse_helpers() -> None:
    assert parse_topic("minewatch/s/events/blast").kind == "blast"
    assert parse_ts("2026-06-15T12:00:00.250+02:00") == datetime(2026, 6, 15, 10, 0, 0, 250000, tzinfo=UTC)
    assert format_ts(datetime(2026, 6, 15, 10, 0, 0, 250000, tzinfo=UTC)) == "2026-06-15T10:00:00.250Z"


# ------------------------------------------------------------------ the quick path


def quick(topic: str, payload: Any) -> SoundLevels | None:
    raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return quick_levels(topic, raw, SITES, "minewatch", DEFAULT_LIMITS.max_payload_bytes)


def test_quick_path_takes_the_plain_levels_message_and_nothing_else() -> None:
    topic = f"{P}/sensors/n1/levels"
    assert quick(topic, LEVELS) == dec(topic, LEVELS)
    floats = {**LEVELS, "duration_s": 1.0}  # all four numbers floats: the in-line checks
    assert quick(topic, floats) == dec(topic, floats)
    assert quick(topic, {**floats, "LAFmax": 71.0}) is None  # LAFmax below LAeq: decode says why
    assert quick(topic, {**LEVELS, "LASmax": 73.1, "LZeq": 60, "v": 1}) == dec(
        topic, {**LEVELS, "LASmax": 73.1, "LZeq": 60, "v": 1}
    )
    signed = {**LEVELS, "sig": "00"}
    for other_topic, payload in [
        (f"{P}/sensors/signed/levels", LEVELS),  # requires a signature: checked the full way
        (topic, signed),
        (f"{P}/sensors/l1/levels", LEVELS),  # a light sensor cannot send levels
        (f"{P}/sensors/nope/levels", LEVELS),
        ("minewatch/elsewhere/sensors/n1/levels", LEVELS),
        ("other/dovre-north/sensors/n1/levels", LEVELS),
        (f"{P}/sensors/n1/bands", LEVELS),
        (f"{P}/events/levels", LEVELS),
    ]:
        assert quick(other_topic, payload) is None, other_topic


def test_quick_path_never_accepts_what_decode_rejects() -> None:
    """Random mutations of a valid message: the quick path (plus the pipeline's time check)
    agrees with decode or declines."""
    rng = np.random.default_rng(7)
    topic = f"{P}/sensors/n1/levels"
    values: list[Any] = [
        None,
        True,
        "71",
        71,
        71.5,
        -25.0,
        250.0,
        0,
        -1,
        1e400,
        [],
        {},
        "2026-06-15T11:59:00Z",
        "2026-06-15T11:59:00",
        NOW.timestamp(),
        2,
        1,
        0.0,  # the bounds, as floats (the usual message's in-line checks)
        -20.0,
        200.0,
        3600.0,
        3600.5,
        float("nan"),
    ]
    keys = [*LEVELS, "v", "LASmax", "LZpeak", "LAFmin", "LCeq", "LZeq", "sig", "extra"]
    taken = 0
    for _ in range(3000):
        payload: dict[str, Any] = dict(LEVELS)
        for _ in range(int(rng.integers(1, 4))):
            key = keys[int(rng.integers(len(keys)))]
            if rng.random() < 0.2:
                payload.pop(key, None)
            else:
                payload[key] = values[int(rng.integers(len(values)))]
        raw = json.dumps(payload).encode()
        fast = quick(topic, raw)
        try:
            full = dec(topic, raw)
        except DecodeError as exc:
            if fast is not None:  # only the time check, which the pipeline does after it
                with pytest.raises(DecodeError) as late:
                    check_time(fast.ts, NOW, DEFAULT_LIMITS)
                assert str(late.value) == str(exc)
            continue
        if fast is not None:
            taken += 1
            assert fast == full, payload
    assert taken > 100  # the quick path did take the valid ones


# ------------------------------------------------------------------ hostile input: bounded before parsed


def padded_ts(pad: int = 1_000_000) -> str:
    """A valid time after ~1 MB of spaces: Python's fromisoformat after a strip() took it."""
    return " " * pad + "2026-06-15T11:59:00Z"


def test_a_time_padded_with_a_megabyte_of_spaces_is_rejected_on_both_paths() -> None:
    topic = f"{P}/sensors/n1/levels"
    # The usual message (all floats: checked in line), and the quick path's general branch.
    for extra in ({"duration_s": 1.0}, {"LASmax": 75.0}):
        payload = json.dumps({**LEVELS, **extra, "ts": padded_ts(3000)}).encode()  # within the size cap
        assert quick(topic, payload) is None
        reason = rejected(topic, payload)
        assert reason.startswith("ts: '")
        assert "is not an RFC 3339 time (longer than 35 characters)" in reason
        assert len(reason) < 200  # the rejection does not echo the padding back
        # The megabyte is refused on its length, before anything parses it.
        payload = json.dumps({**LEVELS, **extra, "ts": padded_ts()}).encode()
        assert quick(topic, payload) is None
        assert (
            rejected(topic, payload)
            == f"payload: {len(payload)} bytes exceeds the 4096-byte limit of a levels message"
        )
    light = {"ts": padded_ts(), "duration_s": 1, "lux_mean": 1, "lux_min": 1, "lux_max": 1}
    assert "ts: " in rejected(f"{P}/sensors/l1/light", light)  # the general decoder
    work = {"start": padded_ts(), "end": "2026-06-15T12:00:00Z", "kind": "repair"}
    assert "start: " in rejected(f"{P}/events/work", work)


@pytest.mark.parametrize(
    "text",
    [
        " 2026-06-15T11:59:00Z",
        "2026-06-15T11:59:00Z ",
        "2026-06-15",
        "20260615T115900Z",
        "2026-06-15T11:59Z",
        "2026-06-15T11:59:00,5Z",
        "2026-06-15T11:59:00+0200",
        "２０２６-06-15T11:59:00Z",  # fullwidth digits match \d, not RFC 3339's DIGIT
    ],
)
def test_only_rfc_3339_is_a_time(text: str) -> None:
    with pytest.raises(DecodeError) as info:
        parse_ts(text)
    assert info.value.field == "ts" and "is not an RFC 3339 time" in info.value.reason


def test_rfc_3339_forms_still_accepted() -> None:
    utc = datetime(2026, 6, 15, 11, 59, tzinfo=UTC)
    assert parse_ts("2026-06-15t11:59:00z") == utc
    assert parse_ts("2026-06-15 11:59:00Z") == utc  # RFC 3339 section 5.6 NOTE
    assert parse_ts("2026-06-15T06:59:00.000000001-05:00") == utc
    with pytest.raises(DecodeError, match="has no UTC offset"):
        parse_ts("2026-06-15T11:59:00")


def test_hostile_times_leave_no_memory_behind() -> None:
    """150 padded times (the reported attack): nothing of them stays allocated, and the
    parsed-time cache holds only bounded keys."""
    import gc
    import tracemalloc

    from monitor.wire.protocol import MAX_TIME_CHARS, _rfc3339_utc

    topic = f"{P}/sensors/n1/levels"
    payloads = [json.dumps({**LEVELS, "ts": padded_ts(1_000_000 + i)}).encode() for i in range(150)]
    gc.collect()
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        for payload in payloads:
            with pytest.raises(DecodeError):
                dec(topic, payload)
        gc.collect()
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert after - before < 256 * 1024  # was ~150 MB: each padded text kept as a cache key
    info = _rfc3339_utc.cache_info()
    assert info.maxsize is not None and info.currsize <= info.maxsize
    # What the cache holds is bounded by construction: only texts that fit MAX_TIME_CHARS reach it.
    _rfc3339_utc.cache_clear()
    for payload in payloads:
        with pytest.raises(DecodeError):
            dec(topic, payload)
    assert _rfc3339_utc.cache_info().currsize == 0
    assert MAX_TIME_CHARS < 64


@pytest.mark.parametrize(
    ("topic", "payload", "expected"),
    [
        (
            "sensors/n1/levels",
            {**LEVELS, "x" * 3900: 1},  # levels and bands payloads are capped in size (KIND_MAX_BYTES)
            "payload: unknown field 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'... (3900 characters)",
        ),
        (
            "sensors/n1/bands",
            {"ts": "2026-06-15T11:59:00Z", "duration_s": 1, "bands": {"1" * 16_000: 50.0}},
            "bands: '1111111111111111111111111111111111111111'... (16000 characters) is not a frequency",
        ),
        (
            "sensors/n1/bands",
            {"ts": "2026-06-15T11:59:00Z", "duration_s": 1, "bands": {str(100 + i): 50.0 for i in range(65)}},
            "bands: more than 64 bands",
        ),
        (
            "sensors/l1/light",
            {
                "ts": "2026-06-15T11:59:00Z",
                "duration_s": 1,
                "lux_mean": 1,
                "lux_min": 1,
                "lux_max": 1,
                "burst": ["y" * 100_000],
                "burst_rate_hz": 10,
            },
            "burst[0]: 'yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy'... (100000 characters) is not",
        ),
        (
            "events/work",
            {
                "start": "2026-06-15T09:00:00Z",
                "end": "2026-06-15T10:00:00Z",
                "kind": "repair",
                "sensors": ["n1"] * 101,
            },
            "sensors: more than 100 entries",
        ),
        (
            "events/blast-notice",
            {
                "blast_id": "b",
                "issued_ts": "2026-06-15T11:00:00Z",
                "planned_ts": "2026-06-15T11:30:00Z",
                "recipients": ["z" * 201],
            },
            "recipients: an entry is longer than 200 characters",
        ),
        ("events/truck", {"ts": "2026-06-15T11:00:00Z", "gate": "g" * 65, "direction": "in"}, "gate: longer"),
        (
            "sensors/signed/levels",
            {**LEVELS, "sig": "f" * 3900},
            "sig: expected a hex string (64 characters)",
        ),
    ],
)
def test_every_field_is_bounded_before_it_is_parsed(topic: str, payload: Any, expected: str) -> None:
    reason = rejected(f"{P}/{topic}", payload)
    assert reason.startswith(expected)
    assert len(reason) < 300


def test_generic_event_fields_are_bounded() -> None:
    kinds = frozenset({"slope-exposed"})
    base = {"id": "s1", "ts": "2026-06-15T11:00:00Z"}
    event = dec(f"{P}/events/slope-exposed", {**base, "area_sqft": 10}, generic=kinds)
    assert event.fields == {"area_sqft": 10}
    long_value = rejected(f"{P}/events/slope-exposed", {**base, "note": "n" * 5000}, generic=kinds)
    assert long_value == "note: longer than 4096 bytes"
    long_name = rejected(f"{P}/events/slope-exposed", {**base, "k" * 1000: 1}, generic=kinds)
    assert long_name.startswith("payload: field name 'kkkk") and "longer than 64" in long_name


def test_hostile_topic_names_are_not_echoed_whole() -> None:
    sensor = "s" * 60_000
    reason = rejected(f"{P}/sensors/{sensor}/levels", LEVELS)
    assert reason.startswith("topic: sensor 'ssss") and "(60000 characters): not configured" in reason
    assert len(reason) < 300
    reason = rejected("minewatch/" + "a/" * 20_000, LEVELS)
    assert "is not a minewatch topic" in reason and len(reason) < 400


NOTICE = {"blast_id": "b", "issued_ts": "2026-06-14T09:00:00Z", "planned_ts": "2026-06-15T16:30:00Z"}


def test_a_blast_notice_carries_its_charge_per_delay_and_distance() -> None:
    """Issue 27, scaled distance before the blast: optional, kg or lb and m or ft, stored in SI."""
    plain = dec(f"{P}/events/blast-notice", NOTICE)
    assert isinstance(plain, BlastNotice) and plain.charge_kg_per_delay is None and plain.distance_m is None
    si = dec(f"{P}/events/blast-notice", {**NOTICE, "charge_per_delay_kg": 120.5, "distance_m": 610})
    assert isinstance(si, BlastNotice) and (si.charge_kg_per_delay, si.distance_m) == (120.5, 610.0)
    imperial = dec(
        f"{P}/events/blast-notice", {**NOTICE, "charge_per_delay_lb": 220.462, "distance_ft": 3280.84}
    )
    assert isinstance(imperial, BlastNotice)
    assert imperial.charge_kg_per_delay == pytest.approx(100.0) and imperial.distance_m == pytest.approx(
        1000.0
    )
    topic, body = encode(si)
    again = dec(topic, json.loads(body))
    assert again == si and b'"charge_per_delay_kg":120.5' in body


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({"charge_per_delay_kg": 0, "distance_m": 600}, "charge_per_delay_kg: must be positive, got 0"),
        ({"charge_per_delay_kg": "lots", "distance_m": 600}, "charge_per_delay_kg: not a number"),
        ({"charge_per_delay_kg": 100, "distance_m": -5}, "distance_m: must be positive, got -5"),
        ({"charge_per_delay_kg": 100, "distance_m": 1e9}, "distance_m: 1e+09 is above the plausible maximum"),
        ({"charge_per_delay_kg": 100}, "distance_m: missing: a charge per delay and a distance go together"),
        ({"distance_ft": 900}, "charge_per_delay_kg: missing: a charge per delay and a distance go together"),
        (
            {"charge_per_delay_kg": 100, "charge_per_delay_lb": 220, "distance_m": 600},
            "charge_per_delay_lb: give charge_per_delay_kg or charge_per_delay_lb, not both",
        ),
    ],
)
def test_a_blast_notices_design_fields_are_checked(extra: dict[str, Any], expected: str) -> None:
    told = rejected(f"{P}/events/blast-notice", {**NOTICE, **extra})
    assert expected in told and "\n" not in told, told


# ------------------------------------------------------------------ numbers no double can hold


def _with_long_number(template: str, digits: int, digit: str = "9") -> bytes:
    return template.replace("LONG", digit * digits).encode()


@pytest.mark.parametrize(
    ("topic", "template", "digits", "expected"),
    [
        # Past Python's 4,300-digit limit json itself raised ValueError (an internal error).
        ("events/blast", '{"blast_id":"b1","ts":LONG}', 5000, "ts: number too long (5000 digits)"),
        ("events/blast", '{"blast_id":"b1","ts":-LONG}', 5000, "ts: number too long (5000 digits)"),
        (
            "sensors/n1/status",
            '{"ts":"2026-06-15T11:59:00Z","uptime_s":LONG}',
            4400,
            "uptime_s: number too long (4400 digits)",
        ),
        # Under it, float() of the int raised OverflowError.
        ("events/blast", '{"blast_id":"b1","ts":LONG}', 400, "ts: number too long (400 digits)"),
        (
            "sensors/n1/levels",  # the levels topic: quick path first, then decode
            '{"ts":"2026-06-15T11:59:00Z","duration_s":1,"LAeq":LONG,"LAFmax":74.0,"LCpeak":95.5}',
            400,
            "LAeq: number too long (400 digits)",
        ),
        (
            "sensors/n1/levels",
            '{"ts":LONG,"duration_s":1,"LAeq":71.2,"LAFmax":74.0,"LCpeak":95.5}',
            309,
            "ts: number too long (309 digits)",
        ),
        (
            "sensors/l1/light",
            '{"ts":"2026-06-15T11:59:00Z","duration_s":1,"lux_mean":1,"lux_min":1,"lux_max":1,'
            '"burst":[1,LONG],"burst_rate_hz":1}',
            400,
            "burst[1]: a 400-digit number is not an illuminance in lux",
        ),
        (
            "events/blast-notice",
            '{"blast_id":"b","issued_ts":"2026-06-14T09:00:00Z","planned_ts":"2026-06-15T16:30:00Z",'
            '"charge_per_delay_kg":LONG,"distance_m":600}',
            400,
            "charge_per_delay_kg: number too long (400 digits)",
        ),
    ],
)
def test_a_number_too_long_for_a_double_is_rejected_naming_its_field(
    topic: str, template: str, digits: int, expected: str
) -> None:
    assert rejected(f"{P}/{topic}", _with_long_number(template, digits)) == expected


def test_a_long_number_in_a_generic_event_field_is_rejected() -> None:
    payload = _with_long_number('{"id":"s1","ts":"2026-06-15T11:00:00Z","area":[1,{"x":LONG}]}', 400)
    told = rejected(f"{P}/events/slope-exposed", payload, generic=frozenset({"slope-exposed"}))
    assert told == "area: number too long (400 digits)"


def test_the_longest_number_a_double_holds_is_still_a_number() -> None:
    ts = 10**307  # 308 digits: a number, just far out of range for a time
    told = rejected(f"{P}/events/blast", f'{{"blast_id":"b1","ts":{ts}}}'.encode())
    assert told.startswith("ts: ") and "out of range for a time" in told


# ------------------------------------------------------------------ signature hex


def _signed_levels() -> tuple[str, dict[str, Any]]:
    good = SoundLevels("dovre-north", "signed", NOW, 1.0, 70.0, 72.0, 90.0)
    topic, payload = encode(good, key=b"k3y")
    return topic, json.loads(payload)


def test_a_signature_in_upper_case_hex_is_accepted() -> None:
    topic, data = _signed_levels()
    upper = {**data, "sig": data["sig"].upper()}
    assert upper["sig"] != data["sig"]
    assert dec(topic, upper) == dec(topic, data)


@pytest.mark.parametrize("sig", ["z" * 64, "0" * 63 + "g", "ab" * 31, "ab" * 33, "é" * 64, 12])
def test_a_signature_that_is_not_64_hex_digits_says_so(sig: Any) -> None:
    topic, data = _signed_levels()
    assert rejected(topic, {**data, "sig": sig}) == "sig: expected a hex string (64 characters)"


def test_a_wrong_signature_in_either_case_does_not_match() -> None:
    topic, data = _signed_levels()
    wrong = ("0" if data["sig"][0] != "0" else "1") + data["sig"][1:]
    for sig in (wrong, wrong.upper()):
        assert rejected(topic, {**data, "sig": sig}) == "sig: signature does not match the payload"


@pytest.mark.parametrize(
    ("kind", "raw", "expected"),
    [
        # A JSON \u escape of half a UTF-16 pair decodes to no character: stored, it stopped the
        # report's CSV and the evidence export of its day with a UnicodeEncodeError.
        ("blast", r'{"blast_id": "B-\ud800", "ts": "2026-06-15T11:00:00Z"}', "blast_id: "),
        (
            "blast",
            r'{"blast_id": "B-1", "ts": "2026-06-15T11:00:00Z", "safety_reason": "rock \udfff"}',
            "safety_reason: ",
        ),
        (
            "blast-notice",
            r'{"blast_id": "B-1", "issued_ts": "2026-06-15T09:00:00Z", "planned_ts": "2026-06-16T11:00:00Z",'
            r' "recipients": ["town", "\udc00"]}',
            "recipients[1]: ",
        ),
        ("blast", r'{"blast_id": "B-1", "ts": "2026-06-15T11:00:00Z", "\ud83d": 1}', "payload: "),
    ],
)
def test_half_a_surrogate_pair_is_refused_naming_the_field(kind: str, raw: str, expected: str) -> None:
    said = rejected(f"{P}/events/{kind}", raw.encode())
    assert said.startswith(expected) and "not text: half of a UTF-16 surrogate pair" in said, said


def test_a_whole_surrogate_pair_is_its_character() -> None:
    raw = rb'{"blast_id": "B-\ud83d\ude00", "ts": "2026-06-15T11:00:00Z"}'
    assert dec(f"{P}/events/blast", raw).id == "B-\U0001f600"


@pytest.mark.parametrize(
    ("kind", "fields", "expected"),
    [
        # Names others print, link and file under: one printable line each.
        ("blast", {"blast_id": "B-7\x1b[1A\x1b[2K"}, "blast_id: holds U+001B, not a printed character"),
        ("blast", {"blast_id": "B-7\nBcc: x"}, "blast_id: holds U+000A"),
        ("blast", {"blast_id": "B-\u202e7"}, "blast_id: holds U+202E"),
        ("blast", {"blast_id": "B-\x007"}, "blast_id: holds U+0000"),
        ("truck", {"gate": "g1", "direction": "in", "truck_id": "T\r1"}, "truck_id: holds U+000D"),
        ("truck", {"gate": "g1", "direction": "in", "id": "t\t1"}, "id: holds U+0009"),
    ],
)
def test_a_name_that_is_not_one_printable_line_is_refused(
    kind: str, fields: dict[str, Any], expected: str
) -> None:
    payload = {"ts": "2026-06-15T11:00:00Z", **fields}
    assert rejected(f"{P}/events/{kind}", payload).startswith(expected)


def test_free_text_and_printable_names_are_taken_as_written() -> None:
    blast = dec(
        f"{P}/events/blast",
        {"blast_id": "2026/06 #3 – Süd", "ts": "2026-06-15T11:00:00Z", "safety_reason": "storm\ncoming"},
    )
    assert (blast.id, blast.safety_reason) == ("2026/06 #3 – Süd", "storm\ncoming")
    notice = {"blast_id": "B-1", "issued_ts": "2026-06-15T09:00:00Z", "planned_ts": "2026-06-16T11:00:00Z"}
    said = rejected(f"{P}/events/blast-notice", {**notice, "recipients": ["town", "Hanson\x1b[2J"]})
    assert said.startswith("recipients[1]: holds U+001B")


@pytest.mark.parametrize(("opening", "depth"), [(b"[", 500_000), (b'{"a":', 150_000)])
def test_a_payload_nested_that_deep_is_rejected_not_a_crash(opening: bytes, depth: int) -> None:
    """A light message of 1 MB nested 500,000 deep segfaulted the daemon in orjson (and again on
    every redelivery). Decoded in a process of its own, so that a crash fails this test only."""
    import subprocess
    import sys

    script = f"""
from monitor.errors import DecodeError
from tests.support.wire_samples import P, dec
depth = {depth}
closing = {opening!r}.replace(b"[", b"]").replace(b'{{"a":', b"}}")
body = b'{{"ts":"2026-12-06T11:00:00Z","duration_s":10,"lux_mean":1,"lux_min":0.5,"lux_max":2,"burst":'
payload = body + {opening!r} * depth + closing * depth + b"}}"
try:
    dec(f"{P}/sensors/l1/light", payload)
except DecodeError as exc:
    print(exc)
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=REPO
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "payload: JSON nested too deeply", done.stdout


@pytest.mark.parametrize(
    ("samples", "reason"),
    [
        # One NaN left the sensor's meter NaN: every later second of its stream was lost.
        ([0.1] * 100 + [float("nan")] + [0.1] * 379, "pcm: sample 100 is not a number (NaN or infinite)"),
        ([float("inf")] * 480, "pcm: sample 0 is not a number (NaN or infinite)"),
        # 1e38 read as LAeq 844 dB: nothing a microphone records.
        ([1e38] * 480, "pcm: a sample of 1e+38 is beyond 2, no reading"),
    ],
)
def test_audio_samples_that_are_no_recording_are_rejected(samples: list[float], reason: str) -> None:
    block = AudioBlock("dovre-north", "n1", NOW - timedelta(seconds=5), 7, 48000, "f32le", b"")
    block = replace(block, pcm=np.asarray(samples, dtype="<f4").tobytes())
    with pytest.raises(DecodeError) as refused:
        dec(*encode(block))
    assert str(refused.value) == reason
    loud = replace(block, pcm=np.full(480, 1.5, dtype="<f4").tobytes())  # over full scale, a clip
    assert dec(*encode(loud)) == loud


@pytest.mark.parametrize("sig", ["zz", "0" * 500_000, {"a": 1}, "g" * 64])
def test_a_sig_of_another_shape_is_rejected_though_no_key_checks_it(sig: object) -> None:
    """l1 has no key: a 500,000-character 'sig' was taken and ignored."""
    payload = {"ts": "2026-06-15T11:59:00Z", "duration_s": 10, "lux_mean": 1, "lux_min": 0.5, "lux_max": 2}
    with pytest.raises(DecodeError) as refused:
        dec(f"{P}/sensors/l1/light", {**payload, "sig": sig})
    assert str(refused.value) == "sig: expected a hex string (64 characters)"
    assert dec(f"{P}/sensors/l1/light", {**payload, "sig": "ab" * 32}).lux_mean == 1  # the shape: ignored


def test_a_key_given_twice_is_rejected_on_either_path() -> None:
    """{"LAeq": 90, "LAeq": 50} was stored as 50 (orjson and json keep the last), while a reader of
    the journaled bytes that keeps the first would read 90: one message, two readings."""
    topic = f"{P}/sensors/n1/levels"
    twice = b'{"ts": "2026-06-15T11:59:00Z", "duration_s": 1.0, "LAeq": 90.0, "LAFmax": 95.0,'
    twice += b' "LCpeak": 99.0, "LAeq": 50.0}'
    assert quick(topic, twice) is None
    assert rejected(topic, twice) == "payload: key 'LAeq' is given twice in one object; give each key once"
    same_value = json.dumps(LEVELS).encode()[:-1] + b', "LAeq": 71.2}'  # even with one value
    assert "given twice" in rejected(topic, same_value)


def test_a_text_holding_the_key_mark_is_still_taken() -> None:
    """A '":' inside a string makes the quick count disagree: read strictly, and accepted."""
    event = {
        "id": "t1",
        "start": "2026-06-15T01:00:00Z",
        "end": "2026-06-15T05:00:00Z",
        "description": 'tower sign read "closed": fixed',
    }
    assert dec(f"{P}/events/temporary-lighting", event).description == 'tower sign read "closed": fixed'
    spaced = b'{"ts" : "2026-06-15T11:59:00Z", "duration_s": 1, "LAeq": 71.2, "LAFmax": 74.0, "LCpeak": 95.5}'
    assert dec(f"{P}/sensors/n1/levels", spaced).LAeq == 71.2


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (b"1", "payload: expected a JSON object, got int"),
        (b"2.5", "payload: expected a JSON object, got float"),
        (b"true", "payload: expected a JSON object, got bool"),
        (b"[[1], 2]", "payload: expected a JSON object, got list"),
        (json.dumps({**LEVELS, "x": [[1], 2]}).encode(), "x: unknown field"),
    ],
)
def test_a_payload_of_numbers_behind_a_list_is_rejected_for_what_it_is(payload: bytes, reason: str) -> None:
    """The count of keys behind the duplicate-key check took ``1`` (and a list holding a list,
    then a number) for a list and indexed it: a TypeError, the daemon's traceback and the
    rejection "internal error (TypeError)" in place of what the payload is."""
    with pytest.raises(DecodeError) as refused:
        dec(f"{P}/sensors/n1/levels", payload)
    assert str(refused.value) == reason
