"""A user's mistake on the command line: one line on stderr, exit status 2, never a traceback.

Every command is found by walking the argparse tree (``monitor.cli.build_parser``), so a new
command or action is covered without editing this file; a new required argument must be
given a sample value in ``SAMPLE`` (the test says so). Each case runs ``python3 -m
monitor.cli`` as a real process from an empty temporary folder, with this checkout first on
PYTHONPATH (so the code under test is this checkout's, never another installed copy).

Cases for every command: an unknown option; every file argument pointing at a missing file,
a pipe, a device or a folder;
every time option given a wrong time; every output path in a missing folder or under a file.
Also: the secrets that only connecting commands need, and `check-config`'s two kinds of failure.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from monitor.cli import build_parser
from monitor.journal.store import Store
from tests.support.another_user import refused_to_this_user
from tests.support.cli import run_minewatch
from tests.support.paths import DATA, REPO
from tests.support.small_disk import on_a_small_disk

DEMO_CONFIG = REPO / "sensors" / "demo" / "dovre-demo.toml"
UNSET_SECRET = "MINEWATCH_TEST_PASSWORD_NOT_SET"

# Options and positionals (by argparse dest) that name a file the command reads.
INPUT_FILES = {"config", "file", "bundle", "recording"}
# Options whose value is a time, a date or a month (monitor.times).
TIME_OPTIONS = {"--at", "--from", "--to", "--until", "--start", "--date", "--day", "--month"}
# Options naming something the command writes.
OUTPUTS = {"--out", "--queue"}
# The suffix of an output file each command writes (its suffix chooses or must name the format).
OUT_SUFFIX = {("notices", "show"): ".md", ("report-blast",): ".pdf"}
# Commands whose output is a folder (demo) or a queue they make with its folders: a missing
# folder is created, so only a path under a file is a mistake there.
MAKES_FOLDERS = {("demo",), ("sensor", "sound"), ("sensor", "light"), ("sensor", "seismograph")}

# A plausible value for every required argument (by dest), the files filled in per case.
SAMPLE = {
    "id": "DOV-2026-0001",
    "site": "dovre-quarry",
    "sensor": "n1",
    "source": "synthetic",
    "start": "2026-11-01",
    "end": "2026-11-02",
    "calibration": "94",
    "explanation": "the enclosure parts arrive next week",
    "by": "J. Smith",
    "note": "checked on site",
    "until": "2026-12-31",
    "on": "2026-11-03",
    "out": "out.zip",
}

# ... where a command needs another one.
SAMPLE_FOR = {
    ("sensor", "light"): {"sensor": "l1"},
    ("sensor", "seismograph"): {"sensor": "sg1", "source": "synthetic:450:300"},
    ("report-blast",): {"blast": "b-1215-2", "out": "report.pdf"},
}


def _leaves(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subparsers:
        yield path, parser
        return
    for name, child in subparsers[0].choices.items():
        yield from _leaves(child, (*path, name))


LEAVES = dict(_leaves(build_parser()))


def _value_actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if a.nargs != 0 and a.dest != "help"]


def _argv(
    path: tuple[str, ...], parser: argparse.ArgumentParser, files: dict[str, str], **extra: str
) -> list[str]:
    """The command with every required argument given (``files`` for the input files)."""
    argv = list(path)
    for action in _value_actions(parser):
        option = action.option_strings[0] if action.option_strings else None
        if option in extra:
            argv += [option, extra[option]]
            continue
        required = action.required or not action.option_strings  # optional positionals too
        if not required:
            continue
        if action.dest in INPUT_FILES:
            value = files[action.dest]
        else:
            samples = {**SAMPLE, **SAMPLE_FOR.get(path, {})}
            assert action.dest in samples, f"{' '.join(path)}: give {action.dest!r} a sample value in SAMPLE"
            value = samples[action.dest]
        argv += [option, value] if option else [value]
    for group in parser._mutually_exclusive_groups:  # one of them is required: give the first
        options = [a.option_strings[0] for a in group._group_actions]
        if group.required and not set(options) & set(argv):
            action = group._group_actions[0]
            argv += [options[0], extra.get(options[0], SAMPLE[action.dest])]
    return argv


def _run(
    argv: list[str],
    cwd: Path,
    env: dict[str, str] | None = None,
    prefix: Sequence[str] = (),
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    environment = dict(os.environ, PYTHONPATH=str(REPO))
    environment.pop(UNSET_SECRET, None)
    environment.update(env or {})
    return subprocess.run(
        [*prefix, sys.executable, "-m", "monitor.cli", *argv],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _assert_one_line(result: subprocess.CompletedProcess[str], code: int = 2) -> str:
    shown = f"exit {result.returncode}\nstdout: {result.stdout}\nstderr: {result.stderr}"
    assert "Traceback" not in result.stdout + result.stderr, shown
    assert result.returncode == code, shown
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, shown
    return lines[0]


def _with_portal(config: Path) -> None:
    """A [portal] with one account on a free port appended, so that `serve` gets to its store."""
    from monitor.credentials import hash_password
    from tests.support.servers import free_port

    with config.open("a") as file:
        file.write(
            f'\n[portal]\nport = {free_port()}\n[[portal.accounts]]\nname = "town"\nrole = "town"\n'
            f'password_hash = "{hash_password("x")}"\n'
        )


@pytest.fixture
def site(tmp_path: Path) -> dict[str, str]:
    """A valid configuration with an (empty) store, a broker nobody listens on, and a broker
    password in an environment variable that is not set."""
    store = tmp_path / "store.db"
    Store(store).close()
    text = DEMO_CONFIG.read_text()
    text = text.replace('url = "mqtt://localhost:1883"', 'url = "mqtt://127.0.0.1:9"')
    text = text.replace('path = "minewatch-demo.db"', f'path = "{store}"')
    config = tmp_path / "site.toml"
    config.write_text(text)
    secret = tmp_path / "secret.toml"
    secret.write_text(
        text.replace(
            'protocol = "5"', f'protocol = "5"\nusername = "minewatch"\npassword_env = "{UNSET_SECRET}"'
        )
    )
    not_zip = tmp_path / "not-a-bundle.zip"
    not_zip.write_text("hello")
    (tmp_path / "cwd").mkdir()
    return {
        "config": str(config),
        "secret": str(secret),
        "not_zip": str(not_zip),
        "cwd": str(tmp_path / "cwd"),
    }


def test_every_command_is_walked() -> None:
    """The tree walk finds the nested actions too (a broken walk would test nothing)."""
    names = {" ".join(path) for path in LEAVES}
    assert {"status", "evidence", "verify", "demo", "notices show", "notices extend", "sensor sound"} <= names
    assert len(names) >= 15


@pytest.mark.parametrize("path", sorted(LEAVES), ids=" ".join)
def test_unknown_option(path: tuple[str, ...], tmp_path: Path) -> None:
    files = {name: str(tmp_path / f"missing-{name}") for name in INPUT_FILES}
    line = _assert_one_line(_run([*_argv(path, LEAVES[path], files), "--no-such-option"], tmp_path))
    assert "--no-such-option" in line and "--help" in line


def _reads_a_users_file(parser: argparse.ArgumentParser) -> bool:
    return any(a.dest in INPUT_FILES and (a.required or not a.option_strings) for a in _value_actions(parser))


@pytest.mark.parametrize("path", sorted(p for p in LEAVES if _reads_a_users_file(LEAVES[p])), ids=" ".join)
def test_missing_input_files(path: tuple[str, ...], tmp_path: Path) -> None:
    parser = LEAVES[path]
    files = {name: str(tmp_path / "nowhere" / f"missing-{name}") for name in INPUT_FILES}
    line = _assert_one_line(_run(_argv(path, parser, files), tmp_path))
    assert "missing-" in line


# A recording may come through a pipe (a recorder writing into it): the command waits for it.
PIPE_READERS = {("levels",)}


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        (path, kind)
        for path in sorted(p for p in LEAVES if _reads_a_users_file(LEAVES[p]))
        for kind in ("pipe", "device", "folder")
        if not (kind == "pipe" and path in PIPE_READERS)
    ],
    ids=lambda value: " ".join(value) if isinstance(value, tuple) else value,
)
def test_input_files_that_are_no_regular_file(path: tuple[str, ...], kind: str, tmp_path: Path) -> None:
    """A pipe once made a command wait for a writer for ever, and /dev/zero read on for ever."""
    named = {"pipe": tmp_path / "a-pipe", "device": Path("/dev/zero"), "folder": tmp_path / "a-folder"}
    if kind == "pipe":
        os.mkfifo(named["pipe"])
    named["folder"].mkdir()
    files = dict.fromkeys(INPUT_FILES, str(named[kind]))
    line = _assert_one_line(_run(_argv(path, LEAVES[path], files), tmp_path))
    said = "is a folder" if kind == "folder" else "is a device, pipe or socket"
    assert f"{named[kind]}: {said}, not a " in line, line


def test_a_store_path_that_is_no_store_is_one_line_and_left_alone(
    site: dict[str, str], tmp_path: Path
) -> None:
    """storage.path naming a file that is not SQLite (a TOML, notes) ended status, notices, report,
    report-blast and run in a StoreError traceback; `verify --config F report.pdf` in a
    sqlite3.DatabaseError traceback, `serve` in one from its start-up (exit 3), and `evidence`
    said it with exit 1 without naming the key."""
    notes = tmp_path / "notes.txt"
    notes.write_text("the quarry's notes, not a store\n" * 20)
    before = notes.read_bytes()
    config = tmp_path / "wrong-store.toml"
    config.write_text(Path(site["config"]).read_text().replace(str(tmp_path / "store.db"), str(notes)))
    assert str(notes) in config.read_text()
    _with_portal(config)
    for argv in (
        ["status"],
        ["notices", "list"],
        ["report", "--site", "dovre-quarry", "--month", "2026-11"],
        ["run"],
        ["serve"],
    ):
        line = _assert_one_line(_run([*argv, "--config", str(config)], Path(site["cwd"])))
        assert line.endswith(
            f"cannot open the store {str(notes)!r}: file is not a database (storage.path in {config})"
        )
    report = tmp_path / "report.pdf"
    report.write_bytes(b"%PDF-1.4\n% a report to check\n")
    window = ["--from", "2026-11-01", "--to", "2026-11-02", "--out", str(tmp_path / "bundle.zip")]
    for argv in (["verify", str(report)], ["evidence", *window]):
        line = _assert_one_line(_run([*argv, "--config", str(config)], Path(site["cwd"])))
        assert line == (
            f"minewatch {argv[0]}: cannot open the store {str(notes)!r}: file is not a database"
            f" (storage.path in {config})"
        ), line
    assert not (tmp_path / "bundle.zip").exists()
    assert notes.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("notes")) == ["notes.txt"]


def test_another_programs_database_is_no_store_and_no_queue(site: dict[str, str], tmp_path: Path) -> None:
    """storage.path or a sensor's --queue naming another program's SQLite database had the
    store's or the queue's tables added to it and the file switched to WAL. Each is one line,
    and the database and its folder are left as they were (no claim file beside it)."""
    other = tmp_path / "inventory.db"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE parts (name TEXT, count INTEGER)")
    conn.execute("INSERT INTO parts VALUES ('crusher jaw', 2)")
    conn.commit()
    conn.close()
    before = other.read_bytes()
    config = tmp_path / "other-store.toml"
    config.write_text(Path(site["config"]).read_text().replace(str(tmp_path / "store.db"), str(other)))
    _with_portal(config)
    report = tmp_path / "report.pdf"
    report.write_bytes(b"%PDF-1.4\n% a report to check\n")
    window = ["--from", "2026-11-01", "--to", "2026-11-02", "--out", str(tmp_path / "bundle.zip")]
    for argv in (
        ["status"],
        ["notices", "list"],
        ["run"],
        ["serve"],
        ["verify", str(report)],
        ["evidence", *window],
    ):
        line = _assert_one_line(_run([*argv, "--config", str(config)], Path(site["cwd"])))
        assert line.endswith(
            f"{str(other)!r} is another program's SQLite database (tables parts), not a minewatch store;"
            f" name a new file for the store (storage.path in {config})"
        ), line
    sensor = ["sensor", "sound", "--config", site["config"], "--sensor", "n1", "--source", "synthetic"]
    line = _assert_one_line(_run([*sensor, "--queue", str(other)], Path(site["cwd"])))
    assert line.endswith(
        f"--queue {other}: another program's SQLite database (tables parts), not a sensor's queue;"
        " name a new file for the queue"
    ), line
    notes = tmp_path / "notes.txt"
    notes.write_text("not a queue\n")
    line = _assert_one_line(_run([*sensor, "--queue", str(notes)], Path(site["cwd"])))
    assert line.endswith(f"--queue {notes}: file is not a database; name a new file for the queue"), line
    assert other.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(("inventory", "notes"))) == [
        "inventory.db",
        "notes.txt",
    ]


# Every command that reads the store, with the rest of what it needs.
STORE_READERS = [
    ["status"],
    ["notices", "list"],
    ["notices", "show", "DOV-2026-0001"],
    ["notices", "close", "DOV-2026-0001", "--note", "checked", "--by", "J. Smith"],
    ["report", "--month", "2026-11"],
    ["report-blast", "--blast", "B-1", "--out", "b.pdf"],
    ["evidence", "--from", "2026-11-01", "--to", "2026-11-02", "--out", "e.zip"],
    ["influx", "rejected"],
    ["influx", "requeue"],
    ["verify", "report.pdf"],
    ["serve"],
]


@pytest.mark.parametrize("argv", STORE_READERS, ids=" ".join)
def test_every_store_reader_says_a_missing_or_foreign_store_alike(
    argv: list[str], site: dict[str, str], tmp_path: Path
) -> None:
    """report, report-blast, notices and influx each said a missing store in words of their own
    (status and serve with a hint, the others without), and looked for another program's database
    only as they opened it. All ask monitor.commands.store_file.existing_store now: one line each,
    the same words, the file left as it was and nothing made beside it."""
    cwd = Path(site["cwd"])
    (cwd / "report.pdf").write_bytes(b"%PDF-1.4\n% a report to check\n")
    other = tmp_path / "inventory.db"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE parts (name TEXT, count INTEGER)")
    conn.commit()
    conn.close()
    before = other.read_bytes()
    missing = tmp_path / "no-store.db"
    for path, said in (
        (
            missing,
            f"no store at {missing} (storage.path in {{config}}); the daemon makes it: has `minewatch run`"
            " run with this configuration?",
        ),
        (
            other,
            f"{str(other)!r} is another program's SQLite database (tables parts), not a minewatch store;"
            " name a new file for the store (storage.path in {config})",
        ),
    ):
        config = tmp_path / f"{path.stem}.toml"
        config.write_text(Path(site["config"]).read_text().replace(str(tmp_path / "store.db"), str(path)))
        _with_portal(config)
        line = _assert_one_line(_run([*argv, "--config", str(config)], cwd))
        command = " ".join(a for a in argv[:2] if a in LEAVES_NAMES)
        assert line == f"minewatch {command}: {said.format(config=config)}", line
    assert other.read_bytes() == before and not missing.exists()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(("inventory", "no-store"))) == [
        "inventory.db",
        "inventory.toml",
        "no-store.toml",
    ]
    assert sorted(p.name for p in cwd.iterdir()) == ["report.pdf"]


LEAVES_NAMES = {name for path in LEAVES for name in path}


def test_the_store_and_a_queue_named_for_each_other_are_said_so(site: dict[str, str], tmp_path: Path) -> None:
    """The daemon's store given as a sensor's --queue was "another program's SQLite database
    (tables alert_conditions, alerts, ...)", and a queue given as storage.path likewise: each is
    minewatch's own file of the other kind, said so. Both are left as they were."""
    from sensors.queue import ForwardQueue

    store = tmp_path / "store.db"
    queue = tmp_path / "n1.queue.db"
    ForwardQueue(queue).close()
    before = {path: path.read_bytes() for path in (store, queue)}
    sensor = ["sensor", "sound", "--config", site["config"], "--sensor", "n1", "--source", "synthetic"]
    line = _assert_one_line(_run([*sensor, "--queue", str(store)], Path(site["cwd"])))
    assert line == (
        f"minewatch sensor sound: --queue {store}: a minewatch store (storage.path), not a sensor's"
        " queue; name a new file for the queue"
    ), line
    config = tmp_path / "queue-as-store.toml"
    config.write_text(Path(site["config"]).read_text().replace(str(store), str(queue)))
    line = _assert_one_line(_run(["status", "--config", str(config)], Path(site["cwd"])))
    assert line == (
        f"minewatch status: {str(queue)!r} is a sensor's queue (minewatch sensor --queue), not a"
        f" minewatch store; name a new file for the store (storage.path in {config})"
    ), line
    assert {path: path.read_bytes() for path in (store, queue)} == before


