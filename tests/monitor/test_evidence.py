"""Evidence bundles: export from a real store, verify, and catch every kind of tampering."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import sqlite3
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from monitor.cli import main
from monitor.config import Config, load_config
from monitor.evidence import (
    EvidenceError,
    TimeFormat,
    evidence_texts,
    export_bundle,
    load_anchors,
    verify_bundle,
)
from monitor.influx import InfluxWriter, line
from monitor.store import Store, digest_of, next_head, sound_record, to_us
from rules.model import (
    Finding,
    FindingKind,
    LightSummary,
    Measurement,
    SoundLevels,
    TruckPassage,
    WeatherReading,
)
from tests.daemon_harness import Client, Daemon, wait_until, write_config
from tests.servers import Influxd, Mosquitto

SITE = "quarry"
# 2024-03-10 08:00Z is 02:00 CST, when Chicago springs forward to 03:00 CDT.
T0 = datetime(2024, 3, 10, 7, 58, tzinfo=UTC)
WINDOW = (T0, T0 + timedelta(minutes=4))


@dataclass
class Site:
    config_path: Path
    config: Config
    store: Path
    anchors: Path  # what the town received on minewatch/quarry/anchors


def _finding(start: datetime, summary: str) -> Finding:
    return Finding(
        SITE,
        "noise",
        "6.D",
        FindingKind.VIOLATION,
        start,
        start + timedelta(minutes=1),
        "America/Chicago",
        summary,
        ("n2",),
        (Measurement("LAeq", 82.5, 80.0, "dB(A)"),),
    )


def build_site(tmp_path: Path, *, influx: str = "", seconds: int = 240, final_anchor: bool = True) -> Site:
    """A store as the daemon writes it: a config record at start-up, anchors (each followed by the
    config record restated, as Pipeline._anchor does) before, during and (``final_anchor``) after
    the window."""
    config_path = write_config(tmp_path / "minewatch.toml", "mqtt://127.0.0.1:1", site=SITE, influx=influx)
    config = load_config(config_path)
    store = Store(config.storage.path)
    anchors = []

    def anchor(now: datetime) -> None:
        seq, head = store.head(SITE)
        store.conn.execute("INSERT INTO anchors VALUES (?,?,?,?)", (SITE, seq, head, to_us(now)))
        store.restate_config(SITE, now)
        anchors.append({"site": SITE, "seq": seq, "head": head, "ts": now.isoformat()})

    site_config = config.site(SITE)
    assert site_config is not None
    with store.batch():
        store.append_config_record(SITE, *evidence_texts(config, site_config), T0 - timedelta(minutes=5))
        anchor(T0 - timedelta(minutes=4))
        for i in range(seconds):
            ts = T0 + timedelta(seconds=i)
            now = ts + timedelta(seconds=1)
            for sensor, base in (("n1", 61.0), ("n2", 79.0)):
                laeq = base + (i % 13) * 0.37  # not round: the CSV must carry the exact float
                store.append_sound(
                    SoundLevels(
                        SITE,
                        sensor,
                        ts,
                        1.0,
                        laeq,
                        laeq + 2.1,
                        laeq + 17.3,
                        LASmax=laeq + 1.05,
                        LZpeak=laeq + 19.9,
                    ),
                    source="levels",
                    late=False,
                    now=now,
                )
            if i % 10 == 0:
                payload = {
                    "ts": ts.isoformat(),
                    "duration_s": 10.0,
                    "lux_mean": 0.25 + i / 1000,
                    "lux_min": 0.1,
                    "lux_max": 0.7,
                }
                store.append_reading(
                    LightSummary(SITE, "l1", ts, 10.0, payload["lux_mean"], 0.1, 0.7),
                    payload,
                    late=False,
                    now=now,
                )
            if i % 60 == 0:
                payload = {"ts": ts.isoformat(), "duration_s": 60.0, "wind_speed_ms": 3.25, "rain": False}
                store.append_reading(
                    WeatherReading(SITE, "wx", ts, 60.0, 3.25, False), payload, late=False, now=now
                )
            if i == 30:
                truck = TruckPassage(SITE, 't1,"a"', ts, "g1", "in")  # a key csv must quote
                store.append_event(
                    truck, {"id": truck.id, "ts": ts.isoformat(), "gate": "g1", "direction": "in"}, now
                )
            if i == 90:
                store.append_finding(_finding(T0, "82.5 dB(A) at n2"), now)
                store.append_alert(
                    "a1",
                    SITE,
                    "town",
                    "violation",
                    "violation",
                    "finding:x",
                    "82.5 dB(A) at n2",
                    {"sensor": "n2"},
                    now,
                )
            if i == 120:
                store.append_finding(_finding(T0, "82.6 dB(A) at n2 (re-evaluated)"), now)  # revision 2
                anchor(now)
        if final_anchor:
            anchor(T0 + timedelta(seconds=seconds + 60))
    store.close()
    anchors_path = tmp_path / "town-anchors.json"
    anchors_path.write_text(json.dumps(anchors))
    return Site(config_path, config, Path(config.storage.path), anchors_path)


@pytest.fixture
def site(tmp_path: Path) -> Site:
    return build_site(tmp_path)


def export(site: Site, path: Path, **kwargs: object) -> Path:
    export_bundle(site.config, SITE, *WINDOW, path, plots=kwargs.pop("plots", False), **kwargs)  # type: ignore[arg-type]
    return path


def rewrite(src: Path, dst: Path, edits: dict[str, Callable[[bytes], bytes]], *, rehash: bool = True) -> Path:
    """Copy a bundle with members edited; ``rehash`` also fixes the manifest's SHA-256 (as a forger would)."""
    with zipfile.ZipFile(src) as zin:
        members = {name: zin.read(name) for name in zin.namelist()}
    for name, edit in edits.items():
        members[name] = edit(members[name])
    if rehash:
        manifest = json.loads(members["manifest.json"])
        for entry in manifest["files"]:
            entry["sha256"] = hashlib.sha256(members[entry["name"]]).hexdigest()
        members["manifest.json"] = json.dumps(manifest).encode()
    with zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zout:
        for name, data in members.items():
            zout.writestr(name, data)
    return dst


