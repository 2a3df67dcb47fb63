"""I2C lux sensors through ``smbus2`` (optional extra ``i2c``).

Untested here: the development machines have no I2C bus. The register sequences follow
the datasheets cited below and are kept small so that a bench test can check them.

* BH1750 (ROHM BH1750FVI datasheet rev. 2011): power on (0x01), then per reading the
  one-time high-resolution mode (0x20), wait the 180 ms maximum conversion time, read two
  bytes MSB first; lux = raw / 1.2 (measurement accuracy 1.2 typ., at the default MTreg 69).
  At ~5 readings a second it is too slow for the 10 Hz bursts that flashing detection needs:
  the summaries are right, bursts are left out (see LightAggregator).
* TSL2591 (ams datasheet v1.0 / Adafruit driver): command bit 0xA0 (normal operation),
  ENABLE 0x00 <- PON|AEN (0x03), CONTROL 0x01 <- gain | integration (0x10 = medium gain
  25x, 100 ms), channels C0 (0x14-0x15, full spectrum) and C1 (0x16-0x17, infrared);
  lux = (C0 - C1) * (1 - C1 / C0) / (integration_ms * gain / 408). 100 ms integration gives 10 Hz.
"""

from __future__ import annotations

import time
from typing import Any, Protocol

from sensors.sound import SourceUnavailable

DEFAULT_ADDRESS = {"bh1750": 0x23, "tsl2591": 0x29}


class LuxDriver(Protocol):
    max_rate_hz: float

    def read_lux(self) -> float: ...


def parse_bus_address(arg: str, default_address: int) -> tuple[int, int]:
    """``""`` -> (1, default), ``"1"`` -> (1, default), ``"1:0x5c"`` -> (1, 0x5C)."""
    parts = [p for p in arg.split(":") if p]
    try:
        bus = int(parts[0]) if parts else 1
        address = int(parts[1], 0) if len(parts) > 1 else default_address
    except ValueError:
        raise SourceUnavailable(f"{arg!r}: expected BUS[:ADDR], e.g. 1:0x23") from None
    return bus, address


def _smbus(bus: int) -> Any:
    try:
        import smbus2
    except ImportError:
        raise SourceUnavailable(
            "I2C sources need the 'smbus2' package (pip install 'minewatch[i2c]')"
        ) from None
    try:
        return smbus2.SMBus(bus)
    except OSError as exc:
        raise SourceUnavailable(f"cannot open I2C bus {bus} (/dev/i2c-{bus}): {exc.strerror}") from None


class BH1750:
    POWER_ON = 0x01
    ONE_TIME_HIGH_RES = 0x20
    CONVERSION_S = 0.18  # maximum for high-resolution mode
    max_rate_hz = 1 / CONVERSION_S

    def __init__(self, bus: Any, address: int = 0x23) -> None:
        self.bus, self.address = bus, address
        self.bus.write_byte(address, self.POWER_ON)

    def read_lux(self) -> float:
        import smbus2

        self.bus.write_byte(self.address, self.ONE_TIME_HIGH_RES)
        time.sleep(self.CONVERSION_S)
        read = smbus2.i2c_msg.read(self.address, 2)  # no register: the device answers a plain read
        self.bus.i2c_rdwr(read)
        high, low = list(read)
        return float((high << 8) | low) / 1.2


class TSL2591:
    COMMAND = 0xA0
    ENABLE, CONTROL, DEVICE_ID, C0DATAL, C1DATAL = 0x00, 0x01, 0x12, 0x14, 0x16
    GAIN_MEDIUM_100MS = 0x10
    GAIN, INTEGRATION_MS = 25.0, 100.0
    LUX_DF = 408.0
    max_rate_hz = 1000 / INTEGRATION_MS

    def __init__(self, bus: Any, address: int = 0x29) -> None:
        self.bus, self.address = bus, address
        device = self.bus.read_byte_data(address, self.COMMAND | self.DEVICE_ID)
        if device != 0x50:
            raise SourceUnavailable(
                f"no TSL2591 at 0x{address:02x} (device id 0x{device:02x}, expected 0x50)"
            )
        self.bus.write_byte_data(address, self.COMMAND | self.ENABLE, 0x03)  # PON | AEN
        self.bus.write_byte_data(address, self.COMMAND | self.CONTROL, self.GAIN_MEDIUM_100MS)

    def read_lux(self) -> float:
        c0 = self.bus.read_word_data(self.address, self.COMMAND | self.C0DATAL)
        c1 = self.bus.read_word_data(self.address, self.COMMAND | self.C1DATAL)
        if c0 == 0xFFFF or c1 == 0xFFFF:
            return 88_000.0  # saturated at this gain: report the sensor's ceiling
        if c0 == 0:
            return 0.0
        cpl = self.INTEGRATION_MS * self.GAIN / self.LUX_DF
        return max(0.0, float((c0 - c1) * (1 - c1 / c0) / cpl))


def open_driver(kind: str, bus: int, address: int) -> LuxDriver:
    handle = _smbus(bus)
    try:
        return BH1750(handle, address) if kind == "bh1750" else TSL2591(handle, address)
    except OSError as exc:
        raise SourceUnavailable(
            f"{kind} at bus {bus} address 0x{address:02x}: {exc.strerror or exc}"
        ) from None