def _files_minewatch_did_not_make(folder: Path) -> dict[Path, str]:
    """An empty file the user made (`touch mine.db`) and a SQLite database without tables, not in
    WAL mode (bare.db), each with the words that say what it is."""
    empty = folder / "mine.db"
    empty.touch()
    bare = folder / "bare.db"
    conn = sqlite3.connect(bare)
    conn.execute("PRAGMA user_version = 7")
    conn.execute("VACUUM")
    conn.close()
    return {empty: "an empty file", bare: "a SQLite database with no tables"}


def test_a_queue_file_no_sensor_made_is_refused_and_left_alone(site: dict[str, str], tmp_path: Path) -> None:
    """An empty file the user made (`touch q.db`), or a SQLite database without tables, given as
    --queue was taken as a new queue: the queue's tables were written into it and the file
    switched to WAL. Each is one line now, and nothing is written in or beside it."""
    files = _files_minewatch_did_not_make(tmp_path)
    before = {path: path.read_bytes() for path in files}
    sensor = ["sensor", "sound", "--config", site["config"], "--sensor", "n1", "--source", "synthetic"]
    for queue, what in files.items():
        line = _assert_one_line(_run([*sensor, "--queue", str(queue)], Path(site["cwd"])))
        assert line == (
            f"minewatch sensor sound: --queue {queue}: {what}, not a sensor's queue;"
            " name a new file for the queue"
        ), line
    assert {path: path.read_bytes() for path in files} == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(("mine", "bare"))) == [
        "bare.db",
        "mine.db",
    ]


