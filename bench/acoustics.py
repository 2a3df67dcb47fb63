"""Benchmark of monitor.acoustics.iec61672 (not a test).  Run: ``python bench/acoustics.py``.

Generates 600 s of 48 kHz noise and times, best of a few repeats:
  * the floor: one bare scipy.signal.sosfilt pass of a 3-section filter over the data;
  * the LAeq-per-second path (A-weighting + energy per second);
  * the full streaming meter (all metrics), in float64 and float32;
  * phonometry's accurate (default, oversampled) A-weighting + Leq per second, in a Python 3.13
    venv cached at $MINEWATCH_BENCH_CACHE (default /tmp/minewatch-bench/venv-phonometry),
    on the same data saved as .npy.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import scipy
from numpy.typing import NDArray
from scipy import signal

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from monitor.acoustics import iec61672
from monitor.process_settings import tune_process

FS = 48000
SECONDS = 600
REPEATS = 3
BLOCK = 10 * FS
CACHE = Path(os.environ.get("MINEWATCH_BENCH_CACHE", "/tmp/minewatch-bench"))

PHONOMETRY_SCRIPT = r"""
import json, platform, sys, time
import numpy as np
import phonometry
from phonometry.metrology.parametric_filters import weighting_filter
x = np.load(sys.argv[1])
fs = int(sys.argv[2])
def run():
    a = weighting_filter(x, fs, "A")  # default high_accuracy=True: oversampled design
    per_second = a[: (a.size // fs) * fs].reshape(-1, fs)
    return 10 * np.log10(np.mean(per_second**2, axis=1) / 0.5)
run()  # warm up (design cache)
best = float("inf")
for _ in range(int(sys.argv[3])):
    t = time.perf_counter(); levels = run(); best = min(best, time.perf_counter() - t)
print(json.dumps({"seconds": best, "python": platform.python_version(),
                  "phonometry": phonometry.__version__, "numpy": np.__version__,
                  "levels_dbfs": levels.tolist()}))
"""


def best_time(function: Callable[[], object], repeats: int = REPEATS) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - start)
    return best


def run_meter(x: NDArray[np.floating], dtype: type[np.floating]) -> None:
    meter = iec61672.SoundLevelMeter(FS, period_s=1.0, calibration_db=94.0, dtype=dtype)
    for start in range(0, x.size, BLOCK):
        meter.process(x[start : start + BLOCK])
    meter.flush()


def phonometry_python() -> Path | None:
    venv = CACHE / "venv-phonometry"
    python = venv / "bin" / "python"
    if python.exists():
        return python
    base = shutil.which("python3.13")
    if base is None:
        return None
    env = dict(os.environ, PYENV_VERSION="3.13.0")  # pyenv shims need the version selected
    try:
        subprocess.run([base, "-m", "venv", str(venv)], check=True, env=env, capture_output=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", "phonometry", "numpy"],
            check=True,
            capture_output=True,
        )
    except (subprocess.CalledProcessError, OSError) as error:
        print(f"phonometry: could not set up a Python 3.13 venv: {error}")
        shutil.rmtree(venv, ignore_errors=True)
        return None
    return python


def time_phonometry(x: NDArray[np.float64]) -> dict[str, object] | None:
    python = phonometry_python()
    if python is None:
        print("phonometry: unavailable (needs python3.13 and pip access); no comparison made")
        return None
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "noise.npy"
        np.save(data, x)
        script = Path(tmp) / "bench_phonometry.py"
        script.write_text(PHONOMETRY_SCRIPT)
        done = subprocess.run(
            [str(python), str(script), str(data), str(FS), str(REPEATS)], capture_output=True, text=True
        )
    if done.returncode != 0:
        print(f"phonometry: run failed: {done.stderr.strip().splitlines()[-1:]}")
        return None
    result: dict[str, object] = json.loads(done.stdout)
    return result


def main() -> None:
    tune_process()  # one BLAS thread and heap reuse, as every minewatch command runs (process_settings)
    rng = np.random.default_rng(2024)
    x64 = rng.standard_normal(FS * SECONDS) * 0.05
    x32 = x64.astype(np.float32)
    n = x64.size
    sos = iec61672.design_weighting_filters(FS).sos_a
    assert sos.shape[0] == 3
    print(f"acoustics benchmark: {SECONDS} s of {FS} Hz noise ({n / 1e6:.1f} Msamples), best of {REPEATS}")
    print(f"machine: {platform.machine()}, {os.cpu_count()} cpus, {platform.platform()}")
    print(f"python {platform.python_version()}, numpy {np.__version__}, scipy {scipy.__version__}")
    print("process tuning as the minewatch commands run (process_settings): 1 BLAS thread, heap reuse")

    results: dict[str, dict[str, float]] = {}
    for name, x, dtype in (("float64", x64, np.float64), ("float32", x32, np.float32)):
        sos_d = sos.astype(dtype)
        zi = np.zeros((3, 2), dtype=dtype)
        floor = best_time(lambda x=x, sos_d=sos_d, zi=zi: signal.sosfilt(sos_d, x, zi=zi))
        laeq = best_time(lambda x=x: iec61672.laeq_per_period(x, FS, 1.0, 94.0))
        meter = best_time(lambda x=x, dtype=dtype: run_meter(x, dtype))
        results[name] = {"floor": floor, "laeq": laeq, "meter": meter}
        print(
            f"{name}: floor (sosfilt, 3 sections) {n / floor / 1e6:6.1f} Ms/s | "
            f"laeq/s {n / laeq / 1e6:6.1f} Ms/s ({laeq / floor:.2f} x floor) | "
            f"meter {n / meter / 1e6:6.1f} Ms/s ({meter / floor:.2f} x floor)"
        )

    ours = iec61672.laeq_per_period(x64, FS, 1.0, 0.0)
    phonometry = time_phonometry(x64)
    main64 = results["float64"]
    if phonometry is not None:
        seconds = float(phonometry["seconds"])  # type: ignore[arg-type]
        theirs = np.asarray(phonometry["levels_dbfs"])
        print(
            f"phonometry {phonometry['phonometry']} (python {phonometry['python']}, "
            f"numpy {phonometry['numpy']}): accurate A + Leq/s {n / seconds / 1e6:.1f} Ms/s; "
            f"max |LAeq difference| vs ours {np.max(np.abs(theirs - ours)):.3f} dB"
        )
        phonometry_part = f"phonometry accurate {seconds / main64['laeq']:.1f} x slower than laeq"
    else:
        phonometry_part = "phonometry accurate n/a x slower than laeq (phonometry unavailable)"
    laeq_ratio = main64["laeq"] / main64["floor"]
    print(
        f"acoustics: laeq {n / main64['laeq'] / 1e6:.1f} Ms/s ({laeq_ratio:.2f} x floor), "
        f"meter {n / main64['meter'] / 1e6:.1f} Ms/s ({main64['meter'] / main64['floor']:.2f} x floor), "
        f"{phonometry_part}"
    )


if __name__ == "__main__":
    main()
