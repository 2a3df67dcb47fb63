"""Light on the edge: lux sources and the aggregator that makes LightSummary records.

    source (BH1750 | TSL2591 over I2C | CSV replay | synthetic) ──(ts, lux) samples──►
        LightAggregator: per period (the sensor's expected_period_s) mean/min/max, and the
        raw samples as a burst (>= 10 Hz) for the flashing-light rule ──► LightSummary

The aggregator is pure; the I2C drivers live in sensors/i2c.py (optional ``smbus2``).
"""

from __future__ import annotations

import csv
import io
import logging
import math
import statistics
import time
from collections.abc import Iterator
from datetime import UTC, datetime

import numpy as np

from monitor.errors import DecodeError
from monitor.named_file import NamedFileError, open_named_file
from monitor.wire.protocol import LUX_RANGE, parse_ts
from rules.model import LightSummary
from sensors.sound import SourceUnavailable

Sample = tuple[float, float]  # (epoch seconds, lux)

log = logging.getLogger("minewatch.sensors.light")


class LightSource:
    """Yields (epoch seconds, lux) samples, about ``rate_hz`` a second."""

    rate_hz: float = 10.0
    realtime: bool = False  # paced by the hardware

    def samples(self) -> Iterator[Sample]:
        raise NotImplementedError


class CsvSource(LightSource):
    """Replay of a CSV with columns ``ts,lux`` (RFC 3339 or epoch seconds), timestamps kept.

    Read as a stream, a row at a time, never held whole (a year at 10 Hz is gigabytes). The rows
    must be in time order (a time may repeat): a logger writes them so, and a row that goes back
    in time is a clock or a copy gone wrong, for a person to look at rather than for the replay
    to hide by sorting. The whole file is read once when the source opens, so that such a row,
    or one that is no ``ts,lux``, is refused with its line number before anything is sent."""

    RATE_FROM_STEPS = 1000  # the sampling rate is estimated from the first steps

    def __init__(self, path: str) -> None:
        self.path = path
        steps: list[float] = []
        count = 0
        last = 0.0
        for ts, _ in self._rows():
            if count and ts > last and len(steps) < self.RATE_FROM_STEPS:
                steps.append(ts - last)
            last = ts
            count += 1
        if count < 2:
            raise SourceUnavailable(f"{path}: needs at least two rows of ts,lux")
        self.rate_hz = 1.0 / statistics.median(steps) if steps else 1.0

    def samples(self) -> Iterator[Sample]:
        """The rows read again, in the file's order (checked when the source opened; a file changed
        since is checked again, and SourceUnavailable ends the replay at its first bad row)."""
        yield from self._rows()

    def _rows(self) -> Iterator[Sample]:
        path = self.path
        try:
            # utf-8-sig: Excel's "CSV UTF-8" starts with a byte order mark, which read as part of
            # the first column's name.
            with io.TextIOWrapper(open_named_file(path, "CSV file"), encoding="utf-8-sig", newline="") as f:
                reader = csv.DictReader(f)
                before: tuple[int, float, str] | None = None  # the previous row: line, time, as written
                for row in reader:
                    line = reader.line_num
                    try:
                        text = row["ts"]
                        ts = parse_ts(float(text) if _is_number(text) else text).timestamp()
                        lux = float(row["lux"])
                    except (KeyError, ValueError, TypeError, DecodeError) as exc:  # parse_ts: DecodeError
                        raise SourceUnavailable(
                            f"{path}: line {line}: expected columns ts,lux ({exc})"
                        ) from None
                    if before is not None and ts < before[1]:
                        raise SourceUnavailable(
                            f"{path}: line {line}: ts {text!r} is before {before[2]!r} on line {before[0]}:"
                            " the rows must be in time order (sort the file by its ts column)"
                        )
                    before = (line, ts, text)
                    yield ts, lux
        except NamedFileError as exc:
            raise SourceUnavailable(str(exc)) from None
        except UnicodeDecodeError:
            raise SourceUnavailable(f"{path}: cannot read: not UTF-8 text") from None
        except OSError as exc:
            raise SourceUnavailable(f"{path}: cannot read: {exc.strerror}") from None
        except Exception as exc:
            if isinstance(exc, SourceUnavailable):
                raise
            raise SourceUnavailable(f"{path}: {exc}") from None


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


SYNTHETIC_MAX_LUX = 200_000.0  # brighter than direct sunlight (~120,000 lx)


class SyntheticLight(LightSource):
    """``synthetic[:LUX[:HZ]]``: a steady light, or one flashing at HZ between LUX and ~0."""

    def __init__(
        self,
        lux: float = 0.5,
        flash_hz: float = 0.0,
        rate_hz: float = 10.0,
        seed: int = 0,
        start: float | None = None,
    ) -> None:
        self.lux, self.flash_hz, self.rate_hz = lux, flash_hz, rate_hz
        self.rng = np.random.default_rng(seed)
        self.start = time.time() if start is None else start

    def samples(self) -> Iterator[Sample]:
        k = 0
        while True:
            t = self.start + k / self.rate_hz
            level = self.lux
            if self.flash_hz and (k / self.rate_hz * self.flash_hz) % 1.0 >= 0.5:
                level = 0.05 * self.lux
            yield t, max(0.0, level * (1 + float(self.rng.normal(0, 0.01))))
            k += 1