def test_site_may_be_left_out_with_one_site_in_every_command_that_takes_it(
    site: dict[str, str], tmp_path: Path
) -> None:
    """report-blast took its configuration's only site without --site; report and evidence
    required --site all the same. All three now take it, and name the sites when there are two."""
    cwd = Path(site["cwd"])
    window = ["--from", "2026-11-02T10:00", "--to", "2026-11-02T11:00"]
    evidence = _run(["evidence", "--config", site["config"], *window, "--out", str(tmp_path / "b.zip")], cwd)
    assert evidence.returncode == 0 and "EMPTY" in evidence.stdout, evidence.stderr
    report = _run(["report", "--config", site["config"], "--day", "2026-11-02", "--out", str(tmp_path)], cwd)
    assert report.returncode == 0, report.stderr
    two = tmp_path / "two-sites.toml"
    two.write_text(
        Path(site["config"]).read_text()
        + '\n[[sites]]\nid = "other"\nname = "Other pit"\ntimezone = "America/Chicago"\n'
        'latitude = 45.0\nlongitude = -91.0\n[[sites.sensors]]\nid = "m1"\nkind = "sound"\n'
    )
    for argv in (
        ["evidence", *window, "--out", str(tmp_path / "c.zip")],
        ["report", "--day", "2026-11-02", "--out", str(tmp_path)],
        ["report-blast", "--blast", "B-1", "--out", str(tmp_path / "b.pdf")],
    ):
        line = _assert_one_line(_run([*argv, "--config", str(two)], cwd))
        assert line.endswith("--site is needed; the configuration has: dovre-quarry, other"), line
        line = _assert_one_line(_run([*argv, "--config", str(two), "--site", "nowhere"], cwd))
        assert line.endswith("unknown site 'nowhere'; the configuration has: dovre-quarry, other"), line


def test_files_of_random_bytes_named_in_a_config_or_an_option(site: dict[str, str], tmp_path: Path) -> None:
    """A password, profile or scenario file that is not text once ended in a UnicodeDecodeError."""
    binary = tmp_path / "random.toml"
    binary.write_bytes(bytes([0xB2, 0x00, 0xFF, 0x80]) * 16)
    config = Path(site["config"]).read_text()
    password = tmp_path / "password.toml"
    password.write_text(config.replace('protocol = "5"', f'protocol = "5"\npassword_file = "{binary}"'))
    profile = tmp_path / "profile.toml"
    profile.write_text(config.replace('profile = "dovre"', f'profile = "{binary}"', 1))
    assert profile.read_text() != config
    cwd = Path(site["cwd"])
    for argv, said in (
        (["simulate", "--config", str(password)], f"broker.password_file: {binary}: cannot read: not UTF-8"),
        (["status", "--config", str(profile)], f"sites[0].profile: {binary}: cannot read: not UTF-8"),
        (["simulate", "--config", site["config"], "--scenario", str(binary)], f"{binary}: cannot read"),
        (
            ["check-topics", "--config", site["config"], "--username", "u", "--password-file", str(binary)],
            f"--password-file {binary}: cannot read: not UTF-8 text",
        ),
    ):
        assert said in _assert_one_line(_run(argv, cwd)), argv


@pytest.mark.parametrize(
    "path",
    sorted(
        p
        for p, parser in LEAVES.items()
        if any(set(a.option_strings) & TIME_OPTIONS for a in parser._actions)
    ),
    ids=" ".join,
)
def test_wrong_times(path: tuple[str, ...], site: dict[str, str]) -> None:
    parser = LEAVES[path]
    options = sorted(o for a in parser._actions for o in a.option_strings if o in TIME_OPTIONS)
    files = {name: site["config"] for name in INPUT_FILES}
    for option in options:
        # Not a time; then times the calendar has but the store does not take (monitor.times).
        for wrong in ("yesterday", "2026-13-01", "2026-12-15T25:00", "1969-12-31", "9999-12-31"):
            line = _assert_one_line(_run(_argv(path, parser, files, **{option: wrong}), Path(site["cwd"])))
            assert option in line and wrong in line


