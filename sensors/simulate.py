"""The site simulator's core: a scenario and a site in, time-ordered records out. No I/O.

    Scenario (sensors/scenario.py) + SiteConfig ──► Simulation.messages()
        per 5-minute chunk: wind ─► sound levels per second per sound sensor
                                    (ambient + machinery by distance and wind + truck passes
                                     + impulses), raw audio clips for the audio sensors,
                            light summaries with 10 Hz bursts, weather, status heartbeats,
                            operator events (notices, blast records, declared work, gate camera)
        ──► heap ordered by publish time ──► (publish time, record)

The shell (monitor/commands/simulate.py) encodes each record with monitor.wire.codec and
publishes it at the pace ``--speed`` asks for. The numbers are models, not measurements:
enough to drive every rule of the profile the way a real day would, deterministic for
a seed (each sensor and chunk has its own random stream, so they do not depend on each
other).
"""

from __future__ import annotations

import heapq
import math
import zlib
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any

import numpy as np
from astral import Observer
from astral.sun import elevation
from numpy.typing import NDArray
from scipy import signal as sps

from monitor.acoustics.iec61672 import SoundLevelMeter
from monitor.config import SensorConfig, SiteConfig
from monitor.wire.codec import AudioBlock, Message
from rules.model import (
    Blast,
    BlastNotice,
    LightSummary,
    SensorKind,
    SensorStatus,
    SoundLevels,
    TemporaryLighting,
    TruckPassage,
    WeatherReading,
    WorkKind,
    WorkPeriod,
)
from sensors.scenario import (
    Activity,
    Fixture,
    Flashing,
    Impulse,
    LightSensor,
    Offline,
    Period,
    Scenario,
    SoundSensor,
    Trucks,
    Wind,
    check_against_site,
)

FloatArray = NDArray[np.float64]
CHUNK_S = 300  # generation step; chunk edges fall on whole 5 minutes
MIC_WIND_FROM_MS = 5.0  # wind noise on the microphone's windscreen above this


@dataclass(frozen=True, slots=True)
class TruckPass:
    ts: float  # epoch seconds
    gate: str
    direction: str
    truck_id: str
    peak_db: float
    pass_s: float
    far_db: float
    report: bool


@dataclass
class Stats:
    """What was generated, for the summary at the end."""

    by_sensor: Counter[tuple[str, str]] = field(default_factory=Counter)  # (sensor, kind) -> count
    # Operator events and what happened: (publish time, line); None for a line about the whole run.
    events: list[tuple[datetime | None, str]] = field(default_factory=list)
    after_end: int = 0  # operator events the scenario has after the window's end: not published
    first: datetime | None = None
    last: datetime | None = None

    @property
    def total(self) -> int:
        return sum(self.by_sensor.values())


def _stream(seed: int, *names: str | int) -> np.random.Generator:
    """An independent random stream per (seed, name...): stable whatever else is simulated."""
    keys = [seed & 0xFFFFFFFF] + [zlib.crc32(str(n).encode()) for n in names]
    return np.random.default_rng(keys)


def _epoch(ts: datetime) -> float:
    return ts.timestamp()


