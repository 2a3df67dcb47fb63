"""The daemon and the edge publisher on a NATS cluster made with make-credentials --nats.

    creds = make_nats_credentials(tmp_path, ["north"])
    with run_nats_cluster(tmp_path / "cluster", credentials=creds) as cluster:
        config = write_daemon_config(tmp_path / "minewatch.toml", cluster, creds, first="a")
        link = sensor_link(cluster, creds, first="b", queue=ForwardQueue(...))

Addresses are mqtts://localhost (the name in make-credentials' certificate); each process's
broker.urls starts at the node it is meant to use and lists the others after it.
"""

from __future__ import annotations

import json
from pathlib import Path

from monitor.config import BrokerConfig, Secret
from sensors.link import Link
from sensors.queue import MessageQueue
from tests.support.broker_daemon import SITES
from tests.support.nats_cluster import NatsCluster, wait_mqtt_ready
from tests.support.secure_broker import make_credentials


def make_nats_credentials(workdir: Path, sites: list[str]) -> Path:
    (workdir / "sites.toml").write_text("".join(SITES.format(site=s) for s in sites))
    creds = workdir / "creds"
    result = make_credentials(["--config", workdir / "sites.toml", "--out", creds, "--quiet", "--nats"])
    if result.returncode != 0:
        raise RuntimeError(f"make-credentials --nats failed: {result.stderr}")
    return creds


def password(creds: Path, user: str) -> str:
    return str(json.loads((creds / "credentials.json").read_text())["users"][user]["password"])


def tls_urls(cluster: NatsCluster, first: str) -> list[str]:
    return [u.replace("mqtt://127.0.0.1", "mqtts://localhost") for u in cluster.urls_from(first)]


def wait_cluster_ready(cluster: NatsCluster, creds: Path) -> None:
    for node in cluster.nodes:
        if node.running:
            wait_mqtt_ready(node, tls=(creds / "ca.crt", "town", password(creds, "town")))


def write_daemon_config(
    path: Path, cluster: NatsCluster, creds: Path, sites: list[str], first: str = "a", daemon_extra: str = ""
) -> Path:
    urls = ", ".join(f'"{u}"' for u in tls_urls(cluster, first))
    path.write_text(
        "[broker]\n"
        f"urls = [{urls}]\n"
        'protocol = "3.1.1"\n'
        "session_per_filter = true\n"
        f'session_key_file = "{creds / "session-keys" / "minewatch-daemon"}"\n'
        'client_id = "minewatch-daemon"\n'
        'username = "minewatch-daemon"\n'
        f'password_file = "{creds / "passwords" / "minewatch-daemon"}"\n'
        f'ca_file = "{creds / "ca.crt"}"\n'
        f'[storage]\npath = "{path.parent / "store.db"}"\n'
        f"[daemon]\nstatus_interval_s = 5\n{daemon_extra}\n" + "".join(SITES.format(site=s) for s in sites)
    )
    return path


def sensor_link(cluster: NatsCluster, creds: Path, site: str, queue: MessageQueue, first: str = "b") -> Link:
    user = f"sensor-{site}-n1"
    urls = tuple(tls_urls(cluster, first))
    broker = BrokerConfig(
        url=urls[0],
        urls=urls,
        protocol="3.1.1",
        username=user,
        password=Secret(password(creds, user)),
        ca_file=str(creds / "ca.crt"),
    )
    return Link(broker, user, queue)
