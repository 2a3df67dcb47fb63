"""Deployment files that cannot run here (no Docker engine, no systemd as PID 1), checked statically.

The dashboard's Flux queries are checked against monitor.influx.schema, so renaming a
measurement, field or tag there breaks this test instead of silently emptying a panel.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from monitor.influx.schema import MEASUREMENTS
from tests.support.secure_broker import REPO

pytestmark = pytest.mark.timeout(60)

DEPLOY = REPO / "deploy"
SYSTEMD = DEPLOY / "systemd"
DASHBOARD = DEPLOY / "grafana" / "dashboards" / "minewatch.json"
DATASOURCE_UID = "minewatch-influxdb"
FLUX_COLUMNS = {"_time", "_value", "_field", "_measurement", "_start", "_stop"}


def yaml_load(path: Path) -> Any:
    yaml = pytest.importorskip("yaml", reason="PyYAML is needed to read compose and provisioning files")
    return yaml.safe_load(path.read_text())


# --------------------------------------------------------------------------- systemd


def unit_sections(path: Path) -> dict[str, dict[str, list[str]]]:
    """Sections -> key -> values (systemd keys may repeat), with continuation lines joined."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] | None = None
    pending = ""
    for raw in path.read_text().splitlines():
        line = pending + raw.strip()
        pending = ""
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], {})
            continue
        assert current is not None, f"{path.name}: {line!r} outside a section"
        key, sep, value = line.partition("=")
        assert sep, f"{path.name}: not key=value: {line!r}"
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


HARDENING = {
    "NoNewPrivileges": "yes",
    "ProtectSystem": "strict",
    "ProtectHome": "yes",
    "PrivateTmp": "yes",
    "Restart": "on-failure",
    "CapabilityBoundingSet": "",
}


@pytest.mark.parametrize(
    "name", ["minewatch.service", "minewatch-sensor@.service", "minewatch-portal.service"]
)
def test_unit_has_hardening_and_restart(name: str) -> None:
    unit = unit_sections(SYSTEMD / name)
    assert unit["Unit"]["Description"]
    service = unit["Service"]
    for key, value in HARDENING.items():
        assert service.get(key) == [value], f"{name}: {key}"
    assert service["User"][0] not in ("root", "")
    assert service["ReadWritePaths"], "ProtectSystem=strict needs its one writable place"
    state = service["StateDirectory"][0]
    assert service["ReadWritePaths"][0] == f"/var/lib/{state}"
    assert unit["Install"]["WantedBy"] == ["multi-user.target"]