def csv_rows(data: bytes) -> list[list[str]]:
    return list(csv.reader(io.StringIO(data.decode())))


def csv_bytes(rows: list[list[str]]) -> bytes:
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    return out.getvalue().encode()


def edit_rows(change: Callable[[list[list[str]]], None]) -> Callable[[bytes], bytes]:
    def edit(data: bytes) -> bytes:
        rows = csv_rows(data)
        change(rows)
        return csv_bytes(rows)

    return edit


def first_problem(path: Path, anchors: Path | None = None) -> str:
    report = verify_bundle(path, load_anchors(anchors) if anchors else None)
    assert not report.ok
    assert report.first_problem is not None
    return report.first_problem.message


# --------------------------------------------------------------------------- export and verify


def test_export_then_verify(site: Site, tmp_path: Path) -> None:
    bundle = export(site, tmp_path / "b.zip", plots=True)
    with zipfile.ZipFile(bundle) as zf:
        names = set(zf.namelist())
        manifest = json.loads(zf.read("manifest.json"))
        sound = csv_rows(zf.read("data/sound.csv"))
        findings = [
            json.loads(line.rstrip(","))
            for line in zf.read("records/findings.json").decode().splitlines()
            if line not in ("[", "]")
        ]
        for entry in manifest["files"]:
            assert hashlib.sha256(zf.read(entry["name"])).hexdigest() == entry["sha256"]
    assert {
        "data/sound.csv",
        "data/light.csv",
        "data/weather.csv",
        "records/events.json",
        "records/alerts.json",
        "records/calibration.json",
        "chain.csv",
        "anchors.json",
        "config.toml",
        "profile/dovre.toml",
        "plots/sound/n1/2024-03-10.png",
        "plots/light/l1/2024-03-10.png",
        "manifest.json",
    } <= names
    assert len(sound) == 1 + 2 * 240
    assert [f["row"]["revision"] for f in findings] == [1, 2]
    assert manifest["software"]["version"]
    assert manifest["rows"]["data/light.csv"] == 24 and manifest["rows"]["records/events.json"] == 1
    # The segment starts right after an anchor and runs on to the anchor published after the window.
    anchors = json.loads(site.anchors.read_text())
    assert manifest["chain"]["first_seq"] == anchors[0]["seq"] + 1
    assert manifest["chain"]["last_seq"] == anchors[-1]["seq"] == manifest["chain"]["extended_to_anchor"]
    # floats round-trip exactly: the CSV value is the stored float's repr
    with sqlite3.connect(site.store) as conn:
        stored = conn.execute(
            "SELECT LAeq FROM sound WHERE sensor='n1' ORDER BY ts_us LIMIT 1 OFFSET 5"
        ).fetchone()[0]
    n1 = [r for r in sound[1:] if r[2] == "n1"]
    assert n1[5][7] == repr(stored)

    report = verify_bundle(bundle)
    assert report.ok, report.lines()
    assert not report.anchored
    # Without the town's heads, the first line says how little that proves (not "OK" and a note).
    assert report.lines()[0] == f"{bundle}: internal consistency only: " + (
        "no problem found, but without the heads the town holds (--anchors) nothing shows that this"
        " bundle was not rebuilt from an altered store"
    )
    # sound, light, weather, the event, two finding revisions, the alert, and the config record
    # restated after each of the two anchors the segment starts after or holds
    assert sum(report.rows_checked.values()) == 480 + 24 + 4 + 1 + 2 + 1 + 2

    report = verify_bundle(bundle, load_anchors(site.anchors))
    assert report.ok, report.lines()
    assert report.anchored and report.anchored_to == manifest["chain"]["last_seq"]
    assert report.town_anchors_matched == [a["seq"] for a in anchors]
    assert report.lines()[0] == (
        f"{bundle}: OK, anchored: every entry of the segment (seq {anchors[0]['seq'] + 1} to"
        f" {anchors[-1]['seq']}) leads to the head the town holds for seq {anchors[-1]['seq']}"
    )


