"""What the manifest says beside its counts, held against the bundle.

No hash covers manifest.json, and verify held its counts against the bundle (test_manifest_counts)
but took the rest on trust: an anchor's published_utc, the anchor the segment was extended to, the
pruned part's times, the config entry named for config.toml and the profile, the profile's file
and the agreement said again could each be changed and the bundle verified, exit 0. Each is now
held against what the bundle holds, a disagreement one line naming the field (exit 1).
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from monitor.config import load_config
from monitor.evidence import export_bundle, verify_bundle
from monitor.journal.store import Store, to_us
from tests.support.cli import run_minewatch
from tests.support.evidence import (
    SITE,
    T0,
    WINDOW,
    Manifest,
    Site,
    build_site,
    export,
    first_problem,
    manifest_lie,
    rewrite,
)


def _manifest(bundle: Path) -> Manifest:
    with zipfile.ZipFile(bundle) as zf:
        manifest: Manifest = json.loads(zf.read("manifest.json"))
    return manifest


def _lying(bundle: Path, change: Callable[[Manifest], None], out: Path) -> Path:
    return rewrite(bundle, out, {"manifest.json": manifest_lie(change)}, rehash=False)


def _last_anchor(m: Manifest) -> dict[str, Any]:
    anchor: dict[str, Any] = m["anchors"][-1]
    return anchor


def _published_later(m: Manifest) -> None:
    """Both forms of the last anchor's publication time moved a minute on, as a careful forger would."""
    _last_anchor(m).update(published_us=1710057840000000, published_utc="2024-03-10T08:04:00Z")


# build_site's bundle: the segment is seq 2 to 515, its config entry at seq 2, the last anchor at
# seq 515, published 2024-03-10T08:03:00Z. (what the manifest is made to say, verify's one line)
LIES: dict[str, tuple[Callable[[Manifest], None], str]] = {
    "an anchor's readable publication time": (
        lambda m: _last_anchor(m).update(published_utc="2024-03-10T08:13:00Z"),
        'its anchors[seq 515].published_utc is "2024-03-10T08:13:00Z", its published_us'
        " (1710057780000000) is 2024-03-10T08:03:00Z",
    ),
    "an anchor's publication time, in both forms": (
        _published_later,
        "its anchors[seq 515].published_us is 1710057840000000, anchors.json's anchor at seq 515 has"
        " 1710057780000000",
    ),
    "an anchor's site": (
        lambda m: _last_anchor(m).update(site="pit"),
        'its anchors[seq 515].site is "pit", anchors.json\'s anchor at seq 515 has "quarry"',
    ),
    "no anchor the segment was extended to": (
        lambda m: m["chain"].update(extended_to_anchor=None),
        "its chain.extended_to_anchor is null, the segment ends at seq 515, the anchor anchors.json"
        " holds there",
    ),
    "an earlier anchor the segment was extended to": (
        lambda m: m["chain"].update(extended_to_anchor=1),
        "its chain.extended_to_anchor is 1, the segment ends at seq 515, the anchor anchors.json holds there",
    ),
    "the configuration's config entry": (
        lambda m: m["config"].update(chain_seq=3),
        "its config.chain_seq is 3, config.toml and profile/dovre.toml are bound by the config entry at"
        " seq 2, the segment's first naming a profile",
    ),
    "the profile's config entry, none": (
        lambda m: m["profile"].update(chain_seq=None),
        "its profile.chain_seq is null, config.toml and profile/dovre.toml are bound by the config entry"
        " at seq 2, the segment's first naming a profile",
    ),
    "the profile's config entry, as text": (
        lambda m: m["profile"].update(chain_seq="2"),
        'its profile.chain_seq is "2", config.toml and profile/dovre.toml are bound by the config entry'
        " at seq 2, the segment's first naming a profile",
    ),
    "the profile's file": (
        lambda m: m["profile"].update(file="profile/lenient.toml"),
        'its profile.file is "profile/lenient.toml", the profile bound is profile/dovre.toml (config.toml'
        " and profile/dovre.toml are bound by the config entry at seq 2, the segment's first naming a"
        " profile)",
    ),
    "the configuration's file": (
        lambda m: m["config"].update(file="settings.toml"),
        'its config.file is "settings.toml", the configuration is config.toml in every bundle',
    ),
    "the chain's file": (
        lambda m: m["chain"].update(file="chain-2.csv"),
        'its chain.file is "chain-2.csv", the chain is chain.csv in every bundle',
    ),
    "an agreement config.toml does not give": (
        lambda m: m["profile"].update(agreement={"noise.limit_db": 85.0}),
        'its profile.agreement is {"noise.limit_db": 85.0}, config.toml gives site quarry the agreement {}',
    ),
}