@pytest.mark.parametrize("month", ["1969-12", "9999-12", "0001-01"])
def test_a_report_month_outside_what_the_store_takes(month: str, site: dict[str, str]) -> None:
    """A month the calendar has (9999-12 once overflowed computing its end) but the store does not."""
    argv = ["report", "--config", site["config"], "--site", "dovre-quarry", "--month", month, "--out", "."]
    line = _assert_one_line(_run(argv, Path(site["cwd"])))
    assert line.endswith(f"--month: must be a month from 1970-01 to 9998-12, got '{month}'")


@pytest.mark.parametrize(
    "path",
    sorted(
        p for p, parser in LEAVES.items() if any(set(a.option_strings) & OUTPUTS for a in parser._actions)
    ),
    ids=" ".join,
)
def test_unwritable_outputs(path: tuple[str, ...], site: dict[str, str], tmp_path: Path) -> None:
    parser = LEAVES[path]
    option = next(o for a in parser._actions for o in a.option_strings if o in OUTPUTS)
    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder")
    files = {name: site["config"] for name in INPUT_FILES}
    name = f"x{OUT_SUFFIX.get(path, '.zip')}"
    places = [str(a_file / name)]
    if path not in MAKES_FOLDERS:
        places.append(str(tmp_path / "no" / "such" / "folder" / name))
    for where in places:
        line = _assert_one_line(_run(_argv(path, parser, files, **{option: where}), Path(site["cwd"])))
        assert where in line
    assert a_file.read_text() == "not a folder"


@pytest.mark.parametrize("path", [("evidence",), ("notices", "show")], ids=" ".join)
def test_existing_output_file_is_not_overwritten(path: tuple[str, ...], site: dict[str, str]) -> None:
    existing = Path(site["cwd"]) / f"report{OUT_SUFFIX.get(path, '.zip')}"
    existing.write_text("the user's own file")
    files = {name: site["config"] for name in INPUT_FILES}
    line = _assert_one_line(
        _run(_argv(path, LEAVES[path], files, **{"--out": str(existing)}), Path(site["cwd"]))
    )
    assert "--force" in line
    assert existing.read_text() == "the user's own file"


def test_status_at_without_offset_is_site_time(site: dict[str, str]) -> None:
    """`status --at 2025-12-15T17:20` (no offset) is 17:20 in the site's zone (CST, UTC-6)."""
    result = _run(
        ["status", "--config", site["config"], "--at", "2025-12-15T17:20", "--format", "json"],
        Path(site["cwd"]),
    )
    assert result.returncode == 0, result.stderr
    assert '"ts": "2025-12-15T23:20:00Z"' in result.stdout


def test_status_at_a_time_after_now_is_refused(site: dict[str, str]) -> None:
    """`status --at 2099-01-01` printed a status as of a time the store can know nothing of yet."""
    for at in ("2099-01-01", "2099-01-01T00:00Z"):
        line = _assert_one_line(_run(["status", "--config", site["config"], "--at", at], Path(site["cwd"])))
        assert line.startswith(f"minewatch status: --at {at!r}: a time after now ("), line
        assert line.endswith("); give a time already past, or leave --at out for now"), line


def test_verify_of_a_non_zip_prints_only_the_failure(site: dict[str, str]) -> None:
    result = _run(["verify", site["not_zip"]], Path(site["cwd"]))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stdout.strip().splitlines() == [
        f"{site['not_zip']}: FAILED: not a zip file, so not an evidence bundle from `minewatch evidence`"
    ]


@pytest.mark.parametrize(
    "argv",
    [
        ["status"],
        ["notices", "list"],
        [
            "evidence",
            "--site",
            "dovre-quarry",
            "--from",
            "2026-11-01",
            "--to",
            "2026-11-02",
            "--out",
            "e.zip",
        ],
    ],
    ids=" ".join,
)
def test_read_only_commands_need_no_broker_password(argv: list[str], site: dict[str, str]) -> None:
    result = _run([*argv, "--config", site["secret"]], Path(site["cwd"]))
    assert result.returncode == 0, result.stderr
    assert UNSET_SECRET not in result.stderr


def test_connecting_commands_still_require_the_password(site: dict[str, str]) -> None:
    result = _run(["simulate", "--config", site["secret"], "--scenario", "dovre-short"], Path(site["cwd"]))
    line = _assert_one_line(result)
    assert UNSET_SECRET in line


def test_check_config_tells_an_invalid_file_from_a_missing_secret(
    site: dict[str, str], tmp_path: Path
) -> None:
    ok = _run(["check-config", site["config"]], tmp_path)
    assert ok.returncode == 0 and "OK" in ok.stdout
    same = _run(["check-config", "--config", site["config"]], tmp_path)
    assert same.returncode == 0 and same.stdout == ok.stdout

    secret = _run(["check-config", "--config", site["secret"]], tmp_path)
    assert secret.returncode == 3, secret.stderr
    assert f"broker.password_env: environment variable '{UNSET_SECRET}' is not set" in secret.stderr
    assert "the configuration is valid, but 1 secret(s) are not available on this machine" in secret.stderr
    assert "invalid" not in secret.stderr
    assert _run(["check-config", site["secret"]], tmp_path, env={UNSET_SECRET: "s3cret"}).returncode == 0

    broken = tmp_path / "broken.toml"
    broken.write_text(
        Path(site["secret"]).read_text().replace('timezone = "America/Chicago"', 'timezone = "Mars/Olympus"')
    )
    invalid = _run(["check-config", str(broken)], tmp_path)
    assert invalid.returncode == 2
    assert "sites[0].timezone: unknown time zone 'Mars/Olympus'" in invalid.stderr
    assert "invalid configuration, 1 problem(s)" in invalid.stderr
    assert "(a secret not available on this machine)" in invalid.stderr

    both = _run(["check-config", site["config"], "--config", site["secret"]], tmp_path)
    assert "give one" in _assert_one_line(both)


def test_version() -> None:
    result = _run(["--version"], REPO)
    assert result.returncode == 0
    from monitor import __version__

    assert result.stdout.strip() == f"minewatch {__version__}"


def test_serve_on_a_port_in_use_or_out_of_range_is_one_line(site: dict[str, str]) -> None:
    import socket

    from monitor.credentials import hash_password

    with open(site["config"], "a") as config:
        config.write(
            f'\n[portal]\n[[portal.accounts]]\nname = "town"\nrole = "town"\n'
            f'password_hash = "{hash_password("x")}"\n'
        )
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        line = _assert_one_line(
            _run(["serve", "--config", site["config"], "--port", str(port)], Path(site["cwd"]))
        )
        assert f"cannot listen on 127.0.0.1:{port}" in line and "--port" in line
    line = _assert_one_line(_run(["serve", "--config", site["config"], "--port", "99999"], Path(site["cwd"])))
    assert "argument --port: must be at most 65535, got 99999" in line