def _utc(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


def _mask(t: FloatArray, periods: tuple[Period, ...]) -> NDArray[np.bool_]:
    mask = np.zeros(t.shape, dtype=bool)
    for p in periods:
        mask |= (t >= _epoch(p.start)) & (t < _epoch(p.end))
    return mask


def _db_sum(*levels: FloatArray) -> FloatArray:
    total: FloatArray = np.sum([10.0 ** (lv / 10.0) for lv in levels], axis=0)
    return 10.0 * np.log10(total)


_TWILIGHT = (np.array([-18.0, -12.0, -6.0, -3.0, 0.0]), np.log10([0.0005, 0.005, 0.5, 30.0, 400.0]))


def daylight_lux(elevation_deg: FloatArray) -> FloatArray:
    """Open-sky illuminance from the sun's elevation (a smooth model: ~0.5 lx at civil dusk)."""
    e = np.asarray(elevation_deg, dtype=np.float64)
    low = 10.0 ** np.interp(e, *_TWILIGHT)
    high = 400.0 + 110_000.0 * np.sin(np.radians(np.clip(e, 0.0, 90.0)))
    return np.where(e <= 0.0, low, high)


@lru_cache(maxsize=8)
def _noise_reference_db(sample_rate: int, full_scale_db: float) -> float:
    """LAeq of the simulator's unit-RMS machinery noise, measured once with the shared meter."""
    noise = _machinery_noise(np.random.default_rng(0), 5 * sample_rate, sample_rate)
    meter = SoundLevelMeter(sample_rate, 1.0, calibration_db=full_scale_db)
    periods = meter.process(noise)[1:]  # the first second holds the filters' start-up
    return float(10 * np.log10(np.mean([10 ** (p.LAeq / 10) for p in periods])))


def _machinery_noise(rng: np.random.Generator, n: int, sample_rate: int) -> FloatArray:
    """Unit-RMS noise weighted to low frequencies, like crushers and diesel engines."""
    white = rng.standard_normal(n + sample_rate // 10)
    pole = math.exp(-2 * math.pi * 800.0 / sample_rate)
    shaped = sps.lfilter([1 - pole], [1.0, -pole], white)[sample_rate // 10 :]
    out: FloatArray = shaped / np.sqrt(np.mean(shaped**2))
    return out


class Simulation:
    """One simulated run of a scenario at a site; iterate ``messages()`` once."""

    def __init__(self, scenario: Scenario, site: SiteConfig, seed: int | None = None) -> None:
        self.scenario = scenario
        self.site = site
        self.seed = scenario.seed if seed is None else seed
        self.tz = scenario.start.tzinfo
        kinds = {s.id: s.kind.value for s in site.sensors}
        problems, self.notes = check_against_site(scenario, kinds, {g.id for g in site.gates})
        if problems:
            from sensors.scenario import ScenarioError

            raise ScenarioError(problems)
        self.start = math.floor(_epoch(scenario.start))
        self.end = math.floor(_epoch(scenario.end))
        configured = {s.id: s for s in site.sensors}
        self.sound: dict[str, tuple[SoundSensor, SensorConfig]] = {
            sid: (spec, configured[sid]) for sid, spec in scenario.sound.items() if sid in configured
        }
        self.light: dict[str, tuple[LightSensor, SensorConfig]] = {
            sid: (spec, configured[sid]) for sid, spec in scenario.light.items() if sid in configured
        }
        self.weather_sensor = configured.get(scenario.weather.sensor)
        self.audio_sensors = [s for s in scenario.audio.sensors if s in self.sound]
        self.offline: dict[str, tuple[Period, ...]] = {}
        for off in scenario.of(Offline):
            self.offline[off.sensor] = self.offline.get(off.sensor, ()) + off.periods
        self.trucks = self._truck_passes()
        self.impulses: list[Impulse] = scenario.of(Impulse)
        self.observer = Observer(site.latitude, site.longitude)
        self.stats = Stats()
        self._wind_state = 0.0
        self._seq: Counter[str] = Counter()

    # ------------------------------------------------------------------ plan

    def _truck_passes(self) -> list[TruckPass]:
        passes: list[TruckPass] = []
        for source in self.scenario.of(Trucks):
            rng = _stream(self.seed, "trucks", source.name, source.gate)
            every = source.every_min * 60.0
            count = 0
            for period in source.periods:
                t0, t1 = _epoch(period.start), _epoch(period.end)
                k = 0
                while t0 + every * (k + 0.5) < t1:
                    ts = t0 + every * (k + 0.5) + rng.uniform(-1, 1) * source.jitter_min * 60.0
                    k += 1
                    if not t0 <= ts < t1 or not self.start <= ts < self.end:
                        continue
                    count += 1
                    passes.append(
                        TruckPass(
                            float(round(ts)),
                            source.gate,
                            "in" if count % 2 else "out",
                            f"T{int(rng.integers(1, 13)):02d}",
                            float(rng.uniform(*source.peak_db)),
                            source.pass_s,
                            source.far_db,
                            source.events,
                        )
                    )
        return sorted(passes, key=lambda p: p.ts)

    def _audio_windows(self, sensor: str) -> list[tuple[float, float]]:
        a = self.scenario.audio
        windows: list[tuple[float, float]] = [
            (math.floor(_epoch(i.at)) - a.clip_before_s, math.floor(_epoch(i.at)) + a.clip_after_s)
            for i in self.impulses
            if sensor in i.distance_m
        ]
        if a.minutes_per_hour:
            hour = math.ceil(self.start / 3600) * 3600
            while hour < self.end:
                windows.append((hour, hour + 60 * a.minutes_per_hour))
                hour += 3600
        return windows

    # ------------------------------------------------------------------ output

    def messages(self) -> Iterator[tuple[datetime, Message]]:
        """(publish time, record) in publish-time order, for the whole scenario."""
        heap: list[tuple[float, int, Message]] = []
        order = 0

        def push(at: float, message: Message) -> None:
            nonlocal order
            order += 1
            heapq.heappush(heap, (at, order, message))

        for event in self._operator_events():
            push(*event)
        chunk = self.start - self.start % CHUNK_S
        while chunk < self.end:
            lo, hi = max(chunk, self.start), min(chunk + CHUNK_S, self.end)
            for at, message in self._chunk(lo, hi):
                push(at, message)
            while heap and heap[0][0] < hi:
                at, _, message = heapq.heappop(heap)
                yield self._count(at, message)
            chunk += CHUNK_S
        while heap:
            at, _, message = heapq.heappop(heap)
            yield self._count(at, message)

    def _count(self, at: float, message: Message) -> tuple[datetime, Message]:
        when = _utc(at)
        sensor = getattr(message, "sensor", "")
        kind = {
            SoundLevels: "levels",
            AudioBlock: "audio",
            LightSummary: "light",
            WeatherReading: "weather",
            SensorStatus: "status",
        }.get(type(message), "event")
        self.stats.by_sensor[(sensor or "operator", kind if sensor else type(message).__name__)] += 1
        self.stats.first = self.stats.first or when
        self.stats.last = when
        return when, message

    def _seismograph_event(self, f: Mapping[str, Any]) -> Iterator[tuple[float, Message]]:
        """A blast as each seismograph of the site records it (sensors/seismograph.py): the event's
        summary and waveform chunks, sent once its record (5 s) is complete."""
        from sensors.seismograph import event_messages, site_law_event

        if "seismograph_distance_m" not in f:
            return
        ts = f["ts"].astimezone(UTC)
        for sensor in (s for s in self.site.sensors if s.kind == SensorKind.SEISMOGRAPH):
            hz = float(f.get("vibration_hz", 10.0))
            wave = site_law_event(
                f["seismograph_distance_m"],
                float(f.get("charge_kg") or 100.0),
                ppv_in_s=f.get("ppv_in_s"),
                freqs=(hz, hz * 1.2, hz * 2.0),
                seed=int(ts.timestamp()) % 1000,
            )
            first = ts - timedelta(seconds=0.5)  # the pre-trigger
            messages = event_messages(
                wave,
                self.site.id,
                sensor.id,
                f"{sensor.id}-{f['blast_id']}",
                first,
                blast_id=f["blast_id"],
                instrument={
                    "model": "minewatch simulated seismograph",
                    "location": sensor.location,
                    "distance_m": f["seismograph_distance_m"],
                    "recorded_by": "simulator",
                },
            )
            sent = _epoch(first) + wave.duration_s + 1.0
            for i, message in enumerate(messages):
                yield sent + i * 0.001, message
            self.stats.events.append((_utc(sent), f"seismograph {sensor.id} event of blast {f['blast_id']}"))

    def _operator_events(self) -> Iterator[tuple[float, Message]]:
        site = self.site.id
        local = self.tz
        for event in self.scenario.events:
            if _epoch(event.publish_at) >= self.end:  # past a shorter --duration: not in the window
                self.stats.after_end += 1
                continue
            f = event.fields
            record: Message
            if event.kind == "blast-notice":
                record = BlastNotice(
                    site,
                    f["blast_id"],
                    f["issued_ts"].astimezone(UTC),
                    f["planned_ts"].astimezone(UTC),
                    tuple(f["recipients"]),
                    f.get("charge_per_delay_kg"),
                    f.get("distance_m"),
                )
                issued, planned = f["issued_ts"], f["planned_ts"]
                to = ", ".join(f["recipients"]) or "nobody"
                text = f"blast notice {f['blast_id']} issued {issued:%a %H:%M} for {planned:%a %H:%M} to {to}"
                if "charge_per_delay_kg" in f and "distance_m" in f:
                    charge, distance = f["charge_per_delay_kg"], f["distance_m"]
                    text += f" ({charge:g} kg a delay, {distance:g} m to the nearest structure)"
            elif event.kind == "blast":
                record = Blast(
                    site, f["blast_id"], f["ts"].astimezone(UTC), f.get("safety_reason"), f.get("charge_kg")
                )
                reason = f.get("safety_reason")
                text = f"blast {f['blast_id']} at {f['ts']:%H:%M:%S}" + (
                    f" (safety reason: {reason})" if reason else " (no safety reason)"
                )
                yield from self._seismograph_event(f)
            elif event.kind == "work":
                record = WorkPeriod(
                    site,
                    f["id"],
                    f["start"].astimezone(UTC),
                    f["end"].astimezone(UTC),
                    WorkKind(f["kind"]),
                    tuple(f["sensors"]),
                )
                text = f"{f['kind']} work {f['id']} {f['start']:%H:%M}-{f['end']:%H:%M}" + (
                    f" at {', '.join(f['sensors'])}" if f["sensors"] else ""
                )
            elif event.kind == "temporary-lighting":
                record = TemporaryLighting(
                    site, f["id"], f["start"].astimezone(UTC), f["end"].astimezone(UTC), f["description"]
                )
                text = f"temporary lighting {f['id']} {f['start']:%H:%M}-{f['end']:%H:%M}"
            else:  # truck
                ts = f["ts"].astimezone(UTC)
                record = TruckPassage(
                    site, f"truck-{f['gate']}-{int(ts.timestamp())}", ts, f["gate"], f["direction"]
                )
                text = f"truck at {f['gate']} {f['ts']:%H:%M:%S}"
            self.stats.events.append(
                (event.publish_at, f"{event.publish_at.astimezone(local):%Y-%m-%d %H:%M:%S} {text}")
            )
            yield _epoch(event.publish_at), record
        for p in self.trucks:
            if p.report:
                ts = _utc(p.ts)
                yield (
                    p.ts,
                    TruckPassage(site, f"truck-{p.gate}-{int(p.ts)}", ts, p.gate, p.direction, p.truck_id),
                )
        if self.trucks:
            gates = Counter(p.gate for p in self.trucks)
            self.stats.events.append(
                (None, "truck passes: " + ", ".join(f"{n} at {g}" for g, n in sorted(gates.items())))
            )

    # ------------------------------------------------------------------ one chunk

    def _chunk(self, lo: int, hi: int) -> Iterator[tuple[float, Message]]:
        t = np.arange(lo, hi, dtype=np.float64)
        wind, wind_dir, rain = self._wind(t, lo)
        for sensor_id, (spec, config) in self.sound.items():
            yield from self._sound(sensor_id, spec, config, t, wind, wind_dir, lo)
        for sensor_id, (light_spec, config) in self.light.items():
            yield from self._light(sensor_id, light_spec, config, lo, hi)
        if self.weather_sensor is not None:
            yield from self._weather(self.weather_sensor, t, wind, rain, lo, hi)
        yield from self._status(lo, hi)

    def _wind(self, t: FloatArray, lo: int) -> tuple[FloatArray, FloatArray, FloatArray]:
        w = self.scenario.weather
        rng = _stream(self.seed, "wind", lo)
        base = np.full(t.shape, w.wind_ms)
        sd = np.full(t.shape, w.wind_sd_ms)
        direction = np.full(t.shape, w.wind_dir_deg)
        rain = np.zeros(t.shape)
        for source in self.scenario.of(Wind):
            m = _mask(t, source.periods)
            base[m], sd[m], rain[m] = source.wind_ms, source.wind_sd_ms, source.rain_mm_h
            if source.wind_dir_deg is not None:
                direction[m] = source.wind_dir_deg
        # Gusts: AR(1) noise with a ~20 s memory, carried across chunks.
        a = math.exp(-1 / 20)
        noise, _zf = sps.lfilter(
            [math.sqrt(1 - a * a)], [1, -a], rng.standard_normal(t.size), zi=[self._wind_state * a]
        )
        self._wind_state = float(noise[-1])
        return np.clip(base + sd * noise, 0.0, 60.0), direction, rain

    def _offline(self, sensor: str, t: FloatArray) -> NDArray[np.bool_]:
        return _mask(t, self.offline.get(sensor, ()))

    def _sound(
        self,
        sensor: str,
        spec: SoundSensor,
        config: SensorConfig,
        t: FloatArray,
        wind: FloatArray,
        wind_dir: FloatArray,
        lo: int,
    ) -> Iterator[tuple[float, Message]]:
        rng = _stream(self.seed, "sound", sensor, lo)
        n = t.size
        hours = np.array([_utc(x).astimezone(self.tz).hour for x in t[::60]]).repeat(60)[:n]
        day = (hours >= 6) & (hours < 21)
        levels = [np.where(day, spec.ambient_day_db, spec.ambient_night_db) + rng.normal(0, 1.0, n)]
        # Machinery, spread by distance; downwind louder, upwind quieter.
        toward = np.cos(np.radians(spec.bearing_deg - (wind_dir + 180.0)))
        for source in self.scenario.of(Activity):
            d = source.distance_m.get(sensor)
            if d is None:
                continue
            active = _mask(t, source.periods)
            if not active.any():
                continue
            level = (
                source.level_db
                - 20 * math.log10(d / source.ref_m)
                - source.absorption_db_per_km * d / 1000
                + source.wind_gain_db * np.minimum(wind / 5.0, 1.5) * toward
                + rng.normal(0, source.sd_db, n)
            )
            if source.modulation_db:
                phase = zlib.crc32(source.name.encode()) % 1000 / 1000 * 2 * math.pi
                level += source.modulation_db * np.sin(2 * math.pi * t / source.modulation_period_s + phase)
            levels.append(np.where(active, level, -100.0))
        # Haul trucks: a pass-by at the sensors near their gate, far quieter elsewhere.
        for p in self.trucks:
            if p.ts < t[0] - 120 or p.ts > t[-1] + 120:
                continue
            near = p.gate in config.gates
            peak = p.peak_db if near else p.peak_db - p.far_db
            levels.append(peak - 10 * np.log10(1 + ((t - p.ts) / p.pass_s) ** 2))
        gusty = wind > MIC_WIND_FROM_MS
        if gusty.any():
            levels.append(np.where(gusty, 30.0 + 35.0 * np.log10(np.maximum(wind, 1.0)), -100.0))
        laeq = _db_sum(*levels) + rng.normal(0, 0.2, n)
        lafmax = laeq + 1.0 + np.abs(rng.normal(0, 0.8, n))
        lasmax = laeq + 0.3 + np.abs(rng.normal(0, 0.3, n))
        lafmin = laeq - 1.5 - np.abs(rng.normal(0, 1.2, n))
        lceq = laeq + spec.c_minus_a_db + rng.normal(0, 0.5, n)
        lcpeak = lceq + 13.0 + rng.normal(0, 1.5, n)
        lzeq = lceq + 1.5
        lzpeak = lcpeak + 2.0 + np.abs(rng.normal(0, 0.5, n))
        impulse_peaks: dict[int, float] = {}
        for imp in self.impulses:
            d = imp.distance_m.get(sensor)
            i = int(math.floor(_epoch(imp.at)) - lo)
            if d is None or not -3 < i < n:
                continue
            peak = imp.peak_db - 20 * math.log10(d / imp.ref_m)
            blast = peak - imp.crest_db
            # The detonation second, then two seconds of rumble (within the rule's settle time).
            for k, (drop, peak_drop) in enumerate(((0.0, 0.0), (8.0, 14.0), (14.0, 20.0))):
                j = i + k
                if not 0 <= j < n:
                    continue
                laeq[j] = _db_sum(np.array(laeq[j]), np.array(blast - drop))
                lafmax[j] = max(lafmax[j], blast - drop + 9.0)
                lasmax[j] = max(lasmax[j], blast - drop + 4.0)
                lceq[j] = max(lceq[j], laeq[j] + 8.0)
                lzeq[j] = max(lzeq[j], lceq[j] + 2.0)
                lzpeak[j] = max(lzpeak[j], peak - peak_drop)
                lcpeak[j] = max(lcpeak[j], peak - peak_drop - 2.0)
            if 0 <= i < n:
                impulse_peaks[i] = peak
        off = self._offline(sensor, t)
        audio = np.zeros(n, dtype=bool)
        if sensor in self.audio_sensors:
            for a, b in self._audio_windows(sensor):
                audio |= (t >= a) & (t < b)
            audio &= ~off
        site = self.site.id
        # Rounded in numpy and converted once: per-record Python work dominates a day's run.
        columns = np.round(np.vstack([laeq, lafmax, lcpeak, lasmax, lzpeak, lafmin, lceq, lzeq]), 1)
        keep = np.flatnonzero(~off & ~audio)
        for i, row in zip(keep.tolist(), columns[:, keep].T.tolist(), strict=True):
            second = lo + i
            yield second + 1.0, SoundLevels(site, sensor, _utc(second), 1.0, *row)
        if audio.any():
            yield from self._audio(sensor, config, t, audio, laeq, impulse_peaks, rng)

    def _audio(
        self,
        sensor: str,
        config: SensorConfig,
        t: FloatArray,
        audio: NDArray[np.bool_],
        laeq: FloatArray,
        impulse_peaks: dict[int, float],
        rng: np.random.Generator,
    ) -> Iterator[tuple[float, Message]]:
        """Raw PCM for the audio seconds, shaped so the daemon's meter reads the modelled levels."""
        a = self.scenario.audio
        rate = a.sample_rate
        full_scale = config.calibration.full_scale_db
        reference = _noise_reference_db(rate, full_scale)
        idx = np.flatnonzero(audio)
        # Contiguous runs: one continuous noise stream each, so the filters see no seams.
        runs = np.split(idx, np.flatnonzero(np.diff(idx) != 1) + 1)
        for run in runs:
            noise = _machinery_noise(rng, run.size * rate, rate)
            for k, i in enumerate(run):
                x = noise[k * rate : (k + 1) * rate] * 10 ** ((laeq[i] - reference) / 20)
                if int(i) in impulse_peaks:
                    x = x + _blast_wave(impulse_peaks[int(i)], full_scale, rate)
                self._seq[sensor] += 1
                if a.sample_format == "s16le":
                    pcm = (np.clip(x, -1.0, 32767 / 32768) * 32768).astype("<i2").tobytes()
                else:
                    pcm = x.astype("<f4").tobytes()
                ts = _utc(float(t[i]))
                yield (
                    float(t[i]) + 1.0,
                    AudioBlock(self.site.id, sensor, ts, self._seq[sensor], rate, a.sample_format, pcm),
                )

    def _light(
        self, sensor: str, spec: LightSensor, config: SensorConfig, lo: int, hi: int
    ) -> Iterator[tuple[float, Message]]:
        period = config.expected_period_s
        rng = _stream(self.seed, "light", sensor, lo)
        first = math.ceil(lo / period) * period
        starts = np.arange(first, hi, period)
        if starts.size == 0:
            return
        starts = starts[~self._offline(sensor, starts)]
        rate = spec.burst_rate_hz if spec.burst_rate_hz > 0 else 1.0
        per = max(1, round(period * rate))
        ts_grid = starts[:, None] + np.arange(per)[None, :] / rate  # (summaries, samples)
        # Sun elevation every minute of the chunk, interpolated (astral is slow per sample).
        minutes = np.arange(lo - lo % 60, hi + 61, 60, dtype=np.float64)
        elev = np.array([elevation(self.observer, _utc(float(m))) for m in minutes])
        lux = spec.ambient_night_lux + spec.daylight_factor * daylight_lux(np.interp(ts_grid, minutes, elev))
        lux = lux * (1 + rng.normal(0, 0.01, lux.shape))
        for fixture in self.scenario.of(Fixture):
            if fixture.sensor == sensor:
                lux += np.where(
                    _mask(ts_grid, fixture.periods), fixture.lux * (1 + rng.normal(0, 0.02, lux.shape)), 0.0
                )
        for flash in self.scenario.of(Flashing):
            if flash.sensor != sensor:
                continue
            for p in flash.periods:
                inside = (ts_grid >= _epoch(p.start)) & (ts_grid < _epoch(p.end))
                on = ((ts_grid - _epoch(p.start)) * flash.hz) % 1.0 < flash.duty
                lux += np.where(inside, np.where(on, flash.on_lux, flash.off_lux), 0.0)
        lux = np.clip(lux + rng.normal(0, 0.003, lux.shape), 0.0, 200_000.0)
        site = self.site.id
        for row, start in zip(lux, starts, strict=True):
            values = np.round(row, 4)
            burst = tuple(float(v) for v in values) if spec.burst_rate_hz >= 10 else ()
            yield (
                float(start) + period,
                LightSummary(
                    site,
                    sensor,
                    _utc(float(start)),
                    float(period),
                    round(float(values.mean()), 4),
                    float(values.min()),
                    float(values.max()),
                    burst,
                    spec.burst_rate_hz if burst else None,
                ),
            )

    def _weather(
        self, config: SensorConfig, t: FloatArray, wind: FloatArray, rain: FloatArray, lo: int, hi: int
    ) -> Iterator[tuple[float, Message]]:
        period = config.expected_period_s
        first = math.ceil(lo / period) * period
        for start in np.arange(first, hi, period):
            if self._offline(config.id, np.array([start])).any():
                continue
            sel = (t >= start) & (t < start + period)
            if not sel.any():
                continue
            mm = float(rain[sel].mean())
            yield (
                float(start) + period,
                WeatherReading(
                    self.site.id,
                    config.id,
                    _utc(float(start)),
                    float(period),
                    round(float(wind[sel].mean()), 2),
                    mm > 0,
                    round(mm, 2) if mm > 0 else None,
                ),
            )

    def _status(self, lo: int, hi: int) -> Iterator[tuple[float, Message]]:
        every = self.scenario.status_interval_s
        sensors = [*self.sound, *self.light] + ([self.weather_sensor.id] if self.weather_sensor else [])
        for k, sensor in enumerate(sensors):
            offset = (k * 7) % every  # heartbeats spread out, not all at once
            first = math.ceil((lo - offset) / every) * every + offset
            rng = _stream(self.seed, "status", sensor, lo)
            for start in np.arange(first, hi, every):
                if self._offline(sensor, np.array([start])).any():
                    continue
                hour = _utc(float(start)).astimezone(self.tz).hour
                battery = (
                    78.0 + 20.0 * math.sin(math.pi * max(0, min(hour - 6, 14)) / 14) + rng.normal(0, 0.3)
                )
                yield (
                    float(start),
                    SensorStatus(
                        self.site.id,
                        sensor,
                        _utc(float(start)),
                        round(min(battery, 100.0), 1),
                        round(float(rng.normal(0, 0.02)), 3),
                    ),
                )


def _blast_wave(peak_db: float, full_scale_db: float, rate: int) -> FloatArray:
    """One second holding a Friedlander pulse (10 ms positive phase) and a 15 Hz rumble."""
    amplitude = 10 ** ((peak_db - full_scale_db) / 20) / math.sqrt(2)
    t = np.arange(rate) / rate
    onset = 0.3
    tau = t - onset
    pulse = np.where(tau >= 0, (1 - tau / 0.010) * np.exp(-np.maximum(tau, 0) / 0.010), 0.0)
    rumble = np.where(
        tau >= 0, 0.25 * np.sin(2 * np.pi * 15 * np.maximum(tau, 0)) * np.exp(-np.maximum(tau, 0) / 0.3), 0.0
    )
    out: FloatArray = amplitude * (pulse + rumble)
    return out
