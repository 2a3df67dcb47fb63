"""Outputs never replace what is not a regular file, and mistakes are one line before any work.

`--out` with `--force` replaces a regular file only: never a device (as root, `--out /dev/null
--force` would replace the system's), a pipe or a symbolic link (writing through it would replace
another file). `demo --speed` is checked as `simulate` checks it, before anything starts; and
`check-config` names a folder as the other commands do.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from monitor.commands.output_paths import new_file
from monitor.errors import UsageError
from monitor.journal.store import Store
from tests.monitor.commands.test_cli_errors import (
    DEMO_CONFIG,
    INPUT_FILES,
    LEAVES,
    _argv,
    _assert_one_line,
    _run,
)


@pytest.fixture
def site(tmp_path: Path) -> dict[str, str]:
    """A valid configuration with an (empty) store, and a working directory."""
    store = tmp_path / "store.db"
    Store(store).close()
    text = DEMO_CONFIG.read_text().replace('path = "minewatch-demo.db"', f'path = "{store}"')
    config = tmp_path / "site.toml"
    config.write_text(text.replace('url = "mqtt://localhost:1883"', 'url = "mqtt://127.0.0.1:9"'))
    (tmp_path / "cwd").mkdir()
    return {"config": str(config), "cwd": str(tmp_path / "cwd")}


def _special_and_linked(folder: Path) -> dict[str, Path]:
    """A pipe, a link to the user's file, and a link to nowhere; the user's file beside them."""
    mine = folder / "mine.txt"
    mine.write_text("the user's own file")
    pipe = folder / "a-pipe"
    os.mkfifo(pipe)
    link = folder / "link-to-mine"
    link.symlink_to(mine)
    dangling = folder / "link-to-nowhere"
    dangling.symlink_to(folder / "nowhere")
    return {"pipe": pipe, "link": link, "dangling link": dangling}


@pytest.mark.parametrize("force", [False, True])
def test_new_file_replaces_only_a_regular_file(tmp_path: Path, force: bool) -> None:
    for kind, path in _special_and_linked(tmp_path).items():
        with pytest.raises(UsageError, match="symbolic link" if "link" in kind else "not a regular file"):
            new_file(str(path), force=force)
    with pytest.raises(UsageError, match="not a regular file"):
        new_file("/dev/null", force=force)
    regular = tmp_path / "old.zip"
    regular.write_text("old")
    if force:
        assert new_file(str(regular), force=True) == regular
    else:
        with pytest.raises(UsageError, match="--force"):
            new_file(str(regular), force=False)


# (command, the --out name in the folder) for every command whose output file new_file checks.
WRITERS = [
    (("evidence",), "out.zip"),
    (("notices", "show"), "notice.pdf"),
    (("report-blast",), "report.pdf"),
    (("report",), "dovre-quarry-2026-11-01.pdf"),
]


@pytest.mark.parametrize(("path", "name"), WRITERS, ids=lambda v: " ".join(v) if isinstance(v, tuple) else v)
def test_force_never_replaces_a_pipe_or_a_link(
    path: tuple[str, ...], name: str, site: dict[str, str], tmp_path: Path
) -> None:
    folder = tmp_path / "outputs"
    folder.mkdir()
    mine = folder / "mine.txt"
    mine.write_text("the user's own file")
    files = {dest: site["config"] for dest in INPUT_FILES}
    for make in (os.mkfifo, lambda p: Path(p).symlink_to(mine)):
        target = folder / name
        make(target)
        out = str(folder) if path == ("report",) else str(target)
        extra = {"--out": out, **({"--day": "2026-11-01"} if path == ("report",) else {})}
        argv = [*_argv(path, LEAVES[path], files, **extra), "--force"]
        line = _assert_one_line(_run(argv, Path(site["cwd"])))
        assert str(target) in line
        assert target.is_symlink() or target.is_fifo()
        assert mine.read_text() == "the user's own file"
        target.unlink()
    assert sorted(p.name for p in folder.iterdir()) == ["mine.txt"]


def _said(line: str) -> str:
    """The line without its "minewatch <command>: " prefix."""
    return line.split(": ", 1)[1]


def test_demo_checks_speed_before_starting_anything(site: dict[str, str], tmp_path: Path) -> None:
    out = tmp_path / "newdir"
    line = _assert_one_line(_run(["demo", "--speed", "abc", "--out", str(out)], tmp_path))
    simulate = _run(["simulate", "--config", site["config"], "--speed", "abc"], tmp_path)
    said = _said(_assert_one_line(simulate))  # the same words, but for the command's own --help
    assert _said(line) == said.replace("minewatch simulate --help", "minewatch demo --help")
    assert "argument --speed: expected a number, got 'abc': give a factor (1 = real time), or 'max'" in line
    assert not out.exists()


def test_check_config_of_a_folder_says_so_as_the_other_commands_do(tmp_path: Path) -> None:
    (tmp_path / "adir").mkdir()
    checked = _assert_one_line(_run(["check-config", "adir"], tmp_path))
    status = _assert_one_line(_run(["status", "--config", "adir"], tmp_path))
    assert _said(checked) == _said(status)
    assert "adir: is a folder, not a configuration file" in checked


@pytest.mark.parametrize("path", [("evidence",), ("report",)], ids=" ".join)
def test_a_users_file_named_like_the_partial_output_is_left_alone(
    path: tuple[str, ...], site: dict[str, str], tmp_path: Path
) -> None:
    """The whole-or-nothing write goes through ``<out>.partial``: a file of that name the user has
    is neither overwritten nor deleted; the command says which file is in the way."""
    folder = tmp_path / "outputs"
    folder.mkdir()
    name = "dovre-quarry-2026-11-01.pdf" if path == ("report",) else "out.zip"
    partial = folder / f"{name}.partial"
    partial.write_text("the user's own file")
    files = {dest: site["config"] for dest in INPUT_FILES}
    out = str(folder) if path == ("report",) else str(folder / name)
    extra = {"--out": out, **({"--day": "2026-11-01"} if path == ("report",) else {})}
    result = _run(_argv(path, LEAVES[path], files, **extra), Path(site["cwd"]))
    line = _assert_one_line(result, result.returncode)
    assert result.returncode != 0 and str(partial) in line and "exists" in line, line
    assert partial.read_text() == "the user's own file"
    assert not (folder / name).exists()


@pytest.mark.parametrize(
    ("path", "name", "said"),
    [
        (
            ("notices", "show"),
            "notice.docx",
            ".docx is not a format written here; name a .md, .html, .json or .pdf file",
        ),
        (
            ("notices", "show"),
            "notice.txt",
            ".txt is not a format written here; name a .md, .html, .json or .pdf file",
        ),
        (("evidence",), "bundle.tar.gz", ".gz is not a format written here; name a .zip file"),
        (("evidence",), "bundle", "no suffix to choose the format; name a .zip file"),
        (("report-blast",), "blast.docx", ".docx is not a format written here; name a .pdf or .html file"),
    ],
)
def test_an_out_file_named_for_a_format_not_written_is_refused(
    path: tuple[str, ...], name: str, said: str, site: dict[str, str], tmp_path: Path
) -> None:
    """`notices show ID --out notice.docx` wrote Markdown into a file Word then could not open,
    and `evidence --out bundle.tar.gz` a zip. Each is one line naming the suffixes written."""
    out = tmp_path / name
    files = {dest: site["config"] for dest in INPUT_FILES}
    argv = _argv(path, LEAVES[path], files, **{"--out": str(out)})
    line = _assert_one_line(_run(argv, Path(site["cwd"])))
    assert line == f"minewatch {' '.join(path)}: --out {out}: {said}", line
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(out.name)]  # nor a .partial


def test_ctrl_c_while_a_file_is_written_leaves_no_partial_file_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Ctrl-C cannot be delivered at one chosen moment, so the partial file's write raises
    KeyboardInterrupt as Python's SIGINT handler would there; the file itself is real. Before,
    the ``<out>.partial`` was left and the next run refused to write ("exists ... cut short")."""
    from monitor import unfinished
    from monitor.commands import output_paths

    class Interrupted:
        def __init__(self, handle: Any) -> None:
            self.handle = handle

        def __enter__(self) -> Interrupted:
            return self

        def __exit__(self, *exc: object) -> None:
            self.handle.close()

        def fileno(self) -> int:
            return int(self.handle.fileno())

        def write(self, body: bytes) -> int:
            self.handle.write(body[:10])
            raise KeyboardInterrupt

    monkeypatch.setattr(unfinished, "open", lambda *a: Interrupted(open(*a)), raising=False)  # noqa: SIM115
    out = tmp_path / "notice.pdf"
    out.write_bytes(b"the user's old notice")
    with pytest.raises(KeyboardInterrupt):
        output_paths.write_whole(out, b"%PDF-1.7 the new notice")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notice.pdf"]
    assert out.read_bytes() == b"the user's old notice"
    monkeypatch.undo()
    output_paths.write_whole(out, b"%PDF-1.7 the new notice")  # the next run is not refused
    assert out.read_bytes() == b"%PDF-1.7 the new notice"