@pytest.mark.parametrize(
    ("cert", "key", "expected"),
    [
        ("missing.pem", "a/key.pem", "portal.tls_cert in {config}: {cert}: no such file"),
        ("a", "a/key.pem", "portal.tls_cert in {config}: {cert}: is a folder, not a PEM file"),
        ("a/cert.pem", "a/cert.pem", "not a PEM certificate and its private key"),
        ("a/cert.pem", "b/key.pem", "the key does not belong to the certificate"),
        ("a/cert.pem", "a/encrypted.pem", "portal.tls_key in {config}: {key}: the key is encrypted"),
    ],
)
def test_serve_with_tls_files_it_cannot_use_is_one_line(
    site: dict[str, str], tmp_path: Path, cert: str, key: str, expected: str
) -> None:
    """They ended in a traceback from inside uvicorn (FileNotFoundError, ssl.SSLError), and an
    encrypted key made it ask for a passphrase on the terminal."""
    from monitor.credentials import hash_password
    from tests.support.servers import free_port, self_signed_cert

    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        self_signed_cert(tmp_path / folder)
    plain, encrypted = tmp_path / "a/key.pem", tmp_path / "a/encrypted.pem"
    encrypt = [
        "openssl",
        "pkey",
        "-in",
        str(plain),
        "-aes256",
        "-passout",
        "pass:secret",
        "-out",
        str(encrypted),
    ]
    subprocess.run(encrypt, check=True, capture_output=True)
    cert_path, key_path = tmp_path / cert, tmp_path / key
    with open(site["config"], "a") as config:
        config.write(
            f'\n[portal]\ntls_cert = "{cert_path}"\ntls_key = "{key_path}"\n'
            f'[[portal.accounts]]\nname = "town"\nrole = "town"\npassword_hash = "{hash_password("x")}"\n'
        )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "monitor.cli",
            "serve",
            "--config",
            site["config"],
            "--port",
            str(free_port()),
        ],
        cwd=site["cwd"],
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    line = _assert_one_line(done)
    assert line.startswith("minewatch serve: ")
    assert expected.format(config=site["config"], cert=cert_path, key=key_path) in line


@pytest.mark.parametrize(
    "action",
    [
        ["request-extension", "--explanation", "parts arrive next week"],
        ["extend", "--days", "7"],
        ["serve", "--on", "2026-11-03"],
        ["close", "--note", "checked on site"],
        ["escalate", "--note", "not corrected"],
    ],
)
def test_a_blank_by_is_said_as_the_option(site: dict[str, str], action: list[str]) -> None:
    """It was "every change needs who made it (actor)", a name the command line does not have."""
    argv = ["notices", action[0], "DOV-2026-0001", "--config", site["config"], *action[1:], "--by", " "]
    line = _assert_one_line(_run(argv, Path(site["cwd"])))
    assert line == (
        f"minewatch notices {action[0]}: argument --by: give the name of who made the change, for the"
        f" record (see minewatch notices {action[0]} --help)"
    )


def test_an_argument_too_many_is_said_by_its_command() -> None:
    """It was "minewatch: unrecognized arguments: extra (see minewatch --help)", naming no command."""
    done = run_minewatch("status", "--config", "x.toml", "extra")
    assert done.returncode == 2
    assert done.stderr == "minewatch status: unrecognized arguments: extra (see minewatch status --help)\n"


def test_a_subcommands_mistake_is_said_by_the_subcommand(tmp_path: Path) -> None:
    """They were "minewatch notices: ...": which of the seven actions was meant was left out."""
    done = run_minewatch("notices", "list", "--config", "x.toml", "--days", "3")
    assert done.returncode == 2
    assert done.stderr == (
        "minewatch notices list: unrecognized arguments: --days 3 (see minewatch notices list --help)\n"
    )
    missing = tmp_path / "missing.toml"
    done = run_minewatch("notices", "show", "N-1", "--config", str(missing))
    assert done.returncode == 2
    assert done.stderr.startswith(f"minewatch notices show: {missing}")


def test_report_blast_sensor_that_is_no_seismograph_is_said_so(site: dict[str, str], tmp_path: Path) -> None:
    """`--sensor n1`, a sound meter, was taken as a seismograph that had "recorded no event" of
    the blast, as if the blast had been missed."""
    out = tmp_path / "b.pdf"
    argv = ["report-blast", "--config", site["config"], "--blast", "b-1215-2", "--sensor", "n1"]
    line = _assert_one_line(_run([*argv, "--out", str(out)], Path(site["cwd"])))
    assert line == (
        "minewatch report-blast: --sensor: 'n1' is a sound sensor, not a seismograph; its seismographs: sg1"
    )
    assert not out.exists()


def test_report_out_naming_a_file_says_it_is_a_folder(site: dict[str, str], tmp_path: Path) -> None:
    """`report --out march.pdf` said "does not exist; create it" as if a folder named so were
    wanted; both refusals say what --out is."""
    (tmp_path / "old.pdf").write_text("the user's file")
    for out, said in (
        ("march.pdf", "does not exist; create it or choose another"),
        ("old.pdf", "is not a folder"),
    ):
        argv = ["report", "--config", site["config"], "--day", "2026-11-02", "--out", str(tmp_path / out)]
        line = _assert_one_line(_run(argv, Path(site["cwd"])))
        what = "(--out names the folder for the PDF and CSV)"
        assert line == f"minewatch report: --out {tmp_path / out}: {said} {what}"
    assert (tmp_path / "old.pdf").read_text() == "the user's file"


def test_an_option_before_the_command_is_said_so(tmp_path: Path) -> None:
    """`minewatch --config site.toml status` said "argument COMMAND: invalid choice: 'site.toml'",
    the configuration's name taken for the command's."""
    for argv, said in (
        (["--config", "site.toml", "status"], "minewatch status --config ..."),
        (["--config", "site.toml"], "minewatch COMMAND --config ..."),
    ):
        line = _assert_one_line(_run(argv, tmp_path))
        assert line == f"minewatch: --config: give the command first, then its options: {said}", line


def test_an_option_before_the_action_is_said_so(tmp_path: Path) -> None:
    """`minewatch notices --config site.toml show N` said "argument ACTION: invalid choice:
    'site.toml'", the configuration's name taken for the action's, as before the command."""
    for argv, said in (
        (
            ["notices", "--config", "site.toml", "show", "N"],
            "action first, then its options: minewatch notices show",
        ),
        (["notices", "--config", "site.toml"], "action first, then its options: minewatch notices ACTION"),
        (
            ["influx", "--config", "site.toml", "rejected"],
            "action first, then its options: minewatch influx rejected",
        ),
        (
            ["sensor", "--config", "site.toml", "--sensor", "n1"],
            "kind first, then its options: minewatch sensor KIND",
        ),
    ):
        line = _assert_one_line(_run(argv, tmp_path))
        assert line == f"minewatch {argv[0]}: --config: give the {said} --config ...", line


def test_a_store_path_under_a_file_is_said_so(site: dict[str, str], tmp_path: Path) -> None:
    """storage.path = "notes.txt/minewatch.db" ended `minewatch run` in "notes.txt: File exists",
    which names neither the key nor what is wrong with it."""
    notes = tmp_path / "notes.txt"
    notes.write_text("the operator's notes\n")
    store = notes / "minewatch.db"
    config = tmp_path / "under-a-file.toml"
    config.write_text(Path(site["config"]).read_text().replace(str(tmp_path / "store.db"), str(store)))
    line = _assert_one_line(_run(["run", "--config", str(config)], Path(site["cwd"])))
    assert line == (
        f"minewatch run: cannot make the folder of the store {str(store)!r}: {notes} is a file, not a"
        f" folder (storage.path in {config})"
    ), line
    assert notes.read_text() == "the operator's notes\n"


