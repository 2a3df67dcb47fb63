"""Commands that answer at once: what they import, and the weighting filters kept on disk.

The import checks run the command in a fresh interpreter and read its ``sys.modules`` at the
end: a module imported anywhere on the way (command, configuration, profile, store) shows.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import wave
from contextlib import redirect_stdout
from pathlib import Path

import numpy as np
import pytest

from monitor.acoustics import filter_cache, iec61672
from monitor.commands import levels
from monitor.journal.store import Store
from rules import RULES
from tests.support.paths import REPO

DEMO_CONFIG = REPO / "sensors" / "demo" / "dovre-demo.toml"
RATE = 48_000

# Runs ``minewatch ARGS`` in this interpreter, then prints the heavy modules it imported.
_PROBE = """
import sys
from monitor.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
heavy = sorted({m.partition(".")[0] for m in sys.modules} & {"numpy", "scipy", "matplotlib"})
print("EXIT", code, "HEAVY", ",".join(heavy) or "none", file=sys.stderr)
"""


def _imports_of(argv: list[str], tmp_path: Path) -> tuple[str, str]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *argv], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("EXIT "), done.stderr
    _, code, _, heavy = last.split(" ")
    return code, heavy


@pytest.fixture
def status_config(tmp_path: Path) -> Path:
    store = tmp_path / "store.db"
    Store(store).close()
    config = tmp_path / "site.toml"
    config.write_text(DEMO_CONFIG.read_text().replace('path = "minewatch-demo.db"', f'path = "{store}"'))
    return config


def test_help_imports_no_numpy_scipy_matplotlib(tmp_path: Path) -> None:
    assert _imports_of(["--help"], tmp_path) == ("0", "none")


def test_status_imports_no_numpy_scipy_matplotlib(status_config: Path, tmp_path: Path) -> None:
    # The configuration loads and validates the dovre profile, including its noise rule's
    # params: validation must not need the rule's numpy evaluation.
    assert _imports_of(["status", "--config", str(status_config)], tmp_path) == ("0", "none")


def test_status_loads_no_rule_module(status_config: Path) -> None:
    # status reads the store only: the profile (whose parameters need every rule module,
    # ~50 ms of imports) is left to check-config and the daemon.
    probe = (
        "import sys\nfrom monitor.cli import main\ncode = main(sys.argv[1:])\n"
        "from rules import RULES\n"
        "print('EXIT', code, 'RULES', ','.join(r for r in RULES if f'rules.{r}' in sys.modules) or 'none')"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, "status", "--config", str(status_config)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.stdout.strip().splitlines()[-1] == "EXIT 0 RULES none", done.stdout + done.stderr


def test_numpy_loaded_after_start_up_runs_one_blas_thread() -> None:
    # Most commands import numpy at first use, after cli.main's tune_process: the limit is
    # set in the environment the BLAS library reads when it loads.
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    probe = (
        "from monitor.process_settings import tune_process\ntune_process()\nimport numpy\n"
        "from threadpoolctl import threadpool_info\n"
        "print(max(i['num_threads'] for i in threadpool_info() if i['user_api'] == 'blas'))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.stdout.strip() == "1", done.stdout + done.stderr


def test_check_config_imports_no_numpy(status_config: Path, tmp_path: Path) -> None:
    assert _imports_of(["check-config", str(status_config)], tmp_path)[1] == "none"


def test_rule_registry_imports_a_rule_at_first_lookup() -> None:
    probe = (
        "import sys, rules\n"
        # rules.base's helpers (how a level reads: rules.quantities) load with it; no rule does
        "before = sorted(m for m in sys.modules if m.startswith('rules.') and m not in"
        " ('rules.base', 'rules.lazy', 'rules.model', 'rules.quantities'))\n"
        "assert 'noise' in rules.RULES and len(rules.RULES) == 18, rules.RULES\n"
        "listed = sorted(rules.RULES)\n"
        "assert 'rules.noise' not in sys.modules\n"
        "spec = rules.RULES['noise']\n"
        "print(before, 'rules.noise' in sys.modules, spec.name, len(listed))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["[]", "True", "noise", "18"]


def test_every_registered_rule_is_its_modules_rule() -> None:
    for name in RULES:
        assert RULES[name].name == name
    with pytest.raises(KeyError):
        RULES["no_such_rule"]


_SCIPY_PROBE = """
import sys
from monitor.cli import main
code = main(sys.argv[1:])
loaded = [m for m in ("scipy.signal", "scipy.optimize") if m in sys.modules]
print("EXIT", code, "SCIPY", ",".join(loaded) or "none", file=sys.stderr)
"""


def _write_tone(path: Path, seconds: float = 1.0) -> None:
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(RATE)
        tone = 0.1 * np.sin(2 * np.pi * 1000 * np.arange(round(seconds * RATE)) / RATE)
        out.writeframes((tone * 32767).astype("<i2").tobytes())


def test_levels_with_a_warm_cache_imports_no_scipy_signal(tmp_path: Path) -> None:
    # scipy.signal alone takes several times numpy's import: the meter filters with
    # monitor.acoustics.iir, and scipy designs the filters only when the cache has none.
    wav = tmp_path / "tone.wav"
    _write_tone(wav)
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}

    def scipy_modules() -> tuple[str, str]:
        argv = ["levels", str(wav), "--calibration", "94"]
        done = subprocess.run(
            [sys.executable, "-c", _SCIPY_PROBE, *argv],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        last = done.stderr.strip().splitlines()[-1]
        assert last.startswith("EXIT "), done.stderr
        assert "LAeq" in done.stdout
        _, code, _, loaded = last.split(" ")
        return code, loaded

    assert scipy_modules() == ("0", "scipy.signal,scipy.optimize")  # cold: designed (and cached)
    assert scipy_modules() == ("0", "none")  # warm: read from the cache, filtered with numpy


# --------------------------------------------------------------------------- filter cache


def _same(cached: iec61672.WeightingFilters, fresh: iec61672.WeightingFilters) -> None:
    assert cached.sample_rate == fresh.sample_rate
    for name in ("sos_a", "sos_c", "sos_a_from_c"):
        assert np.array_equal(getattr(cached, name), getattr(fresh, name)), name  # bit for bit
        assert not getattr(cached, name).flags.writeable
    for name in ("fit_upper_hz", "max_error_a_db", "max_error_c_db"):
        assert getattr(cached, name) == getattr(fresh, name), name


def _no_design(sample_rate: int) -> iec61672.WeightingFilters:
    raise AssertionError("designed although a usable cache was there")


def test_cached_design_equals_a_fresh_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fresh = iec61672.design_weighting_filters(RATE)
    first = filter_cache.weighting_filters(RATE, tmp_path)
    _same(first, fresh)
    assert filter_cache.cache_path(RATE, tmp_path).is_file()
    monkeypatch.setattr(filter_cache, "design_weighting_filters", _no_design)
    _same(filter_cache.weighting_filters(RATE, tmp_path), fresh)  # read back, not designed


@pytest.mark.parametrize(
    "content",
    [
        "{not json",
        "",
        json.dumps({"sample_rate": RATE}),  # fields missing
        json.dumps(
            {
                "sample_rate": 44100,
                "sos_a": [[1, 0, 0, 1, 0, 0]],
                "sos_c": [[1, 0, 0, 1, 0, 0]],
                "sos_a_from_c": [[1, 0, 0, 1, 0, 0]],
                "fit_upper_hz": 1,
                "max_error_a_db": 0,
                "max_error_c_db": 0,
            }
        ),  # another rate's filters under this name
        json.dumps(
            {
                "sample_rate": RATE,
                "sos_a": [1, 2],
                "sos_c": "x",
                "sos_a_from_c": [],
                "fit_upper_hz": 1,
                "max_error_a_db": 0,
                "max_error_c_db": 0,
            }
        ),  # wrong shapes
    ],
)
def test_corrupt_cache_falls_back_to_designing(tmp_path: Path, content: str) -> None:
    path = filter_cache.cache_path(RATE, tmp_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)
    _same(filter_cache.weighting_filters(RATE, tmp_path), iec61672.design_weighting_filters(RATE))
    assert json.loads(path.read_text())["sample_rate"] == RATE  # rewritten whole


def test_unwritable_cache_directory_still_designs(tmp_path: Path) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory")
    _same(filter_cache.weighting_filters(RATE, blocked / "cache"), iec61672.design_weighting_filters(RATE))


def test_cache_file_names_the_design_it_holds(tmp_path: Path) -> None:
    # A changed acoustics module (or numpy/scipy) means another file: an old design is never read.
    assert filter_cache.fingerprint() in filter_cache.cache_path(RATE, tmp_path).name
    assert filter_cache.cache_path(RATE, tmp_path) != filter_cache.cache_path(44_100, tmp_path)


def test_unsupported_rate_is_not_cached(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="sample rate"):
        filter_cache.weighting_filters(1000, tmp_path)
    assert not list(tmp_path.iterdir())


def test_meter_refuses_filters_of_another_rate() -> None:
    with pytest.raises(ValueError, match="44100 Hz, not 48000 Hz"):
        iec61672.SoundLevelMeter(RATE, filters=iec61672.design_weighting_filters(44_100))


def _levels_output(wav: Path) -> str:
    out = io.StringIO()
    args = argparse.Namespace(recording=str(wav), calibration=94.0, period=0.5, format="csv")
    with redirect_stdout(out):
        assert levels.run(args) == 0
    return out.getvalue()


def test_levels_reads_the_cache_and_prints_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    wav = tmp_path / "tone.wav"
    with wave.open(str(wav), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(RATE)
        tone = 0.1 * np.sin(2 * np.pi * 1000 * np.arange(RATE) / RATE)
        out.writeframes((tone * 32767).astype("<i2").tobytes())
    designed = _levels_output(wav)  # designs, and caches
    assert filter_cache.cache_path(RATE, tmp_path / "cache" / "minewatch").is_file()
    monkeypatch.setattr(filter_cache, "design_weighting_filters", _no_design)
    assert _levels_output(wav) == designed


# --------------------------------------------------------------------------- rules.lazy


def test_lazy_module_imports_at_first_attribute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pickle

    from rules.lazy import lazy_import

    (tmp_path / "lazy_probe_module.py").write_text("VALUE = 42\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "lazy_probe_module", raising=False)
    stand_in = lazy_import("lazy_probe_module")
    copied = pickle.loads(pickle.dumps(stand_in))  # e.g. sent to a worker process
    assert "lazy_probe_module" not in sys.modules
    assert copied.VALUE == 42 and stand_in.VALUE == 42
    assert "lazy_probe_module" in sys.modules
    with pytest.raises(AttributeError):
        stand_in.MISSING  # noqa: B018 - the lookup is the test
