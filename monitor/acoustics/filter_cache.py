"""Weighting filters kept on disk, so a command does not design them at every start.

``monitor.acoustics.iec61672.design_weighting_filters`` is pure and takes a least-squares fit (and
scipy.optimize's import): about half a second. Its result for a sample rate is written here
once, as JSON (floats round-trip exactly), under ``$XDG_CACHE_HOME/minewatch`` (default
``~/.cache/minewatch``), and read back by later runs. The file name carries a fingerprint of
the design code and of the numpy and scipy versions, so a changed design is never read from
an old file. A missing, unreadable, corrupt or mismatching file is no error: the filters are
designed again and the file rewritten (if the directory is writable; otherwise just designed).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path

import numpy as np
import scipy  # the package alone (its subpackages load on demand): for its version

from monitor.acoustics import iec61672
from monitor.acoustics.iec61672 import WeightingFilters, design_weighting_filters

log = logging.getLogger(__name__)

_ARRAYS = ("sos_a", "sos_c", "sos_a_from_c")
_NUMBERS = ("fit_upper_hz", "max_error_a_db", "max_error_c_db")


def default_directory() -> Path:
    # The XDG base directory convention for caches (not configuration: nothing here changes results).
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "minewatch"


def fingerprint() -> str:
    """What the design depends on: the acoustics module's code and the numpy and scipy versions."""
    digest = hashlib.sha256(Path(iec61672.__file__).read_bytes())
    digest.update(f"numpy {np.__version__} scipy {scipy.__version__}".encode())
    return digest.hexdigest()[:16]


def cache_path(sample_rate: int, directory: Path | None = None) -> Path:
    folder = default_directory() if directory is None else directory
    return folder / f"weighting-{sample_rate}-{fingerprint()}.json"


def weighting_filters(sample_rate: int, directory: Path | None = None) -> WeightingFilters:
    """The A/C weighting filters for ``sample_rate``: from the cache, or designed and cached."""
    path = cache_path(sample_rate, directory)
    cached = _read(path, sample_rate)
    if cached is not None:
        return cached
    filters = design_weighting_filters(sample_rate)  # raises ValueError for an unsupported rate
    _write(path, filters)
    return filters


def _read(path: Path, sample_rate: int) -> WeightingFilters | None:
    try:
        data = json.loads(path.read_text())
        arrays = {name: np.array(data[name], dtype=np.float64) for name in _ARRAYS}
        numbers = {name: float(data[name]) for name in _NUMBERS}
        if int(data["sample_rate"]) != sample_rate:
            raise ValueError(f"holds the filters for {data['sample_rate']} Hz")
        if any(a.ndim != 2 or a.shape[1] != 6 for a in arrays.values()):
            raise ValueError("second-order sections of the wrong shape")
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:  # JSONDecodeError is a ValueError
        log.warning("weighting filter cache %s unusable (%s); designing the filters again", path, exc)
        return None
    for array in arrays.values():
        array.setflags(write=False)  # as design_weighting_filters returns them
    return WeightingFilters(
        sample_rate,
        arrays["sos_a"],
        arrays["sos_c"],
        arrays["sos_a_from_c"],
        numbers["fit_upper_hz"],
        numbers["max_error_a_db"],
        numbers["max_error_c_db"],
    )


def _write(path: Path, filters: WeightingFilters) -> None:
    data: dict[str, object] = {"sample_rate": filters.sample_rate}
    data.update({name: getattr(filters, name).tolist() for name in _ARRAYS})
    data.update({name: getattr(filters, name) for name in _NUMBERS})
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        partial.write_text(json.dumps(data))
        partial.replace(path)  # atomic: a concurrent reader sees the old file or the whole new one
    except OSError as exc:
        log.info("weighting filters not cached in %s: %s", path.parent, exc)
