"""The daemon on every core: worker processes, each owning a partition of the sites.

    minewatch run (daemon.workers = n > 1): the supervisor, no broker link, no pipeline
        ├── minewatch run --partition 1/n  ── sites 1, n+1, 2n+1, …  client id {id}-w1of{n}
        ├── minewatch run --partition 2/n  ── sites 2, n+2, …        client id {id}-w2of{n}
        └── …

Sites are independent (each has its own chain, its own state), so a worker is the daemon of
docs/DEPLOY.md's "partition sites across instances", one per core, on the same store: each
subscribes only to its sites' topics with its own persistent session, so the broker keeps
each site's order and redelivers what a worker had not acknowledged when it died. The
store is one SQLite file (WAL); writers take turns (``Store.batch`` re-reads the chain
heads under the write lock), and `evidence`, `status`, `notices` read it as before.

Outputs shared by the sites run once, in worker 1 (``Partition.leader``): the InfluxDB
forwarder (one reader of the outbox, or points would be sent twice) and the alert
deliveries (or an e-mail would go out once per worker). A restarted worker 1 resumes them
from the store.

The supervisor restarts a worker that dies (sooner or later, by a backoff); SIGTERM or
SIGINT to it stops every worker (each drains what it holds, as a single daemon does) and
waits for them. A worker stops by itself if the supervisor disappears.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, replace

from monitor.config import Config
from monitor.daemon.stopping import stop_on_signals, stopped_while_starting
from monitor.errors import UsageError
from monitor.wire.link_state import META_KEY

log = logging.getLogger("minewatch.workers")

STOP_TIMEOUT_S = 120.0  # for all workers to drain after SIGTERM; then they are killed
FATAL_EXITS = (2, 3)  # a bad configuration, a refused login (commands/run.py): no restart can fix them
QUICK_EXIT_S = 10.0  # a worker dying sooner than this after its start backs off its restarts


@dataclass(frozen=True, slots=True)
class Partition:
    """Worker ``index`` (1-based) of ``count``."""

    index: int
    count: int

    @property
    def name(self) -> str:
        return f"{self.index}/{self.count}"

    @property
    def leader(self) -> bool:
        """The worker that runs the outputs shared by all sites (InfluxDB, deliveries)."""
        return self.index == 1

    @property
    def link_key(self) -> str:
        """The store's meta row with this worker's broker link (read by `minewatch status`)."""
        return link_key(self.index, self.count)

    def sites(self, config: Config) -> tuple[str, ...]:
        """Round-robin over the owned sites in configuration order: a site added at the end
        leaves every other site with its worker (and its persistent session)."""
        owned = config.owned_sites
        return tuple(s.id for i, s in enumerate(owned) if i % self.count == self.index - 1)

    @property
    def suffix(self) -> str:
        return f"-w{self.index}of{self.count}"

    def apply(self, config: Config) -> Config:
        """The configuration as this worker runs it: its sites, its own client id (session).

        The count is in the client id: with another count each site has another worker, whose
        session must not carry the previous subscriptions. With a broker account, the worker
        logs in as ``{username}-w{i}of{n}`` (same password; deploy/mosquitto/make-credentials
        --daemon-workers): the shipped broker takes the user name as the client id, and two
        connections of one account would take each other's session over.
        """
        broker = replace(config.broker, client_id=config.broker.client_id + self.suffix)
        if broker.username:
            broker = replace(broker, username=broker.username + self.suffix)
        return replace(config, broker=broker, daemon=replace(config.daemon, sites=self.sites(config)))


def link_key(index: int, count: int) -> str:
    return f"{META_KEY}:{index}/{count}"


def worker_count(config: Config) -> int:
    """``daemon.workers``, at most one per owned site (a worker without sites would idle)."""
    return max(1, min(config.daemon.workers, len(config.owned_sites)))


def parse_partition(text: str, config: Config) -> Partition:
    """``--partition I/N`` (1 <= I <= N); a user's mistake is a UsageError."""
    index_text, _, count_text = text.partition("/")
    try:
        index, count = int(index_text), int(count_text)
    except ValueError:
        raise UsageError(f"--partition {text!r}: expected I/N, e.g. 1/2") from None
    if not 1 <= index <= count:
        raise UsageError(f"--partition {text!r}: I must be between 1 and N")
    if count > len(config.owned_sites):
        raise UsageError(
            f"--partition {text!r}: {count} workers for {len(config.owned_sites)} site(s);"
            " at most one per site"
        )
    return Partition(index, count)


