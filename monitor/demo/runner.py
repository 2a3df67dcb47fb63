"""`minewatch demo`: a simulated site, a real broker, the daemon, notices and evidence, in one go.

    Mosquitto (own port, own folder) ──► minewatch run (data clock) ◄── minewatch simulate
                                              │
                                              ▼
            compliance summary, notices (HTML, PDF, plot), evidence bundle + verification

Everything lands in one output folder. The daemon and the simulator run as the same
commands an operator would run, in subprocesses; this module only orchestrates and reports.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from importlib import resources
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, TextIO
from zoneinfo import ZoneInfo

from monitor.errors import UsageError
from monitor.journal import queries
from monitor.unfinished import interrupts_held
from monitor.wire.protocol import format_ts
from rules.citation import citation_text
from rules.times import local_stamp

if TYPE_CHECKING:
    from monitor.config import Config, SiteConfig
    from rules.profile import Profile
    from sensors.scenario import Scenario

DEMO_CONFIG = "demo/dovre-demo.toml"  # package data of `sensors`
SITE = "dovre-quarry"
DEMO_ZONE = "America/Chicago"  # the demo site's zone (sensors/demo/dovre-demo.toml), for the progress lines

# The output folder is the demo's own: this file marks it, and only what the demo writes
# (these names) is ever deleted, with --force. Anything else in the folder stops the demo.
# In its folders (OWN_FOLDERS) the demo writes files whose names come from the run (notice ids,
# blast ids): it records each in the marker as it writes it, and only those recorded are its own.
MARKER = ".minewatch-demo"
MARKER_TEXT = (
    "This folder was made by `minewatch demo`; `minewatch demo --force` may replace what it wrote.\n"
    "# The files it wrote in its folders, one a line (only these are deleted with --force):\n"
)
OWN_FOLDERS = ("notices", "blast-reports")
OUTPUTS = frozenset(
    {
        MARKER,
        "minewatch.toml",
        "minewatch.db",
        "minewatch.db-wal",
        "minewatch.db-shm",
        "minewatch.db-journal",
        "minewatch.db-turns",  # the writers' turn (monitor/journal/store.py)
        "minewatch.db-sites",  # the daemon's claim on its sites (monitor/claims.py)
        "mosquitto.log",
        "daemon.log",
        "portal.log",
        "simulator.log",
        "notices",
        "blast-reports",
        "evidence-dovre-quarry.zip",
        "evidence-dovre-quarry.zip.partial",
        "town-anchors.json",
        "summary.json",
    }
)
# The web portal's demo accounts (name, role, password), printed when it starts; local only.
DEMO_ACCOUNTS = (
    ("operator", "operator", "demo-operator"),
    ("town", "town", "demo-town"),
    ("inspector", "inspector", "demo-inspector"),
)

# The demo's daemon accepts readings up to 400 days old (sensors/demo/dovre-demo.toml, max_age_s).
OLDEST_DAY = timedelta(days=390)


@dataclass(frozen=True, slots=True)
class Expectation:
    """A finding the demo scenario must produce (or must not)."""

    label: str
    standards: frozenset[str]
    kind: str
    # Texts one of which the finding's stored JSON must hold, compared without regard to case
    # (the JSON is ASCII): none, any finding of the standards and kind counts.
    mentions: tuple[str, ...] = ()
    want_some: bool = True
    # The standards whose sections the console names after the label (default: all of them).
    cites: tuple[str, ...] | None = None

    def cited(self, profile: Profile) -> str:
        """The label with the sections of its standards as the profile numbers them:
        'flashing light (6.C.3)'; the label alone for a check that a finding is absent."""
        if not self.want_some:
            return self.label
        keys = sorted(self.standards) if self.cites is None else self.cites
        sections = dict.fromkeys(profile.standards[k].section for k in keys if k in profile.standards)
        return f"{self.label} ({', '.join(sections)})" if sections else self.label

    def matches(self, finding: sqlite3.Row) -> bool:
        """Whether a current finding (a findings row) is one this expectation counts."""
        if finding["standard"] not in self.standards or finding["kind"] != self.kind:
            return False
        data = str(finding["data"]).lower()
        return not self.mentions or any(text in data for text in self.mentions)


_NOISE = frozenset({"noise", "conveyor_noise"})

# The scenario's story (sensors/scenarios/*.toml headers), as checks on the current findings.
EXPECTED = (
    Expectation("late blast without a safety reason", frozenset({"blast_window"}), "violation"),
    Expectation("unreported blast", frozenset({"unreported_blast"}), "unreported_blast"),
    Expectation("flashing light", frozenset({"flashing_light"}), "violation"),
    Expectation("noise violation episode", frozenset({"noise"}), "violation"),
    Expectation(
        "truck peaks exempt, not violations", _NOISE, "exempt_exceedance", ("truck",), cites=("noise",)
    ),
    Expectation(
        "blast peaks exempt, not violations", _NOISE, "exempt_exceedance", ("blasting",), cites=("noise",)
    ),
    Expectation(
        "no noise violation explained by a truck or a blast",
        _NOISE,
        "violation",
        ('"exemptions":["truck', '"exemptions":["blasting'),
        want_some=False,
    ),
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _say(out: TextIO, text: str) -> None:
    print(text, file=out, flush=True)


class Demo:
    def __init__(
        self,
        out_dir: Path,
        scenario: str,
        speed: str,
        seed: int | None,
        stream: TextIO,
        day: date,
        serve: bool = False,
    ) -> None:
        self.serve = serve  # keep the portal running after the demo, until Ctrl-C
        self.portal_port = _free_port()
        self.portal_proc: subprocess.Popen[bytes] | None = None
        self.out_dir = out_dir
        self.scenario = scenario
        self.speed = speed
        self.seed = seed
        self.stream = stream
        self.day = day
        # summary.json: what the console shows at the end, as data.
        self.summary: dict[str, Any] = {
            "scenario": scenario,
            "date": day.isoformat(),
            "speed": speed,
            "seed": seed,
            "site": SITE,
            "ok": False,
        }
        self.procs: list[subprocess.Popen[bytes]] = []
        self.broker_dir: Path | None = None
        self.store = out_dir / "minewatch.db"
        self.config = out_dir / "minewatch.toml"

    # ------------------------------------------------------------------ processes

    def _spawn(self, args: list[str], log: Path) -> subprocess.Popen[bytes]:
        handle = open(log, "ab")  # noqa: SIM115 - the child owns it; closed when we exit
        # Ctrl-C (or SIGTERM) raised inside Popen, after the fork, left the child running with
        # nobody to stop it: held until the child is in self.procs (stop_all ends it), then acted on.
        with interrupts_held():
            proc = subprocess.Popen(
                args, stdout=handle, stderr=subprocess.STDOUT, env=dict(os.environ, PYTHONUNBUFFERED="1")
            )
            self.procs.append(proc)
        return proc

    def start_broker(self) -> int:
        mosquitto = shutil.which("mosquitto") or (
            "/usr/sbin/mosquitto" if Path("/usr/sbin/mosquitto").exists() else None
        )
        if mosquitto is None:
            raise SystemExit(
                "mosquitto is not installed: `apt-get install mosquitto` (deploy/demo.sh does it)"
            )
        port = _free_port()
        folder = Path(tempfile.mkdtemp(prefix="minewatch-demo-broker-"))
        self.broker_dir = folder  # made here, removed in stop_all
        template = resources.files("sensors").joinpath("demo/mosquitto-demo.conf").read_text()
        user = f"user {os.environ.get('USER') or 'root'}\n" if os.geteuid() == 0 else ""
        conf = folder / "mosquitto.conf"
        conf.write_text(template.replace("listener 1883 127.0.0.1", f"listener {port} 127.0.0.1") + user)
        self._spawn([mosquitto, "-c", str(conf)], self.out_dir / "mosquitto.log")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    return port
            except OSError:
                time.sleep(0.05)
        raise SystemExit(f"mosquitto did not start; see {self.out_dir / 'mosquitto.log'}")

    def write_config(self, port: int) -> None:
        text = resources.files("sensors").joinpath(DEMO_CONFIG).read_text()
        text = text.replace('url = "mqtt://localhost:1883"', f'url = "mqtt://127.0.0.1:{port}"')
        text = text.replace('path = "minewatch-demo.db"', f'path = "{self.store}"')
        self.config.write_text(text + self._portal_section())

    def _portal_section(self) -> str:
        from monitor.credentials import hash_password

        lines = [
            "\n[portal]",
            f"port = {self.portal_port}",
            f'mqtt_client_id = "minewatch-demo-portal-{self.portal_port}"',
        ]
        for name, role, password in DEMO_ACCOUNTS:
            lines += [
                "[[portal.accounts]]",
                f'name = "{name}"',
                f'role = "{role}"',
                f'password_hash = "{hash_password(password)}"',
            ]
        return "\n".join(lines) + "\n"

    def start_portal(self) -> None:
        self.portal_proc = self._spawn(
            self.minewatch("serve", "--config", str(self.config)), self.out_dir / "portal.log"
        )
        url = f"http://127.0.0.1:{self.portal_port}/"
        if not self._wait_log(self.out_dir / "portal.log", "minewatch portal on", 30):
            _say(self.stream, f"portal      did not start; see {self.out_dir / 'portal.log'}")
            return
        accounts = ", ".join(f"{name} / {password}" for name, _, password in DEMO_ACCOUNTS)
        _say(self.stream, f"portal      {url}  accounts (name / password): {accounts}")

    def minewatch(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "monitor.cli", *args]

    # ------------------------------------------------------------------ run

    def run(self) -> int:
        started = time.monotonic()
        port = self.start_broker()
        self.write_config(port)
        _say(self.stream, f"broker      Mosquitto on 127.0.0.1:{port}")
        daemon = self._spawn(self.minewatch("run", "--config", str(self.config)), self.out_dir / "daemon.log")
        if not self._wait_log(self.out_dir / "daemon.log", "Connected to", 30):
            raise SystemExit(f"the daemon did not connect; see {self.out_dir / 'daemon.log'}")
        _say(self.stream, f"daemon      minewatch run (store {self.store})")
        self.start_portal()
        sim_args = [
            "simulate",
            "--config",
            str(self.config),
            "--scenario",
            self.scenario,
            "--speed",
            self.speed,
            "--date",
            self.day.isoformat(),
        ]
        if self.seed is not None:
            sim_args += ["--seed", str(self.seed)]
        simulator = self._spawn(self.minewatch(*sim_args), self.out_dir / "simulator.log")
        _say(
            self.stream,
            f"simulator   minewatch simulate --scenario {self.scenario} --date {self.day}"
            f" --speed {self.speed}",
        )
        while simulator.poll() is None:
            time.sleep(2)
            self._progress("publishing")
        if simulator.returncode != 0:
            raise SystemExit(f"the simulator failed; see {self.out_dir / 'simulator.log'}")
        self._wait_for_daemon()
        # Stopped so that the summary and the evidence are of everything it judged, the same
        # with or without --serve (it closes what it holds on SIGTERM).
        daemon.send_signal(signal.SIGTERM)
        code = daemon.wait(60)
        _say(self.stream, f"daemon      stopped (exit {code}) after {time.monotonic() - started:.0f} s")
        ok = self.report()
        self.artifacts()
        self.summary["ok"] = ok and code == 0
        self.summary["daemon_exit"] = code
        _say(self.stream, f"\nEverything is in {self.out_dir}/ ({time.monotonic() - started:.0f} s in all).")
        if self.serve:
            self.keep_serving()
        return 0 if ok and code == 0 else 1

    def keep_serving(self) -> None:
        """The portal with a daemon and the broker behind it, until Ctrl-C or SIGTERM (then
        stop_all ends them): events recorded in the portal are published to the broker, and a
        daemon must be there to journal and judge them."""
        try:
            daemon = self._restart_daemon()
            if daemon is None:
                return
            _say(
                self.stream,
                f"portal      still at http://127.0.0.1:{self.portal_port}/, with the broker and the"
                " daemon: events recorded in it are journaled (Ctrl-C stops them all)",
            )
            while self.portal_proc is not None and self.portal_proc.poll() is None and daemon.poll() is None:
                time.sleep(1)
        except KeyboardInterrupt:
            return
        ended = "the daemon" if daemon.poll() is not None else "the portal"
        _say(self.stream, f"{ended} stopped on its own; see its log in {self.out_dir}/")

    def _restart_daemon(self) -> subprocess.Popen[bytes] | None:
        log = self.out_dir / "daemon.log"
        # The log holds the first daemon's lines too: wait for one more connection line.
        before = log.read_text(errors="replace").count("Connected to")
        daemon = self._spawn(self.minewatch("run", "--config", str(self.config)), log)
        deadline = time.monotonic() + 30
        while log.read_text(errors="replace").count("Connected to") <= before:
            if daemon.poll() is not None or time.monotonic() > deadline:
                _say(self.stream, f"daemon      did not start again; see {log}")
                return None
            time.sleep(0.1)
        time.sleep(0.5)  # the subscription follows the log line
        _say(self.stream, f"daemon      running again for the portal (pid {daemon.pid})")
        return daemon

    def _wait_log(self, path: Path, text: str, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if path.exists() and text in path.read_text(errors="replace"):
                time.sleep(0.5)  # the subscription follows the log line
                return True
            time.sleep(0.1)
        return False

    def _counts(self) -> tuple[int, str]:
        try:
            conn = sqlite3.connect(self.store, timeout=10)
            try:
                stored = queries.stored_records(conn)
                progress = queries.progress(conn, SITE)
            finally:
                conn.close()
        except sqlite3.Error:  # before the daemon has made the store's tables
            return 0, "-"
        judged = local_stamp(progress[0], DEMO_ZONE) if progress else "-"
        return stored, judged

    def _progress(self, phase: str) -> None:
        stored, judged = self._counts()
        _say(self.stream, f"  {phase:<11} daemon stored {stored:>7} records, judged up to {judged}")

    def _wait_for_daemon(self, timeout_s: float = 900.0) -> None:
        """Until the daemon has taken in everything the simulator sent.

        A count that stops moving is not enough: on a busy machine the daemon can pause longer
        than any quiet spell while the broker still holds thousands of messages for it. The
        simulator sends in time order on one connection and the daemon stores in that order,
        so once the scenario's last second is stored everything before it is too; then the
        count must stop moving (what was sent with that second: its batch's last rows). A
        scenario whose sound stops before its end is waited for by a long quiet spell."""
        last_second = self._last_second()
        deadline = time.monotonic() + timeout_s
        last, still, needed = -1, 0, 3
        while still < needed:
            time.sleep(2)
            stored, _ = self._counts()
            needed = 3 if self._latest_stored() >= last_second else 15
            still = still + 1 if stored == last else 0
            last = stored
            self._progress("catching up")
            if time.monotonic() > deadline:
                _say(self.stream, f"daemon      not caught up after {timeout_s:.0f} s; judging what it has")
                return

    def _last_second(self) -> datetime:
        """The last second of sound the simulator sends for this run's scenario and day."""
        run = _scenario_on(self.scenario, self.day, ZoneInfo(DEMO_ZONE))
        return run.end.astimezone(UTC) - timedelta(seconds=1)

    def _latest_stored(self) -> datetime:
        try:
            conn = sqlite3.connect(self.store, timeout=10)
            try:
                span = queries.sound_span(conn, SITE)
            finally:
                conn.close()
        except sqlite3.Error:  # before the daemon has made the store's tables
            span = None
        return span[1] if span else datetime.min.replace(tzinfo=UTC)

    # ------------------------------------------------------------------ results

    def report(self) -> bool:
        from monitor.config import load_config
        from monitor.journal.episodes import site_episodes
        from monitor.notify.notices import facts_json, list_notices
        from rules.episodes import episode_text
        from rules.profile import load_profile

        site = load_config(self.config).site(SITE)
        assert site is not None, "the demo's configuration names its one site"
        profile = load_profile(site.profile, site.agreement)
        zone = site.timezone
        conn = sqlite3.connect(self.store)
        conn.row_factory = sqlite3.Row
        try:
            findings = queries.current_findings(conn)
            day_start = datetime.combine(self.day, datetime.min.time(), ZoneInfo(zone)).astimezone(UTC)
            episodes = site_episodes(
                conn, SITE, day_start, day_start + timedelta(days=1), profile.episode_gap_s
            )
            per_standard = Counter((e.facts.standard, e.facts.section) for e in episodes)
            table = Counter((f["standard"], f["section"], f["kind"]) for f in findings)
            _say(self.stream, f"\nCompliance summary, site {SITE}, {self.day} ({profile.title})")
            # Violations are counted as episodes (what a person reads), the judged windows beside.
            _say(self.stream, f"  {'standard':<22}{'section':<9}{'finding':<20}{'episodes':>9}{'windows':>9}")
            self.summary["findings"] = []
            for (standard, section, kind), n in sorted(table.items()):
                told = per_standard[(standard, section)] if kind == "violation" else None
                shown = "-" if told is None else str(told)
                _say(self.stream, f"  {standard:<22}{section:<9}{kind:<20}{shown:>9}{n:>9}")
                self.summary["findings"].append(
                    {
                        "standard": standard,
                        "section": section,
                        "finding": kind,
                        "episodes": told,
                        "windows": n,
                    }
                )
            _say(self.stream, "\nViolation episodes (site time)")
            self.summary["episodes"] = []
            for told_episode in episodes:
                title = profile.standards[told_episode.facts.standard].title
                _say(
                    self.stream, "  " + episode_text(told_episode.facts, zone, told_episode.notice_id, title)
                )
                self.summary["episodes"].append(
                    {**facts_json(told_episode.facts, zone, site), "notice": told_episode.notice_id}
                )
            _say(self.stream, "\nExpected findings")
            ok = True
            self.summary["expected"] = []
            for expectation in EXPECTED:
                n = sum(1 for f in findings if expectation.matches(f))
                passed = (n > 0) == expectation.want_some
                ok &= passed
                windows = f"{n} window{'' if n == 1 else 's'}"
                _say(
                    self.stream,
                    f"  [{'ok' if passed else 'MISSING'}] {expectation.cited(profile)} ({windows})",
                )
                self.summary["expected"].append({"label": expectation.label, "windows": n, "ok": passed})
            notices = list_notices(conn, SITE, None) if _has_table(conn, "notices") else []
            _say(self.stream, f"\nNotices of violation issued: {len(notices)}")
            self.summary["notices"] = []
            for notice in notices:
                deadline = local_stamp(notice.deadline, zone)
                title = notice.data.get("title") or notice.standard
                _say(
                    self.stream,
                    f"  {notice.id}  {title} ({citation_text(notice.section)})  {notice.status},"
                    f" cure by {deadline}",
                )
                self.summary["notices"].append(
                    {
                        "id": notice.id,
                        "standard": notice.standard,
                        "section": notice.section,
                        "status": notice.status,
                        "cure_by": deadline,
                        "cure_by_utc": format_ts(notice.deadline),
                        "episodes": [e.episode_id for e in notice.episodes],
                    }
                )
            alerts = queries.alert_counts(conn)
            _say(self.stream, "Alerts: " + ", ".join(f"{a or '-'} {n}" for a, n in alerts.items()))
            self.summary["alerts"] = {a or "-": n for a, n in alerts.items()}
            return ok
        finally:
            conn.close()

    def artifacts(self) -> None:
        from monitor.config import load_config
        from monitor.evidence import export_bundle, load_anchors, verify_bundle
        from monitor.notify.formats import render_notice

        config = load_config(self.config)
        conn = sqlite3.connect(self.store)
        try:
            notice_ids = (
                [r[0] for r in conn.execute("SELECT id FROM notices ORDER BY id")]
                if _has_table(conn, "notices")
                else []
            )
            notices_dir = self.out_dir / "notices"
            notices_dir.mkdir(exist_ok=True)
            for notice_id in notice_ids:
                for fmt in ("html", "pdf", "md"):
                    body = render_notice(conn, notice_id, fmt, config=config)
                    record_output(self.out_dir, notices_dir / f"{notice_id}.{fmt}").write_bytes(body)
            plots = self._notice_plots(conn, notice_ids, notices_dir, config)
            span = queries.sound_span(conn, SITE)
        finally:
            conn.close()
        _say(
            self.stream, f"\nNotices written to {notices_dir}/ (HTML, PDF, Markdown; {plots} plot(s) as PNG)"
        )
        self._blast_reports(config)
        self._forecasts(config)
        if span is None:
            return
        start = span[0].replace(second=0, microsecond=0)
        end = span[1] + timedelta(minutes=1)
        bundle = self.out_dir / "evidence-dovre-quarry.zip"
        export_bundle(config, SITE, start, end, bundle)
        # The heads the town received on <prefix>/<site>/anchors, as the town would keep them:
        # verify holds the bundle against those, and says how much of it they prove.
        anchors_file = self.out_dir / "town-anchors.json"
        anchors_file.write_text(json.dumps(self._town_anchors(), indent=1) + "\n")
        report = verify_bundle(bundle, load_anchors(anchors_file))
        _say(self.stream, f"Evidence bundle {bundle} ({bundle.stat().st_size // 1024} KiB)")
        rows = sum(report.rows_checked.values())
        verdict = report.verdict().removeprefix(f"{bundle}: ")
        _say(
            self.stream,
            f"  minewatch verify {bundle.name} --anchors {anchors_file.name}: {verdict}\n"
            f"  ({report.files_checked} files, {rows} rows, {report.chain_links} chain links,"
            f" {report.bundle_anchors} anchors)",
        )
        self.summary["evidence"] = {
            "bundle": bundle.name,
            "verify": verdict,
            "files": report.files_checked,
            "rows": rows,
            "chain_links": report.chain_links,
            "anchors": report.bundle_anchors,
        }

    def _blast_reports(self, config: Any) -> None:
        """One report per seismograph event (monitor/notify/blast_report.py), listed in the summary."""
        from monitor.journal.store import Store
        from monitor.notify.blast_report import (
            blast_report_data,
            curve_verdict,
            report_events,
            write_blast_report,
        )
        from rules.profile import load_profile

        site = config.site(SITE)
        profile = load_profile(site.profile, site.agreement)
        folder = self.out_dir / "blast-reports"
        store = Store(self.store)
        try:
            self.summary["blast_reports"] = []
            for sensor, event_id in report_events(store, SITE):
                paths = write_blast_report(store, site, profile, sensor, event_id, folder)
                for path in paths:
                    record_output(self.out_dir, path)
                data = blast_report_data(store, site, profile, sensor, event_id)
                judged = [
                    f"{f.standard} {f.kind.value}"
                    for f in data["findings"]
                    if f.standard in profile.standards
                    and profile.standards[f.standard].rule in ("ground_vibration", "airblast")
                ]
                if not judged and site.preexisting:
                    spared = (
                        f" ({citation_text(profile.preexisting_section)})"
                        if profile.preexisting_section
                        else ""
                    )
                    judged = [
                        "no finding: the profile does not hold a pre-existing site to these"
                        f" standards{spared}"
                    ]
                verdict = curve_verdict(data)
                _say(
                    self.stream, f"Blast report {folder.name}/{paths[0].name}: {verdict}; {', '.join(judged)}"
                )
                self.summary["blast_reports"].append(
                    {
                        "blast": data["blast_id"],
                        "event": event_id,
                        "files": [p.name for p in paths],
                        "curve": verdict,
                        "findings": judged,
                    }
                )
        finally:
            store.close()

    def _forecasts(self, config: Any) -> None:
        """The operator's scaled-distance forecast of each blast still to come, as of the end of the
        demo's day (a notice carrying its charge per delay and distance; rules/scaled_distance.py)."""
        from monitor.journal.site_law import forecasts, vibration_params
        from monitor.journal.store import Store
        from rules.profile import load_profile

        site = config.site(SITE)
        profile = load_profile(site.profile, site.agreement)
        params = vibration_params(profile)
        zone = ZoneInfo(site.timezone)
        as_of = datetime.combine(self.day + timedelta(days=1), datetime.min.time(), zone).astimezone(UTC)
        store = Store(self.store)
        try:
            ahead = forecasts(store, site, profile, as_of)
        finally:
            store.close()
        units = params.units if params is not None else "mm/s"
        texts = [f.text(units) for f in ahead]
        _say(self.stream, f"\nBlast forecasts (the operator's, before the blast), as of {self.day} 24:00")
        for text in texts or ["none: no pending blast notice carries its charge per delay and distance"]:
            _say(self.stream, f"  {text}")
        self.summary["forecasts"] = texts

    def _town_anchors(self) -> list[dict[str, object]]:
        """Every anchor the daemon published for the demo site: {site, seq, head, ts}."""
        conn = sqlite3.connect(self.store)
        try:
            published = queries.anchors(conn, SITE)
        finally:
            conn.close()
        return [
            {"site": a.site, "seq": a.seq, "head": a.head, "ts": a.published.isoformat()} for a in published
        ]

    def _notice_plots(
        self, conn: sqlite3.Connection, notice_ids: list[str], folder: Path, config: Config
    ) -> int:
        from monitor.notify.document import load_notice
        from monitor.notify.plots import evidence_plot
        from rules.profile import load_profile

        written = 0
        for notice_id in notice_ids:
            notice, _ = load_notice(conn, notice_id)
            site = config.site(notice.site)
            profile = load_profile(site.profile, site.agreement) if site else None
            # With the site, only the exemptions that apply to the plotted sensor are shaded.
            png = evidence_plot(conn, notice, site=site, profile=profile)
            if png:
                record_output(self.out_dir, folder / f"{notice_id}-levels.png").write_bytes(png)
                written += 1
        return written

    def stop_all(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(15)
        if self.broker_dir is not None:
            shutil.rmtree(self.broker_dir, ignore_errors=True)
            self.broker_dir = None


def _has_table(conn: sqlite3.Connection, name: str) -> bool:
    return (
        conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)).fetchone()
        is not None
    )


