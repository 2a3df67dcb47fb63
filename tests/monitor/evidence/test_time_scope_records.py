"""What a bundle for an inspector with a time scope carries of portal actions, compliance reports
and their alerts.

An inspector's bundle shows records by allow-list (``TimeScope.shows``): portal actions are never
its (each names an account and the address it acted from, the Town's view of who did what; a
digest covers the whole record, so none can be shown in part), nor compliance reports' records
(each names the recipients it was delivered to, which are delivery data, not a finding; a report
inside the scope carried its recipients' addresses in clear). They are in chain.csv as their
digests, and the bundle verifies. A report's alert is shown when its data holds only what
``READER_ALERT_DATA`` names (an earlier one named the files' paths on the operator's disk).
Real store, real export through the portal, real verify.
"""

from __future__ import annotations

import json
import zipfile
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from monitor.config import Config
from monitor.evidence import verify_bundle
from monitor.evidence.disclosure import READER_ALERT_DATA
from monitor.journal import queries
from monitor.journal.store import Store
from monitor.portal.data import Portal, Scope
from monitor.reports.content import build_report, period_of
from monitor.reports.sending import record_report, send_report
from tests.support.notices import TZ, local, make_config, minutes, site_and_profile, store_findings
from tests.support.report_alerts import report_alert_as_before
from tests.support.scopes import anchored_scopes

NOT_BEFORE = datetime(2026, 12, 3, 20, tzinfo=UTC)  # 14:00 to 15:00 site time
NOT_AFTER = datetime(2026, 12, 3, 21, tzinfo=UTC)
WINDOW = datetime(2026, 12, 3, 14, tzinfo=TZ), datetime(2026, 12, 3, 15, tzinfo=TZ)


def _setup(tmp_path: Path) -> tuple[Portal, Scope, Scope, dict[str, str]]:
    config = make_config(tmp_path / "r.db")
    store = Store(config.storage.path)
    store_findings(store, minutes(NOT_BEFORE + timedelta(minutes=10), 1), NOT_BEFORE + timedelta(minutes=12))
    ids: dict[str, str] = {}
    with store.batch():
        store.append_portal_action(
            "quarry",
            "bob-the-clerk",
            "town",
            "login",
            "",
            "198.51.100.77",
            {},
            NOT_BEFORE + timedelta(minutes=20),
        )
        head = queries.chain_head(store.conn, "quarry")
        ids["inside"] = record_report(  # an hour's report made within the scope
            store,
            "quarry",
            NOT_BEFORE,
            NOT_BEFORE + timedelta(minutes=30),
            NOT_BEFORE + timedelta(minutes=40),
            head,
            b"pdf-inside",
            b"csv-inside",
            "/r/inside.pdf",
            ["inside@dovre.example"],
        )
        ids["made_after"] = record_report(  # the scope's hour, reported five minutes after it
            store,
            "quarry",
            NOT_BEFORE,
            NOT_AFTER,
            NOT_AFTER + timedelta(minutes=5),
            head,
            b"pdf-after",
            b"csv-after",
            "/r/after.pdf",
            ["after@dovre.example"],
        )
        ids["longer"] = record_report(  # a day's report, its period reaching past the scope
            store,
            "quarry",
            NOT_BEFORE - timedelta(hours=14),
            NOT_AFTER + timedelta(hours=9),
            NOT_BEFORE + timedelta(minutes=50),
            head,
            b"pdf-day",
            b"csv-day",
            "/r/day.pdf",
            ["day@dovre.example"],
        )
    portal, scoped, town = anchored_scopes(store, config, NOT_BEFORE, NOT_AFTER)
    return portal, scoped, town, ids


def _records(path: Path, name: str) -> list[dict[str, object]]:
    with zipfile.ZipFile(path) as zf:
        return [r["row"] for r in json.loads(zf.read(name))]