def test_a_changed_csv_value_is_named(site: Site, tmp_path: Path) -> None:
    bundle = export(site, tmp_path / "b.zip")

    def louder(rows: list[list[str]]) -> None:
        rows[7][7] = repr(float(rows[7][7]) - 3.0)  # 3 dB quieter, still a plausible value

    # Edited in place: the file's hash gives it away first, and the row is named too.
    plain = rewrite(bundle, tmp_path / "plain.zip", {"data/sound.csv": edit_rows(louder)}, rehash=False)
    assert first_problem(plain) == "file changed: data/sound.csv does not match its SHA-256 in the manifest"
    messages = [p.message for p in verify_bundle(plain).problems]
    assert any(m.startswith("row altered: data/sound.csv line 8 ") for m in messages), messages
    # With the manifest's hashes recomputed, the rebuilt digest still differs from the chain's.
    forged = rewrite(bundle, tmp_path / "forged.zip", {"data/sound.csv": edit_rows(louder)})
    assert first_problem(forged).startswith("row altered: data/sound.csv line 8 (sensor ")


def test_a_removed_row_is_named(site: Site, tmp_path: Path) -> None:
    bundle = export(site, tmp_path / "b.zip")
    removed: list[str] = []

    def drop(rows: list[list[str]]) -> None:
        removed.extend(rows.pop(100))

    forged = rewrite(bundle, tmp_path / "forged.zip", {"data/sound.csv": edit_rows(drop)})
    message = first_problem(forged)
    assert message.startswith(f"row removed: chain seq {removed[0]} ({removed[2]}|{removed[3]})"), message
    assert "data/sound.csv" in message


def test_reordered_rows_are_named(site: Site, tmp_path: Path) -> None:
    bundle = export(site, tmp_path / "b.zip")

    def swap(rows: list[list[str]]) -> None:
        rows[10], rows[11] = rows[11], rows[10]

    forged = rewrite(bundle, tmp_path / "forged.zip", {"data/sound.csv": edit_rows(swap)})
    report = verify_bundle(forged)
    assert first_problem(forged).startswith("rows reordered: data/sound.csv line 12"), report.lines()
    assert all(p.category == "order" for p in report.problems)  # nothing else is wrong with those rows


def test_an_edited_file_fails_its_hash(site: Site, tmp_path: Path) -> None:
    bundle = export(site, tmp_path / "b.zip")
    edited = rewrite(
        bundle,
        tmp_path / "e.zip",
        {"profile/dovre.toml": lambda b: b.replace(b"limit_db = 80.0", b"limit_db = 85.0", 1)},
        rehash=False,
    )
    assert (
        first_problem(edited) == "file changed: profile/dovre.toml does not match its SHA-256 in the manifest"
    )


