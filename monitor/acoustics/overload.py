"""Overload: the signal reached the converter's full scale (IEC 61672-1:2013, 5.11).

A level measured while the converter clipped reads LOW: the energy past full scale is cut
off, so a 95 dB(A) boundary level can read 78. IEC 61672-1 asks a meter to indicate overload
and such a level is no valid measurement; here each measurement period says whether it was.

The criterion: a run of at least ``OVERLOAD_RUN_SAMPLES`` consecutive samples whose magnitude
reaches the source's clip level (the most positive code of its integer format, 1.0 for float;
the most negative code, -1.0, is past it). A single sample at the extreme code is a peak that
just touched full scale and reads right within a fraction of a dB. A signal driven past full
scale stays there for several samples: the converter's anti-alias filter band-limits what it
samples, so the clipped top of a waveform is flat over consecutive samples. Three in a row is
the usual clip indication of audio meters for the same reason.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

OVERLOAD_RUN_SAMPLES = 3


def clip_level(bits: int, is_float: bool) -> float:
    """The magnitude (full scale 1.0) from which a sample of the format is at full scale: the most
    positive code of ``bits``-bit integer PCM, (2^(b-1) - 1) / 2^(b-1); 1.0 for float samples."""
    if is_float:
        return 1.0
    top = float(2 ** (bits - 1))
    return (top - 1.0) / top


# The level for a source whose integer format is not known (PortAudio hands over float32 whatever
# the card's format): the most positive 16-bit code. A card of more bits counts as at full scale
# only within one 16-bit step of it (0.0003 dB), a run of which is a clipped waveform all the same.
UNKNOWN_FORMAT_CLIP_LEVEL = clip_level(16, False)


class OverloadDetector:
    """Finds runs of samples at full scale in a stream fed block by block (runs carry across)."""

    def __init__(self, level: float = UNKNOWN_FORMAT_CLIP_LEVEL, run: int = OVERLOAD_RUN_SAMPLES) -> None:
        if not 0.0 < level <= 1.0:
            raise ValueError(f"clip level {level} is not within (0, 1]")
        if run < 1:
            raise ValueError(f"run {run} must be at least one sample")
        self.level, self.run = level, run
        self._carry = 0  # samples at full scale that ended the previous block

    def feed(self, samples: NDArray[np.floating]) -> bool:
        """Whether ``samples`` hold (or complete, with the previous block's) a run of ``run``
        samples at full scale. A run begun in one block and reaching its length in the next
        counts in the next, and in every block it goes on in."""
        at = np.abs(samples) >= self.level
        if not at.any():  # nearly always: one comparison a sample
            self._carry = 0
            return False
        breaks = np.flatnonzero(~at)
        if breaks.size == 0:
            self._carry += at.size
            return self._carry >= self.run
        first = self._carry + int(breaks[0])
        inner = int((np.diff(breaks) - 1).max()) if breaks.size > 1 else 0
        self._carry = at.size - 1 - int(breaks[-1])
        return max(first, inner, self._carry) >= self.run
