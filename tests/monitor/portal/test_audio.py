"""Raw audio of an exceedance played in the portal: a WAV cut from the stored blocks, each block's
chain digest checked before it is served.

A real Mosquitto, daemon (data clock), store and portal (`minewatch serve`): the test publishes
three minutes of loud raw audio for meter n1 (8 kHz s16le blocks of one second, as an audio
sensor sends them), which the daemon meters, stores, chains and judges (a 6.D violation
episode at 09:00-09:03); then a quiet minute of levels closes those minutes.
"""

from __future__ import annotations

import http.cookiejar
import re
import sqlite3
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import numpy as np
import pytest
from playwright.sync_api import Browser

from monitor.acoustics.wavfile import parse_wav
from monitor.credentials import hash_password
from monitor.journal.audio_clips import Block, cut
from monitor.wire.codec import AudioBlock, encode, encode_audio
from monitor.wire.protocol import format_ts
from rules.model import SoundLevels
from tests.support.daemon import Client, Daemon, store_count, wait_until, write_config
from tests.support.portal_server import on_port, portal_serving
from tests.support.servers import Mosquitto, free_port

SITE = "quarry"
TZ = ZoneInfo("America/Chicago")
DAY = (datetime.now(TZ) - timedelta(days=3)).date()
RATE = 8000
SECONDS = 180
PASSWORD = "audio-secret-1"
ACCOUNTS = {  # name: (role, sites, extra)
    "op": ("operator", '["quarry"]', ""),
    "town": ("town", '["quarry"]', ""),
    "insp": ("inspector", '["quarry"]', ""),
    "late": ("inspector", '["quarry"]', f'not_before = "{(DAY + timedelta(days=1)).isoformat()}"\n'),
    "elsewhere": ("town", '["other"]', ""),
}
EXTRA = """
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

[portal]
secret_key = "test-secret-key-not-for-production"
login_attempts = 100
"""


def local(hour: int, minute: int = 0, second: float = 0, day: date = DAY) -> datetime:
    start = datetime(day.year, day.month, day.day, hour, minute, tzinfo=TZ).astimezone(UTC)
    return start + timedelta(seconds=second)


@dataclass
class Env:
    url: str
    store: Path
    samples: np.ndarray  # what the test sent: SECONDS x RATE int16 samples from 09:00


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, mosquitto_session: Mosquitto) -> Iterator[Env]:
    root = tmp_path_factory.mktemp("audio")
    accounts = "".join(
        f'[[portal.accounts]]\nname = "{name}"\nrole = "{role}"\nsites = {sites}\n'
        f'password_hash = "{hash_password(PASSWORD)}"\n{extra}'
        for name, (role, sites, extra) in ACCOUNTS.items()
    )
    config = write_config(
        root / "minewatch.toml",
        mosquitto_session.url,
        client_id=f"audio-test-{free_port()}",
        daemon_extra='clock = "data"',
        extra_sites=EXTRA + accounts,
    )
    port = free_port()
    config.write_text(
        config.read_text().replace(
            "[portal]\n", f'[portal]\nport = {port}\nmqtt_client_id = "portal-{port}"\n'
        )
    )
    store = root / "store.db"
    daemon = Daemon(config).start()
    daemon.wait_ready()
    pub = Client(mosquitto_session.port, f"audio-fixture-{port}")
    rng = np.random.default_rng(26)
    samples = rng.integers(-12000, 12000, size=(SECONDS, RATE), dtype=np.int16)  # about 105 dB(A)
    for s in range(SECONDS):
        block = AudioBlock(
            SITE, "n1", local(9, 0, s), s + 1, RATE, "s16le", samples[s].astype("<i2").tobytes()
        )
        pub.publish(*encode_audio(block))
    for s in range(120):  # quiet seconds after: the loud minutes close
        for sensor in ("n1", "n2"):
            ts = local(9, 5, s)
            pub.publish(*encode(SoundLevels(SITE, sensor, ts, 1.0, 52.0, 53.5, 67.0, LZpeak=70.0)))
    assert wait_until(lambda: store_count(store, "SELECT COUNT(*) FROM audio") == SECONDS, 120), daemon.logs()
    assert wait_until(lambda: store_count(store, "SELECT COUNT(*) FROM notices") >= 1, 120), daemon.logs()

    def config_for(new_port: int) -> Path:
        config.write_text(on_port(config.read_text(), new_port))
        return config

    try:
        with portal_serving(config_for, root / "portal.log", port=port) as (served, _):
            yield Env(f"http://127.0.0.1:{served}", store, samples)
    finally:
        pub.close()
        daemon.stop()