def test_a_scoped_bundle_carries_no_portal_action_and_no_report_record(tmp_path: Path) -> None:
    portal, scoped, town, ids = _setup(tmp_path)
    out = tmp_path / "scoped.zip"
    portal.export(scoped, "quarry", *WINDOW, out)
    assert _records(out, "records/portal_actions.json") == []
    assert _records(out, "records/reports.json") == []  # the file is kept, its rows are not the reader's
    with zipfile.ZipFile(out) as zf:
        everything = b"".join(zf.read(n) for n in zf.namelist())
        manifest = json.loads(zf.read("manifest.json"))
        chain = zf.read("chain.csv").decode()
    for leak in (b"198.51.100.77", b"bob-the-clerk", b"inside@dovre", b"after@dovre", b"day@dovre"):
        assert leak not in everything
    for id_ in ids.values():
        assert id_ not in everything.decode()
    store = Store(portal.config.storage.path)
    inside = queries.chain_entry(store.conn, "quarry", "report", ids["inside"])
    store.close()
    assert inside is not None and f"\n{inside.seq},,,{inside.digest},\n" in chain  # its digest alone
    assert "portal_action" not in manifest["disclosure"]["kinds"]
    assert "report" not in manifest["disclosure"]["kinds"]
    rule = manifest["disclosure"]["time_scope"]["rule"]
    assert "portal actions" in rule and "nor compliance reports" in rule
    report = verify_bundle(out)
    assert report.ok, report.problems
    assert sum(report.digest_only.values()) >= 4  # the action and the three reports, as digests

    whole = tmp_path / "town.zip"  # the Town's view of the same window still carries them all
    portal.export(town, "quarry", *WINDOW, whole)
    assert [r["source"] for r in _records(whole, "records/portal_actions.json")] == ["198.51.100.77"]
    assert {r["id"] for r in _records(whole, "records/reports.json")} == set(ids.values())
    assert verify_bundle(whole).ok


def test_a_scoped_bundle_does_not_name_the_kind_of_an_entry_it_carries_as_a_digest(tmp_path: Path) -> None:
    """chain.csv's kind cell of a digest-only entry told a scoped reader that a notice was issued
    just after the scope (``seq,notice,,digest,``); the link needs the digest alone."""
    from monitor.notify.notices import NoticeBook
    from tests.support.notices import site_and_profile

    config = make_config(tmp_path / "n.db")
    store = Store(config.storage.path)
    site, profile = site_and_profile(config)
    found = store_findings(
        store, minutes(NOT_AFTER - timedelta(minutes=3), 2), NOT_AFTER - timedelta(seconds=30)
    )
    with store.batch():  # the daemon drew the notice up four minutes after the scope closed
        NoticeBook(store).on_findings(site, profile, found, NOT_AFTER + timedelta(minutes=4))
    portal, scoped, town = anchored_scopes(store, config, NOT_BEFORE, NOT_AFTER)

    out = tmp_path / "scoped.zip"
    portal.export(scoped, "quarry", *WINDOW, out)
    with zipfile.ZipFile(out) as zf:
        lines = [line.split(",") for line in zf.read("chain.csv").decode().splitlines()[1:]]
        manifest = json.loads(zf.read("manifest.json"))
    digests = [cells for cells in lines if not cells[2] and cells[1] != "sound"]
    assert digests  # the notice, its change and its alert at least
    assert {cells[1] for cells in digests} == {""}
    assert "notice" not in {cells[1] for cells in lines}
    assert list(manifest["disclosure"]["digest_only"]) == ["kind not stated"]
    assert manifest["disclosure"]["digest_only"]["kind not stated"] == len(digests)
    report = verify_bundle(out)
    assert report.ok, report.problems
    assert report.digest_only == {"kind not stated": len(digests)}
    assert any("kind not stated" in line for line in report.lines())

    whole = tmp_path / "town.zip"  # the Town's bundle names the kinds as before
    portal.export(town, "quarry", *WINDOW, whole)
    with zipfile.ZipFile(whole) as zf:
        kinds = {line.split(",")[1] for line in zf.read("chain.csv").decode().splitlines()[1:]}
    assert "notice" in kinds
    assert verify_bundle(whole).ok


