"""The daemon's pipeline: wires the parts and schedules their work, in one place.

    broker ──► ingest.MqttLink ──► ingest.Handoff ──► Pipeline.handle_batch (one thread)
               (levels decoded ahead: wire_levels.predecode)  │
          wire.decode ──┬── rejected ──► store.rejections ─────────────────► …/{site}/rejected
                        │               (rejections: who it is journaled under, rate-limited log)
                        └── accepted ──► audio (audio.AudioStreams) / bands ─► SoundLevels
                                         (health.calibrated: the sensor's calibration offset)
                                         store.append_* (+ hash chain, + Influx outbox: points.*)
                                         recent.RecentSound, sitestate (what the rules read)
                                         ─── COMMIT ──► ack to broker
          Pipeline.tick (after each batch, and on idle):
             closed minutes ─► rules.evaluate_site ─► announce.Announcer: findings ─► store,
                               …/violations, …/findings, alerts (alerts.Alert), notices
             early warnings, sensor health (health.HealthWatch), retained …/status,
             chain anchors …/anchors (announce.Announcer)
    outbox ──► influx.InfluxForwarder (own thread) ──► InfluxDB

Start order: store and outputs first, then the broker subscription, so nothing
is received before its consumer exists. Shutdown in reverse: stop accepting,
finish the messages in hand, flush the outbox, disconnect (see ``run``).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, NamedTuple, ParamSpec

import rules
from monitor.acoustics import iec61672
from monitor.config import (
    Config,
    SiteConfig,
    area_not_given,
    placeholder_warning,
    profile_citation_gaps,
    template_placeholders,
)
from monitor.daemon import minute_closing, seismic_intake
from monitor.daemon.announcer import Announcer, Outgoing, Publish
from monitor.daemon.clock import Clock
from monitor.daemon.daemon_state import DaemonState
from monitor.daemon.ingest import Handoff, Inbound, MqttLink
from monitor.daemon.rejections import PUBLISHED_PER_MINUTE, UNATTRIBUTED_SITE, LogGate, sender_of
from monitor.daemon.sensor_health import HealthWatch, calibrated
from monitor.daemon.site_state import NEVER, SiteState, site_data
from monitor.daemon.stopping import stopped_while_starting
from monitor.daemon.store_outage import StoreOutage
from monitor.daemon.workers import Partition
from monitor.errors import DecodeError, StoreUnwritable
from monitor.failing_rounds import FailingRounds
from monitor.influx import points
from monitor.influx.client import InfluxForwarder
from monitor.influx.forwarder_record import ForwarderRecorder
from monitor.influx.outbox import Outbox
from monitor.journal.config_record import config_record_texts
from monitor.journal.queries import HOUR_US
from monitor.journal.store import READING_KIND, SoundEntry, StagedSounds, Store, sound_entry, unwritable
from monitor.notify.alerts import Alert, AlertBook
from monitor.notify.delivery import Deliveries, DeliveryWorker
from monitor.notify.notices import NoticeBook
from monitor.process_settings import freeze_startup_objects
from monitor.wire.canonical import from_us, to_us
from monitor.wire.codec import (
    AudioBlock,
    BandLevels,
    Message,
    SeismicSummary,
    WaveformChunk,
    decode,
    payload_of,
)
from monitor.wire.link_state import META_KEY, LinkRecorder, LoginRefused
from monitor.wire.protocol import Limits, check_time, format_ts, input_filters
from monitor.wire.quick_levels import Predecoder
from rules.model import (
    Event,
    Finding,
    LightSummary,
    SensorStatus,
    SoundLevels,
    TurbidityReading,
    WeatherReading,
    event_span,
)
from rules.profile import load_profile
from rules.times import MINUTE, floor_minute

log = logging.getLogger("minewatch.pipeline")
P = ParamSpec("P")

BATCH_LIMIT = 10_000  # messages per transaction: one commit (one fsync) amortised over many
PRUNE_INTERVAL = timedelta(hours=1)
QUIET_S = 10.0  # wall seconds without a reading for a site (input up, none in hand): as complete as it gets
REEVALUATION_INTERVAL = timedelta(seconds=5)  # between re-judging late-touched minutes / early warnings
BLAST_RECORDS_KEPT = timedelta(days=3 * 366)  # seismograph records, whatever retention_days says
DATA_STEP = timedelta(seconds=30)  # the data clock's periodic work: every half data minute (see tick)
# A stop requested while the data clock has more than this to walk leaves the walk to the next
# start (_step_data_clock): a jump of days costs a minute of steps. Less is walked, as before.
WALK_LEFT_AT_STOP = timedelta(hours=1)
# Minutes a tick looks at for the first time, and for the final time, at most: a site's progress
# days behind its data (a start after a stop left the walk) is caught up over many ticks, the
# run loop heeding a stop between them, not in one pass of minutes.
LOOKS_PER_TICK = 60
MAX_REASON_KEYS = 64  # distinct Counters.by_reason keys; the rest count as "other"


@dataclass
class Counters:
    received: int = 0
    accepted: int = 0
    duplicates: int = 0
    conflicts: int = 0  # duplicates whose content differs from the kept reading (journaled)
    rejected: int = 0
    late: int = 0
    findings: int = 0
    lock_wait_s: float = 0.0  # waiting for the store's write lock (other writers: workers, the CLI)
    tick_lock_wait_s: float = 0.0  # the part of it before a tick's transaction (_periodic)
    lock_held_s: float = 0.0  # holding it: in write transactions, the COMMIT included
    by_reason: dict[str, int] = field(default_factory=lambda: defaultdict(int))


class Prepared(NamedTuple):
    """A message as ``Pipeline._prepare`` leaves it for the write transaction."""

    message: Inbound
    decoded: Message | DecodeError  # the error: rejected, nothing of it stored
    source: str | None = None  # a sound record's source ("levels", "bands"): decoded is its SoundLevels
    entry: SoundEntry | None = None  # that record's row, digest and chain key (store.sound_entry)


class PendingSound(NamedTuple):
    """A sound record accepted in the batch, written with the others at its end (``_flush_sound``)."""

    state: SiteState
    levels: SoundLevels
    source: str
    late: bool
    minute: datetime
    entry: SoundEntry | None  # built before the transaction, or None (built as it is staged)


class StagedFlush(NamedTuple):
    """Pending sound records made ready for the store (``Pipeline._stage_flush``)."""

    pending: list[PendingSound]
    entries: list[SoundEntry]
    sounds: StagedSounds | None  # chained ahead of the write transaction, or None (chained in it)
    now: datetime  # their receipt time as stored


class Judgement(NamedTuple):
    """``Pipeline._judge``'s result for a site, recorded by ``Pipeline._record``."""

    findings: list[tuple[datetime, list[Finding]]]  # per minute judged, in order
    evaluated_until: datetime | None  # the site's progress once recorded (None: not judging yet)
    final_until: datetime | None
    rejudged: bool  # the touched minutes were judged again (their set is cleared on recording)
    behind: bool = False  # closed minutes were left to the next tick (LOOKS_PER_TICK)


