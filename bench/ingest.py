"""Ingest benchmark (not a test): the daemon's sustained end-to-end rate against mosquitto_sub.

Both consumers drain the *same* backlog from a real Mosquitto: the messages are published
while the consumer's persistent session is offline, then the consumer starts and we time
how fast it empties its queue. For the daemon, "done" means every message is stored in
SQLite (committed, chained, acknowledged) and the minutes are evaluated by the rules.

    python bench/ingest.py [--sensors 1000] [--per-sensor 200[,2000...]] [--rounds 1] [--sites 10]
                           [--workers 1] [--floor-runs 3] [--start-runs 3] [--ballast 0]
                           [--broker mosquitto|nats-cluster]

``--broker nats-cluster`` runs both consumers through a three-node nats-server cluster
(JetStream + MQTT 3.1.1, tests/support/nats_cluster.py): the backlog is published to node b,
the daemon (broker.urls, protocol 3.1.1) and ``mosquitto_sub -V mqttv311`` drain it from node a.

``--workers N`` runs the daemon with ``daemon.workers = N`` (worker processes each owning a
partition of the sites); its CPU and RSS are then the sum over the supervisor and its workers.

The floor, ``mosquitto_sub`` draining the backlog, moves from run to run: it is measured
``--floor-runs`` times (one backlog published once, queued for that many sessions) and the
ratio is taken against the median. Those sessions are ended once drained, so the daemon's backlog
is queued for the daemon alone. The daemon's CPU per message (the last line's ``cpu``) is user +
system time over the drain, summed over the supervisor and its workers: from its first stored row
until every site's last minute of data has had its final look ("done" above), the daemon's idle CPU
over the wait for that (read over 5 s once all is judged) taken out. The last stored row comes
before the looks at the last minutes of data (they come once the sites have been quiet for 10 s):
about the same judging whatever the backlog's length, 6 % of the CPU of 200 per sensor and 0.6 % of
2,000's, so a figure ending at that row leaves out more of a short backlog's work and a backlog's
length seems to cost. That figure, to the last stored row, is printed too (the rate's window), and
by quarter of the drain: measured within one run, a cost that grows with the backlog shows there
apart from the machine's speed, which moves between runs. The drain starts at the first stored row,
after the workers have received and prepared their first messages, so the same CPU is also printed
from the daemon's own start, with the CPU of a start with nothing queued taken out: the median of
``--start-runs`` such starts, measured just before, and the figure again with the slowest and the
fastest of them, since on a short backlog their spread is not small beside the work measured.
``--ballast N`` has the broker hold N messages of another topic for a session nobody reads while
the daemon drains: a short backlog drained with the broker's memory of a long one (on this VM the
CPU per message follows what the broker holds, docs/PERFORMANCE.md); ``--even-broker-memory``
gives each shorter size of a comparison the ballast that makes up the longest one's backlog.
The drain's CPU is also split by thread: the processes' main threads, which run the pipeline,
and the others (the network thread reading the socket, the WAL's checkpoints).
A run longer than 200 per sensor also prints its CPU per message over its first 200 per sensor
stored and over the rest: the comparison with a 200-per-sensor run, within one run.

Both consumers share the machine's cores with the broker, so the bench also prints the CPU each
drain cost: the broker's and the consumer's per message, and the machine's idle and stolen
(hypervisor) shares. The daemon's drain and the broker's CPU for it bound the rate the cores
allow (cores / (daemon + broker us/msg)), and so the ratio this code can reach on this machine.

``--per-sensor`` takes several sizes (``200,600,2000``) and ``--rounds R``: each size is run R times
(in the given order, then the reverse, alternately), each run with its own broker and store, and the
bench ends with the CPU per message of each size against the first: the medians over the rounds and
the ratio within each round, over the drain (to the last final look), to the last stored row and
from the daemon's start.
A comparison measured in one bench run, since the machine's speed moves between runs (single 200
runs 1.37 x apart on one afternoon, docs/PERFORMANCE.md). Its last line is then
``ingest compare: cpu per message against <first size> per sensor, medians of the rounds: ...``;
each run's own block keeps its ``ingest`` line.

Last line (one size): ``ingest: <rate> msg/s daemon, <median rate> msg/s mosquitto_sub, ratio <r>, lost <n>,
peak RSS <MB> MB[, workers <n>, per core <r>], cpu <us> us/msg``
(``cpu``: over the drain to its last final look; to the last stored row, marked so, where no final
look came within 120 s).
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, NamedTuple

import paho.mqtt.client as mqtt

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

# bench/, the script's own folder; psutil through cpu_shares, which says where it comes from.
from backlog_levels import backlog_levels  # noqa: E402
from cpu_shares import CpuShares, psutil  # noqa: E402
from mqtt_publish import publish_qos1  # noqa: E402
from workdir import KEEP_HELP, scratch_folder  # noqa: E402

from monitor.wire.codec import encode  # noqa: E402
from monitor.wire.network_loop import stop_network_loop  # noqa: E402
from rules.model import SoundLevels  # noqa: E402
from tests.support.nats_cluster import NatsCluster, run_nats_cluster, wait_mqtt_ready  # noqa: E402
from tests.support.servers import Mosquitto  # noqa: E402

IDLE_S = 5.0  # seconds over which the daemon's idle CPU is read (judged_cpu)
SHORT_PER_SENSOR = 200  # a long run's CPU is also printed over its first this many per sensor
JUDGED_WITHIN_S = 120.0  # the last looks come QUIET_S (10 s) after the drain; this is ample
BALLAST_SESSION = "bench-ballast"
BALLAST_TOPIC = "bench/ballast"  # outside minewatch/#: no daemon session subscribes to it


class Target:
    """Where the backlog goes in (``pub_port``) and where both consumers read it (``sub_port``)."""

    def __init__(self, pub_port: int, sub_port: int, urls: list[str], v5: bool, pids: list[int]) -> None:
        self.pub_port, self.sub_port, self.urls, self.v5 = pub_port, sub_port, urls, v5
        self.broker_pids = pids  # the broker's processes, whose CPU the bench reads

    @staticmethod
    def mosquitto(broker: Mosquitto) -> Target:
        assert broker.proc is not None
        return Target(broker.port, broker.port, [broker.url], True, [broker.proc.pid])

    @staticmethod
    def nats(cluster: NatsCluster) -> Target:
        pids = [node.process.pid for node in cluster.nodes if node.process is not None]
        return Target(
            cluster.node("b").mqtt_port, cluster.node("a").mqtt_port, cluster.urls_from("a"), False, pids
        )

    def broker_cpu(self) -> float:
        """User + system seconds the broker's processes have used so far."""
        total = 0.0
        for pid in self.broker_pids:
            try:
                times = psutil.Process(pid).cpu_times()
            except psutil.NoSuchProcess:
                continue
            total += times.user + times.system
        return total

    def broker_lines(self) -> list[str]:
        if self.v5:
            return [f'url = "{self.urls[0]}"']
        urls = "urls = [" + ", ".join(f'"{u}"' for u in self.urls) + "]"
        return [urls, 'protocol = "3.1.1"', "session_per_filter = true"]


