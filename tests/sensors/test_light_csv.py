"""A light CSV replay is read as a stream: rows in time order go through as they are, in bounded
memory; a row out of order is refused with its line number before anything is sent. (Every row
was kept in memory to be sorted: a year's file at 10 Hz is gigabytes.)"""

from __future__ import annotations

import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

from sensors.light import CsvSource
from sensors.sound import SourceUnavailable
from tests.support.sensors import site_config
from tests.support.servers import free_port

START = 1_781_500_000.0  # 2026-06-15, epoch seconds
ROWS = 100_000  # three hours at 10 Hz, 2.6 MB: every row kept would take over 10 MB
MEMORY_BOUND = 1024 * 1024


def test_rows_in_time_order_stream_in_bounded_memory(tmp_path: Path) -> None:
    csv = tmp_path / "night.csv"
    # A time may repeat (two readings in one logger tick): kept in the file's order.
    rows = [(START, 0.9), (START, 0.3), (START + 0.1, 0.8), (START + 0.1, 0.2)]
    rows += [(START + i * 0.1, (i % 50) / 10) for i in range(4, ROWS)]
    with csv.open("w") as f:
        f.write("ts,lux\n")
        f.writelines(f"{ts:.1f},{lux}\n" for ts, lux in rows)
    tracemalloc.start()
    try:
        source = CsvSource(str(csv))
        first: list[tuple[float, float]] = []
        read, lux_total, last = 0, 0.0, 0.0
        for ts, lux in source.samples():
            if read < 4:
                first.append((ts, lux))
            read, lux_total, last = read + 1, lux_total + lux, ts
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < MEMORY_BOUND, f"{peak} bytes at the peak"
    assert read == ROWS and last == pytest.approx(rows[-1][0], abs=1e-6)
    assert lux_total == pytest.approx(sum(lux for _, lux in rows))
    assert first == [(pytest.approx(ts, abs=1e-6), lux) for ts, lux in rows[:4]]  # the file's order
    assert source.rate_hz == pytest.approx(10.0)


OUT_OF_ORDER = (
    "ts,lux\n"
    "2026-06-15T03:00:00Z,0.5\n"
    "2026-06-15T03:00:02Z,0.6\n"
    "2026-06-15T03:00:01Z,0.7\n"
    "2026-06-15T03:00:03Z,0.8\n"
)


def test_a_row_out_of_order_is_refused_with_its_line_number(tmp_path: Path) -> None:
    csv = tmp_path / "night.csv"
    csv.write_text(OUT_OF_ORDER)
    with pytest.raises(SourceUnavailable) as refused:
        CsvSource(str(csv))
    assert str(refused.value) == (
        f"{csv}: line 4: ts '2026-06-15T03:00:01Z' is before '2026-06-15T03:00:02Z' on line 3:"
        " the rows must be in time order (sort the file by its ts column)"
    )


def test_the_light_sensor_refuses_a_csv_out_of_order_before_it_sends_anything(tmp_path: Path) -> None:
    csv = tmp_path / "night.csv"
    csv.write_text(OUT_OF_ORDER)
    config = site_config(tmp_path, f"mqtt://127.0.0.1:{free_port()}")  # nothing listens there
    result = subprocess.run(
        [
            *(sys.executable, "-m", "monitor.cli", "sensor", "light", "--config", str(config)),
            *("--sensor", "l1", "--source", f"csv:{csv}", "--queue", str(tmp_path / "q.db")),
            *("--speed", "max", "--drain-timeout", "0.5"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [
        f"minewatch sensor light: {csv}: line 4: ts '2026-06-15T03:00:01Z' is before"
        " '2026-06-15T03:00:02Z' on line 3: the rows must be in time order (sort the file by its ts"
        " column)"
    ]
    assert not (tmp_path / "q.db").exists()  # refused before the queue or the broker


@pytest.mark.parametrize(
    ("row", "why"),
    [
        ("yesterday,0.5", "ts: 'yesterday' is not an RFC 3339 time"),
        ("2026-06-15T03:00:01,0.5", "ts: '2026-06-15T03:00:01' has no UTC offset"),
    ],
)
def test_a_time_that_is_no_time_is_refused_with_its_line_number(tmp_path: Path, row: str, why: str) -> None:
    """A ts the protocol's parser refuses was said without the row it is on (only the reason)."""
    csv = tmp_path / "night.csv"
    csv.write_text(f"ts,lux\n2026-06-15T03:00:00Z,0.5\n{row}\n")
    with pytest.raises(SourceUnavailable) as refused:
        CsvSource(str(csv))
    assert str(refused.value).startswith(f"{csv}: line 3: expected columns ts,lux ({why}")


def test_a_csv_changed_after_its_check_stops_the_replay_at_its_first_bad_row(tmp_path: Path) -> None:
    csv = tmp_path / "night.csv"
    csv.write_text(OUT_OF_ORDER.replace("03:00:01Z,0.7", "03:00:02Z,0.7"))  # in order
    source = CsvSource(str(csv))
    csv.write_text(OUT_OF_ORDER)
    read: list[float] = []
    with pytest.raises(SourceUnavailable, match=r": line 4: ts '2026-06-15T03:00:01Z' is before"):
        for _, lux in source.samples():
            read.append(lux)
    assert read == [0.5, 0.6]  # what came before it
