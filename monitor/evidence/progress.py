"""Progress of a long export or verify, on a terminal only (standard library only: verify uses it).

A month of per-second rows takes minutes; someone at a terminal wants to see how far it is and
how long is left, while scripts, logs and the portal want nothing on stderr. ``on_terminal``
gives a ``Progress`` only when the stream is a terminal; callers pass ``None`` otherwise.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


def _duration(seconds: float) -> str:
    seconds = int(seconds + 0.5)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


def render(label: str, done: int, total: int, elapsed: float) -> str:
    """One progress line: rows done, percent and the time left at the rate so far."""
    if total <= 0:
        return f"{label}: {done:,} rows"
    done = min(done, total)
    line = f"{label}: {done:,} of {total:,} rows ({100.0 * done / total:.1f} %)"
    if done >= total:
        return f"{line}, done in {_duration(elapsed)}"
    if done == 0 or elapsed <= 0:
        return f"{line}, time left unknown yet"
    return f"{line}, {_duration(elapsed * (total - done) / done)} left"


class Progress:
    """Rewrites one line on a terminal at most every ``every`` seconds."""

    def __init__(self, label: str, stream: TextIO, every: float = 0.5) -> None:
        self.label = label
        self.stream = stream
        self.every = every
        self.total = 0
        self.started = time.monotonic()
        self._shown = -every
        self._width = 0

    @classmethod
    def on_terminal(cls, label: str, stream: TextIO | None = None) -> Progress | None:
        stream = stream if stream is not None else sys.stderr
        try:
            tty = stream.isatty()
        except (AttributeError, ValueError):
            tty = False
        return cls(label, stream) if tty else None

    def start(self, total: int) -> None:
        self.total = total
        self.started = time.monotonic()
        self._show(0)

    def update(self, done: int) -> None:
        now = time.monotonic()
        if now - self._shown >= self.every:
            self._shown = now
            self._show(done)

    def finish(self) -> None:
        self._show(self.total)
        self.stream.write("\n")
        self.stream.flush()

    def _show(self, done: int) -> None:
        line = render(self.label, done, self.total, time.monotonic() - self.started)
        pad = max(0, self._width - len(line))
        self._width = len(line)
        self.stream.write("\r" + line + " " * pad)
        self.stream.flush()
