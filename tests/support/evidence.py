"""Test helpers shared by several test modules (from tests/monitor/evidence/test_bundles.py)."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from monitor.config import Config, load_config
from monitor.evidence import (
    export_bundle,
    load_anchors,
    verify_bundle,
)
from monitor.journal.config_record import config_record_texts
from monitor.journal.store import Store, to_us
from rules.model import (
    Finding,
    FindingKind,
    LightSummary,
    Measurement,
    SoundLevels,
    TruckPassage,
    WeatherReading,
)
from tests.support.daemon import write_config

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


def build_site(
    tmp_path: Path,
    *,
    influx: str = "",
    seconds: int = 240,
    final_anchor: bool = True,
    password: str = "",
    chain_config: bool = True,
    seismic: bool = False,
    overloaded: frozenset[int] = frozenset(),
    profile: str = "dovre",
) -> Site:
    """A store as the daemon writes it: a config record at start-up, anchors (each followed by the
    config record restated, as Pipeline._anchor does) before, during and (``final_anchor``) after
    the window; ``seismic``: a seismograph event (SEISMIC_AT) between the second and last anchors;
    ``overloaded``: the seconds (from T0) that n2 measured overloaded; ``profile``: the site's
    ordinance profile, a shipped one's name or a file's path."""
    config_path = write_config(tmp_path / "minewatch.toml", "mqtt://127.0.0.1:1", site=SITE, influx=influx)
    if profile != "dovre":
        written = config_path.read_text()
        config_path.write_text(written.replace('profile = "dovre"', f'profile = "{profile}"', 1))
    if password:  # written inline, as a configuration may
        config_path.write_text(
            config_path.read_text().replace("[broker]\n", f'[broker]\npassword = "{password}"\n', 1)
        )
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
        if chain_config:  # False: a store written before the daemon chained config records
            texts = config_record_texts(config, site_config)
            store.append_config_record(SITE, *texts, T0 - timedelta(minutes=5))
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
                        overload=sensor == "n2" and i in overloaded,
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
            if seismic and ts == SEISMIC_AT:
                add_seismograph_event(store, ts, now)
        if final_anchor:
            anchor(T0 + timedelta(seconds=seconds + 60))
    store.close()
    anchors_path = tmp_path / "town-anchors.json"
    anchors_path.write_text(json.dumps(anchors))
    return Site(config_path, config, Path(config.storage.path), anchors_path)


# A seismograph event of build_site(seismic=True): 2 s at 1,024 samples/s, in chunks of 16 KiB.
SEISMIC_AT = T0 + timedelta(seconds=150)
SEISMIC_CHUNK_BYTES = 16_384


def add_seismograph_event(store: Store, ts: datetime, now: datetime) -> int:
    """A seismograph event taken in as the daemon takes it (seismic_intake): the edge's summary,
    then its waveform chunks (the last one recomputes the summary). Returns the chunk count."""
    from monitor.daemon.seismic_intake import take_chunk, take_summary
    from monitor.wire.codec import SeismicSummary
    from sensors.seismograph import event_messages, site_law_event

    wave = site_law_event(600.0, 200.0, record_s=2.0, pretrigger_s=0.25)
    chunks = 0
    for message in event_messages(wave, SITE, "sg1", "ev1", ts, max_bytes=SEISMIC_CHUNK_BYTES):
        if isinstance(message, SeismicSummary):
            take_summary(store, message, now)
        else:
            take_chunk(store, message, now)
            chunks += 1
    return chunks


def export(site: Site, path: Path, **kwargs: object) -> Path:
    export_bundle(site.config, SITE, *WINDOW, path, plots=kwargs.pop("plots", False), **kwargs)  # type: ignore[arg-type]
    return path


def rewrite(src: Path, dst: Path, edits: dict[str, Callable[[bytes], bytes]], *, rehash: bool = True) -> Path:
    """Copy a bundle with members edited; ``rehash`` also fixes the manifest's SHA-256 and counts
    (as a forger would: restate)."""
    with zipfile.ZipFile(src) as zin:
        members = {name: zin.read(name) for name in zin.namelist()}
    for name, edit in edits.items():
        members[name] = edit(members[name])
    if rehash:
        manifest = json.loads(members["manifest.json"])
        restate(manifest, members)
        members["manifest.json"] = json.dumps(manifest).encode()
    with zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zout:
        for name, data in members.items():
            zout.writestr(name, data)
    return dst


Manifest = dict[str, Any]


def manifest_lie(change: Callable[[Manifest], None]) -> Callable[[bytes], bytes]:
    """An edit of manifest.json for ``rewrite``: ``change`` made to the parsed manifest."""

    def edit(data: bytes) -> bytes:
        manifest = json.loads(data)
        change(manifest)
        return json.dumps(manifest).encode()

    return edit


def restate(manifest: dict[str, Any], members: dict[str, bytes]) -> None:
    """Restate all the manifest says of the members, as a forger who edited them would: each
    file's SHA-256, bytes and rows, the rows summary and the chain's entries (verify holds every
    count against the bundle)."""
    summary = manifest.get("rows", {})
    for entry in manifest["files"]:
        name, data = entry["name"], members[entry["name"]]
        entry["sha256"] = hashlib.sha256(data).hexdigest()
        entry["bytes"] = len(data)
        if "rows" in entry or name in summary:
            rows = len(json.loads(data)) if name.endswith(".json") else len(csv_rows(data)) - 1
            if "rows" in entry:
                entry["rows"] = rows
            if name in summary:
                summary[name] = rows
    manifest["chain"]["entries"] = len(csv_rows(members["chain.csv"])) - 1


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