def write_config(path: Path, target: Target, sites: int, sensors_per_site: int, workers: int = 1) -> None:
    lines = [
        "[broker]",
        *target.broker_lines(),
        'client_id = "bench-daemon"',
        "[storage]",
        f'path = "{path.parent / "bench.db"}"',
        "[daemon]",
        "lateness_s = 3600",
        "queue_size = 20000",
        "status_interval_s = 30",
        "offline_after_periods = 100000",
        f"workers = {workers}",
    ]
    for s in range(sites):
        lines += [
            "[[sites]]",
            f'id = "site{s}"',
            'timezone = "America/Chicago"',
            "latitude = 45.27",
            "longitude = -91.62",
        ]
        for n in range(sensors_per_site):
            lines += ["[[sites.sensors]]", f'id = "n{n}"', 'kind = "sound"']
    path.write_text("\n".join(lines) + "\n")


def sound_messages(
    sites: int, per_site: int, per_sensor: int, start: datetime, varied: bool = False
) -> Iterator[tuple[str, bytes]]:
    """The backlog in time order: every sensor's second, 60-79 dB(A) (backlog_levels)."""
    level_of = backlog_levels(varied)
    for i in range(per_sensor):
        ts = start + timedelta(seconds=i)
        for s in range(sites):
            for n in range(per_site):
                laeq = level_of(n)
                yield encode(SoundLevels(f"site{s}", f"n{n}", ts, 1.0, laeq, laeq + 2, laeq + 15))


def publish_backlog(
    target: Target, sites: int, per_site: int, per_sensor: int, start: datetime, varied: bool = False
) -> int:
    return publish(target, sound_messages(sites, per_site, per_sensor, start, varied))


def publish(target: Target, messages: Iterable[tuple[str, bytes]]) -> int:
    """Publish at QoS 1, each acknowledged by the broker; returns how many (mqtt_publish.py: at
    the broker's pace, not paho's ~6,000 a second)."""
    return publish_qos1(target.pub_port, messages)


def connect_session(target: Target, client_id: str, *, keep: bool) -> mqtt.Client:
    """A client of session ``client_id``, its CONNECT sent (the caller starts its loop): the
    session kept after it goes (``keep``, an hour's expiry), or ended, whatever it held."""
    from paho.mqtt.packettypes import PacketTypes
    from paho.mqtt.properties import Properties

    if target.v5:
        c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, protocol=mqtt.MQTTv5)
        props = Properties(PacketTypes.CONNECT)
        props.SessionExpiryInterval = 3600 if keep else 0
        c.connect("127.0.0.1", target.sub_port, clean_start=not keep, properties=props)
    else:
        version = mqtt.CallbackAPIVersion.VERSION2
        c = mqtt.Client(version, client_id=client_id, protocol=mqtt.MQTTv311, clean_session=not keep)
        c.connect("127.0.0.1", target.sub_port)
    return c


def register_session(target: Target, client_id: str, topic: str = "minewatch/+/sensors/#") -> None:
    """Create a persistent session subscribed to ``topic`` (all inputs), then go away."""
    done = threading.Event()
    c = connect_session(target, client_id, keep=True)
    c.on_subscribe = lambda *a: done.set()
    c.loop_start()
    c.subscribe(topic, qos=1)
    done.wait(10)
    c.disconnect()
    stop_network_loop(c)


def end_session(target: Target, client_id: str) -> None:
    """End a persistent session, so the broker queues nothing more for it."""
    connected = threading.Event()
    c = connect_session(target, client_id, keep=False)
    c.on_connect = lambda *a: connected.set()
    c.loop_start()
    connected.wait(10)
    c.disconnect()
    stop_network_loop(c)


def hold_ballast(target: Target, count: int, start: datetime) -> None:
    """Queue ``count`` messages the size of a sound reading, of a topic the daemon does not read,
    for a session nobody resumes: the broker then holds as much as for a longer backlog while
    a shorter one drains (``--ballast``), so the two runs' CPU per message can be set side by
    side with the machine's memory in the same state (docs/PERFORMANCE.md)."""
    register_session(target, BALLAST_SESSION, BALLAST_TOPIC)
    _, payload = encode(SoundLevels("site0", "n0", start, 1.0, 60.0, 62.0, 75.0))
    publish(target, ((BALLAST_TOPIC, payload) for _ in range(count)))