@pytest.mark.parametrize("lie", LIES, ids=list(LIES))
def test_a_statement_of_the_manifest_that_the_bundle_contradicts_fails(
    site: Site, tmp_path: Path, lie: str
) -> None:
    bundle = export(site, tmp_path / "b.zip")
    report = verify_bundle(bundle)
    assert report.ok, report.lines()
    change, said = LIES[lie]
    lying = _lying(bundle, change, tmp_path / "lying.zip")
    assert first_problem(lying) == "manifest not matching: " + said
    report = verify_bundle(lying)
    assert [p.category for p in report.problems] == ["manifest"], report.lines()


def test_verify_exits_1_naming_the_statement(site: Site, tmp_path: Path) -> None:
    bundle = export(site, tmp_path / "b.zip")
    assert run_minewatch("verify", bundle).returncode == 0
    lying = _lying(bundle, lambda m: m["config"].update(chain_seq=3), tmp_path / "lying.zip")
    done = run_minewatch("verify", lying)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.splitlines()[0] == (
        f"{lying}: FAILED: manifest not matching: its config.chain_seq is 3, config.toml and"
        " profile/dovre.toml are bound by the config entry at seq 2, the segment's first naming a profile"
    )


def test_an_anchor_extended_to_where_the_segment_ends_at_none_fails(tmp_path: Path) -> None:
    """No anchor published after the window: the segment ends at its last record, no anchor."""
    site = build_site(tmp_path, final_anchor=False)
    bundle = export(site, tmp_path / "b.zip")
    manifest = _manifest(bundle)
    last = manifest["chain"]["last_seq"]
    assert manifest["chain"]["extended_to_anchor"] is None
    assert verify_bundle(bundle).ok
    lying = _lying(bundle, lambda m: m["chain"].update(extended_to_anchor=last), tmp_path / "lying.zip")
    assert first_problem(lying) == (
        f"manifest not matching: its chain.extended_to_anchor is {last}, the segment ends at seq {last},"
        " where anchors.json holds no anchor"
    )


def test_an_anchor_extended_to_by_an_empty_bundle_fails(site: Site, tmp_path: Path) -> None:
    day_before = (T0 - timedelta(days=1), T0 - timedelta(days=1) + timedelta(hours=2))
    bundle = tmp_path / "empty.zip"
    export_bundle(site.config, SITE, *day_before, bundle, plots=False)
    assert verify_bundle(bundle).ok
    lying = _lying(bundle, lambda m: m["chain"].update(extended_to_anchor=1), tmp_path / "lying.zip")
    assert first_problem(lying) == (
        "manifest not matching: its chain.extended_to_anchor is 1, the segment holds no entry"
    )


def test_an_anchors_file_whose_readable_time_is_not_its_time_fails(site: Site, tmp_path: Path) -> None:
    """anchors.json's own published_utc, with its SHA-256 and counts restated in the manifest."""
    bundle = export(site, tmp_path / "b.zip")

    def later(data: bytes) -> bytes:
        anchors = json.loads(data)
        anchors[-1]["published_utc"] = "2024-03-10T08:13:00Z"
        return json.dumps(anchors).encode()

    forged = rewrite(bundle, tmp_path / "forged.zip", {"anchors.json": later})
    assert first_problem(forged) == (
        'anchor not matching: anchors.json\'s anchor at seq 515 says published_utc "2024-03-10T08:13:00Z",'
        " its published_us (1710057780000000) is 2024-03-10T08:03:00Z"
    )


# ------------------------------------------------------------------ the pruned part