class Pipeline:
    def __init__(
        self,
        config: Config,
        store: Store,
        publish: Publish,
        clock: Clock,
        outbox_put: Callable[[Iterable[str]], None] | None = None,
    ) -> None:
        self.config = config
        self.store = store
        self.publish = publish
        self.clock = clock
        self.outbox_put = outbox_put
        self.prefix = config.broker.topic_prefix
        self.counters = Counters()
        d = config.daemon
        self._wall_limits = Limits(d.max_clock_skew_s, d.max_age_s, d.max_payload_bytes)
        self.sites: dict[str, SiteState] = {}
        self.site_configs = {s.id: s for s in config.owned_sites}
        # wire_levels.predecode for this configuration, from the network thread
        self.predecode = Predecoder(self.site_configs, self.prefix, d.max_payload_bytes)
        # Where each site's data had got to: closing continues from there, and so does the
        # data clock (without it "now" would fall back to the wall clock after a restart).
        newest = {s.id: self._stored_data_end(s) for s in config.owned_sites}
        # The data clock resumes at the newest site's end, its steps before it done: observed
        # site by site, the first site in the file set where its steps began again.
        ends = [end for end in newest.values() if end is not None]
        if ends:
            clock.observe(max(ends))
        self.input_since: float | None = time.monotonic()  # input connected since (None: down)
        self.input_pending = 0  # messages received and not yet handled
        pruned = store.meta("pruned_before_us")
        self.pruned_before: datetime | None = None if pruned is None else from_us(int(pruned))
        now = clock.now()
        for site in config.owned_sites:
            profile = load_profile(site.profile, site.agreement)
            self.sites[site.id] = SiteState.restore(site, profile, store, newest[site.id], now)
        self.generic_kinds = {
            s: frozenset(getattr(st.profile, "event_kinds", ())) for s, st in self.sites.items()
        }
        self.alerts = AlertBook(store, config.alerts, self._publish_alert)
        self.health = HealthWatch(store, self.alerts, config.daemon, self._write_point)
        self.notices = NoticeBook(store)
        self.deliveries = Deliveries(store.conn, config)
        # Every raised alert is queued for delivery in the same transaction that journals it.
        self.alerts.listeners.append(lambda body: self._enqueue_delivery(body))
        self.deliveries_pending = False
        self.outgoing = Outgoing(self.prefix, publish)  # published after each commit
        self.announcer = Announcer(store, self.alerts, self.notices, self.outgoing, self._write_point)
        self.last_prune = NEVER
        self._failing: dict[tuple[str, str], FailingRounds] = {}  # (site, what): see _site_rounds
        self.last_tick_at: datetime | None = None  # data clock: the last step (DATA_STEP) worked at
        self.last_data_now: datetime | None = None  # data clock: its time at the last tick
        self.stopping: Callable[[], bool] = lambda: False  # a stop was requested (run's stop.is_set)
        self.walk_left: datetime | None = None  # data clock: the step a stop left the walk at
        self.behind = False  # the last tick left closed minutes to the next (LOOKS_PER_TICK)
        self.announce_sites: frozenset[str] | None = None  # notice changes of these sites only (a worker)
        self._pending_sound: list[PendingSound] = []
        self.log_gate = LogGate()  # rate-limited log lines for rejections and conflicts
        self.publish_gate = LogGate(PUBLISHED_PER_MINUTE)  # and …/rejected publications
        with store.batch():  # the profile and configuration every finding from now on is judged under
            for site in config.owned_sites:
                store.append_config_record(site.id, *config_record_texts(config, site), now)

    def _stored_data_end(self, site: SiteConfig) -> datetime | None:
        """Where the site's stored data had got to (``Store.newest_data_end``); on the data clock
        not after the latest time it takes (``_latest_data_time``).

        An older minewatch took any time on the data clock: a store holding a reading stamped
        3026 set "now" there at every start, every real reading refused as centuries old.
        """
        sensors = [x.id for x in site.sensors]
        end = self.store.newest_data_end(site.id, sensors)
        if self.clock.mode != "data" or end is None:
            return end
        latest = self._latest_data_time()
        if end <= latest:
            return end
        kept = self.store.newest_data_end(site.id, sensors, stamped_by=latest)
        if kept != end:
            log.warning(
                "Site %s: the store holds a reading ending %s, after %s (this machine's clock plus"
                " daemon.max_age_s); the data clock starts from %s instead. Check this machine's"
                " clock: if it is right, that reading's time is wrong (it stays in the store)",
                site.id,
                format_ts(end),
                format_ts(latest),
                "the next reading" if kept is None else format_ts(kept),
            )
        return kept

    # ------------------------------------------------------------------ messages

    def _latest_data_time(self) -> datetime:
        """The latest time the data clock takes: a scenario may be dated ahead of this machine's
        clock, but not further than max_age_s (one message stamped 3026 set the clock there, the
        daemon splitting its batch at every data step up to it, for good)."""
        return self.clock.wall() + timedelta(seconds=self.config.daemon.max_age_s)

    def limits(self) -> Limits:
        if self.clock.mode != "data":
            return self._wall_limits
        # The data defines "now", and "too old" is measured from the newest accepted timestamp
        # once there is one.
        d = self.config.daemon
        past = d.max_age_s if self.clock.data_now is not None else math.inf
        return Limits(math.inf, past, d.max_payload_bytes, self._latest_data_time())

    def handle_batch(self, messages: Sequence[Inbound]) -> None:
        """Decode, store and commit one batch; outputs go out only after the commit.

        What needs no store is done before the write transaction (``_prepare``: decoding, the
        time checks, a sound record's row, digest and chain key): other workers' batches take the
        store's write lock meanwhile (docs/ARCHITECTURE.md, Workers).

        Raises StoreUnwritable when the store refuses writes (a full disk): nothing is rejected
        for it, and ``stored`` says how many of ``messages`` were committed before. This
        pipeline's memory may then be ahead of the store: the caller makes a new one from the
        store (``monitor.daemon.store_outage``).
        """
        committed = 0
        try:
            # One clock reading for the batch (a fraction of a second of messages): the
            # time checks allow seconds, and in data-clock mode it only moves at the flush.
            now = self.clock.now()
            ready = [self._prepare(message, now) for message in messages]
            for index, (part, next_time) in enumerate(self._between_data_steps(ready)):
                if index:
                    now = self.clock.now()
                staged = self._accept_ahead(part, now)
                with self._write_transaction():
                    if staged is None:
                        for item in part:
                            self._apply(item, now)
                    take_in = self._flush_sound(self.clock.now(), defer=True, staged=staged)
                committed += len(part)
                if take_in is not None:
                    take_in()  # memory only, out of the write lock
                if next_time is not None:
                    self.outgoing.flush()
                    self._step_data_clock(next_time)  # the steps the next message passes
        except Exception as exc:
            if outage := unwritable(exc, self.store.path, committed):
                raise outage from exc
            # A bug on one message: redo the batch one savepoint per message, so that
            # message alone is rolled back and rejected and the rest are kept.
            log.exception("Internal error in a batch; retrying it message by message")
            self.outgoing.clear()
            self._pending_sound.clear()
            self._forget_recent_sound()
            try:
                self._retry_one_by_one(messages)
            except Exception as exc:
                if outage := unwritable(exc, self.store.path, committed):
                    raise outage from exc
                raise
        self.outgoing.flush()

    def _retry_one_by_one(self, messages: Sequence[Inbound]) -> None:
        """handle_batch's retry after a bug: one savepoint per message, so that only the message
        at fault is rolled back and rejected. A store that refuses writes rejects none."""
        with self.store.batch():
            for message in messages:
                try:
                    with self.outgoing.unit(self.store.savepoint()):
                        now = self.clock.now()
                        self._apply(self._prepare(message, now), now)
                        self._flush_sound(self.clock.now())
                except Exception as exc:  # a daemon never dies of one message
                    if unwritable(exc, self.store.path):
                        raise
                    self._pending_sound.clear()
                    self._forget_recent_sound()
                    log.exception("Internal error on a message on %r", message.topic)
                    self._reject(
                        message,
                        f"internal error ({type(exc).__name__}); logged for the maintainers",
                        "internal",
                    )

    @contextmanager
    def _write_transaction(self, *, tick: bool = False) -> Iterator[None]:
        """The store's write transaction (``Store.batch``), with its wait for the write lock (BEGIN
        IMMEDIATE's, while another worker or the CLI writes) counted, a tick's apart too, and the
        time it holds the lock: with two workers the drain is bound by that (docs/PERFORMANCE.md)."""
        asked = time.perf_counter()
        taken: float | None = None
        try:
            with self.store.batch():
                taken = time.perf_counter()
                waited = taken - asked
                self.counters.lock_wait_s += waited
                if tick:
                    self.counters.tick_lock_wait_s += waited
                yield
        finally:  # the chain rows' flush and the COMMIT (or ROLLBACK) included
            if taken is not None:
                self.counters.lock_held_s += time.perf_counter() - taken

    def _between_data_steps(self, ready: list[Prepared]) -> list[tuple[list[Prepared], datetime | None]]:
        """The batch cut where its data cross the data clock's next periodic step (data clock),
        each part with the data time of the message after it (None for the last part).

        A real-time daemon does its periodic work as its clock passes each step, with what had
        arrived by then. Doing it between a batch's parts, not after the whole batch, keeps a
        sensor's backfill that arrived after the others' later data from hiding its silence:
        what is alerted follows the order the data came in, not how it was batched.
        """
        if self.clock.mode != "data":
            return [(ready, None)]
        boundary = self._next_data_step()
        parts: list[tuple[list[Prepared], datetime | None]] = []
        current: list[Prepared] = []
        for item in ready:
            at = _data_time(item.decoded)
            if at is not None:
                if boundary is None:  # the first data ever: the steps count from its minute
                    boundary = floor_minute(at) + DATA_STEP
                elif at > boundary and current:
                    parts.append((current, at))
                    current = []
                if at > boundary:  # the first step at or after it
                    boundary += -((boundary - at) // DATA_STEP) * DATA_STEP
            current.append(item)
        parts.append((current, None))
        return parts

    def _forget_recent_sound(self) -> None:
        for state in self.sites.values():
            state.recent.clear()  # reloaded from the store as needed

    def _prepare(self, message: Inbound, now: datetime) -> Prepared:
        """A message decoded and checked, without the store: a sound record with its row and digest."""
        try:
            decoded: Message
            if isinstance(message.decoded, SoundLevels):  # a levels message decoded ahead, all but its time
                check_time(message.decoded.ts, now, self.limits())
                decoded = message.decoded
            else:
                decoded = decode(
                    message.topic,
                    message.payload,
                    self.site_configs,
                    now,
                    self.limits(),
                    self.generic_kinds,
                    self.prefix,
                    message.decoded,  # parsed ahead (None if not): not parsed again
                )
        except DecodeError as exc:
            # Kept as a fresh error, not the raised one: its traceback's frames reach back to
            # handle_batch's list of prepared messages, a cycle that would hold the whole
            # batch's payloads until the (rarely run) cyclic collector (issue 24).
            return Prepared(message, DecodeError(exc.field, exc.reason))
        if isinstance(decoded, BandLevels):
            la, lc, lz = iec61672.levels_from_bands(decoded.bands)
            # A spectrum carries no time structure: LAFmax and LCpeak are their lower
            # bounds (the A and C energy levels), so only the LAeq-based rules use bands fully.
            levels = SoundLevels(
                decoded.site, decoded.sensor, decoded.ts, decoded.duration_s, la, la, lc, LCeq=lc, LZeq=lz
            )
            return Prepared(message, levels, "bands", sound_entry(levels, "bands"))
        if isinstance(decoded, SoundLevels):
            levels = calibrated(decoded, self.sites[decoded.site].offsets.get(decoded.sensor))
            # tuple.__new__: a NamedTuple's own __new__ costs twice as much, once per message
            return tuple.__new__(Prepared, (message, levels, "levels", sound_entry(levels, "levels")))
        return Prepared(message, decoded)

    def _apply(self, item: Prepared, now: datetime) -> None:
        """Store a prepared message (in the batch's transaction), or reject it."""
        self.counters.received += 1
        decoded = item.decoded
        if isinstance(decoded, DecodeError):  # raised before anything of the message was written
            self._reject(item.message, str(decoded), decoded.field)
            return
        state = self.sites[decoded.site]
        if item.source is None and self._pending_sound:
            # The sound records before this message are taken in before it, in the order they
            # came: a heartbeat handled ahead of its sensor's earlier readings said the sensor's
            # return at its own time, so the demo's record depended on how batches fell.
            self._flush_sound(self.clock.now())
        try:
            if item.source is not None:
                assert isinstance(decoded, SoundLevels)
                self._accept_sound(state, decoded, item.source, now, item.entry)
            elif isinstance(decoded, AudioBlock):
                self._accept_audio(state, decoded, now)
            elif isinstance(decoded, LightSummary | WeatherReading | TurbidityReading | SensorStatus):
                self._accept_reading(state, decoded, now)
            elif isinstance(decoded, WaveformChunk | SeismicSummary):
                self._accept_seismic(state, decoded, now)
            else:
                assert not isinstance(decoded, SoundLevels | BandLevels)
                self._accept_event(state, decoded, now)
        except DecodeError as exc:  # a conflicting event id: nothing of the message written
            self._reject(item.message, str(exc), exc.field)

    def _reject(self, message: Inbound, reason: str, field_name: str) -> None:
        now = self.clock.now()
        self.counters.rejected += 1
        field_key = field_name or "payload"
        if field_key not in self.counters.by_reason and len(self.counters.by_reason) >= MAX_REASON_KEYS:
            field_key = "other"  # field names come from the payload: the table stays bounded
        self.counters.by_reason[field_key] += 1
        site, sensor = sender_of(message.topic, self.prefix, self.site_configs)
        excerpt = message.payload[:200].decode("utf-8", "replace")
        rejection_id = self.store.append_rejection(site, message.topic, reason, excerpt, now)
        self._write_point(points.rejections, site, message.topic, reason, now, rejection_id)
        held = self.publish_gate.admit((site, sensor, ""))
        if held is not None:
            body: dict[str, Any] = {
                "ts": format_ts(now),
                "topic": message.topic,
                "reason": reason,
                "excerpt": excerpt,
            }
            if held:
                body["held_back"] = held
            # Not a configured site's: published on the "_" level, where the town reads it too.
            self.outgoing.add(UNATTRIBUTED_SITE if site == "*" else site, "rejected", body)
        self.log_gate.rejection(site, sensor, field_name, message.topic, reason)

    def _count_duplicate(self, site: str, sensor: str, kind: str, ts: datetime, journaled: bool) -> None:
        """Count a resend of a kept reading (a duplicate either way); a conflict if its content differs."""
        self.counters.duplicates += 1
        if journaled:
            self.counters.conflicts += 1
            self.log_gate.conflict(site, sensor, kind, ts)

    def _count_if_late(self, state: SiteState, minute: datetime, now: datetime) -> bool:
        """Whether data for ``minute`` is late (``_is_late``); a late one is counted.

        The site's first reading starts its judging at its minute (``_start_judging``).
        """
        if state.evaluated_until is None:
            self._start_judging(state, minute)
            return False
        late = self._is_late(state, minute, now)
        if late:
            self.counters.late += 1
        return late

    @staticmethod
    def _start_judging(state: SiteState, minute: datetime) -> None:
        state.evaluated_until = minute
        state.final_until = minute

    def _is_late(self, state: SiteState, minute: datetime, now: datetime) -> bool:
        """True if data for ``minute`` is late: the site's own data had moved on past the lateness.

        In data time (``closing.is_late``): a backlog read in order after an outage is not
        late. Late or not, a stored reading re-judges its minute if that was judged already
        (``_touched``).
        """
        if state.evaluated_until is None or minute >= state.evaluated_until:
            return False
        return minute_closing.is_late(
            minute, state.newest, now, timedelta(seconds=self.config.daemon.lateness_s)
        )

    @staticmethod
    def _touched(state: SiteState, minute: datetime, reach: timedelta = timedelta(0)) -> None:
        """A new reading was stored in ``minute``: re-judge the judged minutes that read it.

        ``reach``: how far after ``minute`` a judgement still reads it. A sliding noise
        window ending in the next minute reaches back into this one (the sound lookback).
        """
        if state.evaluated_until is None:
            return
        last = min(minute + reach, state.evaluated_until - MINUTE)
        while minute <= last:
            state.dirty_minutes.add(minute)
            minute += MINUTE

    def _heard_from(self, state: SiteState, sensor: str, ts: datetime, now: datetime) -> None:
        """A reading of ``sensor`` was stored: its health moves on (``HealthWatch.heard``: a sensor
        back online is journaled, written to the outbox and its offline alert cleared)."""
        arrived = now
        if self.clock.mode == "data":
            # Arrived as far as the data had got (this message's in), whatever the batch; a
            # return is said at the reading's own time, or at the last periodic step when it is
            # older (a backlog): the data clock's second would depend on which of the other
            # sensors' readings of that second happened to come in first.
            arrived = max(ts, self.clock.data_now or ts)  # (no data clock before the first data)
            now = ts if self.last_tick_at is None else max(ts, self.last_tick_at)
        self.health.heard(state.config.id, sensor, state.health.get(sensor), ts, now, arrived)

    def _accept_sound(
        self,
        state: SiteState,
        levels: SoundLevels,
        source: str,
        now: datetime,
        entry: SoundEntry | None = None,
    ) -> None:
        # Queued and written together at the end of the message (or batch): the hot path.
        minute = floor_minute(levels.ts)
        late = self._count_if_late(state, minute, now)
        self._pending_sound.append(tuple.__new__(PendingSound, (state, levels, source, late, minute, entry)))

    def _accept_ahead(self, part: list[Prepared], now: datetime) -> StagedFlush | None:
        """A part of a batch that is all sound records (the usual one) accepted and staged for
        the store before the write transaction: with two workers the drain is bound by the time
        each holds the store's write lock (docs/PERFORMANCE.md), and accepting a sound record
        touches memory only. None (nothing done) when the part holds anything else."""
        if any(item.source is None for item in part):
            return None
        for item in part:
            self._apply(item, now)
        return self._stage_flush(self.clock.now(), ahead=True)

    def _stage_flush(self, now: datetime, *, ahead: bool = False) -> StagedFlush | None:
        """The pending sound records made ready for the store: their minutes' recent windows
        loaded, and (``ahead``, before the write transaction) their rows made and chained
        (``Store.stage_sounds``)."""
        pending, self._pending_sound = self._pending_sound, []
        if not pending:
            return None
        touched = {(p.levels.site, p.minute) for p in pending}
        for site, minute in touched:
            self.sites[site].recent.ensure((minute,))  # before the store has the new readings
        entries = [p.entry or sound_entry(p.levels, p.source) for p in pending]
        sounds = self.store.stage_sounds(entries, [p.late for p in pending], now) if ahead else None
        return StagedFlush(pending, entries, sounds, now)

    def _flush_sound(
        self, now: datetime, *, defer: bool = False, staged: StagedFlush | None = None
    ) -> Callable[[], None] | None:
        """Store the pending sound records (in the current transaction), or those ``staged``
        ahead, then take them in: counted, into the recent windows, their minutes touched,
        clock, health and points.

        ``defer``: when taking them in writes nothing (every record new, each sensor online,
        no outbox: the usual batch), that is returned, not done, for the caller to run after
        the COMMIT. Two workers' drain is bound by the time each holds the store's write lock
        (docs/PERFORMANCE.md), and this memory-only part need not hold it.
        """
        if staged is None:
            staged = self._stage_flush(now)
            if staged is None:
                return None
        pending, now = staged.pending, staged.now
        stored = self.store.append_sounds(
            [(p.levels, p.source, p.late) for p in pending], now, staged.entries, staged.sounds
        )
        if defer and self._taken_in_memory(pending, stored):
            return lambda: self._take_in_committed(pending, now)
        receipt = time.monotonic()
        ends: dict[tuple[datetime, float], datetime] = {}  # a batch holds a few distinct periods
        for item, new in zip(pending, stored, strict=True):
            if new:
                self._take_in_sound(item, now, receipt, ends)
            else:
                conflict = self.store.sound_conflict(item.levels, item.source, now)
                self._count_duplicate(item.levels.site, item.levels.sensor, "sound", item.levels.ts, conflict)
        return None

    def _taken_in_memory(self, pending: list[PendingSound], stored: list[bool]) -> bool:
        """Whether taking ``pending`` in writes nothing: no duplicate (its conflict check
        journals), no sensor back online (journaled, its alert cleared) and no InfluxDB point
        (the outbox is in the store)."""
        if self.outbox_put is not None or not all(stored):
            return False
        for state, levels, *_ in pending:
            health = state.health.get(levels.sensor)
            if health is not None and not health.online:
                return False
        return True

    def _take_in_committed(self, pending: list[PendingSound], now: datetime) -> None:
        """Take in committed records (``_flush_sound``'s deferred part). A bug on one is logged
        and the rest go on: the message-by-message retry of handle_batch would count records
        already stored as duplicates. The recent windows are then reloaded from the store."""
        receipt = time.monotonic()
        ends: dict[tuple[datetime, float], datetime] = {}
        failed = False
        for item in pending:
            try:
                self._take_in_sound(item, now, receipt, ends)
            except Exception:  # a daemon never dies of one message
                failed = True
                log.exception(
                    "Internal error taking in the stored reading of %s/%s at %s; it is kept",
                    item.levels.site,
                    item.levels.sensor,
                    format_ts(item.levels.ts),
                )
        if failed:
            self._forget_recent_sound()

    def _take_in_sound(
        self, item: PendingSound, now: datetime, receipt: float, ends: dict[tuple[datetime, float], datetime]
    ) -> None:
        """A stored sound record taken in (``ends``: the batch's periods' ends, computed once)."""
        state, levels, _, late, minute, _ = item
        self.counters.accepted += 1
        state.recent.add(levels, minute)
        if state.evaluated_until is not None and minute < state.evaluated_until:  # judged already
            self._touched(state, minute, state.margins("sound")[0])
        end = ends.get((levels.ts, levels.duration_s))
        if end is None:
            end = ends[(levels.ts, levels.duration_s)] = levels.end
            self.clock.observe(end)
        state.last_receipt = receipt
        if state.newest is None or end > state.newest:
            state.newest = end
        self._heard_from(state, levels.sensor, levels.ts, now)
        self._write_point(points.sound, levels, late)

    def _accept_audio(self, state: SiteState, block: AudioBlock, now: datetime) -> None:
        block_row = (block.site, block.sensor, block.ts, block.seq, block.sample_rate, block.sample_format)
        stored = self.store.append_audio(*block_row, block.pcm, now)
        if not stored.stored:
            conflict = self.store.audio_conflict(*block_row, block.pcm, now)
            self._count_duplicate(block.site, block.sensor, "audio", block.ts, conflict)
            return
        sensor = state.config.sensor(block.sensor)
        assert sensor is not None
        offset = state.offsets.get(block.sensor)
        for levels in state.audio.levels(block, sensor.calibration.full_scale_db):
            self._accept_sound(state, calibrated(levels, offset), "audio", now)

    def _accept_reading(
        self,
        state: SiteState,
        reading: LightSummary | WeatherReading | TurbidityReading | SensorStatus,
        now: datetime,
    ) -> None:
        status = isinstance(reading, SensorStatus)  # a heartbeat has no minute to judge
        late = False if status else self._count_if_late(state, floor_minute(reading.ts), now)
        payload = payload_of(reading)
        stored = self.store.append_reading(reading, payload, late=late, now=now)
        if not stored.stored:
            conflict = self.store.reading_conflict(reading, payload, now)
            self._count_duplicate(
                reading.site, reading.sensor, READING_KIND[type(reading)], reading.ts, conflict
            )
            return
        self.counters.accepted += 1
        self._heard_from(state, reading.sensor, reading.ts, now)
        if isinstance(reading, SensorStatus):
            self.health.on_status(state.config.id, reading, now)
            return
        self._touched(state, floor_minute(reading.ts))
        self.clock.observe(reading.end)
        state.last_receipt = time.monotonic()
        if state.newest is None or reading.end > state.newest:
            state.newest = reading.end
        if isinstance(reading, LightSummary):
            # Kept for the minutes still to be judged and those late data may re-judge.
            judged = min(self.clock.now(), state.final_until or now)
            state.cache_light(reading, judged, timedelta(seconds=self.config.daemon.lateness_s))
        self._write_point(points.reading, reading, late)

    def _accept_seismic(
        self, state: SiteState, message: WaveformChunk | SeismicSummary, now: datetime
    ) -> None:
        """A seismograph's waveform chunk or summary (monitor/daemon/seismic_intake.py)."""
        if isinstance(message, WaveformChunk):
            taken = seismic_intake.take_chunk(self.store, message, now)
        else:
            taken = seismic_intake.take_summary(self.store, message, now)
        if taken.appended.conflict:  # nothing of the message written
            field_name, _, reason = taken.appended.conflict.partition(": ")
            raise DecodeError(field_name, reason)
        if not taken.appended.stored:
            self.counters.duplicates += 1
            return
        self.counters.accepted += 1
        self._heard_from(state, message.sensor, message.ts, now)
        if taken.disagreements:
            self._summaries_disagree(message.site, message.sensor, taken, now)
        if taken.summary_at is not None:  # an event summary to judge (again)
            ts, duration = taken.summary_at
            self._count_if_late(state, floor_minute(ts), now)
            self._touched(state, floor_minute(ts))
            self.clock.observe(ts + timedelta(seconds=duration))

    def _summaries_disagree(self, site: str, sensor: str, taken: seismic_intake.Taken, now: datetime) -> None:
        """A seismograph's summary that its own waveforms do not bear out: a data-quality alert to
        the operator and the Town (the record is judged on the daemon's summary all the same)."""
        found = taken.disagreements
        self.alerts.raise_(
            Alert(
                site,
                ("operator", "town"),
                "seismic_summary_disagreement",
                "warning",
                f"seismic-summary:{sensor}:{taken.event_id}",
                f"Seismograph {sensor} event {taken.event_id!r}: its own summary disagrees with the one"
                f" recomputed from its waveforms ({'; '.join(d.text() for d in found)}); the event is"
                " judged on the waveforms'",
                {
                    "sensor": sensor,
                    "event_id": taken.event_id,
                    "disagreements": [
                        {"quantity": d.quantity, "edge": d.edge, "daemon": d.daemon, "unit": d.unit}
                        for d in found
                    ],
                },
            ),
            now,
        )

    def _accept_event(self, state: SiteState, event: Event, now: datetime) -> None:
        payload = payload_of(event)
        stored = self.store.append_event(event, payload, now)
        if stored.conflict:
            raise DecodeError("id", stored.conflict.removeprefix("id: "))
        if not stored.stored:
            self.counters.duplicates += 1
            return
        self.counters.accepted += 1
        state.events.append(event)
        span = event_span(event)
        # An event can change the verdict on minutes already judged (a blast record
        # arriving after the impulse, a work period declared afterwards).
        if state.evaluated_until is not None:
            lookback, lookahead = state.margins()
            first = floor_minute(span.start - lookahead)
            last = floor_minute(span.until + lookback)
            minute = max(first, state.evaluated_until - timedelta(seconds=self.config.daemon.lateness_s))
            while minute < min(last + MINUTE, state.evaluated_until):
                state.dirty_minutes.add(minute)
                minute += MINUTE
        self._write_point(points.events, event)

    # ------------------------------------------------------------------ periodic work

    def tick(self) -> None:
        if self.clock.mode == "data" and self.clock.data_now is None:
            # No data, no time yet. Stamping the wall clock on the periodic work here would put
            # the next anchor and status after a simulated past day's data, never reached.
            return
        now = self.clock.now()
        if self.clock.mode == "data":
            # Data time moves by as much as a batch holds between two ticks (minutes, when a
            # simulation runs at full speed). Doing the periodic work every half data minute, as
            # a real-time daemon would (the half lets early warnings see a minute so far), makes
            # what is judged, alerted and noticed when (the times notices and alerts carry)
            # follow the data, not how it was batched: the same simulation gives the same record.
            # Once the data stops, the work is done at its end.
            self._step_data_clock(now)
            if now == self.last_data_now and self.walk_left is None:  # (a stop's walk: the next start's)
                self._periodic(now)
            self.last_data_now = now
            return
        self._periodic(now)

    def _next_data_step(self) -> datetime | None:
        """The data clock's next periodic step: one after the last done, or before any, one after
        the minute its data started (None: no data yet)."""
        if self.last_tick_at is not None:
            return self.last_tick_at + DATA_STEP
        if self.clock.data_start is not None:
            return floor_minute(self.clock.data_start) + DATA_STEP
        return None

    def _step_data_clock(self, until: datetime) -> None:
        """The data clock's periodic work at each step before ``until`` not yet done.

        A step is done once data beyond it are in (``until``, the data clock, past it), so it
        sees every reading that ends at it that came in before: not only those of the sensors
        whose reading happened to be handled first.
        """
        if self.clock.mode != "data" or self.clock.data_now is None:
            return
        if self.last_tick_at is None:
            self.last_tick_at = floor_minute(self.clock.data_start or until)
        step = self.last_tick_at + DATA_STEP
        while step < until:
            if self.walk_left is not None or (until - step > WALK_LEFT_AT_STOP and self.stopping()):
                self._leave_walk(step, until)
                return
            self._periodic(step)
            self.last_tick_at = step
            step += DATA_STEP

    def _leave_walk(self, step: datetime, until: datetime) -> None:
        """A stop during a long walk (a jump of days: some 3 ms a step) ends it here, so the daemon
        stops at once. The minutes not yet judged stay in the store's progress: the next start
        judges them, its data clock starting from the newest stored data."""
        if self.walk_left is None:
            self.walk_left = step
            log.info(
                "Stopping: the data clock's periodic work from %s to %s is left to the next start",
                format_ts(step),
                format_ts(until),
            )

    def _periodic(self, now: datetime) -> None:
        """The judging, recording and announcing due at ``now``; StoreUnwritable as handle_batch's."""
        try:
            self._periodic_work(now)
        except Exception as exc:
            if outage := unwritable(exc, self.store.path):
                raise outage from exc
            raise

    def _site_rounds(self, site: str, what: str) -> FailingRounds:
        """A site's judging or periodic work that fails tick after tick (a bug, a record it
        cannot read): logged with its traceback once, then every 10 minutes, not every second."""
        key = (site, what)
        rounds = self._failing.get(key)
        if rounds is None:
            rounds = self._failing[key] = FailingRounds(log, f"{what} for site {site!r}", traceback=True)
        return rounds

    def _periodic_work(self, now: datetime) -> None:
        # The rules read committed data and write nothing: they run before the write
        # transaction, which other workers' batches take meanwhile.
        judgements: dict[str, Judgement] = {}
        for state in self.sites.values():
            try:
                judgements[state.config.id] = self._judge(state, now)
            except Exception as exc:  # one site's failure must not stop the others, or ingestion
                self._site_rounds(state.config.id, "Judging").failed(exc)
        self.behind = any(judgement.behind for judgement in judgements.values())
        with self._write_transaction(tick=True):
            # Notice changes made by the town with `minewatch notices` (another process),
            # and deliveries that gave up, are announced by the daemon, the chain's one writer.
            for event in self.notices.take_announcements(now, self.announce_sites):
                self.announcer.notice_event(event, now)
            for failed in self.deliveries.claim_undeliverable():
                self.alerts.raise_(failed.alert, now, dedupe=False)
            for state in self.sites.values():
                judgement = judgements.get(state.config.id)
                if judgement is None:
                    continue
                try:
                    with self.outgoing.unit(self.store.savepoint()):
                        self._record(state, judgement, now)
                        for event in self.notices.remind(state.config, state.profile, now):
                            self.announcer.notice_event(event, now)
                        self._check_silence(state, now)
                        self.announcer.status(state, now, self.config.daemon.status_interval_s)
                        self.announcer.anchor(state, now, self.config.daemon.anchor_interval_s)
                except Exception as exc:  # one site's failure must not stop the others, or ingestion
                    if unwritable(exc, self.store.path):
                        raise  # every site's, and the transaction's: the caller waits for the store
                    self._site_rounds(state.config.id, "Periodic work").failed(exc)
                else:
                    self._site_rounds(state.config.id, "Judging").worked()
                    self._site_rounds(state.config.id, "Periodic work").worked()
                self._keep_sound_hours(state)
        self.outgoing.flush()
        if now - self.last_prune >= PRUNE_INTERVAL:
            self.last_prune = now
            # Per-second readings expire after storage.retention_days; findings, events,
            # notices and the chain (with the readings' digests) are kept.
            removed = self.store.prune(
                now - timedelta(days=self.config.storage.retention_days),
                blast_records_before=now - BLAST_RECORDS_KEPT,  # SPS 307.31(4): at least 3 years
            )
            self.pruned_before = now - timedelta(days=self.config.storage.retention_days)
            if removed:
                log.info("Pruned %d readings older than %g days", removed, self.config.storage.retention_days)

    def _keep_sound_hours(self, state: SiteState) -> None:
        """Count the site's hours of sound before the one its data has reached into the store's
        hourly histograms (``Store.keep_sound_hours``): once per hour of data. In a savepoint of
        its own: a failure of this derived table is logged and leaves the judgements recorded."""
        if state.newest is None:
            return
        hour = to_us(state.newest) // HOUR_US  # still receiving seconds: counted from the next on
        if state.sound_hours_until is not None and hour <= state.sound_hours_until:
            return
        rounds = self._site_rounds(state.config.id, "Counting the hourly sound levels")
        try:
            with self.store.savepoint():
                state.sound_hours_until = self.store.keep_sound_hours(state.config.id, hour)
        except Exception as exc:
            if unwritable(exc, self.store.path):
                raise  # every site's, and the transaction's: the caller waits for the store
            rounds.failed(exc)
        else:
            rounds.worked()

    def _judge(self, state: SiteState, now: datetime) -> Judgement:
        """The findings for the site's minutes that have closed (and the touched ones due again).

        Reads the store and the site's recent data; changes nothing: ``_record`` keeps the
        result, so a judgement that is not recorded (a failed transaction) is made again.
        """
        if state.evaluated_until is None or state.final_until is None:
            return Judgement([], None, None, rejudged=False)
        _, lookahead = state.margins()
        closed = self._closed_until(state, now)
        minutes: set[datetime] = set()
        # Late data trickling into judged minutes re-judges them at most every few seconds,
        # not once per batch.
        rejudged = bool(state.dirty_minutes) and now - state.last_reevaluation >= REEVALUATION_INTERVAL
        if rejudged:
            minutes = self._rejudgeable(state, state.dirty_minutes)
        m, f = state.evaluated_until, state.final_until
        behind = False
        if closed is not None:
            ready = floor_minute(closed)  # minutes before this have closed
            first_to = min(ready, m + LOOKS_PER_TICK * MINUTE)
            while m + MINUTE <= first_to:
                minutes.add(m)
                m += MINUTE
            final_ready = floor_minute(closed - lookahead)
            final_to = min(final_ready, f + LOOKS_PER_TICK * MINUTE)
            while f + MINUTE <= final_to and f < m:
                minutes.add(f)  # second look once the lookahead (late blast records, trucks) has passed
                f += MINUTE
            behind = m + MINUTE <= ready or (f + MINUTE <= final_ready and f < m)
        old_light = state.old_light(self.store, minutes)
        findings = []
        for minute in sorted(minutes):
            data = site_data(state, self.store, minute, minute + MINUTE, old_light)
            findings.append(
                (
                    minute,
                    rules.evaluate_site(
                        state.config.context(), state.profile, data, minute, minute + MINUTE, now
                    ),
                )
            )
        return Judgement(findings, m, f, rejudged, behind)

    def _record(self, state: SiteState, judgement: Judgement, now: datetime) -> None:
        """Keep a judgement (``_judge``) in the store and move the site's progress on."""
        if judgement.rejudged:
            state.last_reevaluation = now
            state.dirty_minutes.clear()
        for minute, findings in judgement.findings:
            self.counters.findings += self.announcer.record_findings(state, minute, findings, now)
        m, f = judgement.evaluated_until, judgement.final_until
        if m is None or f is None:
            return
        if m != state.evaluated_until or f != state.final_until:
            if state.final_until is not None and f > state.final_until:
                self.store.record_judged(state.config.id, state.final_until, f)  # the reports' "judged"
            state.evaluated_until, state.final_until = m, f
            self.store.set_progress(state.config.id, m, f)
        # Minutes before the final look's lookback are read again only for late data.
        state.recent.forget_before(min(f, m) - state.margins("sound")[0] - MINUTE)
        if now - state.last_warning_check >= REEVALUATION_INTERVAL:
            state.last_warning_check = now
            self.announcer.early_warnings(state, now)

    def _closed_until(self, state: SiteState, now: datetime) -> datetime | None:
        """Time before which the site's minutes are complete enough to judge (``closing.closed_until``).

        Follows the data, not the wall clock: after an outage the broker's backlog is read
        oldest first and each minute is judged once its data has been read, however long
        the outage. "Quiet" (nothing for the site for QUIET_S wall seconds) counts only while
        the input is connected, has nothing in hand and is not reading a backlog
        (``closing.is_quiet``): until then the broker may still hold the site's data.
        """
        wall = time.monotonic()
        stream = max((s.newest for s in self.sites.values() if s.newest is not None), default=None)
        lateness = timedelta(seconds=self.config.daemon.lateness_s)
        quiet = minute_closing.is_quiet(
            site_silent_s=wall - state.last_receipt,
            input_silent_s=wall - max(s.last_receipt for s in self.sites.values()),
            connected_s=None if self.input_since is None else wall - self.input_since,
            pending=self.input_pending,
            live=self.clock.mode == "wall" and stream is not None and stream >= now - lateness,
            quiet_s=QUIET_S,
        )
        return minute_closing.closed_until(state.newest, stream, now, lateness, quiet=quiet)

    def set_input(self, connected: bool, pending: int) -> None:
        """The input's state, from the run loop: connected to the broker, messages in hand."""
        if not connected:
            self.input_since = None
        elif self.input_since is None:
            self.input_since = time.monotonic()
        self.input_pending = pending

    def _rejudgeable(self, state: SiteState, dirty: set[datetime]) -> set[datetime]:
        """The dirty minutes whose readings are still in the store (not pruned by retention)."""
        if self.pruned_before is None:
            return set(dirty)
        floor = self.pruned_before + state.margins("sound")[0]
        kept = {m for m in dirty if m >= floor}
        if len(kept) < len(dirty):
            log.warning(
                "Site %s: %d minute(s) touched by late data are older than the retention"
                " (readings before %s pruned); not re-judged",
                state.config.id,
                len(dirty) - len(kept),
                format_ts(self.pruned_before),
            )
        return kept

    def _enqueue_delivery(self, body: dict[str, Any]) -> None:
        if self.deliveries.enqueue(body, self.clock.now()):
            self.deliveries_pending = True

    def _check_silence(self, state: SiteState, now: datetime) -> None:
        if self.clock.mode == "data" and self.clock.data_now is None:
            return  # no data yet: no "now" to measure silence against
        data_start = self.clock.data_start if self.clock.mode == "data" else None
        self.health.check_silence(state.config, state.health, now, data_start)

    # ------------------------------------------------------------------ outputs

    def _write_point(self, make: Callable[P, str | None], /, *args: P.args, **kwargs: P.kwargs) -> None:
        """Queue the InfluxDB point ``make(*args)`` (``monitor.influx.points``) in the outbox, in the current
        transaction; without an outbox (no InfluxDB configured) no point is made."""
        if self.outbox_put is None:
            return
        point = make(*args, **kwargs)
        if point is not None:
            self.outbox_put([point])

    def _publish_alert(self, site: str, body: dict[str, Any]) -> None:
        self.outgoing.add(site, "alerts", body)
        self._write_point(points.alerts, site, body)


# --------------------------------------------------------------------------- helpers


def _data_time(decoded: Message | DecodeError) -> datetime | None:
    """How far a message moves the data clock once stored (None: not at all, or not known
    before it is stored)."""
    if isinstance(decoded, SoundLevels | LightSummary | WeatherReading | TurbidityReading):
        return decoded.end
    if isinstance(decoded, AudioBlock):
        return decoded.ts + timedelta(seconds=decoded.n_samples / decoded.sample_rate)
    return None


# --------------------------------------------------------------------------- the process


def run(config: Config, *, stop: threading.Event, partition: Partition | None = None) -> int:
    """`minewatch run`: wire everything, run until ``stop`` (set by SIGTERM/SIGINT from the
    command's start: monitor.daemon.stopping), shut down cleanly. A stop asked for before the
    broker is connected ends the start there (stopped_while_starting).

    ``partition``: this process is one worker of several (monitor.daemon.workers), ``config`` already
    narrowed to its sites; the outputs shared by all sites run in the leader only.
    """
    if stop.is_set():  # while the command loaded this module
        return stopped_while_starting()
    # Outputs first: the store, the outbox and its forwarder exist before any message arrives.
    store = Store(config.storage.path)
    store.checkpoint_in_background()
    if partition is not None:  # workers write back to back: queue for the lock, not sleep
        store.take_turns()
    leader = partition is None or partition.leader
    # Points are written to the outbox inside the store's own transactions.
    outbox_put = None if config.storage.influxdb is None else Outbox(store.conn).put
    inbound = Handoff(config.daemon.queue_size)
    prefix = config.broker.topic_prefix
    sites = [s.id for s in config.owned_sites]
    topics = input_filters(sites, prefix)
    clock = Clock(config.daemon.clock)

    def publish(topic: str, payload: bytes, retain: bool) -> None:
        link.publish(topic, payload, retain=retain)

    def remake() -> Pipeline:
        """A pipeline from what the store holds; StoreUnwritable while it refuses writes."""
        try:
            made = Pipeline(config, store, publish, clock, outbox_put)
        except Exception as exc:
            if outage := unwritable(exc, store.path):
                raise outage from exc
            raise
        if partition is not None:  # notice changes for the other workers' sites are theirs to announce
            made.announce_sites = frozenset(sites)
        made.stopping = stop.is_set
        return made

    told = DaemonState(publish, prefix, sites)  # the retained …/daemon, once the link starts
    outages = StoreOutage(stop, remake, told=told)
    try:
        pipeline = remake()
    except StoreUnwritable as at_start:  # a full disk at the start: wait, as for one later
        started = outages.wait(at_start, 0)
        if started is None:
            store.close()
            return 0
        pipeline = started
    if stop.is_set():  # before the forwarder, the deliveries and the broker start
        store.close()
        return stopped_while_starting()
    forwarder = None
    forwarder_record = None
    if config.storage.influxdb is not None and leader:  # one reader of the outbox, whoever wrote to it
        # The forwarder reads the same table through a connection of its own thread.
        writing = InfluxForwarder.from_config(Outbox.open(config.storage.path), config.storage.influxdb)
        writing.start()
        forwarder = writing
        # Its state for `status`, written here: the store's connection is this thread's.
        forwarder_record = ForwarderRecorder(lambda: writing.stats, store.set_meta)
    # A refused login stops the daemon (raised as LoginRefused below): no retry can fix it.
    link: MqttLink = MqttLink(config.broker, topics, inbound, pipeline.predecode, lambda _: stop.set())
    # "not connected since" for `status`: one row per worker
    meta_key = META_KEY if partition is None else partition.link_key
    link_record = LinkRecorder(link.watch, lambda _, value: store.set_meta(meta_key, value))
    link_record.poll()
    # One sender of the alert deliveries (the leader): with more, an alert would go out once each.
    deliveries = DeliveryWorker(config.storage.path, config, publish, clock.now) if leader else None
    if deliveries is not None:
        deliveries.start()
    freeze_startup_objects()
    told.started()  # queued until the link connects
    link.start()
    log.info("minewatch running for %s; store %s", ", ".join(sites), config.storage.path)
    for gap in profile_citation_gaps(config.owned_sites):  # said, not refused: see check-config
        log.warning("Citation key missing: %s", gap)
    for unjudged in area_not_given(config.owned_sites):
        log.warning("Standard not judged: %s", unjudged)
    # The whole file's, not a partition's: said once, by the leader.
    for key in template_placeholders(config.raw_text) if leader else ():
        log.warning("%s", placeholder_warning(key))
    last_tick = 0.0
    held: list[Inbound] = []  # taken and not stored: the store refused writes
    writable = True
    try:
        while not stop.is_set():
            # Minutes left by the last tick are judged at the next turn, without waiting for input.
            batch = held or inbound.take(timeout=0.0 if pipeline.behind else 0.2, limit=BATCH_LIMIT)
            held, took = [], bool(batch)
            changes = store.conn.total_changes
            try:
                if batch:
                    pipeline.handle_batch(batch)
                    link.ack(batch)
                    batch = []
                if time.monotonic() - last_tick >= 1.0 or not took:
                    # Minutes close on silence only while the broker is reachable and nothing
                    # is in hand: until then it may hold the sites' data (closing.py).
                    pipeline.set_input(link.connected, len(inbound))
                    pipeline.tick()
                    last_tick = time.monotonic()
                if pipeline.deliveries_pending:
                    pipeline.deliveries_pending = False
                    if deliveries is not None:  # else the leader finds them on its next round
                        deliveries.wake()
                link_record.poll()
                if forwarder_record is not None:
                    forwarder_record.poll()
                if store.conn.total_changes != changes:  # a write committed: an outage is over
                    outages.stored(store.path)
            except Exception as exc:
                outage = unwritable(exc, store.path)
                if outage is None:
                    raise
                link.ack(batch[: outage.stored])
                held = batch[outage.stored :]
                remade = outages.wait(outage, len(held) + len(inbound))
                if remade is None:
                    writable = False
                    break
                pipeline = remade
    finally:
        # Reverse order: stop taking messages, finish those in hand, flush, disconnect.
        link.stop_accepting()
        rest = inbound.take(timeout=0.0, limit=len(inbound))  # (a full handoff holds the network thread)
        if writable:  # else what is in hand stays unacknowledged, with the broker
            try:
                if rest:
                    pipeline.handle_batch(rest)
                    link.ack(rest)
                pipeline.tick()
                if pipeline.behind:
                    log.info(
                        "Stopping: closed minutes not judged yet are the next start's,"
                        " from the store's progress"
                    )
            except StoreUnwritable as outage:
                log.error("%s: what was in hand and not stored stays with the broker", outage)
        if deliveries is not None:  # what it could not send stays pending for the next start
            deliveries.stop(timeout=5.0)
        told.stopped()
        time.sleep(0.2)  # let paho send the last acks and publishes
        link.close()
        try:
            link_record.poll()
        except Exception as exc:
            if not unwritable(exc, store.path):
                raise
        if forwarder is not None:
            if not forwarder.flush(timeout=5.0):
                log.warning("InfluxDB backlog not fully written; it stays in the outbox for the next start")
            forwarder.close()
        if forwarder_record is not None:
            try:
                forwarder_record.stopped()
            except Exception as exc:
                if not unwritable(exc, store.path):
                    raise
        store.close()
        c = pipeline.counters
        log.info(
            "Stopped: %d received, %d accepted, %d duplicates, %d rejected, %d findings;"
            " %.1f s waiting for the store's write lock (%.1f s of it before a tick's transaction),"
            " %.1f s holding it",
            c.received,
            c.accepted,
            c.duplicates,
            c.rejected,
            c.findings,
            c.lock_wait_s,
            c.tick_lock_wait_s,
            c.lock_held_s,
        )
    if link.fatal is not None:
        raise LoginRefused(link.fatal)
    return 0
