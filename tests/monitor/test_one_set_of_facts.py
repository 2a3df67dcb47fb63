"""One set of facts (issue 25): every surface tells a violation episode the same way.

A day is simulated through the daemon's pipeline on its data clock (the demo's own scenario,
and generated days: random loud periods, declared repair work, trucks, blasts inside and
outside the window, light trespass and a flashing light). The facts are then gathered from
every surface a person reads -- the notices (their stored facts and their rendered text),
the alerts, `minewatch status --at`, the portal's JSON API (day view, notices), the demo's
summary lines, the evidence bundle's records -- and held against the episodes computed once
from the store (monitor.journal.episodes): span, highest window and level, notice, deadline,
durations, names, time zone.

The broker is left out (the pipeline is fed the simulator's messages in order, in batches):
the MQTT path is tested against a real Mosquitto in tests/monitor/daemon/test_daemon.py and
by the demo's own test (tests/sensors/test_demo.py). The portal and the status command are
the real processes.
"""

from __future__ import annotations

import io
import json
import random
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from importlib import resources
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from monitor.config import Config, SiteConfig, parse_config
from monitor.credentials import hash_password, hash_token
from monitor.daemon.clock import Clock
from monitor.daemon.ingest import Inbound
from monitor.daemon.pipeline import Pipeline
from monitor.evidence import export_bundle
from monitor.journal.episodes import ToldEpisode, site_episodes
from monitor.journal.store import Store
from monitor.notify.formats import render_notice
from monitor.notify.notices import list_notices
from monitor.wire.codec import encode
from rules.profile import load_profile
from rules.times import local_stamp, span_text
from sensors.scenario import load_scenario, parse_scenario
from sensors.simulate import Simulation
from tests.support.paths import REPO
from tests.support.portal_server import on_port, portal_serving
from tests.support.servers import free_port

SITE = "dovre-quarry"
TZ = ZoneInfo("America/Chicago")
TOKEN = "town-token-for-the-cross-surface-test-0123456789"
DAY = date(2025, 12, 15)  # a past day (status refuses a time after now) whose lights fall in the dark


@dataclass
class Day:
    root: Path
    config_path: Path
    config: Config
    site: SiteConfig
    store: Path
    day: date
    end: datetime  # the data's end: the time `status --at` is asked for
    published: list[tuple[str, dict[str, Any]]]

    @property
    def span(self) -> tuple[datetime, datetime]:
        start = datetime.combine(self.day, time(0), TZ).astimezone(UTC)
        return start, start + timedelta(days=1)


def _config_text(store: Path, portal_port: int) -> str:
    text = resources.files("sensors").joinpath("demo/dovre-demo.toml").read_text()
    text = text.replace('path = "minewatch-demo.db"', f'path = "{store}"')
    return text + (
        f'\n[portal]\nport = {portal_port}\nsecret_key = "cross-surface-test-secret-key"\n'
        f'[[portal.accounts]]\nname = "clerk"\nrole = "town"\n'
        f'password_hash = "{hash_password("clerk-password-1")}"\ntoken_hash = "{hash_token(TOKEN)}"\n'
    )


