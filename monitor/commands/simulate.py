"""``minewatch simulate``: play a day at a quarry through the real broker.

    scenario (sensors/scenarios/*.toml or a file) + the site's config
        ──► sensors.simulate.Simulation (records in publish-time order)
        ──► monitor.wire.codec.encode (signed with each sensor's key)
        ──► sensors.link.Link (QoS 1, bounded in flight) ──► broker ──► `minewatch run`

The daemon for a simulation runs with ``[daemon] clock = "data"`` (its "now" is the newest
timestamp it accepted, so a day can pass in minutes), ``lateness_s`` of a few minutes and
``max_age_s`` large enough to accept the simulated date (see sensors/scenarios/README.md).
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from types import FrameType
from zoneinfo import ZoneInfo

from monitor.commands.numbers import speed_factor, whole
from monitor.config import SiteConfig, load_config
from monitor.errors import ConfigError, UsageError
from monitor.times import parse_day, parse_time

log = logging.getLogger("minewatch.simulate")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, metavar="FILE", help="site configuration (TOML)")
    parser.add_argument(
        "--scenario",
        default="dovre-day",
        metavar="NAME|PATH",
        help="a built-in scenario (dovre-day, dovre-short) or a TOML file (default dovre-day)",
    )
    when = parser.add_mutually_exclusive_group()
    when.add_argument(
        "--start",
        metavar="TIME",
        help="simulated start, site-local if naive, e.g. 2026-06-15T06:00 (default: the scenario's)",
    )
    when.add_argument(
        "--date",
        metavar="YYYY-MM-DD",
        help="simulate this day: the scenario's start time of day on this date (site time)",
    )
    parser.add_argument("--duration", metavar="D", help="e.g. 24h, 2h30m, 90m (default: the scenario's)")
    parser.add_argument(
        "--speed",
        type=speed_factor,
        default="600",
        metavar="X",
        help="simulated seconds per wall-clock second (default 600: a day in 144 s); 'max' = no pause",
    )
    parser.add_argument("--seed", type=whole(), metavar="N", help="random seed (default: the scenario's)")
    parser.add_argument("--site", metavar="S", help="site id (default: the only site, or the first)")
    parser.add_argument(
        "--client-id", metavar="ID", help="MQTT client id (default minewatch-simulator-{site})"
    )
    parser.add_argument(
        "--window", type=whole(1, 65535), default=200, metavar="N", help="QoS 1 messages in flight at most"
    )
    parser.add_argument("--dry-run", action="store_true", help="generate and summarise, publish nothing")


def _fail(message: str, code: int = 2) -> int:
    print(f"minewatch simulate: {message}", file=sys.stderr)
    return code


def _duration(text: str) -> timedelta:
    from sensors.scenario import parse_duration

    try:
        return parse_duration(text)
    except ValueError as exc:
        raise UsageError(f"--duration: {exc}") from None


def _site(sites: tuple[SiteConfig, ...], wanted: str | None) -> SiteConfig:
    if wanted is None:
        return sites[0]
    for site in sites:
        if site.id == wanted:
            return site
    raise ConfigError([f"--site: no site {wanted!r} (sites: {', '.join(s.id for s in sites)})"])


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from sensors.scenario import ScenarioError, load_scenario, scenario_times, start_on_date
    from sensors.simulate import Simulation

    try:
        config = load_config(args.config)
        site = _site(config.sites, args.site)
        tz = ZoneInfo(site.timezone)
        start = parse_time(args.start, tz, "--start").astimezone(tz) if args.start else None
        if args.date:
            day = parse_day(args.date, "--date")
            start = start_on_date(day, scenario_times(args.scenario, tz)[0], tz)
        duration = _duration(args.duration) if args.duration else None
        speed = args.speed
        scenario = load_scenario(args.scenario, tz, start=start, duration=duration)
        simulation = Simulation(scenario, site, args.seed)
    except (ConfigError, ScenarioError) as exc:
        problems = exc.problems
        if len(problems) == 1:
            return _fail(problems[0])
        return _fail("\n  ".join(["invalid setup:", *problems]))
    except ValueError as exc:
        return _fail(str(exc))
    for note in simulation.notes:
        log.info("Note: %s", note)
    local_end = scenario.end
    log.info(
        "Scenario %r for site %s: %s to %s local, seed %d, speed %s",
        scenario.name,
        site.id,
        f"{scenario.start:%Y-%m-%d %H:%M}",
        f"{local_end:%Y-%m-%d %H:%M}",
        simulation.seed,
        args.speed if speed else "max",
    )
    if args.dry_run:
        for _ in simulation.messages():
            pass
        _summary(simulation, site, 0.0, dry_run=True)
        return 0
    return _publish(args, config.broker, site, simulation, speed)


# How long the messages handed to the link may take to reach the broker at the end.
DRAIN_S = 120


def _publish(
    args: argparse.Namespace, broker: object, site: SiteConfig, simulation: object, speed: float
) -> int:
    from monitor.config import BrokerConfig
    from monitor.wire.codec import encode
    from sensors.link import Link
    from sensors.publisher import signing_key
    from sensors.queue import MemoryQueue
    from sensors.simulate import Simulation

    assert isinstance(broker, BrokerConfig) and isinstance(simulation, Simulation)
    keys = {s.id: signing_key(s) for s in site.sensors}
    # The simulator is not an edge device: its queue lives in memory and is not bounded.
    link = Link(
        broker,
        args.client_id or f"minewatch-simulator-{site.id}",
        MemoryQueue(),
        window=args.window,
    )
    stop = threading.Event()
    again = threading.Event()  # a second Ctrl-C: stop waiting for the broker to take the rest

    def on_signal(signum: int, frame: FrameType | None) -> None:
        if stop.is_set():
            again.set()
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    link.start()
    reach_by = time.monotonic() + 30
    while not link.connected.wait(0.1):  # in slices: Ctrl-C while the broker does not answer
        if stop.is_set():
            link.close()
            print(f"Interrupted before the broker at {broker.url} answered: nothing was published")
            return 130
        if time.monotonic() >= reach_by:
            link.close()
            return _fail(f"cannot reach the broker at {broker.url} (30 s)", 1)
    prefix = broker.topic_prefix
    start = simulation.scenario.start
    wall0 = time.monotonic()
    # In UTC, elapsed hours: an hour added to a site time moves the clock's face, and across the
    # night the clocks go back the next report came two hours on, the repeated hour unsaid.
    next_report = start.astimezone(UTC) + timedelta(hours=1)
    interrupted: datetime | None = None
    for at, record in simulation.messages():
        if speed:
            until = wall0 + (at - start).total_seconds() / speed
            while (left := until - time.monotonic()) > 0 and not stop.is_set():
                link.pump()
                time.sleep(min(left, 0.01))
        if at >= next_report:
            log.info(
                "Simulated %s: %d messages so far",
                f"{at.astimezone(start.tzinfo):%a %H:%M %Z}",
                simulation.stats.total,
            )
            next_report += timedelta(hours=1)
        topic, payload = encode(record, keys.get(getattr(record, "sensor", "")), prefix)
        link.send_bounded(topic, payload, max_backlog=2 * args.window)
        if stop.is_set():  # after sending: every message counted was handed to the link
            interrupted = at
            log.warning("Interrupted at %s local", f"{at.astimezone(start.tzinfo):%H:%M:%S}")
            break
    if stop.is_set() and len(link.queue):
        log.warning(
            "Delivering the %d message(s) sent before the interruption (up to %d s); Ctrl-C again"
            " to stop now, leaving them undelivered",
            len(link.queue),
            DRAIN_S,
        )
    drained = link.close(drain_timeout=DRAIN_S, abandon=again)
    elapsed = time.monotonic() - wall0
    _summary(simulation, site, elapsed, dry_run=False, interrupted=interrupted)
    if not drained and again.is_set():
        return _fail(
            f"{len(link.queue)} messages not delivered to the broker: Ctrl-C again stopped the wait", 130
        )
    if not drained:
        return _fail(f"{len(link.queue)} messages could not be delivered to the broker", 1)
    return 0 if not stop.is_set() else 130


def _summary(
    simulation: object, site: SiteConfig, elapsed: float, dry_run: bool, interrupted: datetime | None = None
) -> None:
    """What was generated or published; once interrupted, only what was, up to where it stopped."""
    from sensors.simulate import Simulation

    assert isinstance(simulation, Simulation)
    stats = simulation.stats
    scenario = simulation.scenario
    out = sys.stdout
    verb = "Generated (dry run)" if dry_run else f"Published in {elapsed:.0f} s"
    start, end = scenario.start, scenario.end
    end_text, stopped = f"{end:%Y-%m-%d %H:%M}", ""
    if interrupted is not None:
        verb = f"Interrupted after {elapsed:.0f} s; published"
        end = interrupted.astimezone(start.tzinfo)
        end_text, stopped = f"{end:%Y-%m-%d %H:%M:%S}", ", where it stopped"
    # Each end in its own zone's name when they differ: a run cut in the second 01:xx of the
    # night the clocks go back stopped at 01:30 CST, not CDT as its start.
    if end.tzname() == start.tzname():
        span = f"{start:%Y-%m-%d %H:%M} to {end_text}{stopped} {start.tzname()}"
    else:
        span = f"{start:%Y-%m-%d %H:%M} {start.tzname()} to {end_text} {end.tzname()}{stopped}"
    print(
        f"{verb}: {stats.total} messages for site {site.id}, scenario {scenario.name} ({span})",
        file=out,
    )
    per_sensor: dict[str, Counter[str]] = {}
    for (sensor, kind), n in sorted(stats.by_sensor.items()):
        per_sensor.setdefault(sensor, Counter())[kind] = n
    for sensor, kinds in per_sensor.items():
        print(f"  {sensor:10s} " + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())), file=out)
    if interrupted is None:
        print("Operator events and what happened:", file=out)
        lines = [line for _, line in stats.events]
    else:  # the lines about the whole run would count what was never sent
        print("Operator events published before the interruption:", file=out)
        # In UTC: within one zone Python compares the clock's face, ignoring fold, and a run cut at
        # the second 01:30 would leave out what went at the first 01:45.
        cut = interrupted.astimezone(UTC)
        lines = [line for at, line in stats.events if at is not None and at.astimezone(UTC) <= cut]
    for line in lines:
        print(f"  {line}", file=out)
    if stats.after_end and interrupted is None:
        print(
            f"  {stats.after_end} event(s) of the scenario after its end, not published (--duration)",
            file=out,
        )
    for source in scenario.sources:
        print(f"  source: {type(source).__name__.lower()} {source.name}", file=out)
