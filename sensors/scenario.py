"""Simulator scenarios: a day at a quarry described as data (TOML), read and checked once.

A scenario names *sources* (what makes sound, light and weather at the sensors) and
*operator events* (notices, blast records, declared work), each with local clock times.
``sensors/scenarios/*.toml`` ship with the package; ``--scenario PATH`` reads any file.
The format is described in sensors/scenarios/README.md and in ``dovre-day.toml``.

Clock times are site-local ``HH:MM[:SS]``: the next time the site's clocks show it, at or
after the start (start 06:00: "02:10" is the night after); in the hour shown twice when the
clocks go back, the second showing when the first is before the start. An operator event's
clock time the clocks skip in spring is refused (``_refuse_skipped_clocks``); a source's is read
an hour on. ``-1d 10:00`` / ``+1d 10:00`` name a day explicitly. A period is
``"HH:MM-HH:MM"``; its end is the next time the clocks show it after its start.

Like the daemon's config, every problem is collected and reported as ``where: reason``,
and unknown keys are errors.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from importlib import resources
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from monitor.errors import UsageError
from monitor.named_file import NamedFileError, read_named_text
from monitor.times import OccursTwice, at_time_of_day, offsets_if_twice, parse_time, refuse_if_skipped
from rules.model import WorkKind
from rules.numbers import number_problem
from rules.toml_text import toml_document

BUILTIN_DIR = "scenarios"
_CLOCK = re.compile(r"^\s*(?:([+-]\d+)d\s+)?(\d{1,2}):(\d{2})(?::(\d{2}))?\s*$")
_DURATION = re.compile(r"^\s*(?:(\d+)h)?\s*(?:(\d+)m(?:in)?)?\s*(?:(\d+)s)?\s*$")


class ScenarioError(Exception):
    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


# --------------------------------------------------------------------------- resolved scenario


@dataclass(frozen=True, slots=True)
class Period:
    start: datetime  # aware, site-local
    end: datetime

    def contains(self, ts: datetime) -> bool:
        return self.start <= ts < self.end


@dataclass(frozen=True, slots=True)
class SoundSensor:
    ambient_day_db: float = 48.0
    ambient_night_db: float = 38.0
    bearing_deg: float = 0.0  # direction from the pit to the sensor, for wind
    c_minus_a_db: float = 6.0  # LCeq - LAeq: machinery is rich in low frequencies


@dataclass(frozen=True, slots=True)
class LightSensor:
    ambient_night_lux: float = 0.05
    daylight_factor: float = 0.3  # share of open-sky daylight the sensor sees
    burst_rate_hz: float = 10.0  # 0: no raw bursts (sky sensors)


@dataclass(frozen=True, slots=True)
class Audio:
    """Raw audio instead of levels for these sensors, around impulses and each hour."""

    sensors: tuple[str, ...] = ()
    sample_rate: int = 16000
    sample_format: str = "s16le"
    clip_before_s: int = 10
    clip_after_s: int = 20
    minutes_per_hour: int = 1


@dataclass(frozen=True, slots=True)
class Weather:
    sensor: str = ""
    wind_ms: float = 2.5
    wind_sd_ms: float = 0.6
    wind_dir_deg: float = 225.0  # where the wind comes from


@dataclass(frozen=True, slots=True)
class Activity:
    """Machinery: a level at ``ref_m``, spread to each sensor by distance."""

    name: str
    level_db: float
    ref_m: float
    distance_m: Mapping[str, float]
    periods: tuple[Period, ...]
    sd_db: float = 1.0
    modulation_db: float = 0.0  # loader cycles: +- this much
    modulation_period_s: float = 60.0
    absorption_db_per_km: float = 5.0
    wind_gain_db: float = 2.0  # downwind +, upwind - at a 5 m/s wind


@dataclass(frozen=True, slots=True)
class Trucks:
    name: str
    gate: str
    periods: tuple[Period, ...]
    every_min: float
    jitter_min: float
    peak_db: tuple[float, float]  # at the sensors near the gate
    far_db: float = 20.0  # how much quieter at the other sensors
    pass_s: float = 6.0
    events: bool = True  # the gate camera reports each pass


@dataclass(frozen=True, slots=True)
class Impulse:
    """A detonation: a peak (LZpeak, dB) at ``ref_m``, by distance to each sensor."""

    name: str
    at: datetime
    peak_db: float
    ref_m: float
    distance_m: Mapping[str, float]
    crest_db: float = 30.0  # LZpeak - LAeq of the blast second


@dataclass(frozen=True, slots=True)
class Fixture:
    name: str
    sensor: str
    lux: float
    periods: tuple[Period, ...]


@dataclass(frozen=True, slots=True)
class Flashing:
    """A light switching between two levels (a fixed flasher, or a passing vehicle beacon)."""

    name: str
    sensor: str
    on_lux: float
    off_lux: float
    hz: float
    duty: float
    periods: tuple[Period, ...]


@dataclass(frozen=True, slots=True)
class Wind:
    name: str
    periods: tuple[Period, ...]
    wind_ms: float
    wind_sd_ms: float
    wind_dir_deg: float | None
    rain_mm_h: float = 0.0


@dataclass(frozen=True, slots=True)
class Offline:
    name: str
    sensor: str
    periods: tuple[Period, ...]


Source = Activity | Trucks | Impulse | Fixture | Flashing | Wind | Offline


@dataclass(frozen=True, slots=True)
class OperatorEvent:
    """One operator message: ``kind`` is its topic (blast-notice, blast, work, ...)."""

    kind: str
    publish_at: datetime  # when the operator sends it
    fields: Mapping[str, Any]  # resolved: datetimes for times


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    description: str
    start: datetime  # site-local, aware
    duration: timedelta
    seed: int
    status_interval_s: float
    sound: Mapping[str, SoundSensor]
    light: Mapping[str, LightSensor]
    audio: Audio
    weather: Weather
    sources: tuple[Source, ...]
    events: tuple[OperatorEvent, ...]
    notes: tuple[str, ...] = field(default=())

    @property
    def end(self) -> datetime:
        return elapsed(self.start, self.duration)

    def of(self, kind: type[Any]) -> list[Any]:
        return [s for s in self.sources if isinstance(s, kind)]


# --------------------------------------------------------------------------- parsing helpers


def elapsed(moment: datetime, delta: timedelta) -> datetime:
    """``moment`` plus ``delta`` in elapsed time, in its zone. Adding to an aware time of one zone
    moves its clock face and drops the fold, so a start at the second 01:30 (CST) plus 2 minutes
    was the first 01:32 (CDT), before it began, and across the autumn change 24h ran 25 hours."""
    return (moment.astimezone(UTC) + delta).astimezone(moment.tzinfo)


# The longest simulation: a month of every sensor's seconds (and no date arithmetic overflows).
MAX_DURATION = timedelta(days=31)


def parse_duration(text: str) -> timedelta:
    """``24h``, ``2h30m``, ``90m``, ``45s`` or plain seconds; more than 0, at most MAX_DURATION."""
    text = text.strip()
    if text.replace(".", "", 1).isdigit():
        duration = timedelta(seconds=min(float(text), MAX_DURATION.total_seconds() + 1))
    else:
        m = _DURATION.match(text)
        if not text or not m or not any(m.groups()):
            raise ValueError(f"{text!r} is not a duration like 24h, 2h30m, 90m or 45s")
        # Capped so that timedelta cannot overflow; anything that large is refused just below.
        h, mi, s = (min(int(g), 10**6) if g else 0 for g in m.groups())
        duration = timedelta(hours=h, minutes=mi, seconds=s)
    if not timedelta(0) < duration <= MAX_DURATION:
        raise ValueError(f"{text!r}: a simulation lasts more than 0 s and at most 31 days (744h)")
    return duration


def parse_start(text: str, tz: ZoneInfo) -> datetime:
    """The file's ``start``, read as ``--start`` is (monitor.times.parse_time): without an offset
    in the site's zone, with one (or Z) as written. A local time the clocks skip, or show twice
    (01:30 on the night they go back, taken silently as the first), is a UsageError in the
    command line's words, the latter naming both offsets to write."""
    return parse_time(text, tz, "start").astimezone(tz)