def test_check_config_says_a_store_path_under_a_file_as_run_does(
    site: dict[str, str], tmp_path: Path
) -> None:
    """check-config said "OK" of storage.path = "notes.txt/minewatch.db", which `run` refuses."""
    notes = tmp_path / "notes.txt"
    notes.write_text("the operator's notes\n")
    store = notes / "minewatch.db"
    config = tmp_path / "under-a-file.toml"
    config.write_text(Path(site["config"]).read_text().replace(str(tmp_path / "store.db"), str(store)))
    result = _run(["check-config", str(config)], Path(site["cwd"]))
    assert result.returncode == 2 and result.stdout == "", result
    assert result.stderr.splitlines() == [
        f"storage.path: cannot make the folder of the store {str(store)!r}: {notes} is a file, not a folder",
        f"{config}: invalid configuration, 1 problem(s)",
    ], result.stderr
    assert notes.read_text() == "the operator's notes\n"


def test_check_config_refuses_a_store_file_as_run_and_the_readers_do(
    site: dict[str, str], tmp_path: Path
) -> None:
    """check-config said "OK" of an empty file at storage.path (`touch minewatch.db`), another
    program's SQLite database, a sensor's queue and a file that is no database, each of which
    `run` and every command that reads the store refuse: it says their line on the key and exits
    2, the file left as it was. A missing store (the daemon makes it) and a store are fine."""
    from sensors.queue import ForwardQueue

    empty = tmp_path / "minewatch.db"
    empty.touch()
    other = tmp_path / "inventory.db"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE parts (name TEXT, count INTEGER)")
    conn.commit()
    conn.close()
    queue = tmp_path / "n1.queue.db"
    ForwardQueue(queue).close()
    notes = tmp_path / "notes.txt"
    notes.write_text("the operator's notes\n")
    before = {path: path.read_bytes() for path in (empty, other, queue, notes)}
    cwd = Path(site["cwd"])
    for store, refusal in (
        (empty, f"{str(empty)!r} is an empty file, not a minewatch store; name a new file for the store"),
        (
            other,
            f"{str(other)!r} is another program's SQLite database (tables parts), not a minewatch store;"
            " name a new file for the store",
        ),
        (
            queue,
            f"{str(queue)!r} is a sensor's queue (minewatch sensor --queue), not a minewatch store;"
            " name a new file for the store",
        ),
        (notes, f"cannot open the store {str(notes)!r}: file is not a database"),
    ):
        config = tmp_path / f"{store.stem}.toml"
        config.write_text(Path(site["config"]).read_text().replace(str(tmp_path / "store.db"), str(store)))
        status = _assert_one_line(_run(["status", "--config", str(config)], cwd))
        assert status == f"minewatch status: {refusal} (storage.path in {config})", status
        result = _run(["check-config", str(config)], cwd)
        assert result.returncode == 2 and result.stdout == "", result
        assert result.stderr.splitlines() == [
            f"storage.path: {refusal}",
            f"{config}: invalid configuration, 1 problem(s)",
        ], result.stderr
    assert {path: path.read_bytes() for path in before} == before
    for store in (tmp_path / "not-yet.db", tmp_path / "store.db"):
        config = tmp_path / "fine.toml"
        config.write_text(Path(site["config"]).read_text().replace(str(tmp_path / "store.db"), str(store)))
        result = _run(["check-config", str(config)], cwd)
        assert result.returncode == 0 and "OK" in result.stdout, result
    assert not (tmp_path / "not-yet.db").exists()


def test_a_folder_at_storage_path_is_refused_by_check_config_and_the_readers_as_run_does(
    site: dict[str, str], tmp_path: Path
) -> None:
    """A folder named as storage.path: `run` refuses it ("it is a folder: name a file in it"),
    while check-config said OK and status "no store at ...; the daemon makes it", which it does
    not. Each says run's reason now, check-config on the key; nothing is made in the folder."""
    folder = tmp_path / "stores"
    folder.mkdir()
    config = tmp_path / "folder.toml"
    config.write_text(Path(site["config"]).read_text().replace(str(tmp_path / "store.db"), str(folder)))
    cwd = Path(site["cwd"])
    refusal = (
        f"cannot open the store {str(folder)!r}: it is a folder: name a file in it"
        f" (e.g. {folder / 'minewatch.db'})"
    )
    for command in ("run", "status"):
        line = _assert_one_line(_run([command, "--config", str(config)], cwd))
        assert line == f"minewatch {command}: {refusal} (storage.path in {config})", line
    result = _run(["check-config", str(config)], cwd)
    assert result.returncode == 2 and result.stdout == "", result
    assert result.stderr.splitlines() == [
        f"storage.path: {refusal}",
        f"{config}: invalid configuration, 1 problem(s)",
    ], result.stderr
    assert list(folder.iterdir()) == []


def test_a_store_file_minewatch_did_not_make_is_refused_and_left_alone(
    site: dict[str, str], tmp_path: Path
) -> None:
    """An empty file at storage.path (`touch minewatch.db`), or a SQLite database without tables,
    was taken as a new store: the daemon wrote its tables into it and switched it to WAL. Each
    is one line now, from the daemon and from the commands that read the store, and nothing is
    written in or beside it; a missing file is still made (the daemon's first start). One in
    WAL mode (bare-wal.db) passed as a store being made; a store being made carries the store's
    mark (application_id), which it has not."""
    files = _files_minewatch_did_not_make(tmp_path)
    bare_wal = tmp_path / "bare-wal.db"
    conn = sqlite3.connect(bare_wal)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.close()
    files[bare_wal] = "a SQLite database with no tables"
    before = {path: path.read_bytes() for path in files}
    for store, what in files.items():
        config = tmp_path / f"{store.stem}.toml"
        config.write_text(Path(site["config"]).read_text().replace(str(tmp_path / "store.db"), str(store)))
        for command in ("run", "status"):
            line = _assert_one_line(_run([command, "--config", str(config)], Path(site["cwd"])))
            assert line == (
                f"minewatch {command}: {str(store)!r} is {what}, not a minewatch store; name a new file"
                f" for the store (storage.path in {config})"
            ), line
    assert {path: path.read_bytes() for path in files} == before
    # Beside a WAL-mode file SQLite's readers leave its -shm (and -wal), whoever opens it.
    left = {"bare-wal.db-shm", "bare-wal.db-wal"}
    assert sorted(
        p.name for p in tmp_path.iterdir() if p.name.startswith(("mine", "bare")) and p.name not in left
    ) == [
        "bare-wal.db",
        "bare-wal.toml",
        "bare.db",
        "bare.toml",
        "mine.db",
        "mine.toml",
    ]


def test_a_store_being_made_is_told_from_a_database_with_no_tables(tmp_path: Path) -> None:
    """The daemon's new file, linked to its name before its tables are made, is a store being
    made to every reader; another program's database in WAL mode with no tables is not."""
    from monitor.commands.store_file import store_refusal
    from monitor.journal.store import Store, _make_store_file

    making = tmp_path / "making.db"
    _make_store_file(str(making))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["making.db"]
    assert store_refusal(str(making)) is None
    Store(making).close()  # the daemon, started again, makes its tables there
    assert store_refusal(str(making)) is None
    other = tmp_path / "other.db"
    conn = sqlite3.connect(other)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.close()
    assert store_refusal(str(other)) == (
        f"{str(other)!r} is a SQLite database with no tables, not a minewatch store;"
        " name a new file for the store"
    )