def session(env: Env, name: str) -> urllib.request.OpenerDirector:
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
    page = opener.open(f"{env.url}/login").read().decode()
    csrf = re.search(r'name="csrf" value="([^"]+)"', page)
    assert csrf
    form = urllib.parse.urlencode({"csrf": csrf[1], "name": name, "password": PASSWORD}).encode()
    assert "Log out" in opener.open(f"{env.url}/login", data=form).read().decode()
    return opener


def get(opener: urllib.request.OpenerDirector, url: str) -> tuple[int, str, bytes]:
    try:
        with opener.open(url) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), e.read()


def clip_url(start: datetime, end: datetime, site: str = SITE, sensor: str = "n1") -> str:
    query = urllib.parse.urlencode({"from": format_ts(start), "to": format_ts(end)})
    return f"/sites/{site}/audio/{sensor}.wav?{query}"


def data_chunk(wav: bytes) -> bytes:
    assert wav[:4] == b"RIFF" and wav[8:12] == b"WAVE" and wav[36:40] == b"data"
    return wav[44 : 44 + int.from_bytes(wav[40:44], "little")]


def test_clip_is_the_stored_samples_byte_for_byte(env: Env) -> None:
    """09:00:10.25-09:00:40: block 10 from its sample 2,000 (0.25 s x 8 kHz), blocks 11-39 whole;
    the same bytes as the store's blocks and as the samples the sensor sent."""
    town = session(env, "town")
    status, kind, wav = get(town, env.url + clip_url(local(9, 0, 10.25), local(9, 0, 40)))
    assert (status, kind) == (200, "audio/wav")
    conn = sqlite3.connect(env.store)
    blocks = [
        bytes(r[0])
        for r in conn.execute(
            "SELECT pcm FROM audio WHERE sensor = 'n1' AND ts_us >= ? AND ts_us < ? ORDER BY ts_us",
            (int(local(9, 0, 10).timestamp() * 1e6), int(local(9, 0, 40).timestamp() * 1e6)),
        )
    ]
    conn.close()
    assert len(blocks) == 30
    stored = blocks[0][2000 * 2 :] + b"".join(blocks[1:])
    assert data_chunk(wav) == stored
    assert data_chunk(wav) == env.samples[10:40].astype("<i2").tobytes()[2000 * 2 :]
    parsed = parse_wav(wav)
    assert (parsed.sample_rate, parsed.channels, parsed.bits_per_sample, parsed.is_float) == (
        RATE,
        1,
        16,
        False,
    )
    assert len(parsed.samples) == 29 * RATE + 6000


def test_period_view_and_notice_offer_the_episode_clip(env: Env) -> None:
    """The violation episode at n1 (09:00-09:03) has an <audio> of its first two minutes on the
    period view and on its notice's page; both play the stored samples from 09:00."""
    town = session(env, "town")
    status, _, body = get(town, f"{env.url}/sites/{SITE}/day?date={DAY}")
    assert status == 200
    page = body.decode()
    episode = re.search(r'<li class="kind-violation" data-episode="[^"]+">(.*?)</li>', page, re.S)
    assert episode, page
    srcs = re.findall(r'<audio controls preload="none" src="([^"]+)"', episode[1])
    assert len(srcs) == 1
    src = srcs[0].replace("&amp;", "&")
    assert src == clip_url(local(9), local(9, 2)), src
    status, kind, wav = get(town, env.url + src)
    assert (status, kind) == (200, "audio/wav")
    assert data_chunk(wav) == env.samples[:120].astype("<i2").tobytes()
    notice = re.search(r'href="/notices/([^"]+)"', page)
    assert notice
    status, _, body = get(town, f"{env.url}/notices/{notice[1]}")
    assert status == 200
    assert re.findall(r'<audio controls preload="none" src="([^"]+)"', body.decode()) == srcs