def test_a_scoped_bundle_names_no_sensor_or_time_of_entries_outside_its_window(tmp_path: Path) -> None:
    """The entries keyed by sensor and time (sound, readings, audio) between the scope's end and
    the anchor closing the bundle were links with their keys (``sound`` ``n1|<ts_us>``, a light
    reading, a seismograph's event just after the scope); a time-scoped reader's bundle carries
    them as their digests alone. The Town's bundle keeps them as they were."""
    from monitor.evidence import export_bundle, load_anchors
    from monitor.evidence.disclosure import Disclosure, TimeScope
    from monitor.wire.canonical import to_us
    from tests.support.evidence import T0, build_site

    site = build_site(tmp_path)  # sound and light from T0 for 4 minutes, an anchor at T0 + 121 s
    window = (T0, T0 + timedelta(seconds=100))
    scope = TimeScope(to_us(window[0]), to_us(window[1]) - 1)
    out = tmp_path / "scoped.zip"
    export_bundle(site.config, "quarry", *window, out, plots=False, disclosure=Disclosure(time_scope=scope))
    with zipfile.ZipFile(out) as zf:
        lines = [line.split(",") for line in zf.read("chain.csv").decode().splitlines()[1:]]
        manifest = json.loads(zf.read("manifest.json"))
    keyed = [cells for cells in lines if cells[1] in ("sound", "reading", "audio") and cells[2]]
    assert keyed  # the window's readings keep their keys
    for cells in keyed:
        assert to_us(window[0]) <= int(cells[2].split("|")[-1]) < to_us(window[1]), cells
    unnamed = [cells for cells in lines if not cells[1]]
    assert len(unnamed) >= 2 * 20  # both meters' seconds up to the anchor, at least
    assert manifest["disclosure"]["digest_only"] == {"kind not stated": len(unnamed)}
    report = verify_bundle(out, load_anchors(site.anchors))
    assert report.ok, report.problems
    assert report.digest_only == {"kind not stated": len(unnamed)}

    whole = tmp_path / "town.zip"
    export_bundle(site.config, "quarry", *window, whole, plots=False)
    with zipfile.ZipFile(whole) as zf:
        town = [line.split(",") for line in zf.read("chain.csv").decode().splitlines()[1:]]
    assert any(c[1] == "sound" and c[2] and int(c[2].split("|")[1]) >= to_us(window[1]) for c in town)
    assert verify_bundle(whole, load_anchors(site.anchors)).ok


def test_a_scoped_bundle_shows_a_report_alert_by_allow_list_and_never_the_files_paths(tmp_path: Path) -> None:
    """A report's town alert inside the scope is shown with its data (the report's id, period,
    chain head and files' SHA-256: ``READER_ALERT_DATA``), which names no path on the operator's
    disk. One a store wrote before, naming the files' paths (report_pdf, report_csv), is carried
    as its digest alone: its digest covers the paths, so they cannot be left out of it."""
    not_before, not_after = local(2026, 6, 14, 23), local(2026, 6, 16, 8)
    config, store, sent, before, _ = _report_alerts_new_and_old(tmp_path)
    portal, scoped, _ = anchored_scopes(store, config, not_before, not_after)
    window = local(2026, 6, 15, 0), local(2026, 6, 16, 7)

    out = tmp_path / "scoped.zip"
    portal.export(scoped, "quarry", *window, out)
    alerts = {r["id"]: json.loads(str(r["data"])) for r in _records(out, "records/alerts.json")}
    assert set(alerts) == {sent["id"]}, alerts
    assert set(alerts[sent["id"]]) <= READER_ALERT_DATA["report"]
    with zipfile.ZipFile(out) as zf:
        everything = b"".join(zf.read(n) for n in zf.namelist()).decode()
        chain = zf.read("chain.csv").decode()
    assert str(tmp_path) not in everything and "quarry-2026-06-15" not in everything
    store = Store(config.storage.path)
    entry = queries.chain_entry(store.conn, "quarry", "alert", before["id"])
    store.close()
    assert entry is not None and f"\n{entry.seq},,,{entry.digest},\n" in chain  # its digest alone
    assert verify_bundle(out).ok


