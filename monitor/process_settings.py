"""Process-wide settings of the minewatch commands, applied once at start-up (cli.main)."""

from __future__ import annotations

import gc
import os
import sys

# The BLAS libraries read these when they load (numpy's import, at first use in most commands).
_BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def limit_blas_threads() -> None:
    """One BLAS thread for the whole process.

    The acoustics meter's dot products and small matrix products are far too short to gain
    from OpenBLAS's worker threads, and on a busy 2-core machine the workers' hand-offs made
    them up to 400x slower (measured: ddot on 48,000 samples at 9 Ms/s with the default
    threads, 4,000 Ms/s with one). The daemon has threads of its own for the other core.
    Set in the environment for a library not loaded yet (a value the user set is kept), and
    through threadpoolctl for one already loaded; importing threadpoolctl (~10 ms) only then
    keeps the commands that never load numpy quick to start.
    """
    for variable in _BLAS_THREAD_VARIABLES:
        os.environ.setdefault(variable, "1")
    if "numpy" in sys.modules:
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=1, user_api="blas")


def keep_freed_memory_for_reuse() -> None:
    """Let glibc serve the meter's ~1 MiB working arrays from its heap, not fresh mmaps.

    By default every allocation above 128 KiB is a new mapping whose pages fault in one by
    one, and numpy's temporaries in the meter are 1 MiB each, every block: the page faults
    cost more than the filtering (bench/acoustics.py, float64 meter: 4.2x the floor without
    this, 3.2x with it, measured in the same conditions; docs/PERFORMANCE.md).
    The thresholds keep up to 64 MiB of freed heap for reuse. No-op off glibc.
    """
    import ctypes

    try:
        # The process's own symbols (libc among them): ctypes.util.find_library("c") would run
        # ldconfig in a subprocess, ~5 ms of every command's start.
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc
        return
    m_trim_threshold, m_mmap_threshold = -1, -3  # <malloc.h>
    mallopt(m_mmap_threshold, 32 * 1024 * 1024)
    mallopt(m_trim_threshold, 64 * 1024 * 1024)


def collect_garbage_less_often() -> None:
    """Run the cyclic garbage collector after 200,000 net allocations instead of 700.

    Reference counting frees what the daemon allocates per message; the collector only
    matters for cycles, which are rare here. With the default threshold it ran every few
    hundred messages, and its older-generation passes walked the ~10^5 readings the daemon
    keeps for evaluation each time (bench/ingest.py). A young collection walks what is still
    alive of its allocations, so fewer of them walk less in all: the pipeline's CPU a message
    was 14.4-14.5 us at 50,000 and 13.9-14.0 us at 200,000 (in-process harness, 300,000
    messages). See also freeze_startup_objects.
    """
    gc.set_threshold(200_000, 20, 20)


def freeze_startup_objects() -> None:
    """Move everything allocated so far (modules, numpy, scipy, configuration) out of the
    collector's reach: it lives as long as the process, so walking it is wasted time."""
    gc.collect()
    gc.freeze()


def tune_process() -> None:
    limit_blas_threads()
    keep_freed_memory_for_reuse()
    collect_garbage_less_often()