def record_output(out_dir: Path, path: Path) -> Path:
    """``path`` (a file in one of OWN_FOLDERS of ``out_dir``) recorded in the marker as the
    demo's own, so that --force may delete it later; recorded before it is written."""
    name = path.relative_to(out_dir).as_posix()
    assert name.split("/")[0] in OWN_FOLDERS and name.count("/") == 1, name
    with open(out_dir / MARKER, "a", encoding="utf-8") as marker:
        marker.write(name + "\n")
    return path


def _recorded(marker: Path) -> set[str]:
    """The files in OWN_FOLDERS the marker records as the demo's (see record_output)."""
    try:
        lines = marker.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return set()
    return {line for line in lines if line.split("/")[0] in OWN_FOLDERS and line.count("/") == 1}


def _own_outputs(target: Path) -> tuple[list[Path], list[Path], list[str], list[str]]:
    """What of an earlier demo's folder --force deletes: (its files, its folders), and what stops
    it: (symbolic links, anything else the demo did not write), as paths relative to the folder.

    The whole folder is looked at before anything is deleted. Only a regular file the demo
    writes (OUTPUTS) or recorded (record_output) and a real folder of OWN_FOLDERS are the
    demo's; a link is never followed, whatever its name."""
    recorded = _recorded(target / MARKER)
    files: list[Path] = []
    folders: list[Path] = []
    links: list[str] = []
    foreign: list[str] = []
    for entry in sorted(target.iterdir()):
        if entry.is_symlink():
            links.append(entry.name)
        elif entry.name in OWN_FOLDERS and entry.is_dir():
            folders.append(entry)
            for inner in sorted(entry.iterdir()):
                name = f"{entry.name}/{inner.name}"
                if inner.is_symlink():
                    links.append(name)
                elif name in recorded and inner.is_file():
                    files.append(inner)
                else:
                    foreign.append(name)
        elif entry.name in OUTPUTS and entry.name not in OWN_FOLDERS and entry.is_file():
            if entry.name != MARKER:
                files.append(entry)
        else:
            foreign.append(entry.name)
    return files, folders, links, foreign


