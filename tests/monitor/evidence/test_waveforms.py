"""A seismograph's waveform chunks travel with an evidence bundle as rows (records/waveforms.json,
samples as base64), so that verify hashes the samples themselves against the chain (issue 27)."""

from __future__ import annotations

import base64
import json
import sqlite3
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from monitor.evidence import export_bundle, load_anchors, verify_bundle
from monitor.evidence.disclosure import Disclosure
from monitor.evidence.format import RECORD_KINDS
from tests.support.evidence import (
    SEISMIC_AT,
    SITE,
    WINDOW,
    Site,
    build_site,
    export,
    first_problem,
    rewrite,
)

WAVEFORMS = "records/waveforms.json"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Site:
    return build_site(tmp_path_factory.mktemp("seismic"), seismic=True)


def _stored(site: Site) -> list[tuple[str, int, bytes]]:
    with sqlite3.connect(site.store) as conn:
        rows = conn.execute(
            "SELECT header, chunk, samples FROM waveforms WHERE sensor = 'sg1' ORDER BY chunk"
        ).fetchall()
    conn.close()
    return [(h, c, bytes(s)) for h, c, s in rows]


def _elements(data: bytes) -> list[dict[str, object]]:
    return [json.loads(line.rstrip(",")) for line in data.decode().splitlines() if line not in ("[", "]")]


def _edit_element(index: int, change: Callable[[dict[str, object]], None]) -> Callable[[bytes], bytes]:
    """Edit the ``index``-th row of records/waveforms.json, written back one element a line."""

    def edit(data: bytes) -> bytes:
        elements = _elements(data)
        change(elements[index]["row"])  # type: ignore[arg-type]
        return ("[\n" + ",\n".join(json.dumps(e) for e in elements) + "\n]\n").encode()

    return edit


def test_every_chunk_is_a_row_whose_samples_verify_against_the_chain(site: Site, tmp_path: Path) -> None:
    stored = _stored(site)
    assert len(stored) == 3  # 2 s x 1,024 samples/s x 4 channels x 4 bytes, in 16 KiB chunks
    bundle = export(site, tmp_path / "b.zip")
    report = verify_bundle(bundle, load_anchors(site.anchors))
    assert report.anchored, report.lines()
    assert report.rows_checked[WAVEFORMS] == 3
    # the summaries are chain links (the waveforms they are computed from are rows)
    assert report.links_only == {
        "seismic readings (chain links only)": 1,
        "seismic-waveforms readings (chain links only)": 1,
    }
    with zipfile.ZipFile(bundle) as zf:
        elements = _elements(zf.read(WAVEFORMS))
    assert [e["key"] for e in elements] == ["sg1|ev1|0", "sg1|ev1|1", "sg1|ev1|2"]
    for element, (header, chunk, samples) in zip(elements, stored, strict=True):
        row = element["row"]
        assert isinstance(row, dict)
        assert base64.b64decode(row["samples_base64"]) == samples  # the very bytes stored
        assert row["header"] == header and row["chunk"] == chunk and "samples_sha256" not in row
        assert element["derived"]["ts_utc"] == "2024-03-10T08:00:30Z"  # type: ignore[index]
    assert SEISMIC_AT.isoformat().startswith("2024-03-10T08:00:30")


def _flip_sample(row: dict[str, object]) -> None:
    samples = bytearray(base64.b64decode(str(row["samples_base64"])))
    samples[4 * 1000 + 1] ^= 0x01  # one bit of one sample of the vertical axis
    row["samples_base64"] = base64.b64encode(bytes(samples)).decode()


def _rescale(row: dict[str, object]) -> None:
    row["header"] = str(row["header"]).replace('"scale":[1.0,1.0,1.0,1.0]', '"scale":[2.0,2.0,2.0,2.0]')


