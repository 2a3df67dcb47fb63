"""monitor/daemon/site_status.py: the retained status message, and `minewatch status` reading it back.

A real store in the test's folder, filled through its append methods. The module must load
without the daemon (pipeline, numpy, MQTT, InfluxDB): checked in a fresh interpreter, as
tests/monitor/commands/test_startup.py checks the commands.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from monitor.cli import main
from monitor.config import Config, SiteConfig, parse_config
from monitor.daemon.site_status import site_status
from monitor.daemon.status_findings import StatusFindings
from monitor.journal.store import Store
from monitor.wire.codec import payload_of
from rules.model import Finding, FindingKind, LightSummary, SoundLevels
from tests.support.notices import CONFIG, SITE, local, store_findings, violation
from tests.support.paths import REPO

NOW = local(2026, 6, 15, 11, 0, 30)  # site time; 16:00:30Z
EXTRA_SENSORS = """[[sites.sensors]]
id = "l1"
kind = "light"
[[sites.sensors]]
id = "wx"
kind = "weather"
"""


@pytest.fixture
def config_path(tmp_path: Path) -> Path:
    path = tmp_path / "site.toml"
    path.write_text(CONFIG.format(db=tmp_path / "minewatch.db", max_attempts=3) + EXTRA_SENSORS)
    return path


@pytest.fixture
def config(config_path: Path) -> Config:
    return parse_config(config_path.read_text(), str(config_path))


@pytest.fixture
def site(config: Config) -> SiteConfig:
    found = config.site(SITE)
    assert found is not None
    return found


@pytest.fixture
def store(config: Config) -> Iterator[Store]:
    s = Store(config.storage.path)
    yield s
    s.close()


def energy_mean(levels: list[float]) -> float:
    return round(10 * math.log10(sum(10 ** (v / 10) for v in levels) / len(levels)), 1)


def fill(store: Store) -> list[float]:
    """n1: the last minute and older seconds; n2: older seconds only; l1: a light reading; wx: nothing.

    Returns n1's levels of the last minute.
    """
    last_minute = [60.0 if s % 2 else 72.0 for s in range(60)]
    with store.batch():
        for s, level in enumerate(last_minute):  # [NOW - 60 s, NOW)
            ts = NOW - timedelta(seconds=60 - s)
            store.append_sound(
                SoundLevels(SITE, "n1", ts, 1.0, level, level + 1, level + 15),
                source="levels",
                late=False,
                now=NOW,
            )
        for sensor in ("n1", "n2"):  # earlier: not the last minute's
            for s in range(5):
                ts = NOW - timedelta(minutes=5, seconds=s)
                store.append_sound(
                    SoundLevels(SITE, sensor, ts, 1.0, 95.0, 96.0, 110.0),
                    source="levels",
                    late=False,
                    now=NOW,
                )
        light = LightSummary(SITE, "l1", NOW - timedelta(minutes=2), 60.0, 5.0, 4.0, 6.0)
        store.append_reading(light, payload_of(light), late=False, now=NOW)
        future = SoundLevels(SITE, "n2", NOW, 1.0, 99.0, 100.0, 115.0)  # at ``now``: not in the last minute
        store.append_sound(future, source="levels", late=False, now=NOW)
    return last_minute


def test_the_last_minute_of_each_sensor(store: Store, site: SiteConfig) -> None:
    last_minute = fill(store)
    status = site_status(store, site, NOW)
    assert (status["site"], status["name"], status["ts"]) == (SITE, "Dovre Quarry", "2026-06-15T16:00:30Z")
    assert status["sensors"] == {
        "n1": {
            "kind": "sound",
            "last_ts": "2026-06-15T16:00:29Z",
            "LAeq_1min": energy_mean(last_minute),
            "LAeq_1min_text": "69.3 dB(A)",  # as `minewatch status` and the live page say it
            "seconds": 60,
        },
        "n2": {"kind": "sound", "last_ts": "2026-06-15T16:00:30Z"},  # its newest reading; no last minute
        "l1": {"kind": "light", "last_ts": "2026-06-15T15:58:30Z"},
        "wx": {"kind": "weather", "last_ts": None},
    }
    assert status["sensors"]["n1"]["LAeq_1min"] == 69.3  # 72 and 60 dB(A) half the time each, energy mean
    assert status["findings_24h"] == {} and status["episodes_24h"] == []
    assert (status["ts_local"], status["timezone"]) == ("2026-06-15 11:00 CDT", "America/Chicago")


def test_online_flags_only_when_the_daemon_gives_them(store: Store, site: SiteConfig) -> None:
    status = site_status(store, site, NOW, {"n1": True, "n2": False})
    assert {s: e["online"] for s, e in status["sensors"].items()} == {
        "n1": True,
        "n2": False,
        "l1": False,  # not in the daemon's table: not online
        "wx": False,
    }
    assert all("online" not in e for e in site_status(store, site, NOW)["sensors"].values())


def test_open_findings_of_the_last_day(store: Store, site: SiteConfig) -> None:
    first = NOW - timedelta(hours=12)
    violations = [violation(first + timedelta(minutes=i), value=81.0 + i) for i in range(12)]
    store_findings(store, violations, NOW)
    store_findings(store, [violation(first, value=90.0)], NOW)  # a revision: counted once, as revised
    store_findings(store, [violation(NOW - timedelta(hours=25))], NOW)  # over a day ago
    withdrawn = violation(first + timedelta(minutes=30), sensor="n2")
    store_findings(store, [withdrawn], NOW)
    with store.batch():
        store.append_finding(withdrawn, NOW, retracted=True)
    warning = Finding(
        SITE,
        "noise",
        "6.D",
        FindingKind.WARNING,
        first,
        first + timedelta(minutes=1),
        "America/Chicago",
        "Near",
    )
    store_findings(store, [warning], NOW)

    status = site_status(store, site, NOW)
    assert status["findings_24h"] == {"violation": 12, "warning": 1}
    # Twelve minutes in a row are one episode (the one over a day ago is not of the last 24 h;
    # the withdrawn one is not one at all), told with both ends and its highest window.
    [episode] = status["episodes_24h"]
    assert (episode["start"], episode["end"], episode["windows"]) == (
        "2026-06-15T04:00:30Z",
        "2026-06-15T04:12:30Z",
        12,
    )
    assert episode["span"] == "23:00:30-23:12:30 CDT (12 minutes)"
    assert episode["peak"]["value"] == 92.0 and episode["peak_span"] == "23:11:30-23:12:30 CDT (1 minute)"
    assert episode["text"].startswith(
        "noise (6.D) at n1: 23:00:30-23:12:30 CDT (12 minutes); highest LAeq,1min 92.0"
    )


def test_status_at_a_time_shows_the_record_as_it_stood_then(store: Store, site: SiteConfig) -> None:
    """`status --at T`: nothing that started after T (data, findings, episodes) is shown (issue 25)."""
    fill(store)
    first = NOW - timedelta(minutes=10)
    store_findings(store, [violation(first + timedelta(minutes=i)) for i in range(8)], NOW)
    status = site_status(store, site, NOW - timedelta(minutes=4))  # 15:56:30Z
    assert status["sensors"]["n1"]["last_ts"] == "2026-06-15T15:55:30Z"  # not the last minute's seconds
    assert status["sensors"]["n2"]["last_ts"] == "2026-06-15T15:55:30Z"  # not its second at NOW
    assert status["sensors"]["l1"]["last_ts"] is None  # its reading came two minutes before NOW
    assert (status["sensors"]["n1"]["LAeq_1min"], status["sensors"]["n1"]["seconds"]) == (95.0, 1)
    assert status["findings_24h"] == {"violation": 6}  # judged by 15:56:30Z
    [episode] = status["episodes_24h"]
    assert (episode["start"], episode["end"]) == ("2026-06-15T15:50:30Z", "2026-06-15T15:56:30Z")


def test_minewatch_status_reads_the_same_back_from_the_store(
    store: Store, site: SiteConfig, config_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    last_minute = fill(store)
    store_findings(store, [violation(NOW - timedelta(hours=1))], NOW)
    from rules.profile import standard_titles_of

    expected = site_status(store, site, NOW, titles=standard_titles_of(site.profile))
    at = ["--at", "2026-06-15T16:00:30Z"]
    assert main(["status", "--config", str(config_path), "--format", "json", *at]) == 0
    (printed,) = json.loads(capsys.readouterr().out)
    for entry in expected["sensors"].values():
        entry["conflicts"] = 0  # the command adds the resends that contradicted a kept reading
    # ... and the outputs' backlogs (tests/monitor/commands/test_status_outputs.py)
    expected["deliveries"] = {"pending": 0, "failing": 0, "undeliverable_24h": 0, "failures": []}
    expected["influx_outbox"] = {"queued": 0, "oldest_queued": None, "rejected": 0}
    assert printed == expected
    assert main(["status", "--config", str(config_path), *at]) == 0
    text = capsys.readouterr().out.splitlines()
    # Site time for people, UTC beside the status's own time (issue 25).
    assert text[0] == "Dovre Quarry (quarry) at 2026-06-15 11:00 CDT (2026-06-15T16:00:30Z)"
    assert (
        f"  n1       sound    last data 2026-06-15 11:00:29 CDT  LAeq,1min {energy_mean(last_minute)} dB(A)"
        in text
    )
    assert "  wx       weather  last data never" in text
    assert "  findings (judged windows) in the last 24 h: violation: 1" in text
    assert "  violation episodes in the last 24 h:" in text
    assert (
        "  - Noise at the mine site boundaries (6.D) at n1: 10:00:30-10:01:30 CDT (1 minute);"
        " highest LAeq,1min 84.2" in "\n".join(text)
    )


_PROBE = """
import sys
from datetime import UTC, datetime
from monitor.config import load_config
from monitor.daemon.site_status import site_status
from monitor.journal.store import Store

