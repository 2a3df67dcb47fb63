"""deploy/mosquitto/make-credentials without a running broker: files, modes, re-runs, bad input."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from monitor.config import load_config
from tests.support.paths import REPO
from tests.support.secure_broker import MAKE_CREDENTIALS, TEST_CONFIG, make_credentials, write_test_config

pytestmark = pytest.mark.timeout(60)


def run_ok(*args: str | Path) -> subprocess.CompletedProcess[str]:
    result = make_credentials([*args, "--quiet"])
    assert result.returncode == 0, result.stderr
    return result


def users(out: Path) -> dict[str, dict[str, str]]:
    data: dict[str, dict[str, str]] = json.loads((out / "credentials.json").read_text())["users"]
    return data


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def conf_directives(path: Path) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, _, value = line.strip().partition(" ")
            found.setdefault(key, []).append(value.strip())
    return found


@pytest.fixture
def out(tmp_path: Path) -> Path:
    config = write_test_config(tmp_path / "minewatch.toml")
    run_ok("--config", config, "--out", tmp_path / "out", "--port", "18999", "--san", "DNS:mosquitto")
    return tmp_path / "out"


def test_script_is_executable() -> None:
    assert os.access(MAKE_CREDENTIALS, os.X_OK)
    assert MAKE_CREDENTIALS.read_text().startswith("#!/usr/bin/env python3\n")


def test_accounts_per_role(out: Path) -> None:
    assert {name: u["role"] for name, u in users(out).items()} == {
        "minewatch-daemon": "daemon",
        "minewatch-portal": "portal",
        "town": "town",
        "operator-north": "operator",
        "operator-south": "operator",
        "sensor-north-n1": "sensor",
        "sensor-north-n2": "sensor",
        "sensor-north-l1": "sensor",
        "sensor-south-n1": "sensor",
    }
    hashed = dict(line.split(":", 1) for line in (out / "passwd").read_text().splitlines())
    assert set(hashed) == set(users(out))
    for name, user in users(out).items():
        assert hashed[name].startswith("$7$"), "passwords are stored hashed"
        assert user["password"] not in (out / "passwd").read_text()
        assert (out / "passwords" / name).read_text().strip() == user["password"]


def test_secrets_are_private(out: Path) -> None:
    for name in ("ca.key", "server.key", "passwd", "credentials.json"):
        assert mode(out / name) == 0o600, name
    assert mode(out / "passwords") == 0o700
    assert all(mode(p) == 0o600 for p in (out / "passwords").iterdir())
    assert not (out / "passwd.plain").exists()


def assert_server_cert_verifies(out: Path) -> None:
    """server.crt is signed by the ca.crt beside it (openssl verify)."""
    verify = subprocess.run(
        ["openssl", "verify", "-CAfile", str(out / "ca.crt"), str(out / "server.crt")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert verify.returncode == 0, verify.stdout + verify.stderr


def test_server_certificate(out: Path) -> None:
    text = subprocess.run(
        ["openssl", "x509", "-in", str(out / "server.crt"), "-noout", "-text"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "DNS:localhost" in text and "IP Address:127.0.0.1" in text and "DNS:mosquitto" in text
    assert "TLS Web Server Authentication" in text
    assert_server_cert_verifies(out)


def test_a_ca_made_anew_reissues_the_server_certificate(tmp_path: Path, out: Path) -> None:
    """With ca.key gone the CA is made again, and the server certificate with it: one signed by
    the old CA would not verify against the new ca.crt the clients are given."""
    server = (out / "server.crt").read_bytes()
    (out / "ca.key").unlink()
    run_ok("--config", write_test_config(tmp_path / "again.toml"), "--out", out)
    assert (out / "server.crt").read_bytes() != server
    assert_server_cert_verifies(out)


def test_rendered_configuration(out: Path) -> None:
    text = (out / "mosquitto.conf").read_text()
    assert "@" not in "".join(line for line in text.splitlines() if not line.startswith("#"))
    d = conf_directives(out / "mosquitto.conf")
    assert d["listener"] == ["18999"]
    assert d["allow_anonymous"] == ["false"]
    assert d["require_certificate"] == ["false"]
    assert d["persistence"] == ["true"]
    assert d["password_file"] == [f"{out}/passwd"]
    assert d["acl_file"] == [f"{out}/acl"]
    assert d["cafile"] == [f"{out}/ca.crt"]
    assert d["persistence_location"] == [f"{out}/data/"]
    assert int(d["max_queued_messages"][0]) >= 100_000
    assert d["max_queued_bytes"] == ["0"]
    assert int(d["max_inflight_messages"][0]) >= 20
    assert d["persistent_client_expiration"]
    assert d["use_username_as_clientid"] == ["true"]
    # Mosquitto 2.0 honours use_username_as_clientid only as a listener option.
    lines = [ln for ln in text.splitlines() if ln and not ln.startswith("#")]
    assert lines.index("use_username_as_clientid true") > lines.index("listener 18999")


def test_conf_only_for_a_container(tmp_path: Path) -> None:
    run_ok(
        "--conf-only", "--out", tmp_path, "--conf-dir", "/mosquitto/config", "--data-dir", "/mosquitto/data"
    )
    d = conf_directives(tmp_path / "mosquitto.conf")
    assert d["listener"] == ["8883"]
    assert d["user"] == ["mosquitto"]
    assert d["certfile"] == ["/mosquitto/config/server.crt"]
    assert d["persistence_location"] == ["/mosquitto/data/"]
    assert not (tmp_path / "credentials.json").exists()


def test_rerun_keeps_keys_and_passwords(tmp_path: Path, out: Path) -> None:
    before = users(out)
    ca = (out / "ca.crt").read_bytes()
    server = (out / "server.crt").read_bytes()
    bigger = TEST_CONFIG + '\n[[sites.sensors]]\nid = "n9"\nkind = "sound"\n'  # to the last site, south
    config = write_test_config(tmp_path / "bigger.toml", bigger)
    run_ok("--config", config, "--out", out, "--rotate", "town")
    after = users(out)
    assert (out / "ca.crt").read_bytes() == ca
    assert (out / "server.crt").read_bytes() == server
    assert set(after) == {*before, "sensor-south-n9"}
    assert after["town"]["password"] != before["town"]["password"]
    assert all(after[n]["password"] == before[n]["password"] for n in before if n != "town")
    # and a sensor removed from the configuration loses its account and password file
    smaller = TEST_CONFIG.replace('[[sites.sensors]]\nid = "n2"\nkind = "sound"\n', "")
    run_ok("--config", write_test_config(tmp_path / "smaller.toml", smaller), "--out", out)
    assert "sensor-north-n2" not in users(out)
    assert not (out / "passwords" / "sensor-north-n2").exists()
    assert "sensor-north-n2" not in (out / "acl").read_text()


def test_acl_grants(out: Path) -> None:
    blocks: dict[str, list[str]] = {}
    current = ""
    for line in (out / "acl").read_text().splitlines():
        if line.startswith("user "):
            current = line.split()[1]
            blocks[current] = []
        elif line.startswith(("topic ", "pattern ")):
            assert current, "no grant outside a user block (it would apply to everyone)"
            blocks[current].append(line)
    assert blocks["sensor-north-n1"] == ["topic write minewatch/north/sensors/n1/#"]
    outputs = ("violations", "findings", "alerts", "notices", "status", "rejected", "anchors", "daemon")
    assert blocks["operator-north"] == [
        "topic write minewatch/north/events/#",
        *(f"topic read minewatch/north/{o}/#" for o in outputs),
    ]
    assert blocks["minewatch-daemon"][:2] == [
        "topic read minewatch/+/sensors/#",
        "topic read minewatch/+/events/#",
    ]
    # The portal publishes the operator's forms for every site, one level under events/, and reads nothing.
    assert blocks["minewatch-portal"] == [
        "topic write minewatch/north/events/+",
        "topic write minewatch/south/events/+",
    ]
    assert not any("write" in g for g in blocks["town"])
    assert not any("sensors" in g or "events" in g for g in blocks["town"])


def test_acl_header_says_what_mosquitto_does(out: Path) -> None:
    """Mosquitto 2.0 grants a forbidden subscription and filters on delivery
    (tests/deploy/test_broker_acl.py shows it): the header must not promise a refusal."""
    lines = (out / "acl").read_text().splitlines()
    header = " ".join(line.lstrip("# ") for line in lines if line.startswith("#"))
    assert "refused" not in header
    assert "A subscription outside them is still granted by Mosquitto 2.0" in header
    assert "nothing forbidden arrives" in header


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (TEST_CONFIG.replace('id = "n2"', 'id = "n/2"'), "sites[0].sensors[1].id"),
        (TEST_CONFIG.replace('id = "n2"', 'id = "n1"'), "duplicate sensor id"),
        (TEST_CONFIG.replace('id = "south"', 'id = "north"'), "duplicate site id"),
        (TEST_CONFIG.replace('id = "south"', 'id = "so+uth"'), "sites[1].id"),
        ("[broker]\n", "at least one [[sites]]"),
        ("not toml ===", "not valid TOML"),
    ],
)
def test_bad_configuration_is_refused(tmp_path: Path, text: str, problem: str) -> None:
    config = write_test_config(tmp_path / "bad.toml", text)
    result = make_credentials(["--config", config, "--out", tmp_path / "out"])
    assert result.returncode == 2
    assert problem in result.stderr
    assert not (tmp_path / "out" / "credentials.json").exists()


def test_ambiguous_user_names_are_refused(tmp_path: Path) -> None:
    # site "a-b" + sensor "c" and site "a" + sensor "b-c" would both be sensor-a-b-c
    text = (
        '[[sites]]\nid = "a-b"\n[[sites.sensors]]\nid = "c"\nkind = "sound"\n'
        '[[sites]]\nid = "a"\n[[sites.sensors]]\nid = "b-c"\nkind = "sound"\n'
    )
    result = make_credentials(
        ["--config", write_test_config(tmp_path / "c.toml", text), "--out", tmp_path / "o"]
    )
    assert result.returncode == 2 and "sensor-a-b-c" in result.stderr


def test_a_town_user_cannot_take_the_portals_name(tmp_path: Path) -> None:
    config = write_test_config(tmp_path / "c.toml")
    result = make_credentials(
        ["--config", config, "--out", tmp_path / "o", "--town-user", "minewatch-portal"]
    )
    assert result.returncode == 2 and "'minewatch-portal' would belong to two accounts" in result.stderr


def test_example_configuration_if_present(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The shipped example config and monitor.config agree with the script on sites and sensors."""
    example = REPO / "deploy" / "dovre-quarry.toml"
    run_ok("--config", example, "--out", tmp_path / "out")
    names = set(users(tmp_path / "out"))
    for name in re.findall(r'_env\s*=\s*"([^"]+)"', example.read_text()):
        monkeypatch.setenv(name, "not-a-secret")  # secrets the example takes from the environment
    # A loader that cannot read the shipped example is a failure here too, never a skip.
    config = load_config(example)
    expected = {f"sensor-{site.id}-{s.id}" for site in config.sites for s in site.sensors}
    expected |= {f"operator-{site.id}" for site in config.sites}
    assert expected | {"minewatch-daemon", "minewatch-portal", "town"} == names