def simulate(root: Path, scenario_text: str | None, day: date, seed: int | None = None) -> Day:
    """The scenario through the daemon's pipeline (data clock), in order, 400 messages a batch."""
    root.mkdir(parents=True, exist_ok=True)
    store_path = root / "minewatch.db"
    config_path = root / "minewatch.toml"
    config_path.write_text(_config_text(store_path, free_port()))
    config = parse_config(config_path.read_text(), str(config_path))
    site = config.site(SITE)
    assert site is not None
    if scenario_text is None:
        scenario = load_scenario("dovre-short", TZ, start=datetime.combine(day, time(14, 50), TZ))
    else:
        scenario = parse_scenario(scenario_text, TZ, start=datetime.combine(day, time(14, 40), TZ))
    store = Store(str(store_path))
    published: list[tuple[str, dict[str, Any]]] = []
    pipeline = Pipeline(
        config,
        store,
        lambda topic, payload, retain: published.append((topic, json.loads(payload))),
        Clock("data"),
    )
    batch: list[Inbound] = []
    for _, record in Simulation(scenario, site, seed).messages():
        topic, payload = encode(record)  # type: ignore[arg-type]
        batch.append(Inbound(topic, payload, len(batch) + 1, 1, 0.0))
        if len(batch) == 400:
            pipeline.handle_batch(batch)
            pipeline.tick()
            batch = []
    pipeline.handle_batch(batch)
    pipeline.tick()
    # The stream has ended: quiet in wall time, so the last minutes close as in the daemon.
    for state in pipeline.sites.values():
        state.last_receipt -= 3600
    if pipeline.input_since is not None:
        pipeline.input_since -= 3600
    pipeline.tick()
    end = pipeline.clock.now()
    store.close()
    return Day(root, config_path, config, site, store_path, day, end, published)


def generated_scenario(seed: int) -> str:
    """A random afternoon into the night: the demo's sensors, other loud periods, work, blasts, lights."""
    rng = random.Random(seed)
    base = resources.files("sensors").joinpath("scenarios/dovre-short.toml").read_text()
    head = base[: base.index("# ---------------------------------------------------------------- sound")]
    head = head.replace('name = "dovre-short"', f'name = "generated-{seed}"').replace(
        "seed = 11", f"seed = {seed}"
    )
    head = head.replace('sensors = ["n3"]', "sensors = []")  # levels only: quicker, the same rules
    parts = [head.replace('duration = "2h30m"', 'duration = "3h"')]

    def clock(minutes: int) -> str:
        at = datetime.combine(DAY, time(14, 40)) + timedelta(minutes=minutes)
        return at.strftime("%H:%M")

    parts.append(
        '[[sources]]\nkind = "trucks"\nname = "haul trucks"\ngate = "gate-north"\nperiods = ["14:40-16:40"]\n'
        "every_min = 9\njitter_min = 2\npeak_db = [82, 88]\n"
    )
    for n in range(rng.randint(1, 3)):
        sensor = rng.choice(["n1", "n2", "n3", "n4"])
        first = rng.randint(5, 120)
        period = f"{clock(first)}-{clock(first + rng.randint(2, 9))}"
        parts.append(
            f'[[sources]]\nkind = "activity"\n'
            f'name = "loud work {n}"\nlevel_db = {rng.choice([99, 101, 103])}\n'
            f'ref_m = 10\nsd_db = 1.0\nperiods = ["{period}"]\ndistance_m = {{ {sensor} = 60 }}\n'
        )
        if rng.random() < 0.4:  # declared repair work: exempt, not a violation
            parts.append(
                f'[[events]]\nkind = "work"\nid = "w-{n}"\nwork = "repair"\nperiod = "{period}"\n'
                f'sensors = ["{sensor}"]\ndeclared = "{clock(first - 2)}"\n'
            )
    for n, at in enumerate([clock(rng.randint(3, 15)), clock(rng.randint(30, 100))]):  # in, then after 15:00
        parts.append(
            f'[[sources]]\nkind = "impulse"\nname = "blast b-{n}"\n'
            f'at = "{at}:00"\npeak_db = 140\nref_m = 100\n'
            "crest_db = 28\ndistance_m = { n1 = 800, n2 = 600, n3 = 1200, n4 = 700 }\n"
            f'[[events]]\nkind = "blast-notice"\nblast_id = "b-{n}"\n'
            f'issued = "-1d 14:00"\nplanned = "+0d {at}"\n'
            'recipients = ["Town of Dovre", "p-012-0412", "p-012-0418", "p-013-1203"]\n'
            f'[[events]]\nkind = "blast"\nblast_id = "b-{n}"\nat = "{at}:00"\ncharge_kg = 600\n'
        )
    lit = rng.randint(145, 155)  # after civil dusk (16:58)
    parts.append(
        f'[[sources]]\nkind = "fixture"\nname = "floodlight"\n'
        f'sensor = "l1"\nlux = {rng.choice([2.2, 3.4, 5.0])}\n'
        f'periods = ["{clock(lit)}-{clock(lit + rng.randint(7, 14))}"]\n'
    )
    flash = rng.randint(140, 150)
    parts.append(
        '[[sources]]\nkind = "flashing"\nname = "flasher"\nsensor = "l2"\n'
        "on_lux = 1.4\noff_lux = 0.1\nhz = 1.0\n"
        f'duty = 0.5\nperiods = ["{clock(flash)}-{clock(flash + rng.randint(4, 12))}"]\n'
    )
    return "\n".join(parts)


