"""The short scenario through the real broker and the real daemon (`minewatch run`, data clock).

dovre-short.toml holds every finding of the full day in 2.5 simulated hours: a blast after
15:00 without a safety reason, an impulse with no blast record, a fixed light flashing at
1 Hz, light trespass, ten minutes of a too-loud screening plant at n3, and exempt peaks
(trucks at the gates, recorded blasts, declared repair work) that must NOT be violations.
"""

from __future__ import annotations

import json
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from datetime import date, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from tests.support.daemon import Daemon, store_count, wait_until
from tests.support.paths import REPO
from tests.support.sensors import site_config
from tests.support.servers import Mosquitto

TZ = ZoneInfo("America/Chicago")
END_OF_SCENARIO = datetime(2026, 12, 15, 17, 20, tzinfo=TZ)


def local(iso: str) -> datetime:
    return datetime.fromisoformat(iso).astimezone(TZ)


def current_findings(store: Path) -> list[dict[str, object]]:
    conn = sqlite3.connect(store, timeout=30)
    try:
        rows = conn.execute(
            "SELECT data FROM findings f WHERE retracted = 0 AND revision = "
            "(SELECT MAX(revision) FROM findings WHERE id = f.id)"
        ).fetchall()
    finally:
        conn.close()
    return [json.loads(r[0]) for r in rows]