def test_daemon_and_sensor_commands() -> None:
    daemon = unit_sections(SYSTEMD / "minewatch.service")["Service"]["ExecStart"][0].split()
    assert daemon[0].endswith("/minewatch")
    assert daemon[1:] == ["run", "--config", "/etc/minewatch/minewatch.toml"]
    sensor = unit_sections(SYSTEMD / "minewatch-sensor@.service")["Service"]["ExecStart"][0].split()
    assert sensor[1] == "sensor"
    assert sensor[sensor.index("--sensor") + 1] == "%i"
    assert "--source" in sensor and "--config" in sensor
    portal = unit_sections(SYSTEMD / "minewatch-portal.service")["Service"]["ExecStart"][0].split()
    assert portal[1:] == ["serve", "--config", "/etc/minewatch/minewatch.toml"]


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed")
def test_units_pass_systemd_analyze_verify(tmp_path: Path) -> None:
    # verify insists that ExecStart exists; stand in any executable for /opt/minewatch/bin/minewatch.
    stand_in = shutil.which("minewatch") or sys.executable
    for unit in SYSTEMD.glob("*.service"):
        (tmp_path / unit.name).write_text(unit.read_text().replace("/opt/minewatch/bin/minewatch", stand_in))
    result = subprocess.run(
        [
            "systemd-analyze",
            "verify",
            str(tmp_path / "minewatch.service"),
            str(tmp_path / "minewatch-sensor@n1.service"),
            str(tmp_path / "minewatch-portal.service"),
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    # verify exits 0 on unknown keys and bad values but names the file and line: catch those too.
    ours = [line for line in (result.stdout + result.stderr).splitlines() if "minewatch" in line]
    assert result.returncode == 0 and not ours, result.stdout + result.stderr


# --------------------------------------------------------------------------- compose and image


def test_compose_wires_the_services() -> None:
    compose = yaml_load(DEPLOY / "compose.yaml")
    services = compose["services"]
    default = {name for name, service in services.items() if not service.get("profiles")}
    assert default == {"mosquitto", "influxdb", "grafana", "minewatch", "portal"}
    # The three-node NATS cluster (docs/DEPLOY.md, High availability) only with --profile nats.
    nats = {name: service for name, service in services.items() if "nats" in service.get("profiles", [])}
    assert set(nats) == {"nats-a", "nats-b", "nats-c"}
    assert {tuple(s["volumes"]) for s in nats.values()} == {
        (f"./nats-{n}:/etc/nats:ro", f"nats-{n}-data:/data") for n in "abc"
    }
    portal = services["portal"]
    assert portal["image"] == services["minewatch"]["image"] and portal["command"][0] == "serve"
    assert portal["ports"] == ["127.0.0.1:8080:8080"], "the portal is published on loopback, behind a proxy"
    assert "minewatch-data:/var/lib/minewatch" in portal["volumes"], "the daemon's store"

    daemon = services["minewatch"]
    assert daemon["build"]["context"] == ".."
    assert (
        DEPLOY / daemon["build"]["context"] / daemon["build"]["dockerfile"]
    ).resolve() == DEPLOY / "Dockerfile"
    config_target = daemon["command"][daemon["command"].index("--config") + 1]
    mounts = {v.split(":")[1]: v.split(":")[0] for v in daemon["volumes"]}
    assert config_target in mounts, "the daemon's --config must be a mounted file"
    assert mounts[config_target] == "./minewatch.toml"
    assert set(daemon["depends_on"]) == {"mosquitto", "influxdb"}

    broker = services["mosquitto"]
    assert broker["ports"] == ["8883:8883"], "TLS only, never plain 1883"
    assert "/mosquitto/config/mosquitto.conf" in broker["command"]

    grafana_mounts = {v.split(":")[1]: v.split(":")[0] for v in services["grafana"]["volumes"]}
    assert grafana_mounts["/etc/grafana/provisioning"] == "./grafana/provisioning"
    for source in grafana_mounts.values():
        if source.startswith("./"):
            assert (DEPLOY / source).exists(), source
    provider = yaml_load(DEPLOY / "grafana/provisioning/dashboards/minewatch.yaml")["providers"][0]
    assert grafana_mounts[provider["options"]["path"]] == "./grafana/dashboards"

    defined_secrets = set(compose["secrets"])
    defined_volumes = set(compose["volumes"])
    for name, service in services.items():
        assert set(service.get("secrets", [])) <= defined_secrets, name
        named = {v.split(":")[0] for v in service.get("volumes", []) if not v.startswith((".", "/"))}
        assert named <= defined_volumes, name


def test_dockerfile_builds_the_package() -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.11-slim\b", text, re.M)
    assert re.search(r"^RUN .*pip install \.", text, re.M)
    assert re.search(r"^USER (?!root)", text, re.M)
    copied = set(re.findall(r"^COPY (\S+) ", text, re.M))
    for package in ("monitor", "rules", "sensors"):  # pyproject's packages.find include
        assert package in copied, package
        assert (REPO / package).is_dir()


def test_grafana_datasource_is_influxdb2_flux() -> None:
    source = yaml_load(DEPLOY / "grafana/provisioning/datasources/influxdb.yaml")["datasources"][0]
    assert source["type"] == "influxdb"
    assert source["uid"] == DATASOURCE_UID
    assert source["jsonData"]["version"] == "Flux"
    assert "$__file{/run/secrets/" in source["secureJsonData"]["token"], "token from a secret, not inline"


# --------------------------------------------------------------------------- dashboard


def queries(node: Any) -> list[str]:
    found: list[str] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "query" and isinstance(value, str) and ("from(" in value or "schema." in value):
                found.append(value)
            else:
                found.extend(queries(value))
    elif isinstance(node, list):
        for item in node:
            found.extend(queries(item))
    return found


def datasource_uids(node: Any) -> set[str]:
    uids: set[str] = set()
    if isinstance(node, dict):
        ds = node.get("datasource")
        if isinstance(ds, dict) and ds.get("type") == "influxdb":
            uids.add(ds["uid"])
        for value in node.values():
            uids |= datasource_uids(value)
    elif isinstance(node, list):
        for item in node:
            uids |= datasource_uids(item)
    return uids


@pytest.fixture(scope="module")
def dashboard() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return data


def test_every_query_uses_the_schema(dashboard: dict[str, Any]) -> None:
    all_queries = queries(dashboard)
    assert len(all_queries) >= 10
    for q in all_queries:
        measurements = re.findall(r'r\._measurement\s*==\s*"([^"]+)"', q)
        if "schema.tagValues" in q:
            tag = re.search(r'tag:\s*"([^"]+)"', q)
            assert tag and any(tag.group(1) in m.tags for m in MEASUREMENTS.values()), q
        else:
            assert measurements, f"a query without a measurement filter:\n{q}"
        unknown = [m for m in measurements if m not in MEASUREMENTS]
        assert not unknown, f"unknown measurement {unknown} in:\n{q}"
        fields = {f for m in measurements for f in MEASUREMENTS[m].fields}
        tags = {t for m in measurements for t in MEASUREMENTS[m].tags}
        for field in re.findall(r'r\._field\s*==\s*"([^"]+)"', q):
            assert field in fields, f"field {field!r} not in {measurements}:\n{q}"
        for column in re.findall(r"\br\.([A-Za-z_]\w*)\s*==", q):
            assert column in FLUX_COLUMNS or column in tags, f"tag {column!r} not in {measurements}:\n{q}"
        # columns kept after a pivot are fields or tags too
        for listed in re.findall(r"keep\(columns:\s*\[([^\]]*)\]\)", q):
            for column in re.findall(r'"([^"]+)"', listed):
                assert column in FLUX_COLUMNS | tags | fields, f"column {column!r} unknown in:\n{q}"


def test_dashboard_content(dashboard: dict[str, Any]) -> None:
    assert datasource_uids(dashboard) == {DATASOURCE_UID}
    panels = {p["title"]: p for p in dashboard["panels"]}
    assert len({p["id"] for p in dashboard["panels"]}) == len(dashboard["panels"])

    levels = next(p for t, p in panels.items() if "LAeq" in t)
    steps = levels["fieldConfig"]["defaults"]["thresholds"]["steps"]
    assert {"color": "red", "value": 80} in steps, "the 80 dB limit line"
    assert levels["fieldConfig"]["defaults"]["custom"]["thresholdsStyle"]["mode"].startswith("line")
    assert 'r._measurement == "sound"' in levels["targets"][0]["query"]

    assert any("light" in p["targets"][0]["query"] and "night" in t.lower() for t, p in panels.items())
    assert any('r.kind == "blast"' in p["targets"][0]["query"] for p in panels.values())
    assert sum('"sensor_health"' in p["targets"][0]["query"] for p in panels.values()) >= 2

    annotations = {a["name"]: a for a in dashboard["annotations"]["list"]}
    assert 'r._measurement == "findings"' in annotations["Findings"]["target"]["query"]
    assert 'r.kind == "blast"' in annotations["Blasts"]["target"]["query"]

    variables = {v["name"] for v in dashboard["templating"]["list"]}
    for q in queries(dashboard):
        for used in re.findall(r"\$\{(\w+)\}", q):
            assert used in variables, f"${{{used}}} is not a dashboard variable"


# --------------------------------------------------------------------------- docs


def test_deploy_guide() -> None:
    text = (REPO / "docs" / "DEPLOY.md").read_text()
    for path in re.findall(r"`(deploy/[^`\s]+)`", text):
        assert list(REPO.glob(path)), path
    assert "## Capacity" in text and "bench/ingest.py" in text and "docs/PERFORMANCE.md" in text
    assert ".backup" in text and "VACUUM INTO" in text, "WAL store: online backup, not a file copy"
    assert re.search(r"Shared\s+subscriptions are not used", text)
