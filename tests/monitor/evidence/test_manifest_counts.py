"""The manifest's counts held against the bundle.

The red-team probe: a bundle whose manifest.json stated other rows (a file's, the summary's),
chain entries, entries carried as digests, anchors or bytes than the bundle holds verified with
exit 0, verify printing its own counts beside them and never saying they disagree. An inspector
reads the manifest, and no hash covers it: every count it states is now held against what the
bundle holds, a disagreement a failure naming the field, the manifest's value and the bundle's.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from monitor.evidence import export_bundle, verify_bundle
from tests.support.cli import run_minewatch
from tests.support.evidence import SITE, WINDOW, Manifest, Site, export, first_problem, manifest_lie, rewrite


def _file(manifest: Manifest, name: str) -> dict[str, Any]:
    return next(entry for entry in manifest["files"] if entry["name"] == name)


# (what the manifest is made to say, the one line verify must answer with)
LIES: dict[str, tuple[Callable[[Manifest], None], str]] = {
    "a file's rows": (
        lambda m: _file(m, "data/light.csv").update(rows=30),
        "its files[data/light.csv].rows is 30, data/light.csv holds 24 rows",
    ),
    "the rows summary": (
        lambda m: m["rows"].update({"data/light.csv": 30}),
        "its rows[data/light.csv] is 30, data/light.csv holds 24 rows",
    ),
    "a count written as text": (
        lambda m: _file(m, "data/light.csv").update(rows="24"),
        'its files[data/light.csv].rows is "24", data/light.csv holds 24 rows',
    ),
    "a sound part's rows (counted by the part's worker)": (
        lambda m: _file(m, "data/sound/part-00001.csv").update(rows=400),
        "its files[data/sound/part-00001.csv].rows is 400, data/sound/part-00001.csv holds 480 rows",
    ),
    "a record file's rows": (
        lambda m: m["rows"].update({"records/findings.json": 5}),
        "its rows[records/findings.json] is 5, records/findings.json holds 2 rows",
    ),
    "chain.csv's rows": (
        lambda m: _file(m, "chain.csv").update(rows=600),
        "its files[chain.csv].rows is 600, chain.csv holds 514 entries",
    ),
    "the chain's entries": (
        lambda m: m["chain"].update(entries=600),
        "its chain.entries is 600, chain.csv holds 514 entries",
    ),
    "anchors.json's rows": (
        lambda m: m["rows"].update({"anchors.json": 1}),
        "its rows[anchors.json] is 1, anchors.json holds 3 anchors",
    ),
    "the segment's anchors, one listed twice": (
        lambda m: m["anchors"].append(m["anchors"][-1]),
        "its anchors lists 4 anchors, anchors.json holds 3 inside the segment (seq 1 to 515)",
    ),
    "a file's bytes": (
        lambda m: _file(m, "config.toml").update(bytes=10),
        "its files[config.toml].bytes is 10, config.toml holds {config_bytes} bytes",
    ),
    "rows of a file that holds none": (
        lambda m: _file(m, "config.toml").update(rows=3),
        "its files[config.toml].rows is 3, config.toml is no file of rows",
    ),
    "rows of a file the bundle does not hold": (
        lambda m: m["rows"].update({"data/sound_influxdb.csv": 86400}),
        "its rows[data/sound_influxdb.csv] is 86400, the bundle holds no data/sound_influxdb.csv",
    ),
    "rows read from InfluxDB": (
        lambda m: m.update(pruned_locally={"rows": {"data/sound_influxdb.csv": 86400}}),
        "its pruned_locally.rows[data/sound_influxdb.csv] is 86400, the bundle holds no"
        " data/sound_influxdb.csv",
    ),
    "the configuration's SHA-256, said again": (
        lambda m: m["config"].update(sha256="0" * 64),
        f'its config.sha256 is "{"0" * 64}", config.toml\'s SHA-256 is {{config.toml}}',
    ),
    "the profile's SHA-256, said again": (
        lambda m: m["profile"].update(sha256="0" * 64),
        f'its profile.sha256 is "{"0" * 64}", profile/dovre.toml\'s SHA-256 is {{profile/dovre.toml}}',
    ),
    "no plots in a bundle with plots": (
        lambda m: m.update(plots=False),
        "its plots is false, the bundle holds 3 plots",
    ),
    "the window's readable start": (
        lambda m: m["window"].update(from_utc="2024-03-10T07:00:00Z"),
        'its window.from_utc is "2024-03-10T07:00:00Z", its window.from_us (1710057480000000) is'
        " 2024-03-10T07:58:00Z",
    ),
    "the window's readable end, site time": (
        lambda m: m["window"].update(to_local="2024-03-10T04:02:00-05:00"),
        'its window.to_local is "2024-03-10T04:02:00-05:00", its window.to_us (1710057720000000) is'
        " 2024-03-10T03:02:00-05:00",
    ),
}


@pytest.mark.parametrize("lie", LIES, ids=list(LIES))
def test_a_count_the_manifest_states_that_the_bundle_does_not_hold_fails(
    site: Site, tmp_path: Path, lie: str
) -> None:
    bundle = export(site, tmp_path / "b.zip", plots=True)
    report = verify_bundle(bundle)
    assert report.ok, report.lines()
    change, said = LIES[lie]
    lying = rewrite(bundle, tmp_path / "lying.zip", {"manifest.json": manifest_lie(change)}, rehash=False)
    files = json.loads(_read(bundle, "manifest.json"))["files"]
    config_bytes = _file({"files": files}, "config.toml")["bytes"]
    hashes = {entry["name"]: entry["sha256"] for entry in files}
    expected = said.replace("{config_bytes}", str(config_bytes))
    for name in ("config.toml", "profile/dovre.toml"):
        expected = expected.replace("{" + name + "}", hashes[name])
    assert first_problem(lying) == "manifest not matching: " + expected
    report = verify_bundle(lying)
    # rows read from InfluxDB in a bundle with no pruned part: its pruned_locally is a second
    assert {p.category for p in report.problems} == {"manifest"}, report.lines()


def test_entries_carried_as_digests_that_the_manifest_miscounts_fail(site: Site, tmp_path: Path) -> None:
    """disclosure.digest_only: the window's third minute leaves an alert, an event and two
    findings of the segment as their digests alone."""
    start = WINDOW[0] + timedelta(minutes=2)
    bundle = tmp_path / "b.zip"
    export_bundle(site.config, SITE, start, start + timedelta(minutes=1), bundle, plots=False)
    report = verify_bundle(bundle)
    assert report.ok, report.lines()
    assert report.digest_only == {"alert": 1, "event": 1, "finding": 2}

    def digests(value: Any) -> Callable[[Manifest], None]:
        return lambda m: m["disclosure"].update(digest_only=value)

    for value, said in (
        (
            {"alert": 1, "event": 1, "finding": 1},
            "its disclosure.digest_only[finding] is 1, chain.csv holds 2",
        ),
        ({"alert": 1, "finding": 2}, "its disclosure.digest_only[event] is 0, chain.csv holds 1"),
        ({}, "its disclosure.digest_only[alert] is 0, chain.csv holds 1"),
        ([], "its disclosure.digest_only is [], chain.csv holds 4"),
    ):
        lying = rewrite(
            bundle, tmp_path / "lying.zip", {"manifest.json": manifest_lie(digests(value))}, rehash=False
        )
        assert first_problem(lying).startswith(
            f"manifest not matching: {said} entries as their digests alone"
        )


def test_a_file_listed_twice_is_held_to_each_sha256_listed(site: Site, tmp_path: Path) -> None:
    """The files list read into a mapping kept the last entry of a name: one listed first with
    another SHA-256 (the entry a reader finds) was never compared."""
    bundle = export(site, tmp_path / "b.zip")

    def twice(m: Manifest) -> None:
        m["files"].insert(0, {**_file(m, "data/light.csv"), "sha256": "0" * 64})

    lying = rewrite(bundle, tmp_path / "lying.zip", {"manifest.json": manifest_lie(twice)}, rehash=False)
    assert first_problem(lying) == "file changed: data/light.csv does not match its SHA-256 in the manifest"


def test_verify_exits_1_naming_the_count(site: Site, tmp_path: Path) -> None:
    bundle = export(site, tmp_path / "b.zip")
    lying = rewrite(
        bundle,
        tmp_path / "lying.zip",
        {"manifest.json": manifest_lie(lambda m: m["chain"].update(entries=600))},
        rehash=False,
    )
    done = run_minewatch("verify", lying)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.splitlines()[0] == (
        f"{lying}: FAILED: manifest not matching: its chain.entries is 600, chain.csv holds 514 entries"
    )


def test_a_removed_row_is_named_before_the_count_it_makes_differ(site: Site, tmp_path: Path) -> None:
    """A row dropped with the manifest's hash fixed and its counts left: the row is the problem
    the verdict names, the count listed after it."""
    bundle = export(site, tmp_path / "b.zip")
    with_lines = _read(bundle, "data/light.csv").decode().splitlines(keepends=True)
    forged = rewrite(
        bundle, tmp_path / "forged.zip", {"data/light.csv": lambda _: "".join(with_lines[:-1]).encode()}
    )
    manifest = json.loads(_read(forged, "manifest.json"))
    _file(manifest, "data/light.csv").update(rows=24)  # as exported: restated by rewrite, stated again
    manifest["rows"]["data/light.csv"] = 24
    lying = rewrite(
        forged,
        tmp_path / "lying.zip",
        {"manifest.json": lambda _: json.dumps(manifest).encode()},
        rehash=False,
    )
    report = verify_bundle(lying)
    assert [p.category for p in report.ranked] == ["row", "manifest", "manifest"], report.lines()
    assert report.ranked[0].message.startswith("row removed: chain seq ")
    assert (
        report.ranked[1].message
        == "manifest not matching: its files[data/light.csv].rows is 24, data/light.csv holds 23 rows"
    )


def _read(bundle: Path, name: str) -> bytes:
    with zipfile.ZipFile(bundle) as zf:
        return zf.read(name)