def test_a_store_edited_in_sqlite_is_caught_after_export(site: Site, tmp_path: Path) -> None:
    ts = to_us(T0 + timedelta(seconds=42))
    with sqlite3.connect(site.store) as conn:
        conn.execute("UPDATE sound SET LAeq = LAeq - 5 WHERE sensor = 'n2' AND ts_us = ?", (ts,))
    bundle = export(site, tmp_path / "b.zip")
    message = first_problem(bundle)
    assert message.startswith("row altered: data/sound.csv line "), message
    assert "(sensor n2 at 2024-03-10T07:58:42Z, chain seq" in message


def test_a_row_deleted_from_the_store_is_caught_after_export(site: Site, tmp_path: Path) -> None:
    with sqlite3.connect(site.store) as conn:
        conn.execute(
            "DELETE FROM sound WHERE sensor = 'n1' AND ts_us = ?", (to_us(T0 + timedelta(seconds=7)),)
        )
    bundle = export(site, tmp_path / "b.zip")
    message = first_problem(bundle)
    assert (
        message.startswith("row removed: chain seq ")
        and f"(n1|{to_us(T0 + timedelta(seconds=7))})" in message
    )


def _forge(bundle: Path, dst: Path) -> Path:
    """Alter one level and recompute everything a forger can: digest, chain heads, anchors, file hashes."""
    with zipfile.ZipFile(bundle) as zf:
        members = {name: zf.read(name) for name in zf.namelist()}
    manifest = json.loads(members["manifest.json"])
    sound = csv_rows(members["data/sound.csv"])
    header, row = sound[0], sound[20]
    row[header.index("LAeq")] = repr(float(row[header.index("LAeq")]) - 4.0)
    cells = dict(zip(header, row, strict=True))
    record = sound_record(
        {
            **cells,
            "ts_us": int(cells["ts_us"]),
            "duration_s": float(cells["duration_s"]),
            **{
                k: (float(cells[k]) if cells[k] else None)
                for k in ("LAeq", "LAFmax", "LASmax", "LAFmin", "LCeq", "LCpeak", "LZpeak", "LZeq")
            },
        }
    )
    chain = csv_rows(members["chain.csv"])
    head = manifest["chain"]["prev_head"]
    heads: dict[int, str] = {}
    for entry in chain[1:]:
        if entry[0] == row[0]:
            entry[3] = digest_of(record)
        head = entry[4] = next_head(head, entry[3])
        heads[int(entry[0])] = head
    manifest["chain"]["last_head"] = head
    for anchor in manifest["anchors"]:
        anchor["head"] = heads.get(anchor["seq"], anchor["head"])
    own = json.loads(members["anchors.json"])
    for anchor in own:
        anchor["head"] = heads.get(anchor["seq"], anchor["head"])
    members.update(
        {
            "data/sound.csv": csv_bytes(sound),
            "chain.csv": csv_bytes(chain),
            "anchors.json": json.dumps(own).encode(),
        }
    )
    for entry in manifest["files"]:
        entry["sha256"] = hashlib.sha256(members[entry["name"]]).hexdigest()
    members["manifest.json"] = json.dumps(manifest).encode()
    with zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zout:
        for name, data in members.items():
            zout.writestr(name, data)
    return dst


def test_a_rebuilt_chain_passes_alone_but_not_against_the_towns_anchors(site: Site, tmp_path: Path) -> None:
    forged = _forge(export(site, tmp_path / "b.zip"), tmp_path / "forged.zip")
    alone = verify_bundle(forged)
    assert alone.ok, alone.lines()  # internally consistent: this is what anchors are for
    assert alone.lines()[0].startswith(f"{forged}: internal consistency only: ")
    message = first_problem(forged, site.anchors)
    assert message.startswith("anchor not matching: the town holds head "), message
    assert "rewritten after that head was published" in message