def start_on_date(day: date, scenario_start: datetime, tz: ZoneInfo) -> datetime:
    """``--date``: the scenario's start time of day on ``day``, site time. A time of day the clocks
    skip or show twice that day is refused as ``--start`` refuses one (monitor.times), naming
    the date, the time and the ``--start`` to give instead."""
    clock = scenario_start.time().replace(fold=0)
    return at_time_of_day(day, clock, tz, "--date", "the scenario's start time of day").astimezone(tz)


def resolve_clock(text: str, start: datetime) -> datetime:
    """A local clock time relative to the scenario start (see the module docstring): the next
    time the site's clocks show it, at or after ``start``; in the hour shown twice when the
    clocks go back, the second showing when the first lies before ``start``."""
    m = _CLOCK.match(text)
    if not m:
        raise ValueError(f"{text!r} is not a clock time like 11:30, 11:30:15 or -1d 10:00")
    days, hh, mm, ss = m.groups()
    clock = time(int(hh), int(mm), int(ss or 0))
    assert isinstance(start.tzinfo, tzinfo)
    day: date = start.date() + timedelta(days=int(days or 0))
    showings = _showings(day, clock, start.tzinfo)
    # Compared in UTC: within one zone Python compares the clock's face, ignoring fold.
    at_or_after = [moment for moment in showings if moment.astimezone(UTC) >= start.astimezone(UTC)]
    if at_or_after:
        return at_or_after[0]
    if days is None:
        return _showings(day + timedelta(days=1), clock, start.tzinfo)[0]
    return showings[0]  # a day named explicitly, all of it before the start