config = load_config(sys.argv[1], secrets="defer", profiles=False)
store = Store(config.storage.path)
status = site_status(store, config.sites[0], datetime(2026, 6, 15, 16, 0, 30, tzinfo=UTC))
store.close()
loaded = sorted(m for m in sys.modules if m.partition(".")[0] in {"numpy", "scipy", "matplotlib", "paho"}
                or m in {"monitor.daemon.pipeline", "monitor.daemon.ingest", "monitor.acoustics.iec61672",
                         "monitor.influx.client", "monitor.notify.alerts", "rules.noise"})
print(status["sensors"]["n1"].get("LAeq_1min"), "LOADED", ",".join(loaded) or "none")
"""


def test_the_status_loads_neither_the_daemon_nor_numpy(store: Store, config_path: Path) -> None:
    last_minute = fill(store)
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(config_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.stdout.split() == [str(energy_mean(last_minute)), "LOADED", "none"], done.stdout + done.stderr


def test_periods_of_other_durations_are_weighted_by_their_duration(store: Store, site: SiteConfig) -> None:
    start = NOW - timedelta(seconds=35)
    with store.batch():  # 10 s at 80 dB(A), then 25 s in half-second periods at 50 dB(A)
        store.append_sound(
            SoundLevels(SITE, "n1", start, 10.0, 80.0, 81.0, 95.0), source="levels", late=False, now=NOW
        )
        for i in range(50):
            ts = start + timedelta(seconds=10 + i / 2)
            store.append_sound(
                SoundLevels(SITE, "n1", ts, 0.5, 50.0, 51.0, 65.0), source="levels", late=False, now=NOW
            )
    n1 = site_status(store, site, NOW)["sensors"]["n1"]
    assert n1["LAeq_1min"] == round(10 * math.log10((10 * 10**8 + 25 * 10**5) / 35), 1)  # 74.6
    assert n1["seconds"] == 35


def test_the_daemon_s_followed_findings_tell_what_the_store_read_from_scratch_tells(
    store: Store, site: SiteConfig
) -> None:
    """The retained status follows the findings in memory (monitor.daemon.status_findings); at every
    step it must equal the status read from scratch (`minewatch status`, the portal): an episode
    of 32 hours (past the 24 hours, read back 6 hours at a time), revisions and retractions in and
    before what is held, another site's findings, the clock set back, a rollback. A finding every
    half hour and an hour's episode gap: the episode's length without 1,900 minutes to fold."""
    t, gap_s = NOW, 3600.0
    long_start = t - timedelta(hours=33)
    episode = [violation(long_start + timedelta(minutes=30 * i), value=81.0 + i % 7) for i in range(65)]
    warnings = [replace(v, kind=FindingKind.WARNING) for v in episode[-5:]]
    store_findings(store, [*episode, *warnings], t)
    followed = StatusFindings(store, SITE)
    titles = {"noise": "Noise at the mine site boundaries"}

    def same(now: datetime) -> dict[str, Any]:
        kept = site_status(store, site, now, episode_gap_s=gap_s, titles=titles, findings=followed)
        scratch = site_status(store, site, now, episode_gap_s=gap_s, titles=titles)
        assert kept == scratch
        assert json.dumps(kept) == json.dumps(scratch)  # in the same order too: the same message
        return kept

    first = same(t)
    [told] = first["episodes_24h"]
    assert (told["start"], told["end"], told["windows"]) == (
        "2026-06-14T07:00:30Z",
        "2026-06-15T15:01:30Z",
        65,
    )
    assert first["findings_24h"] == {"violation": 47, "warning": 5}
    assert followed.held_from is not None and followed.held_from <= long_start  # the episode was read whole
    for step in range(1, 13):
        now = t + timedelta(minutes=step)
        changes = [violation(t + timedelta(minutes=step - 1), value=90.0)]  # the episode's new minute
        if step == 2:
            changes.append(replace(episode[-10], measurements=episode[0].measurements))  # a revision
        if step == 3:
            changes.append(violation(long_start + timedelta(minutes=30), value=99.0))  # revised, 32 h back
        if step == 4:
            changes.append(replace(violation(t, sensor="n2"), site="other"))  # another site's
        if step == 6:
            changes.append(violation(long_start - timedelta(minutes=40)))  # late: the episode starts earlier
        store_findings(store, changes, now)
        if step == 5:
            with store.batch():  # two findings retracted: the episode breaks in two
                store.append_finding(episode[-30], now, retracted=True)
                store.append_finding(episode[-31], now, retracted=True)
        if step == 8:
            kept = same(now)["findings_24h"]["violation"]
            with pytest.raises(RuntimeError), store.batch():  # read inside a batch that rolls back
                store.append_finding(violation(now - timedelta(minutes=2), sensor="n2"), now)
                assert same(now)["findings_24h"]["violation"] == kept + 1
                raise RuntimeError("rolled back")
        status = same(now)
        if step == 5:
            assert len(status["episodes_24h"]) == 2
        if step == 8:
            assert status["findings_24h"]["violation"] == kept  # the rolled-back finding is gone
        if step == 7:
            same(now - timedelta(hours=2))  # the clock set back: reads what it lacks from the store
    assert status["episodes_24h"][0]["start"] == "2026-06-14T06:20:30Z"  # the late finding joined
    assert status["episodes_24h"][0]["peak"]["value"] == 99.0  # the revision 32 h back
    assert followed.loads == 2  # the first status and after the rollback: otherwise followed


def test_minewatch_status_lines_up_a_long_sensor_id_and_kind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The columns are as wide as the longest id and kind, so "last data" stands in one column."""
    path = tmp_path / "site.toml"
    seismograph = (
        '[[sites.sensors]]\nid = "sg-farmstead"\nkind = "seismograph"\nplacement = "structure"\n'
        'location = "farmstead, east foundation wall"\nexpected_period_s = 86400\n'
    )
    path.write_text(CONFIG.format(db=tmp_path / "minewatch.db", max_attempts=3) + EXTRA_SENSORS + seismograph)
    Store(str(tmp_path / "minewatch.db")).close()  # the store `minewatch run` would have made
    assert main(["status", "--config", str(path)]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if "last data" in line]
    assert [line.split()[:2] for line in lines] == [
        ["n1", "sound"],
        ["n2", "sound"],
        ["l1", "light"],
        ["wx", "weather"],
        ["sg-farmstead", "seismograph"],
    ]
    assert len({line.index("last data") for line in lines}) == 1
    assert lines[-1].startswith("  sg-farmstead seismograph last data never")