# --------------------------------------------------------------------------- the surfaces


@dataclass
class Surfaces:
    episodes: list[ToldEpisode]  # computed once from the store: what every surface must tell
    notices: dict[str, Any]  # id -> Notice
    markdown: dict[str, str]  # notice id -> its rendered text
    api_day: dict[str, Any]
    api_notices: dict[str, dict[str, Any]]
    status: dict[str, Any]
    bundle_episodes: dict[str, dict[str, Any]]  # episode id -> its last record's facts
    alerts: list[dict[str, Any]]


def _serve(day: Day) -> Iterator[str]:
    def config_for(port: int) -> Path:
        day.config_path.write_text(on_port(day.config_path.read_text(), port))
        return day.config_path

    with portal_serving(config_for, day.root / "portal.log") as (port, _):
        yield f"http://127.0.0.1:{port}"


def _get(url: str) -> Any:
    import urllib.request

    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(request, timeout=30) as reply:
        return json.loads(reply.read())


def gather(day: Day) -> Surfaces:
    import sqlite3

    site = day.site
    gap = load_profile(site.profile, site.agreement).episode_gap_s
    start, end = day.span
    conn = sqlite3.connect(day.store)
    conn.row_factory = sqlite3.Row
    try:
        episodes = site_episodes(conn, SITE, start, end, gap)
        notices = {n.id: n for n in list_notices(conn, SITE)}
        markdown = {n: render_notice(conn, n, "md", config=day.config).decode() for n in notices}
        alerts = [
            {**dict(r), "data": json.loads(r["data"])}
            for r in conn.execute("SELECT * FROM alerts WHERE site = ? ORDER BY created_us", (SITE,))
        ]
    finally:
        conn.close()
    bundle = day.root / "bundle.zip"
    export_bundle(day.config, SITE, start, end, bundle, plots=False)
    with zipfile.ZipFile(bundle) as z:
        records = json.loads(z.read("records/notice_episodes.json"))
    bundle_episodes: dict[str, dict[str, Any]] = {}
    for record in sorted(records, key=lambda r: r["row"]["revision"]):
        bundle_episodes[record["row"]["episode_id"]] = json.loads(record["row"]["data"])
    at = day.end.strftime("%Y-%m-%dT%H:%M:%SZ")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "monitor.cli",
            "status",
            "--config",
            str(day.config_path),
            "--at",
            at,
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=True,
    )
    [status] = json.loads(done.stdout)
    served = _serve(day)
    url = next(served)
    try:
        api_day = _get(f"{url}/api/v1/sites/{SITE}/day?date={day.day.isoformat()}")
        api_notices = {n: _get(f"{url}/api/v1/notices/{n}") for n in notices}
    finally:
        served.close()
    return Surfaces(episodes, notices, markdown, api_day, api_notices, status, bundle_episodes, alerts)