def simulate_short(config: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """`minewatch simulate` of the dovre-short scenario at the configured site."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "monitor.cli",
            "simulate",
            "--config",
            str(config),
            "--scenario",
            "dovre-short",
            *argv,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _refused_dry_run(config: Path, *argv: str) -> list[str]:
    """The lines of a `simulate --dry-run` refused as the user's mistake: exit 2, nothing on stdout."""
    result = simulate_short(config, *argv, "--dry-run")
    assert result.returncode == 2 and result.stdout == "", result
    return result.stderr.splitlines()


def test_short_scenario_yields_the_expected_findings(tmp_path: Path, mosquitto: Mosquitto) -> None:
    config = site_config(tmp_path, mosquitto.url)
    store = tmp_path / "store.db"
    daemon = Daemon(config).start()
    try:
        daemon.wait_ready()
        result = simulate_short(config, "--speed", "max")
        assert result.returncode == 0, result.stderr
        assert "Published" in result.stdout and "blast b-1215-2 at 15:40:00" in result.stdout
        # Done when the daemon has judged the scenario's last closed minute.
        last_minute_us = int((END_OF_SCENARIO.timestamp() - 60) * 1e6)
        assert wait_until(
            lambda: (
                store_count(
                    store, "SELECT COUNT(*) FROM progress WHERE evaluated_until_us >= ?", last_minute_us
                )
                == 1
            ),
            90,
            0.5,
        ), daemon.logs()[-3000:]
        assert daemon.alive()
    finally:
        daemon.stop()
    findings = current_findings(store)

    def of(standard: str, kind: str) -> list[dict[str, object]]:
        return [f for f in findings if f["standard"] == standard and f["kind"] == kind]

    late = of("blast_window", "violation")
    assert len(late) == 1 and "b-1215-2" in str(late[0]["summary"])
    assert len(of("blast_window", "compliant")) == 1  # b-1215-1 at 14:58
    unreported = of("unreported_blast", "unreported_blast")
    assert [f["sensors"] for f in unreported] == [["n1"]]
    assert local(str(unreported[0]["start"])).strftime("%H:%M:%S") == "16:02:30"
    flashing = of("flashing_light", "violation")
    assert flashing and all(f["sensors"] == ["l2"] for f in flashing)  # the 20 s beacon at l1 is not one
    assert of("light_trespass", "violation")
    noise = of("noise", "violation")
    assert len(noise) >= 8
    for f in noise:  # only the screening plant: trucks, blasts and repair work stay exempt
        assert f["sensors"] == ["n3"]
        # The plant runs 16:10-16:20; a sliding 60 s window starts up to a minute before its
        # first loud second and ends up to a minute after its last.
        assert "16:09" <= local(str(f["start"])).strftime("%H:%M") < "16:20", f["summary"]
        assert "16:10" <= local(str(f["end"])).strftime("%H:%M") <= "16:21", f["summary"]
    exempt = of("noise", "exempt_exceedance")
    assert {tuple(f["sensors"]) for f in exempt} == {("n1",), ("n2",)}  # type: ignore[arg-type]
    reasons = " ".join(" ".join(f["exemptions"]) for f in exempt)  # type: ignore[arg-type]
    assert "haul truck" in reasons and "blasting: blast b-1215-1" in reasons and "repair work" in reasons
    # n3's raw audio went through the daemon's acoustics; nothing was rejected.
    assert store_count(store, "SELECT COUNT(*) FROM sound WHERE sensor = 'n3' AND source = 'audio'") == 270
    assert store_count(store, "SELECT COUNT(*) FROM rejections") == 0


def test_a_shorter_duration_publishes_only_the_events_in_its_window(tmp_path: Path) -> None:
    """`--duration 2m` said 06:00-06:02 and published the day's blasts at 11:30 and 16:10 too."""
    config = site_config(tmp_path, "mqtt://127.0.0.1:9")
    result = simulate_short(config, "--duration", "2m", "--dry-run")
    assert result.returncode == 0, result.stderr
    said = result.stdout.split("Operator events and what happened:")[1]
    events = "\n".join(line for line in said.splitlines() if not line.strip().startswith("source:"))
    assert "blast b-" not in events and "seismograph" not in events, events
    assert "event(s) of the scenario after its end, not published (--duration)" in events
    assert not re.search(r"\d+ Blast\b", result.stdout.split("Operator events")[0])  # nor counted as sent


def _scenario_starting(tmp_path: Path, start: str) -> Path:
    """dovre-short with its ``start`` replaced, as a file of the user's."""
    text = (REPO / "sensors" / "scenarios" / "dovre-short.toml").read_text()
    scenario = tmp_path / "autumn.toml"
    scenario.write_text(re.sub(r'(?m)^start = ".*"$', f'start = "{start}"', text))
    return scenario


def test_a_scenario_start_that_occurs_twice_is_refused_as_start_is(tmp_path: Path) -> None:
    """A scenario file's start of 2026-11-01T01:30 (Chicago: the hour the clocks go back) was
    taken silently as the first, CDT, while --start refuses it: the file's start is refused in
    --start's words, naming the file, the key and both offsets to write; an offset or Z is taken
    as written."""
    config = site_config(tmp_path, "mqtt://127.0.0.1:9")
    scenario = _scenario_starting(tmp_path, "2026-11-01T01:30")
    refused = _refused_dry_run(config, "--scenario", str(scenario), "--duration", "2m")
    option = _refused_dry_run(config, "--start", "2026-11-01T01:30")
    assert refused == [
        f"minewatch simulate: {scenario}: start: '2026-11-01T01:30' occurs twice at the site, before and"
        " after the clocks go back (America/Chicago); give its offset: 2026-11-01T01:30-05:00 (the first)"
        " or 2026-11-01T01:30-06:00 (the second)"
    ]
    assert refused[0].split(": start: ")[1] == option[0].split(": --start: ")[1]
    for start, said in (
        ("2026-11-01T01:30-05:00", "2026-11-01 01:30 to 2026-11-01 01:32 CDT"),
        ("2026-11-01T01:30-06:00", "2026-11-01 01:30 to 2026-11-01 01:32 CST"),
        ("2026-11-01T07:30Z", "2026-11-01 01:30 to 2026-11-01 01:32 CST"),
    ):
        scenario = _scenario_starting(tmp_path, start)
        result = simulate_short(config, "--scenario", str(scenario), "--duration", "2m", "--dry-run")
        assert result.returncode == 0, result.stderr
        assert f"scenario dovre-short ({said})" in result.stdout, result.stdout


def test_a_simulation_from_the_second_reading_of_a_repeated_hour_lasts_its_duration(tmp_path: Path) -> None:
    """Started at 01:30 CST on 2026-11-01 (the second 01:30 in Chicago, as the refusal of a start
    that occurs twice tells one to write it), a 2m simulation generated 0 messages: its end was
    the start plus 2 minutes on the clock's face, 01:32 CDT, before the start. Both readings now
    last their 2 minutes, the second ending at 01:32 CST."""
    config = site_config(tmp_path, "mqtt://127.0.0.1:9")
    generated = {}
    for start, zone in (("2026-11-01T01:30-05:00", "CDT"), ("2026-11-01T01:30-06:00", "CST")):
        result = simulate_short(config, "--start", start, "--duration", "2m", "--dry-run")
        assert result.returncode == 0, result.stderr
        said = re.search(r"Generated \(dry run\): (\d+) messages .*\((.*)\)", result.stdout)
        assert said is not None, result.stdout
        assert said[2] == f"2026-11-01 01:30 to 2026-11-01 01:32 {zone}", result.stdout
        generated[zone] = int(said[1])
    assert generated["CST"] > 0 and generated["CST"] == generated["CDT"], generated


def test_a_date_on_which_the_scenario_start_occurs_twice_or_not_at_all_is_refused(tmp_path: Path) -> None:
    """--date combined the date with the scenario's start time of day silently: 01:30 on
    2026-11-01 (Chicago, the hour the clocks go back) was the first reading, 02:30 on 2026-03-08
    (the hour skipped in spring) a time that does not exist. Each is refused in one line naming
    the date, the time of day and what to give instead; the --start it names is taken."""
    config = site_config(tmp_path, "mqtt://127.0.0.1:9")
    night = _scenario_starting(tmp_path, "2026-12-15T01:30")
    assert _refused_dry_run(config, "--scenario", str(night), "--date", "2026-11-01") == [
        "minewatch simulate: --date 2026-11-01: 01:30 on that date (the scenario's start time of day)"
        " occurs twice at the site, before and after the clocks go back (America/Chicago); give"
        " --start 2026-11-01T01:30-05:00 (the first) or --start 2026-11-01T01:30-06:00 (the second),"
        " or another date"
    ]
    for start in ("2026-11-01T01:30-05:00", "2026-11-01T01:30-06:00"):
        given = simulate_short(
            config, "--scenario", str(night), "--start", start, "--duration", "2m", "--dry-run"
        )
        assert given.returncode == 0, given.stderr
    spring = _scenario_starting(tmp_path, "2026-12-15T02:30")
    assert _refused_dry_run(config, "--scenario", str(spring), "--date", "2026-03-08") == [
        "minewatch simulate: --date 2026-03-08: 02:30 on that date (the scenario's start time of day)"
        " is no time at the site: the clocks skip it when daylight-saving time begins (America/Chicago);"
        " give --start with a time an hour later or earlier, or another date"
    ]
    other = simulate_short(
        config, "--scenario", str(spring), "--date", "2026-03-09", "--duration", "2m", "--dry-run"
    )
    assert other.returncode == 0 and "(2026-03-09 02:30 to 2026-03-09 02:32 CDT)" in other.stdout, other


def _spring_blast(tmp_path: Path) -> Path:
    """A scenario of a blast at 02:30 on 2026-03-08, the night Chicago's clocks skip 02:00-03:00."""
    scenario = tmp_path / "spring.toml"
    scenario.write_text(
        'name = "spring"\nstart = "2026-03-08T01:00"\nduration = "2h"\n\n'
        '[[events]]\nkind = "blast"\nblast_id = "b-{mmdd}-1"\nat = "02:30"\n'
    )
    return scenario


def test_an_event_clock_time_the_clocks_skip_is_refused_naming_the_event_the_time_and_the_date(
    tmp_path: Path,
) -> None:
    """A blast at "02:30" on 2026-03-08 (Chicago: the hour skipped in spring) was read an hour
    on, 03:30 CDT, and its record published at that time without a word; --start and --date
    refuse such a time. It is refused in their words, in one line naming the event, the time and
    the date, before anything is published: from the file's start and from a --date moving the
    scenario onto that night. Moved to the next night by --date, the same file runs."""
    config = site_config(tmp_path, "mqtt://127.0.0.1:9")
    scenario = _spring_blast(tmp_path)
    refused = (
        f"minewatch simulate: {scenario}: events[0].at: 02:30 on 2026-03-08 (blast b-0308-1) is no time"
        " at the site: the clocks skip it when daylight-saving time begins (America/Chicago); give a time"
        " an hour later or earlier, or another date"
    )
    for argv in ((), ("--date", "2026-03-08")):
        result = simulate_short(config, "--scenario", str(scenario), *argv, "--dry-run")
        assert result.returncode == 2 and result.stdout == "", result
        assert result.stderr.splitlines() == [refused]
    other = simulate_short(config, "--scenario", str(scenario), "--date", "2026-03-09", "--dry-run")
    assert other.returncode == 0, other.stderr
    assert "2026-03-09 02:30:00 blast b-0309-1 at 02:30:00" in other.stdout, other.stdout


def test_the_demo_moves_a_scenario_whose_own_date_has_a_skipped_event_time_to_its_day(tmp_path: Path) -> None:
    """The demo read a scenario's start from the file resolved on its own date, where a blast at
    a time the clocks skip is refused: a day it could simulate was refused for the file's date.
    The start and duration are read alone, the clock times on the day simulated."""
    from monitor.config import load_config
    from monitor.demo.runner import demo_day

    site = load_config(site_config(tmp_path, "mqtt://127.0.0.1:9")).sites[0]
    day, _note = demo_day(str(_spring_blast(tmp_path)), site, date(2026, 3, 20), date(2026, 3, 9))
    assert day == date(2026, 3, 9)


def test_clock_times_after_a_start_at_the_second_reading_of_the_repeated_hour_follow_it(
    tmp_path: Path,
) -> None:
    """Started at the second 01:30 of 2026-11-01 (01:30 CST), a blast at "01:45" was the first
    01:45 (CDT), before the start: its impulse was not simulated and its record went out at the
    start. A clock time is the next time the clocks show it at or after the start, 01:45 CST, so
    the half hour plays as the same half hour on a day without a clock change does."""
    config = site_config(tmp_path, "mqtt://127.0.0.1:9")
    text = (REPO / "sensors" / "scenarios" / "dovre-short.toml").read_text()
    said = {}
    for name, start in (("repeated", "2026-11-01T01:30-06:00"), ("plain", "2026-11-02T01:30")):
        scenario = tmp_path / f"{name}.toml"
        moved = re.sub(r'(?m)^start = ".*"$', f'start = "{start}"', text)
        scenario.write_text(moved.replace('at = "14:58:00"', 'at = "01:45:00"').replace('"14:58"', '"01:45"'))
        result = simulate_short(config, "--scenario", str(scenario), "--duration", "30m", "--dry-run")
        assert result.returncode == 0, result.stderr
        said[name] = re.sub(r"2026-11-0[12]|b-110[12]-|Sat|Sun|Mon", "", result.stdout)
    assert re.search(r"n3 +\d+ audio", said["plain"]), said["plain"]  # the blast's impulse is heard
    assert said["repeated"] == said["plain"]


def test_an_interrupted_simulation_says_what_it_published_up_to_where_it_stopped(
    tmp_path: Path, mosquitto: Mosquitto
) -> None:
    """Ctrl-C printed "Published ...: N messages ... (06:00 to 17:20)" and listed every operator
    event of the day (blasts, trucks), none of which after the stop had been sent."""
    config = site_config(tmp_path, mosquitto.url)
    # Connected, and a few minutes of the scenario sent at 60 x.
    done, _took = _simulate_until_ctrl_c(config, "Scenario 'dovre-short'", 5.0)
    out, err = done.stdout, done.stderr
    assert done.returncode == 130, err
    head, *rest = out.splitlines()
    stopped = re.search(
        r"published: (\d+) messages .* to (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d), where it stopped", head
    )
    assert head.startswith("Interrupted after ") and stopped, out
    per_sensor = rest[: rest.index("Operator events published before the interruption:")]
    counted = sum(int(n) for line in per_sensor for n in re.findall(r"(\d+) \w+", line.split(maxsplit=1)[1]))
    assert counted == int(stopped.group(1)) > 0
    said = out.split("Operator events published before the interruption:")[1]
    times = re.findall(r"^  (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) ", said, flags=re.M)
    assert all(t <= stopped.group(2) for t in times), (times, stopped.group(2))
    assert "truck passes:" not in said and "16:10" not in said  # the day's last blast was never sent


def test_an_interruption_in_the_repeated_hour_lists_what_was_published_before_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run from 00:30 CDT on 2026-11-01 (Chicago) cut at the second 01:30 (CST, 07:30Z): the
    summary chose the events to list by comparing site times, within one zone the clock's face,
    so a truck at the first 01:45 (CDT, 06:45Z, before the cut) was left out; and the span said
    "where it stopped CDT", the start's zone, of a stop in CST. The summary of the real Ctrl-C
    path (test_an_interrupted_simulation_says_what_it_published_up_to_where_it_stopped), given
    the cut as a site time."""
    from monitor.commands.simulate import _summary
    from monitor.config import load_config
    from sensors.scenario import load_scenario
    from sensors.simulate import Simulation

    site = load_config(site_config(tmp_path, "mqtt://127.0.0.1:9")).sites[0]
    scenario = tmp_path / "autumn.toml"
    scenario.write_text(
        'name = "autumn"\nstart = "2026-11-01T00:30-05:00"\nduration = "2h"\n\n'
        '[[events]]\nkind = "truck"\nat = "01:45"\ngate = "gate-east"\n\n'
        # fired at the first 01:55 (06:55Z), reported 40 minutes later: 01:35 CST, after the cut
        '[[events]]\nkind = "blast"\nblast_id = "b-late"\nat = "01:55"\nreport_delay_s = 2400\n'
    )
    simulation = Simulation(load_scenario(str(scenario), TZ), site)
    for _ in simulation.messages():
        pass
    cut = datetime.fromisoformat("2026-11-01T07:30:00+00:00").astimezone(TZ)
    assert (cut.hour, cut.minute, cut.fold) == (1, 30, 1)  # the second 01:30
    _summary(simulation, site, 12.0, dry_run=False, interrupted=cut)
    out = capsys.readouterr().out
    assert "(2026-11-01 00:30 CDT to 2026-11-01 01:30:00 CST, where it stopped)" in out.splitlines()[0], out
    listed = out.split("Operator events published before the interruption:\n")[1].splitlines()
    assert listed[0] == "  2026-11-01 01:45:00 truck at gate-east 01:45:00", out
    assert "b-late" not in out, out


def test_the_hourly_progress_counts_elapsed_hours_across_the_repeated_hour(
    tmp_path: Path, mosquitto: Mosquitto
) -> None:
    """Published from 00:00 CDT on 2026-11-01 (Chicago) for 4 h (to 03:00 CST), the progress
    said "Simulated Sun 01:00 local" and then "Sun 02:00 local": its next hour was the last plus
    an hour on the clock's face, 02:00 CST two hours on, and the hour of the second 01:00 went
    unsaid. It counts elapsed hours, each named with its zone (the weather summary closing the
    run at 03:00 CST is the last)."""
    config = site_config(tmp_path, mosquitto.url)
    scenario = tmp_path / "autumn.toml"
    scenario.write_text(
        'name = "autumn"\nstart = "2026-11-01T00:00-05:00"\nduration = "4h"\n\n[weather]\nsensor = "wx1"\n'
    )
    result = simulate_short(config, "--scenario", str(scenario), "--speed", "max")
    assert result.returncode == 0, result.stderr
    said = re.findall(r"Simulated (\w+ \d\d:\d\d \w+): \d+ messages so far", result.stderr)
    assert said == ["Sun 01:00 CDT", "Sun 01:00 CST", "Sun 02:00 CST", "Sun 03:00 CST"], result.stderr


def _simulate_until_ctrl_c(
    config: Path,
    ready: str,
    before: float,
    *,
    broker: Mosquitto | None = None,
    again_after: float | None = None,
) -> tuple[subprocess.CompletedProcess[str], float]:
    """`minewatch simulate` given Ctrl-C ``before`` s after it logged ``ready`` (the broker
    stopped first, if given), and again ``again_after`` s later; what it said, and how long it
    took from the first Ctrl-C. Waiting for its own line, not a fixed time: on a loaded machine
    the start-up alone took longer than the 3 s once allowed, and Ctrl-C then came before
    simulate had anything to stop."""
    from tests.support.cli import sigint_as_at_a_terminal

    argv = ["simulate", "--config", str(config), "--scenario", "dovre-short", "--speed", "60"]
    with sigint_as_at_a_terminal():
        proc = subprocess.Popen(
            [sys.executable, "-m", "monitor.cli", *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    said: list[str] = []
    seen = threading.Event()

    def read_stderr() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            said.append(line)
            if ready in line:
                seen.set()

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    try:
        assert seen.wait(120), f"simulate never logged {ready!r}: {''.join(said)}"
        time.sleep(before)
        if broker is not None:
            broker.stop()
            time.sleep(1.0)
        interrupted = time.monotonic()
        proc.send_signal(signal.SIGINT)
        if again_after is not None:
            time.sleep(again_after)
            proc.send_signal(signal.SIGINT)
        out = proc.stdout.read() if proc.stdout is not None else ""
        proc.wait(timeout=150)
        reader.join(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    done = subprocess.CompletedProcess(argv, proc.returncode, out, "".join(said))
    return done, time.monotonic() - interrupted


def test_ctrl_c_while_the_broker_does_not_answer_stops_at_once(tmp_path: Path) -> None:
    """Ctrl-C before the broker answered was not heard: simulate went on trying for its 30 s and
    then said it could not reach the broker (exit 1)."""
    config = site_config(tmp_path, "mqtt://127.0.0.1:9")  # nothing listens there
    done, took = _simulate_until_ctrl_c(config, "connection refused", 0.5)
    assert done.returncode == 130 and took < 10, (took, done.stderr)
    assert done.stdout == (
        "Interrupted before the broker at mqtt://127.0.0.1:9 answered: nothing was published\n"
    )


def test_ctrl_c_again_stops_the_wait_for_a_broker_gone(tmp_path: Path, mosquitto: Mosquitto) -> None:
    """Interrupted after the broker went away, simulate waited 120 s for it to take what was sent,
    and a second Ctrl-C was not heard. It says it waits and how to stop, and a second one stops it."""
    config = site_config(tmp_path, mosquitto.url)
    done, took = _simulate_until_ctrl_c(
        config, "Scenario 'dovre-short'", 5.0, broker=mosquitto, again_after=2.0
    )
    assert done.returncode == 130 and took < 15, (took, done.stderr)
    assert "Ctrl-C again to stop now, leaving them undelivered" in done.stderr
    last = done.stderr.splitlines()[-1]
    assert re.fullmatch(
        r"minewatch simulate: \d+ messages not delivered to the broker: Ctrl-C again stopped the wait", last
    ), last