def _showings(day: date, clock: time, tz: tzinfo) -> list[datetime]:
    """When the clocks show ``clock`` on ``day``: once, or twice in the hour they go back (the
    first showing first). Through the zone (not +timedelta) so a DST change is honoured."""
    first = datetime.combine(day, clock, tz)
    if offsets_if_twice(first):
        return [first, first.replace(fold=1)]
    return [first]


def resolve_period(text: str, start: datetime) -> Period:
    if "-" not in text.strip().lstrip("+-"):
        raise ValueError(f"{text!r} is not a period like 07:00-18:00")
    head, _, tail = text.rpartition("-")
    begin = resolve_clock(head, start)
    end_clock = resolve_clock(tail, begin)  # relative to the period's own start
    if end_clock.astimezone(UTC) <= begin.astimezone(UTC):  # the same clock: a whole day
        end_clock += timedelta(days=1)
    return Period(begin, end_clock)


class _T:
    """Typed reads from one table; problems are collected, unknown keys reported at the end."""

    def __init__(self, data: Mapping[str, Any], where: str, problems: list[str]) -> None:
        self.data, self.where, self.problems = data, where, problems
        self.used: set[str] = set()
        self.clocks: list[tuple[str, datetime]] = []  # (key, moment) of every clock time read

    def problem(self, key: str, reason: str) -> None:
        self.problems.append(f"{self.where}.{key}: {reason}" if self.where else f"{key}: {reason}")

    def get(self, key: str, default: Any = None) -> Any:
        self.used.add(key)
        return self.data.get(key, default)

    def num(
        self, key: str, default: float | None = None, lo: float | None = None, hi: float | None = None
    ) -> float:
        value = self.get(key, default)
        if value is None:
            self.problem(key, "required")
            return 0.0
        # TOML has nan, inf, booleans and integers past a float's range: checked as the
        # configuration and the profiles check theirs (rules.numbers).
        if (problem := number_problem(value, minimum=lo, maximum=hi)) is not None:
            self.problem(key, problem)
            return 0.0
        return float(value)

    def whole(self, key: str, default: int, lo: int | None = None, hi: int | None = None) -> int:
        """A whole number (a seed, a sample rate): 2.5 is refused, not cut to 2."""
        value = self.get(key, default)
        if (problem := number_problem(value, whole=True, minimum=lo, maximum=hi)) is not None:
            self.problem(key, problem)
            return default
        return int(value)

    def text(self, key: str, default: str | None = None) -> str:
        value = self.get(key, default)
        if value is None:
            self.problem(key, "required")
            return ""
        if not isinstance(value, str):
            self.problem(key, f"expected a string, got {value!r}")
            return ""
        return value

    def texts(self, key: str) -> tuple[str, ...]:
        value = self.get(key, [])
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self.problem(key, "expected a list of strings")
            return ()
        return tuple(value)

    def table(self, key: str) -> Mapping[str, Any]:
        value = self.get(key, {})
        if not isinstance(value, dict):
            self.problem(key, "expected a table")
            return {}
        return value

    def distances(self, key: str = "distance_m") -> dict[str, float]:
        out: dict[str, float] = {}
        for sensor, d in self.table(key).items():
            if (problem := number_problem(d, more_than=0, unit=" m")) is not None:
                self.problem(f"{key}.{sensor}", problem)
                continue
            out[sensor] = float(d)
        return out

    def clock(self, key: str, start: datetime, default: str | None = None) -> datetime:
        text = self.text(key, default)
        try:
            moment = resolve_clock(text, start)
        except ValueError as exc:
            if text:
                self.problem(key, str(exc))
            return start
        self.clocks.append((key, moment))
        return moment

    def periods(self, key: str, start: datetime) -> tuple[Period, ...]:
        out = []
        for text in self.texts(key):
            try:
                period = resolve_period(text, start)
            except ValueError as exc:
                self.problem(key, str(exc))
                continue
            out.append(period)
            self.clocks += [(key, period.start), (key, period.end)]
        return tuple(out)

    def finish(self) -> None:
        for key in sorted(set(self.data) - self.used):
            self.problem(key, "unknown key")