def held_together(facts: Surfaces, day: Day) -> None:
    """Every surface tells every episode as the one computation does."""
    tz = day.site.timezone
    assert facts.episodes, "the day should hold violation episodes"
    api_episodes = {e["id"]: e for e in facts.api_day["episodes"]}
    status_episodes = {e["id"]: e for e in facts.status["episodes_24h"]}
    assert set(api_episodes) == {e.facts.id for e in facts.episodes}
    for told in facts.episodes:
        e = told.facts
        span = span_text(e.start, e.end, tz)
        assert span.split(" (")[0].endswith(("CST", "CDT")), span
        # The notice: it tells this episode, with the same span and highest window.
        assert told.notice_id in facts.notices, (e.standard, span)
        notice = facts.notices[told.notice_id]
        stored = next(x.facts for x in notice.episodes if x.episode_id == e.id)
        expected = {
            "start": e.start,
            "end": e.end,
            "findings": e.windows,
            "peak_start": e.peak_start,
            "peak_end": e.peak_end,
        }
        got = {k: stored[k] for k in expected}
        want = {
            k: (v.strftime("%Y-%m-%dT%H:%M:%S") + "Z" if isinstance(v, datetime) else v)
            for k, v in expected.items()
        }
        assert {k: str(v).replace(".000Z", "Z") for k, v in got.items()} == {
            k: str(v) for k, v in want.items()
        }, e.standard
        assert (stored["worst"] or {}).get("value") == (e.peak.value if e.peak else None)
        text = facts.markdown[told.notice_id]
        if len(notice.episodes) == 1 and e.duration_s >= 60:
            assert f"| When (local time) | {span_text(e.start, e.end, tz, with_date=True)} |" in text
        if e.peak is not None and e.windows > 1:
            assert (
                f"over {span_text(e.peak_start, e.peak_end, tz)}, the highest of the {e.windows} windows"
                in text
            )
        # The deadline, in site time, the same in the document and the API.
        deadline = local_stamp(notice.deadline, tz)
        assert f"| Cure deadline | {deadline} (" in text
        assert (
            facts.api_notices[told.notice_id]["deadline"]
            == notice.deadline.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        )
        # The evidence bundle's record of the notice's episode holds the same facts.
        assert {k: facts.bundle_episodes[e.id][k] for k in expected} == got
        # The portal's day view and `status --at`: the same span, peak and notice.
        for shown in (api_episodes[e.id], status_episodes.get(e.id)):
            assert shown is not None, (e.standard, span)
            assert (shown["start"], shown["end"], shown["span"], shown["notice"]) == (
                stored["start"].replace(".000Z", "Z"),
                stored["end"].replace(".000Z", "Z"),
                span,
                told.notice_id,
            )
            assert (shown["peak"] or {}).get("value") == (e.peak.value if e.peak else None)
    # Alerts: each violation alert names its episode and notice, and tells the episode's start.
    by_id = {e.facts.id: e for e in facts.episodes}
    violation_alerts = [a for a in facts.alerts if a["kind"] == "violation"]
    assert violation_alerts
    for alert in violation_alerts:
        episode_id = alert["data"].get("episode_id")
        told = by_id.get(episode_id)
        if told is None:  # an episode since merged into a longer one: told under its new id
            told = next(t for t in facts.episodes if alert["data"]["id"] in t.facts.finding_ids)
        assert alert["data"]["notice_id"] == told.notice_id
        assert span_text(told.facts.start, told.facts.end, tz).split("-")[0] in alert["message"], alert[
            "message"
        ]
        assert told.notice_id in alert["message"]
    told_by_alerts = {a["data"].get("notice_id") for a in violation_alerts}
    assert {e.notice_id for e in facts.episodes} <= told_by_alerts
    # Names: gates as configured, never "gate gate-north".
    everything = json.dumps([facts.api_day, facts.status, facts.bundle_episodes, facts.markdown])
    assert "gate gate-" not in everything
    assert "North gate on 10th Avenue (gate-north)" in json.dumps(facts.api_day["findings"]) or not any(
        "truck" in f["summary"] for f in facts.api_day["findings"]
    )


# --------------------------------------------------------------------------- the tests


@pytest.fixture(scope="module")
def demo_day(tmp_path_factory: pytest.TempPathFactory) -> Day:
    return simulate(tmp_path_factory.mktemp("demo-day"), None, DAY)