CUT = T0 + timedelta(seconds=120)  # the store pruned before it: the window's first two minutes
FROM_US, CUT_US = to_us(WINDOW[0]), to_us(CUT)


@pytest.fixture
def pruned(site: Site, tmp_path: Path) -> Path:
    """A bundle whose window's first two minutes the store had pruned (no InfluxDB to read them)."""
    store = Store(site.store)
    assert store.prune(CUT) > 0
    store.close()
    bundle = export(site, tmp_path / "pruned.zip")
    manifest = _manifest(bundle)
    assert manifest["pruned_locally"] == {
        "from_us": FROM_US,
        "to_us": CUT_US,
        "from_utc": "2024-03-10T07:58:00Z",
        "to_utc": "2024-03-10T08:00:00Z",
        "read": False,
    }
    assert manifest["scope"]["chained_from_us"] == CUT_US
    report = verify_bundle(bundle)
    assert report.ok, report.lines()
    return bundle


PRUNED_LIES: dict[str, tuple[Callable[[Manifest], None], str]] = {
    "nothing pruned": (
        lambda m: m.update(pruned_locally=None),
        f"its pruned_locally is null, its scope.chained_from_us ({CUT_US}) is after its window.from_us"
        f" ({FROM_US}): the part before was pruned locally",
    ),
    "a shorter pruned part": (
        lambda m: m["pruned_locally"].update(to_us=CUT_US - 60_000_000),
        f"its pruned_locally.to_us is {CUT_US - 60_000_000}, its scope.chained_from_us is {CUT_US}",
    ),
    "its readable end": (
        lambda m: m["pruned_locally"].update(to_utc="2024-03-10T07:59:00Z"),
        f'its pruned_locally.to_utc is "2024-03-10T07:59:00Z", its scope.chained_from_us is {CUT_US},'
        " 2024-03-10T08:00:00Z",
    ),
    "a later start": (
        lambda m: m["pruned_locally"].update(from_us=FROM_US + 1),
        f"its pruned_locally.from_us is {FROM_US + 1}, its window.from_us is {FROM_US}",
    ),
    "its readable start": (
        lambda m: m["pruned_locally"].update(from_utc="2024-03-10T07:57:00Z"),
        f'its pruned_locally.from_utc is "2024-03-10T07:57:00Z", its window.from_us is {FROM_US},'
        " 2024-03-10T07:58:00Z",
    ),
}


@pytest.mark.parametrize("lie", PRUNED_LIES, ids=list(PRUNED_LIES))
def test_a_pruned_part_the_bundle_contradicts_fails(pruned: Path, tmp_path: Path, lie: str) -> None:
    change, said = PRUNED_LIES[lie]
    lying = _lying(pruned, change, tmp_path / "lying.zip")
    assert first_problem(lying) == "manifest not matching: " + said
    assert [p.category for p in verify_bundle(lying).problems] == ["manifest"]


def test_a_pruned_part_stated_for_a_bundle_with_none_fails(site: Site, tmp_path: Path) -> None:
    bundle = export(site, tmp_path / "b.zip")
    window = _manifest(bundle)["window"]
    part = {"from_us": window["from_us"], "to_us": window["from_us"] + 60_000_000, "read": False}
    lying = _lying(bundle, lambda m: m.update(pruned_locally=part), tmp_path / "lying.zip")
    said = json.dumps(part)
    assert len(said) <= 80  # said whole
    assert first_problem(lying) == (
        f"manifest not matching: its pruned_locally is {said}, its scope.chained_from_us"
        f" ({window['from_us']}) is not after its window.from_us ({window['from_us']}): no part of the"
        " window was pruned"
    )


