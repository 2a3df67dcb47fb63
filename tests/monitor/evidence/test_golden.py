"""Evidence bundles and chain digests pinned across refactors.

tests/data/evidence/golden.sqlite is a store holding every chain kind, written by
tests/data/evidence/make_golden.py at commit cd944b8; golden-digests.json holds the SHA-256
of each member of the format-2 bundle that code exported from it (format2.zip is that bundle),
golden-digests-3.json those of the format-3 bundle exported from it later (format3.zip is that
bundle), golden-digests-4.json those of the format-4 bundle exported from it since. Exporting the
same store again must give the same bytes, the bundles of earlier formats must verify as they did,
and writing the same data again must give the same chain keys and digests.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from monitor.config import load_config
from monitor.evidence import export as export_module
from monitor.evidence import export_bundle, load_anchors, verify_bundle
from monitor.journal.chain_kinds import KINDS, digest_of
from tests.data.evidence.make_golden import CREATED, build, digests
from tests.support.daemon import write_config
from tests.support.evidence import SITE, WINDOW
from tests.support.paths import DATA, REPO

GOLDEN = DATA / "evidence"


def test_the_same_store_exports_the_same_bundle(tmp_path: Path) -> None:
    """Format 4 (golden-digests-4.json, pinned when format 4 was introduced): the same store
    exports the same bytes, every time. Against format 3's (golden-digests-3.json) only README.txt,
    config.toml (the allow-list of the whole file the golden store chained) and the manifest differ."""
    config_path = write_config(tmp_path / "minewatch.toml", "mqtt://127.0.0.1:1", site=SITE)
    shutil.copy(GOLDEN / "golden.sqlite", tmp_path / "store.db")
    config = load_config(config_path)
    assert Path(config.storage.path) == tmp_path / "store.db"
    bundle = tmp_path / "b.zip"
    export_bundle(config, SITE, *WINDOW, bundle, plots=False, now=CREATED)
    assert digests(bundle) == json.loads((GOLDEN / "golden-digests-4.json").read_text())
    assert verify_bundle(bundle).ok
    format_3 = json.loads((GOLDEN / "golden-digests-3.json").read_text())
    assert {n for n, d in digests(bundle).items() if format_3[n] != d} == {
        "README.txt",
        "config.toml",
        "manifest.json",
    }
    again = tmp_path / "again.zip"
    export_bundle(config, SITE, *WINDOW, again, plots=False, now=CREATED)
    assert digests(again) == digests(bundle)


def test_the_seismic_store_exports_the_same_bundle_with_its_waveforms_as_rows(tmp_path: Path) -> None:
    """golden-seismic.sqlite (make_golden.py --seismic, issue 27): the golden store's data and a
    seismograph event chained inside the window. Its bundle is the pinned bytes every time, each
    waveform chunk a row of records/waveforms.json that verify hashes against the chain."""
    config_path = write_config(tmp_path / "minewatch.toml", "mqtt://127.0.0.1:1", site=SITE)
    shutil.copy(GOLDEN / "golden-seismic.sqlite", tmp_path / "store.db")
    bundle = tmp_path / "b.zip"
    export_bundle(load_config(config_path), SITE, *WINDOW, bundle, plots=False, now=CREATED)
    pinned = json.loads((GOLDEN / "golden-seismic-digests.json").read_text())
    assert digests(bundle) == pinned
    assert "records/waveforms.json" in pinned
    report = verify_bundle(bundle)
    assert report.ok, report.lines()
    assert report.rows_checked["records/waveforms.json"] == 3


def test_a_segment_walked_in_stretches_by_worker_processes_exports_the_same_bundle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The exporter's workers each walk a stretch of the chain segment (_walk); cut into
    stretches of 16 entries (the golden store's segment is ~500) and walked by two processes,
    the bundle is the pinned one, byte for byte in every member."""
    config_path = write_config(tmp_path / "minewatch.toml", "mqtt://127.0.0.1:1", site=SITE)
    shutil.copy(GOLDEN / "golden.sqlite", tmp_path / "store.db")
    monkeypatch.setattr(export_module, "_STRETCH_ENTRIES", 16)
    monkeypatch.setattr(export_module, "default_workers", lambda: 2)
    bundle = tmp_path / "b.zip"
    summary = export_bundle(load_config(config_path), SITE, *WINDOW, bundle, plots=False, now=CREATED)
    assert summary.chain_entries > 10 * 16
    assert digests(bundle) == json.loads((GOLDEN / "golden-digests-4.json").read_text())