def prepare_out_dir(out: Path, force: bool) -> Path:
    """The output folder, made or checked as the demo's own (see MARKER); UsageError if not.

    With ``force``, an earlier demo's output is deleted, all of it or (on any doubt) nothing."""
    target = out.resolve()
    here = Path.cwd().resolve()
    if target == here or target in here.parents or target == Path.home().resolve():
        raise UsageError(
            f"--out {out}: that is the working directory, your home or a folder holding them;"
            " name a folder of its own, e.g. --out demo-output"
        )
    if target.exists() and not target.is_dir():
        raise UsageError(f"--out {out}: is a file; name a folder for the demo's output")
    marker = target / MARKER
    if not target.exists():
        try:
            target.mkdir(parents=True)
        except OSError as exc:
            raise UsageError(f"--out {out}: cannot create the folder: {exc.strerror}") from None
    else:
        entries = sorted(target.iterdir())
        if entries and (marker.is_symlink() or not marker.is_file()):
            raise UsageError(
                f"--out {out}: the folder is not empty and was not made by minewatch demo;"
                " choose a new or empty folder"
            )
        if entries and not force:
            raise UsageError(
                f"--out {out}: holds an earlier demo's output; add --force to replace it,"
                " or choose another folder"
            )
        files, folders, links, foreign = _own_outputs(target)
        if links:
            raise UsageError(
                f"--out {out}: {links[0]} is a symbolic link, which minewatch demo neither follows"
                " nor deletes; remove it yourself or choose another folder"
            )
        if foreign:
            raise UsageError(
                f"--out {out}: holds files minewatch demo did not write ({', '.join(foreign[:5])});"
                " move them or choose another folder"
            )
        unwritable = [p for p in (target, *folders) if not os.access(p, os.W_OK | os.X_OK)]
        if unwritable:
            raise UsageError(
                f"--out {out}: cannot delete the earlier demo's output in {unwritable[0]} (permission"
                " denied); choose another folder"
            )
        try:
            for path in files:
                path.unlink()
            for folder in folders:
                folder.rmdir()  # empty now, unless something came in meanwhile: then it stays
            if entries:
                marker.unlink()  # written anew: not through a link to another file
        except OSError as exc:
            raise UsageError(
                f"--out {out}: cannot delete the earlier demo's output ({exc.filename}: {exc.strerror});"
                " choose another folder"
            ) from None
    try:
        with open(marker, "x", encoding="utf-8") as handle:
            handle.write(MARKER_TEXT)
    except OSError as exc:
        raise UsageError(f"--out {out}: cannot write in the folder: {exc.strerror}") from None
    return target


