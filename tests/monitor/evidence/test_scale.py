"""Evidence format 3 at scale: chain.csv without heads, sound rows in parts checked in parallel,
progress on a terminal only."""

from __future__ import annotations

import io
import json
import math
import os
import pty
import random
import subprocess
import sys
import threading
import zipfile
from pathlib import Path

import pytest

from monitor.cli import main
from monitor.evidence import FORMAT, load_anchors, verify_bundle
from monitor.evidence import export as export_module
from monitor.evidence.format import sound_digest_cells
from monitor.evidence.progress import Progress, render
from monitor.journal.chain_kinds import SOUND_FIELDS, digest_of, sound_record
from tests.support.evidence import (
    SITE,
    Site,
    build_site,
    csv_bytes,
    csv_rows,
    edit_rows,
    export,
    first_problem,
    rewrite,
)
from tests.support.paths import REPO

ROOT = REPO


@pytest.fixture
def site(tmp_path: Path) -> Site:
    return build_site(tmp_path)


def _parts(bundle: Path) -> dict[str, list[list[str]]]:
    with zipfile.ZipFile(bundle) as zf:
        return {n: csv_rows(zf.read(n)) for n in sorted(zf.namelist()) if n.startswith("data/sound/")}


def test_format_3_chain_holds_no_heads_and_tags_the_sound_rows_it_carries(site: Site, tmp_path: Path) -> None:
    bundle = export(site, tmp_path / "b.zip")
    with zipfile.ZipFile(bundle) as zf:
        manifest = json.loads(zf.read("manifest.json"))
        chain = csv_rows(zf.read("chain.csv"))
        sound = csv_rows(zf.read("data/sound/part-00001.csv"))
    assert manifest["format"] == FORMAT == "minewatch-evidence/4"  # format 3's chain.csv, kept in format 4
    assert chain[0] == ["seq", "kind", "key", "digest", "recorded_us"]
    digests = {int(r[0]): sound_digest_cells(r) for r in sound[1:]}
    tagged = [r for r in chain[1:] if r[1] == "sound"]
    assert len(tagged) == len(digests) == 480
    for seq, _, key, digest, recorded in tagged:  # the row gives the key, digest and time
        assert key == "" and recorded == "" and digest == digests[int(seq)][:8]
    others = [r for r in chain[1:] if r[1] != "sound"]
    assert others and all(len(r[3]) == 64 and r[2] for r in others)
    report = verify_bundle(bundle, load_anchors(site.anchors))
    assert report.ok and report.anchored, report.lines()
    assert report.rows_checked["data/sound/part-*.csv"] == 480


def test_a_row_changed_with_its_tag_rewritten_breaks_the_chain_at_the_next_recorded_head(
    site: Site, tmp_path: Path
) -> None:
    """A forger who rewrites the tag too (but not the heads) is caught by the recomputed heads,
    which no longer lead to the head the bundle records at the next anchor."""
    bundle = export(site, tmp_path / "b.zip")
    sound = _parts(bundle)["data/sound/part-00001.csv"]
    row = sound[30]
    row[7] = repr(float(row[7]) + 2.0)
    seq, tag = row[0], sound_digest_cells(row)[:8]

    def retag(rows: list[list[str]]) -> None:
        for r in rows:
            if r[0] == seq:
                r[3] = tag

    forged = rewrite(
        bundle,
        tmp_path / "f.zip",
        {"data/sound/part-00001.csv": lambda _: csv_bytes(sound), "chain.csv": edit_rows(retag)},
    )
    message = first_problem(forged)
    assert message.startswith("chain broken between seq "), message
    first, last = (int(x) for x in message.split("between seq ")[1].split(":")[0].split(" and "))
    assert first <= int(seq) <= last


def _small_parts(monkeypatch: pytest.MonkeyPatch, site: Site, path: Path) -> Path:
    monkeypatch.setattr(export_module, "SOUND_PART_ROWS", 64)
    return export(site, path)