class I2cSource(LightSource):
    """Poll an I2C lux sensor (sensors/i2c.py) at up to ``rate_hz``, timestamped on the host clock."""

    realtime = True

    def __init__(self, read_lux: object, rate_hz: float) -> None:
        self.read_lux = read_lux
        self.rate_hz = rate_hz

    def samples(self) -> Iterator[Sample]:
        period = 1.0 / self.rate_hz
        next_at = time.monotonic()
        while True:
            t = time.time()
            lux = self.read_lux()  # type: ignore[operator]
            yield t, float(lux)
            next_at += period
            delay = next_at - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            else:
                next_at = time.monotonic()  # the sensor is slower than asked: run as fast as it goes


def open_source(spec: str, rate_hz: float, seed: int = 0, start: float | None = None) -> LightSource:
    """``bh1750[:BUS:ADDR]``, ``tsl2591[:BUS:ADDR]``, ``csv:PATH`` or ``synthetic[:LUX[:HZ]]``."""
    kind, _, arg = spec.partition(":")
    if kind in ("bh1750", "tsl2591"):
        from sensors import i2c

        bus, address = i2c.parse_bus_address(arg, i2c.DEFAULT_ADDRESS[kind])
        driver = i2c.open_driver(kind, bus, address)
        return I2cSource(driver.read_lux, min(rate_hz, driver.max_rate_hz))
    if kind == "csv":
        if not arg:
            raise SourceUnavailable("csv: needs a path, e.g. csv:night.csv")
        return CsvSource(arg)
    if kind == "synthetic":
        parts = arg.split(":") if arg else []
        try:
            lux = float(parts[0]) if parts else 0.5
            hz = float(parts[1]) if len(parts) > 1 else 0.0
        except ValueError:
            raise SourceUnavailable(f"synthetic:{arg}: expected synthetic[:LUX[:HZ]]") from None
        if not (0 <= lux <= SYNTHETIC_MAX_LUX and 0 <= hz <= rate_hz / 2):  # NaN too
            raise SourceUnavailable(
                f"synthetic:{arg}: LUX must be from 0 to {SYNTHETIC_MAX_LUX:g} and HZ from 0 to half"
                f" the sampling rate ({rate_hz / 2:g})"
            )
        return SyntheticLight(lux, hz, rate_hz, seed, start)
    raise SourceUnavailable(
        f"unknown source {spec!r} (bh1750[:BUS:ADDR], tsl2591[:BUS:ADDR], csv:PATH, synthetic[:LUX[:HZ]])"
    )


class LightAggregator:
    """Samples -> one LightSummary per period aligned to the clock (a period starts at k * period)."""

    def __init__(self, site: str, sensor: str, period_s: float, min_burst_rate_hz: float = 10.0) -> None:
        self.site, self.sensor, self.period = site, sensor, period_s
        self.min_burst_rate_hz = min_burst_rate_hz
        self._start: float | None = None
        self._samples: list[Sample] = []
        self.left_out = 0  # readings no light gives (NaN, infinite, past the daemon's bound)

    def add(self, ts: float, lux: float) -> LightSummary | None:
        start = math.floor(ts / self.period) * self.period
        done = None
        if self._start is not None and start != self._start:
            done = self.flush()
        if self._start is None:
            self._start = start
        if not lux <= LUX_RANGE[1]:  # NaN, infinity, 1e300: the daemon refuses the whole summary
            self.left_out += 1
            if self.left_out in (1, 10, 100, 1000, 10000):
                log.warning(
                    "Light sensor %s read %r lux, which no light gives (the daemon takes up to %g):"
                    " left out, %d so far",
                    self.sensor,
                    lux,
                    LUX_RANGE[1],
                    self.left_out,
                )
            return done
        self._samples.append((ts, max(0.0, lux)))  # a dark sensor's small negative noise is darkness
        return done

    def flush(self) -> LightSummary | None:
        if self._start is None or not self._samples:
            self._start, self._samples = None, []
            return None
        values = np.round(np.array([v for _, v in self._samples]), 4)
        times = [t for t, _ in self._samples]
        rate = (len(times) - 1) / (times[-1] - times[0]) if len(times) > 1 and times[-1] > times[0] else 0.0
        # A burst only when sampled fast enough to see a flash (the rule ignores slower ones anyway).
        burst = tuple(float(v) for v in values) if rate >= self.min_burst_rate_hz * 0.95 else ()
        summary = LightSummary(
            self.site,
            self.sensor,
            datetime.fromtimestamp(self._start, UTC),
            self.period,
            round(float(values.mean()), 4),
            float(values.min()),
            float(values.max()),
            burst,
            round(rate, 3) if burst else None,
        )
        self._start, self._samples = None, []
        return summary