def _scenario_on(name: str, day: date, tz: ZoneInfo) -> Scenario:
    """The scenario as the demo runs it: its start time of day on ``day`` (as `simulate --date`
    places it), for its own duration."""
    from sensors.scenario import load_scenario, scenario_times, start_on_date

    start, duration = scenario_times(name, tz)
    return load_scenario(name, tz, start=start_on_date(day, start, tz), duration=duration)


def _night_lights(scenario_name: str, site: SiteConfig, day: date) -> tuple[bool, str]:
    """Whether the scenario's lights (fixtures, flashers, beacons) fall in civil night on ``day``.

    The lighting rules judge light at night only, and a scenario names clock times: the
    December afternoon of dovre-short is dark by 17:02, a June one is not.
    """
    from rules import sun
    from sensors.scenario import Fixture, Flashing

    tz = ZoneInfo(site.timezone)
    scenario = _scenario_on(scenario_name, day, tz)
    periods = [
        p for source in scenario.sources if isinstance(source, Fixture | Flashing) for p in source.periods
    ]
    if not periods:
        return True, ""
    nights = sun.civil_night(site.context(), scenario.start, scenario.end + timedelta(days=1))
    for period in periods:
        last = period.end - timedelta(seconds=1)
        if not (sun.is_night(nights, period.start) and sun.is_night(nights, last)):
            dusk = next((a for a, _ in nights if a.date() == period.start.date()), None)
            when = f"civil dusk {dusk.astimezone(tz):%H:%M}" if dusk else "no civil night"
            return False, f"its lights at {period.start:%H:%M} come before dark ({when})"
    return True, ""


