"""One daemon judges a site of a store; a second `minewatch run` on it is refused in one line.

Two daemons of one configuration both ran: each kept its own minutes and episodes and would
issue every notice and alert twice, and with one client id they took each other's broker
session in turn. Daemons of other sites of the same store (daemon.sites) still run side by
side. The daemons and the broker (Mosquitto) are real.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from monitor.claims import SiteTaken, claim_sites, claims_path
from tests.support.cli import run_minewatch
from tests.support.daemon import Daemon, wait_until, write_config
from tests.support.paths import REPO
from tests.support.servers import Mosquitto

OTHER_SITE = """
[[sites]]
id = "east-pit"
name = "East pit"
timezone = "America/Chicago"
latitude = 45.28
longitude = -91.60
[[sites.sensors]]
id = "n1"
kind = "sound"
"""


def test_a_claim_holds_against_another_process_until_it_ends(tmp_path: Path) -> None:
    store = str(tmp_path / "store.db")
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from monitor.claims import claim_sites;"
            f" c = claim_sites({store!r}, ['quarry']); print('held', flush=True); sys.stdin.read()",
        ],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with pytest.raises(
            SiteTaken, match=r"^site 'quarry' is judged by another minewatch daemon on the store"
        ):
            claim_sites(store, ["east-pit", "quarry"])
        other = claim_sites(store, ["east-pit"])  # another site of the same store: free
        other.release()
    finally:
        holder.kill()
        holder.wait(10)
    claim_sites(store, ["quarry", "east-pit"]).release()  # the kernel let go of the dead one's
    assert Path(claims_path(store)).exists()


def test_a_second_daemon_on_the_same_sites_is_refused_and_the_first_runs_on(
    tmp_path: Path, mosquitto: Mosquitto
) -> None:
    both = write_config(tmp_path / "minewatch.toml", mosquitto.url, extra_sites=OTHER_SITE)
    first = Daemon(both).start()
    try:
        first.wait_ready()
        second = run_minewatch("run", "--config", both, timeout=60)
        assert second.returncode == 2, second.stderr
        lines = second.stderr.strip().splitlines()
        assert lines == [
            f"minewatch run: site 'quarry' is judged by another minewatch daemon on the store"
            f" '{tmp_path / 'store.db'}': stop that one first, or give each daemon its own daemon.sites"
        ]
        assert first.alive()
    finally:
        assert first.stop() == 0


def test_daemons_of_other_sites_of_one_store_run_side_by_side(tmp_path: Path, mosquitto: Mosquitto) -> None:
    configs = []
    for name, site in (("west", "quarry"), ("east", "east-pit")):
        folder = tmp_path / name
        folder.mkdir()
        config = write_config(
            folder / "minewatch.toml",
            mosquitto.url,
            client_id=f"minewatch-{name}",
            daemon_extra=f'sites = ["{site}"]',
            extra_sites=OTHER_SITE,
        )
        # One store for both (write_config puts it beside each configuration).
        config.write_text(config.read_text().replace(str(folder / "store.db"), str(tmp_path / "store.db")))
        configs.append(config)
    daemons = [Daemon(config).start() for config in configs]
    try:
        for daemon in daemons:
            daemon.wait_ready()
        assert wait_until(lambda: all(d.alive() for d in daemons), 3)
        assert all("is judged by another" not in d.logs() for d in daemons)
    finally:
        assert [d.stop() for d in daemons] == [0, 0]


def test_a_second_sensor_on_one_queue_is_refused_and_the_queue_goes_on(
    tmp_path: Path, mosquitto: Mosquitto
) -> None:
    """Two `minewatch sensor` on one queue both sent from it (every message twice), taking each
    other's broker session (one client id) in turn."""
    config = write_config(tmp_path / "minewatch.toml", mosquitto.url)
    queue = tmp_path / "n1.queue.db"
    argv = [sys.executable, "-m", "monitor.cli", "sensor", "sound", "--config", str(config)]
    argv += ["--sensor", "n1", "--source", "synthetic", "--queue", str(queue)]
    log = tmp_path / "first.log"
    with log.open("wb") as out:
        first = subprocess.Popen(argv, stdout=out, stderr=out)
        try:
            assert wait_until(lambda: "Connected" in log.read_text(errors="replace") or queue.exists(), 30)
            second = subprocess.run(argv, capture_output=True, text=True, timeout=60)
            assert second.returncode == 2, second.stderr
            assert second.stderr.strip().splitlines() == [
                f"minewatch sensor sound: --queue {queue}: another minewatch sensor sends from it:"
                " stop that one first, or give this one its own --queue"
            ]
            assert first.poll() is None
        finally:
            first.terminate()
            assert first.wait(30) == 0
    third = subprocess.run(
        [*argv, "--duration", "1", "--speed", "max"], capture_output=True, text=True, timeout=60
    )
    assert third.returncode == 0, third.stderr