def test_every_surface_tells_the_demo_days_episodes_alike(demo_day: Day) -> None:
    facts = gather(demo_day)
    held_together(facts, demo_day)
    standards = {e.facts.standard for e in facts.episodes}
    assert {"noise", "flashing_light", "light_trespass", "blast_window"} <= standards
    # The late blast's notice reads the boundary meters' linear peaks the bundle carries.
    [blast] = [t for t in facts.episodes if t.facts.standard == "blast_window"]
    assert (
        "boundary meters' linear peak (LZpeak) over 15:39:55-15:40:10 CST" in facts.markdown[blast.notice_id]
    )
    # Each notice lists its own standard's choices, once.
    for notice_id, text in facts.markdown.items():
        standard = facts.notices[notice_id].standard
        assert text.count("the ordinance names no time of day") <= 1
        if standard in ("flashing_light", "light_trespass"):
            assert "wind" not in text.split("## Considered")[1].split("## Numbers")[0]


def test_the_demos_summary_tells_the_same_episodes(demo_day: Day) -> None:
    """The console summary and summary.json name the episodes, their notices and deadlines in site time."""
    from monitor.demo.runner import Demo

    out = io.StringIO()
    demo = Demo(demo_day.root, "dovre-short", "max", None, out, demo_day.day)
    demo.config, demo.store = demo_day.config_path, demo_day.store
    demo.report()
    text = out.getvalue()
    import sqlite3

    conn = sqlite3.connect(demo_day.store)
    conn.row_factory = sqlite3.Row
    gap = load_profile(demo_day.site.profile, demo_day.site.agreement).episode_gap_s
    episodes = site_episodes(conn, SITE, *demo_day.span, gap)
    notices = list_notices(conn, SITE)
    conn.close()
    shown = demo.summary["episodes"]
    assert [(e["episode_id"], e["start"], e["end"], e["notice"]) for e in shown] == [
        (
            t.facts.id,
            t.facts.start.strftime("%Y-%m-%dT%H:%M:%SZ"),
            t.facts.end.strftime("%Y-%m-%dT%H:%M:%SZ"),
            t.notice_id,
        )
        for t in episodes
    ]
    for told in episodes:
        assert (
            span_text(told.facts.start, told.facts.end, demo_day.site.timezone) in text
            or told.facts.duration_s <= 1
        )
    for notice in notices:
        deadline = local_stamp(notice.deadline, demo_day.site.timezone)
        title = notice.data["title"]
        assert f"{notice.id}  {title} (section {notice.section})  open, cure by {deadline}" in text
        assert {"id": notice.id, "cure_by": deadline}.items() <= next(
            n for n in demo.summary["notices"] if n["id"] == notice.id
        ).items()
    # Violations are counted as episodes, not as the windows underneath.
    noise = next(
        r for r in demo.summary["findings"] if (r["standard"], r["finding"]) == ("noise", "violation")
    )
    assert (
        noise["episodes"] == sum(1 for t in episodes if t.facts.standard == "noise") and noise["windows"] > 1
    )