def test_the_towns_bundle_carries_an_older_report_alert_naming_its_files_paths_as_its_digest_alone(
    tmp_path: Path,
) -> None:
    """The allow-list of an alert's data (``READER_ALERT_DATA``) holds for every reader but the
    operator: a report alert an older minewatch chained with its files' paths on the operator's
    disk (report_pdf, report_csv) was in clear in the Town's (unscoped) bundle. It is carried there
    as its digest alone (the digest covers the paths), the bundle verifies against the Town's
    heads, and the operator's own bundle (its audiences name the operator) still shows it whole."""
    from monitor.evidence import export_bundle, load_anchors
    from monitor.evidence.disclosure import OPERATOR, READER_AUDIENCES, Disclosure
    from monitor.journal import segment

    config, store, sent, before, pdf_path = _report_alerts_new_and_old(tmp_path)
    entry = queries.chain_entry(store.conn, "quarry", "alert", before["id"])
    portal, _, town = anchored_scopes(store, config, local(2026, 6, 14, 23), local(2026, 6, 16, 8))
    held = Store(config.storage.path)
    anchors = [
        {"site": site_, "seq": seq, "head": head, "published_us": published_us}
        for site_, seq, head, published_us in segment.anchors(held.conn, "quarry")
    ]
    held.close()
    town_anchors = tmp_path / "town-anchors.json"
    town_anchors.write_text(json.dumps(anchors))
    window = local(2026, 6, 15, 0), local(2026, 6, 16, 7)
    paths = (str(pdf_path), str(pdf_path.with_suffix(".csv")))
    assert entry is not None and all(p in json.dumps(before["data"]) for p in paths)

    whole = tmp_path / "town.zip"
    portal.export(town, "quarry", *window, whole)
    assert {r["id"] for r in _records(whole, "records/alerts.json")} == {sent["id"]}
    with zipfile.ZipFile(whole) as zf:
        everything = b"".join(zf.read(n) for n in zf.namelist()).decode()
        chain = zf.read("chain.csv").decode()
    assert str(tmp_path) not in everything and "quarry-2026-06-15" not in everything
    assert f"\n{entry.seq},alert,,{entry.digest},\n" in chain  # its digest alone, its kind named
    report_ = verify_bundle(whole, load_anchors(town_anchors))
    assert report_.ok and report_.anchored_to == anchors[-1]["seq"], report_.problems
    assert report_.digest_only == {"alert": 1}

    own = tmp_path / "operator.zip"  # the operator's view: its own alert as chained, paths and all
    operators = Disclosure(audiences=READER_AUDIENCES | {OPERATOR})
    export_bundle(config, "quarry", *window, own, plots=False, disclosure=operators)
    assert {r["id"] for r in _records(own, "records/alerts.json")} == {sent["id"], before["id"]}
    with zipfile.ZipFile(own) as zf:
        everything = b"".join(zf.read(n) for n in zf.namelist()).decode()
    assert all(p in everything for p in paths)
    assert verify_bundle(own, load_anchors(town_anchors)).ok