def _refused(place: Path, able: str = "writable") -> str:
    """How every command says that this user may not read (or write) ``place``, a store's file."""
    return (
        f"{place} is not {able} by this user (permission denied): run minewatch as the user the"
        f" daemon runs as ({place.owner()!r} owns the file), or give the file to that user"
    )


def test_check_config_refuses_a_store_this_user_cannot_read_in_runs_words(tmp_path: Path) -> None:
    """check-config said OK of a store it could not read at all (another user's, 0600), which
    `run` as the same user refuses; it says run's line on the key and exits 2. Unreadable for
    real: the file is another user's, and the commands run without the capabilities that let
    root read any file (setpriv), or as the user they are when it is not root."""
    store = tmp_path / "store.db"
    Store(store).close()
    config = tmp_path / "site.toml"
    config.write_text(DEMO_CONFIG.read_text().replace('path = "minewatch-demo.db"', f'path = "{store}"'))
    prefix = refused_to_this_user(store, 0o600)
    lines = {}
    for command in ("run", "check-config"):
        done = _run([command, "--config", str(config)], tmp_path, prefix=prefix)
        assert done.returncode == 2 and "Traceback" not in done.stderr, (
            command,
            done.returncode,
            done.stderr,
        )
        lines[command] = done.stderr.splitlines()
    refusal = f"cannot open the store {str(store)!r}: {_refused(store)}"
    assert lines["run"] == [f"minewatch run: {refusal} (storage.path in {config})"], lines["run"]
    assert lines["check-config"] == [
        f"storage.path: {refusal}",
        f"{config}: invalid configuration, 1 problem(s)",
    ], lines["check-config"]


@pytest.mark.parametrize("refused", ["store.db", "store.db-wal", "store.db-shm", "store.db-sites", "folder"])
def test_run_and_check_config_refuse_a_store_this_user_can_read_and_not_write(
    refused: str, tmp_path: Path
) -> None:
    """check-config said OK of a store this user could read and not write (its file, the -wal
    or -shm of a connection still open, the daemon's claim file beside it, its folder), and
    `run` as this user took it and went into the loop that waits out a full disk, for good,
    its log saying to free space; both name the file and why in one line and exit 2, `run`
    before it makes a file or connects (the broker here is a port nobody listens on). The -wal
    and -shm are kept by a connection of this test's, as a daemon of another user keeps them
    while it runs."""
    folder = tmp_path / "stores"
    folder.mkdir()
    store = folder / "store.db"
    Store(store).close()
    (folder / "store.db-sites").touch()
    config = tmp_path / "site.toml"
    config.write_text(
        DEMO_CONFIG.read_text()
        .replace('path = "minewatch-demo.db"', f'path = "{store}"')
        .replace('url = "mqtt://localhost:1883"', 'url = "mqtt://127.0.0.1:9"')
    )
    writer = sqlite3.connect(store, isolation_level=None)
    lines = {}
    try:
        writer.execute("PRAGMA wal_autocheckpoint=0")  # the -wal keeps what it writes
        writer.execute("CREATE TABLE kept (x)")
        place = folder if refused == "folder" else folder / refused
        prefix = refused_to_this_user(place, 0o755 if refused == "folder" else 0o644)
        why = (  # said while the -wal and -shm are there
            f"{folder} is not writable by this user (permission denied): run minewatch as a user that"
            " may write in it (the store's -wal and -shm are made there), or name a store in a folder"
            " of the daemon's user"
            if refused == "folder"
            else _refused(place)
        )
        files = sorted(folder.iterdir())
        for command in ("run", "check-config"):
            done = _run([command, "--config", str(config)], tmp_path, prefix=prefix, timeout=30)
            shown = (command, done.returncode, done.stderr)
            assert done.returncode == 2 and "Traceback" not in done.stderr, shown
            lines[command] = done.stderr.splitlines()
        assert sorted(folder.iterdir()) == files
    finally:
        writer.close()
    refusal = f"cannot write the store {str(store)!r}: {why}"
    assert lines["run"] == [f"minewatch run: {refusal} (storage.path in {config})"], lines["run"]
    assert lines["check-config"] == [
        f"storage.path: {refusal}",
        f"{config}: invalid configuration, 1 problem(s)",
    ], lines["check-config"]


def test_a_worker_run_by_hand_refuses_a_store_this_user_can_read_and_not_write(tmp_path: Path) -> None:
    """A worker run by hand (`run --partition I/N`, as the supervisor starts one) skipped the
    check `run` makes as it starts, and went into the loop that waits out a full disk, for
    good, on a store this user could read and not write (its file another user's, 0644); it
    says run's line and exits 2, before it makes a file or connects (the broker here is a port
    nobody listens on). The -wal and -shm are kept by a connection of this test's, as the
    other workers keep them while they run."""
    folder = tmp_path / "stores"
    folder.mkdir()
    store = folder / "store.db"
    Store(store).close()
    config = tmp_path / "site.toml"
    config.write_text(
        DEMO_CONFIG.read_text()
        .replace('path = "minewatch-demo.db"', f'path = "{store}"')
        .replace('url = "mqtt://localhost:1883"', 'url = "mqtt://127.0.0.1:9"')
    )
    writer = sqlite3.connect(store, isolation_level=None)
    try:
        writer.execute("PRAGMA wal_autocheckpoint=0")  # the -wal keeps what it writes
        writer.execute("CREATE TABLE kept (x)")
        prefix = refused_to_this_user(store, 0o644)
        files = sorted(folder.iterdir())
        worker = ["run", "--config", str(config), "--partition", "1/1"]
        line = _assert_one_line(_run(worker, tmp_path, prefix=prefix, timeout=30))
        assert sorted(folder.iterdir()) == files
    finally:
        writer.close()
    assert line == (
        f"minewatch run: cannot write the store {str(store)!r}: {_refused(store)} (storage.path in {config})"
    ), line


STORE_WRITERS = [
    ["notices", "close", "DOV-2026-0001", "--note", "checked", "--by", "J. Smith"],
    ["report", "--month", "2026-11"],
    ["influx", "requeue"],
    ["serve"],
    ["run"],
]


@pytest.mark.parametrize("argv", STORE_WRITERS, ids=" ".join)
def test_every_store_writer_refuses_a_store_this_user_can_read_and_not_write(
    argv: list[str], site: dict[str, str], tmp_path: Path
) -> None:
    """The commands that write the store took one this user could read and not write (its file
    another user's, 0644): `report` wrote its PDF and CSV and then failed recording the report
    with a traceback, `serve` listened and answered every login with 503 ("the store cannot take
    writes just now (its disk is full or failing)") for good. Each says run's line, exit 2,
    before it writes anything (monitor.commands.store_file.writable_store), and leaves the
    store's folder as it was: the -wal and -shm its look at the store made stayed (see
    test_every_store_reader_reads_a_store_this_user_can_read_and_not_write_and_leaves_no_file)."""
    cwd = Path(site["cwd"])
    config = Path(site["config"])
    _with_portal(config)
    store = tmp_path / "store.db"
    prefix = refused_to_this_user(store, 0o644)
    files = sorted(cwd.iterdir())
    beside = sorted(tmp_path.iterdir())
    line = _assert_one_line(_run([*argv, "--config", str(config)], cwd, prefix=prefix, timeout=30))
    command = " ".join(a for a in argv[:2] if a in LEAVES_NAMES)
    refusal = f"cannot write the store {str(store)!r}: {_refused(store)}"
    assert line == f"minewatch {command}: {refusal} (storage.path in {config})", line
    assert sorted(cwd.iterdir()) == files
    assert sorted(tmp_path.iterdir()) == beside