@pytest.mark.parametrize(
    ("change", "what"),
    [
        (_flip_sample, "one bit of one sample"),
        (_rescale, "the header's calibration scale"),
        (lambda row: row.update(chunk=5), "the chunk number"),
    ],
)
def test_a_tampered_waveform_row_fails_verify(
    site: Site, tmp_path: Path, change: Callable[[dict[str, object]], None], what: str
) -> None:
    bundle = export(site, tmp_path / "b.zip")
    forged = rewrite(bundle, tmp_path / "forged.zip", {WAVEFORMS: _edit_element(1, change)})
    problem = first_problem(forged, site.anchors)
    assert problem.startswith(f"row altered: {WAVEFORMS} line 3 (sg1|ev1|1, chain seq "), (what, problem)


def test_samples_that_are_not_base64_are_a_malformed_row(site: Site, tmp_path: Path) -> None:
    bundle = export(site, tmp_path / "b.zip")
    forged = rewrite(
        bundle, tmp_path / "forged.zip", {WAVEFORMS: _edit_element(0, lambda r: r.update(samples_base64="*"))}
    )
    report = verify_bundle(forged, load_anchors(site.anchors))
    messages = [p.message for p in report.problems]
    assert messages[0].startswith(f"row malformed: {WAVEFORMS} line 2:")
    assert any(m.startswith("row removed: chain seq") and "sg1|ev1|0" in m for m in messages)


def test_a_removed_waveforms_file_fails_verify(site: Site, tmp_path: Path) -> None:
    bundle = export(site, tmp_path / "b.zip")
    stripped = tmp_path / "stripped.zip"
    with zipfile.ZipFile(bundle) as zin, zipfile.ZipFile(stripped, "w") as zout:
        manifest = json.loads(zin.read("manifest.json"))
        manifest["files"] = [f for f in manifest["files"] if f["name"] != WAVEFORMS]
        del manifest["rows"][WAVEFORMS]
        for name in zin.namelist():
            if name not in (WAVEFORMS, "manifest.json"):
                zout.writestr(name, zin.read(name))
        zout.writestr("manifest.json", json.dumps(manifest))
    problem = first_problem(stripped, site.anchors)
    assert problem.startswith("row removed: chain seq ") and f"(sg1|ev1|0) belongs in {WAVEFORMS}" in problem


def test_a_reader_not_allowed_waveforms_gets_their_digests_alone(site: Site, tmp_path: Path) -> None:
    """The allow-list: a reader whose kinds leave out waveforms sees no sample, and the chain still
    recomputes through the chunks' digests."""
    bundle = tmp_path / "b.zip"
    sight = Disclosure(kinds=frozenset(RECORD_KINDS) - {"waveform"})
    export_bundle(site.config, SITE, *WINDOW, bundle, plots=False, disclosure=sight)
    report = verify_bundle(bundle, load_anchors(site.anchors))
    assert report.anchored, report.lines()
    assert report.digest_only == {"waveform": 3}
    assert report.rows_checked[WAVEFORMS] == 0
    with zipfile.ZipFile(bundle) as zf:
        assert _elements(zf.read(WAVEFORMS)) == []
        chain = zf.read("chain.csv").decode()
    assert "sg1|ev1|" not in chain and chain.count(",waveform,,") == 3


def test_a_bundle_exported_before_waveforms_were_rows_still_verifies(site: Site, tmp_path: Path) -> None:
    """A format-4 bundle made before this change listed no ``waveform`` among its disclosed kinds
    and carried the chunks' entries (with their keys) as links only: they stay links, said so."""
    bundle = export(site, tmp_path / "b.zip")
    older = tmp_path / "older.zip"
    with zipfile.ZipFile(bundle) as zin, zipfile.ZipFile(older, "w") as zout:
        manifest = json.loads(zin.read("manifest.json"))
        manifest["files"] = [f for f in manifest["files"] if f["name"] != WAVEFORMS]
        del manifest["rows"][WAVEFORMS]
        manifest["disclosure"]["kinds"].remove("waveform")
        for name in zin.namelist():
            if name not in (WAVEFORMS, "manifest.json"):
                zout.writestr(name, zin.read(name))
        zout.writestr("manifest.json", json.dumps(manifest))
    report = verify_bundle(older, load_anchors(site.anchors))
    assert report.anchored, report.lines()
    assert report.links_only["seismograph waveform entries (exported before they were rows)"] == 3
    assert WAVEFORMS not in report.rows_checked