def test_a_scoped_bundle_carries_a_config_entry_recorded_after_its_window_as_its_digest_alone(
    tmp_path: Path,
) -> None:
    """A config entry chained between the window's end and the anchor closing the bundle (the
    daemon restarted after the scope with a changed setting) was in a time-scoped reader's bundle
    with its key (the new settings' and profile's SHA-256 and since_us, when the restart was), its
    recorded_us and its row in records/config.json, and verify told the reader that the
    configuration changed after the scope. It is ``seq,,,digest,`` now; the entry the bundle's
    config.toml and profile are (the segment's first, recorded before the window) keeps its key,
    which verify binds them by. The Town's bundle names both, as before."""
    from monitor.evidence import export_bundle, load_anchors
    from monitor.evidence.disclosure import Disclosure, TimeScope
    from monitor.journal import segment
    from monitor.journal.config_record import config_record_texts
    from monitor.wire.canonical import to_us
    from tests.support.evidence import T0, build_site

    site = build_site(tmp_path, final_anchor=False)  # anchors at T0 - 4 min and T0 + 121 s
    store = Store(str(site.store))
    site_config = site.config.site("quarry")
    assert site_config is not None
    profile, profile_text, config_text = config_record_texts(site.config, site_config)
    restarted = T0 + timedelta(seconds=250)
    with store.batch():  # a restart after the window with a setting changed, then the next anchor
        store.append_config_record("quarry", profile, profile_text, config_text + "\n# changed\n", restarted)
        seq, head = store.head("quarry")
        store.record_anchor("quarry", seq, head, T0 + timedelta(seconds=300))
        store.restate_config("quarry", T0 + timedelta(seconds=300))
    key, digest = store.conn.execute(
        "SELECT key, digest FROM chain WHERE site = 'quarry' AND seq = ?", (seq,)
    ).fetchone()
    anchors = [
        {"site": s, "seq": n, "head": h, "published_us": p}
        for s, n, h, p in segment.anchors(store.conn, "quarry")
    ]
    store.close()
    town_anchors = tmp_path / "held.json"
    town_anchors.write_text(json.dumps(anchors))
    window = (T0 + timedelta(seconds=130), T0 + timedelta(seconds=200))
    scope = TimeScope(to_us(window[0]), to_us(window[1]) - 1)
    changed = key.split("|")[0]  # the changed configuration's SHA-256

    out = tmp_path / "scoped.zip"
    export_bundle(site.config, "quarry", *window, out, plots=False, disclosure=Disclosure(time_scope=scope))
    with zipfile.ZipFile(out) as zf:
        everything = b"".join(zf.read(n) for n in zf.namelist()).decode()
        chain = zf.read("chain.csv").decode()
        configs = json.loads(zf.read("records/config.json"))
        manifest = json.loads(zf.read("manifest.json"))
    assert manifest["chain"]["last_seq"] == seq  # the restart lies in the segment, after the window
    assert f"\n{seq},,,{digest},\n" in chain
    assert changed not in everything and str(to_us(restarted)) not in everything
    assert [c["chain_seq"] for c in configs] == [manifest["config"]["chain_seq"]]  # config.toml's, kept
    assert configs[0]["row"]["config_sha256"] != changed
    report = verify_bundle(out, load_anchors(town_anchors))
    assert report.ok and report.anchored_to == seq, report.problems
    assert "configuration" in report.config and not any("changed at seq" in n for n in report.notes)
    assert report.digest_only == manifest["disclosure"]["digest_only"]
    assert manifest["warnings"] == [], manifest["warnings"]

    whole = tmp_path / "town.zip"  # the Town's bundle of the same window: the restart as it was
    export_bundle(site.config, "quarry", *window, whole, plots=False)
    with zipfile.ZipFile(whole) as zf:
        assert f"\n{seq},config,{key}," in zf.read("chain.csv").decode()
    report = verify_bundle(whole, load_anchors(town_anchors))
    assert report.ok, report.problems
    assert any(f"changed at seq {seq}" in n for n in report.notes), report.notes


def _report_alerts_new_and_old(
    tmp_path: Path,
) -> tuple[Config, Store, dict[str, Any], dict[str, Any], Path]:
    """A store with a report of 2026-06-15 sent (its alert naming the files by SHA-256) and an
    alert for it chained as an older minewatch did, naming the files' paths under ``tmp_path``
    (report_pdf, report_csv): the config, the open store, the two alerts as queued and the PDF's path."""
    config = make_config(tmp_path / "r.db")
    site, profile = site_and_profile(config)
    store = Store(config.storage.path)
    store_findings(store, minutes(local(2026, 6, 15, 10), 2), local(2026, 6, 15, 10, 5))
    period = period_of(date(2026, 6, 15), date(2026, 6, 15), TZ, "2026-06-15")
    report = build_report(store.conn, site, profile, period, local(2026, 6, 16, 6))
    pdf_path = tmp_path / "reports" / "quarry-2026-06-15.pdf"
    sent = send_report(config, store, report, b"pdf", b"csv", str(pdf_path), local(2026, 6, 16, 6))
    with store.batch():
        before = report_alert_as_before(
            store, period.start, period.end, local(2026, 6, 16, 6, 30), b"pdf-", b"csv-", str(pdf_path), []
        )
    return config, store, sent, before, pdf_path
