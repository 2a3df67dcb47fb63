"""A real broker, daemon, store and portal (`minewatch serve`), and Debian's chromium via Playwright.

The daemon runs on the data clock over a recent past local day (DAY): a violating stretch at
09:00 opens a notice, a blast at 11:00 and quiet minutes at 11:00-11:02
close the morning's minutes (the tests that record later events send data after them).
The portal is a subprocess, as in production.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, Playwright, sync_playwright

from monitor.credentials import hash_password, hash_token
from monitor.wire.codec import encode
from monitor.wire.protocol import format_ts
from rules.model import SoundLevels
from tests.support.daemon import Client, Daemon, store_count, wait_until, write_config
from tests.support.portal_server import on_port, portal_serving
from tests.support.servers import Mosquitto, free_port

SITE, OTHER = "quarry", "other"
TZ = ZoneInfo("America/Chicago")
DAY = (datetime.now(TZ) - timedelta(days=3)).date()
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
PASSWORD = {
    "op": "op-secret-1",
    "town": "town-secret-1",
    "insp": "insp-secret-1",
    "ratelimited": "rl-secret-1",
}
TOKENS = {
    "op": "mw_op_token_for_tests_only",
    "insp": "mw_insp_token_for_tests_only",
    "town": "mw_town_token_x",
}

EXTRA = """
[[sites.sensors]]
id = "sg1"
kind = "seismograph"
placement = "structure"
location = "Hansen residence, east foundation wall"
expected_period_s = 86400
[[sites.town_contacts]]
id = "town-clerk"
name = "Town of Dovre clerk"
[[sites.adjoining_owners]]
id = "p-1"
name = "Hansen residence"
parcel = "012-0412-00"

[[sites]]
id = "other"
name = "Other quarry"
timezone = "America/Chicago"
latitude = 45.3
longitude = -91.7
profile = "dovre"
[[sites.sensors]]
id = "m1"
kind = "sound"

[town]
officer = "Pat Example"
title = "Zoning Administrator"
contact = "Town of Dovre, 1 Main St"

[portal]
secret_key = "test-secret-key-not-for-production"
login_attempts = 5
login_window_s = 300
"""


def account(name: str, role: str, sites: str = '["quarry"]', extra: str = "") -> str:
    token = f'token_hash = "{hash_token(TOKENS[name])}"\n' if name in TOKENS else ""
    return (
        f'[[portal.accounts]]\nname = "{name}"\nrole = "{role}"\nsites = {sites}\n'
        f'password_hash = "{hash_password(PASSWORD[name])}"\n{token}{extra}'
    )


def local(hour: int, minute: int = 0, second: int = 0, day: date = DAY) -> datetime:
    return datetime(day.year, day.month, day.day, hour, minute, second, tzinfo=TZ).astimezone(UTC)


def levels(sensor: str, ts: datetime, laeq: float, site: str = SITE) -> tuple[str, bytes]:
    return encode(
        SoundLevels(site, sensor, ts, 1.0, laeq, laeq + 1.5, laeq + 15, LASmax=laeq + 1, LZpeak=laeq + 18)
    )


def publish_minutes(pub: Client, sensor: str, start: datetime, minutes: int, laeq: float) -> None:
    for s in range(60 * minutes):
        pub.publish(*levels(sensor, start + timedelta(seconds=s), laeq + (s % 7) * 0.3))


@dataclass
class Env:
    root: Path
    config: Path
    store: Path
    url: str
    broker: Mosquitto
    daemon: Daemon
    pub: Client
    portal: subprocess.Popen[bytes]
    notice_id: str = ""
    artifacts: Path = field(default_factory=Path)

    def count(self, sql: str, *params: object) -> int:
        return store_count(self.store, sql, *params)


@pytest.fixture(scope="module")
def env(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, mosquitto_session: Mosquitto
) -> Iterator[Env]:
    root = tmp_path_factory.mktemp("portal")
    accounts = "\n".join(
        [
            account("op", "operator"),
            account("town", "town"),
            account("insp", "inspector", extra=f'not_before = "{(DAY - timedelta(days=1)).isoformat()}"\n'),
            account("ratelimited", "town"),
        ]
    )
    config = write_config(
        root / "minewatch.toml",
        mosquitto_session.url,
        client_id=f"portal-test-{free_port()}",
        daemon_extra='clock = "data"',
        extra_sites=EXTRA + accounts,
    )
    # A test module may change the configuration it gets (``EDIT_CONFIG``: text -> text).
    text = getattr(request.module, "EDIT_CONFIG", lambda t: t)(config.read_text())
    port = free_port()
    config.write_text(
        text.replace("[portal]\n", f'[portal]\nport = {port}\nmqtt_client_id = "portal-{port}"\n')
    )
    store = root / "store.db"
    daemon = Daemon(config).start()
    daemon.wait_ready()
    pub = Client(mosquitto_session.port, f"fixture-{port}")
    # 09:00-09:03 loud at n2: a 6.D violation, which opens a notice.
    publish_minutes(pub, "n2", local(9), 3, 86.0)
    publish_minutes(pub, "n1", local(9), 3, 58.0)
    pub.publish(
        f"minewatch/{SITE}/events/blast",
        {"blast_id": "B-1100", "ts": format_ts(local(11, 0, 30))},
    )
    publish_minutes(pub, "n1", local(11), 2, 62.0)
    publish_minutes(pub, "n2", local(11), 2, 66.0)
    pub.publish(
        f"minewatch/{SITE}/sensors/l1/light",
        {"ts": format_ts(local(11, 1)), "duration_s": 10, "lux_mean": 0.4, "lux_min": 0.2, "lux_max": 0.9},
    )
    assert wait_until(lambda: store_count(store, "SELECT COUNT(*) FROM notices") >= 1, 60), daemon.logs()
    import sqlite3

    conn = sqlite3.connect(store)
    notice_id = conn.execute("SELECT id FROM notices ORDER BY id LIMIT 1").fetchone()[0]
    conn.close()
    artifacts = root / "artifacts"
    artifacts.mkdir()

    def config_for(new_port: int) -> Path:
        config.write_text(on_port(config.read_text(), new_port))
        return config

    try:
        with portal_serving(config_for, root / "portal.log", port=port) as (served, portal):
            yield Env(
                root,
                config,
                store,
                f"http://127.0.0.1:{served}",
                mosquitto_session,
                daemon,
                pub,
                portal,
                notice_id,
                artifacts,
            )
    finally:
        pub.close()
        daemon.stop()


@pytest.fixture(scope="module")
def playwright_() -> Iterator[Playwright]:
    with sync_playwright() as p:
        yield p


@pytest.fixture(scope="module")
def browser(playwright_: Playwright) -> Iterator[Browser]:
    b = playwright_.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    yield b
    b.close()


@pytest.fixture
def context(browser: Browser) -> Iterator[BrowserContext]:
    ctx = browser.new_context(accept_downloads=True, viewport={"width": 1400, "height": 900})
    yield ctx
    ctx.close()


def login(context: BrowserContext, env: Env, name: str, password: str | None = None) -> Page:
    page = context.new_page()
    page.goto(f"{env.url}/login")
    page.fill("input[name=name]", name)
    page.fill("input[name=password]", password or PASSWORD[name])
    page.click("button[type=submit]")
    page.wait_for_load_state()
    return page


def wait(seconds: float) -> None:
    time.sleep(seconds)
