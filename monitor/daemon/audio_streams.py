"""Raw audio blocks to sound levels: PCM to samples, one meter per sensor stream.

A stream's meter measures periods on its own sample axis (``start_s``); the stream keeps
the wall time of that axis' origin and the time the next block should start, so a block
that does not follow on (a restart, a gap, a new sample rate or format) starts a new meter aligned
to its own time. The levels come out uncalibrated by the site's offset (``health.calibrated``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np
from numpy.typing import NDArray

from monitor.acoustics import iec61672
from monitor.acoustics.overload import clip_level
from monitor.wire.codec import AudioBlock
from monitor.wire.protocol import AUDIO_FORMATS
from rules.model import SoundLevels

CONTINUITY_S = 0.5  # a block starting further than this from where the last ended starts a new meter


def pcm_samples(pcm: bytes, sample_format: str) -> NDArray[np.float64]:
    """Samples of a PCM block as float64, integer formats scaled to full scale 1.0."""
    dtype, width = AUDIO_FORMATS[sample_format][:2]
    samples = np.frombuffer(pcm, dtype=dtype).astype(np.float64)
    if dtype.startswith("<i"):
        samples /= float(2 ** (8 * width - 1))
    return samples


@dataclass
class MeterStream:
    """One sensor's running meter, with the time its sample axis starts and the next block's."""

    meter: iec61672.SoundLevelMeter
    origin: datetime  # wall time of the meter's start_s = 0
    next_ts: datetime  # where the next block should start for the stream to continue
    sample_format: str = "s16le"  # its full scale: where the meter's overload begins

    def follows(self, block: AudioBlock) -> bool:
        return (
            self.meter.sample_rate == block.sample_rate
            and self.sample_format == block.sample_format
            and abs((block.ts - self.next_ts).total_seconds()) <= CONTINUITY_S
        )


class AudioStreams:
    """The meters of every audio sensor of a site, by sensor."""

    def __init__(self) -> None:
        self.streams: dict[str, MeterStream] = {}

    def levels(self, block: AudioBlock, full_scale_db: float) -> list[SoundLevels]:
        """The periods ``block`` completes on its sensor's stream, as (uncalibrated) sound levels."""
        samples = pcm_samples(block.pcm, block.sample_format)
        stream = self.streams.get(block.sensor)
        if stream is None or not stream.follows(block):
            dtype, width = AUDIO_FORMATS[block.sample_format][:2]
            meter = iec61672.SoundLevelMeter(
                block.sample_rate,
                period_s=1.0,
                calibration_db=full_scale_db,
                clip_level=clip_level(8 * width, not dtype.startswith("<i")),
            )
            stream = self.streams[block.sensor] = MeterStream(meter, block.ts, block.ts, block.sample_format)
        stream.next_ts = block.ts + timedelta(seconds=len(samples) / block.sample_rate)
        meter = stream.meter
        period_s = meter.period_samples / meter.sample_rate
        return [
            SoundLevels(
                block.site,
                block.sensor,
                stream.origin + timedelta(seconds=period.start_s),
                period_s,
                period.LAeq,
                period.LAFmax,
                period.LCpeak,
                period.LASmax,
                period.LZpeak,
                period.LAFmin,
                period.LCeq,
                period.LZeq,
                period.overload,
            )
            for period in meter.process(samples)
        ]
