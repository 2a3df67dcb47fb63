"""Files a person names: every way one cannot be read is one sentence naming it.

Before monitor.named_file, a password or profile file of random bytes ended `minewatch
check-config` in a UnicodeDecodeError traceback, `--config /dev/zero` read for ever and a
FIFO waited for a writer. The commands' side (one line, exit 2) is in
tests/monitor/commands/test_cli_errors.py.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from monitor.config import parse_config
from monitor.errors import ConfigError
from monitor.named_file import MAX_TEXT_BYTES, NamedFileError, read_named_bytes, read_named_text
from sensors.scenario import ScenarioError, read_scenario_text
from tests.support.config_samples import MINIMAL

NOT_UTF8 = bytes([0xB2, 0x00, 0xFF, 0x80]) * 16  # as `head -c 64 /dev/urandom` may give

T = TypeVar("T")


def test_a_text_file_is_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "a.toml"
    path.write_text("x = 'Dovre'\n", encoding="utf-8")
    assert read_named_text(path, "profile") == "x = 'Dovre'\n"
    assert read_named_bytes(path, "WAV file") == b"x = 'Dovre'\n"


def test_each_way_a_file_cannot_be_read_is_one_sentence(tmp_path: Path) -> None:
    folder, pipe, binary, large = (tmp_path / n for n in ("d", "p", "bin", "large"))
    folder.mkdir()
    os.mkfifo(pipe)
    binary.write_bytes(NOT_UTF8)
    with large.open("wb") as f:
        f.truncate(MAX_TEXT_BYTES + 1)  # sparse: nothing written
    for path, said in (
        (tmp_path / "missing", "no such file"),
        (folder, "is a folder, not a profile"),
        (pipe, "is a device, pipe or socket, not a profile"),  # without a writer: no wait
        (Path("/dev/zero"), "is a device, pipe or socket, not a profile"),  # endless
        (binary, "cannot read: not UTF-8 text"),
        (large, "larger than 16 MiB, not a profile"),
    ):
        with pytest.raises(NamedFileError) as info:
            read_named_text(path, "profile")
        assert str(info.value) == f"{path}: {said}"
    with pytest.raises(NamedFileError, match=r": is a device, pipe or socket, not a WAV file$"):
        read_named_bytes("/dev/zero", "WAV file")
    # `verify --anchors /tmp` said "is a folder, not a anchors file".
    with pytest.raises(NamedFileError, match=r": is a folder, not an anchors file$"):
        read_named_text(folder, "anchors file")


def test_a_recording_may_come_through_a_pipe(tmp_path: Path) -> None:
    pipe = tmp_path / "recorder"
    os.mkfifo(pipe)

    def record() -> None:
        with pipe.open("wb") as writer:  # waits for the reader, as a recorder would
            writer.write(b"RIFF" * 1000)

    recorder = threading.Thread(target=record)
    recorder.start()
    assert read_named_bytes(pipe, "WAV file", pipe_ok=True) == b"RIFF" * 1000  # to the writer's end
    recorder.join(10)


def slowed(call: Callable[..., T]) -> Callable[..., T]:
    def after_a_pause(*args: Any, **kwargs: Any) -> T:
        time.sleep(0.2)
        return call(*args, **kwargs)

    return after_a_pause


def test_a_recorder_already_waiting_at_the_pipe_is_read_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The recorder opens the pipe first and writes its whole recording at once, as soon as a
    reader comes. The pipe is real; os.fstat is slowed (and os.stat, so each opener is slowed
    alike) to widen the moment between looking at the path and reading it, where the reader
    used to close a first, non-blocking look and reopen: the recording went into a pipe with no
    reader, and the reopen waited forever for a writer (tests/monitor/test_named_file.py above
    hung so now and then in CI)."""
    pipe = tmp_path / "recorder"
    os.mkfifo(pipe)
    for name in ("fstat", "stat"):
        monkeypatch.setattr(f"monitor.named_file.os.{name}", slowed(getattr(os, name)))

    def record() -> None:
        with pipe.open("wb") as writer:
            writer.write(b"RIFF" * 1000)

    recorder = threading.Thread(target=record, daemon=True)
    recorder.start()
    time.sleep(0.2)  # the recorder waits in its open
    got: list[bytes] = []
    reader = threading.Thread(
        target=lambda: got.append(read_named_bytes(pipe, "WAV file", pipe_ok=True)), daemon=True
    )
    reader.start()
    reader.join(10)
    assert not reader.is_alive(), "the reader waits for a writer that already came and went"
    assert got == [b"RIFF" * 1000]
    recorder.join(10)


def test_a_binary_password_file_is_a_problem_of_its_field(tmp_path: Path) -> None:
    secret = tmp_path / "pw"
    secret.write_bytes(NOT_UTF8)
    with pytest.raises(ConfigError) as info:
        parse_config(f'[broker]\npassword_file = "{secret}"\n' + MINIMAL)
    assert info.value.problems == [f"broker.password_file: {secret}: cannot read: not UTF-8 text"]


def test_a_profile_that_cannot_be_read_is_a_problem_of_the_sites_profile(tmp_path: Path) -> None:
    profile = tmp_path / "town.toml"
    profile.write_bytes(NOT_UTF8)
    with pytest.raises(ConfigError) as info:
        parse_config(MINIMAL.replace('id = "s1"', f'id = "s1"\nprofile = "{profile}"'))
    assert f"sites[0].profile: {profile}: cannot read: not UTF-8 text" in info.value.problems


def test_a_scenario_file_that_cannot_be_read(tmp_path: Path) -> None:
    scenario = tmp_path / "day.toml"
    scenario.write_bytes(NOT_UTF8)
    with pytest.raises(ScenarioError) as info:
        read_scenario_text(str(scenario))
    assert info.value.problems == [f"{scenario}: cannot read: not UTF-8 text"]


def test_a_light_csv_that_is_no_text_file_is_one_sentence(tmp_path: Path) -> None:
    """`sensor light --source csv:/dev/zero` read until the machine killed it; random bytes gave
    the codec's own words."""
    from sensors import light

    binary = tmp_path / "lux.csv"
    binary.write_bytes(NOT_UTF8)
    for path, said in (
        ("/dev/zero", "/dev/zero: is a device, pipe or socket, not a CSV file"),
        (str(binary), f"{binary}: cannot read: not UTF-8 text"),
        (str(tmp_path), f"{tmp_path}: is a folder, not a CSV file"),
    ):
        with pytest.raises(light.SourceUnavailable) as info:
            light.open_source(f"csv:{path}", 10.0)
        assert str(info.value) == said