# --------------------------------------------------------------------------- sources and events


def _source(t: _T, start: datetime) -> Source | None:
    kind = t.text("kind")
    name = t.text("name", kind)
    source: Source | None = None
    if kind == "activity":
        source = Activity(
            name,
            t.num("level_db", lo=0, hi=200),
            t.num("ref_m", 10.0, lo=0.1, hi=1e5),
            t.distances(),
            t.periods("periods", start),
            t.num("sd_db", 1.0, lo=0, hi=20),
            t.num("modulation_db", 0.0, lo=0, hi=40),
            t.num("modulation_period_s", 60.0, lo=1, hi=86400),
            t.num("absorption_db_per_km", 5.0, lo=0, hi=100),
            t.num("wind_gain_db", 2.0, lo=0, hi=20),
        )
    elif kind == "trucks":
        peak = t.get("peak_db", [82.0, 88.0])
        if (
            not isinstance(peak, list)
            or len(peak) != 2
            or not all(number_problem(p, minimum=0, maximum=200) is None for p in peak)
            or peak[0] > peak[1]
        ):
            t.problem("peak_db", "expected [low, high] in dB(A), 0 to 200")
            peak = [82.0, 88.0]
        source = Trucks(
            name,
            t.text("gate"),
            t.periods("periods", start),
            t.num("every_min", 15.0, lo=0.5, hi=1440),
            t.num("jitter_min", 3.0, lo=0, hi=720),
            (float(peak[0]), float(peak[1])),
            t.num("far_db", 20.0, lo=0, hi=100),
            t.num("pass_s", 6.0, lo=0.5, hi=120),
            bool(t.get("events", True)),
        )
    elif kind == "impulse":
        source = Impulse(
            name,
            t.clock("at", start),
            t.num("peak_db", lo=60, hi=190),
            t.num("ref_m", 100.0, lo=0.1, hi=1e5),
            t.distances(),
            t.num("crest_db", 30.0, lo=10, hi=60),
        )
    elif kind == "fixture":
        source = Fixture(name, t.text("sensor"), t.num("lux", lo=0, hi=1e5), t.periods("periods", start))
    elif kind in ("flashing", "beacon"):
        periods = t.periods("periods", start)
        if kind == "beacon" or "at" in t.data:
            at = t.clock("at", start)
            lasting = timedelta(seconds=t.num("duration_s", 20.0, lo=0.1, hi=86400))
            periods += (Period(at, elapsed(at, lasting)),)
        source = Flashing(
            name,
            t.text("sensor"),
            t.num("on_lux", lo=0, hi=1e5),
            t.num("off_lux", 0.0, lo=0, hi=1e5),
            t.num("hz", 1.0, lo=0.01, hi=50),
            t.num("duty", 0.5, lo=0.01, hi=0.99),
            periods,
        )
    elif kind == "wind":
        direction = t.get("wind_dir_deg")
        source = Wind(
            name,
            t.periods("periods", start),
            t.num("wind_ms", lo=0, hi=60),
            t.num("wind_sd_ms", 1.0, lo=0, hi=20),
            None if direction is None else t.num("wind_dir_deg", lo=0, hi=360),
            t.num("rain_mm_h", 0.0, lo=0, hi=500),
        )
    elif kind == "offline":
        source = Offline(name, t.text("sensor"), t.periods("periods", start))
    else:
        t.problem(
            "kind",
            f"unknown source kind {kind!r} (known: activity, trucks, impulse, fixture, "
            "flashing, beacon, wind, offline)",
        )
        return None
    t.finish()
    return source