def test_the_report_of_the_demos_day_tells_the_same_facts(demo_day: Day, tmp_path: Path) -> None:
    """`minewatch report --day` (a real process) on the demo's day: the same episodes with their
    notices, each boundary meter's LAeq and LAFmax as the store gives them queried here, the blast
    and the notices in site time, and the chain head the figures were computed from."""
    import csv
    import math
    import sqlite3
    from decimal import ROUND_HALF_UP, Decimal

    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "monitor.cli",
            "report",
            "--config",
            str(demo_day.config_path),
            "--site",
            SITE,
            "--day",
            demo_day.day.isoformat(),
            "--out",
            str(tmp_path),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    rows = list(csv.DictReader(io.StringIO((tmp_path / f"{SITE}-{demo_day.day}.csv").read_text())))
    assert (tmp_path / f"{SITE}-{demo_day.day}.pdf").read_bytes().startswith(b"%PDF")
    conn = sqlite3.connect(demo_day.store)
    conn.row_factory = sqlite3.Row
    gap = load_profile(demo_day.site.profile, demo_day.site.agreement).episode_gap_s
    titles = {
        k: s.title for k, s in load_profile(demo_day.site.profile, demo_day.site.agreement).standards.items()
    }
    told = site_episodes(conn, SITE, *demo_day.span, gap)
    shown = {r["row"]: r["value"] for r in rows if r["section"] == "episodes" and r["column"] == "episode"}
    assert shown == {t.facts.id: t.to_json(demo_day.site.timezone, titles)["text"] for t in told}
    notices = {r["row"]: r["value"] for r in rows if r["section"] == "episodes" and r["column"] == "notice"}
    assert notices == {t.facts.id: t.notice_id or "" for t in told}

    def half_up(value: float) -> str:
        return f"{Decimal(repr(value)).quantize(Decimal('0.1'), rounding=ROUND_HALF_UP):f}"

    lo, hi = (int(t.timestamp() * 1_000_000) for t in demo_day.span)
    daily = [r for r in rows if r["section"] == "daily"]
    checked = 0
    for sensor in {r["row"].split()[1] for r in daily}:
        n, laeq, lafmax = conn.execute(
            "SELECT COUNT(*), 10 * log10(avg(power(10, LAeq / 10.0))), MAX(LAFmax) FROM sound"
            " WHERE site = ? AND sensor = ? AND ts_us >= ? AND ts_us < ?",
            (SITE, sensor, lo, hi),
        ).fetchone()
        got = {r["column"]: r["value"] for r in daily if r["row"] == f"{demo_day.day} {sensor}"}
        if not n:
            continue
        (l90,) = conn.execute(
            "SELECT round(LAeq, 1) FROM sound WHERE site = ? AND sensor = ? AND ts_us >= ? AND ts_us < ?"
            " ORDER BY LAeq DESC LIMIT 1 OFFSET ?",
            (SITE, sensor, lo, hi, math.ceil(90 * n / 100) - 1),
        ).fetchone()
        assert (got["readings"], got["LAeq"], got["LAFmax"], got["L90"]) == (
            str(n),
            half_up(laeq),
            half_up(lafmax),
            half_up(l90),
        ), sensor
        checked += 1
    assert checked >= 2
    for notice in list_notices(conn, SITE):
        assert any(r["section"] == "notices" and r["row"] == notice.id for r in rows)
    # The report is recorded as it is made: the last entry is its record, computed from the one before.
    seq, kind = conn.execute(
        "SELECT seq, kind FROM chain WHERE site = ? ORDER BY seq DESC LIMIT 1", (SITE,)
    ).fetchone()
    assert kind == "report"
    seq -= 1
    assert f"chain entry {seq} of site {SITE}" in next(
        r["value"] for r in rows if r["row"] == "Computed from"
    )
    conn.close()


@pytest.mark.parametrize("seed", [3, 17, 29])
def test_every_surface_tells_a_generated_days_episodes_alike(tmp_path: Path, seed: int) -> None:
    day = simulate(tmp_path, generated_scenario(seed), DAY, seed)
    facts = gather(day)
    held_together(facts, day)


def test_the_same_simulation_gives_the_same_record(tmp_path: Path) -> None:
    """Repeatable for a seed: the same alerts, said at the same (data) times, the same notices."""
    runs = [simulate(tmp_path / name, generated_scenario(5), DAY, 5) for name in ("a", "b")]

    def record(day: Day) -> tuple[Any, ...]:
        import sqlite3

        conn = sqlite3.connect(day.store)
        try:
            # An anchor's hash covers receipt times (wall clock): its record number and time must agree.
            alerts = conn.execute(
                "SELECT created_us, audience, kind,"
                " CASE kind WHEN 'anchor' THEN substr(message, 1, instr(message, ':')) ELSE message END"
                " FROM alerts ORDER BY created_us, kind, message"
            ).fetchall()
            notices = conn.execute(
                "SELECT id, standard, opened_us, deadline_us FROM notices ORDER BY id"
            ).fetchall()
        finally:
            conn.close()
        return alerts, notices

    first, second = (record(day) for day in runs)
    assert first == second and first[0] and first[1]