def dropped_by_broker(port: int) -> int:
    out = subprocess.run(
        [
            "mosquitto_sub",
            "-p",
            str(port),
            "-t",
            "$SYS/broker/publish/messages/dropped",
            "-C",
            "1",
            "-W",
            "15",
        ],
        capture_output=True,
        text=True,
    )
    try:
        return int(out.stdout.strip() or 0)
    except ValueError:
        return -1


class Drain(NamedTuple):
    """One consumer's drain of the backlog: its rate and what it cost the machine."""

    rate: float  # messages a second
    consumer_us: float  # the consumer's CPU per message
    broker_us: float  # the broker's CPU per message, over the same interval
    idle: float  # the machine's share of idle CPU over the drain
    steal: float  # the share the hypervisor gave another guest


def bench_mosquitto_sub(target: Target, args: argparse.Namespace, start: datetime) -> tuple[list[Drain], int]:
    """The floor's drains, once per session: the backlog is published once and queued for each."""
    sessions = [f"bench-sub-{i}" for i in range(1, args.floor_runs + 1)]
    for session in sessions:
        register_session(target, session)
    total = publish_backlog(
        target, args.sites, args.sensors // args.sites, args.per_sensor, start, args.varied_levels
    )
    drains = [drain_mosquitto_sub(target, session, total) for session in sessions]
    # Ended once measured: the daemon's backlog, published next, is then queued for the daemon
    # alone, and the broker holds no more for the daemon's drain than the daemon's own.
    for session in sessions:
        end_session(target, session)
    return drains, total