def demo_day(scenario_name: str, site: SiteConfig, today: date, wanted: date | None) -> tuple[date, str]:
    """The day to simulate and a note for the console ("" if none).

    Default: yesterday (site time), a recent past day, so that the data lie before the clock
    (`status` and notice actions then make sense). If the scenario's lights would fall in
    daylight on that date (dovre-short is a December afternoon), the most recent day on
    which they are in the dark, within the daemon's acceptance window.
    """
    if wanted is not None:
        allowed = f"give a day from {today - OLDEST_DAY} to {today - timedelta(days=1)}"
        if wanted >= today:
            raise UsageError(f"--date {wanted}: the demo simulates a past day; {allowed}")
        if wanted < today - OLDEST_DAY:
            raise UsageError(
                f"--date {wanted}: older than {OLDEST_DAY.days} days, which the demo's daemon refuses;"
                f" {allowed}"
            )
        fits, why = _night_lights(scenario_name, site, wanted)
        return wanted, "" if fits else f"note: on {wanted} {why}, so the lighting findings may be missing"
    yesterday = today - timedelta(days=1)
    fits, why = _night_lights(scenario_name, site, yesterday)
    if fits:
        return yesterday, ""
    day = yesterday - timedelta(days=1)
    while day > today - OLDEST_DAY:
        if _night_lights(scenario_name, site, day)[0]:
            return day, (
                f"note: yesterday ({yesterday}) {why}; simulating {day}, the most recent day"
                f" on which the scenario's lights are in the dark (--date to choose)"
            )
        day -= timedelta(days=1)
    return yesterday, f"note: {why}; the lighting findings may be missing"


