"""The whole machine's CPU over an interval, for the benchmarks: the share left idle, and the share
stolen by the hypervisor (another guest ran on these cores). Both explain a ratio that moved:
a floor and its command measured minutes apart on a shared VM do not run on the same machine."""

from __future__ import annotations

import sys

try:
    import psutil
except ModuleNotFoundError:  # one of the test extras (pyproject.toml), not a dependency of minewatch
    sys.exit(f"{sys.argv[0]}: needs psutil, one of the test extras: pip install -e '.[test]'")


class CpuShares:
    """Started at construction; ``shares()`` reads (idle, stolen) since then, from /proc/stat."""

    def __init__(self) -> None:
        self.start = psutil.cpu_times()

    def shares(self) -> tuple[float, float]:
        end = psutil.cpu_times()
        spent = sum(end) - sum(self.start)
        if spent <= 0:
            return 0.0, 0.0
        steal = getattr(end, "steal", 0.0) - getattr(self.start, "steal", 0.0)  # Linux only
        return (end.idle - self.start.idle) / spent, steal / spent