def drain_mosquitto_sub(target: Target, session: str, total: int) -> Drain:
    """``mosquitto_sub`` receiving ``session``'s queued backlog: rate and CPU."""
    version = ["-V", "mqttv5", "-x", "3600"] if target.v5 else ["-V", "mqttv311"]
    machine, broker_t0 = CpuShares(), target.broker_cpu()
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(
        [
            "mosquitto_sub",
            "-p",
            str(target.sub_port),
            "-i",
            session,
            "-c",
            "-q",
            "1",
            *version,
            "-t",
            "minewatch/+/sensors/#",
            "-C",
            str(total),
            "-W",
            "600",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    elapsed = time.perf_counter() - t0
    broker_s = target.broker_cpu() - broker_t0
    idle, steal = machine.shares()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)  # mosquitto_sub, waited for above
    consumer_s = after.ru_utime + after.ru_stime - children.ru_utime - children.ru_stime
    if proc.returncode != 0:
        print(f"mosquitto_sub exited {proc.returncode}: {proc.stderr.strip()}")
    return Drain(total / elapsed, consumer_s / total * 1e6, broker_s / total * 1e6, idle, steal)


def read_store(db: Path, *queries: tuple[str, tuple[object, ...]]) -> list[int]:
    """One integer per query, on one connection; zeros while the store cannot be read yet."""
    try:
        conn = sqlite3.connect(db, timeout=30)
        try:
            return [int(conn.execute(sql, args).fetchone()[0]) for sql, args in queries]
        finally:
            conn.close()
    except sqlite3.Error:
        return [0] * len(queries)


def progress(db: Path, sites: int, total: int) -> tuple[bool, int]:
    """(any sound row stored, sound rows stored), cheaply while the run is far from done.

    COUNT(*) over the sound table scans it, a load on the machine that grows with the run;
    the sites' chain heads (a few index seeks) bound the row count from above, and the rows
    are counted only once that bound reaches the total.
    """
    head = "SELECT COALESCE(MAX(seq), 0) FROM chain WHERE site = ?"
    started, *heads = read_store(
        db, ("SELECT EXISTS (SELECT 1 FROM sound)", ()), *[(head, (f"site{s}",)) for s in range(sites)]
    )
    if sum(heads) < total:
        return bool(started), min(sum(heads), total - 1)
    return bool(started), read_store(db, ("SELECT COUNT(*) FROM sound", ()))[0]


def tree(proc: psutil.Process) -> list[psutil.Process]:
    """The daemon and its worker processes (daemon.workers > 1)."""
    return [proc, *proc.children(recursive=True)]


def unique_mb(proc: psutil.Process) -> list[float]:
    """Each process's unique memory (USS: pages no other process maps, so neither the libraries
    nor the store's WAL index that RSS counts once per process), the daemon first, in MB. It
    reads /proc/<pid>/smaps: taken at the quarter marks only."""
    found = []
    for p in tree(proc):
        try:
            found.append(p.memory_full_info().uss / 2**20)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def cpu_readings(proc: psutil.Process) -> tuple[dict[int, float], dict[int, float]]:
    """User + system seconds per process of the daemon's tree, its waited-for children included
    (a worker that exits mid-drain then counts in its parent's), and the system seconds alone
    (system calls, the page cache's work for the store's files), from one reading of each."""
    seconds: dict[int, float] = {}
    kernel: dict[int, float] = {}
    for p in tree(proc):
        try:
            times = p.cpu_times()
        except psutil.NoSuchProcess:
            continue
        kernel[p.pid] = times.system + times.children_system
        seconds[p.pid] = times.user + times.children_user + kernel[p.pid]
    return seconds, kernel


ThreadSeconds = dict[tuple[int, int], float]  # (process id, thread id) -> user + system seconds


def thread_seconds(proc: psutil.Process) -> ThreadSeconds:
    """User + system seconds per thread of the daemon's tree, by (process, thread): a process's
    main thread (the thread id is the process's) runs the pipeline; the others read the socket
    (the network thread) and checkpoint the WAL."""
    seconds: ThreadSeconds = {}
    for p in tree(proc):
        try:
            threads = p.threads()
        except psutil.NoSuchProcess:
            continue
        seconds.update({(p.pid, t.id): t.user_time + t.system_time for t in threads})
    return seconds


def thread_split(start: ThreadSeconds, end: ThreadSeconds) -> tuple[float, float]:
    """CPU seconds from ``start`` to ``end`` (thread_seconds) of the main threads and of the others."""
    main = other = 0.0
    for (pid, tid), seconds in end.items():
        spent = seconds - start.get((pid, tid), 0.0)
        if pid == tid:
            main += spent
        else:
            other += spent
    return main, other


def cpu_seconds(proc: psutil.Process) -> dict[int, float]:
    """User + system seconds per process of the daemon's tree (``cpu_readings``)."""
    return cpu_readings(proc)[0]


def cpu_since(start: dict[int, float], now: dict[int, float]) -> float:
    """The daemon's CPU seconds from ``start`` to ``now`` (both from cpu_seconds); a process that
    started in between counts from zero."""
    return sum(end - start.get(pid, 0.0) for pid, end in now.items())


def sessions_ready(db: Path, workers: int, timeout: float = 60.0) -> None:
    """Until every worker has connected once (its link row in the store): its session then exists."""
    keys = ["broker_link"] if workers == 1 else [f"broker_link:{i}/{workers}" for i in range(1, workers + 1)]
    marks = ",".join("?" * len(keys))
    deadline = time.monotonic() + timeout
    sql = f"SELECT COUNT(*) FROM meta WHERE key IN ({marks}) AND value LIKE '%\"connected\":true%'"
    while read_store(db, (sql, tuple(keys)))[0] < len(keys) and time.monotonic() < deadline:
        time.sleep(0.25)
    time.sleep(0.5)  # the SUBACK follows the CONNACK


def bench_daemon(
    target: Target, workdir: Path, args: argparse.Namespace, start: datetime
) -> dict[str, float]:
    config = workdir / "bench.toml"
    write_config(config, target, args.sites, args.sensors // args.sites, args.workers)
    db = workdir / "bench.db"
    cmd = [sys.executable, "-m", "monitor.cli", "run", "--config", str(config), "--log-level", args.log_level]
    log = open(workdir / "daemon.log", "ab")  # noqa: SIM115
    # First run: create the persistent session (and the store), then stop.
    daemon = subprocess.Popen(cmd, stdout=log, stderr=log, cwd=REPO)
    time.sleep(3)
    sessions_ready(db, args.workers)
    if not target.v5:
        # nats-server answers each QoS 1 SUBSCRIBE once it has made the subscription's
        # replicated JetStream consumer (~0.5 s each here): wait for all of them (2 per site)
        # before the session goes away, or the sites subscribed last would get nothing.
        time.sleep(1.0 * 2 * args.sites + 2)
    daemon.terminate()
    daemon.wait(30)
    starts = sorted(startup_cpu(cmd, log, args.workers) for _ in range(args.start_runs))
    startup_s = statistics.median(starts)
    if args.ballast:
        hold_ballast(target, args.ballast, start)
    total = publish_backlog(
        target, args.sites, args.sensors // args.sites, args.per_sensor, start, args.varied_levels
    )
    daemon = subprocess.Popen(cmd, stdout=log, stderr=log, cwd=REPO)
    proc = psutil.Process(daemon.pid)
    rss: list[tuple[int, float]] = []
    unique: list[list[float]] = []  # each process's USS at 25, 50, 75 and 100 % stored
    first_t = None
    cpu_start: dict[int, float] = {}
    threads_start: ThreadSeconds = {}
    kernel_start: dict[int, float] = {}
    cpu_marks: list[tuple[int, dict[int, float]]] = []  # (stored, CPU per process) at each look
    deadline = time.monotonic() + 900 + total / 1000  # ~1,000 msg/s at the very least
    count = 0
    while time.monotonic() < deadline:
        started, count = progress(db, args.sites, total)
        now = time.perf_counter()
        if first_t is None:
            if not started:
                count = 0
                time.sleep(0.02)  # the drain's start (and its CPU reading) to within a few ms
                continue
            first_t, (cpu_start, kernel_start) = now, cpu_readings(proc)
            threads_start = thread_seconds(proc)
            machine, broker_t0 = CpuShares(), target.broker_cpu()
        try:
            rss.append((count, sum(p.memory_info().rss for p in tree(proc)) / 2**20))
            while len(unique) < 4 and count * 4 >= total * (len(unique) + 1):
                unique.append(unique_mb(proc))
        except psutil.NoSuchProcess:
            break
        cpu_marks.append((count, cpu_seconds(proc)))
        if count >= total:
            break
        time.sleep(0.25)
    elapsed = time.perf_counter() - (first_t or time.perf_counter())
    cpu_end, kernel_end = cpu_readings(proc)
    main_s, other_s = thread_split(threads_start, thread_seconds(proc))
    kernel_s = cpu_since(kernel_start, kernel_end)
    broker_s, (idle, steal) = (0.0, (0.0, 0.0))
    if first_t is not None:
        broker_s, (idle, steal) = target.broker_cpu() - broker_t0, machine.shares()
    drain_cpu = cpu_since(cpu_start, cpu_end)
    # After the drain's readings: it waits for the last looks, then reads the idle CPU.
    data_end = start + timedelta(seconds=args.per_sensor)
    judged = judged_cpu(db, proc, args.sites, data_end, cpu_start, cpu_end, count, starts) if count else {}
    print(
        f"daemon CPU {drain_cpu:.1f} s (user + system, {len(cpu_end)} process(es)) over {elapsed:.1f} s"
        f" of draining, {kernel_s:.1f} s of it in the kernel; {sum(cpu_end.values()):.1f} s since its start"
    )
    # "Evaluated": the daemon has judged the minutes the data covers.
    conn = sqlite3.connect(db, timeout=30)
    evaluated = conn.execute("SELECT COUNT(*) FROM progress").fetchone()[0]
    conn.close()
    daemon.terminate()
    daemon.wait(60)
    log.close()
    quarter = [m for c, m in rss if c >= total // 4]
    # RSS when 25, 50, 75 and 100 % of the messages were stored: growth that goes on through
    # the run is a leak; growth that stops is a working set filling.
    last = rss[-1][1] if rss else 0.0
    marks = {f"rss_{25 * q}": next((m for c, m in rss if c >= total * q // 4), last) for q in (1, 2, 3, 4)}
    cpu_marks.append((count, cpu_end))
    return {
        "rate": count / elapsed if elapsed > 0 else 0.0,
        "total": total,
        "stored": count,
        "cpu_us": drain_cpu / count * 1e6 if count else 0.0,
        "kernel_us": kernel_s / count * 1e6 if count else 0.0,
        "main_us": main_s / count * 1e6 if count else 0.0,
        "other_us": other_s / count * 1e6 if count else 0.0,
        "broker_us": broker_s / count * 1e6 if count else 0.0,
        "idle": idle,
        "steal": steal,
        "peak_rss": max(m for _, m in rss) if rss else 0.0,
        "rss_at_quarter": quarter[0] if quarter else 0.0,
        "rss_at_end": rss[-1][1] if rss else 0.0,
        "unique_processes": len(unique[0]) if unique else 0,
        **{f"uss_{25 * (q + 1)}_{i}": mb for q, mark in enumerate(unique) for i, mb in enumerate(mark)},
        **marks,
        "sites_evaluated": evaluated,
        "startup_s": startup_s,
        "startup_low_s": starts[0],
        "startup_high_s": starts[-1],
        "head_s": cpu_since({}, cpu_start) - startup_s,
        **cpu_by_quarter(cpu_marks, cpu_start, total),
        **cpu_split(cpu_marks, cpu_start, args.sensors // args.sites * args.sites * SHORT_PER_SENSOR, total),
        **judged,
    }


def startup_cpu(cmd: list[str], log: IO[bytes], workers: int) -> float:
    """The CPU seconds the daemon's processes take to start with nothing queued: from its start
    until its CPU stops rising (imports, configuration, the store, the broker's session).

    With a backlog queued, the broker delivers from the daemon's first connection, so the drain
    cannot be cut from its start-up; the work of a start with nothing to do is taken out instead.
    """
    daemon = subprocess.Popen(cmd, stdout=log, stderr=log, cwd=REPO)
    proc = psutil.Process(daemon.pid)
    processes = 1 if workers == 1 else workers + 1  # the supervisor and its workers
    readings: list[float] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        time.sleep(0.25)
        readings.append(sum(cpu_seconds(proc).values()))
        settled = len(readings) >= 3 and readings[-1] - readings[-3] < 0.01  # under 20 ms/s for 0.5 s
        if settled and len(tree(proc)) >= processes:
            break
    daemon.terminate()
    daemon.wait(30)
    return readings[-1]


def judged_cpu(
    db: Path,
    proc: psutil.Process,
    sites: int,
    data_end: datetime,
    start: dict[int, float],
    drained: dict[int, float],
    stored: int,
    starts: list[float],
) -> dict[str, float]:
    """The daemon's CPU per message stored until every site's last minute of data has had its
    final look, its idle CPU while it waited for that taken out: from the drain's start, and from
    the daemon's own start with its start-up's CPU (``startup_cpu``, the median of ``starts``,
    sorted) taken out, and with the slowest and the fastest of them: how far the start-up's own
    spread moves the figure.

    The figure to the last stored row stops there; the looks at the last minutes come after it,
    once the site has been quiet for QUIET_S wall seconds (pipeline.py): about the same CPU
    whatever the backlog's length, so a larger share of a short one's. The idle rate is read
    over IDLE_S once all is judged and taken out for the time from the last stored row to the
    last look. The drain starts at the first stored row, by which time the workers may have
    received and prepared their first batches and filled their handoffs (up to 2 x 30,000
    messages): work for messages counted, done before the count begins. Counted from the
    daemon's start, none of a message's work is left out.
    """
    end_us = int(data_end.timestamp() * 1_000_000)  # the end of the last reading
    last_minute_us = (end_us - 1) // 60_000_000 * 60_000_000
    t0 = time.monotonic()
    deadline = t0 + JUDGED_WITHIN_S
    judged = (
        ("SELECT COUNT(*) FROM progress", ()),
        ("SELECT COALESCE(MIN(final_until_us), 0) FROM progress", ()),
    )
    while time.monotonic() < deadline:
        n, final_us = read_store(db, *judged)
        if n >= sites and final_us > last_minute_us:
            break
        time.sleep(0.1)
    else:
        return {}
    waited, at_judged = time.monotonic() - t0, cpu_seconds(proc)
    time.sleep(IDLE_S)
    idle_rate = cpu_since(at_judged, cpu_seconds(proc)) / IDLE_S
    whole = cpu_since({}, at_judged) - idle_rate * waited
    return {
        "judged_us": (cpu_since(start, at_judged) - idle_rate * waited) / stored * 1e6,
        "whole_us": (whole - statistics.median(starts)) / stored * 1e6,
        "whole_low_us": (whole - starts[-1]) / stored * 1e6,
        "whole_high_us": (whole - starts[0]) / stored * 1e6,
        "judged_wait_s": waited,
        "idle_ms_per_s": idle_rate * 1e3,
        "tail_s": cpu_since(drained, at_judged) - idle_rate * waited,
    }


def cpu_split(
    marks: list[tuple[int, dict[int, float]]], start: dict[int, float], first: int, total: int
) -> dict[str, float]:
    """The daemon's CPU per message over the first ``first`` messages stored and over the rest,
    from the look nearest to ``first``: a long run's first SHORT_PER_SENSOR seconds of data
    against a short run of that length, measured in one run, apart from the machine's speed."""
    if first >= total or not marks:
        return {}
    mark = next(((c, s) for c, s in marks if c >= first), None)
    if mark is None or mark[0] >= marks[-1][0]:
        return {}
    head = cpu_since(start, mark[1])
    rest = cpu_since(mark[1], marks[-1][1])
    return {
        "cpu_first": head / mark[0] * 1e6,
        "cpu_rest": rest / (marks[-1][0] - mark[0]) * 1e6,
    }


def cpu_by_quarter(
    marks: list[tuple[int, dict[int, float]]], start: dict[int, float], total: int
) -> dict[str, float]:
    """The daemon's CPU per message over each quarter of the drain, from the looks nearest to
    25, 50 and 75 % stored. Measured within one run, so a cost that grows with the backlog shows
    apart from the machine's speed, which moves between runs."""
    bounds = [(0, 0.0)]
    for q in (1, 2, 3, 4):
        mark = next(((c, s) for c, s in marks if c >= total * q // 4), marks[-1] if marks else None)
        if mark is None or mark[0] <= bounds[-1][0]:
            return {}
        bounds.append((mark[0], cpu_since(start, mark[1])))
    return {
        f"cpu_q{q}": (bounds[q][1] - bounds[q - 1][1]) / (bounds[q][0] - bounds[q - 1][0]) * 1e6
        for q in (1, 2, 3, 4)
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sensors", type=int, default=1000)
    parser.add_argument("--sites", type=int, default=10)
    parser.add_argument(
        "--per-sensor",
        type=per_sensor_sizes,
        default=[200],
        help="messages per sensor (seconds of data); at most 3,400 (the daemon's lateness_s is 3,600);"
        " several, comma-separated (200,2000), run one after another and compared",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="times the sizes of --per-sensor are run, in their order and then the reverse, alternately",
    )
    parser.add_argument(
        "--floor-runs", type=int, default=3, help="times mosquitto_sub drains the backlog (the median counts)"
    )
    parser.add_argument("--workers", type=int, default=1, help="daemon.workers for the daemon's run")
    parser.add_argument(
        "--start-runs",
        type=int,
        default=3,
        help="starts with nothing queued, CPU measured (the from-start figure takes out their median)",
    )
    parser.add_argument(
        "--ballast",
        type=int,
        default=0,
        help="messages of another topic held at the broker for a session nobody reads while the daemon drains"
        " (Mosquitto only): a short run measured with the broker's memory of a longer one",
    )
    parser.add_argument(
        "--even-broker-memory",
        action="store_true",
        help="with several --per-sensor sizes: each shorter run's broker also holds, as --ballast, what"
        " the longest run's backlog holds more, so every size drains with the broker holding as much",
    )
    parser.add_argument(
        "--broker",
        default="mosquitto",
        choices=("mosquitto", "nats-cluster"),
        help="one Mosquitto (default) or a three-node nats-server cluster (MQTT 3.1.1)",
    )
    parser.add_argument(
        "--log-level",
        default="WARNING",
        choices=("WARNING", "INFO"),
        help="the daemon's; INFO adds each worker's 'Stopped:' line (its waits for the store's write lock"
        " and the time it held it)",
    )
    parser.add_argument(
        "--varied-levels",
        action="store_true",
        help="each second's LAeq drawn anew (N(65, 5) dB(A) to 0.1 dB), as real meters' move, instead of"
        " one level per meter (bench/backlog_levels.py)",
    )
    parser.add_argument("--keep", action="store_true", help=KEEP_HELP)
    args = parser.parse_args()
    if args.floor_runs < 1 or args.start_runs < 1 or args.rounds < 1:
        parser.error("--floor-runs, --start-runs and --rounds must be at least 1")
    if not 0 <= args.ballast <= 5_000_000:
        parser.error("--ballast must be 0 to 5000000 messages")
    # Checked before the minutes of publishing, not by the daemon's configuration after them.
    if args.workers < 1 or args.sites < 1 or args.sensors < args.sites:
        parser.error("--workers and --sites must be at least 1, and --sensors at least --sites")
    if args.broker == "nats-cluster" and (args.ballast or args.even_broker_memory):
        parser.error("--ballast and --even-broker-memory: Mosquitto only (--broker mosquitto)")
    if args.even_broker_memory and (args.ballast or len(args.per_sensor) < 2):
        parser.error("--even-broker-memory: with several --per-sensor sizes, and without --ballast")
    if args.broker == "nats-cluster" and args.sites > 32:
        parser.error("--broker nats-cluster: at most 32 sites (2 QoS 1 subscriptions of 1,024 per site)")
    if shutil.which("mosquitto_sub") is None:
        raise SystemExit("mosquitto_sub is not installed (apt-get install mosquitto-clients)")
    runs = [
        (size, r)
        for r in range(args.rounds)
        for size in (args.per_sensor if r % 2 == 0 else reversed(args.per_sensor))
    ]
    results: Runs = []
    with scratch_folder("minewatch-bench-", args.keep) as workdir:
        for size, r in runs:
            one = argparse.Namespace(**{**vars(args), "per_sensor": size})
            if args.even_broker_memory:
                one.ballast = (max(args.per_sensor) - size) * (args.sensors // args.sites * args.sites)
            if len(runs) > 1:
                print(f"--- {size} per sensor (round {r + 1} of {args.rounds})", flush=True)
            with scratch_folder(f"{size}-{r + 1}-", args.keep, under=workdir) as folder:
                results.append((size, bench_in(folder, one)))
    if len(runs) > 1:
        print_comparison(args.per_sensor, results)


def per_sensor_sizes(text: str) -> list[int]:
    """``--per-sensor``: one size or several, comma-separated, each 1 to 3,400 and said once."""
    try:
        sizes = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: whole numbers, comma-separated (200,2000)") from None
    if not all(0 < n <= 3400 for n in sizes) or len(set(sizes)) < len(sizes):
        raise argparse.ArgumentTypeError(f"{text!r}: each size 1 to 3400, none twice")
    return sizes


Runs = list[tuple[int, dict[str, float]]]  # (per sensor, the daemon's figures), in the order run
# Ending at the last stored row leaves out the last minutes' final looks, and starting at the first
# the first batches prepared before it: work that does not grow with the backlog, a larger share of
# a short one's. The comparison gives the drain's figure (to the last look) and both of those.
COMPARED = (
    ("judged_us", "over the drain (to the last final look)"),
    ("cpu_us", "to the last stored row"),
    ("whole_us", "from the daemon's start"),
)


def print_comparison(sizes: list[int], results: Runs) -> None:
    """The CPU per message of each size against the first, measured in this one bench run: the
    medians over the rounds, and round by round (a round runs each size once, back to back)."""
    for size in sizes:
        print(
            f"cpu us/msg at {size} per sensor, run by run: "
            + "; ".join(
                f"{name} " + " / ".join(f"{v:.1f}" for v in _figures(results, size, key))
                for key, name in COMPARED
            )
        )
    base, *others = sizes
    parts = []
    for size, (key, name) in ((size, figure) for size in others for figure in COMPARED):
        mine, theirs = _figures(results, size, key), _figures(results, base, key)
        if mine and theirs:
            rounds = _round_ratios(results, len(sizes), size, base, key)
            ratio = statistics.median(mine) / statistics.median(theirs)
            by_round = " / ".join(f"{x:.2f}" for x in rounds)
            parts.append(f"{size} {ratio:.2f} x {name} (round by round {by_round})")
    print(
        f"ingest compare: cpu per message against {base} per sensor, medians of the rounds: "
        + "; ".join(parts)
    )


def _figures(results: Runs, size: int, key: str) -> list[float]:
    return [r[key] for n, r in results if n == size and key in r]


def _round_ratios(results: Runs, per_round: int, size: int, base: int, key: str) -> list[float]:
    """``size`` against ``base`` within each round (the runs of one round are back to back)."""
    ratios = []
    for i in range(0, len(results), per_round):
        one = dict(results[i : i + per_round])
        if key in one.get(size, {}) and key in one.get(base, {}):
            ratios.append(one[size][key] / one[base][key])
    return ratios


def hour_crossed(start: datetime, per_sensor: int) -> str:
    """Whether the data's seconds cross an hour: the daemon then counts the hour before it into
    the store's hourly histograms within the drain (Store.keep_sound_hours, 0.6-0.8 us a second
    counted), which depends on the time of day the run starts, not on its size."""
    hour = (start + timedelta(seconds=per_sensor - 1)).replace(minute=0, second=0)
    if hour <= start:
        return "the data lies within one hour: none of it is counted into the hourly histograms in the drain"
    share = (hour - start).total_seconds() / per_sensor
    return (
        f"the data crosses {hour:%H:%M} UTC after {share:.0%} of its seconds:"
        " those are counted into the hourly histograms in the drain"
    )


def bench_in(workdir: Path, args: argparse.Namespace) -> dict[str, float]:
    """The benchmark at one size with its files in ``workdir``: the daemon's figures."""
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=args.per_sensor + 120)
    print(
        f"{args.sensors} sensors in {args.sites} sites, {args.per_sensor} messages each,"
        f" {args.workers} worker(s), workdir {workdir}"
    )
    print(hour_crossed(start, args.per_sensor))
    total = args.sensors // args.sites * args.sites * args.per_sensor
    # Every session's queue holds the whole backlog (2,000 per sensor: 2,000,000 would drop one).
    # No persistence: the test broker writes its whole store every second (autosave_interval 1);
    # with a million messages queued a save outlasts the interval, the broker does nothing else
    # and publishing 2,000 per sensor crawls. Nothing here restarts the broker.
    if args.broker == "nats-cluster":
        with run_nats_cluster(workdir / "cluster") as cluster:
            for node in cluster.nodes:
                wait_mqtt_ready(node)
            return run(args, Target.nats(cluster), workdir, start, "nats-cluster")
    queue = f"max_queued_messages {max(2_000_000, 2 * total, args.ballast)}\npersistence false\n"
    broker = Mosquitto(workdir / "broker", extra_conf=queue).start()
    try:
        return run(args, Target.mosquitto(broker), workdir, start, "mosquitto", broker)
    finally:
        broker.stop()


def run(
    args: argparse.Namespace,
    target: Target,
    workdir: Path,
    start: datetime,
    name: str,
    broker: Mosquitto | None = None,
) -> dict[str, float]:
    drains, sub_total = bench_mosquitto_sub(target, args, start)
    sub_rate = statistics.median(d.rate for d in drains)
    print(
        f"mosquitto_sub drained {sub_total} messages {len(drains)} time(s) at "
        + " / ".join(f"{d.rate:,.0f}" for d in drains)
        + f" msg/s; median {sub_rate:,.0f} msg/s (the ratio below is against the median)"
    )
    for d in drains:
        print(
            f"  mosquitto_sub {d.consumer_us:.1f} us/msg + broker {d.broker_us:.1f} us/msg;"
            f" machine idle {d.idle:.0%}, stolen {d.steal:.0%}"
        )
    result = bench_daemon(target, workdir, args, start)
    dropped = dropped_by_broker(broker.port) if broker is not None else -1  # nats: no $SYS over MQTT
    if args.ballast:
        print(
            f"the broker held {args.ballast} ballast message(s) for an unread session during the daemon's run"
        )
        end_session(target, BALLAST_SESSION)
    lost = int(result["total"] - result["stored"])
    print(
        f"daemon stored {int(result['stored'])}/{int(result['total'])} at {result['rate']:,.0f} msg/s; "
        f"sites evaluated {int(result['sites_evaluated'])}; broker dropped {dropped}"
    )
    print(
        f"RSS at 25% of the run {result['rss_at_quarter']:.0f} MB, at the end {result['rss_at_end']:.0f} MB "
        f"(growth {result['rss_at_end'] - result['rss_at_quarter']:+.0f} MB); at 25/50/75/100 %: "
        + " / ".join(f"{result[f'rss_{q}']:.0f}" for q in (25, 50, 75, 100))
        + " MB"
    )
    if processes := int(result.get("unique_processes", 0)):
        # RSS counts a page each process maps (the libraries, the WAL index) once per process
        marks = [
            " / ".join(f"{result[f'uss_{q}_{i}']:.0f}" for q in (25, 50, 75, 100) if f"uss_{q}_{i}" in result)
            for i in range(processes)
        ]
        print(
            f"unique memory (USS) by process, the supervisor first, at 25/50/75/100 %: {'; '.join(marks)} MB"
        )
    cores = psutil.cpu_count() or 1
    both = result["cpu_us"] + result["broker_us"]
    bound = cores / both * 1e6 if both else 0.0
    print(
        f"CPU of the daemon's drain to its last stored row: daemon {result['cpu_us']:.1f}"
        f" ({result['kernel_us']:.1f} in the kernel)"
        f" + broker {result['broker_us']:.1f}"
        f" = {both:.1f} us/msg; {cores} cores allow at most {bound:,.0f} msg/s"
        f" (ratio {bound / sub_rate:.2f} against the median floor); machine idle {result['idle']:.0%},"
        f" stolen {result['steal']:.0%} over the drain"
    )
    print(
        f"daemon CPU of the drain to its last stored row by thread: the processes' main threads"
        f" (the pipeline)"
        f" {result['main_us']:.1f} us/msg, their other threads (the network, the WAL's checkpoints)"
        f" {result['other_us']:.1f} us/msg"
    )
    if "judged_us" in result:
        print(
            f"daemon CPU until the last minute's final look (the drain's end):"
            f" {result['judged_us']:.1f} us/msg ({result['tail_s']:.2f} s after the last stored row,"
            f" over {result['judged_wait_s']:.1f} s of waiting for quiet,"
            f" its idle {result['idle_ms_per_s']:.0f} ms/s taken out)"
        )
        print(
            f"daemon CPU from its start until the last minute's final look: {result['whole_us']:.1f} us/msg"
            f" ({result['whole_low_us']:.1f}-{result['whole_high_us']:.1f} over the starts' spread;"
            f" its start-up's {result['startup_s']:.2f} s taken out, the median of {args.start_runs}"
            f" start(s) with nothing queued, {result['startup_low_s']:.2f}-{result['startup_high_s']:.2f} s;"
            f" {result['head_s']:.2f} s more than that before the first stored row)"
        )
    else:
        print(f"daemon CPU until the last minute's final look: no final look within {JUDGED_WITHIN_S:.0f} s")
    if "cpu_q1" in result:
        print(
            "daemon CPU by quarter of the drain: "
            + " / ".join(f"{result[f'cpu_q{q}']:.1f}" for q in (1, 2, 3, 4))
            + f" us/msg (last / first {result['cpu_q4'] / result['cpu_q1']:.2f})"
        )
    if "cpu_first" in result:
        print(
            f"daemon CPU over the first {SHORT_PER_SENSOR} per sensor stored:"
            f" {result['cpu_first']:.1f} us/msg, over the rest {result['cpu_rest']:.1f} us/msg"
        )
    if args.log_level == "INFO":
        for line in (workdir / "daemon.log").read_text(errors="replace").splitlines():
            if "Stopped:" in line:
                print(line.split(" ", 2)[2])
    print(
        json.dumps(
            {
                "python": sys.version.split()[0],
                "paho": mqtt.__version__ if hasattr(mqtt, "__version__") else "2.x",
            }
        )
    )
    print(
        f"ingest ({name}): {result['rate']:.0f} msg/s daemon, {sub_rate:.0f} msg/s mosquitto_sub, "
        f"ratio {result['rate'] / sub_rate:.2f}, lost {lost}, peak RSS {result['peak_rss']:.0f} MB"
        + (
            f", workers {args.workers}, per core {result['rate'] / sub_rate / args.workers:.2f}"
            if args.workers > 1
            else ""
        )
        + (
            f", cpu {result['judged_us']:.1f} us/msg"
            if "judged_us" in result
            else f", cpu {result['cpu_us']:.1f} us/msg (to the last stored row)"
        )
    )
    return result


if __name__ == "__main__":
    main()
