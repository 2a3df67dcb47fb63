"""Portal benchmark (not a test): the day, week and month views, the operator's status page and
its live part and the findings API under 20 clients while the daemon ingests a stream, and how
much the portal slows that ingest.

    python bench/portal.py [--sensors 10] [--days 31] [--seconds 86400] [--clients 20] [--stream 200000]

1. A store with ``--days`` local days of per-second levels (``--seconds`` of each) for
   ``--sensors`` boundary meters of site "bench" (10 x 86,400 = 864,000 readings a day), written
   and chained with the store's own append_sounds, as the daemon writes them. The week and the
   month views are the week and the month that hold the last day.
2. The daemon (`minewatch run`) and the portal (`minewatch serve`) on a real Mosquitto.
3. Ingest alone, measured as bench/ingest.py does: the daemon stopped, ``--stream`` levels
   messages for site "load" queued by the broker for its persistent session, the daemon
   started again and timed until all are stored (the publisher is not running meanwhile).
4. The first (cold) week and month view, timed once each before the clients start.
5. The same drain again while ``--clients`` logged-in clients request the day, week and month
   view pages, the operator's status page, its live part (``/status/live``, what the page's
   script fetches every 10 s) and the findings API in turn, as fast as they can,
   from a process of their own, with the portal and the clients at ``--nice`` (10 by default,
   as deployed) below the daemon.
6. CPU seconds of the daemon in each drain, and of the portal and clients, from /proc.

Last lines: ``first view: week <ms> ms, month <ms> ms`` and ``portal: day view p50 <ms> ms p95
<ms> ms, week p95 <ms> ms, month p95 <ms> ms, status p95 <ms> ms, live p95 <ms> ms, api p95 <ms>
ms, <n> req/s at 20 clients, ingest slowed <p> %``
"""

from __future__ import annotations

import argparse
import http.cookiejar
import multiprocessing
import os
import re
import sqlite3
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import paho.mqtt.client as mqtt

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from workdir import KEEP_HELP, scratch_folder  # noqa: E402  (bench/, the script's own folder)

from monitor.credentials import hash_password  # noqa: E402
from monitor.journal.queries import HOUR_US  # noqa: E402
from monitor.journal.store import Store, to_us  # noqa: E402
from monitor.wire.codec import encode  # noqa: E402
from monitor.wire.network_loop import stop_network_loop  # noqa: E402
from rules.model import SoundLevels  # noqa: E402
from tests.support.servers import Mosquitto, free_port, stop_process, wait_for_port  # noqa: E402

TZ = "America/Chicago"
PASSWORD = "bench-password"
OPERATOR_PAGES = ("status", "live")  # asked for by the operator account, the rest by the inspector


def write_config(path: Path, broker: int, port: int, sensors: int, load_sensors: int) -> None:
    lines = [
        "[broker]",
        f'url = "mqtt://127.0.0.1:{broker}"',
        'client_id = "bench-portal-daemon"',
        "[storage]",
        f'path = "{path.parent / "bench.db"}"',
        "[daemon]",
        'clock = "data"',
        "lateness_s = 3600",
        "queue_size = 20000",
        "status_interval_s = 30",
        "offline_after_periods = 100000",
        "max_age_s = 31536000",
    ]
    for site, count in (("bench", sensors), ("load", load_sensors)):
        lines += [
            "[[sites]]",
            f'id = "{site}"',
            f'timezone = "{TZ}"',
            "latitude = 45.27",
            "longitude = -91.62",
        ]
        for n in range(count):
            lines += ["[[sites.sensors]]", f'id = "n{n}"', 'kind = "sound"']
    lines += [
        "[portal]",
        f"port = {port}",
        'secret_key = "bench"',
        "login_attempts = 1000",
        "[[portal.accounts]]",
        'name = "inspector"',
        'role = "inspector"',
        f'password_hash = "{hash_password(PASSWORD)}"',
        "[[portal.accounts]]",
        'name = "operator"',
        'role = "operator"',
        f'password_hash = "{hash_password(PASSWORD)}"',
    ]
    path.write_text("\n".join(lines) + "\n")


