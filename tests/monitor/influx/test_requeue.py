"""`minewatch influx rejected|requeue`: the points InfluxDB refused, sent again once put right.

Against a real influxd 1.6.7: a point refused for a field type conflict is kept in the
rejected table; once the conflicting series is dropped, `requeue` puts it back in the outbox
and the forwarder writes it (before, nothing ever sent a rejected point again).
"""

from __future__ import annotations

import sqlite3
import urllib.parse
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

from monitor.config import InfluxConfig
from monitor.influx.client import Backoff, InfluxForwarder, InfluxWriter, line
from monitor.influx.outbox import Outbox
from monitor.journal.store import Store
from tests.support.cli import run_minewatch
from tests.support.configs import quarry_config, sensor
from tests.support.servers import Influxd

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def sound(i: int, value: float | int) -> str:
    return line("sound", {"site": "dovre", "sensor": "n1"}, {"LAeq": value}, T0 + timedelta(seconds=i))


def post_query(server: Influxd, query: str) -> None:
    data = urllib.parse.urlencode({"q": query, "db": "minewatch"}).encode()
    with urllib.request.urlopen(f"{server.url}/query", data=data, timeout=10) as answer:
        assert b'"error"' not in answer.read()


def forward(path: Path, server: Influxd) -> InfluxForwarder:
    config = InfluxConfig(version=1, url=server.url, database="minewatch")
    forwarder = InfluxForwarder(
        Outbox.open(path), InfluxWriter(config), flush_interval_s=0.02, backoff=Backoff(0.02, 0.2)
    )
    assert forwarder.flush(10)
    forwarder.close()
    return forwarder


def test_rejected_points_are_listed_and_sent_again(influxd: Influxd, tmp_path: Path) -> None:
    store_path = tmp_path / "minewatch.db"
    Store(store_path).close()
    config = tmp_path / "minewatch.toml"
    config.write_text(
        quarry_config(store_path, sensors=[sensor("n1", "sound")])
        + f'[storage.influxdb]\nversion = 1\nurl = "{influxd.url}"\ndatabase = "minewatch"\n'
    )
    writer = InfluxWriter(InfluxConfig(version=1, url=influxd.url, database="minewatch"))
    writer.write([sound(-1, 1)])  # LAeq an integer: the floats below conflict with it
    conn = sqlite3.connect(store_path)
    light = line("light", {"site": "dovre", "sensor": "l1"}, {"lux_mean": 0.5}, T0)
    Outbox(conn).put([sound(0, 50.0), light, sound(1, 51.0)])
    conn.commit()
    conn.close()
    forward(store_path, influxd)
    assert influxd.count("minewatch", "sound", "LAeq") == 1  # the integer one: both floats refused
    assert influxd.count("minewatch", "light", "lux_mean") == 1

    listed = run_minewatch("influx", "rejected", "--config", config)
    assert listed.returncode == 0, listed.stderr
    [row, ids] = listed.stdout.splitlines()
    assert row.split()[0] == "2" and "field type conflict" in row
    assert ids.split() == ["ids", "1,", "3"]  # what `requeue --id` takes (2, the light point, was written)

    post_query(influxd, 'DROP MEASUREMENT "sound"')  # put right: the integer LAeq is gone
    requeued = run_minewatch("influx", "requeue", "--config", config)
    assert (requeued.returncode, requeued.stdout.strip()) == (
        0,
        "2 point(s) queued again for InfluxDB; 2 waiting in all",
    ), requeued.stderr
    assert run_minewatch("influx", "rejected", "--config", config).stdout == "no point refused by InfluxDB\n"

    forward(store_path, influxd)
    assert influxd.count("minewatch", "sound", "LAeq") == 2
    series = influxd.query('SELECT "LAeq" FROM "sound"', "minewatch")
    assert [row[1] for row in series[0]["values"]] == [50.0, 51.0]  # type: ignore[union-attr]
    outbox = Outbox.open(store_path)
    assert (outbox.pending(), outbox.rejected()) == (0, [])
    outbox.close()


def test_requeue_of_some_ids(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "minewatch.db")
    outbox = Outbox(conn)
    outbox.put([sound(i, 50.0) for i in range(4)])
    conn.commit()
    ids = [item_id for item_id, _ in outbox.peek(4)]
    outbox.reject(ids[:3], "InfluxDB answered 400: no")
    assert outbox.requeue([ids[1], 999]) == 1
    assert [item for _, item in outbox.peek(4)] == [sound(3, 50.0), sound(1, 50.0)]  # behind what waited
    assert [r.id for r in outbox.rejected()] == [ids[0], ids[2]]
    assert outbox.rejected_reasons() == [("InfluxDB answered 400: no", 2)]
    assert outbox.requeue() == 2 and outbox.rejected() == []
    conn.close()


def test_the_ids_of_rejected_points_are_given_as_runs(tmp_path: Path) -> None:
    """`influx requeue --id N` (README, CONFIG, DEPLOY) had no command that showed an id: `influx
    rejected` gave counts by reason only. It gives each reason's ids, as runs, at most MAX_RUNS."""
    from monitor.commands.influx import MAX_RUNS, id_ranges

    conn = sqlite3.connect(tmp_path / "minewatch.db")
    outbox = Outbox(conn)
    outbox.put([sound(i, 50.0) for i in range(8)])
    conn.commit()
    ids = [item_id for item_id, _ in outbox.peek(8)]
    outbox.reject([ids[0], ids[1], ids[2], ids[5]], "InfluxDB answered 400: field type conflict")
    outbox.reject([ids[3], ids[7]], "InfluxDB answered 400: unable to parse")
    assert list(outbox.rejected_ids("InfluxDB answered 400: unable to parse")) == [ids[3], ids[7]]
    assert id_ranges(outbox.rejected_ids("InfluxDB answered 400: field type conflict")) == (
        f"{ids[0]}-{ids[2]}, {ids[5]}"
    )
    conn.close()
    assert (
        id_ranges(range(1, 2 * MAX_RUNS + 2, 2))
        == ", ".join(str(i) for i in range(1, 2 * MAX_RUNS, 2)) + " and 1 more"
    )
    assert id_ranges([]) == ""