def _with_influx_rows(bundle: Path, out: Path, ts: int, change: Callable[[Manifest], None]) -> Path:
    """The bundle with a data/sound_influxdb.csv of one row at ``ts`` added and listed (its SHA-256
    and bytes), the manifest changed by ``change``: as a forger adds rows "read from InfluxDB"."""
    with zipfile.ZipFile(bundle) as zin:
        members = {name: zin.read(name) for name in zin.namelist()}
    utc = "2024-03-10T07:58:30Z"
    data = f"site,sensor,ts_us,time_utc,time_local,LAeq\nquarry,n1,{ts},{utc},{utc},55.5\n".encode()
    name = "data/sound_influxdb.csv"
    manifest = json.loads(members["manifest.json"])
    manifest["files"].append({"name": name, "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)})
    change(manifest)
    members[name], members["manifest.json"] = data, json.dumps(manifest).encode()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zout:
        for member, content in members.items():
            zout.writestr(member, content)
    return out


def test_rows_read_from_influxdb_in_a_bundle_whose_manifest_read_none_fail(
    pruned: Path, tmp_path: Path
) -> None:
    added = _with_influx_rows(pruned, tmp_path / "added.zip", FROM_US + 30_000_000, lambda m: None)
    assert first_problem(added) == (
        "manifest not matching: its pruned_locally.read is false, the bundle holds data/sound_influxdb.csv"
    )
    unnamed = _with_influx_rows(
        pruned,
        tmp_path / "unnamed.zip",
        FROM_US + 30_000_000,
        lambda m: m["pruned_locally"].update(read=True, rows={}),
    )
    assert first_problem(unnamed) == (
        "manifest not matching: its pruned_locally.rows is {}, the bundle holds data/sound_influxdb.csv,"
        " which it does not name"
    )


def test_rows_read_from_influxdb_outside_the_pruned_part_fail(pruned: Path, tmp_path: Path) -> None:
    def named(m: Manifest) -> None:
        m["pruned_locally"].update(read=True, rows={"data/sound_influxdb.csv": 1})

    after = _with_influx_rows(pruned, tmp_path / "after.zip", CUT_US, named)
    assert first_problem(after) == (
        f"manifest not matching: its pruned_locally.to_us is {CUT_US}, data/sound_influxdb.csv holds a row"
        f" at {CUT_US}, not before it"
    )
    inside = _with_influx_rows(pruned, tmp_path / "inside.zip", CUT_US - 1, named)
    assert verify_bundle(inside).ok, verify_bundle(inside).lines()


# ------------------------------------------------------------------ the agreement


def test_the_agreement_stated_is_the_one_config_toml_gives_after_the_configuration_changed(
    site: Site, tmp_path: Path
) -> None:
    """The store chained the site with no agreement; the configuration gives one now. The export
    stated today's agreement beside the chained config.toml (which gives none), so an honest
    bundle said two things; it states config.toml's, and verifies."""
    text = site.config_path.read_text()
    changed = text.replace(
        'profile = "dovre"', 'profile = "dovre"\nagreement = { "noise.limit_db" = 85.0 }', 1
    )
    assert changed != text
    site.config_path.write_text(changed)
    config = load_config(site.config_path)
    assert dict(config.sites[0].agreement) == {"noise.limit_db": 85.0}
    bundle = tmp_path / "b.zip"
    export_bundle(config, SITE, *WINDOW, bundle, plots=False)
    assert _manifest(bundle)["profile"]["agreement"] == {}
    report = verify_bundle(bundle)
    assert report.ok, report.lines()


@pytest.mark.parametrize("text", [b"sites = [\n", b"a = " + b"[" * 100_000], ids=["no TOML", "nested deep"])
def test_an_agreement_that_config_toml_cannot_tell_is_said_to_be_unchecked(
    site: Site, tmp_path: Path, text: bytes
) -> None:
    """config.toml replaced by a text that is no TOML (its SHA-256 restated): the configuration
    chained is not that file, and the manifest's agreement cannot be held to it, which a note says.
    Arrays nested 100,000 deep, which the TOML reader recurses into, are no TOML either (not a
    RecursionError that made the whole bundle unreadable)."""
    bundle = export(site, tmp_path / "b.zip")
    forged = rewrite(bundle, tmp_path / "forged.zip", {"config.toml": lambda _: text})
    report = verify_bundle(forged)
    # the configuration chained is not that file, nor is the SHA-256 the manifest says again
    assert [p.category for p in report.ranked] == ["config", "manifest"], report.lines()
    assert report.ranked[1].message.startswith("manifest not matching: its config.sha256 is ")
    assert (
        "the manifest's profile.agreement cannot be checked: config.toml holds no site quarry this"
        " verifier can read"
    ) in report.notes
