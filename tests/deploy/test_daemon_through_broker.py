"""The daemon through the shipped production broker configuration (TLS, passwords, ACL).

Real Mosquitto with deploy/mosquitto/mosquitto.conf rendered by make-credentials, and the real
daemon (`minewatch run`) as a subprocess.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.broker_daemon import SITES, config_text, minute_ago, publish_minute
from tests.support.daemon import Daemon, store_count, wait_until
from tests.support.secure_broker import run_secure_broker


def test_end_to_end_through_tls_broker_with_acl(tmp_path: Path) -> None:
    sites = ["north"]
    (tmp_path / "sites.toml").write_text("".join(SITES.format(site=s) for s in sites))
    with run_secure_broker(tmp_path / "sites.toml", tmp_path / "broker") as broker:
        config = tmp_path / "minewatch.toml"
        config.write_text(config_text(broker, "minewatch-daemon", tmp_path / "store.db", sites, sites))
        daemon = Daemon(config).start()
        try:
            daemon.wait_ready()
            town = broker.connected("town")
            town.subscribe("minewatch/north/violations")
            sensor = broker.connected("sensor-north-n1")
            publish_minute(sensor, "north", 86.0, minute_ago(3))
            assert wait_until(
                lambda: store_count(tmp_path / "store.db", "SELECT COUNT(*) FROM sound") == 60, 30
            )
            assert town.wait_for(lambda msgs: any(m.topic.endswith("/violations") for m in msgs), 30), (
                daemon.logs()
            )
            violation = json.loads(town.payloads("minewatch/north/violations")[0])
            assert violation["standard"] == "noise" and violation["sensors"] == ["n1"]
        finally:
            assert daemon.stop() == 0, daemon.logs()


def test_two_instances_with_disjoint_sites(tmp_path: Path) -> None:
    sites = ["east", "west"]
    (tmp_path / "sites.toml").write_text("".join(SITES.format(site=s) for s in sites))
    extra = ("--daemon-instance", "a=east", "--daemon-instance", "b=west")
    with run_secure_broker(tmp_path / "sites.toml", tmp_path / "broker", extra_args=extra) as broker:
        daemons = []
        for name, owned in (("a", ["east"]), ("b", ["west"])):
            workdir = tmp_path / name
            workdir.mkdir()
            config = workdir / "minewatch.toml"
            config.write_text(
                config_text(broker, f"minewatch-daemon-{name}", workdir / "store.db", owned, sites)
            )
            daemons.append(Daemon(config).start())
        try:
            for d in daemons:
                d.wait_ready()
            east = broker.connected("sensor-east-n1")
            west = broker.connected("sensor-west-n1")
            publish_minute(east, "east", 70.0, minute_ago(4))
            publish_minute(west, "west", 71.0, minute_ago(4))
            publish_minute(west, "west", 72.0, minute_ago(3))
            store_a, store_b = tmp_path / "a" / "store.db", tmp_path / "b" / "store.db"
            assert wait_until(lambda: store_count(store_a, "SELECT COUNT(*) FROM sound") == 60, 30)
            assert wait_until(lambda: store_count(store_b, "SELECT COUNT(*) FROM sound") == 120, 30)
            # Each instance holds only its own sites' data: per-site state never splits.
            assert store_count(store_a, "SELECT COUNT(*) FROM sound WHERE site != 'east'") == 0
            assert store_count(store_b, "SELECT COUNT(*) FROM sound WHERE site != 'west'") == 0
            assert store_count(store_a, "SELECT COUNT(*) FROM rejections") == 0
            assert store_count(store_b, "SELECT COUNT(*) FROM rejections") == 0
        finally:
            for d in daemons:
                assert d.stop() == 0, d.logs()