def test_the_format_2_bundle_is_the_pinned_one_and_verifies_as_it_did(tmp_path: Path) -> None:
    """format2.zip holds the very members format-2 code exported from golden.sqlite (the digests
    pinned in golden-digests.json before format 3); it verifies with the same checks and verdict,
    plus one line saying which format it is."""
    bundle = GOLDEN / "format2.zip"
    assert digests(bundle) == json.loads((GOLDEN / "golden-digests.json").read_text())
    copy = tmp_path / "f2.zip"
    shutil.copy(bundle, copy)
    report = verify_bundle(copy, load_anchors(GOLDEN / "format2-town-anchors.json"))
    assert report.ok and report.format == "minewatch-evidence/2", report.lines()
    assert report.lines() == [
        f"{copy}: OK up to seq 515, anchored by the head the town holds there; rows after seq 515 are"
        " not yet anchored (seq 516 to 526, 11 row(s): internal consistency only)",
        "  no head the town holds lies beyond seq 515: nothing proves the rest yet; export again after"
        " the next anchor is published",
        "  format: minewatch-evidence/2 (earlier); the same checks and guarantees as the current format;"
        " its chain.csv states every digest and head, which are checked link by link",
        "  scope: site quarry, 2024-03-10T07:58:00Z to 2024-03-10T08:02:00Z (2024-03-10T01:58:00-06:00 to"
        " 2024-03-10T03:02:00-05:00 site time), all sensors",
        "  files: 21 checked against their SHA-256 in the manifest; the file set is the one the format and"
        " the rows call for",
        "  rows: 525 rebuilt, hashed and matched to their chain entries in chain order (480 in"
        " data/sound.csv, 24 in data/light.csv, 4 in data/weather.csv, 1 in records/events.json, 3 in"
        " records/findings.json, 1 in records/alerts.json, 2 in records/health.json, 2 in"
        " records/calibration.json, 1 in records/rejections.json, 1 in records/conflicts.json, 1 in"
        " records/notices.json, 1 in records/notice_changes.json, 1 in records/notice_episodes.json, 3 in"
        " records/config.json)",
        "  chain: 525 links recomputed, seq 2 to 526",
        "  profile and configuration: profile dovre 45e5810ce6b2 and configuration 97a820a6b8fd (secrets"
        " left out), recorded at 2024-03-10T07:53:00Z and in force for every record judged after it,"
        " chained at seq 2: profile/dovre.toml and"
        " config.toml are those files (anchored)",
        "  bundle anchors: 3 checked against the chain",
        "  town-held anchors matching the chain: 3 (seq 1, 264, 515)",
    ]


def test_the_format_3_bundle_is_the_pinned_one_and_verifies_as_it_did(tmp_path: Path) -> None:
    """format3.zip holds the very members format-3 code exported from golden.sqlite (the digests
    pinned in golden-digests-3.json before format 4): its config.toml is the whole configuration
    file that store chained, and it still verifies, bound by the chain, with one line saying which
    format it is."""
    bundle = GOLDEN / "format3.zip"
    assert digests(bundle) == json.loads((GOLDEN / "golden-digests-3.json").read_text())
    copy = tmp_path / "f3.zip"
    shutil.copy(bundle, copy)
    report = verify_bundle(copy, load_anchors(GOLDEN / "format2-town-anchors.json"))
    assert report.ok and report.format == "minewatch-evidence/3", report.lines()
    assert report.lines()[2] == (
        "  format: minewatch-evidence/3 (earlier); the same checks and guarantees as the current format;"
        " its config.toml is the configuration file chained then (secret values masked) and its records"
        " are every one of its chain segment"
    )
    assert report.config == (
        "profile dovre 45e5810ce6b2 and configuration 97a820a6b8fd (secrets left out), recorded at"
        " 2024-03-10T07:53:00Z and in force for every record judged after it, chained at seq 2:"
        " profile/dovre.toml and config.toml are those files"
        " (anchored)"
    )
    assert not report.digest_only


def _chain(path: Path) -> list[tuple[str, str, str]]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            "SELECT kind, key, digest FROM chain WHERE kind <> 'config' ORDER BY seq"
        ).fetchall()
    conn.close()
    return [tuple(r) for r in rows]


