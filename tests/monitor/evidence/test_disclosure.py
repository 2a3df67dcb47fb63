"""What a bundle discloses: the site's configuration by allow-list, records by window and reader.

Issue 24: a bundle carried the whole configuration minus a deny-list (the portal's secret key,
password and token hashes, the broker's password, every other site), and every record of its
chain segment, widened to the neighbouring anchors, whatever the reader's scope.
"""

from __future__ import annotations

import csv
import io
import json
import tomllib
import zipfile
from datetime import datetime, timedelta
from pathlib import Path

from monitor.config import load_config
from monitor.credentials import hash_password, hash_token
from monitor.daemon.clock import Clock
from monitor.daemon.pipeline import Pipeline
from monitor.evidence import export_bundle, exported_window, load_anchors, verify_bundle
from monitor.journal.store import Store, to_us
from rules.model import SoundLevels, TruckPassage
from tests.monitor.evidence.test_bundles import SITE, T0, _finding
from tests.support.daemon import write_config

# Values that must appear in no member of any bundle.
SECRETS = {
    "broker password": "BROKER-PASSWORD-7f3a",
    "portal secret key": "PORTAL-SECRET-KEY-9c1d",
    "portal MQTT password": "PORTAL-MQTT-PASSWORD-2b8e",
    "password file content": "FILE-HELD-PASSWORD-44aa",
    "webhook secret": "WEBHOOK-SECRET-5e0f",
    "sensor signing key": "SENSOR-SIGNING-KEY-d2c4",
    "other site": "Secret Gravel Pit",
    "other site id": "pit2",
    "other sensor": "pit2-noise-mic",
    "webhook url": "https://hooks.example/operator-only",
}


def _config_with_secrets(tmp_path: Path) -> Path:
    """The test quarry's configuration with every kind of secret inline, a file-held one, portal
    accounts with their hashes, a delivery channel, the Town's contacts and a second site."""
    held = tmp_path / "portal-mqtt.pass"
    held.write_text(SECRETS["password file content"] + "\n")
    SECRETS["password file path"] = str(held)
    SECRETS["password hash"] = hash_password("inspector-pw")
    SECRETS["token hash"] = hash_token("api-token-of-the-clerk")
    path = write_config(
        tmp_path / "minewatch.toml",
        "mqtt://127.0.0.1:1",
        site=SITE,
        extra_sites=f"""
[[sites]]
id = "{SECRETS["other site id"]}"
name = "{SECRETS["other site"]}"
timezone = "America/Chicago"
latitude = 45.1
longitude = -91.5
[[sites.sensors]]
id = "{SECRETS["other sensor"]}"
kind = "sound"

[town]
officer = "Jane Olson"
title = "Town Clerk"
contact = "Town Hall, Dovre"

[[recipients]]
name = "operator"
role = "operator"
[[recipients.channels]]
type = "webhook"
url = "{SECRETS["webhook url"]}"
secret = "{SECRETS["webhook secret"]}"

[portal]
secret_key = "{SECRETS["portal secret key"]}"
mqtt_username = "minewatch-portal"
mqtt_password_file = "{held}"
[[portal.accounts]]
name = "inspector"
role = "inspector"
password_hash = "{SECRETS["password hash"]}"
sites = ["{SITE}"]
not_before = "2024-03-10T07:00:00Z"
[[portal.accounts]]
name = "clerk"
role = "town"
password_hash = "{SECRETS["password hash"]}"
token_hash = "{SECRETS["token hash"]}"
""",
    )
    text = path.read_text()
    text = text.replace("[broker]\n", f'[broker]\npassword = "{SECRETS["broker password"]}"\n', 1)
    text = text.replace(
        'id = "n1"\nkind = "sound"\n',
        f'id = "n1"\nkind = "sound"\nsigning_key = "{SECRETS["sensor signing key"]}"\n',
    )
    path.write_text(text)
    return path