EVENT_KINDS = ("blast-notice", "blast", "work", "temporary-lighting", "truck")


def _blast_id(t: _T, day: datetime) -> str:
    """The blast's id, "{mmdd}" replaced by the local day it is fired (planned) on: a scenario
    replayed on another day (`--date`) names that day's blasts by it, and days replayed into one
    store do not share blast ids."""
    return t.text("blast_id").replace("{mmdd}", f"{day:%m%d}")


def _event(t: _T, start: datetime, scenario_start: datetime) -> OperatorEvent | None:
    kind = t.text("kind")
    fields: dict[str, Any] = {}
    if kind == "blast-notice":
        planned = t.clock("planned", start)
        fields = {
            "blast_id": _blast_id(t, planned),
            "issued_ts": t.clock("issued", start),
            "planned_ts": planned,
            "recipients": t.texts("recipients"),
        }
        # The planned blast's design, for the operator's scaled-distance forecast (issue 27).
        if "charge_per_delay_kg" in t.data:
            fields["charge_per_delay_kg"] = t.num("charge_per_delay_kg", lo=0.01, hi=1e5)
        if "distance_m" in t.data:
            fields["distance_m"] = t.num("distance_m", lo=1, hi=1e5)
        publish = fields["issued_ts"]
    elif kind == "blast":
        fired = t.clock("at", start)
        fields = {"blast_id": _blast_id(t, fired), "ts": fired}
        if "safety_reason" in t.data:
            fields["safety_reason"] = t.text("safety_reason")
        if "charge_kg" in t.data:
            fields["charge_kg"] = t.num("charge_kg", lo=0, hi=1e6)
        # What a seismograph at the nearest structure records (sensors/seismograph.py): its
        # distance, and optionally the PPV (in/s) and main frequency (Hz) instead of the site law's.
        if "seismograph_distance_m" in t.data:
            fields["seismograph_distance_m"] = t.num("seismograph_distance_m", lo=1, hi=1e5)
        if "ppv_in_s" in t.data:
            fields["ppv_in_s"] = t.num("ppv_in_s", lo=0.001, hi=20)
        if "vibration_hz" in t.data:
            fields["vibration_hz"] = t.num("vibration_hz", lo=1, hi=200)
        publish = elapsed(fields["ts"], timedelta(seconds=t.num("report_delay_s", 0.0, lo=0, hi=86400)))
    elif kind in ("work", "temporary-lighting"):
        period = t.periods("period", start)
        if len(period) != 1:
            t.problem("period", "expected one period like 08:00-09:30")
            return None
        fields = {"id": t.text("id"), "start": period[0].start, "end": period[0].end}
        if kind == "work":
            work = t.text("work")
            if work not in {k.value for k in WorkKind}:
                t.problem("work", f"must be one of {', '.join(k.value for k in WorkKind)}")
            fields["kind"] = work
            fields["sensors"] = t.texts("sensors")
        else:
            fields["description"] = t.text("description", "")
        declared = t.get("declared")
        publish = (
            t.clock("declared", start)
            if declared is not None
            else elapsed(period[0].start, -timedelta(minutes=5))
        )
    elif kind == "truck":
        fields = {"ts": t.clock("at", start), "gate": t.text("gate"), "direction": t.text("direction", "in")}
        publish = fields["ts"]
    else:
        t.problem("kind", f"unknown event kind {kind!r} (known: {', '.join(EVENT_KINDS)})")
        return None
    _refuse_skipped_clocks(t, _event_name(kind, fields))
    t.finish()
    # Anything the operator sent before the simulated window goes out first. In UTC: within one
    # zone Python compares the clock's face, ignoring fold (the hour shown twice).
    return OperatorEvent(
        kind, max(publish, scenario_start, key=lambda moment: moment.astimezone(UTC)), fields
    )


