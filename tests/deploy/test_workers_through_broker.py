"""daemon.workers through the shipped production broker (TLS, passwords, ACL, user name as client id).

The shipped mosquitto.conf takes the user name as the client id: two workers logging in with one
account would take each other's session over, again and again. Each worker logs in as
``{username}-w{i}of{n}`` with the daemon's password; make-credentials --daemon-workers n makes those
accounts. Real Mosquitto, the real daemon as a subprocess.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.broker_daemon import SITES, config_text, minute_ago, publish_minute
from tests.support.daemon import Daemon, store_count, wait_until
from tests.support.secure_broker import make_credentials, run_secure_broker


def test_make_credentials_adds_one_account_per_worker_with_the_daemons_password(tmp_path: Path) -> None:
    (tmp_path / "sites.toml").write_text(SITES.format(site="east"))
    out = tmp_path / "out"
    result = make_credentials(
        ["--config", tmp_path / "sites.toml", "--out", out, "--daemon-workers", "2", "--quiet"]
    )
    assert result.returncode == 0, result.stderr
    users = json.loads((out / "credentials.json").read_text())["users"]
    daemon = users["minewatch-daemon"]["password"]
    assert {n for n in users if n.startswith("minewatch-daemon")} == {
        "minewatch-daemon",
        "minewatch-daemon-w1of2",
        "minewatch-daemon-w2of2",
    }
    assert (
        users["minewatch-daemon-w1of2"]["password"] == users["minewatch-daemon-w2of2"]["password"] == daemon
    )
    acl = (out / "acl").read_text()
    assert "user minewatch-daemon-w2of2\ntopic read minewatch/+/sensors/#" in acl
    bad = make_credentials(["--config", tmp_path / "sites.toml", "--out", out, "--daemon-workers", "0"])
    assert bad.returncode == 2 and "--daemon-workers 0: must be at least 1" in bad.stderr


def test_two_workers_each_keep_their_session(tmp_path: Path) -> None:
    sites = ["east", "west"]
    (tmp_path / "sites.toml").write_text("".join(SITES.format(site=s) for s in sites))
    extra = ("--daemon-workers", "2")
    with run_secure_broker(tmp_path / "sites.toml", tmp_path / "broker", extra_args=extra) as broker:
        config = tmp_path / "minewatch.toml"
        store = tmp_path / "store.db"
        text = config_text(broker, "minewatch-daemon", store, sites, sites)
        config.write_text(text.replace("[daemon]\n", "[daemon]\nworkers = 2\n"))
        daemon = Daemon(config).start()
        try:
            assert wait_until(lambda: daemon.logs().count("Connected to") >= 2, 60), daemon.logs()
            publish_minute(broker.connected("sensor-east-n1"), "east", 70.0, minute_ago(4))
            publish_minute(broker.connected("sensor-west-n1"), "west", 71.0, minute_ago(4))
            assert wait_until(lambda: store_count(store, "SELECT COUNT(*) FROM sound") == 120, 30), (
                daemon.logs()
            )
            # Neither worker lost its connection to the other's login (a session takeover).
            assert daemon.logs().count("Connected to") == 2, daemon.logs()
            assert "lost" not in daemon.logs().lower()
        finally:
            assert daemon.stop() == 0, daemon.logs()
