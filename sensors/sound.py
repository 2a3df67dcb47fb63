"""Sound on the edge: audio sources, and the processor that turns audio into records.

    source (sound card | WAV | synthetic) ──1 s chunks──► SoundProcessor
        ├─► SoundLevelMeter (monitor.acoustics.iec61672, the sensor's calibration) ─► SoundLevels per second
        └─► audio: every chunk (continuous), or a clip around events: a ring buffer keeps
            ``pre_s`` of audio; a second whose LAFmax or LCpeak passes its threshold sends
            the buffer and keeps sending for ``post_s`` after the last trigger ─► AudioBlock

Each second's time is counted from the samples (SampleClock); a live source's blocks come with
the system-clock time they were captured at, which that count follows (re-anchored when more
than CLOCK_BOUND_S apart, never overlapping or going back).

The processor is pure (arrays in, records out); only SoundcardSource touches hardware,
through the optional ``sounddevice`` package (extra ``soundcard``), and reads the clock.
"""

from __future__ import annotations

import atexit
import logging
import math
import queue
import time
from collections import deque
from collections.abc import Callable, Generator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
from numpy.typing import NDArray

from monitor.acoustics.iec61672 import PeriodLevels, SoundLevelMeter, calibration_from_tone, check_sample_rate
from monitor.acoustics.overload import UNKNOWN_FORMAT_CLIP_LEVEL, clip_level
from monitor.acoustics.wavfile import read_wav
from monitor.wire.codec import AudioBlock, Message
from monitor.wire.protocol import DB_RANGE
from rules.model import SoundLevels

FloatArray = NDArray[np.float64]
AUDIO_MODES = ("off", "continuous", "events")
# A live source's counted time further than this from the system clock starts counting again from it,
# compared once every CLOCK_CHECK_S of samples (SampleClock).
CLOCK_BOUND_S = 0.5
CLOCK_CHECK_S = 10
NO_BLOCK: FloatArray = np.empty(0)  # what a live source yields while its device delivers nothing
STALL_S = 5.0  # a device silent this long is said to be so in the log

log = logging.getLogger("minewatch.sensors.sound")


class SourceUnavailable(Exception):
    """The source cannot be opened (package missing, no device, unreadable file)."""


# --------------------------------------------------------------------------- sources


class SoundSource:
    """Yields consecutive blocks of mono samples (full scale 1.0) at ``sample_rate``; a live
    source yields ``NO_BLOCK`` (no samples) while its device delivers nothing, so that its
    reader can still stop, send heartbeats and forward its queue."""

    sample_rate: int
    realtime: bool = False  # paced by the hardware: no extra sleeping
    # Where a sample is at full scale (monitor.acoustics.overload): its format's most positive code.
    clip_level: float = UNKNOWN_FORMAT_CLIP_LEVEL

    def blocks(self) -> Generator[FloatArray, None, None]:
        raise NotImplementedError

    def stamped_blocks(self) -> Generator[tuple[FloatArray, datetime | None], None, None]:
        """blocks(), each with the system-clock time its last sample was captured at: None for a
        source whose time is its own (a file, a synthetic signal), which is counted from its start."""
        blocks = self.blocks()
        try:
            for block in blocks:
                yield block, None
        finally:
            blocks.close()


class WavSource(SoundSource):
    def __init__(self, path: str, block_s: float = 1.0) -> None:
        try:
            audio = read_wav(path)
        except ValueError as exc:
            raise SourceUnavailable(str(exc)) from None
        try:  # when the source opens, not once the broker is connected
            check_sample_rate(audio.sample_rate)
        except ValueError as exc:
            raise SourceUnavailable(f"{path}: {exc}") from None
        self.samples = audio.samples
        self.sample_rate = audio.sample_rate
        self.clip_level = clip_level(audio.bits_per_sample, audio.is_float)
        self.block = max(1, int(block_s * self.sample_rate))

    def blocks(self) -> Generator[FloatArray, None, None]:
        for start in range(0, self.samples.size, self.block):
            yield self.samples[start : start + self.block]


SYNTHETIC_MAX_DB = DB_RANGE[1]  # the loudest level the wire takes