def test_store_space_is_said_only_when_the_disk_runs_low() -> None:
    from monitor.commands.status import store_space

    assert store_space("/var/lib/minewatch/minewatch.db", 10 * 1024**3) is None
    assert store_space("/var/lib/minewatch/minewatch.db", 20 * 1024**2) == (
        "store /var/lib/minewatch/minewatch.db: only 20 MiB free on its disk; the daemon stops storing"
        " when it is full"
    )
    assert store_space("/var/lib/minewatch/minewatch.db", 4096) == (
        "store /var/lib/minewatch/minewatch.db: its disk is full (4,096 bytes free): the daemon stores"
        " nothing and what arrives waits at the broker until there is space"
    )


def test_minewatch_status_says_when_the_stores_disk_is_full(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store's file system's free space is replaced (shutil.disk_usage): filling a real disk
    takes a mount, which a test cannot make without root. The store itself is real."""
    path = tmp_path / "site.toml"
    path.write_text(CONFIG.format(db=tmp_path / "minewatch.db", max_attempts=3))
    Store(str(tmp_path / "minewatch.db")).close()
    assert main(["status", "--config", str(path)]) == 0
    assert "store " not in capsys.readouterr().out  # room enough here: nothing said
    full = shutil.disk_usage(tmp_path)._replace(free=0)
    monkeypatch.setattr("shutil.disk_usage", lambda _: full)
    assert main(["status", "--config", str(path)]) == 0
    assert f"store {tmp_path / 'minewatch.db'}: its disk is full (0 bytes free)" in capsys.readouterr().out


def test_a_minute_the_meter_was_overloaded_in_reads_as_a_lower_bound(
    store: Store, site: SiteConfig, config_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A clipped second reads low: the status says how long the meter was overloaded, and
    `minewatch status` writes the minute's level as 'at least'; a minute without one is as before."""
    with store.batch():
        for i in range(10):
            levels = SoundLevels(SITE, "n1", NOW - timedelta(seconds=10 - i), 1.0, 78.0, 79.0, 95.0)
            store.append_sound(levels._replace(overload=i in (3, 4)), source="levels", late=False, now=NOW)
    sensors = site_status(store, site, NOW)["sensors"]
    assert (sensors["n1"]["LAeq_1min"], sensors["n1"]["overloaded_s"]) == (78.0, 2.0)
    assert "overloaded_s" not in sensors["n2"]
    assert main(["status", "--config", str(config_path), "--at", "2026-06-15T16:00:30Z"]) == 0
    [line] = [line for line in capsys.readouterr().out.splitlines() if line.startswith("  n1 ")]
    assert line.endswith(
        "LAeq,1min at least 78.0 dB(A) (meter overloaded 2 s: not judged below the limit)"
    ), line
    # The operator's live status page says the same words (it said "78.0 dB(A)", a plain level).
    from types import SimpleNamespace

    from monitor.portal.web import portal_templates

    status = site_status(store, site, NOW)
    for entry in status["sensors"].values():
        entry.update(placement="boundary", state="ok")
    page = (
        portal_templates()
        .env.get_template("status_live.html")
        .render(
            status=status,
            site=SimpleNamespace(id=SITE, timezone="America/Chicago"),
            refresh_s=30,
            trend_hours=3,
            trends={},
            warnings=[],
            plan_colours={"ok": "#0a0"},
            plan_state_labels={"ok": "ok"},
        )
    )
    assert "at least 78.0 dB(A) (meter overloaded 2 s: not judged below the limit)" in page
