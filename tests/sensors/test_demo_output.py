"""`minewatch demo` never deletes what it did not make, and simulates a past day.

prepare_out_dir and demo_day are called directly (no broker needed); the whole demo runs in
test_demo.py.
"""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from monitor.demo.runner import MARKER, _site_config, demo_day, prepare_out_dir, record_output, run_demo
from monitor.errors import UsageError
from tests.support.paths import REPO


def test_a_new_folder_is_made_and_marked(tmp_path: Path) -> None:
    out = prepare_out_dir(tmp_path / "a" / "demo", force=False)
    assert out == (tmp_path / "a" / "demo").resolve()
    assert (out / MARKER).is_file()


def test_an_empty_folder_is_taken_and_marked(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    assert (prepare_out_dir(tmp_path / "empty", force=False) / MARKER).is_file()


def test_a_folder_it_did_not_make_is_refused_even_with_force(tmp_path: Path) -> None:
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "thesis.txt").write_text("years of work")
    (folder / "minewatch.db").write_text("not the demo's, whatever the name")
    for force in (False, True):
        with pytest.raises(UsageError, match="not made by minewatch demo"):
            prepare_out_dir(folder, force=force)
    assert (folder / "thesis.txt").read_text() == "years of work"
    assert (folder / "minewatch.db").exists() and not (folder / MARKER).exists()


def test_the_working_directory_and_its_parents_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    for out in (Path("."), Path(".."), Path(str(work))):
        with pytest.raises(UsageError, match="working directory"):
            prepare_out_dir(out, force=True)
    # Empty or not: "." is never taken, so --force can never empty it later.
    assert list(work.iterdir()) == []


def test_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "report.pdf").write_text("x")
    with pytest.raises(UsageError, match="is a file"):
        prepare_out_dir(tmp_path / "report.pdf", force=True)
    assert (tmp_path / "report.pdf").read_text() == "x"


def test_an_earlier_demo_needs_force_and_only_its_files_go(tmp_path: Path) -> None:
    out = prepare_out_dir(tmp_path / "demo", force=False)
    (out / "minewatch.db").write_text("old store")
    (out / "notices").mkdir()
    record_output(out, out / "notices" / "DOV-2026-0001.pdf").write_text("old notice")
    with pytest.raises(UsageError, match="add --force"):
        prepare_out_dir(tmp_path / "demo", force=False)
    assert (out / "minewatch.db").exists()

    (out / "notes.txt").write_text("the user's notes")
    with pytest.raises(UsageError, match=r"did not write \(notes\.txt\)"):
        prepare_out_dir(tmp_path / "demo", force=True)
    assert (out / "minewatch.db").exists() and (out / "notes.txt").exists()

    (out / "notes.txt").unlink()
    (out / "notices" / "draft.docx").write_text("the user's draft")
    with pytest.raises(UsageError, match=r"notices/draft\.docx"):
        prepare_out_dir(tmp_path / "demo", force=True)
    (out / "notices" / "draft.docx").unlink()

    # The blast reports are the demo's too (a second ./deploy/demo.sh replaces them), what the
    # user put beside them is not.
    (out / "blast-reports").mkdir()
    record_output(out, out / "blast-reports" / "blast-b-1215-1.pdf").write_text("old report")
    (out / "blast-reports" / "notes.txt").write_text("the user's notes")
    with pytest.raises(UsageError, match=r"blast-reports/notes\.txt"):
        prepare_out_dir(tmp_path / "demo", force=True)
    (out / "blast-reports" / "notes.txt").unlink()

    prepare_out_dir(tmp_path / "demo", force=True)
    assert sorted(p.name for p in out.iterdir()) == [MARKER]


def test_run_demo_refuses_before_starting_anything(tmp_path: Path) -> None:
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "keep.txt").write_text("keep")
    with pytest.raises(UsageError):
        run_demo(folder, "dovre-short", "max", None, force=True)
    assert sorted(p.name for p in folder.iterdir()) == ["keep.txt"]


def test_the_day_is_yesterday_when_the_scenario_fits_it() -> None:
    site = _site_config()
    assert demo_day("dovre-short", site, date(2026, 11, 30), None) == (date(2026, 11, 29), "")
    assert demo_day("dovre-day", site, date(2027, 6, 15), None) == (date(2027, 6, 14), "")


def test_in_summer_the_short_scenario_takes_the_last_december_day() -> None:
    """dovre-short's lights are at 17:02-17:18: dark in December only (civil dusk 21:33 in June)."""
    day, note = demo_day("dovre-short", _site_config(), date(2027, 6, 15), None)
    assert date(2026, 11, 20) <= day <= date(2027, 1, 5)
    assert "2027-06-14" in note and "21:33" in note and "--date" in note


def test_a_chosen_day_must_be_past_and_recent() -> None:
    """Each refusal names the days allowed (an old day once said only "older than 390 days")."""
    site = _site_config()
    allowed = "give a day from 2025-11-05 to 2026-11-29"
    with pytest.raises(UsageError) as future:
        demo_day("dovre-short", site, date(2026, 11, 30), date(2026, 11, 30))
    assert str(future.value) == f"--date 2026-11-30: the demo simulates a past day; {allowed}"
    with pytest.raises(UsageError) as old:
        demo_day("dovre-short", site, date(2026, 11, 30), date(2025, 11, 4))
    assert str(old.value) == (
        f"--date 2025-11-04: older than 390 days, which the demo's daemon refuses; {allowed}"
    )
    assert demo_day("dovre-short", site, date(2026, 11, 30), date(2025, 11, 5))[0] == date(2025, 11, 5)
    day, note = demo_day("dovre-short", site, date(2026, 11, 30), date(2026, 6, 1))
    assert day == date(2026, 6, 1) and "lighting findings may be missing" in note


def test_a_chosen_day_on_which_the_scenario_start_occurs_twice_is_refused(tmp_path: Path) -> None:
    """`demo --date 2026-11-01` with a scenario starting at 01:30 took the first 01:30 (CDT) of
    that night silently; it is refused before anything starts, in simulate's words."""
    text = (REPO / "sensors" / "scenarios" / "dovre-short.toml").read_text()
    scenario = tmp_path / "night.toml"
    scenario.write_text(text.replace('start = "2026-12-15T14:50"', 'start = "2026-12-15T01:30"'))
    with pytest.raises(UsageError) as twice:
        demo_day(str(scenario), _site_config(), date(2026, 11, 30), date(2026, 11, 1))
    assert str(twice.value).startswith(
        "--date 2026-11-01: 01:30 on that date (the scenario's start time of day) occurs twice at the site"
    ), twice.value