def _anchor(store: Store, now: datetime, anchors: list[dict[str, object]]) -> None:
    """What the daemon does every anchor interval: record the head, then restate the config."""
    seq, head = store.head(SITE)
    store.conn.execute("INSERT INTO anchors VALUES (?,?,?,?)", (SITE, seq, head, to_us(now)))
    store.restate_config(SITE, now)
    anchors.append({"site": SITE, "seq": seq, "head": head, "ts": now.isoformat()})


def _sound(store: Store, start: datetime, seconds: int) -> None:
    for i in range(seconds):
        ts = start + timedelta(seconds=i)
        store.append_sound(
            SoundLevels(SITE, "n1", ts, 1.0, 60.0 + (i % 7) * 0.5, 70.0, 80.0),
            source="levels",
            late=False,
            now=ts + timedelta(seconds=1),
        )


def _daemon_store(tmp_path: Path, *, whole_file: bool = False) -> tuple[Path, Path]:
    """A store the daemon started on (its start-up config record, from the real Pipeline), ten
    minutes of records around a window, anchors before, inside and after it. Returns the
    configuration and the town's anchors. ``whole_file``: the daemon that started was an earlier
    minewatch, which chained the whole configuration file (secrets masked by name only)."""
    config_path = _config_with_secrets(tmp_path)
    config = load_config(config_path)
    store = Store(config.storage.path)
    anchors: list[dict[str, object]] = []
    try:
        if whole_file:
            masked = config.raw_text.replace(SECRETS["broker password"], "(secret: left out of the evidence)")
            with store.batch():
                store.append_config_record(SITE, "dovre", _profile_text(), masked, T0 - timedelta(minutes=2))
        else:
            Pipeline(config, store, lambda topic, payload, retain: None, Clock("wall"))  # chains the config
        with store.batch():
            _anchor(store, T0 - timedelta(minutes=1), anchors)
            _sound(store, T0, 120)
            _anchor(store, T0 + timedelta(seconds=121), anchors)
            _sound(store, T0 + timedelta(seconds=120), 40)
            # after that anchor, before the window (T0+3m to T0+6m): an event, a finding, an alert
            truck = TruckPassage(SITE, "EARLY-TRUCK", T0 + timedelta(seconds=150), "g1", "in")
            store.append_event(
                truck, {"id": truck.id, "note": "EARLY-EVENT-NOTE"}, T0 + timedelta(seconds=151)
            )
            early = _finding(T0 + timedelta(seconds=100), "EARLY-FINDING 82.5 dB(A) at n2")
            store.append_finding(early, T0 + timedelta(seconds=160))
            store.append_alert(
                "early",
                SITE,
                "town",
                "violation",
                "violation",
                "c1",
                "EARLY-ALERT",
                {},
                T0 + timedelta(seconds=161),
            )
            _sound(store, T0 + timedelta(seconds=160), 380)
            # inside the window: one of each, and an alert for the operator alone
            inside = T0 + timedelta(minutes=4)
            truck = TruckPassage(SITE, "WINDOW-TRUCK", inside, "g1", "out")
            store.append_event(truck, {"id": truck.id, "note": "WINDOW-EVENT-NOTE"}, inside)
            store.append_finding(_finding(inside, "WINDOW-FINDING 83.0 dB(A) at n2"), inside)
            store.append_alert(
                "town-in", SITE, "town", "violation", "violation", "c2", "WINDOW-ALERT", {}, inside
            )
            store.append_alert(
                "op-in", SITE, "operator", "early_warning", "warning", "c3", "OPERATOR-ONLY-ALERT", {}, inside
            )
            # after the window, before the anchor that closes the segment
            late = T0 + timedelta(minutes=7)
            store.append_alert("late", SITE, "town", "violation", "violation", "c4", "LATE-ALERT", {}, late)
            _anchor(store, T0 + timedelta(minutes=9, seconds=1), anchors)
    finally:
        store.close()
    town = tmp_path / "town-anchors.json"
    town.write_text(json.dumps(anchors))
    return config_path, town