def test_a_segment_cut_short_is_noticed_with_the_towns_anchors(site: Site, tmp_path: Path) -> None:
    """A forger could end the chain early, at an earlier anchor, and drop the rows after it."""
    bundle = export(site, tmp_path / "b.zip")
    anchors = json.loads(site.anchors.read_text())
    middle = anchors[1]["seq"]  # published during the window
    with zipfile.ZipFile(bundle) as zf:
        manifest = json.loads(zf.read("manifest.json"))
    manifest["chain"].update(
        last_seq=middle, entries=middle - manifest["chain"]["first_seq"] + 1, last_head=anchors[1]["head"]
    )
    manifest["anchors"] = [a for a in manifest["anchors"] if a["seq"] <= middle]
    early = {
        name: edit_rows(
            lambda rows: rows.__setitem__(slice(1, None), [r for r in rows[1:] if int(r[0]) <= middle])
        )
        for name in ("chain.csv", "data/sound.csv", "data/light.csv", "data/weather.csv")
    }

    def records(data: bytes) -> bytes:
        kept = [line.rstrip(",") for line in data.decode().splitlines()[1:-1]]
        kept = [line for line in kept if json.loads(line)["chain_seq"] <= middle]
        return ("[\n" + ",\n".join(kept) + "\n]\n").encode()

    edits = {
        **early,
        "manifest.json": lambda _: json.dumps(manifest).encode(),
        **{f"records/{k}.json": records for k in ("findings", "alerts", "events", "config")},
    }
    forged = rewrite(bundle, tmp_path / "short.zip", edits)
    assert verify_bundle(forged).ok  # consistent with itself
    message = first_problem(forged, site.anchors)
    assert message.startswith(f"segment cut short: it ends at seq {middle}, before the first anchor"), message
    # A town anchor beyond the honest segment is simply not checkable, not a failure.
    town = tmp_path / "town.json"
    later = {"site": SITE, "seq": anchors[-1]["seq"] + 500, "head": "0" * 64, "ts": "2024-03-10T10:00:00Z"}
    town.write_text(json.dumps([*anchors, later]))
    report = verify_bundle(bundle, load_anchors(town))
    assert report.ok and report.town_anchors_outside == [later["seq"]]


# --------------------------------------------------------------------------- CLI