def _event_name(kind: str, fields: Mapping[str, Any]) -> str:
    """An operator event as a refusal names it: "blast b-0308-1", "work w-1", "truck at east"."""
    if kind == "truck":
        return f"truck at {fields['gate']}"
    name = fields["blast_id"] if kind in ("blast", "blast-notice") else fields["id"]
    return f"{kind.replace('-', ' ')} {name}"


def _refuse_skipped_clocks(t: _T, event: str) -> None:
    """An operator event's clock time the clocks skip in spring (02:30 on 2026-03-08 in Chicago)
    is a problem in the words of ``--start``'s refusal, naming the event, the time and the date:
    read as it stands it was an hour on (03:30 CDT), a blast record or a notice an hour off the
    time the scenario wrote. A source's is still read an hour on: it only shapes the signals,
    and a built-in day (dovre-day's 02:10 beacon) is replayed on any --date."""
    for key, moment in t.clocks:
        shown = f"{moment:%H:%M:%S}" if moment.second else f"{moment:%H:%M}"
        try:
            refuse_if_skipped(
                moment,
                subject=f"{shown} on {moment:%Y-%m-%d} ({event})",
                instead="give a time an hour later or earlier, or another date",
            )
        except UsageError as exc:
            t.problem(key, str(exc))


# --------------------------------------------------------------------------- loading


def builtin_names() -> list[str]:
    folder = resources.files("sensors").joinpath(BUILTIN_DIR)
    return sorted(p.name.removesuffix(".toml") for p in folder.iterdir() if p.name.endswith(".toml"))


def read_scenario_text(name_or_path: str) -> tuple[str, str]:
    """(text, source) of a built-in scenario by name, or of a file by path."""
    if name_or_path.endswith(".toml") or "/" in name_or_path:
        try:
            return read_named_text(name_or_path, "scenario"), name_or_path
        except NamedFileError as exc:
            raise ScenarioError([str(exc)]) from None
    if "." in name_or_path or Path(name_or_path).exists():  # a file, not a name: garbage.wav
        raise ScenarioError(
            [
                f"{name_or_path}: a scenario is a TOML file (its name ends in .toml) or a built-in one"
                f" ({', '.join(builtin_names())})"
            ]
        )
    resource = resources.files("sensors").joinpath(BUILTIN_DIR, f"{name_or_path}.toml")
    if not resource.is_file():
        raise ScenarioError(
            [f"no built-in scenario {name_or_path!r} (built-in: {', '.join(builtin_names())})"]
        )
    return resource.read_text(encoding="utf-8"), f"sensors/{BUILTIN_DIR}/{name_or_path}.toml"