def _members(bundle: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(bundle) as zf:
        return {name: zf.read(name) for name in zf.namelist()}


def _elements(data: bytes) -> list[dict[str, object]]:
    return [json.loads(line.rstrip(",")) for line in data.decode().splitlines() if line not in ("[", "]")]


def test_a_bundle_carries_the_sites_allow_list_and_no_secret_hash_path_or_other_site(tmp_path: Path) -> None:
    config_path, town = _daemon_store(tmp_path)
    config = load_config(config_path)
    assert config.portal.secret_key.value == SECRETS["portal secret key"]  # all of them were read
    bundle = tmp_path / "b.zip"
    export_bundle(config, SITE, T0, T0 + timedelta(minutes=9), bundle, plots=True)
    members = _members(bundle)
    for what, value in SECRETS.items():
        leaks = [name for name, data in members.items() if value.encode() in data]
        assert not leaks, f"the {what} is in {leaks}"
    for name, data in members.items():  # no key that names a secret or a file, anywhere
        for word in (b"secret_key", b"password", b"token_hash", b"_file", b"[portal]", b"[broker]"):
            assert word not in data, (word, name)

    settings = tomllib.loads(members["config.toml"].decode())
    assert set(settings) == {"sites", "town"}
    assert settings["town"] == {"officer": "Jane Olson", "title": "Town Clerk", "contact": "Town Hall, Dovre"}
    [site] = settings["sites"]
    assert site["id"] == SITE and site["timezone"] == "America/Chicago" and site["profile"] == "dovre"
    assert [s["id"] for s in site["sensors"]] == ["n1", "n2", "l1", "wx"]
    assert site["sensors"][0] == {
        "id": "n1",
        "kind": "sound",
        "placement": "boundary",
        "location": "",
        "gates": ["g1"],
        "expected_period_s": 1.0,
        "require_signature": False,
        "calibration": {"full_scale_db": 120.0, "offset_db": 0.0},
    }
    # The daemon chained this very text at start-up: verify binds config.toml to the chain.
    report = verify_bundle(bundle, load_anchors(town))
    assert report.ok and report.anchored, report.lines()
    assert report.config.endswith("profile/dovre.toml and config.toml are those files (anchored)"), (
        report.config
    )
    assert "(the site's allow-list)" in report.config

    # The same configuration gives the same bytes; a setting outside the allow-list changes none.
    again = tmp_path / "again.zip"
    edited = tmp_path / "edited.toml"
    edited.write_text(config_path.read_text().replace("min_gap_s = 600", "min_gap_s = 300"))
    export_bundle(load_config(edited), SITE, T0, T0 + timedelta(minutes=9), again, plots=False)
    assert _members(again)["config.toml"] == members["config.toml"]


def test_a_store_that_chained_the_whole_file_ships_its_allow_list_not_the_file(tmp_path: Path) -> None:
    """Before the allow-list the daemon chained the whole file (secrets masked by name only): such a
    text never leaves the machine; the bundle holds its allow-list, and verify says the chain does
    not bind it."""
    config_path, town = _daemon_store(tmp_path, whole_file=True)
    config = load_config(config_path)
    bundle = tmp_path / "b.zip"
    export_bundle(config, SITE, T0, T0 + timedelta(minutes=9), bundle, plots=False)
    members = _members(bundle)
    assert SECRETS["portal secret key"].encode() not in members["config.toml"]
    assert SECRETS["password hash"].encode() not in b"".join(members.values())
    manifest = json.loads(members["manifest.json"])
    assert manifest["config"]["form"] == "extract"
    assert tomllib.loads(members["config.toml"].decode())["sites"][0]["id"] == SITE
    report = verify_bundle(bundle, load_anchors(town))
    assert report.ok, report.lines()
    assert (
        "config.toml is not bound by the chain: it is the allow-list of the configuration chained then"
        in (report.config)
    )


def _profile_text() -> str:
    from importlib import resources

    return resources.files("rules.profiles").joinpath("dovre.toml").read_text(encoding="utf-8")


def test_a_scoped_export_carries_records_outside_the_window_and_operator_alerts_as_digests(
    tmp_path: Path,
) -> None:
    config_path, town = _daemon_store(tmp_path)
    config = load_config(config_path)
    start, end = T0 + timedelta(minutes=3), T0 + timedelta(minutes=6)
    bundle = tmp_path / "scoped.zip"
    summary = export_bundle(config, SITE, start, end, bundle, plots=False)
    # what the portal's bundle_downloaded action records: the window disclosed
    assert summary.window == (start, end)
    assert exported_window(bundle) == {"from": "2024-03-10T08:01:00Z", "to": "2024-03-10T08:04:00Z"}
    members = _members(bundle)
    everything = b"".join(members.values())
    for hidden in (b"EARLY", b"LATE-ALERT", b"OPERATOR-ONLY-ALERT", b"op-in"):
        assert hidden not in everything, hidden
    for shown in (b"WINDOW-EVENT-NOTE", b"WINDOW-FINDING", b"WINDOW-ALERT"):
        assert shown in everything, shown
    # Every record in clear lies in the window.
    lo, hi = to_us(start), to_us(end)
    for name in ("records/events.json", "records/findings.json", "records/alerts.json"):
        for element in _elements(members[name]):
            row = element["row"]
            assert isinstance(row, dict)
            first = row.get("ts_us", row.get("start_us", row.get("created_us")))
            assert isinstance(first, int) and first < hi, (name, row)
            assert max(first, row.get("end_us") or first) >= lo, (name, row)
    # ... the others are chain links: seq, kind, no key, the digest, no time.
    chain = list(csv.reader(io.StringIO(members["chain.csv"].decode())))
    digest_only = [line for line in chain[1:] if line[1] != "sound" and line[2] == ""]
    assert sorted(line[1] for line in digest_only) == ["alert", "alert", "alert", "event", "finding"]
    assert all(len(line[3]) == 64 and line[4] == "" for line in digest_only)
    assert summary.digest_only == {"alert": 3, "event": 1, "finding": 1}
    manifest = json.loads(members["manifest.json"])
    assert manifest["disclosure"]["digest_only"] == summary.digest_only
    assert manifest["disclosure"]["alert_audiences"] == ["inspector", "town"]

    report = verify_bundle(bundle, load_anchors(town))
    assert report.ok and report.anchored, report.lines()
    assert report.digest_only == {"alert": 3, "event": 1, "finding": 1}
    assert (
        "  digest only: 5 entries are present only as their digests (3 alert, 1 event, 1 finding): records"
        " outside the window or not for the reader the bundle was made for (the manifest: records of the"
        " window, alerts for inspector, town); the links through them are recomputed, their content is not"
        " in the bundle"
    ) in report.lines()

    # A digest-only entry still binds: changing it breaks the chain against the town's heads.
    seq = digest_only[0][0]
    altered = tmp_path / "altered.zip"
    lines = members["chain.csv"].decode().splitlines(keepends=True)
    lines = [
        line.replace(line.split(",")[3], "0" * 64) if line.startswith(f"{seq},") else line for line in lines
    ]
    rehashed = dict(members, **{"chain.csv": "".join(lines).encode()})
    manifest = json.loads(rehashed["manifest.json"])
    import hashlib

    for entry in manifest["files"]:
        entry["sha256"] = hashlib.sha256(rehashed[entry["name"]]).hexdigest()
    rehashed["manifest.json"] = json.dumps(manifest).encode()
    with zipfile.ZipFile(altered, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in rehashed.items():
            zf.writestr(name, data)
    report = verify_bundle(altered, load_anchors(town))
    assert not report.ok and report.first_problem is not None
    assert report.first_problem.message.startswith("chain broken"), report.lines()