def fill_day(db: Path, day: date, sensors: int, seconds: int, count_hours: bool = True) -> int:
    """A day of per-second levels, chained, with a loud hour (findings for the API to list);
    ``count_hours``: its hours then counted into the hourly histograms, as the daemon counts
    each hour once its data has moved on (Store.keep_sound_hours)."""
    store = Store(db)
    start = datetime.combine(day, datetime.min.time(), ZoneInfo(TZ)).astimezone(UTC)
    now = start + timedelta(seconds=seconds)
    written = 0
    step = 2000
    for first in range(0, seconds, step):
        items = []
        for s in range(first, min(first + step, seconds)):
            ts = start + timedelta(seconds=s)
            for n in range(sensors):
                laeq = 55.0 + 10 * ((s // 600 + n) % 3) + (0.1 * (s % 10))
                items.append(
                    (SoundLevels("bench", f"n{n}", ts, 1.0, laeq, laeq + 2, laeq + 15), "levels", False)
                )
        with store.batch():
            store.append_sounds(items, now)
        written += len(items)
    if count_hours:
        with store.batch():
            store.keep_sound_hours("bench", to_us(now) // HOUR_US)
    store.close()
    return written


def count_sound(db: Path, site: str) -> int:
    conn = sqlite3.connect(db, timeout=30)
    try:
        return int(conn.execute("SELECT COUNT(*) FROM sound WHERE site = ?", (site,)).fetchone()[0])
    finally:
        conn.close()


def publish(broker: int, sensors: int, total: int, start: datetime) -> None:
    """Publish ``total`` levels for site "load" (QoS 1), as a sensor fleet would."""
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"bench-load-{time.time_ns()}")
    client.max_inflight_messages_set(1000)
    client.max_queued_messages_set(0)
    client.connect("127.0.0.1", broker)
    client.loop_start()
    infos = []
    for i in range(total):
        ts = start + timedelta(seconds=i // sensors)
        laeq = 60.0 + (i % 20)
        topic, payload = encode(SoundLevels("load", f"n{i % sensors}", ts, 1.0, laeq, laeq + 2, laeq + 15))
        infos.append(client.publish(topic, payload, qos=1))
        if len(infos) >= 20000:
            for info in infos:
                info.wait_for_publish(60)
            infos.clear()
    for info in infos:
        info.wait_for_publish(60)
    stop_network_loop(client)
    client.disconnect()


class Daemon:
    """`minewatch run` on the bench configuration; stopped and started around each backlog."""

    def __init__(self, config: Path, log: Any) -> None:
        self.cmd = [
            sys.executable,
            "-m",
            "monitor.cli",
            "run",
            "--config",
            str(config),
            "--log-level",
            "WARNING",
        ]
        self.log = log
        self.proc = self.start()

    def start(self) -> subprocess.Popen[bytes]:
        self.proc = subprocess.Popen(self.cmd, stdout=self.log, stderr=self.log, cwd=REPO)
        return self.proc

    def stop(self) -> None:
        stop_process(self.proc, timeout=60)


def drain(
    daemon: Daemon, broker: int, db: Path, sensors: int, total: int, start: datetime
) -> tuple[float, float]:
    """bench/ingest.py's measure: ``total`` messages queued by the broker for the daemon's
    persistent session while it is stopped, then the rate (msg/s) at which the restarted daemon
    stores them, and the daemon's CPU seconds meanwhile. The publisher is not running then."""
    before = count_sound(db, "load")
    daemon.stop()
    publish(broker, sensors, total, start)
    proc = daemon.start()
    t0 = time.perf_counter()
    while count_sound(db, "load") < before + total:
        if proc.poll() is not None:
            raise SystemExit(f"the daemon stopped (exit {proc.returncode}); see its log")
        time.sleep(0.1)
    return total / (time.perf_counter() - t0), cpu_s(proc.pid)


def fill_days(db: Path, last: date, days: int, sensors: int, seconds: int, count_hours: bool = True) -> int:
    """``days`` local days ending with ``last``, each as fill_day writes it."""
    return sum(
        fill_day(db, last - timedelta(days=k), sensors, seconds, count_hours) for k in reversed(range(days))
    )


def session(base: str, name: str = "inspector") -> urllib.request.OpenerDirector:
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    page = opener.open(f"{base}/login").read().decode()
    match = re.search(r'name="csrf" value="([^"]+)"', page)
    assert match, "no CSRF token on the login page"
    form = urllib.parse.urlencode({"csrf": match[1], "name": name, "password": PASSWORD}).encode()
    opener.open(f"{base}/login", data=form).read()
    return opener


def view_urls(base: str, day: date) -> dict[str, str]:
    """What the clients ask for, by name: the views of the last day, its week and its month."""
    monday = day - timedelta(days=day.weekday())
    first = day.replace(day=1)
    following = (first + timedelta(days=32)).replace(day=1)
    return {
        "day": f"{base}/sites/bench/day?date={day}",
        "week": f"{base}/sites/bench/day?from={monday}T00:00&to={monday + timedelta(days=7)}T00:00",
        "month": f"{base}/sites/bench/day?from={first}T00:00&to={following}T00:00",
        "status": f"{base}/sites/bench/status",
        "live": f"{base}/sites/bench/status/live",
        "api": f"{base}/api/v1/sites/bench/findings?date={day}",
    }


def clients(
    base: str, day: date, count: int, stop: threading.Event, ready: Callable[[], None] = lambda: None
) -> tuple[dict[str, list[float]], float]:
    urls = view_urls(base, day)
    names = list(urls)
    times: dict[str, list[float]] = {name: [] for name in names}
    lock = threading.Lock()
    # The status page and its live part are the operator's; the views and the API the inspector's.
    openers = [(session(base), session(base, "operator")) for _ in range(count)]
    ready()

    def work(pair: tuple[urllib.request.OpenerDirector, urllib.request.OpenerDirector], offset: int) -> None:
        i = offset
        while not stop.is_set():
            name = names[i % len(names)]
            opener = pair[1] if name in OPERATOR_PAGES else pair[0]
            t = time.perf_counter()
            body = opener.open(urls[name], timeout=120).read()
            ms = (time.perf_counter() - t) * 1000
            assert body
            with lock:
                times[name].append(ms)
            i += 1

    threads = [threading.Thread(target=work, args=(o, k), daemon=True) for k, o in enumerate(openers)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    stop.wait()
    for t in threads:
        t.join(120)
    return times, time.perf_counter() - t0


def client_process(base: str, day: date, count: int, nice: int, ready: Any, stop: Any, out: Any) -> None:
    """The clients, in a process of their own (multiprocessing events and queue)."""
    os.nice(nice)
    done = threading.Event()

    def relay() -> None:
        stop.wait()
        done.set()

    threading.Thread(target=relay, daemon=True).start()
    out.put(clients(base, day, count, done, ready.set))


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process (all its threads) so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def p(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    return (
        statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1] if len(values) > 1 else values[0]
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sensors", type=int, default=10)
    parser.add_argument("--days", type=int, default=31, help="local days of per-second levels in the store")
    parser.add_argument("--seconds", type=int, default=86400, help="seconds of each day filled")
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--stream", type=int, default=200_000, help="messages the daemon ingests per phase")
    parser.add_argument("--load-sensors", type=int, default=100)
    parser.add_argument(
        "--nice",
        type=int,
        default=10,
        help="run the portal and the clients at this niceness (the daemon at 0), as the shipped"
        " deployment does (Nice=10 in minewatch-portal.service, nice -n 10 in compose.yaml);"
        " 0 for the same priority",
    )
    parser.add_argument("--keep", action="store_true", help=KEEP_HELP)
    args = parser.parse_args()
    with scratch_folder("minewatch-bench-portal-", args.keep) as work:
        return bench_in(work, args)


def bench_in(work: Path, args: argparse.Namespace) -> int:
    """The benchmark with its files in ``work``."""
    broker = Mosquitto(work / "mosquitto").start()
    port = free_port()
    config = work / "bench.toml"
    write_config(config, broker.port, port, args.sensors, args.load_sensors)
    day = (datetime.now(ZoneInfo(TZ)) - timedelta(days=2)).date()
    t = time.perf_counter()
    rows = fill_days(work / "bench.db", day, args.days, args.sensors, args.seconds)
    print(
        f"store: {rows} readings of site bench, {args.days} days to {day}, in {time.perf_counter() - t:.0f} s"
    )
    logs = [open(work / name, "ab") for name in ("daemon.log", "portal.log")]  # noqa: SIM115
    daemon = Daemon(config, logs[0])
    portal = subprocess.Popen(
        [sys.executable, "-m", "monitor.cli", "serve", "--config", str(config)],
        stdout=logs[1],
        stderr=logs[1],
        cwd=REPO,
        preexec_fn=(lambda: os.nice(args.nice)) if args.nice else None,
    )
    try:
        wait_for_port(port, timeout=60, proc=portal)
        time.sleep(2)  # the daemon's subscription (its persistent session from here on)
        base = f"http://127.0.0.1:{port}"
        load_start = datetime.combine(day, datetime.min.time(), ZoneInfo(TZ)).astimezone(UTC)
        db = work / "bench.db"
        alone, daemon_cpu_alone = drain(daemon, broker.port, db, args.load_sensors, args.stream, load_start)
        print(f"ingest alone: {alone:.0f} msg/s (daemon {daemon_cpu_alone:.1f} CPU s)")
        first = session(base)
        cold = {}
        for name in ("week", "month"):
            t = time.perf_counter()
            first.open(view_urls(base, day)[name], timeout=600).read()
            cold[name] = (time.perf_counter() - t) * 1000
        print(f"first view: week {cold['week']:.0f} ms, month {cold['month']:.0f} ms")
        spawn = multiprocessing.get_context("spawn")
        ready, stop, out = spawn.Event(), spawn.Event(), spawn.Queue()
        runner = spawn.Process(
            target=client_process, args=(base, day, args.clients, args.nice, ready, stop, out)
        )
        runner.start()
        ready.wait(300)
        time.sleep(2)  # clients busy
        assert runner.pid is not None
        served_before = cpu_s(portal.pid) + cpu_s(runner.pid)
        later = load_start + timedelta(seconds=args.stream // args.load_sensors + 1)
        loaded, daemon_cpu_loaded = drain(daemon, broker.port, db, args.load_sensors, args.stream, later)
        served = cpu_s(portal.pid) + cpu_s(runner.pid) - served_before
        stop.set()
        times, elapsed = out.get(timeout=180)
        runner.join(60)
        print(
            f"ingest with {args.clients} portal clients: {loaded:.0f} msg/s (daemon {daemon_cpu_loaded:.1f}"
            f" CPU s; portal and clients {served:.1f} CPU s over the publishing and the drain)"
        )
        slowed = max(0.0, (1 - loaded / alone) * 100)
        rate = sum(len(v) for v in times.values()) / elapsed
        counts = ", ".join(f"{k} {len(v)}" for k, v in times.items())
        print(f"portal and clients at nice {args.nice}; requests: {counts}")
        print(
            f"portal: day view p50 {p(times['day'], 50):.0f} ms p95 {p(times['day'], 95):.0f} ms,"
            f" week p95 {p(times['week'], 95):.0f} ms, month p95 {p(times['month'], 95):.0f} ms,"
            f" status p95 {p(times['status'], 95):.0f} ms, live p95 {p(times['live'], 95):.0f} ms,"
            f" api p95 {p(times['api'], 95):.0f} ms,"
            f" {rate:.0f} req/s at {args.clients} clients, ingest slowed {slowed:.0f} %"
        )
    finally:
        stop_process(portal, timeout=10)
        daemon.stop()
        for log in logs:
            log.close()
        broker.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