def test_sound_rows_come_in_parts_and_each_part_is_checked(
    site: Site, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle = _small_parts(monkeypatch, site, tmp_path / "b.zip")
    parts = _parts(bundle)
    assert list(parts) == [f"data/sound/part-{i:05d}.csv" for i in range(1, 9)]  # 480 rows, 64 a part
    assert [len(rows) - 1 for rows in parts.values()] == [64] * 7 + [32]
    assert verify_bundle(bundle, workers=2).ok
    # a changed value in the third part is named by its part and line
    third = "data/sound/part-00003.csv"
    louder = edit_rows(lambda rows: rows[5].__setitem__(7, repr(float(rows[5][7]) + 3.0)))
    forged = rewrite(bundle, tmp_path / "f.zip", {third: louder})
    assert first_problem(forged).startswith(f"row altered: {third} line 6 (sensor ")
    # a missing part is a missing file of the format, and its rows are missing rows
    dropped = tmp_path / "dropped.zip"
    with zipfile.ZipFile(bundle) as zin, zipfile.ZipFile(dropped, "w") as zout:
        for name in zin.namelist():
            if name != third:
                zout.writestr(name, zin.read(name))
    report = verify_bundle(dropped)
    messages = [p.message for p in report.problems]
    assert f"file missing: {third} is listed in the manifest but not in the bundle" in messages
    assert any(m.startswith("row removed: chain seq ") for m in messages)


def _tampered(bundle: Path, tmp_path: Path) -> list[Path]:
    """A changed row, a removed row, rows swapped across a part boundary."""
    out = []
    change = edit_rows(lambda rows: rows[9].__setitem__(8, repr(float(rows[9][8]) - 1.0)))
    out.append(rewrite(bundle, tmp_path / "changed.zip", {"data/sound/part-00004.csv": change}))
    out.append(
        rewrite(
            bundle,
            tmp_path / "removed.zip",
            {"data/sound/part-00002.csv": edit_rows(lambda rows: rows.__delitem__(3))},
        )
    )
    parts = _parts(bundle)
    a, b = parts["data/sound/part-00005.csv"], parts["data/sound/part-00006.csv"]
    a[-1], b[1] = b[1], a[-1]
    out.append(
        rewrite(
            bundle,
            tmp_path / "swapped.zip",
            {
                "data/sound/part-00005.csv": lambda _: csv_bytes(a),
                "data/sound/part-00006.csv": lambda _: csv_bytes(b),
            },
        )
    )
    return out


def test_numbers_written_another_way_verify_and_a_changed_one_is_named(
    site: Site, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The workers hash a row's text as it stands (the exporter writes repr()); a part with a
    # number written another way is checked again through the float round trip, so only a
    # changed value is a problem, as before.
    bundle = _small_parts(monkeypatch, site, tmp_path / "b.zip")
    third = "data/sound/part-00003.csv"

    def respell(rows: list[list[str]]) -> None:
        rows[2][7] = rows[2][7] + "0"  # 72.5 -> 72.50
        rows[3][7] = f"{float(rows[3][7]):e}" if len(rows[3][7]) < 12 else rows[3][7]
        rows[4][12] = "0" + rows[4][12]  # LCpeak with a leading zero

    respelled = rewrite(bundle, tmp_path / "respelled.zip", {third: edit_rows(respell)})
    for workers in (1, 2):
        report = verify_bundle(respelled, workers=workers)
        assert report.ok, report.lines()

    def respell_and_change(rows: list[list[str]]) -> None:
        respell(rows)
        rows[6][7] = repr(float(rows[6][7]) + 0.5)

    changed = rewrite(bundle, tmp_path / "changed.zip", {third: edit_rows(respell_and_change)})
    report = verify_bundle(changed, workers=2)
    rows_named = [p.message for p in report.problems if p.category in ("row", "order")]
    assert len(rows_named) == 1 and rows_named[0].startswith(f"row altered: {third} line 7 ("), rows_named
    assert first_problem(changed).startswith(f"row altered: {third} line 7 (sensor ")


def test_parallel_verify_gives_the_same_report_as_serial(
    site: Site, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle = _small_parts(monkeypatch, site, tmp_path / "b.zip")
    town = load_anchors(site.anchors)
    for path in (bundle, *_tampered(bundle, tmp_path)):
        serial = verify_bundle(path, town, workers=1)
        parallel = verify_bundle(path, town, workers=2)
        assert parallel.lines() == serial.lines(), path
        assert serial.ok == (path == bundle), serial.lines()
    changed, removed, swapped = _tampered(bundle, tmp_path)
    assert first_problem(changed).startswith("row altered: data/sound/part-00004.csv line 10 (sensor ")
    assert first_problem(removed).startswith("row removed: chain seq ")
    report = verify_bundle(swapped, workers=2)
    assert report.first_problem is not None
    assert report.first_problem.message.startswith("rows reordered: data/sound/part-00006.csv line 2 ")
    assert {p.category for p in report.problems} == {"order"}, report.lines()


def test_verify_from_a_thread_uses_clean_worker_processes(
    site: Site, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A portal verifies from a request thread: its workers are not forked from that process
    (forkserver), and the report is the same."""
    bundle = _small_parts(monkeypatch, site, tmp_path / "b.zip")
    changed = _tampered(bundle, tmp_path)[0]
    serial = verify_bundle(changed, workers=1).lines()
    out: list[list[str]] = []
    thread = threading.Thread(target=lambda: out.append(verify_bundle(changed, workers=2).lines()))
    thread.start()
    thread.join(120)
    assert out == [serial]


def test_the_fast_sound_digest_is_the_stored_one() -> None:
    rng = random.Random(7)
    specials = ["1e400", "-1e400", "nan", "-0.0", "55", "1_0"]
    for i in range(3000):
        values = [
            (rng.choice(specials) if i % 50 == 0 else repr(rng.uniform(20, 120)))
            if rng.random() < 0.7
            else ""
            for _ in SOUND_FIELDS
        ]
        cells = [str(i), "quarry", rng.choice(["n1", "nø", 'q"x']), str(1709251200000000 + i), "", "", "1.0"]
        cells += [*values, rng.choice(["levels", "audio"])]
        row = {
            "site": cells[1],
            "sensor": cells[2],
            "ts_us": int(cells[3]),
            "duration_s": 1.0,
            "source": cells[15],
            **{k: (float(v) if v else None) for k, v in zip(SOUND_FIELDS, values, strict=True)},
        }
        if any(isinstance(v, float) and math.isnan(v) for v in row.values()):
            continue  # NaN is never equal to itself: both paths write NaN, compared elsewhere
        assert sound_digest_cells(cells) == digest_of(sound_record(row)), cells


# --------------------------------------------------------------------------- progress


def test_progress_line_says_rows_percent_and_time_left() -> None:
    assert render("verify", 0, 1000, 0.0) == "verify: 0 of 1,000 rows (0.0 %), time left unknown yet"
    assert render("verify", 250, 1000, 30.0) == "verify: 250 of 1,000 rows (25.0 %), 1 min 30 s left"
    assert render("evidence", 2_592_000, 25_920_000, 100.0) == (
        "evidence: 2,592,000 of 25,920,000 rows (10.0 %), 15 min 00 s left"
    )
    assert render("evidence", 1, 3, 3600.0) == "evidence: 1 of 3 rows (33.3 %), 2 h 00 min left"
    assert render("verify", 1000, 1000, 75.4) == "verify: 1,000 of 1,000 rows (100.0 %), done in 1 min 15 s"
    assert render("verify", 5, 0, 1.0) == "verify: 5 rows"


def test_progress_only_on_a_terminal() -> None:
    assert Progress.on_terminal("verify", io.StringIO()) is None
    out = io.StringIO()
    out.isatty = lambda: True  # type: ignore[method-assign]
    progress = Progress.on_terminal("verify", out)
    assert progress is not None
    progress.start(10)
    progress.update(5)
    progress.finish()
    assert out.getvalue().startswith("\rverify: 0 of 10 rows (0.0 %)")
    assert out.getvalue().endswith("verify: 10 of 10 rows (100.0 %), done in 0 s\n")


def test_cli_is_quiet_off_a_terminal(site: Site, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cli.zip"
    args = ["--config", str(site.config_path), "--site", SITE, "--no-plots", "--out", str(out)]
    assert main(["evidence", *args, "--from", "2024-03-10T07:58:00Z", "--to", "2024-03-10T08:02:00Z"]) == 0
    assert capsys.readouterr().err == ""
    assert main(["verify", str(out)]) == 0
    assert capsys.readouterr().err == ""


def test_cli_shows_progress_on_a_terminal(site: Site, tmp_path: Path) -> None:
    """stderr on a pseudo-terminal: the export and the verify draw their progress line there."""
    bundle = export(site, tmp_path / "b.zip")
    for argv, label in (
        (["verify", str(bundle)], "verify"),
        (
            [
                "evidence",
                "--config",
                str(site.config_path),
                "--site",
                SITE,
                "--no-plots",
                "--from",
                "2024-03-10T07:58:00Z",
                "--to",
                "2024-03-10T08:02:00Z",
                "--out",
                str(tmp_path / "tty.zip"),
            ],
            "evidence",
        ),
    ):
        leader, follower = pty.openpty()
        proc = subprocess.Popen(
            [sys.executable, "-m", "monitor.cli", *argv],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=follower,
        )
        os.close(follower)
        stdout, _ = proc.communicate(timeout=120)
        seen = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal's other end closed
                break
            if not chunk:
                break
            seen += chunk
        os.close(leader)
        assert proc.returncode == 0, (stdout, seen)
        text = seen.decode()
        assert f"\r{label}: 0 of " in text and "rows (100.0 %), done in" in text, text
        assert "\r" not in stdout.decode()  # the report itself is left as it was
