"""Whether a seismograph's own summary of an event agrees with the daemon's (pure).

The daemon recomputes every event's summary from the waveforms the seismograph sent
(monitor/daemon/seismic_intake.py) and journals both. Both are computed from the same samples,
so beyond rounding they must agree; where they do not, the edge's summary does not describe the
waveforms it came with (another algorithm or calibration in the instrument, a summary edited on
the way) and the record says so: a data-quality alert at once, and a line of the blast report.

Compared: each axis's PPV, zero-crossing and FFT frequencies, the peak vector sum, and airblast
as a linear peak and C-weighted slow level in dB. Not compared: acceleration and displacement,
which depend on how an instrument differentiates and integrates (ISEE leaves it to the maker).
A quantity one summary does not state is not compared.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Tolerance:
    """How far the two may differ: ``relative`` (of the daemon's value) or ``absolute``, in ``unit``."""

    relative: float = 0.0
    absolute: float = 0.0
    unit: str = ""

    def exceeded(self, edge: float, daemon: float) -> bool:
        allowed = max(self.absolute, self.relative * abs(daemon))
        return abs(edge - daemon) > allowed + 1e-12

    def text(self) -> str:
        if self.relative:
            return f"{self.relative:.0%}"
        return f"{self.absolute:g} {self.unit}"


# The one place the tolerances are stated, and why:
TOLERANCES: Mapping[str, Tolerance] = {
    # The largest |sample| of the same samples: float32 on the wire changes it by 1e-7 and a
    # vendor's three significant digits by 0.5 %; 1 %, with a floor of 0.01 mm/s for a quiet axis.
    "ppv": Tolerance(relative=0.01, absolute=0.01, unit="mm/s"),
    # A vendor may count a half-period in whole samples: 5 % at 30 Hz and 1,024 samples/s, the
    # accuracy issue 27 asks of the zero-crossing frequency; the FFT peak of the same samples, less.
    "frequency": Tolerance(relative=0.05, unit="Hz"),
    # Airblast is reported to 0.1 dB; 0.5 dB (6 % in pressure) is beyond any rounding.
    "airblast_db": Tolerance(absolute=0.5, unit="dB"),
}


@dataclass(frozen=True, slots=True)
class Disagreement:
    quantity: str  # "V PPV", "airblast (linear peak)", ...
    edge: float
    daemon: float
    unit: str
    tolerance: str

    def text(self) -> str:
        return (
            f"{self.quantity}: the seismograph says {self.edge:.4g} {self.unit}, the waveforms give"
            f" {self.daemon:.4g} {self.unit} (more than {self.tolerance} apart)"
        )


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def disagreements(edge: Mapping[str, Any], daemon: Mapping[str, Any]) -> tuple[Disagreement, ...]:
    """Where the edge's summary (JSON, as journaled) and the daemon's differ beyond TOLERANCES."""
    pairs: list[tuple[str, str, Any, Any]] = []  # (quantity, tolerance, edge, daemon)
    daemon_axes = {a.get("axis"): a for a in daemon.get("axes") or () if isinstance(a, Mapping)}
    for axis in edge.get("axes") or ():
        if not isinstance(axis, Mapping) or axis.get("axis") not in daemon_axes:
            continue
        name, other = axis["axis"], daemon_axes[axis["axis"]]
        pairs += [
            (f"{name} PPV", "ppv", axis.get("ppv_mm_s"), other.get("ppv_mm_s")),
            (f"{name} zero-crossing frequency", "frequency", axis.get("zc_hz"), other.get("zc_hz")),
            (f"{name} FFT frequency", "frequency", axis.get("fft_hz"), other.get("fft_hz")),
        ]
    pairs += [
        ("peak vector sum", "ppv", edge.get("pvs_mm_s"), daemon.get("pvs_mm_s")),
        ("airblast (linear peak)", "airblast_db", edge.get("airblast_db"), daemon.get("airblast_db")),
        (
            "airblast (C-weighted slow)",
            "airblast_db",
            edge.get("airblast_dbc_slow"),
            daemon.get("airblast_dbc_slow"),
        ),
    ]
    found = []
    for quantity, kind, edge_value, daemon_value in pairs:
        e, d = _number(edge_value), _number(daemon_value)
        tolerance = TOLERANCES[kind]
        if e is not None and d is not None and tolerance.exceeded(e, d):
            unit = "dB(C)" if "C-weighted" in quantity else tolerance.unit
            found.append(Disagreement(quantity, e, d, unit, tolerance.text()))
    return tuple(found)
