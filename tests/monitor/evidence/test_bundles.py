"""Evidence bundles: export from a real store, verify, and catch every kind of tampering."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
import zipfile
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from monitor.cli import main
from monitor.config import load_config
from monitor.evidence import (
    EvidenceError,
    TimeFormat,
    export_bundle,
    load_anchors,
    verify_bundle,
)
from monitor.evidence.format import sound_digest_cells
from monitor.influx.client import InfluxWriter, line
from monitor.journal.config_record import config_record_texts
from monitor.journal.store import Store, digest_of, next_head, sound_record, to_us
from rules.model import (
    LightSummary,
    SoundLevels,
)
from tests.support.cli import run_minewatch
from tests.support.daemon import Client, Daemon, wait_until, write_config
from tests.support.evidence import (
    SITE,
    T0,
    WINDOW,
    Site,
    _finding,
    build_site,
    csv_bytes,
    csv_rows,
    edit_rows,
    export,
    first_problem,
    restate,
    rewrite,
)
from tests.support.paths import DATA
from tests.support.servers import Influxd, Mosquitto

# --------------------------------------------------------------------------- export and verify


def test_export_then_verify(site: Site, tmp_path: Path) -> None:
    bundle = export(site, tmp_path / "b.zip", plots=True)
    with zipfile.ZipFile(bundle) as zf:
        names = set(zf.namelist())
        manifest = json.loads(zf.read("manifest.json"))
        sound = csv_rows(zf.read("data/sound/part-00001.csv"))
        findings = [
            json.loads(line.rstrip(","))
            for line in zf.read("records/findings.json").decode().splitlines()
            if line not in ("[", "]")
        ]
        for entry in manifest["files"]:
            assert hashlib.sha256(zf.read(entry["name"])).hexdigest() == entry["sha256"]
    assert {
        "data/sound/part-00001.csv",
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
    # The plots are hashed like every file, and the report says that is all that is checked of them.
    assert report.plots == len([name for name in names if name.startswith("plots/")]) == 3
    assert (
        "  plots: 3 drawings of the rows, checked against the manifest's SHA-256 only; nothing"
        " compares their pixels with the rows, so read the values from data/"
    ) in report.lines()
    unplotted = verify_bundle(export(site, tmp_path / "unplotted.zip", plots=False))
    assert unplotted.ok and not any(line.startswith("  plots:") for line in unplotted.lines())

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
    plain = rewrite(
        bundle, tmp_path / "plain.zip", {"data/sound/part-00001.csv": edit_rows(louder)}, rehash=False
    )
    assert (
        first_problem(plain)
        == "file changed: data/sound/part-00001.csv does not match its SHA-256 in the manifest"
    )
    messages = [p.message for p in verify_bundle(plain).problems]
    assert any(m.startswith("row altered: data/sound/part-00001.csv line 8 ") for m in messages), messages
    # With the manifest's hashes recomputed, the rebuilt digest still differs from the chain's.
    forged = rewrite(bundle, tmp_path / "forged.zip", {"data/sound/part-00001.csv": edit_rows(louder)})
    assert first_problem(forged).startswith("row altered: data/sound/part-00001.csv line 8 (sensor ")


def test_a_removed_row_is_named(site: Site, tmp_path: Path) -> None:
    bundle = export(site, tmp_path / "b.zip")
    removed: list[str] = []

    def drop(rows: list[list[str]]) -> None:
        removed.extend(rows.pop(100))

    forged = rewrite(bundle, tmp_path / "forged.zip", {"data/sound/part-00001.csv": edit_rows(drop)})
    message = first_problem(forged)
    # chain.csv keeps no key for a sound entry whose row is in the bundle: the seq names it
    assert message.startswith(f"row removed: chain seq {removed[0]} (a sound entry)"), message
    assert "data/sound/" in message


def test_reordered_rows_are_named(site: Site, tmp_path: Path) -> None:
    bundle = export(site, tmp_path / "b.zip")

    def swap(rows: list[list[str]]) -> None:
        rows[10], rows[11] = rows[11], rows[10]

    forged = rewrite(bundle, tmp_path / "forged.zip", {"data/sound/part-00001.csv": edit_rows(swap)})
    report = verify_bundle(forged)
    assert first_problem(forged).startswith("rows reordered: data/sound/part-00001.csv line 12"), (
        report.lines()
    )
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
    assert message.startswith("row altered: data/sound/part-00001.csv line "), message
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


def _forge(bundle: Path, dst: Path, *, end: int | None = None, created: str | None = None) -> Path:
    """Alter one level and recompute everything a forger can: digest, chain heads, anchors, file hashes.

    ``end``: also cut the segment after that seq (its rows and records dropped);
    ``created``: also state that creation time in the manifest.
    """
    with zipfile.ZipFile(bundle) as zf:
        members = {name: zf.read(name) for name in zf.namelist()}
    manifest = json.loads(members["manifest.json"])
    sound = csv_rows(members["data/sound/part-00001.csv"])
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
    last = end if end is not None else manifest["chain"]["last_seq"]
    chain = [csv_rows(members["chain.csv"])[0]] + [
        entry for entry in csv_rows(members["chain.csv"])[1:] if int(entry[0]) <= last
    ]
    # Format 3: a sound entry with its row here keeps a tag of its digest; the row gives the rest.
    digests = {int(r[0]): sound_digest_cells(r) for r in sound[1:]}
    digests[int(row[0])] = digest_of(record)
    head = manifest["chain"]["prev_head"]
    heads: dict[int, str] = {}
    for entry in chain[1:]:
        seq = int(entry[0])
        if entry[2] == "" and entry[1] == "sound":
            entry[3] = digests[seq][:8]
            head = next_head(head, digests[seq])
        else:
            head = next_head(head, entry[3])
        heads[seq] = head
    # the segment ends where it was cut: at an anchor only if one was published there
    extended = last if any(anchor["seq"] == last for anchor in manifest["anchors"]) else None
    manifest["chain"].update(
        last_seq=last, entries=len(chain) - 1, last_head=head, extended_to_anchor=extended
    )
    manifest["anchors"] = [
        {**anchor, "head": heads.get(anchor["seq"], anchor["head"])}
        for anchor in manifest["anchors"]
        if anchor["seq"] <= last
    ]
    own = json.loads(members["anchors.json"])
    for anchor in own:
        anchor["head"] = heads.get(anchor["seq"], anchor["head"])
    if created is not None:
        manifest["created_utc"] = created

    def rows_until(data: bytes) -> bytes:
        rows = csv_rows(data)
        return csv_bytes(rows[:1] + [r for r in rows[1:] if int(r[0]) <= last])

    def records_until(data: bytes) -> bytes:
        kept = [line.rstrip(",") for line in data.decode().splitlines()[1:-1]]
        kept = [line for line in kept if json.loads(line)["chain_seq"] <= last]
        return ("[\n" + ",\n".join(kept) + "\n]\n").encode() if kept else b"[\n]\n"

    members.update(
        {
            "data/sound/part-00001.csv": rows_until(csv_bytes(sound)),
            "chain.csv": csv_bytes(chain),
            "anchors.json": json.dumps(own).encode(),
        }
    )
    for name in members:
        if name.startswith("data/") and name != "data/sound/part-00001.csv":
            members[name] = rows_until(members[name])
        elif name.startswith("records/"):
            members[name] = records_until(members[name])
    restate(manifest, members)
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
        last_seq=middle,
        entries=middle - manifest["chain"]["first_seq"] + 1,
        last_head=anchors[1]["head"],
        extended_to_anchor=middle,  # it ends at that anchor
    )
    manifest["anchors"] = [a for a in manifest["anchors"] if a["seq"] <= middle]
    early = {
        name: edit_rows(
            lambda rows: rows.__setitem__(slice(1, None), [r for r in rows[1:] if int(r[0]) <= middle])
        )
        for name in ("chain.csv", "data/sound/part-00001.csv", "data/light.csv", "data/weather.csv")
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


# --------------------------------------------------------------------------- what the anchors prove


def _town(tmp_path: Path, anchors: list[dict[str, object]], name: str = "held.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(anchors))
    return path


def test_a_tail_after_the_last_town_anchor_is_not_called_anchored(tmp_path: Path) -> None:
    """Exported before the next anchor: rows after the last head the town holds are proven by nothing."""
    site = build_site(tmp_path, final_anchor=False)
    anchors = json.loads(site.anchors.read_text())
    middle = anchors[-1]["seq"]  # published during the window
    bundle = export(site, tmp_path / "b.zip")
    report = verify_bundle(bundle, load_anchors(site.anchors))
    assert report.ok, report.lines()
    assert not report.anchored and report.anchored_to == middle and report.last_seq > middle
    first = report.lines()[0]
    assert first.startswith(f"{bundle}: OK up to seq {middle}, anchored by the head the town holds there;")
    assert f"rows after seq {middle} are not yet anchored (seq {middle + 1} to {report.last_seq}," in first
    assert report.unanchored_rows == report.last_seq - middle  # every entry after it has its row here
    assert "no head the town holds lies beyond" in report.lines()[1]

    # The same bundle with the last rows of the window dropped is no more than that.
    cut = report.last_seq - 30

    def until(data: bytes) -> bytes:
        rows = csv_rows(data)
        return csv_bytes(rows[:1] + [r for r in rows[1:] if int(r[0]) <= cut])

    def records_until(data: bytes) -> bytes:
        kept = [line.rstrip(",") for line in data.decode().splitlines()[1:-1]]
        return (
            "[\n" + ",\n".join(line for line in kept if json.loads(line)["chain_seq"] <= cut) + "\n]\n"
        ).encode()

    with zipfile.ZipFile(bundle) as zf:
        manifest = json.loads(zf.read("manifest.json"))
        pass
    with sqlite3.connect(site.store) as conn:  # format 3's chain.csv holds no heads: the store's
        heads = dict(conn.execute("SELECT seq, head FROM chain WHERE site = ?", (SITE,)).fetchall())
    conn.close()
    manifest["chain"].update(last_seq=cut, last_head=heads[cut], extended_to_anchor=None)  # at no anchor
    short = rewrite(
        bundle,
        tmp_path / "short.zip",
        {
            "manifest.json": lambda _: json.dumps(manifest).encode(),
            **{
                name: until
                for name in ("chain.csv", "data/sound/part-00001.csv", "data/light.csv", "data/weather.csv")
            },
        },
    )
    report = verify_bundle(short, load_anchors(site.anchors))
    assert report.ok, report.lines()
    assert not report.anchored
    assert f"rows after seq {middle} are not yet anchored" in report.lines()[0]
    assert "anchored:" not in report.lines()[0]

    # Cut right at the town's head of the middle of the window: that head proves the rows up to
    # it, but it was received before the window ended, so nothing shows the rest of the window.
    manifest["chain"].update(last_seq=middle, last_head=heads[middle], extended_to_anchor=middle)
    manifest["anchors"] = [a for a in manifest["anchors"] if a["seq"] <= middle]
    cut = middle
    at_anchor = rewrite(
        bundle,
        tmp_path / "at-anchor.zip",
        {
            "manifest.json": lambda _: json.dumps(manifest).encode(),
            **{
                name: until
                for name in ("chain.csv", "data/sound/part-00001.csv", "data/light.csv", "data/weather.csv")
            },
            **{f"records/{k}.json": records_until for k in ("findings", "alerts", "events", "config")},
        },
    )
    report = verify_bundle(at_anchor, load_anchors(site.anchors))
    assert report.ok, report.lines()
    assert not report.anchored
    assert report.lines()[0].startswith(
        f"{at_anchor}: OK up to seq {middle}, anchored by the head the town received at"
    )
    assert "before the window ended: records of the window chained after" in report.lines()[0]


def test_a_forged_segment_ending_before_the_next_town_anchor_is_not_anchored(
    site: Site, tmp_path: Path
) -> None:
    """A level forged after the town's first head, and the segment cut just before its next one."""
    anchors = json.loads(site.anchors.read_text())
    held = _town(tmp_path, anchors[:2])  # what the town held before the anchor after the window
    bundle = export(site, tmp_path / "b.zip")
    forged = _forge(bundle, tmp_path / "forged.zip", end=anchors[1]["seq"] - 1)
    # The town received its head at seq anchors[1] before the bundle says it was made, and an
    # export made then reaches it: the segment was cut short.
    message = first_problem(forged, held)
    assert message.startswith(
        f"segment cut short: it ends at seq {anchors[1]['seq'] - 1}, which is no anchor"
    ), message
    # With a creation time forged to before that head, it cannot be called cut short, but
    # nothing in it is anchored, and the report says so first.
    early = _forge(bundle, tmp_path / "early.zip", end=anchors[1]["seq"] - 1, created="2024-03-10T07:59:00Z")
    report = verify_bundle(early, load_anchors(held))
    assert report.ok, report.lines()
    assert not report.anchored and report.anchored_to is None
    assert report.town_anchors_matched == [anchors[0]["seq"]]  # the head before the segment only
    first_seq = anchors[0]["seq"] + 1
    assert report.lines()[0] == (
        f"{early}: NOT ANCHORED: the town holds no head at or after any entry of the segment"
        f" (seq {first_seq} to {anchors[1]['seq'] - 1}); rows after seq {anchors[0]['seq']} are not yet"
        " anchored: internal consistency only"
    )
    assert f"the town holds a later head (seq {anchors[1]['seq']})" in report.lines()[1]
    assert any("before its window ended" in note for note in report.notes)


