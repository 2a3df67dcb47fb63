"""`minewatch demo --force` deletes only what the demo recorded writing, all of it or nothing.

In notices/ and blast-reports/ the demo's files are those it recorded in its marker as it wrote
them (runner.record_output), whatever their suffix: a user's PDF or JSON there stops the demo,
and so does a symbolic link anywhere (never followed, never deleted), before anything is deleted.
The whole demo (recording its files) runs in tests/sensors/test_demo.py.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from monitor.demo.runner import MARKER, prepare_out_dir, record_output
from monitor.errors import UsageError


def _earlier_demo(tmp_path: Path) -> Path:
    """A folder as an earlier demo leaves it: its store, a notice and a blast report, recorded."""
    out = prepare_out_dir(tmp_path / "demo", force=False)
    (out / "minewatch.db").write_text("old store")
    (out / "notices").mkdir()
    (out / "blast-reports").mkdir()
    record_output(out, out / "notices" / "DOV-2026-0001.pdf").write_text("old notice")
    record_output(out, out / "notices" / "DOV-2026-0001-levels.png").write_text("old plot")
    record_output(out, out / "blast-reports" / "blast-b-1215-1.html").write_text("old report")
    return out


def _tree(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def test_what_it_recorded_is_replaced_with_force(tmp_path: Path) -> None:
    out = _earlier_demo(tmp_path)
    with pytest.raises(UsageError, match="add --force"):
        prepare_out_dir(out, force=False)
    assert prepare_out_dir(out, force=True) == out
    assert _tree(out) == [MARKER]
    # The new marker records nothing yet: the old names are no longer the demo's.
    (out / "notices").mkdir()
    (out / "notices" / "DOV-2026-0001.pdf").write_text("now the user's")
    with pytest.raises(UsageError, match=r"did not write \(notices/DOV-2026-0001\.pdf\)"):
        prepare_out_dir(out, force=True)


def test_the_files_a_store_and_its_daemon_make_beside_it_are_the_demos(tmp_path: Path) -> None:
    """The writers' turn and the daemon's claim on its sites are files beside the store; were
    they not the demo's own, a second `demo --force` would stop at them."""
    from monitor.claims import claim_sites
    from monitor.journal.store import Store

    out = prepare_out_dir(tmp_path / "demo", force=False)
    store = Store(out / "minewatch.db")
    claims = claim_sites(store.path, ["dovre-quarry"])
    store.close()
    claims.release()
    assert {"minewatch.db-turns", "minewatch.db-sites"} <= {p.name for p in out.iterdir()}
    assert prepare_out_dir(out, force=True) == out
    assert _tree(out) == [MARKER]


@pytest.mark.parametrize(
    "name", ["notices/my-letter-to-lawyer.pdf", "notices/my-data.json", "blast-reports/blast-mine.pdf"]
)
def test_a_users_file_with_a_demo_suffix_stops_it_and_nothing_goes(tmp_path: Path, name: str) -> None:
    out = _earlier_demo(tmp_path)
    (out / name).write_text("the user's")
    before = _tree(out)
    with pytest.raises(UsageError, match=rf"did not write \({name}\)"):
        prepare_out_dir(out, force=True)
    assert _tree(out) == before
    assert (out / name).read_text() == "the user's"


def test_a_folder_inside_its_folders_stops_it(tmp_path: Path) -> None:
    out = _earlier_demo(tmp_path)
    (out / "notices" / "drafts").mkdir()
    before = _tree(out)
    with pytest.raises(UsageError, match=r"notices/drafts"):
        prepare_out_dir(out, force=True)
    assert _tree(out) == before


@pytest.mark.parametrize("name", ["notices", "blast-reports", "minewatch.db", "notices/DOV-2026-0002.pdf"])
def test_a_symbolic_link_is_neither_followed_nor_deleted(tmp_path: Path, name: str) -> None:
    out = _earlier_demo(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    theirs = elsewhere / "letter.pdf"
    theirs.write_text("the user's")
    link = out / name
    if link.is_dir():
        shutil.rmtree(link)
    link.unlink(missing_ok=True)
    if "/" in name:
        record_output(out, link)  # recorded, yet a link: still not the demo's to delete
    link.symlink_to(elsewhere if name in ("notices", "blast-reports") else theirs)
    before = _tree(out)
    with pytest.raises(UsageError, match=rf"{name} is a symbolic link"):
        prepare_out_dir(out, force=True)
    assert _tree(out) == before  # nothing deleted, not even what sorts before it
    assert sorted(p.name for p in elsewhere.iterdir()) == ["letter.pdf"]
    assert theirs.read_text() == "the user's"


def test_a_marker_that_is_a_link_does_not_make_the_folder_the_demos(tmp_path: Path) -> None:
    folder = tmp_path / "mine"
    folder.mkdir()
    real = tmp_path / "real-marker"
    real.write_text("anything")
    (folder / MARKER).symlink_to(real)
    (folder / "minewatch.db").write_text("the user's")
    with pytest.raises(UsageError, match="not made by minewatch demo"):
        prepare_out_dir(folder, force=True)
    assert real.read_text() == "anything" and (folder / "minewatch.db").exists()


def test_a_device_or_pipe_under_a_demo_name_stops_it(tmp_path: Path) -> None:
    out = _earlier_demo(tmp_path)
    os.mkfifo(out / "daemon.log")
    before = _tree(out)
    with pytest.raises(UsageError, match=r"did not write \(daemon\.log\)"):
        prepare_out_dir(out, force=True)
    assert _tree(out) == before