def test_the_same_data_is_chained_under_the_same_keys_and_digests(tmp_path: Path) -> None:
    """Config records are left out: they digest the configuration text, which names the temp dir."""
    store = build(tmp_path)
    expected = _chain(GOLDEN / "golden.sqlite")
    assert len(expected) > 500 and {k for k, _, _ in expected} >= {
        "sound",
        "reading",
        "event",
        "finding",
        "alert",
        "rejection",
        "health",
        "calibration",
        "conflict",
        "notice",
        "notice_change",
        "notice_episode",
    }
    # Issue 25 changed what a notice's episode record says (its span as read, its highest
    # window; no list of summaries): those records differ by exactly that, all others not at all.
    rebuilt = _chain(store)
    assert [(k, key) for k, key, _ in rebuilt] == [(k, key) for k, key, _ in expected]
    assert [r for r in rebuilt if r[0] != "notice_episode"] == [
        r for r in expected if r[0] != "notice_episode"
    ]
    added = {"span_text", "peak_start", "peak_end", "peak_span_text", "peak_exempt_s"}
    for old, new in zip(_episode_facts(GOLDEN / "golden.sqlite"), _episode_facts(store), strict=True):
        assert set(new) - set(old) == added and set(old) - set(new) == {"finding_summaries"}
        assert {k: v for k, v in new.items() if k in old} == {k: v for k, v in old.items() if k in new}


def _episode_facts(path: Path) -> list[dict[str, object]]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            "SELECT data FROM notice_episodes ORDER BY notice_id, episode_id, revision"
        ).fetchall()
    conn.close()
    return [json.loads(r[0]) for r in rows]


def test_the_verifier_imports_no_plotting_http_or_numpy() -> None:
    """What a town runs to check a bundle: the bundle format and the standard library's hashing."""
    code = (
        "import sys, monitor.evidence.verify as v; assert v.verify_bundle;"
        " print(' '.join(sorted(sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    ).stdout.split()
    heavy = {"numpy", "matplotlib", "urllib3", "influxdb_client", "paho", "rules", "monitor.journal.store"}
    assert not [
        m for m in out if m in heavy or m.split(".")[0] in heavy or m in ("http.client", "urllib.request")
    ]
    assert "monitor.evidence.verify" in out and "monitor.evidence.export" not in out


def test_each_chain_kind_has_one_key_in_python_and_sql(tmp_path: Path) -> None:
    """KINDS gives each kind's key in Python (the store chains with it) and in SQL (evidence
    finds the rows with it): both agree with every chain entry of the pinned store (and of a
    portal action, a kind added after it was made)."""
    from datetime import timedelta

    from monitor.journal.store import Store
    from tests.support.evidence import T0

    copy = tmp_path / "golden.sqlite"
    shutil.copy(GOLDEN / "golden.sqlite", copy)
    store = Store(copy)  # migrated: the tables of later kinds are created
    with store.batch():
        store.append_portal_action(
            SITE,
            "clerk",
            "town",
            "notice_extended",
            "DOV-2024-0001",
            "127.0.0.1",
            {"days": 7},
            T0 + timedelta(minutes=9),
        )
        # complaints and reports: kinds added after the pinned store too
        from monitor.complaints.book import ComplaintBook

        book = ComplaintBook(store)
        at = T0 + timedelta(minutes=10)
        complaint = book.submit(
            SITE, "noise", T0, T0, "1 Main St", (1.5, 2.0), "loud", {"email": "a@b.c"}, {"verdict": "x"}, at
        )
        book.triage(complaint.id, "investigating", "looking", "clerk", at)
        from monitor.reports.sending import record_report

        day = (T0, T0 + timedelta(days=1))
        record_report(store, SITE, *day, at, (1, "0" * 64), b"%PDF", b"csv", "/tmp/r.pdf", ["town"])
        from tests.support.evidence import add_seismograph_event

        add_seismograph_event(store, T0 + timedelta(minutes=11), T0 + timedelta(minutes=12))  # waveforms
    store.close()
    conn = sqlite3.connect(copy)
    conn.row_factory = sqlite3.Row
    tables = {
        "sound": "sound t",
        "reading": "readings t",
        **{k: v.source for k, v in KINDS.items() if v.source},
    }
    checked = 0
    for name, source in tables.items():
        spec = KINDS[name]
        rows = conn.execute(f"SELECT t.*, {spec.key} AS sql_key FROM {source}").fetchall()
        assert rows, name
        for row in rows:
            key = spec.key_of(row)
            assert key == row["sql_key"], name
            chained = conn.execute(
                "SELECT digest FROM chain WHERE kind = ? AND key = ?", (name, key)
            ).fetchone()
            assert chained is not None and chained[0] == digest_of(spec.record(row)), (name, key)
            checked += 1
    conn.close()
    assert checked > 500
