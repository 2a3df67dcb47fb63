"""Start-up benchmark (not a test): how fast the commands answer, against ``import numpy``.

    python bench/startup.py [--repeat 7] [--daemon-repeat 3] [--dir /tmp/minewatch-bench/startup]

Times, in the same run and interleaved so that load on the machine hits all alike, the median
of ``--repeat`` runs of each of:

- the floor: ``python3 -c "import numpy"``;
- ``minewatch levels`` on a 1-second 48 kHz WAV;
- ``minewatch status`` on a store holding a month of per-second readings (30 days x 1 sensor,
  2.6 M rows: a month's row count per sensor; built once by bench/evidence.py's store builder,
  about a minute, and kept in ``--dir``);
- ``minewatch --help``.

Each command runs once untimed first (the weighting filter cache and the page cache warm up,
as they are on a machine in use). "Daemon ready" is the time from spawning ``minewatch run``
to the first sensor message it accepts: a publisher sends a reading every 10 ms to a real
Mosquitto on a free port from the spawn on, and the store's ``received_us`` of the first
reading kept says when the daemon took it (median of ``--daemon-repeat`` fresh starts).

Last line: ``startup: levels <r> x, status <r> x, help <r> x, daemon ready <s> s``
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import wave
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.evidence import CONFIG, SENSOR, SITE, fill  # noqa: E402
from monitor.wire.codec import encode  # noqa: E402
from monitor.wire.network_loop import stop_network_loop  # noqa: E402
from rules.model import SoundLevels  # noqa: E402
from tests.support.servers import Mosquitto, stop_process  # noqa: E402

MONTH_DAYS = 30
RATE = 48_000
CLI = [sys.executable, "-m", "monitor.cli"]


def write_wav(path: Path) -> None:
    tone = 0.1 * np.sin(2 * np.pi * 1000.0 * np.arange(RATE) / RATE)
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(RATE)
        out.writeframes((tone * 32767).astype("<i2").tobytes())


def month_store(directory: Path) -> Path:
    """The status command's configuration, over a month's store (built on the first run)."""
    store = directory / f"store-{MONTH_DAYS}x1.db"
    config = directory / f"minewatch-{MONTH_DAYS}x1.toml"
    config.write_text(CONFIG.format(store=store, site=SITE) + SENSOR.format(id="n01"))
    if not store.exists():
        print(f"building {store} ({MONTH_DAYS} days x 1 sensor) ...", flush=True)
        started = time.monotonic()
        partial = store.with_suffix(".partial")
        for suffix in ("", "-wal", "-shm"):
            Path(f"{partial}{suffix}").unlink(missing_ok=True)
        fill(partial, MONTH_DAYS, 1)
        partial.rename(store)  # an interrupted build is not mistaken for a month next time
        print(f"built in {time.monotonic() - started:.0f} s", flush=True)
    return config


def elapsed(argv: list[str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=REPO, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.decode()[-500:]}")
    return seconds


def daemon_config(path: Path, port: int) -> None:
    path.write_text(
        "[broker]\n"
        f'url = "mqtt://127.0.0.1:{port}"\n'
        "[storage]\n"
        f'path = "{path.parent / "store.db"}"\n'
        "[daemon]\n"
        "lateness_s = 3600\n"
        "[[sites]]\n"
        f'id = "{SITE}"\n'
        'timezone = "America/Chicago"\n'
        "latitude = 45.27\n"
        "longitude = -91.62\n"
        "[[sites.sensors]]\n"
        'id = "n01"\n'
        'kind = "sound"\n'
    )


def daemon_ready(broker: Mosquitto, workdir: Path) -> float:
    """Seconds from spawning the daemon to its receiving the first reading."""
    config = workdir / "daemon.toml"
    daemon_config(config, broker.port)
    stop = threading.Event()
    client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=f"startup-{workdir.name}")
    client.connect("127.0.0.1", broker.port)
    client.loop_start()
    first = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=30)

    def publish() -> None:  # one reading every 10 ms, each its own second, until told to stop
        i = 0
        while not stop.is_set():
            reading = SoundLevels(SITE, "n01", first + timedelta(seconds=i), 1.0, 60.0, 62.0, 75.0)
            topic, payload = encode(reading)
            client.publish(topic, payload, qos=1)
            i += 1
            time.sleep(0.01)

    log = open(workdir / "daemon.log", "wb")  # noqa: SIM115 - closed below
    spawned_us = time.time() * 1e6
    daemon = subprocess.Popen([*CLI, "run", "--config", str(config)], stdout=log, stderr=log, cwd=REPO)
    publisher = threading.Thread(target=publish, daemon=True)
    publisher.start()
    received_us = None
    try:
        deadline = time.monotonic() + 60
        while received_us is None and time.monotonic() < deadline and daemon.poll() is None:
            time.sleep(0.1)
            try:
                with sqlite3.connect(workdir / "store.db", timeout=5) as conn:
                    received_us = conn.execute("SELECT MIN(received_us) FROM sound").fetchone()[0]
            except sqlite3.Error:
                pass  # not created yet
    finally:
        stop.set()
        publisher.join()
        stop_network_loop(client)
        client.disconnect()
        stop_process(daemon, timeout=30)
        log.close()
    if received_us is None:
        raise SystemExit(f"the daemon took no reading within 60 s; see {workdir / 'daemon.log'}")
    return (float(received_us) - spawned_us) / 1e6


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=7, help="timed runs of each command (median)")
    parser.add_argument("--daemon-repeat", type=int, default=3, help="daemon starts timed (median)")
    parser.add_argument("--dir", type=Path, default=Path("/tmp/minewatch-bench/startup"))
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    wav = args.dir / "one-second.wav"
    write_wav(wav)
    config = month_store(args.dir)
    commands = {
        "numpy": [sys.executable, "-c", "import numpy"],
        "levels": [*CLI, "levels", str(wav), "--calibration", "94"],
        "status": [*CLI, "status", "--config", str(config)],
        "help": [*CLI, "--help"],
    }
    for argv in commands.values():
        elapsed(argv)  # untimed: caches warm
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(args.repeat):
        for name, argv in commands.items():  # interleaved: load on the machine hits every command
            times[name].append(elapsed(argv))
    median = {name: statistics.median(values) for name, values in times.items()}
    for name, value in median.items():
        print(f"{name:<7} median {value:.3f} s  (runs: {', '.join(f'{t:.2f}' for t in times[name])})")

    with tempfile.TemporaryDirectory(prefix="minewatch-startup-") as tmp:
        broker = Mosquitto(Path(tmp) / "broker").start()
        try:
            ready = []
            for run in range(args.daemon_repeat):
                workdir = Path(tmp) / f"daemon{run}"
                workdir.mkdir()
                ready.append(daemon_ready(broker, workdir))
        finally:
            broker.stop()
    print(f"daemon ready (runs: {', '.join(f'{t:.2f}' for t in ready)})")
    floor = median["numpy"]
    print(
        f"startup: levels {median['levels'] / floor:.2f} x, status {median['status'] / floor:.2f} x,"
        f" help {median['help'] / floor:.2f} x, daemon ready {statistics.median(ready):.2f} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