# --------------------------------------------------------------------------- what the manifest may say


def repack(src: Path, dst: Path, change: Callable[[dict[str, bytes]], object]) -> Path:
    """Copy a bundle with its members changed, and list every member in the manifest with its hash."""
    with zipfile.ZipFile(src) as zin:
        members = {name: zin.read(name) for name in zin.namelist()}
    change(members)
    manifest = json.loads(members["manifest.json"])
    manifest["files"] = [
        {"name": name, "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
        for name, data in members.items()
        if name != "manifest.json"
    ]
    members["manifest.json"] = json.dumps(manifest).encode()
    with zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zout:
        for name, data in members.items():
            zout.writestr(name, data)
    return dst


def test_files_added_or_removed_with_the_manifest_are_refused(site: Site, tmp_path: Path) -> None:
    bundle = export(site, tmp_path / "b.zip", plots=True)

    def add(name: str, data: bytes) -> Callable[[dict[str, bytes]], None]:
        return lambda members: members.__setitem__(name, data)

    added = repack(bundle, tmp_path / "added.zip", add("statement.txt", b"the mine was quiet all day\n"))
    assert (
        first_problem(added)
        == "file not part of the bundle: statement.txt (not a file of the evidence format)"
    )
    with zipfile.ZipFile(bundle) as zf:
        plot = zf.read("plots/sound/n1/2024-03-10.png")
    # a plot for a day the bundle has no rows of
    other_day = repack(bundle, tmp_path / "plot.zip", add("plots/sound/n1/2024-03-11.png", plot))
    assert first_problem(other_day) == (
        "file not part of the bundle: plots/sound/n1/2024-03-11.png"
        " (a plot of a sensor and day with no rows in the bundle)"
    )
    # an InfluxDB file in a window the store had not pruned
    influx = repack(bundle, tmp_path / "influx.zip", add("data/sound_influxdb.csv", b"site,sensor\n"))
    assert first_problem(influx).startswith("file not part of the bundle: data/sound_influxdb.csv")
    removed = repack(bundle, tmp_path / "removed.zip", lambda members: members.pop("data/turbidity.csv"))
    assert first_problem(removed) == "file missing: data/turbidity.csv is part of every evidence bundle"
    readme = repack(
        bundle,
        tmp_path / "readme.zip",
        lambda members: members.__setitem__(
            "README.txt", members["README.txt"] + b"Certified by the town.\n"
        ),
    )
    assert (
        first_problem(readme) == "file changed: README.txt is not the text every bundle of its format holds"
    )
    # The plots that belong are accepted.
    assert verify_bundle(bundle).ok


def test_an_edited_profile_or_configuration_fails(site: Site, tmp_path: Path) -> None:
    bundle = export(site, tmp_path / "b.zip")
    with zipfile.ZipFile(bundle) as zf:
        profile = zf.read("profile/dovre.toml")
        config = zf.read("config.toml")
        records = [
            json.loads(line.rstrip(","))
            for line in zf.read("records/config.json").decode().splitlines()
            if line not in ("[", "]")
        ]
    assert b"limit_db = 80.0" in profile
    # The chain's config record names these very files.
    assert records[0]["row"]["profile"] == "dovre"
    assert records[0]["row"]["profile_sha256"] == hashlib.sha256(profile).hexdigest()
    assert records[0]["row"]["config_sha256"] == hashlib.sha256(config).hexdigest()
    report = verify_bundle(bundle, load_anchors(site.anchors))
    assert report.ok, report.lines()
    assert report.config.startswith(
        f"profile dovre {hashlib.sha256(profile).hexdigest()[:12]} and configuration"
    )
    assert report.config.endswith(" (anchored)")

    louder = rewrite(
        bundle,
        tmp_path / "profile.zip",
        {"profile/dovre.toml": lambda b: b.replace(b"limit_db = 80.0", b"limit_db = 90.0", 1)},
    )
    message = first_problem(louder, site.anchors)
    assert message.startswith(
        f"profile changed: profile/dovre.toml is not the profile chained at seq {records[0]['chain_seq']}"
    ), message
    edited = rewrite(bundle, tmp_path / "config.zip", {"config.toml": lambda b: b.replace(b"n2", b"n9")})
    assert first_problem(edited).startswith("configuration changed: config.toml is not the configuration")
    # Dropping the config record's row as well leaves its chain entry without a row.
    dropped = rewrite(
        bundle,
        tmp_path / "dropped.zip",
        {
            "profile/dovre.toml": lambda b: b.replace(b"limit_db = 80.0", b"limit_db = 90.0", 1),
            "records/config.json": lambda data: b"[\n]\n",
        },
    )
    assert first_problem(dropped).startswith(f"row removed: chain seq {records[0]['chain_seq']} ")


def test_secrets_stay_out_of_the_bundle_and_its_digest(tmp_path: Path) -> None:
    site = build_site(tmp_path, password="hunter2")
    assert site.config.broker.password.value == "hunter2"
    bundle = export(site, tmp_path / "b.zip")
    with zipfile.ZipFile(bundle) as zf:
        assert not any(b"hunter2" in zf.read(name) for name in zf.namelist())
        config = zf.read("config.toml")
    assert b"password" not in config and b"[broker]" not in config  # the site's allow-list only
    with sqlite3.connect(site.store) as conn:
        kept = [value for (value,) in conn.execute("SELECT value FROM meta")]
        keys = [key for (key,) in conn.execute("SELECT key FROM chain WHERE kind = 'config'")]
    assert kept and not any("hunter2" in value for value in kept)
    # The chained digest is that of the text without the secret, so the bundle's file matches it.
    assert all(key.startswith(hashlib.sha256(config).hexdigest() + "|") for key in keys)
    report = verify_bundle(bundle, load_anchors(site.anchors))
    assert report.anchored, report.lines()


def test_the_daemon_start_chains_the_profile_and_notices_name_its_version(site: Site, tmp_path: Path) -> None:
    from monitor.daemon.clock import Clock
    from monitor.daemon.pipeline import Pipeline
    from rules.profile import load_profile

    store = Store(site.config.storage.path)
    try:
        pipeline = Pipeline(site.config, store, lambda topic, payload, retain: None, Clock("wall"))
        site_config = site.config.site(SITE)
        assert site_config is not None
        _, profile_text, config_text = config_record_texts(site.config, site_config)
        profile_sha = hashlib.sha256(profile_text.encode()).hexdigest()
        kind, key = store.conn.execute(
            "SELECT kind, key FROM chain WHERE site = ? ORDER BY seq DESC LIMIT 1", (SITE,)
        ).fetchone()
        assert kind == "config"
        assert key.startswith(f"{hashlib.sha256(config_text.encode()).hexdigest()}|{profile_sha}|")
        assert key.endswith("|dovre")
        t = T0 + timedelta(hours=1)
        findings = [_finding(t + timedelta(minutes=i), "82.5 dB(A) at n2") for i in range(2)]
        with store.batch():
            for finding in findings:
                store.append_finding(finding, t + timedelta(minutes=3))
            pipeline.notices.on_findings(
                site_config, load_profile("dovre"), findings, t + timedelta(minutes=3)
            )
        data = json.loads(store.conn.execute("SELECT data FROM notices").fetchone()[0])
    finally:
        store.close()
    assert data["profile_version"] == profile_sha[:12]


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
        sensors = {r[2] for r in csv_rows(zf.read("data/sound/part-00001.csv"))[1:]}
    assert sensors == {"n1"}
    assert main(["verify", str(out), "--anchors", str(site.anchors)]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith(f"{out}: OK, anchored: ") and "n1" in printed
    tampered = rewrite(
        out, tmp_path / "t.zip", {"data/sound/part-00001.csv": edit_rows(lambda rows: rows.pop(3))}
    )
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
    assert len(capsys.readouterr().out.splitlines()) == 1
    with pytest.raises(SystemExit) as exit_info:
        main(["verify"])
    assert exit_info.value.code == 2


def test_a_bundle_unzipped_and_zipped_again_still_verifies(site: Site, tmp_path: Path) -> None:
    import shutil

    bundle = export(site, tmp_path / "b.zip", plots=True)
    folder = tmp_path / "unpacked"
    folder.mkdir()
    with zipfile.ZipFile(bundle) as zf:
        zf.extractall(folder)
    # Like `zip -r`, shutil stores each folder as an entry of its own (data/, records/, ...).
    again = Path(shutil.make_archive(str(tmp_path / "again"), "zip", folder))
    with zipfile.ZipFile(again) as zf:
        assert "data/" in zf.namelist() and "plots/sound/n1/" in zf.namelist()
    report = verify_bundle(again, load_anchors(site.anchors))
    assert report.ok and report.anchored, report.lines()
    # A file added on the way is still refused.
    (folder / "data" / "extra.csv").write_text("x\n")
    extra = Path(shutil.make_archive(str(tmp_path / "extra"), "zip", folder))
    assert first_problem(extra) == "file not in the manifest: data/extra.csv"


def test_a_window_with_no_records_is_said_to_be_empty(
    site: Site, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The daemon's hourly prune moves the cut-off on whether or not anything was there to remove.
    store = Store(site.store)
    store.prune(T0 - timedelta(hours=1))
    store.close()
    day_before = (T0 - timedelta(days=1), T0 - timedelta(days=1) + timedelta(hours=2))
    summary = export_bundle(site.config, SITE, *day_before, tmp_path / "empty.zip", plots=False)
    assert not any("pruned" in w for w in summary.warnings), summary.warnings
    assert any(w.startswith("no records of site quarry in the window ") for w in summary.warnings)
    report = verify_bundle(tmp_path / "empty.zip", load_anchors(site.anchors))
    assert report.ok and report.empty and not report.anchored
    assert report.lines()[0].startswith(f"{tmp_path / 'empty.zip'}: EMPTY: the bundle holds no records")
    args = ["evidence", "--config", str(site.config_path), "--site", SITE, "--no-plots"]
    window = ["--from", "2024-03-09T07:58:00Z", "--to", "2024-03-09T09:58:00Z"]
    assert main([*args, *window, "--out", str(tmp_path / "cli.zip")]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"Wrote {tmp_path / 'cli.zip'}: EMPTY, no records of site quarry in that window")
    assert "pruned" not in out
    assert main(["verify", str(tmp_path / "cli.zip")]) == 0
    assert "EMPTY" in capsys.readouterr().out.splitlines()[0]


def test_evidence_out_mistakes_are_one_line_and_nothing_is_overwritten(
    site: Site, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["evidence", "--config", str(site.config_path), "--site", SITE, "--no-plots"]
    args += ["--from", "2024-03-10T07:58:00Z", "--to", "2024-03-10T08:02:00Z"]
    assert main([*args, "--out", "/nonexistent/dir/x.zip"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "folder /nonexistent/dir does not exist" in err
    assert "Traceback" not in err
    assert main([*args, "--out", str(tmp_path)]) == 2
    assert "is a folder; give a file name inside it" in capsys.readouterr().err
    mine = tmp_path / "mine.zip"
    mine.write_bytes(b"someone else's file")
    assert main([*args, "--out", str(mine)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "exists" in err and "--force" in err
    assert mine.read_bytes() == b"someone else's file"
    assert main([*args, "--out", str(mine), "--force"]) == 0
    capsys.readouterr()
    assert verify_bundle(mine).ok
    # The library call refuses too when asked not to overwrite.
    with pytest.raises(EvidenceError, match="exists"):
        export_bundle(site.config, SITE, *WINDOW, mine, plots=False, overwrite=False)


def test_verify_of_something_not_a_bundle_prints_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    junk = tmp_path / "junk.zip"
    junk.write_bytes(b"not a zip")
    assert main(["verify", str(junk)]) == 1
    out = capsys.readouterr().out
    assert out.splitlines() == [
        f"{junk}: FAILED: not a zip file, so not an evidence bundle from `minewatch evidence`"
    ]
    other = tmp_path / "other.zip"
    with zipfile.ZipFile(other, "w") as zf:
        zf.writestr("hello.txt", "hi")
    assert main(["verify", str(other)]) == 1
    out = capsys.readouterr().out
    assert len(out.splitlines()) == 1 and "FAILED: not an evidence bundle" in out


# --------------------------------------------------------------------------- earlier formats

FORMAT_1_BUNDLE = DATA / "evidence" / "format1.zip"
FORMAT_1_ANCHORS = FORMAT_1_BUNDLE.with_name("format1-town-anchors.json")


def test_a_format_1_bundle_still_verifies_and_says_what_it_proves(tmp_path: Path) -> None:
    report = verify_bundle(FORMAT_1_BUNDLE, load_anchors(FORMAT_1_ANCHORS))
    assert report.ok and report.anchored, report.lines()
    assert report.format == "minewatch-evidence/1"
    text = "\n".join(report.lines())
    assert report.lines()[0].startswith(f"{FORMAT_1_BUNDLE}: OK, anchored: ")
    assert "format: minewatch-evidence/1 (earlier)" in text
    assert "its profile and configuration files are bound by nothing but the manifest" in text
    # Its rows are still protected ...
    forged = rewrite(
        FORMAT_1_BUNDLE,
        tmp_path / "forged.zip",
        {"data/sound.csv": edit_rows(lambda rows: rows[7].__setitem__(7, repr(float(rows[7][7]) - 3.0)))},
    )
    assert first_problem(forged).startswith("row altered: data/sound.csv line 8 (sensor ")
    # ... and its file set, but not its profile: format 1 did not chain it, and the report said so.
    added = repack(FORMAT_1_BUNDLE, tmp_path / "added.zip", lambda m: m.__setitem__("note.txt", b"x"))
    assert first_problem(added).startswith("file not part of the bundle: note.txt")
    louder = rewrite(
        FORMAT_1_BUNDLE,
        tmp_path / "louder.zip",
        {"profile/dovre.toml": lambda b: b.replace(b"limit_db = 80.0", b"limit_db = 90.0", 1)},
    )
    assert verify_bundle(louder, load_anchors(FORMAT_1_ANCHORS)).ok


# --------------------------------------------------------------------------- local time


def test_local_time_columns_across_the_dst_change(site: Site, tmp_path: Path) -> None:
    bundle = export(site, tmp_path / "b.zip")
    with zipfile.ZipFile(bundle) as zf:
        rows = csv_rows(zf.read("data/sound/part-00001.csv"))
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
        chained = csv_rows(zf.read("data/sound/part-00001.csv"))
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


def test_a_pruned_window_from_an_influxdb_answering_a_byte_at_a_time_stops_in_one_line(
    tmp_path: Path, dripping: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The pruned part is read from an InfluxDB that answers a byte every 0.2 s (the stand-in
    ``dripping``: no real one can be made to). Each read took the 12 s its answer dripped in,
    though timeout_s is 1, and the export went on with no rows; it stops at the first read, in
    about timeout_s, with one line naming the series and the server, and leaves no bundle."""
    influx = f'[storage.influxdb]\nversion = 1\nurl = "{dripping}"\ndatabase = "mw"\ntimeout_s = 1'
    site = build_site(tmp_path, influx=influx)
    store = Store(site.store)
    assert store.prune(T0 + timedelta(seconds=120)) > 0
    store.close()
    out = tmp_path / "b.zip"
    window = ["--from", "2024-03-10T07:58:00Z", "--to", "2024-03-10T08:02:00Z"]
    began = time.monotonic()
    code = main(
        [
            "evidence",
            "--config",
            str(site.config_path),
            "--site",
            SITE,
            *window,
            "--no-plots",
            "--out",
            str(out),
        ]
    )
    took = time.monotonic() - began
    err = capsys.readouterr().err
    assert code == 1 and took < 5, (code, took, err)
    assert err.splitlines() == [
        f"minewatch evidence: cannot read sound of 'n1' from InfluxDB at {dripping}:"
        " InfluxDB unreachable: TimeoutError: no whole answer within 1 s"
    ]
    assert not out.exists()


def test_export_what_the_daemon_stored(tmp_path: Path, mosquitto: Mosquitto) -> None:
    config_path = write_config(tmp_path / "minewatch.toml", mosquitto.url)
    config_path.write_text(config_path.read_text().replace("anchor_interval_s = 30", "anchor_interval_s = 1"))
    daemon = Daemon(config_path).start()
    daemon.wait_ready()
    anchors = Client(mosquitto.port, "town", (f"minewatch/{SITE}/anchors",))
    pub = Client(mosquitto.port, "publisher")
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=3)
    try:
        from monitor.wire.codec import encode

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
    assert summary.rows["data/sound/part-00001.csv"] == 80
    report = verify_bundle(bundle, load_anchors(town))
    assert report.ok, report.lines()
    # The daemon chained its profile and configuration at start-up and again after each anchor,
    # so the segment (which starts just after an anchor) holds the record the files are checked by.
    assert report.config.startswith("profile dovre "), report.lines()
    assert _count(store, "SELECT COUNT(*) FROM chain WHERE kind = 'config'") >= 2


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
    with pytest.raises(EvidenceError, match=r"is an older minewatch's: open it once with `minewatch status"):
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
        for name in (
            "data/sound/part-00001.csv",
            "chain.csv",
            "records/findings.json",
            "records/events.json",
        ):
            assert old.read(name) == new.read(name), name
    report = verify_bundle(after, load_anchors(site.anchors))
    assert report.ok, report.lines()


def test_a_window_recorded_before_config_records_verifies_and_says_it_binds_no_profile(
    tmp_path: Path,
) -> None:
    """An upgraded store's older windows hold no config record: their evidence stays verifiable
    (rows, chain, anchors) and the report says the profile and configuration are not bound."""
    site = build_site(tmp_path, chain_config=False)
    bundle = export(site, tmp_path / "b.zip")
    report = verify_bundle(bundle, load_anchors(site.anchors))
    assert report.ok and report.anchored, report.lines()
    assert report.config.startswith("not bound: the segment holds no configuration record"), report.config


def test_portal_actions_travel_with_the_bundle_and_cannot_be_dropped(tmp_path: Path) -> None:
    """A segment that chains portal actions carries records/portal_actions.json; dropping the file
    and its manifest entry leaves their chain entries without rows, which verify refuses."""
    site = build_site(tmp_path, final_anchor=False)
    store = Store(site.store)
    with store.batch():
        store.append_portal_action(
            SITE,
            "clerk",
            "town",
            "bundle_downloaded",
            SITE,
            "127.0.0.1",
            {"window": "x"},
            T0 + timedelta(minutes=2),
        )
    store.close()
    bundle = export(site, tmp_path / "b.zip")
    with zipfile.ZipFile(bundle) as zf:
        assert "records/portal_actions.json" in zf.namelist()
        members = {n: zf.read(n) for n in zf.namelist() if n != "records/portal_actions.json"}
    assert verify_bundle(bundle).ok
    manifest = json.loads(members["manifest.json"])
    manifest["files"] = [f for f in manifest["files"] if f["name"] != "records/portal_actions.json"]
    members["manifest.json"] = json.dumps(manifest).encode()
    dropped = tmp_path / "dropped.zip"
    with zipfile.ZipFile(dropped, "w", zipfile.ZIP_DEFLATED) as zout:
        for name, data in members.items():
            zout.writestr(name, data)
    assert "portal_action" in first_problem(dropped), first_problem(dropped)


def test_a_forged_label_cannot_rewrite_verifys_lines_on_the_terminal(site: Site, tmp_path: Path) -> None:
    """A forger writes the bundle's text: a sensor cell with terminal escapes (cursor up, erase
    the line), a carriage return, a line break and a right-to-left override would, printed as
    is, rub out the FAILED verdict and write an OK line of the forger's own. Verify prints each
    such character as its escape; every line it prints is one of its own."""
    bundle = export(site, tmp_path / "b.zip")
    fake = f"\x1b[1A\x1b[2K\r{bundle}: OK, anchored\n{bundle}: OK\u202e"

    def relabelled(rows: list[list[str]]) -> None:
        rows[7][2] = rows[7][2] + fake

    forged = rewrite(bundle, tmp_path / "forged.zip", {"data/sound/part-00001.csv": edit_rows(relabelled)})
    done = run_minewatch("verify", forged)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith(f"{forged}: FAILED: row altered: data/sound/part-00001.csv line 8 ")
    assert all(line.startswith((f"{forged}: FAILED: ", "  ")) for line in lines), lines
    assert not any(c in done.stdout for c in "\x1b\r\u202e")
    assert "\\x1b[1A\\x1b[2K\\r" in lines[0] and "\\n" in lines[0] and "\\u202e" in lines[0]


def test_half_a_surrogate_pair_in_a_bundles_json_is_named_not_a_traceback(site: Site, tmp_path: Path) -> None:
    """JSON may escape half a UTF-16 pair ("\\ud800"), which json reads and no output can print:
    verify ended in a UnicodeEncodeError traceback printing such a site id. It names the place."""
    bundle = export(site, tmp_path / "b.zip")

    def site_id(members: dict[str, bytes]) -> None:
        manifest = json.loads(members["manifest.json"])
        manifest["site"]["id"] += "\ud800"
        members["manifest.json"] = json.dumps(manifest).encode()

    def event_row(members: dict[str, bytes]) -> None:
        text = members["records/findings.json"].decode()
        members["records/findings.json"] = text.replace('"site": "', '"site": "\\udfff', 1).encode()

    town = tmp_path / "held.json"
    town.write_text('[{"site": "quarry\\ud800", "seq": 1, "head": "00"}]')
    for argv, code, said in (
        (
            [repack(bundle, tmp_path / "m.zip", site_id)],
            1,
            "FAILED: unreadable bundle: manifest.json: site.id: ",
        ),
        ([repack(bundle, tmp_path / "r.zip", event_row)], 1, "row malformed: records/findings.json line 2: "),
        ([bundle, "--anchors", town], 2, f"minewatch verify: {town}: entry 0: site: "),
    ):
        done = run_minewatch("verify", *argv)
        printed = done.stdout + done.stderr
        assert done.returncode == code and "Traceback" not in printed, printed
        assert said in printed and "not text: half of a UTF-16 surrogate pair" in printed, printed


@pytest.mark.parametrize(
    ("seq", "said"), [("1e400", "inf"), ("2.5", "2.5"), ("true", "True"), ("null", "None")]
)
def test_an_anchor_whose_seq_is_no_whole_number_is_one_line_not_a_traceback(
    site: Site, tmp_path: Path, seq: str, said: str
) -> None:
    """JSON reads 1e400 as infinity: int() of it ended verify --anchors in an OverflowError's
    traceback; 2.5 was taken as seq 2 and true as seq 1."""
    bundle = export(site, tmp_path / "b.zip")
    town = tmp_path / "held.json"
    town.write_text(f'[{{"site": "quarry", "seq": {seq}, "head": "00"}}]')
    done = run_minewatch("verify", bundle, "--anchors", town)
    printed = done.stdout + done.stderr
    assert done.returncode == 2 and "Traceback" not in printed, printed
    assert printed.splitlines() == [
        f"minewatch verify: {town}: entry 0: seq: {said} is not a whole number (a chain entry's seq)"
    ], printed


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("window.from_us", 10**30),
        ("window.to_us", -(10**30)),
        ("scope.chained_from_us", 10**30),
        ("window.to_us", 253402300800000000),  # 10000-01-01
    ],
)
def test_a_manifest_time_no_record_can_carry_is_one_line_not_a_traceback(
    site: Site, tmp_path: Path, field: str, value: int
) -> None:
    """A window starting at 10**30 microseconds ended verify in an OverflowError's traceback
    as it printed the window (one ending at -10**30, or chained from 10**30: a KeyError)."""
    bundle = export(site, tmp_path / "b.zip")
    part, key = field.split(".")

    def changed(members: dict[str, bytes]) -> None:
        manifest = json.loads(members["manifest.json"])
        manifest[part][key] = value
        members["manifest.json"] = json.dumps(manifest).encode()

    done = run_minewatch("verify", repack(bundle, tmp_path / "m.zip", changed))
    printed = done.stdout + done.stderr
    assert done.returncode == 1 and "Traceback" not in printed, printed
    assert printed.splitlines()[0].endswith(
        f"FAILED: unreadable bundle: manifest.json: {field}: {value} is not a time from 1970-01-01"
        " to 9998-12-31 (UTC, microseconds)"
    ), printed


def test_another_sites_complaint_received_in_the_window_leaves_the_bundle_whole(
    site: Site, tmp_path: Path
) -> None:
    """A complaint counts toward its own site's segment only. The complaint kind's window is two
    conditions joined by OR; unbracketed after "site = :site AND", a complaint of any site
    received in the window set the segment's bounds, and the bundle failed to verify (filed by
    anyone, on the public complaint page)."""
    from monitor.complaints.book import ComplaintBook

    store = Store(site.store)
    at = T0 + timedelta(minutes=1)
    with store.batch():
        other_seq, _ = store.head("other-pit")
        while other_seq <= store.head(SITE)[0]:  # the other site's chain the longer, as it may be
            store.append_portal_action("other-pit", "clerk", "town", "login", "", "127.0.0.1", {}, at)
            other_seq += 1
        ComplaintBook(store).submit("other-pit", "noise", T0, T0, "1 Main St", None, "loud", {}, {}, at)
    store.close()
    report = verify_bundle(export(site, tmp_path / "bundle.zip"), load_anchors(site.anchors))
    assert report.ok, report.first_problem


def test_a_genuine_bundle_with_a_long_light_burst_verifies(site: Site, tmp_path: Path) -> None:
    """A light reading's burst of 100,000 samples is a 400 KB data cell in data/light.csv: past
    csv's default field limit (131,072), verify called the genuine bundle unreadable."""
    store = Store(site.store)
    ts = T0 + timedelta(seconds=45)
    burst = [round(0.2 + (i % 7) * 0.01, 2) for i in range(100_000)]
    payload = {
        "ts": ts.isoformat(),
        "duration_s": 1.0,
        "lux_mean": 0.25,
        "lux_min": 0.2,
        "lux_max": 0.26,
        "burst": burst,
        "burst_rate_hz": 100_000,
    }
    with store.batch():
        store.append_reading(LightSummary(SITE, "l1", ts, 1.0, 0.25, 0.2, 0.26), payload, late=False, now=ts)
    store.close()
    report = verify_bundle(export(site, tmp_path / "bundle.zip"), load_anchors(site.anchors))
    assert report.ok, report.first_problem


def _members(path: Path) -> list[tuple[zipfile.ZipInfo, bytes]]:
    with zipfile.ZipFile(path) as zf:
        return [(info, zf.read(info)) for info in zf.infolist()]


@pytest.mark.filterwarnings("ignore:Duplicate name")
def test_a_member_named_twice_is_refused(site: Site, tmp_path: Path) -> None:
    """verify read the last copy and said OK; `unzip -n` extracts the first, which may be a
    doctored one."""
    bundle = export(site, tmp_path / "bundle.zip")
    members = _members(bundle)
    doctored = tmp_path / "twice.zip"
    with zipfile.ZipFile(doctored, "w", zipfile.ZIP_DEFLATED) as zout:
        for info, data in members:
            if info.filename == "chain.csv":
                zout.writestr("chain.csv", data.replace(b",", b";", 1))  # the copy unzip -n takes
            zout.writestr(info.filename, data)
    report = verify_bundle(doctored, load_anchors(site.anchors))
    assert not report.ok
    assert report.first_problem is not None and report.first_problem.message == (
        "refused: chain.csv is in the zip more than once: which copy is the bundle's cannot be told"
        " (tools that unzip it differ)"
    )


@pytest.mark.parametrize("damage", ["method", "encrypted", "deflate"])
def test_a_damaged_member_is_one_line_not_a_traceback(site: Site, tmp_path: Path, damage: str) -> None:
    bundle = export(site, tmp_path / "bundle.zip")
    data = bytearray(bundle.read_bytes())
    with zipfile.ZipFile(bundle) as zf:
        info = zf.getinfo("chain.csv")
    # The central directory entry of chain.csv: its flags (offset 8) and method (offset 10).
    name = b"chain.csv"
    at = data.find(b"PK\x01\x02", info.header_offset)
    while data[at + 46 : at + 46 + len(name)] != name:
        at = data.find(b"PK\x01\x02", at + 4)
    if damage == "method":
        data[at + 10 : at + 12] = (99).to_bytes(2, "little")
    elif damage == "encrypted":
        data[at + 8 : at + 10] = (int.from_bytes(data[at + 8 : at + 10], "little") | 1).to_bytes(2, "little")
    else:  # deflated bytes that are no deflate stream (the local header is 30 bytes and the name)
        start = info.header_offset + 30 + len(name) + 40
        data[start : start + 100] = bytes(100)
    damaged = tmp_path / f"{damage}.zip"
    damaged.write_bytes(bytes(data))
    report = verify_bundle(damaged, load_anchors(site.anchors))
    assert not report.ok and report.first_problem is not None
    assert report.first_problem.message.startswith("unreadable bundle: "), report.first_problem


@pytest.mark.parametrize("threaded", [False, True])
def test_an_export_interrupted_mid_member_raises_the_interruption_and_leaves_nothing(
    site: Site, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, threaded: bool
) -> None:
    """Ctrl-C while a row was written: zipfile refused to close the zip with the member open, and
    "ValueError: Can't close the ZIP file while there is an open writing handle" (a traceback)
    took the interruption's place."""
    from monitor.evidence import export as export_module

    real = export_module._Member.write
    written = [0]

    def interrupted(member: object, data: bytes | memoryview) -> None:
        real(member, data)  # type: ignore[arg-type]
        written[0] += 1
        if written[0] == 3:  # a member open, with bytes in it
            raise KeyboardInterrupt

    monkeypatch.setattr(export_module._Member, "write", interrupted)
    if threaded:  # the sound parts' members deflate in a thread of their own
        monkeypatch.setattr(export_module, "SOUND_PART_ROWS", 10)
    out = tmp_path / "bundle.zip"
    with pytest.raises(KeyboardInterrupt):
        export(site, out)
    assert not out.exists() and not list(tmp_path.glob("*.partial"))
    assert export_module._OPEN_MEMBERS == {}


def test_an_anchors_file_nested_too_deeply_is_one_line(tmp_path: Path) -> None:
    """An anchors file of 100,000 "[" ended `minewatch verify --anchors` in a RecursionError
    traceback (json's decoder recurses per bracket), and the portal's verify form with the Town's
    anchors file in a 500. A bundle kept from an earlier format stands for any."""
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000)
    with pytest.raises(EvidenceError, match="nested too deeply to be anchors"):
        load_anchors(deep)
    bundle = Path(__file__).parents[2] / "data" / "evidence" / "format3.zip"
    done = run_minewatch("verify", bundle, "--anchors", deep)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    said = "lists or objects nested too deeply to be anchors (a list of {site, seq, head})"
    assert done.stderr.strip().splitlines() == [f"minewatch verify: {deep}: {said}"]


def test_a_window_of_centuries_plots_only_the_days_with_data(site: Site, tmp_path: Path) -> None:
    """`evidence --from 1970-01-02 --to 9998-12-30` walked its 2.9 million days one by one for
    the plots (a query per day and sensor) and did not end; the days walked are those from the
    first to the last with data, so it draws the plots a window around the data draws, in about
    the time that takes (measured against it, not against a clock: the machine may be slow)."""
    import subprocess
    import sys
    import time
    import zipfile

    from tests.support.paths import REPO

    wide, tight = tmp_path / "wide.zip", tmp_path / "tight.zip"
    took: dict[Path, float] = {}
    for out, window in (
        (wide, ("1970-01-02", "9998-12-30")),
        (tight, (WINDOW[0].isoformat(), WINDOW[1].isoformat())),
    ):
        argv = ["evidence", "--config", site.config_path, "--site", SITE, "--from", window[0]]
        argv += ["--to", window[1], "--out", out]
        began = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "monitor.cli", *map(str, argv)],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=240,
        )
        took[out] = time.monotonic() - began
        assert done.returncode == 0, done.stderr
    assert took[wide] < 3 * took[tight] + 5, took  # it took 20 times as long

    def plots(path: Path) -> list[str]:
        with zipfile.ZipFile(path) as bundle:
            return sorted(name for name in bundle.namelist() if name.startswith("plots/"))

    assert plots(wide) == plots(tight) != []
    assert verify_bundle(wide).ok


def test_a_bundle_missing_a_member_or_unreadable_says_which_file(site: Site, tmp_path: Path) -> None:
    """A zip without manifest.json said `not an evidence bundle: "There is no item named
    'manifest.json' in the archive" is missing` (zipfile's KeyError, quoted whole); a manifest
    that is not JSON, or a chain.csv that is not UTF-8, gave the parser's words and not the
    file's name ("unreadable bundle: 'utf-8' codec can't decode byte 0xff in position 0: ...").
    Each names the member."""
    bundle = export(site, tmp_path / "b.zip")

    def rezip(name: str, change: Callable[[dict[str, bytes]], object]) -> Path:
        with zipfile.ZipFile(bundle) as zin:
            members = {member: zin.read(member) for member in zin.namelist()}
        change(members)
        with zipfile.ZipFile(tmp_path / name, "w", zipfile.ZIP_DEFLATED) as zout:
            for member, data in members.items():
                zout.writestr(member, data)
        return tmp_path / name

    def without_manifest(members: dict[str, bytes]) -> None:
        del members["manifest.json"]

    def manifest_not_json(members: dict[str, bytes]) -> None:
        members["manifest.json"] = b"{not json"

    def manifest_a_list(members: dict[str, bytes]) -> None:
        members["manifest.json"] = b"[1, 2]"

    def chain_not_utf8(members: dict[str, bytes]) -> None:
        members["chain.csv"] = b"\xff\xfe" + members["chain.csv"]

    for name, change, said in (
        ("no-manifest.zip", without_manifest, "FAILED: not an evidence bundle: 'manifest.json' is missing"),
        (
            "manifest-not-json.zip",
            manifest_not_json,
            "FAILED: unreadable bundle: manifest.json is not JSON (Expecting property name enclosed in"
            " double quotes: line 1 column 2 (char 1))",
        ),
        (
            "manifest-a-list.zip",
            manifest_a_list,
            "FAILED: unreadable bundle: manifest.json is not a JSON object",
        ),
        ("chain-not-utf8.zip", chain_not_utf8, "FAILED: unreadable bundle: chain.csv is not UTF-8 text"),
    ):
        done = run_minewatch("verify", rezip(name, change))
        printed = done.stdout + done.stderr
        assert done.returncode == 1 and "Traceback" not in printed, printed
        assert printed.splitlines()[0].startswith(f"{tmp_path / name}: {said}"), printed


def test_an_anchors_file_of_other_objects_says_what_an_entry_lacks_in_a_short_line(
    site: Site, tmp_path: Path
) -> None:
    """`verify --anchors summary.json` (the demo's summary, not its anchors) printed the whole
    entry, 12 KB of one line, after "is not an object with site, seq and head". It says which key
    the entry lacks, and shows no more than the start of an entry that is no object."""
    bundle = export(site, tmp_path / "b.zip")
    other = tmp_path / "summary.json"
    other.write_text(json.dumps({"site": "quarry", "findings": [{"standard": "noise" * 1000}]}))
    listed = tmp_path / "listed.json"
    listed.write_text(json.dumps(["x" * 5000]))
    for town, said in (
        (
            other,
            f"minewatch verify: {other}: entry 0 has no 'seq'"
            " (an anchor is an object with site, seq and head)",
        ),
        (listed, f"minewatch verify: {listed}: entry 0 is not an object with site, seq and head: 'xxxxx"),
    ):
        done = run_minewatch("verify", bundle, "--anchors", town)
        printed = done.stdout + done.stderr
        assert done.returncode == 2 and "Traceback" not in printed, printed
        (line,) = printed.splitlines()
        assert line.startswith(said) and len(line) < 300, line