def _site_config() -> SiteConfig:
    from monitor.config import parse_config

    config = parse_config(resources.files("sensors").joinpath(DEMO_CONFIG).read_text(), DEMO_CONFIG)
    site = config.site(SITE)
    assert site is not None
    return site


def run_demo(
    out_dir: Path,
    scenario: str,
    speed: str,
    seed: int | None,
    stream: TextIO = sys.stdout,
    *,
    day: date | None = None,
    force: bool = False,
    today: date | None = None,
    serve: bool = False,
) -> int:
    """The whole demo into ``out_dir`` (see prepare_out_dir); ``day`` default: see demo_day."""
    from sensors.scenario import ScenarioError

    site = _site_config()
    today = today or datetime.now(ZoneInfo(site.timezone)).date()
    try:
        chosen, note = demo_day(scenario, site, today, day)
    except ScenarioError as exc:
        raise UsageError(f"--scenario {scenario}: {'; '.join(exc.problems)}") from None
    target = prepare_out_dir(out_dir, force)
    if note:
        _say(stream, note)
    demo = Demo(target, scenario, speed, seed, stream, chosen, serve)
    # `kill` (SIGTERM) stops the demo as Ctrl-C does: its broker, daemon and portal go with it.
    global _DEMO_PID
    _DEMO_PID = os.getpid()
    previous = {signum: signal.signal(signum, _interrupt) for signum in (signal.SIGTERM, signal.SIGINT)}
    try:
        return demo.run()
    except KeyboardInterrupt:
        _say(
            stream, f"interrupted: {target}/ holds what was done so far, incomplete (summary.json: ok false)"
        )
        raise
    finally:
        demo.stop_all()  # a second Ctrl-C no longer breaks it off (_interrupt)
        (target / "summary.json").write_text(json.dumps(demo.summary, indent=2) + "\n")
        for signum, handler in previous.items():
            signal.signal(signum, handler)


_DEMO_PID: int | None = None  # the demo's own process (SIGTERM's handler is inherited by forks)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    if os.getpid() != _DEMO_PID:
        # A forked worker (the evidence export's pool) inherits this handler; its pool ends it
        # with SIGTERM when done: end as the default handler would, without a traceback.
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        return
    _stop_listening()
    raise KeyboardInterrupt


def _stop_listening() -> None:
    """The demo is stopping: a second Ctrl-C (a user's second press) must not break off its
    cleanup. It did: stop_all was cut short, the simulator outlived the demo, and no summary
    was written."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_IGN)