def test_an_out_folder_of_someone_elses_files_is_left_as_it_is(tmp_path: Path) -> None:
    """--out naming a folder of files the script did not write (an /etc/mosquitto of a broker
    set up by hand) overwrote its acl, passwd and mosquitto.conf and deleted the files of its
    passwords/ folder. It is refused in one line, and nothing there changes."""
    config = write_test_config(tmp_path / "c.toml")
    mine = tmp_path / "etc"
    (mine / "passwords").mkdir(parents=True)
    files = {
        "acl": "user alice\ntopic read #\n",
        "passwd": "alice:$7$101$x\n",
        "mosquitto.conf": "listener 1883\n",
        "passwords/alice": "secret\n",
    }
    for name, text in files.items():
        (mine / name).write_text(text)
    for argv in (["--config", config], ["--conf-only"]):
        refused = make_credentials([*argv, "--out", mine])
        assert refused.returncode == 2 and len(refused.stderr.splitlines()) == 1, refused.stderr
        assert "not written by make-credentials" in refused.stderr and "mosquitto.conf" in refused.stderr
    assert (
        "acl, mosquitto.conf, passwd, passwords/"
        in make_credentials(["--config", config, "--out", mine]).stderr
    )
    assert {name: (mine / name).read_text() for name in files} == files
    assert sorted(p.name for p in mine.iterdir()) == ["acl", "mosquitto.conf", "passwd", "passwords"]

    other = tmp_path / "other"
    other.mkdir()
    (other / "credentials.json").write_text("[1, 2]\n")
    refused = make_credentials(["--config", config, "--out", other])
    assert refused.returncode == 2 and "credentials.json" in refused.stderr, refused.stderr
    assert (other / "credentials.json").read_text() == "[1, 2]\n"

    a_file = tmp_path / "a-file"
    a_file.write_text("x\n")
    for argv, said in (
        (["--out", a_file], f"--out {a_file}: not a folder"),
        (["--out", tmp_path / "o", "--ca-days", "0"], "--ca-days 0: must be at least 1"),
        (["--out", tmp_path / "o", "--server-days", "-5"], "--server-days -5: must be at least 1"),
    ):
        refused = make_credentials(["--config", config, *argv])
        assert refused.returncode == 2 and said in refused.stderr, refused.stderr
        assert "Traceback" not in refused.stderr
    assert a_file.read_text() == "x\n"

    empty = tmp_path / "empty"
    empty.mkdir()
    run_ok("--config", config, "--out", empty)  # an empty folder is as good as a new one
    run_ok("--config", config, "--out", empty)  # and the script's own files are its to rewrite
    run_ok("--conf-only", "--out", empty)