def watch_parent(stop: threading.Event, interval_s: float = 0.5) -> None:
    """Set ``stop`` when the process that started this one has gone (a killed supervisor)."""
    parent = os.getppid()

    def check() -> None:
        while not stop.wait(interval_s):
            if os.getppid() != parent:
                log.warning("The supervisor (pid %d) has gone; stopping", parent)
                stop.set()

    threading.Thread(target=check, name="minewatch-parent-watch", daemon=True).start()


class Supervisor:
    """Starts ``count`` workers, restarts those that die, stops them all on SIGTERM/SIGINT."""

    def __init__(self, config_path: str, count: int, log_level: str, stop: threading.Event) -> None:
        self.config_path = config_path
        self.count = count
        self.log_level = log_level
        self.stop = stop
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.started: dict[int, float] = {}
        self.failures: dict[int, int] = {}
        self.restart_at: dict[int, float] = {}
        self.fatal: int | None = None

    def command(self, index: int) -> list[str]:
        return [
            sys.executable,
            "-m",
            "monitor.cli",
            "run",
            "--config",
            self.config_path,
            "--log-level",
            self.log_level,
            "--partition",
            f"{index}/{self.count}",
        ]

    def spawn(self, index: int) -> None:
        # Output goes where the supervisor's goes (the journal, a log file): one stream, each
        # line naming its worker.
        proc = subprocess.Popen(self.command(index))
        self.procs[index] = proc
        self.started[index] = time.monotonic()
        log.info("worker %d/%d started (pid %d)", index, self.count, proc.pid)

    def run(self) -> int:
        for index in range(1, self.count + 1):
            self.spawn(index)
        try:
            while not self.stop.wait(0.2):
                self.check()
        finally:
            self.shutdown()
        return self.fatal or 0

    def check(self) -> None:
        """Notice dead workers and restart them when their backoff has passed."""
        now = time.monotonic()
        for index, proc in list(self.procs.items()):
            code = proc.poll()
            if code is None or index in self.restart_at:
                continue
            if code in FATAL_EXITS:
                log.error(
                    "worker %d/%d exited with status %d; stopping every worker",
                    index,
                    self.count,
                    code,
                )
                self.fatal = code
                self.stop.set()
                return
            quick = now - self.started[index] < QUICK_EXIT_S
            self.failures[index] = self.failures.get(index, 0) + 1 if quick else 1
            delay = min(30.0, 0.5 * 2 ** (self.failures[index] - 1))
            how = f"signal {-code}" if code < 0 else f"status {code}"
            log.warning(
                "worker %d/%d (pid %d) exited (%s); restarting it in %.1f s: its session resumes"
                " and the broker redelivers what it had not acknowledged",
                index,
                self.count,
                proc.pid,
                how,
                delay,
            )
            self.restart_at[index] = now + delay
        for index, when in list(self.restart_at.items()):
            if now >= when:
                del self.restart_at[index]
                self.spawn(index)

    def shutdown(self) -> None:
        """SIGTERM every live worker (each drains what it holds); kill any still running at the timeout."""
        live = [(i, p) for i, p in self.procs.items() if p.poll() is None]
        for _, proc in live:
            proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for index, proc in live:
            try:
                code = proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.error("worker %d/%d did not stop in %g s; killing it", index, self.count, STOP_TIMEOUT_S)
                proc.kill()
                code = proc.wait()
            if code != 0 and self.fatal is None:
                log.warning("worker %d/%d stopped with status %d", index, self.count, code)
        log.info("all %d workers stopped", self.count)


def supervise(config: Config, config_path: str, log_level: str, stop: threading.Event) -> int:
    """`minewatch run` with daemon.workers > 1: the supervisor's whole life, until ``stop`` (set
    by SIGTERM/SIGINT from the command's start); one asked for before the workers start ends it
    there (stopped_while_starting)."""
    from monitor.journal.store import Store

    count = worker_count(config)
    # Bring the store to the current layout once, before the workers open it together.
    Store(config.storage.path).close()
    stop_on_signals(stop, log, "stopping the workers")
    if stop.is_set():
        return stopped_while_starting(log)
    for index in range(1, count + 1):
        sites = Partition(index, count).sites(config)
        log.info("worker %d/%d owns %s", index, count, ", ".join(sites))
    return Supervisor(config_path, count, log_level, stop).run()
