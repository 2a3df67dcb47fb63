"""Benchmark of the seismograph summary and compliance (not a test).  Run: ``python bench/blast.py``.

A 10-s, 4-channel event at 16,384 samples/s (the most a seismograph records: Instantel Micromate
and Minimate Pro go to 16 kS/s). Times, best of a few repeats, in one run:
  * reading the event's samples with numpy from the event file: the vendor CSV (np.loadtxt, what
    the hot folder reads) and the same samples as float32 (np.fromfile, the wire's MWS1 samples);
  * the summary (monitor.seismic.summary.summarize) and the compliance of both rules on it.
Target (issue 27): summary and compliance within 3x the time numpy takes to read the samples.
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import rules
from monitor.seismic.summary import summarize
from monitor.seismic.vendor_csv import VendorEvent, write_event
from rules.model import AxisPeak, SeismicEvent, SiteContext, SiteData
from rules.profile import load_profile
from sensors.seismograph import site_law_event

RATE = 16384
SECONDS = 10.0
REPEATS = 5


def best(fn: Callable[[], object]) -> float:
    times = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    wave = site_law_event(500.0, 300.0, rate=RATE, record_s=SECONDS)
    start = datetime(2026, 6, 15, 16, 30, tzinfo=UTC)
    profile = load_profile("dovre")
    site = SiteContext("pit1", "bench", "America/Chicago", 45.27, -91.62)
    with tempfile.TemporaryDirectory() as tmp:
        csv_path, raw_path = Path(tmp) / "event.csv", Path(tmp) / "event.f32"
        write_event(csv_path, VendorEvent("bench", start, wave))
        wave.data.T.astype("<f4").tofile(raw_path)
        head = csv_path.read_text().split("T,V,L,MIC\n", 1)[0].count("\n") + 1
        read_csv = best(lambda: np.loadtxt(csv_path, delimiter=",", skiprows=head))
        read_raw = best(lambda: np.fromfile(raw_path, dtype="<f4").reshape(-1, 4).T.astype(np.float64))

    def judge() -> None:
        s = summarize(wave)
        axes = tuple(AxisPeak(a.axis, a.ppv_mm_s, a.zc_hz, a.fft_hz, a.clipped) for a in s.axes)
        event = SeismicEvent(
            "pit1", "sg1", "bench", start, SECONDS, axes, s.pvs_mm_s, s.airblast_pa, s.mic_low_hz
        )
        data = SiteData(seismic=(event,))
        rules.evaluate_site(
            site, profile, data, start - timedelta(minutes=1), start + timedelta(minutes=1), start
        )

    judge()  # import and cache the rules first
    summary_s = best(lambda: summarize(wave))
    total_s = best(judge)
    samples = wave.data.size
    print(f"event: {SECONDS:g} s x 4 channels at {RATE} samples/s = {samples:,} samples")
    print(f"numpy reads the vendor CSV (np.loadtxt):          {read_csv * 1000:8.1f} ms")
    print(f"numpy reads the float32 samples (np.fromfile):    {read_raw * 1000:8.1f} ms")
    print(f"summary (summarize):                              {summary_s * 1000:8.1f} ms")
    print(f"summary + compliance (every rule of the profile): {total_s * 1000:8.1f} ms")
    print(f"ratio to the CSV read:     {total_s / read_csv:6.2f} x   (target <= 3)")
    print(f"ratio to the float32 read: {total_s / read_raw:6.2f} x   (raw binary: a stricter floor)")


if __name__ == "__main__":
    main()
