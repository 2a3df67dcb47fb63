"""``minewatch sensor sound|light|seismograph``: an edge publisher for one sensor of a site.

    source ──► sensors.sound.SoundProcessor / sensors.light.LightAggregator (pure)
           ──► sensors.publisher.Publisher (monitor.wire.codec.encode, signed with the sensor's key)
           ──► sensors.queue.ForwardQueue (SQLite, on disk) ──► sensors.link.Link (QoS 1) ──► broker

Everything is queued on disk first and deleted only on PUBACK, so a broker outage or
a restart loses nothing (within the queue's bounds; drops are reported in ``status``).
Bad configuration or an unusable source exits with 2 before any connection is made.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import signal
import sqlite3
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from monitor.commands.numbers import number, speed_factor, whole
from monitor.config import Config, SensorConfig, SiteConfig, load_config
from monitor.errors import ConfigError, StoreError
from monitor.times import parse_time
from monitor.wire.protocol import DB_RANGE
from rules.model import SensorKind, SensorStatus

if TYPE_CHECKING:  # the sensors package (numpy, scipy, paho) loads only when the command runs
    from sensors.light import LightSource
    from sensors.link import Link
    from sensors.publisher import Publisher
    from sensors.sound import SoundSource

log = logging.getLogger("minewatch.sensor")
EXIT_LOGIN_REFUSED = 3  # the broker refused the sensor's account (as `minewatch run`)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="kind", metavar="KIND", required=True)
    sound = sub.add_parser(
        "sound",
        help="sound levels per second (and optionally raw audio)",
        description="Measure sound levels per second and publish them.",
    )
    _common(sound, "soundcard[:DEVICE], wav:PATH or synthetic[:LEVEL_DB]")
    sound.add_argument(
        "--audio",
        choices=("off", "continuous", "events"),
        default="off",
        help="also publish raw audio: every second, or clips around events (default off)",
    )
    sound.add_argument(
        "--pre-trigger-s",
        type=whole(0, 300, unit=" s"),
        default=5,
        metavar="S",
        help="audio kept before an event",
    )
    sound.add_argument(
        "--post-trigger-s",
        type=whole(0, 3600, unit=" s"),
        default=10,
        metavar="S",
        help="audio sent after an event",
    )
    sound.add_argument(
        "--trigger-lafmax",
        type=number(0, DB_RANGE[1], unit=" dB"),  # up to what the wire takes
        default=85.0,
        metavar="DB",
        help="an event: a second's LAFmax at or above this (default 85)",
    )
    sound.add_argument(
        "--trigger-lcpeak",
        type=number(0, DB_RANGE[1], unit=" dB"),  # up to what the wire takes
        default=120.0,
        metavar="DB",
        help="... or its LCpeak at or above this (default 120)",
    )
    sound.add_argument(
        "--calibrate", metavar="WAV", help="a calibrator recording: report the check in status"
    )
    sound.add_argument(
        "--calibrator-db",
        type=number(40, 160, unit=" dB"),
        default=94.0,
        metavar="DB",
        help="the calibrator's level (default 94)",
    )
    light = sub.add_parser(
        "light",
        help="illuminance summaries with raw bursts",
        description="Measure illuminance and publish summaries with raw bursts.",
    )
    _common(
        light,
        "bh1750[:BUS:ADDR], tsl2591[:BUS:ADDR], csv:PATH or synthetic[:LUX[:HZ]]; a CSV's rows"
        " (ts,lux) must be in time order: it is read through once before anything is sent, and a row"
        " out of order is refused with its line number",
    )
    light.add_argument(
        "--rate",
        type=number(0, 1000, above=True, unit=" Hz"),
        default=10.0,
        metavar="HZ",
        help="samples per second (bursts for flashing detection need >= 10)",
    )
    light.add_argument(
        "--period",
        type=number(0, 86400, above=True, unit=" s"),
        metavar="S",
        help="seconds per summary (default: the sensor's expected_period_s)",
    )

    seismograph = sub.add_parser(
        "seismograph",
        help="blasting seismograph events (waveforms and summary)",
        description="Publish each triggered seismograph event: its waveforms split under the packet"
        " cap, and the summary computed here.",
    )
    _common(
        seismograph,
        "synthetic:DISTANCE_M:CHARGE_KG[:PPV_IN_S] (one event at --start) or folder:PATH (a hot folder"
        " of vendor CSV exports; published files move to PATH/done, unreadable ones to PATH/rejected)",
    )
    seismograph.add_argument(
        "--poll",
        type=number(0, 3600, above=True, unit=" s"),
        default=2.0,
        metavar="S",
        help="hot-folder scan period",
    )
    seismograph.add_argument(
        "--settle",
        type=number(0, 3600, unit=" s"),
        default=5.0,
        metavar="S",
        help="read an export once its size and time stay the same this long (docs/DEPLOY.md)",
    )


def _common(parser: argparse.ArgumentParser, sources: str) -> None:
    parser.add_argument("--config", required=True, metavar="FILE", help="site configuration (TOML)")
    parser.add_argument("--sensor", required=True, metavar="ID", help="sensor id in the configuration")
    parser.add_argument("--source", required=True, metavar="SOURCE", help=sources)
    parser.add_argument("--site", metavar="S", help="site id (default: the site that has the sensor)")
    parser.add_argument(
        "--queue",
        metavar="PATH",
        help="store-and-forward queue, made if missing (default: ./{site}-{sensor}.queue.db);"
        " a file no sensor made (another program's database, an empty file) is refused",
    )
    parser.add_argument(
        "--queue-max-messages",
        type=whole(0, 10**9),
        default=1_000_000,
        metavar="N",
        help="drop the oldest beyond this many queued messages (0: no bound)",
    )
    parser.add_argument(
        "--queue-max-mb",
        type=number(0, 10**6, unit=" MB"),
        default=512.0,
        metavar="MB",
        help="drop the oldest beyond this many queued megabytes (0: no bound)",
    )
    parser.add_argument(
        "--status-interval",
        type=number(1, 86400, unit=" s"),
        default=60.0,
        metavar="S",
        help="heartbeat period",
    )
    parser.add_argument(
        "--speed",
        type=speed_factor,
        default="1",
        metavar="X",
        help="replay speed for wav/csv/synthetic sources: 1 = real time, 'max' = no pause",
    )
    parser.add_argument(
        "--start",
        metavar="TIME",
        help="time of the first sample for wav/synthetic sources (site-local if naive; default now)",
    )
    parser.add_argument(
        "--duration",
        type=number(0, 10 * 365 * 86400, above=True, unit=" s"),
        metavar="S",
        help="stop after this many seconds of input",
    )
    parser.add_argument("--client-id", metavar="ID", help="MQTT client id (default sensor-{site}-{sensor})")
    parser.add_argument(
        "--drain-timeout",
        type=number(0, 3600, unit=" s"),
        default=10.0,
        metavar="S",
        help="on exit, try this long to send what is queued (the rest stays on disk)",
    )


def _fail(kind: str, message: str) -> int:
    print(f"minewatch sensor {kind}: {message}", file=sys.stderr)
    return 2


def _find(config: Config, sensor_id: str, site_id: str | None) -> tuple[SiteConfig, SensorConfig]:
    sites = [s for s in config.sites if site_id is None or s.id == site_id]
    if site_id is not None and not sites:
        raise ConfigError([f"--site: no site {site_id!r} (sites: {', '.join(s.id for s in config.sites)})"])
    found = [(site, sensor) for site in sites for sensor in site.sensors if sensor.id == sensor_id]
    if not found:
        raise ConfigError(
            [f"--sensor: no sensor {sensor_id!r} in {'site ' + site_id if site_id else 'any site'}"]
        )
    if len(found) > 1:
        raise ConfigError([f"--sensor: {sensor_id!r} is in several sites; choose one with --site"])
    return found[0]


def _start(text: str | None, tz: ZoneInfo) -> datetime:
    if not text:
        return datetime.now(UTC).replace(microsecond=0)
    return parse_time(text, tz, "--start")


class _Pacer:
    """Sleep so that data time advances ``speed`` times faster than the wall clock; pump while waiting."""

    def __init__(self, speed: float, pump: Callable[[], object]) -> None:
        self.speed, self.pump = speed, pump
        self.wall0 = time.monotonic()

    def wait(self, elapsed_data_s: float, stop: threading.Event) -> None:
        if not self.speed:
            return
        until = self.wall0 + elapsed_data_s / self.speed
        while not stop.is_set():
            left = until - time.monotonic()
            if left <= 0:
                return
            self.pump()
            time.sleep(min(left, 0.02))


def run(args: argparse.Namespace) -> int:
    # Before anything else: a SIGTERM while starting (loading numpy, opening the source or the
    # queue) must end in the same drain as one while running, not in the default termination.
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = load_config(args.config)
        site, sensor = _find(config, args.sensor, args.site)
        speed = args.speed
        start = _start(args.start, ZoneInfo(site.timezone))
    except ConfigError as exc:
        return _fail(args.kind, str(exc))
    except ValueError as exc:
        return _fail(args.kind, str(exc))
    wanted = {
        "sound": (SensorKind.SOUND,),
        "light": (SensorKind.LIGHT, SensorKind.SKY),
        "seismograph": (SensorKind.SEISMOGRAPH,),
    }[args.kind]
    if sensor.kind not in wanted:
        wrong = f"sensor {sensor.id} is a {sensor.kind.value} sensor, not a {args.kind} sensor"
        return _fail(args.kind, wrong)

    from sensors import light as light_mod
    from sensors import sound as sound_mod

    # Open the source before connecting: a missing package or device is a setup error (exit 2).
    calibration: tuple[float, float] | None = None
    try:
        if args.kind == "seismograph":
            source: SoundSource | LightSource | str = _seismograph_source(args.source)
        elif args.kind == "sound":
            source = sound_mod.open_source(args.source, sensor.calibration.full_scale_db)
            if args.calibrate:
                calibration = sound_mod.calibration_check(
                    args.calibrate, sensor.calibration.full_scale_db, args.calibrator_db
                )
        else:
            source = light_mod.open_source(args.source, args.rate, start=start.timestamp())
    except sound_mod.SourceUnavailable as exc:
        return _fail(args.kind, str(exc))
    except ValueError as exc:
        if args.kind == "seismograph":
            return _fail(args.kind, str(exc))
        return _fail(args.kind, f"--calibrate {args.calibrate}: {exc}")

    from monitor.claims import QueueClaim, QueueTaken, claim_queue
    from sensors.link import Link
    from sensors.publisher import Publisher
    from sensors.queue import SET_ASIDE_REMEDY, ForwardQueue, QueueBounds, damaged, set_aside

    queue_path = Path(args.queue or f"{site.id}-{sensor.id}.queue.db")
    # The queue's folder is made if missing; a file standing where a folder should be is a mistake.
    blocking = next((p for p in (queue_path.parent, *queue_path.parent.parents) if p.exists()), None)
    if blocking is not None and not blocking.is_dir():
        return _fail(args.kind, f"--queue {queue_path}: {blocking} is a file, not a folder")
    if queue_path.is_dir():
        return _fail(args.kind, f"--queue {queue_path}: is a folder; give the queue's file name")
    # The claim first (on the file, whatever names it), then the queue: a second sensor given
    # another name of a file one sends from must not open it (SQLite would keep a second WAL).
    claim: QueueClaim | None = None
    try:
        bounds = QueueBounds(args.queue_max_messages, int(args.queue_max_mb * 1024 * 1024))
        claim = claim_queue(str(queue_path))  # QueueTaken: one line, exit 2
        try:
            forward = ForwardQueue(queue_path, bounds, claim)
        except sqlite3.DatabaseError as exc:
            # A queue a power cut damaged must not stop the sensor for good (under systemd it
            # would restart and fail for ever, measuring nothing): it is set aside. A file no
            # sensor has used (no <queue>-owner beside it) is someone else's, and left as it is.
            if not damaged(exc) or not Path(f"{queue_path}-owner").exists():
                raise
            try:
                aside = set_aside(queue_path)
            except OSError as refused:  # nothing waits yet, and no queue to measure into: stop
                claim.release()
                return _fail(
                    args.kind,
                    f"--queue {queue_path}: damaged ({exc}) and cannot be set aside"
                    f" ({refused.strerror or refused}): {SET_ASIDE_REMEDY}, then start the sensor again",
                )
            log.error(
                "The queue %s is damaged (%s): moved to %s, and what it held that was not sent yet"
                " is not sent; starting a new queue",
                queue_path,
                exc,
                aside,
            )
            claim = claim.renew()
            forward = ForwardQueue(queue_path, bounds, claim)
    except QueueTaken as exc:
        if claim is not None:
            claim.release()
        return _fail(args.kind, str(exc))
    except (ValueError, OSError, sqlite3.Error, StoreError) as exc:
        if claim is not None:
            if claim.made:  # the empty file it made (the disk refused the queue's tables): not left
                with contextlib.suppress(OSError):
                    if queue_path.stat().st_size == 0:
                        queue_path.unlink()
            claim.release()
        remedy = "; name a new file for the queue" if damaged(exc) else ""
        return _fail(args.kind, f"--queue {queue_path}: {exc}{remedy}")
    # A refused login (bad password) stops the run: no retry can fix it (exit status 3).
    link = Link(
        config.broker,
        args.client_id or f"sensor-{site.id}-{sensor.id}",
        forward,
        on_fatal=lambda _: stop.set(),
    )
    publisher = Publisher(
        site,
        sensor,
        link,
        forward,
        config.broker.topic_prefix,
        firmware="minewatch-sensor",
        max_payload_bytes=config.daemon.max_payload_bytes,
    )
    if stop.is_set():
        log.info("Signal received while starting: sending what is queued, then stopping")
    if len(forward):
        log.info("Resuming with %d messages queued in %s", len(forward), queue_path)
    link.start()
    try:
        if isinstance(source, str):
            _run_seismograph(args, site, sensor, source, publisher, link, start, stop)
        elif isinstance(source, sound_mod.SoundSource):
            _run_sound(args, site, sensor, source, publisher, link, start, speed, calibration, stop)
        else:
            _run_light(args, site, sensor, source, publisher, link, speed, stop)
    finally:
        drained = link.close(args.drain_timeout)
        forward.close()  # (what the disk refused to the end is lost, and logged); its claim let go
        left = len(forward)
        lost = {
            "waited in memory while the disk refused them": forward.lost_from_memory + forward.lost_at_close,
            "dropped beyond the queue's bounds": forward.dropped_from_disk,
            "left in a damaged queue file, set aside": forward.lost_to_damage,
            "left in a damaged queue file that could not be set aside": forward.lost_in_place,
            "refused by the broker": link.refused,
            "too large for any message": publisher.oversized,
        }
        why = ", ".join(f"{n} {what}" for what, n in lost.items() if n)
        log.info(
            "Stopped: %d message(s) delivered (acknowledged by the broker), %d still queued in %s%s,"
            " %d lost%s",
            link.delivered,
            left,
            queue_path,
            "" if drained else " (sent on the next start)",
            sum(lost.values()),
            f" ({why})" if why else "",
        )
    if link.fatal is not None:
        print(f"minewatch sensor {args.kind}: {link.fatal}", file=sys.stderr)
        return EXIT_LOGIN_REFUSED
    return 0


def _run_sound(
    args: argparse.Namespace,
    site: SiteConfig,
    sensor: SensorConfig,
    source: SoundSource,
    publisher: Publisher,
    link: Link,
    start: datetime,
    speed: float,
    calibration: tuple[float, float] | None,
    stop: threading.Event,
) -> None:
    from sensors.sound import SoundProcessor, Trigger

    if source.realtime:
        start = datetime.now(UTC)
    trigger = Trigger(args.trigger_lafmax, args.trigger_lcpeak, args.pre_trigger_s, args.post_trigger_s)
    processor = SoundProcessor(
        site.id,
        sensor.id,
        source.sample_rate,
        sensor.calibration.full_scale_db,
        start,
        args.audio,
        trigger,
        source.clip_level,
    )
    pacer = _Pacer(0.0 if source.realtime else speed, link.pump)
    status = SensorStatus(site.id, sensor.id, start, None, None, *(calibration or (None, None)))
    publisher.heartbeat(status)
    done_s = 0.0
    began = time.monotonic()
    next_status = args.status_interval
    # A live source's blocks come with the system-clock time they were captured at: its levels'
    # times, counted from the samples, follow that clock (sensors/sound.py SampleClock).
    blocks = source.stamped_blocks()
    try:
        for block, captured_at in blocks:
            if stop.is_set():
                break
            for record in processor.feed(block, captured_at):
                publisher.publish(record)
            done_s += block.size / source.sample_rate
            # A live source's heartbeat follows the clock: it goes on while its device is silent.
            clock_s = time.monotonic() - began if source.realtime else done_s
            if clock_s >= next_status:
                next_status += args.status_interval
                publisher.heartbeat(SensorStatus(site.id, sensor.id, _after(start, clock_s)))
            link.pump()
            if args.duration is not None and done_s >= args.duration:
                break
            pacer.wait(done_s, stop)
        else:  # the input ran out (a file): its last, partial second too
            for record in processor.finish():
                publisher.publish(record)
    finally:
        blocks.close()  # the device let go of before the drain
    clock_s = time.monotonic() - began if source.realtime else done_s
    publisher.heartbeat(SensorStatus(site.id, sensor.id, _after(start, clock_s)))


def _run_light(
    args: argparse.Namespace,
    site: SiteConfig,
    sensor: SensorConfig,
    source: LightSource,
    publisher: Publisher,
    link: Link,
    speed: float,
    stop: threading.Event,
) -> None:
    from sensors.light import LightAggregator
    from sensors.sound import SourceUnavailable

    aggregator = LightAggregator(site.id, sensor.id, args.period or sensor.expected_period_s)
    pacer = _Pacer(0.0 if source.realtime else speed, link.pump)
    first: float | None = None
    last = 0.0
    next_status = 0.0
    try:
        for ts, lux in source.samples():
            if stop.is_set():
                break
            if first is None:
                first = ts
                next_status = ts
            if ts >= next_status:
                next_status += args.status_interval
                publisher.heartbeat(SensorStatus(site.id, sensor.id, datetime.fromtimestamp(ts, UTC)))
            if args.duration is not None and ts - first >= args.duration:
                break
            summary = aggregator.add(ts, lux)
            if summary is not None:
                publisher.publish(summary)
                link.pump()
            last = ts
            pacer.wait(ts - first, stop)
    except SourceUnavailable as exc:  # a CSV changed since it was checked: what came before is sent
        log.error("Stopped reading the source: %s", exc)
    summary = aggregator.flush()
    if summary is not None:
        publisher.publish(summary)
    if first is not None:
        publisher.heartbeat(SensorStatus(site.id, sensor.id, datetime.fromtimestamp(last, UTC)))


def _seismograph_source(text: str) -> str:
    """``text`` checked (ValueError naming --source): synthetic:D:W[:PPV] or folder:PATH."""
    kind, _, rest = text.partition(":")
    if kind == "folder" and rest:
        if not Path(rest).is_dir():
            raise ValueError(f"--source {text}: {rest} is not a folder")
        from sensors.seismograph import check_hot_folder

        check_hot_folder(Path(rest))  # before anything is published (ValueError: one line)
        return text
    if kind == "synthetic":
        try:
            numbers = [float(x) for x in rest.split(":")]
        except ValueError:
            numbers = []
        if len(numbers) in (2, 3) and all(n > 0 for n in numbers):
            return text
    raise ValueError(f"--source {text!r}: expected synthetic:DISTANCE_M:CHARGE_KG[:PPV_IN_S] or folder:PATH")


def _run_seismograph(
    args: argparse.Namespace,
    site: SiteConfig,
    sensor: SensorConfig,
    source: str,
    publisher: Publisher,
    link: Link,
    start: datetime,
    stop: threading.Event,
) -> None:
    from sensors.seismograph import HotFolder, event_messages, site_law_event

    publisher.heartbeat(SensorStatus(site.id, sensor.id, start))
    kind, _, rest = source.partition(":")
    if kind == "synthetic":
        numbers = [float(x) for x in rest.split(":")]
        wave = site_law_event(numbers[0], numbers[1], ppv_in_s=numbers[2] if len(numbers) > 2 else None)
        event_id = f"{sensor.id}-{start:%Y%m%dT%H%M%S}"
        for message in event_messages(
            wave, site.id, sensor.id, event_id, start, instrument={"location": sensor.location}
        ):
            publisher.publish(message)
        link.pump()
        return
    began = time.monotonic()
    hot = HotFolder(Path(rest), site, sensor, args.settle)
    while not stop.is_set():
        for done in hot.scan(publisher.publish):
            if not done.published:
                log.warning("Event file %r not published: %s", done.name, done.problem)
            elif done.problem:
                log.warning("Published event file %r, but %s", done.name, done.problem)
            else:
                log.info("Published event file %r", done.name)
        link.pump()
        if args.duration is not None and time.monotonic() - began >= args.duration:
            break
        stop.wait(args.poll)


def _after(start: datetime, seconds: float) -> datetime:
    return start + timedelta(seconds=round(seconds, 3))
