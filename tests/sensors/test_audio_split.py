"""Raw audio never leaves the edge in a message larger than the broker or the daemon takes.

The shipped broker (deploy/mosquitto/mosquitto.conf) caps packets at 2 MiB and disconnects a
client that sends a bigger one; the daemon rejects payloads over daemon.max_payload_bytes
(1 MiB by default). A long block is split into consecutive blocks that the daemon's meter reads
as one stream: the levels equal those of the unsplit recording. Real Mosquitto and daemon.
"""

from __future__ import annotations

import sqlite3
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import paho.mqtt.client as mqtt
import pytest

from monitor.acoustics.iec61672 import SoundLevelMeter
from monitor.config import load_config
from monitor.wire.codec import AudioBlock, decode, encode
from monitor.wire.network_loop import stop_network_loop
from monitor.wire.protocol import Limits
from sensors.link import Link
from sensors.publisher import BROKER_MAX_PACKET_BYTES, Publisher, split_audio
from sensors.queue import MemoryQueue
from tests.support.daemon import Daemon, store_count, wait_until, write_config
from tests.support.servers import Mosquitto

pytestmark = pytest.mark.timeout(180)

SHIPPED_CAP = f"max_packet_size {BROKER_MAX_PACKET_BYTES}\n"  # as in deploy/mosquitto/mosquitto.conf
RATE = 48000


def _noise(seconds: int, seed: int = 3) -> np.ndarray:
    """White noise whose level changes every second (so a misplaced sample shows in the levels)."""
    rng = np.random.default_rng(seed)
    gains = 0.01 * 10 ** (rng.uniform(0, 30, seconds) / 20)
    x = rng.standard_normal(seconds * RATE) * np.repeat(gains, RATE)
    return np.clip(x, -1.0, 32767 / 32768)


def _block(ts: datetime, x: np.ndarray, sensor: str = "n1", site: str = "quarry") -> AudioBlock:
    pcm = (x * 32768).astype("<i2").tobytes()
    return AudioBlock(site, sensor, ts, 1, RATE, "s16le", pcm)


@pytest.mark.parametrize("rate", [48000, 44100, 8000])
def test_split_parts_are_contiguous_on_whole_milliseconds(rate: int) -> None:
    ts = datetime(2026, 6, 15, 12, tzinfo=UTC)
    pcm = np.arange(20 * rate, dtype="<i2").tobytes()
    block = AudioBlock("s", "n1", ts, 7, rate, "s16le", pcm)
    parts = split_audio(block, 100_000)
    assert len(parts) > 1 and all(len(p.pcm) <= 100_000 for p in parts)
    assert b"".join(p.pcm for p in parts) == pcm
    at = ts
    for p in parts:
        assert p.ts == at and p.ts.microsecond % 1000 == 0 and p.seq == 7
        at = p.ts + timedelta(seconds=p.n_samples / rate)
    assert split_audio(block, len(pcm)) == [block]


def test_publisher_splits_a_long_block_below_the_cap_and_signs_each_part(tmp_path: Path) -> None:
    config = load_config(write_config(tmp_path / "minewatch.toml", "mqtt://127.0.0.1:1"))
    site = config.sites[0]
    sensor = site.sensor("n1")
    assert sensor is not None
    sent: list[tuple[str, bytes]] = []

    class Outlet:
        def send(self, topic: str, payload: bytes, qos: int = 1) -> None:
            sent.append((topic, payload))

    publisher = Publisher(site, sensor, Outlet(), max_payload_bytes=config.daemon.max_payload_bytes)
    ts = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=2)
    block = _block(ts, _noise(30))
    assert len(encode(block)[1]) > BROKER_MAX_PACKET_BYTES  # one message would be refused
    publisher.publish(block)
    assert len(sent) >= 3 and publisher.sent == 1
    assert all(len(p) <= config.daemon.max_payload_bytes for _, p in sent)
    parts = [decode(t, p, {site.id: site}, datetime.now(UTC), Limits()) for t, p in sent]
    assert b"".join(p.pcm for p in parts if isinstance(p, AudioBlock)) == block.pcm


def test_oversized_payload_disconnects_the_publisher_at_the_shipped_broker(tmp_path: Path) -> None:
    """What docs/PROTOCOL.md says about the cap: Mosquitto drops the client that sends more."""
    broker = Mosquitto(tmp_path / "mosquitto", extra_conf=SHIPPED_CAP).start()
    try:
        gone = threading.Event()
        client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="big", protocol=mqtt.MQTTv311)
        client.on_disconnect = lambda c, u, f, r, p: gone.set()
        client.connect("127.0.0.1", broker.port)
        client.loop_start()
        client.publish("minewatch/quarry/sensors/n1/audio", b"\0" * (BROKER_MAX_PACKET_BYTES + 1), qos=1)
        assert gone.wait(15), "the broker kept a client that sent a packet over max_packet_size"
        stop_network_loop(client)
    finally:
        broker.stop()


def test_a_long_block_reaches_the_daemon_in_parts_with_the_levels_of_the_whole(tmp_path: Path) -> None:
    broker = Mosquitto(tmp_path / "mosquitto", extra_conf=SHIPPED_CAP).start()
    config_path = write_config(tmp_path / "minewatch.toml", broker.url)
    config = load_config(config_path)
    site = config.sites[0]
    sensor = site.sensor("n1")
    assert sensor is not None
    daemon = Daemon(config_path).start()
    link = Link(config.broker, "sensor-quarry-n1", MemoryQueue())
    try:
        daemon.wait_ready(timeout=60)
        link.start()
        publisher = Publisher(site, sensor, link, max_payload_bytes=config.daemon.max_payload_bytes)
        seconds = 30
        x = _noise(seconds)
        ts = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=2)
        publisher.publish(_block(ts, x))
        assert link.drain(60), "not every part was acknowledged"
        assert link.connects == 1  # never disconnected by the broker
        store = tmp_path / "store.db"
        audio_sql = "SELECT COUNT(*) FROM sound WHERE sensor = 'n1' AND source = 'audio'"
        assert wait_until(lambda: store_count(store, audio_sql) >= seconds, timeout=60), daemon.logs()
    finally:
        link.close()
        daemon.stop()
        broker.stop()
    conn = sqlite3.connect(store)
    try:
        stored = [r[0] for r in conn.execute("SELECT LAeq FROM sound WHERE sensor='n1' ORDER BY ts_us")]
        parts = conn.execute("SELECT COUNT(*) FROM audio WHERE sensor='n1'").fetchone()[0]
        rejected = conn.execute("SELECT COUNT(*) FROM rejections").fetchone()[0]
    finally:
        conn.close()
    assert parts >= 3 and rejected == 0
    meter = SoundLevelMeter(RATE, 1.0, calibration_db=sensor.calibration.full_scale_db)
    whole = [p.LAeq for p in meter.process(np.frombuffer(_block(ts, x).pcm, "<i2") / 32768.0)]
    assert len(stored) == seconds
    assert np.allclose(stored, whole, atol=0.01), list(zip(stored, whole, strict=True))