class SyntheticSource(SoundSource):
    """Gaussian noise whose LAeq reads ``level_db`` on a meter with ``full_scale_db``."""

    def __init__(
        self,
        level_db: float,
        full_scale_db: float,
        sample_rate: int = 16000,
        seed: int = 0,
        block_s: float = 1.0,
    ) -> None:
        self.sample_rate = sample_rate
        self.rng = np.random.default_rng(seed)
        self.block = int(block_s * sample_rate)
        # White noise: the A filter removes a fixed share of its energy; measure it once.
        probe = self.rng.standard_normal(3 * sample_rate)
        meter = SoundLevelMeter(sample_rate, 1.0, calibration_db=full_scale_db)
        unit = float(np.mean([p.LAeq for p in meter.process(probe)[1:]]))
        self.gain = 10 ** ((level_db - unit) / 20)

    def blocks(self) -> Generator[FloatArray, None, None]:
        while True:
            yield self.gain * self.rng.standard_normal(self.block)


class SoundcardSource(SoundSource):
    """Capture through ``sounddevice`` (PortAudio): ``soundcard`` or ``soundcard:DEVICE``."""

    realtime = True

    def __init__(
        self,
        device: str | None,
        sample_rate: int = 48000,
        block_s: float = 0.5,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        try:
            import sounddevice
        except (ImportError, OSError) as exc:  # OSError: the package is there but PortAudio is not
            raise SourceUnavailable(
                f"the soundcard source needs the 'sounddevice' package and PortAudio "
                f"(pip install 'minewatch[soundcard]'): {exc}"
            ) from None
        self.sd: Any = sounddevice
        chosen: int | str | None = int(device) if device and device.isdigit() else device or None
        try:
            info = self.sd.query_devices(chosen, "input")
        except Exception as exc:  # PortAudioError / ValueError: no such device or no input at all
            raise SourceUnavailable(
                f"no usable input device {device or '(default)'}: {exc}"
                " (list the devices with: python3 -m sounddevice)"
            ) from None
        self.device = chosen
        self.name = str(info.get("name", device))
        self.sample_rate = sample_rate
        self.block = int(block_s * sample_rate)
        self.clock = clock  # the system clock: when a block was captured
        self.queue: queue.Queue[tuple[FloatArray, datetime]] = queue.Queue(maxsize=64)
        self.overflows = 0

    def _callback(self, indata: Any, frames: int, time_info: Any, status: Any) -> None:
        # PortAudio calls back as the block's last frame is in: the clock now is its capture time.
        captured = self.clock()
        if status:
            self.overflows += 1
        try:
            self.queue.put_nowait((np.array(indata[:, 0], dtype=np.float64), captured))
        except queue.Full:
            self.overflows += 1  # the processor fell behind; the gap shows as missing seconds

    def blocks(self) -> Generator[FloatArray, None, None]:
        stamped = self.stamped_blocks()
        try:
            for block, _ in stamped:
                yield block
        finally:
            stamped.close()

    def stamped_blocks(self) -> Generator[tuple[FloatArray, datetime | None], None, None]:
        stream = self.sd.InputStream(
            device=self.device,
            channels=1,
            samplerate=self.sample_rate,
            blocksize=self.block,
            dtype="float32",
            callback=self._callback,
        )
        stream.start()
        try:
            last = time.monotonic()
            stalled = False
            while True:
                try:
                    block, captured = self.queue.get(timeout=0.25)
                except queue.Empty:
                    silent = time.monotonic() - last
                    if silent >= STALL_S and not stalled:
                        stalled = True
                        log.error(
                            "No audio from the device %r for %.0f s: check its cable and power"
                            " (the sensor keeps waiting for it)",
                            self.name,
                            silent,
                        )
                    yield NO_BLOCK, None
                    continue
                if stalled:
                    stalled = False
                    log.warning(
                        "Audio from the device %r again, after %.0f s without",
                        self.name,
                        time.monotonic() - last,
                    )
                last = time.monotonic()
                yield block, captured
        finally:
            if stalled:
                # PortAudio's stop, abort and close (and its Pa_Terminate, which sounddevice runs
                # at exit) all wait for its capture thread, which a device that stopped delivering
                # keeps in a read for ever (with cancellation off): the process ends without them.
                atexit.unregister(getattr(self.sd, "_exit_handler", lambda: None))
                log.warning("The device %r is left as it is: it does not answer", self.name)
            else:
                stream.abort()
                stream.close()


def open_source(spec: str, full_scale_db: float, seed: int = 0) -> SoundSource:
    """``soundcard[:DEVICE]``, ``wav:PATH`` or ``synthetic[:LEVEL_DB]``."""
    kind, _, arg = spec.partition(":")
    if kind == "soundcard":
        return SoundcardSource(arg or None)
    if kind == "wav":
        if not arg:
            raise SourceUnavailable("wav: needs a path, e.g. wav:recording.wav")
        return WavSource(arg)
    if kind == "synthetic":
        try:
            level = float(arg) if arg else 70.0
        except ValueError:
            raise SourceUnavailable(f"synthetic:{arg}: the level must be a number in dB(A)") from None
        if not 0 <= level <= SYNTHETIC_MAX_DB:  # NaN too
            raise SourceUnavailable(f"synthetic:{arg}: the level must be from 0 to {SYNTHETIC_MAX_DB:g} dB")
        return SyntheticSource(level, full_scale_db, seed=seed)
    raise SourceUnavailable(f"unknown source {spec!r} (soundcard[:DEVICE], wav:PATH, synthetic[:LEVEL_DB])")


# --------------------------------------------------------------------------- processing


@dataclass(frozen=True, slots=True)
class Trigger:
    """When a second is an event worth its audio (thresholds in dB)."""

    lafmax_db: float = 85.0
    lcpeak_db: float = 120.0
    pre_s: int = 5
    post_s: int = 10

    def fires(self, period: PeriodLevels) -> bool:
        return period.LAFmax >= self.lafmax_db or period.LCpeak >= self.lcpeak_db


_OPTIONAL_LEVELS = ("LASmax", "LZpeak", "LAFmin", "LCeq", "LZeq")


def _finite(value: float) -> float | None:
    return round(value, 2) if math.isfinite(value) else None


class SampleClock:
    """The time of a position in a stream, counted in samples from an anchor (pure: the system
    clock's readings are passed in).

    A live source's periods are timed by counting samples (the sound card's clock): one 50 ppm off
    drifts 4 s a day from the system clock, and a step of the system clock (NTP) is never followed.
    ``follow`` is told, second by second, the system-clock time the samples up to a position were
    captured at. Delivery only ever adds delay (a late callback, a busy machine), so the earliest
    of them, the least offset over ``CLOCK_CHECK_S`` of samples, is the one that tells the clock;
    further than ``CLOCK_BOUND_S`` from the counted time, counting starts again from it there (a
    re-anchoring, logged once). Forward, that leaves a gap; back, the periods whose new times would
    overlap the last one sent are left out (SoundProcessor), so that no two periods overlap and
    none goes back.
    """

    def __init__(self, origin: datetime, sensor: str) -> None:
        self.sensor = sensor
        self.anchor_ts, self.anchor_s = origin, 0.0  # the time of position anchor_s
        self.reanchored = 0
        self._checked_s = 0.0  # the position of the last check
        self._least: float | None = None  # the least offset (system clock - counted) since, in s

    def at(self, position_s: float) -> datetime:
        return self.anchor_ts + timedelta(seconds=position_s - self.anchor_s)

    def follow(self, position_s: float, captured_at: datetime) -> bool:
        """The samples up to ``position_s`` (seconds counted) were in at ``captured_at`` by the
        system clock; every CLOCK_CHECK_S, re-anchor there when the least offset is past the bound.
        True when it re-anchored."""
        offset_s = (captured_at - self.at(position_s)).total_seconds()
        least = self._least = offset_s if self._least is None else min(self._least, offset_s)
        if position_s - self._checked_s < CLOCK_CHECK_S:
            return False
        self._checked_s, self._least = position_s, None
        if abs(least) <= CLOCK_BOUND_S:
            return False
        counted = self.at(position_s)
        self.anchor_ts, self.anchor_s = counted + timedelta(seconds=least), position_s
        self.reanchored += 1
        log.warning(
            "Sensor %s: the samples counted put %s at %s, the system clock %+.2f s from it (beyond %g s:"
            " the sound card's clock drifts, or the system clock was set); its levels follow the"
            " system clock from here",
            self.sensor,
            f"{position_s:g} s",
            counted.isoformat(),
            least,
            CLOCK_BOUND_S,
        )
        return True


class SoundProcessor:
    """One sensor's audio stream -> SoundLevels per second (+ AudioBlocks per the audio mode)."""

    def __init__(
        self,
        site: str,
        sensor: str,
        sample_rate: int,
        calibration_db: float,
        origin: datetime,
        audio: str = "off",
        trigger: Trigger = Trigger(),
        clip_level: float = UNKNOWN_FORMAT_CLIP_LEVEL,
    ) -> None:
        if audio not in AUDIO_MODES:
            raise ValueError(f"audio: must be one of {', '.join(AUDIO_MODES)}")
        self.site, self.sensor = site, sensor
        self.rate = sample_rate
        self.origin = origin
        self.audio = audio
        self.trigger = trigger
        self.meter = SoundLevelMeter(sample_rate, 1.0, calibration_db=calibration_db, clip_level=clip_level)
        self.clock = SampleClock(origin, sensor)
        self._pending = np.empty(0)
        self._chunk_index = 0  # seconds of samples since origin
        self._ring: deque[tuple[datetime, FloatArray]] = deque(maxlen=trigger.pre_s + 1)
        self._levels_end: datetime | None = None  # where the last levels sent end
        self._audio_end: datetime | None = None  # where the last audio block sent ends
        self._overlap_said = True  # the left-out periods of the last re-anchoring were said
        self._send_until = -1  # chunk index up to which audio is being sent
        self._seq = 0
        self.triggers = 0
        self.silent_s = 0.0  # seconds left out below the daemon's plausible minimum, in a row
        self.left_out = 0  # periods left out in all
        self.overloaded_s = 0.0  # seconds sent flagged as overloaded, in a row
        self.overlapping = 0  # periods left out: their times, re-anchored, overlapped those sent

    def finish(self) -> list[Message]:
        """At the end of the input: the last, partial second's levels (with its true duration),
        which feed() holds back waiting for the rest of the second."""
        periods = self.meter.process(self._pending) + self.meter.flush()
        self._pending = np.empty(0)
        return [levels for p in periods if (levels := self._heard(p)) is not None]

    def feed(self, samples: FloatArray, captured_at: datetime | None = None) -> list[Message]:
        """Consume samples; returns the records of every second completed. ``captured_at``: the
        system-clock time the last of ``samples`` was captured at (a live source), which each
        second's counted time then follows (SampleClock); None: counted from ``origin`` alone."""
        x = np.concatenate([self._pending, np.asarray(samples, dtype=np.float64)])
        out: list[Message] = []
        whole = x.size // self.rate
        for k in range(whole):
            if captured_at is not None:
                end = captured_at - timedelta(seconds=(x.size - (k + 1) * self.rate) / self.rate)
                if self.clock.follow(self._chunk_index + 1, end):
                    self._overlap_said = False
            out.extend(self._second(x[k * self.rate : (k + 1) * self.rate]))
        self._pending = x[whole * self.rate :]
        return out

    def _second(self, chunk: FloatArray) -> list[Message]:
        index = self._chunk_index
        self._chunk_index += 1
        ts = self.clock.at(index)
        periods = self.meter.process(chunk)
        out: list[Message] = [levels for p in periods if (levels := self._heard(p)) is not None]
        blocks: list[tuple[datetime, FloatArray]] = []
        if self.audio == "continuous":
            blocks.append((ts, chunk))
        elif self.audio == "events":
            fired = any(self.trigger.fires(p) for p in periods)
            self._ring.append((ts, chunk))
            if fired:
                self.triggers += 1
                # The clip starts pre_s before the triggering second (what the ring still holds).
                blocks.extend(self._ring)
                self._send_until = index + self.trigger.post_s
            elif index <= self._send_until:
                blocks.append((ts, chunk))
        for block_ts, block in blocks:  # once each (a ring second may be asked for again), none overlapping
            if self._audio_end is None or block_ts >= self._audio_end:
                out.append(self._block(block_ts, block))
                self._audio_end = block_ts + timedelta(seconds=block.size / self.rate)
        return out

    def _heard(self, p: PeriodLevels) -> SoundLevels | None:
        """The period's levels, or None for a level the daemon refuses as implausible (below
        -20 dB: digital silence, a cut cable), said when it begins and when it ends: a message
        the daemon always rejects would be sent, queued and refused every second."""
        levels = self._levels(p)
        if self._levels_end is not None and levels.ts < self._levels_end:
            self._left_out_overlapping(levels)
            return None
        self._levels_end = levels.end
        self._say_overload(p)
        lo, hi = DB_RANGE
        if all(lo <= v <= hi for v in (levels.LAeq, levels.LAFmax, levels.LCpeak)):
            if self.silent_s:
                log.info("Signal back after %.0f s below %g dB", self.silent_s, lo)
                self.silent_s = 0.0
            # An optional level out of the range (LAFmin of a second with a silent moment) is left
            # out alone, as a level not measured: the daemon would refuse the whole message.
            kept: dict[str, Any] = {
                name: None
                for name in _OPTIONAL_LEVELS
                if (value := getattr(levels, name)) is not None and not lo <= value <= hi
            }
            return levels._replace(**kept) if kept else levels  # a NamedTuple: not dataclasses.replace
        if not self.silent_s:
            log.warning(
                "No signal: sensor %s reads LAeq %.1f dB, outside the %g to %g dB the daemon takes"
                " (digital silence or a cut microphone cable?); such seconds are left out, not sent",
                self.sensor,
                levels.LAeq,
                lo,
                hi,
            )
        self.silent_s += p.duration_s
        self.left_out += 1
        return None

    def _left_out_overlapping(self, levels: SoundLevels) -> None:
        """A period whose re-anchored time is before the end of the last one sent (the system clock
        went back, or the card ran fast): left out, once said per re-anchoring."""
        self.overlapping += 1
        self.left_out += 1
        if not self._overlap_said:
            self._overlap_said = True
            log.warning(
                "Sensor %s: levels from %s are left out until they pass %s, where the last ones sent"
                " end (the system clock is behind the samples counted; periods never overlap)",
                self.sensor,
                levels.ts.isoformat(),
                self._levels_end.isoformat() if self._levels_end else "?",
            )

    def _say_overload(self, p: PeriodLevels) -> None:
        """Log when the input begins and stops reaching full scale (once each, not every second)."""
        if p.overload:
            if not self.overloaded_s:
                log.warning(
                    "Overload: sensor %s's input reached full scale at %.1f s; its levels are sent"
                    " flagged as overloaded (lower bounds) until it does not (lower the input gain?)",
                    self.sensor,
                    p.start_s,
                )
            self.overloaded_s += p.duration_s
        elif self.overloaded_s:
            log.info("Overload over after %.0f s", self.overloaded_s)
            self.overloaded_s = 0.0

    def _levels(self, p: PeriodLevels) -> SoundLevels:
        ts = self.clock.at(p.start_s)
        laeq = round(p.LAeq, 2)
        return SoundLevels(
            self.site,
            self.sensor,
            ts,
            p.duration_s,
            laeq,
            max(round(p.LAFmax, 2), laeq),
            round(p.LCpeak, 2),
            _finite(p.LASmax),
            _finite(p.LZpeak),
            _finite(p.LAFmin),
            _finite(p.LCeq),
            _finite(p.LZeq),
            p.overload,
        )

    def _block(self, ts: datetime, chunk: FloatArray) -> AudioBlock:
        self._seq += 1
        pcm = (np.clip(chunk, -1.0, 32767 / 32768) * 32768).astype("<i2").tobytes()
        return AudioBlock(self.site, self.sensor, ts, self._seq, self.rate, "s16le", pcm)


def calibration_check(
    path: str, configured_full_scale_db: float, reference_db: float = 94.0
) -> tuple[float, float]:
    """(reference, measured) dB for a calibrator recording, read with the configured calibration.

    ``measured`` is what this sensor reports for the calibrator's tone; the daemon tracks
    how it moves between checks (drift over 0.5 dB is flagged).
    """
    audio = read_wav(path)
    derived_full_scale = calibration_from_tone(audio.samples, audio.sample_rate, reference_db)
    return reference_db, round(reference_db + configured_full_scale_db - derived_full_scale, 2)