def parse_scenario(
    text: str,
    tz: ZoneInfo,
    *,
    start: datetime | None = None,
    duration: timedelta | None = None,
    source: str = "<scenario>",
) -> Scenario:
    """Parse and resolve a scenario for a site zone; ``start``/``duration`` override the file's."""
    problems: list[str] = []
    root = _T(_toml(text, source), "", problems)
    name = root.text("name", Path(source).stem)
    description = root.text("description", "")
    start, duration = _start_and_duration(root, tz, start, duration, problems)
    seed = root.whole("seed", 1)
    status_interval = root.num("status_interval_s", 300.0, lo=1, hi=86400)

    sound: dict[str, SoundSensor] = {}
    for sensor_id, table in root.table("sound").items():
        t = _T(table, f"sound.{sensor_id}", problems)
        d = SoundSensor()
        sound[sensor_id] = SoundSensor(
            t.num("ambient_day_db", d.ambient_day_db, lo=0, hi=120),
            t.num("ambient_night_db", d.ambient_night_db, lo=0, hi=120),
            t.num("bearing_deg", d.bearing_deg, lo=0, hi=360),
            t.num("c_minus_a_db", d.c_minus_a_db, lo=0, hi=30),
        )
        t.finish()
    light: dict[str, LightSensor] = {}
    for sensor_id, table in root.table("light").items():
        t = _T(table, f"light.{sensor_id}", problems)
        dl = LightSensor()
        rate = t.num("burst_rate_hz", dl.burst_rate_hz, lo=0, hi=1000)
        light[sensor_id] = LightSensor(
            t.num("ambient_night_lux", dl.ambient_night_lux, lo=0, hi=1000),
            t.num("daylight_factor", dl.daylight_factor, lo=0, hi=1),
            rate,
        )
        t.finish()
    at = _T(root.table("audio"), "audio", problems)
    da = Audio()
    audio = Audio(
        at.texts("sensors"),
        at.whole("sample_rate", da.sample_rate, lo=8000, hi=96000),
        at.text("format", da.sample_format),
        at.whole("clip_before_s", da.clip_before_s, lo=0, hi=600),
        at.whole("clip_after_s", da.clip_after_s, lo=0, hi=600),
        at.whole("minutes_per_hour", da.minutes_per_hour, lo=0, hi=60),
    )
    if audio.sample_format not in ("s16le", "f32le"):
        at.problem("format", "must be s16le or f32le")
    at.finish()
    wt = _T(root.table("weather"), "weather", problems)
    dw = Weather()
    weather = Weather(
        wt.text("sensor", ""),
        wt.num("wind_ms", dw.wind_ms, lo=0, hi=60),
        wt.num("wind_sd_ms", dw.wind_sd_ms, lo=0, hi=20),
        wt.num("wind_dir_deg", dw.wind_dir_deg, lo=0, hi=360),
    )
    wt.finish()

    sources: list[Source] = []
    raw_sources = root.get("sources", [])
    for i, table in enumerate(raw_sources if isinstance(raw_sources, list) else []):
        made = _source(_T(table, f"sources[{i}]", problems), start)
        if made is not None:
            sources.append(made)
    events: list[OperatorEvent] = []
    raw_events = root.get("events", [])
    for i, table in enumerate(raw_events if isinstance(raw_events, list) else []):
        event = _event(_T(table, f"events[{i}]", problems), start, start)
        if event is not None:
            events.append(event)
    root.finish()
    if problems:
        raise ScenarioError([f"{source}: {p}" for p in problems])
    return Scenario(
        name,
        description,
        start,
        duration,
        seed,
        status_interval,
        sound,
        light,
        audio,
        weather,
        tuple(sources),
        tuple(sorted(events, key=lambda e: e.publish_at.astimezone(UTC))),
    )