def test_a_filesystem_without_record_locks_is_said_so_not_taken_for_a_claim(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stand-in for lockf: no filesystem without POSIX record locks (an NFS mount without
    lockd answers ENOLCK) can be mounted here. Such a store must not read as 'judged by
    another daemon', which would send the operator looking for a daemon that is not there."""
    import errno
    import fcntl

    from monitor.errors import StoreError

    def no_locks(*args: object) -> None:
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "lockf", no_locks)
    store = str(tmp_path / "store.db")
    with pytest.raises(StoreError, match=r"^cannot lock '.*store\.db-sites': No locks available$"):
        claim_sites(store, ["quarry"])


@pytest.mark.parametrize("alias", ["hard link", "symlink"])
def test_a_second_sensor_given_another_name_of_the_queue_file_is_refused_naming_both(
    tmp_path: Path, mosquitto: Mosquitto, alias: str
) -> None:
    """The claim was keyed on the path (a lock on ``<queue>-owner``): a second sensor given a hard
    link or a symlink to the file the first sends from claimed ``<other name>-owner``, opened the
    file under another name (a second WAL beside it) and sent it all again. It is refused
    before it opens the file, in one line naming both names, and the first runs on."""
    config = write_config(tmp_path / "minewatch.toml", mosquitto.url)
    queue = tmp_path / "n1.queue.db"
    other_folder = tmp_path / "other"
    other_folder.mkdir()
    other = other_folder / "n1-again.queue.db"
    argv = [sys.executable, "-m", "monitor.cli", "sensor", "sound", "--config", str(config)]
    argv += ["--sensor", "n1", "--source", "synthetic"]
    log = tmp_path / "first.log"
    with log.open("wb") as out:
        first = subprocess.Popen([*argv, "--queue", str(queue)], stdout=out, stderr=out)
        try:
            assert wait_until(lambda: "Connected" in log.read_text(errors="replace"), 30)
            if alias == "hard link":
                other.hardlink_to(queue)
            else:
                other.symlink_to(queue)
            # (Let in, it would stop after two seconds of input rather than run on.)
            again = [*argv, "--queue", str(other), "--duration", "2", "--speed", "max"]
            second = subprocess.run(again, capture_output=True, text=True, timeout=60)
            assert second.returncode == 2, second.stderr
            assert second.stderr.strip().splitlines() == [
                f"minewatch sensor sound: --queue {other}: is the file {queue}, which another"
                " minewatch sensor sends from (one file, two names): stop that one first, or give"
                " this one its own --queue"
            ]
            # It never opened the file: no WAL, no reserve, no marker under its name.
            assert sorted(p.name for p in other_folder.iterdir()) == [other.name]
            assert first.poll() is None
        finally:
            first.terminate()
            assert first.wait(30) == 0
    assert "sends from" not in log.read_text(errors="replace")


def test_a_queue_that_cannot_be_opened_is_said_as_the_queue_s(tmp_path: Path) -> None:
    """The claim opens the queue's file first; its refusal read as the store's ('(storage.path in
    ...)'), which the sensor has none of. Here a symlink to a folder that is not there (a card
    not mounted)."""
    queue = tmp_path / "n1.queue.db"
    queue.symlink_to(tmp_path / "card" / "n1.queue.db")
    config = write_config(tmp_path / "minewatch.toml", "mqtt://127.0.0.1:1")
    argv = [sys.executable, "-m", "monitor.cli", "sensor", "sound", "--config", str(config)]
    argv += ["--sensor", "n1", "--source", "synthetic", "--queue", str(queue), "--duration", "1"]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        f"minewatch sensor sound: --queue {queue}: cannot open '{queue}': No such file or directory"
    ]