def test_cli_exit_codes(site: Site, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cli.zip"
    base = [
        "evidence",
        "--config",
        str(site.config_path),
        "--from",
        "2024-03-10T07:58:00Z",
        "--to",
        "2024-03-10T08:02:00Z",
        "--no-plots",
    ]
    assert main([*base, "--site", SITE, "--sensor", "n1", "--out", str(out)]) == 0
    assert "Wrote" in capsys.readouterr().out
    with zipfile.ZipFile(out) as zf:
        sensors = {r[2] for r in csv_rows(zf.read("data/sound.csv"))[1:]}
    assert sensors == {"n1"}
    assert main(["verify", str(out), "--anchors", str(site.anchors)]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith(f"{out}: OK, anchored: ") and "n1" in printed
    tampered = rewrite(out, tmp_path / "t.zip", {"data/sound.csv": edit_rows(lambda rows: rows.pop(3))})
    assert main(["verify", str(tampered)]) == 1
    assert "FAILED: row removed" in capsys.readouterr().out

    assert main([*base, "--site", "nowhere", "--out", str(tmp_path / "x.zip")]) == 2
    assert "unknown site 'nowhere'" in capsys.readouterr().err
    assert main([*base, "--site", SITE, "--sensor", "zz", "--out", str(tmp_path / "x.zip")]) == 2
    assert (
        main(
            [
                *base[:4],
                "2024-03-10T08:02:00Z",
                "--to",
                "2024-03-10T07:58:00Z",
                "--site",
                SITE,
                "--out",
                str(tmp_path / "x.zip"),
            ]
        )
        == 2
    )
    assert (
        main([*base[:4], "yesterday-ish", *base[5:], "--site", SITE, "--out", str(tmp_path / "x.zip")]) == 2
    )
    assert not (tmp_path / "x.zip").exists()
    assert main(["verify", str(tmp_path / "missing.zip")]) == 2
    (tmp_path / "junk.zip").write_bytes(b"not a zip")
    assert main(["verify", str(tmp_path / "junk.zip")]) == 1
    with pytest.raises(SystemExit) as exit_info:
        main(["verify"])
    assert exit_info.value.code == 2


# --------------------------------------------------------------------------- local time


def test_local_time_columns_across_the_dst_change(site: Site, tmp_path: Path) -> None:
    bundle = export(site, tmp_path / "b.zip")
    with zipfile.ZipFile(bundle) as zf:
        rows = csv_rows(zf.read("data/sound.csv"))
    header = rows[0]
    by_utc = {r[header.index("time_utc")]: r[header.index("time_local")] for r in rows[1:]}
    assert by_utc["2024-03-10T07:59:59Z"] == "2024-03-10T01:59:59-06:00"
    assert by_utc["2024-03-10T08:00:00Z"] == "2024-03-10T03:00:00-05:00"
    assert by_utc["2024-03-10T07:58:00Z"] == "2024-03-10T01:58:00-06:00"


@pytest.mark.parametrize("zone", ["America/Chicago", "Europe/Berlin", "Australia/Lord_Howe", "UTC"])
def test_time_format_matches_isoformat(zone: str) -> None:
    fmt = TimeFormat(UTC if zone == "UTC" else ZoneInfo(zone))
    for start in (
        datetime(2024, 3, 10, 7, 50, tzinfo=UTC),
        datetime(2024, 11, 3, 6, 50, tzinfo=UTC),
        datetime(2024, 3, 31, 0, 50, tzinfo=UTC),
        datetime(2024, 4, 6, 14, 50, tzinfo=UTC),
    ):
        for step in range(0, 1500, 7):
            us = to_us(start) + step * 1_000_000 + (step % 3) * 250_000
            assert fmt(us) == fmt.exact(us)
    assert TimeFormat(UTC)(to_us(T0)) == "2024-03-10T07:58:00Z"


# --------------------------------------------------------------------------- pruned windows: InfluxDB


def test_pruned_window_is_read_from_influxdb(tmp_path: Path, influxd: Influxd) -> None:
    influx = f'[storage.influxdb]\nversion = 1\nurl = "{influxd.url}"\ndatabase = "mw"'
    site = build_site(tmp_path, influx=influx)
    cut = T0 + timedelta(seconds=120)
    # What the daemon's forwarder had written for the first two minutes, then the store prunes them.
    writer = InfluxWriter(site.config.storage.influxdb)  # type: ignore[arg-type]
    with sqlite3.connect(site.store) as conn:
        points = [
            line(
                "sound",
                {"site": SITE, "sensor": s},
                {"LAeq": laeq, "LAFmax": laeq + 2.1, "duration_s": 1.0, "late": False},
                datetime.fromtimestamp(ts / 1e6, UTC),
            )
            for s, ts, laeq in conn.execute(
                "SELECT sensor, ts_us, LAeq FROM sound WHERE ts_us < ?", (to_us(cut),)
            )
        ]
    points.append(line("light", {"site": SITE, "sensor": "l1"}, {"lux_mean": 0.5, "duration_s": 10.0}, T0))
    writer.write(points)
    writer.close()
    store = Store(site.store)
    assert store.prune(cut) > 0
    store.close()

    bundle = export(site, tmp_path / "b.zip", plots=True)
    with zipfile.ZipFile(bundle) as zf:
        manifest = json.loads(zf.read("manifest.json"))
        influx_rows = csv_rows(zf.read("data/sound_influxdb.csv"))
        chained = csv_rows(zf.read("data/sound.csv"))
        assert "plots/sound/n1/2024-03-10.png" in zf.namelist()
    pruned = manifest["pruned_locally"]
    assert pruned["read"] is True and pruned["version"] == 1
    assert "outside the hash chain" in pruned["note"]
    assert pruned["rows"] == {
        "data/sound_influxdb.csv": 240,
        "data/light_influxdb.csv": 1,
        "data/weather_influxdb.csv": 0,
    }
    assert manifest["scope"]["chained_from_us"] == to_us(cut)
    assert len(influx_rows) == 1 + 240 and len(chained) == 1 + 240
    header = influx_rows[0]
    first = dict(zip(header, influx_rows[1], strict=True))
    assert first["sensor"] == "n1" and first["time_utc"] == "2024-03-10T07:58:00Z"
    assert float(first["LAeq"]) == 61.0 and first["LAFmax"] == repr(61.0 + 2.1)

    report = verify_bundle(bundle, load_anchors(site.anchors))
    assert report.ok, report.lines()
    text = "\n".join(report.lines())
    assert "outside the chain: 240 rows in data/sound_influxdb.csv were read from InfluxDB" in text
    assert "pruned locally" in report.scope
    assert (
        report.links_only.get("per-second rows outside the window/sensors", 0) >= 240
    )  # pruned: digests only


# --------------------------------------------------------------------------- the real daemon


def test_export_what_the_daemon_stored(tmp_path: Path, mosquitto: Mosquitto) -> None:
    config_path = write_config(tmp_path / "minewatch.toml", mosquitto.url)
    config_path.write_text(config_path.read_text().replace("anchor_interval_s = 30", "anchor_interval_s = 1"))
    daemon = Daemon(config_path).start()
    daemon.wait_ready()
    anchors = Client(mosquitto.port, "town", (f"minewatch/{SITE}/anchors",))
    pub = Client(mosquitto.port, "publisher")
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=3)
    try:
        from monitor.wire import encode

        for s in range(40):
            for sensor in ("n1", "n2"):
                pub.publish(
                    *encode(
                        SoundLevels(
                            SITE, sensor, start + timedelta(seconds=s), 1.0, 70.0 + s / 10, 75.5, 88.0
                        )
                    )
                )
        store = tmp_path / "store.db"
        assert wait_until(lambda: _count(store, "SELECT COUNT(*) FROM sound") == 80, 30), daemon.logs()
        stored = _count(store, "SELECT MAX(seq) FROM chain")
        # the town has received a head covering everything stored so far
        assert wait_until(lambda: any(a["seq"] >= stored for a in anchors.received("/anchors")), 30), (
            daemon.logs()
        )
    finally:
        code = daemon.stop()
        pub.close()
        anchors.close()
    assert code == 0
    town = tmp_path / "town.json"
    town.write_text(json.dumps(anchors.received("/anchors")))
    config = load_config(config_path)
    bundle = tmp_path / "daemon.zip"
    summary = export_bundle(config, SITE, start, start + timedelta(seconds=40), bundle, plots=False)
    assert summary.rows["data/sound.csv"] == 80
    report = verify_bundle(bundle, load_anchors(town))
    assert report.ok, report.lines()


def _count(store: Path, sql: str) -> int:
    if not store.exists():
        return 0
    with sqlite3.connect(store) as conn:
        try:
            return int(conn.execute(sql).fetchone()[0])
        except sqlite3.OperationalError:
            return 0


# The store layout before version 2 (sound keyed by sensor first, no chain_seq, a key index
# over every chain entry), as the earlier daemon created it.
_LAYOUT_1 = """
CREATE TABLE sound_v1 (
    site TEXT NOT NULL, sensor TEXT NOT NULL, ts_us INTEGER NOT NULL, duration_s REAL NOT NULL,
    LAeq REAL NOT NULL, LAFmax REAL NOT NULL, LASmax REAL, LAFmin REAL, LCeq REAL,
    LCpeak REAL NOT NULL, LZpeak REAL, LZeq REAL,
    source TEXT NOT NULL, late INTEGER NOT NULL, received_us INTEGER NOT NULL,
    PRIMARY KEY (site, sensor, ts_us)
) WITHOUT ROWID;
INSERT INTO sound_v1 SELECT site, sensor, ts_us, duration_s, LAeq, LAFmax, LASmax, LAFmin, LCeq,
    LCpeak, LZpeak, LZeq, source, late, received_us FROM sound;
DROP TABLE sound;
ALTER TABLE sound_v1 RENAME TO sound;
CREATE INDEX sound_time ON sound (site, ts_us);
DROP INDEX chain_lookup;
CREATE INDEX chain_key ON chain (site, kind, key);
PRAGMA user_version = 0;
"""


def test_a_store_of_the_earlier_layout_is_migrated_and_exports_the_same_bundle(
    site: Site, tmp_path: Path
) -> None:
    before = export(site, tmp_path / "before.zip")
    with sqlite3.connect(site.store) as conn:
        conn.executescript(_LAYOUT_1)
    # Evidence reads the store read-only, so it says what to do instead of failing on a column.
    with pytest.raises(EvidenceError, match=r"layout version 0, this minewatch reads 2.*minewatch status"):
        export(site, tmp_path / "refused.zip")

    Store(site.store).close()  # what the daemon and `minewatch status` do on start

    with sqlite3.connect(site.store) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 2
        unlinked = conn.execute(
            "SELECT COUNT(*) FROM sound t LEFT JOIN chain c ON c.site = t.site AND c.seq = t.chain_seq"
            " AND c.key = t.sensor || '|' || t.ts_us WHERE c.seq IS NULL"
        ).fetchone()[0]
        indexes = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert unlinked == 0
    assert "chain_lookup" in indexes and not {"chain_key", "sound_time"} & indexes
    after = export(site, tmp_path / "after.zip")
    with zipfile.ZipFile(before) as old, zipfile.ZipFile(after) as new:
        for name in ("data/sound.csv", "chain.csv", "records/findings.json", "records/events.json"):
            assert old.read(name) == new.read(name), name
    report = verify_bundle(after, load_anchors(site.anchors))
    assert report.ok, report.lines()