def _toml(text: str, source: str) -> dict[str, Any]:
    try:
        return toml_document(text)
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError([f"{source}: not valid TOML: {exc}"]) from None


def _start_and_duration(
    root: _T, tz: ZoneInfo, start: datetime | None, duration: timedelta | None, problems: list[str]
) -> tuple[datetime, timedelta]:
    """The scenario's start and duration: ``start``/``duration`` when given, else the file's."""
    start_text = root.text("start", "")
    duration_text = root.text("duration", "24h")  # read even when overridden: it is a known key
    if start is None:
        try:
            start = parse_start(start_text, tz)
        except UsageError as exc:
            # A time that occurs twice is fixed by writing its offset, as the line says; --start
            # helps a start that is no time at all.
            problems.append(str(exc) if isinstance(exc, OccursTwice) else f"{exc} (or give --start)")
            start = datetime(2026, 1, 1, tzinfo=tz)
    if duration is None:
        try:
            duration = parse_duration(duration_text)
        except ValueError as exc:
            problems.append(f"duration: {exc}")
            duration = timedelta(hours=24)
    if duration <= timedelta(0):
        problems.append("duration: must be positive")
    return start.astimezone(tz), duration


def scenario_times(name_or_path: str, tz: ZoneInfo) -> tuple[datetime, timedelta]:
    """A scenario's own start and duration alone, for ``--date`` (the start's time of day on
    another date): its clock times are resolved on the date simulated, not on the file's own,
    where an event's time the clocks skip would refuse the other date too."""
    text, source = read_scenario_text(name_or_path)
    problems: list[str] = []
    times = _start_and_duration(_T(_toml(text, source), "", problems), tz, None, None, problems)
    if problems:
        raise ScenarioError([f"{source}: {p}" for p in problems])
    return times


def load_scenario(
    name_or_path: str, tz: ZoneInfo, *, start: datetime | None = None, duration: timedelta | None = None
) -> Scenario:
    text, source = read_scenario_text(name_or_path)
    return parse_scenario(text, tz, start=start, duration=duration, source=source)


def check_against_site(
    scenario: Scenario, sensors: Mapping[str, str], gates: set[str]
) -> tuple[list[str], list[str]]:
    """(problems, notes): references to sensors or gates the site lacks.

    ``sensors`` maps sensor id -> kind. Sources on a sensor the site does not have are
    skipped with a note (a test site may have fewer sensors); operator events that name
    one, or a gate, are errors, because the daemon would reject them.
    """
    problems: list[str] = []
    notes: list[str] = []
    for sensor_id in scenario.sound:
        if sensor_id not in sensors:
            notes.append(f"sound sensor {sensor_id} is not configured for the site; not simulated")
        elif sensors[sensor_id] != "sound":
            problems.append(f"sound.{sensor_id}: the site's {sensor_id} is a {sensors[sensor_id]} sensor")
    for sensor_id in scenario.light:
        if sensor_id not in sensors:
            notes.append(f"light sensor {sensor_id} is not configured for the site; not simulated")
        elif sensors[sensor_id] not in ("light", "sky"):
            problems.append(f"light.{sensor_id}: the site's {sensor_id} is a {sensors[sensor_id]} sensor")
    if scenario.weather.sensor and scenario.weather.sensor not in sensors:
        notes.append(f"weather sensor {scenario.weather.sensor} is not configured; no weather published")
    for source in scenario.sources:
        if isinstance(source, Trucks) and source.gate not in gates:
            problems.append(
                f"source {source.name!r}: gate {source.gate!r} is not configured "
                f"(gates: {', '.join(sorted(gates)) or 'none'})"
            )
    for event in scenario.events:
        if event.kind == "truck" and event.fields["gate"] not in gates:
            problems.append(f"event truck: gate {event.fields['gate']!r} is not configured")
        for sensor_id in event.fields.get("sensors", ()):
            if sensor_id not in sensors:
                problems.append(
                    f"event {event.kind} {event.fields.get('id')}: sensor {sensor_id} is not configured"
                )
    return problems, notes