# The commands that only read the store, and how each ends on the site fixture's empty store.
STORE_ONLY_READERS = [
    (["status"], 0),
    (["notices", "list"], 0),
    (["notices", "show", "DOV-2026-0001"], 2),  # no such notice
    (["report-blast", "--blast", "B-1", "--out", "b.pdf"], 2),  # no such blast
    (["evidence", "--from", "2026-11-01", "--to", "2026-11-02", "--out", "e.zip"], 0),
    (["influx", "rejected"], 0),
    (["verify", "report.pdf"], 1),  # a report no chain recorded
]


@pytest.mark.parametrize(
    ("argv", "code"), STORE_ONLY_READERS, ids=[" ".join(a) for a, _ in STORE_ONLY_READERS]
)
def test_every_store_reader_reads_a_store_this_user_can_read_and_not_write_and_leaves_no_file(
    argv: list[str], code: int, site: dict[str, str], tmp_path: Path
) -> None:
    """A command that only reads the store reads one this user may read and not write (another
    user's, 0644) as that user would, and leaves the store's folder as it found it. Its reading
    made the store's -wal and -shm (none is there while no process has the store open), and
    SQLite's last connection removes them only when it may write the store: they stayed, this
    user's files, and the store's own user could no longer write the store ("attempt to write a
    readonly database"; `run` refused the -shm). The store's file is left unchanged."""
    cwd = Path(site["cwd"])
    (cwd / "report.pdf").write_bytes(b"%PDF-1.4\n% a report to check\n")
    config = Path(site["config"])
    store = tmp_path / "store.db"
    prefix = refused_to_this_user(store, 0o644)
    beside = sorted(tmp_path.iterdir())
    body = store.read_bytes()
    done = _run([*argv, "--config", str(config)], cwd, prefix=prefix, timeout=60)
    shown = (done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    assert done.returncode == code, shown
    assert "Traceback" not in done.stderr and "the store" not in done.stderr, shown
    assert sorted(tmp_path.iterdir()) == beside, sorted(p.name for p in tmp_path.iterdir())
    assert store.read_bytes() == body


# The commands that read the store through the daemon's own opening, which brings an older
# minewatch's store to this layout first (evidence and verify read it as it is).
STORE_MIGRATING_READERS = [
    ["status"],
    ["notices", "list"],
    ["notices", "show", "DOV-2026-0001"],
    ["report-blast", "--blast", "B-1", "--out", "b.pdf"],
    ["influx", "rejected"],
]


@pytest.mark.parametrize("argv", STORE_MIGRATING_READERS, ids=" ".join)
def test_a_reader_refuses_an_older_store_this_user_can_read_and_not_write_in_runs_words(
    argv: list[str], site: dict[str, str], tmp_path: Path
) -> None:
    """status and the other commands that read through the daemon's opening write an older
    minewatch's store as they open it (its migrations; evidence's refusal of such a store says
    to open it once with status). As a user who may read it and not write it (another user's,
    0644), each failed that write as "cannot open the store", and left the writers' turn's file
    ({path}-turns) beside the store, this user's; each says run's line (cannot write the store
    ...), why, exit 2, and leaves the store's folder and file as they were."""
    cwd = Path(site["cwd"])
    config = Path(site["config"])
    store = tmp_path / "store.db"
    for made in tmp_path.glob("store.db*"):
        made.unlink()
    store.write_bytes((DATA / "evidence" / "golden.sqlite").read_bytes())  # layout 2 (commit cd944b8)
    prefix = refused_to_this_user(store, 0o644)
    beside = sorted(tmp_path.iterdir())
    body = store.read_bytes()
    line = _assert_one_line(_run([*argv, "--config", str(config)], cwd, prefix=prefix, timeout=60))
    command = " ".join(a for a in argv[:2] if a in LEAVES_NAMES)
    assert line == (
        f"minewatch {command}: cannot write the store {str(store)!r}: {_refused(store)} (an older"
        f" minewatch's store: opening it brings it to this layout) (storage.path in {config})"
    ), line
    assert sorted(tmp_path.iterdir()) == beside, sorted(p.name for p in tmp_path.iterdir())
    assert store.read_bytes() == body


def test_run_and_check_config_say_a_store_on_a_file_system_mounted_read_only(tmp_path: Path) -> None:
    """A store on a file system mounted read-only (the kernel does so after a disk's errors) was
    refused as "not writable by this user (permission denied): run minewatch as the user the
    daemon runs as", which no user can help; `run` and check-config say the mount, in one line,
    exit 2. The mount is real: a tmpfs in a mount namespace of each command's own, the store made
    on it before it is remounted read-only."""
    disk = tmp_path / "disk"
    store = disk / "store.db"
    config = tmp_path / "site.toml"
    config.write_text(
        DEMO_CONFIG.read_text()
        .replace('path = "minewatch-demo.db"', f'path = "{store}"')
        .replace('url = "mqtt://localhost:1883"', 'url = "mqtt://127.0.0.1:9"')
    )
    lines = {}
    for command in ("run", "check-config"):
        prefix = on_a_small_disk(disk, store=store, read_only=True)
        done = _run([command, "--config", str(config)], tmp_path, prefix=prefix, timeout=30)
        assert done.returncode == 2 and "Traceback" not in done.stderr, (
            command,
            done.returncode,
            done.stderr,
        )
        lines[command] = done.stderr.splitlines()
    refusal = (
        f"cannot open the store {str(store)!r}: {store} is on a file system mounted read-only: remount it"
        " read-write (the kernel mounts one so after a disk's errors: check the disk first), or name a"
        " store on a writable one"
    )
    assert lines["run"] == [f"minewatch run: {refusal} (storage.path in {config})"], lines["run"]
    assert lines["check-config"] == [
        f"storage.path: {refusal}",
        f"{config}: invalid configuration, 1 problem(s)",
    ], lines["check-config"]


@pytest.mark.parametrize("argv", STORE_READERS, ids=" ".join)
def test_every_store_reader_says_a_store_this_user_cannot_read_alike(
    argv: list[str], site: dict[str, str], tmp_path: Path
) -> None:
    """status and every other reader printed SQLite's "unable to open database file" of a store
    this user may not read (another user's, 0600); each says the store, why and what to do, in
    one line, exit 2 (monitor.commands.store_file.existing_store, in the daemon's words)."""
    cwd = Path(site["cwd"])
    (cwd / "report.pdf").write_bytes(b"%PDF-1.4\n% a report to check\n")
    config = Path(site["config"])
    _with_portal(config)
    store = tmp_path / "store.db"
    prefix = refused_to_this_user(store, 0o600)
    line = _assert_one_line(_run([*argv, "--config", str(config)], cwd, prefix=prefix))
    command = " ".join(a for a in argv[:2] if a in LEAVES_NAMES)
    assert line == (
        f"minewatch {command}: cannot open the store {str(store)!r}: {_refused(store, 'readable')}"
        f" (storage.path in {config})"
    ), line