def test_credentials_json_replaced_after_it_was_judged_is_not_read_again(
    tmp_path: Path, out: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A re-run reads credentials.json once: the file judged the script's is the one whose
    passwords are kept, and a file put in its place after that check (here something else's, not
    JSON) is neither read nor half-applied. The script runs in this process so that the file can
    be replaced at that moment, right after its own check returns (the one hook here; the files,
    openssl and the writes are real)."""
    before = users(out)
    loader = importlib.machinery.SourceFileLoader("make_credentials_script", str(MAKE_CREDENTIALS))
    spec = importlib.util.spec_from_file_location(loader.name, MAKE_CREDENTIALS, loader=loader)
    assert spec is not None
    script = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, loader.name, script)  # its dataclasses look their module up
    loader.exec_module(script)
    checked = script.refuse_foreign_files

    def check_then_replace(*args: object) -> object:
        result = checked(*args)
        (out / "credentials.json").write_text("someone else's notes, not JSON\n")
        return result

    monkeypatch.setattr(script, "refuse_foreign_files", check_then_replace)
    config = tmp_path / "minewatch.toml"
    assert script.main(["--config", str(config), "--out", str(out), "--quiet"]) == 0
    after = users(out)
    assert {n: u["password"] for n, u in after.items()} == {n: u["password"] for n, u in before.items()}
    for name, user in after.items():
        assert (out / "passwords" / name).read_text().strip() == user["password"]