def test_roles_and_scopes(env: Env) -> None:
    """Operator, Town and inspector of the site hear it; an account of another site (404), an
    inspector whose time scope starts the next day (404) and the public (sent to log in) do not."""
    url = env.url + clip_url(local(9, 0, 0), local(9, 0, 5))
    expected = env.samples[:5].astype("<i2").tobytes()
    for name in ("op", "town", "insp"):
        status, kind, wav = get(session(env, name), url)
        assert (status, kind) == (200, "audio/wav"), name
        assert data_chunk(wav) == expected, name
    for name in ("elsewhere", "late"):
        status, kind, body = get(session(env, name), url)
        assert status == 404, name
        assert b"RIFF" not in body
    public = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
    status, kind, body = get(public, url)
    assert status == 200 and kind.startswith("text/html") and b'name="password"' in body  # the login page
    status, _, _ = get(session(env, "town"), env.url + clip_url(local(9), local(9, 5)))
    assert status == 400  # longer than a clip may be


def test_chromium_loads_the_clip(env: Env, browser: Browser) -> None:
    """The period view's <audio> loads in Chromium: its duration after loadedmetadata is the clip's."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    try:
        page.goto(f"{env.url}/login")
        page.fill("input[name=name]", "insp")
        page.fill("input[name=password]", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_load_state()
        page.goto(f"{env.url}/sites/{SITE}/day?date={DAY}")
        audio = page.locator("#day-episodes audio").first
        assert audio.count() == 1
        duration = audio.evaluate(
            """a => new Promise((resolve, reject) => {
                a.addEventListener('loadedmetadata', () => resolve(a.duration));
                a.addEventListener('error', () => reject(new Error('audio error ' + a.error?.code)));
                a.preload = 'metadata';
                a.load();
            })"""
        )
        assert duration == pytest.approx(120.0, abs=0.01)
        page.locator("#day-episodes").screenshot(path=str(env.store.parent / "audio-episode.png"))
    finally:
        context.close()


def test_a_tampered_block_is_refused(env: Env) -> None:
    """A block altered in the store after it was chained: a clip holding it is refused (409, the
    block named), never served; a clip without it still is. The block is put back afterwards."""
    ts_us = int(local(9, 1, 0).timestamp() * 1e6)
    conn = sqlite3.connect(env.store, timeout=30)
    (original,) = conn.execute("SELECT pcm FROM audio WHERE sensor = 'n1' AND ts_us = ?", (ts_us,)).fetchone()
    altered = bytearray(original)
    altered[100] ^= 0x01
    with conn:
        conn.execute("UPDATE audio SET pcm = ? WHERE sensor = 'n1' AND ts_us = ?", (bytes(altered), ts_us))
    try:
        town = session(env, "town")
        status, kind, body = get(town, env.url + clip_url(local(9, 0, 50), local(9, 1, 10)))
        assert status == 409 and kind.startswith("text/html")
        assert b"RIFF" not in body
        text = body.decode()
        assert f"the audio block of n1 at {format_ts(local(9, 1))} does not match its chain digest" in text
        status, kind, wav = get(town, env.url + clip_url(local(9, 0, 0), local(9, 0, 30)))
        assert (status, kind) == (200, "audio/wav")
        assert data_chunk(wav) == env.samples[:30].astype("<i2").tobytes()
    finally:
        with conn:
            conn.execute("UPDATE audio SET pcm = ? WHERE sensor = 'n1' AND ts_us = ?", (original, ts_us))
        conn.close()


def test_cut_fills_a_gap_with_silence_and_keeps_the_first_of_overlapping_blocks() -> None:
    """Pure: blocks at 0 s and 2 s (none at 1 s) and one overlapping the second's last half."""
    a, b, c = (np.full(4, v, dtype="<i2").tobytes() for v in (1, 2, 3))
    blocks = [Block(0, 4, "s16le", a), Block(2_000_000, 4, "s16le", b), Block(2_500_000, 4, "s16le", c)]
    clip = cut(blocks, 0, 4_000_000)
    assert clip is not None and clip.sample_rate == 4
    assert np.frombuffer(clip.pcm, "<i2").tolist() == [1, 1, 1, 1, 0, 0, 0, 0, 2, 2, 2, 2, 3, 3]
    assert cut(blocks, 5_000_000, 6_000_000) is None
