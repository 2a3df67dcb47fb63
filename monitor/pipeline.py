"""The daemon's pipeline, wired in one place.

    broker ──► ingest.MqttLink ──► ingest.Handoff ──► Pipeline.handle_batch (one thread)
               (levels decoded ahead: wire_levels.predecode)  │
          wire.decode ──┬── rejected ──► store.rejections ─────────────────► …/{site}/rejected
                        └── accepted ──► audio/bands ─► acoustics ─► SoundLevels
                                         store.append_* (+ hash chain, + Influx outbox)
                                         recent.RecentSound (the sound the rules read)
                                         ─── COMMIT ──► ack to broker
          Pipeline.tick (after each batch, and on idle):
             closed minutes ─► rules.evaluate_site ─► findings ─► store ─► …/violations, …/findings
                                                        └─► alerts (town, operator)  ─► …/alerts
             early warnings, sensor health (offline/online), retained …/status, chain anchors …/anchors
    outbox ──► influx.InfluxForwarder (own thread) ──► InfluxDB

Start order: store and outputs first, then the broker subscription, so nothing
is received before its consumer exists. Shutdown in reverse: stop accepting,
finish the messages in hand, flush the outbox, disconnect (see ``run``).
"""

from __future__ import annotations

import bisect
import json
import logging
import math
import signal
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from types import FrameType
from typing import Any

import numpy as np

import rules
from monitor import acoustics, closing
from monitor.alerts import AlertBook
from monitor.canonical import from_us, to_us
from monitor.chain import SOUND_FIELDS
from monitor.config import Config, SiteConfig
from monitor.delivery import Deliveries, DeliveryWorker
from monitor.errors import DecodeError
from monitor.evidence import evidence_texts
from monitor.influx import InfluxForwarder, line
from monitor.ingest import Handoff, Inbound, MqttLink
from monitor.linkstate import LinkRecorder, LoginRefused
from monitor.notices import NoticeBook, NoticeEvent
from monitor.outbox import Outbox
from monitor.recent import MINUTE, RecentSound, floor_minute
from monitor.render import notice_payload_json
from monitor.runtime import freeze_startup_objects
from monitor.status import site_status  # the retained status message (also `minewatch status`)
from monitor.store import READING_KIND, Store, event_kind
from monitor.wire import (
    AUDIO_FORMATS,
    AudioBlock,
    BandLevels,
    Limits,
    Message,
    check_time,
    decode,
    finding_from_json,
    finding_to_json,
    format_ts,
    output_topic,
    payload_of,
    reading_from_row,
    shown,
)
from monitor.wire_levels import Parsed, levels_sender, predecode
from rules.model import (
    Blast,
    BlastNotice,
    Event,
    Finding,
    FindingKind,
    GenericEvent,
    LightSummary,
    SensorStatus,
    SiteData,
    SoundLevels,
    TemporaryLighting,
    TruckPassage,
    TurbidityReading,
    WeatherReading,
    WorkPeriod,
)
from rules.profile import Profile, load_profile

log = logging.getLogger("minewatch.pipeline")

BATCH_LIMIT = 10_000  # messages per transaction: one commit (one fsync) amortised over many
EVENT_HISTORY = timedelta(days=400)  # a year of temporary-lighting days, with room
NEVER = datetime.min.replace(tzinfo=UTC)
PRUNE_INTERVAL = timedelta(hours=1)
LIGHT_BURSTS_KEPT = timedelta(hours=1)  # raw light bursts stay in the in-memory cache this long
BURST_LOOKBACK = timedelta(minutes=15)  # at least the flashing rule's lookback (Dovre: 3 minutes)
QUIET_S = 10.0  # wall seconds without a reading for a site (input up, none in hand): as complete as it gets
REEVALUATION_INTERVAL = timedelta(seconds=5)  # between re-judging late-touched minutes / early warnings
TOWN_KINDS = frozenset(
    {
        FindingKind.VIOLATION,
        FindingKind.SAFETY_EXCEPTION,
        FindingKind.UNREPORTED_BLAST,
    }
)
LOG_GATE_S = 60.0  # a rejection log line per gate key per minute
MAX_LOG_GATES = 1024
MAX_GATES_PER_SENSOR = 16  # field names come from the payload: a sensor's distinct keys are capped
MAX_REASON_KEYS = 64  # distinct Counters.by_reason keys; the rest count as "other"
UNATTRIBUTED_SITE = "_"  # the site level of …/rejected for topics of no configured site
EVENT_REF_KINDS = frozenset({"blast", "blast-notice", "truck", "work", "temporary-lighting", "event"})
Publish = Callable[[str, bytes, bool], None]  # topic, payload, retain


class Clock:
    """Wall clock, or (``clock = "data"``) the newest accepted timestamp, for simulations.

    The data clock is not kept apart: the store holds every accepted reading, so the
    pipeline sets it on start-up from the newest stored one (``Store.newest_data_end``) and
    a restart continues where the data was, not at the wall clock.
    """

    def __init__(self, mode: str, wall: Callable[[], datetime] | None = None) -> None:
        self.mode = mode
        self.wall = wall or (lambda: datetime.now(UTC))
        self.data_now: datetime | None = None

    def now(self) -> datetime:
        if self.mode == "data":
            return self.data_now or self.wall()
        return self.wall()

    def observe(self, ts: datetime) -> None:
        if self.mode == "data" and (self.data_now is None or ts > self.data_now):
            self.data_now = ts


@dataclass
class SensorHealth:
    last_seen: datetime
    online: bool = True
    offline_since: datetime | None = None
    town_alerted: bool = False


@dataclass
class SiteState:
    config: SiteConfig
    profile: Profile
    recent: RecentSound  # the recent minutes' sound readings, mirrored from the store
    events: list[Event] = field(default_factory=list)
    evaluated_until: datetime | None = None  # minutes before this had a first evaluation
    final_until: datetime | None = None  # ... and before this their final one (lookahead passed)
    dirty_minutes: set[datetime] = field(default_factory=set)  # late data landed in these
    health: dict[str, SensorHealth] = field(default_factory=dict)
    meters: dict[str, acoustics.SoundLevelMeter] = field(default_factory=dict)
    meter_next: dict[str, datetime] = field(default_factory=dict)  # expected ts of the next audio block
    last_status: datetime | None = None
    last_anchor: datetime | None = None
    warned_minutes: set[tuple[str, datetime]] = field(default_factory=set)
    # Light summaries over the longest light lookback (the upward-light baseline wants days
    # of them, too many to re-read from SQLite every minute); sorted by time.
    light: list[LightSummary] = field(default_factory=list)
    newest: datetime | None = None  # end of the newest reading stored for the site: its data's progress
    last_receipt: float = field(default_factory=time.monotonic)  # of the newest reading, wall
    # The light cache holds every summary from light_kept_from, with its raw burst from
    # bursts_kept_from; a minute judged further back reads its light from the store.
    light_kept_from: datetime = NEVER
    bursts_kept_from: datetime = NEVER
    last_reevaluation: datetime = NEVER
    last_warning_check: datetime = NEVER

    margin_cache: dict[str | None, tuple[timedelta, timedelta]] = field(default_factory=dict)
    offsets: dict[str, float] = field(init=False)  # calibration offsets (dB) of the sensors that have one

    def __post_init__(self) -> None:
        self.offsets = {s.id: s.calibration.offset_db for s in self.config.sensors if s.calibration.offset_db}

    def margins(self, kind: str | None = None) -> tuple[timedelta, timedelta]:
        """(lookback, lookahead) of reading data the profile's rules need; fixed, so asked once."""
        if kind not in self.margin_cache:
            self.margin_cache[kind] = rules.data_margins(self.profile, kind)
        return self.margin_cache[kind]


@dataclass
class Counters:
    received: int = 0
    accepted: int = 0
    duplicates: int = 0
    conflicts: int = 0  # duplicates whose content differs from the kept reading (journaled)
    rejected: int = 0
    late: int = 0
    findings: int = 0
    by_reason: dict[str, int] = field(default_factory=lambda: defaultdict(int))


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
        self._levels_senders: dict[str, tuple[str, str]] = {}  # topic -> (site, sensor), for predecode
        # Where each site's data had got to: closing continues from there, and so does the
        # data clock (without it "now" would fall back to the wall clock after a restart).
        newest = {s.id: store.newest_data_end(s.id, [x.id for x in s.sensors]) for s in config.owned_sites}
        for end in newest.values():
            if end is not None:
                clock.observe(end)
        self.input_since: float | None = time.monotonic()  # input connected since (None: down)
        self.input_pending = 0  # messages received and not yet handled
        pruned = store.meta("pruned_before_us")
        self.pruned_before: datetime | None = None if pruned is None else from_us(int(pruned))
        now = clock.now()
        for site in config.owned_sites:
            profile = load_profile(site.profile, site.agreement)
            state = SiteState(site, profile, RecentSound(site.id, store.sound_between))
            state.newest = newest[site.id]
            state.events = store.events_since(site.id, now - EVENT_HISTORY)
            progress = store.progress(site.id)
            if progress:
                state.evaluated_until, state.final_until = progress
            state.health = {s.id: SensorHealth(now) for s in site.sensors}
            light_back, _ = state.margins("light")
            # From what the next minute to judge needs (a restart may be behind the clock).
            light_from = min(now, state.final_until or now) - light_back - MINUTE
            state.light_kept_from = light_from
            state.light = [
                reading_from_row(r)
                for r in store.readings_between(site.id, "light", light_from, now + EVENT_HISTORY)
            ]
            self.sites[site.id] = state
        self.generic_kinds = {
            s: frozenset(getattr(st.profile, "event_kinds", ())) for s, st in self.sites.items()
        }
        self.alerts = AlertBook(store, config.alerts, self._publish_alert)
        self.notices = NoticeBook(store)
        self.deliveries = Deliveries(store.conn, config)
        # Every raised alert is queued for delivery in the same transaction that journals it.
        self.alerts.listeners.append(lambda body: self._enqueue_delivery(body))
        self.deliveries_pending = False
        self._outgoing: list[tuple[str, bytes, bool]] = []
        self.last_prune = NEVER
        self._pending_sound: list[tuple[SiteState, SoundLevels, str, bool, datetime]] = []
        # (site, sensor, field) -> [monotonic time of the last line, lines suppressed since]
        self._log_gate: dict[tuple[str, str, str], list[Any]] = {}
        with store.batch():  # the profile and configuration every finding from now on is judged under
            for site in config.owned_sites:
                store.append_config_record(site.id, *evidence_texts(config, site), now)

    # ------------------------------------------------------------------ messages

    def limits(self) -> Limits:
        if self.clock.mode != "data":
            return self._wall_limits
        # The data defines "now": nothing is in the future, and "too old" is measured
        # from the newest accepted timestamp once there is one.
        d = self.config.daemon
        past = d.max_age_s if self.clock.data_now is not None else math.inf
        return Limits(math.inf, past, d.max_payload_bytes)

    def predecode(self, topic: str, payload: bytes) -> SoundLevels | Parsed | None:
        """wire_levels.predecode for this configuration, from the network thread (its only caller)."""
        sender = self._levels_senders.get(topic)
        if sender is None:
            sender = levels_sender(topic, self.site_configs, self.prefix)
            if sender is None:
                return None
            self._levels_senders[topic] = sender  # configured sensors' topics only: bounded
        return predecode(payload, *sender, self.config.daemon.max_payload_bytes)

    def handle_batch(self, messages: Sequence[Inbound]) -> None:
        """Decode, store and commit one batch; outputs go out only after the commit."""
        try:
            with self.store.batch():
                # One clock reading for the batch (a fraction of a second of messages): the
                # time checks allow seconds, and in data-clock mode it only moves at the flush.
                now = self.clock.now()
                for message in messages:
                    self._handle_one(message, now)
                self._flush_sound(self.clock.now())
        except Exception:
            # A bug on one message: redo the batch one savepoint per message, so that
            # message alone is rolled back and rejected and the rest are kept.
            log.exception("Internal error in a batch; retrying it message by message")
            self._outgoing.clear()
            self._pending_sound.clear()
            self._forget_recent_sound()
            with self.store.batch():
                for message in messages:
                    try:
                        with self.store.savepoint():
                            self._handle_one(message, self.clock.now())
                            self._flush_sound(self.clock.now())
                    except Exception as exc:  # a daemon never dies of one message
                        self._pending_sound.clear()
                        self._forget_recent_sound()
                        log.exception("Internal error on a message on %r", message.topic)
                        self._reject(
                            message,
                            f"internal error ({type(exc).__name__}); logged for the maintainers",
                            "internal",
                        )
        self._flush_outgoing()

    def _forget_recent_sound(self) -> None:
        for state in self.sites.values():
            state.recent.clear()  # reloaded from the store as needed

    def _handle_one(self, message: Inbound, now: datetime) -> None:
        self.counters.received += 1
        try:
            self._handle(message, now)
        except DecodeError as exc:  # raised before anything of the message is written
            self._reject(message, str(exc), exc.field)

    def _handle(self, message: Inbound, now: datetime) -> None:
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
        state = self.sites[decoded.site]
        if isinstance(decoded, AudioBlock):
            self._accept_audio(state, decoded, now)
        elif isinstance(decoded, BandLevels):
            la, lc, lz = acoustics.levels_from_bands(decoded.bands)
            # A spectrum carries no time structure: LAFmax and LCpeak are their lower
            # bounds (the A and C energy levels), so only the LAeq-based rules use bands fully.
            levels = SoundLevels(
                decoded.site, decoded.sensor, decoded.ts, decoded.duration_s, la, la, lc, LCeq=lc, LZeq=lz
            )
            self._accept_sound(state, levels, "bands", now)
        elif isinstance(decoded, SoundLevels):
            self._accept_sound(state, self._calibrated(state, decoded), "levels", now)
        elif isinstance(decoded, LightSummary | WeatherReading | TurbidityReading | SensorStatus):
            self._accept_reading(state, decoded, now)
        else:
            self._accept_event(state, decoded, now)

    def _reject(self, message: Inbound, reason: str, field_name: str) -> None:
        now = self.clock.now()
        self.counters.rejected += 1
        field_key = field_name or "payload"
        if field_key not in self.counters.by_reason and len(self.counters.by_reason) >= MAX_REASON_KEYS:
            field_key = "other"  # field names come from the payload: the table stays bounded
        self.counters.by_reason[field_key] += 1
        site, sensor = self._sender_of(message.topic)
        excerpt = message.payload[:200].decode("utf-8", "replace")
        self.store.append_rejection(site, message.topic, reason, excerpt, now)
        self._influx("rejections", {"site": site}, {"topic": message.topic, "reason": reason}, now)
        body = {"ts": format_ts(now), "topic": message.topic, "reason": reason, "excerpt": excerpt}
        # Not a configured site's: published on the "_" level, where the town reads it too.
        where = output_topic(UNATTRIBUTED_SITE if site == "*" else site, "rejected", self.prefix)
        self._outgoing.append((where, _json(body), False))
        self._log_rejection(site, sensor, field_name, message.topic, reason)

    def _sender_of(self, topic: str) -> tuple[str, str]:
        """(site, sensor) a rejected message is journaled and logged under.

        The site is the topic's second level when that is a configured site, whatever the
        shape of the rest (a topic of the wrong shape is still that site's business); "*"
        otherwise. The sensor is "" unless it is configured for that site: invented names
        are not keys of anything.
        """
        parts = topic.split("/", 4)
        if len(parts) < 2 or parts[0] != self.prefix or parts[1] not in self.sites:
            return "*", ""
        site = parts[1]
        if len(parts) >= 4 and parts[2] == "sensors":
            sensor = parts[3]
            if self.sites[site].config.sensor(sensor) is not None:
                return site, sensor
        return site, ""

    def _log_rejection(self, site: str, sensor: str, field_name: str, topic: str, reason: str) -> None:
        """One log line per configured sensor and field per minute; per site for everything else.

        Unconfigured sensors share their site's gate, so a thousand invented names make one
        line a minute, and the gate table holds at most MAX_LOG_GATES keys (expired ones are
        dropped first; past the cap, a site's rejections share one key).
        """
        suppressed = self._gate((site, sensor, field_name if sensor else ""))
        if suppressed is None:
            return
        more = f" ({suppressed} more like it in the last minute not logged)" if suppressed else ""
        if sensor:
            log.warning("Rejected message on %s: %s%s", shown(topic, 200), reason, more)
        else:
            log.warning(
                "Rejected message on %s: %s%s; rejections of unconfigured sensors and topics of site %s"
                " are logged once a minute",
                shown(topic, 200),
                reason,
                more,
                site,
            )

    def _gate(self, key: tuple[str, str, str]) -> int | None:
        """None if a line under ``key`` was logged in the last minute, else how many were held back."""
        wall = time.monotonic()
        gate = self._log_gate.get(key)
        if gate is None:
            if len(self._log_gate) >= MAX_LOG_GATES:
                self._log_gate = {k: g for k, g in self._log_gate.items() if wall - g[0] < LOG_GATE_S}
            if len(self._log_gate) >= MAX_LOG_GATES:
                key = (key[0], "", "")  # still full within the minute: the site's shared key
            elif key[2] and sum(k[:2] == key[:2] for k in self._log_gate) >= MAX_GATES_PER_SENSOR:
                key = (*key[:2], "*")  # a sensor's reasons beyond the first few share a line
            gate = self._log_gate.get(key)
        if gate is not None and wall - gate[0] < LOG_GATE_S:
            gate[1] += 1
            return None
        self._log_gate[key] = [wall, 0]
        return 0 if gate is None else int(gate[1])

    def _conflict(self, site: str, sensor: str, kind: str, ts: datetime, journaled: bool) -> None:
        """Count a resend of a kept reading (a duplicate either way); a conflict if its content differs."""
        self.counters.duplicates += 1
        if not journaled:
            return
        self.counters.conflicts += 1
        suppressed = self._gate((site, sensor, "conflict"))
        if suppressed is not None:
            more = f" ({suppressed} more in the last minute not logged)" if suppressed else ""
            log.warning(
                "Sensor %s/%s resent its %s of %s with other content: the first is kept, the conflict"
                " journaled%s",
                site,
                sensor,
                kind,
                format_ts(ts),
                more,
            )

    def _late(self, state: SiteState, minute: datetime, now: datetime) -> bool:
        """True if data for ``minute`` is late: the site's own data had moved on past the lateness.

        In data time (``closing.is_late``): a backlog read in order after an outage is not
        late. Late or not, a stored reading re-judges its minute if that was judged already
        (``_touched``).
        """
        if state.evaluated_until is None:
            state.evaluated_until = minute
            state.final_until = minute
            return False
        if minute >= state.evaluated_until:
            return False
        if closing.is_late(minute, state.newest, now, timedelta(seconds=self.config.daemon.lateness_s)):
            self.counters.late += 1
            return True
        return False

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

    def _seen(self, state: SiteState, sensor: str, ts: datetime, now: datetime) -> None:
        health = state.health.get(sensor)
        if health is None:
            return
        if ts > health.last_seen or not health.online:
            health.last_seen = max(ts, health.last_seen)
        if not health.online:
            gap = (now - (health.offline_since or now)).total_seconds()
            health.online = True
            self.store.append_health(state.config.id, sensor, now, "online", gap, "", now)
            self._influx(
                "sensor_health",
                {"site": state.config.id, "sensor": sensor},
                {"online": True, "gap_s": gap},
                now,
            )
            self.alerts.clear(
                state.config.id,
                f"offline:{sensor}",
                f"Sensor {sensor} is back online after {gap / 60:.1f} minutes without data",
                now,
                audiences=("operator", "town") if health.town_alerted else ("operator",),
            )
            health.town_alerted = False

    def _calibrated(self, state: SiteState, levels: SoundLevels) -> SoundLevels:
        offset = state.offsets.get(levels.sensor)
        if offset is None:
            return levels

        def shift(v: float | None) -> float | None:
            return None if v is None else v + offset

        return SoundLevels(
            levels.site,
            levels.sensor,
            levels.ts,
            levels.duration_s,
            levels.LAeq + offset,
            levels.LAFmax + offset,
            levels.LCpeak + offset,
            shift(levels.LASmax),
            shift(levels.LZpeak),
            shift(levels.LAFmin),
            shift(levels.LCeq),
            shift(levels.LZeq),
        )

    def _accept_sound(self, state: SiteState, levels: SoundLevels, source: str, now: datetime) -> None:
        # Queued and written together at the end of the message (or batch): the hot path.
        minute = floor_minute(levels.ts)
        self._pending_sound.append((state, levels, source, self._late(state, minute, now), minute))

    def _flush_sound(self, now: datetime) -> None:
        pending, self._pending_sound = self._pending_sound, []
        if not pending:
            return
        touched = {(levels.site, minute) for _, levels, _, _, minute in pending}
        for site, minute in touched:
            self.sites[site].recent.ensure((minute,))  # before the store has the new readings
        stored = self.store.append_sounds([(lv, source, late) for _, lv, source, late, _ in pending], now)
        receipt = time.monotonic()
        ends: dict[tuple[datetime, float], datetime] = {}  # a batch holds a few distinct periods
        for (state, levels, source, late, minute), new in zip(pending, stored, strict=True):
            if not new:
                conflict = self.store.sound_conflict(levels, source, now)
                self._conflict(levels.site, levels.sensor, "sound", levels.ts, conflict)
                continue
            self.counters.accepted += 1
            state.recent.add(levels, minute)
            self._touched(state, minute, state.margins("sound")[0])
            end = ends.get((levels.ts, levels.duration_s))
            if end is None:
                end = ends[(levels.ts, levels.duration_s)] = levels.end
                self.clock.observe(end)
            state.last_receipt = receipt
            if state.newest is None or end > state.newest:
                state.newest = end
            self._seen(state, levels.sensor, levels.ts, now)
            if self.outbox_put is not None:
                fields = {k: getattr(levels, k) for k in SOUND_FIELDS}
                self._influx(
                    "sound",
                    {"site": levels.site, "sensor": levels.sensor},
                    {**fields, "duration_s": levels.duration_s, "late": late},
                    levels.ts,
                )

    def _accept_audio(self, state: SiteState, block: AudioBlock, now: datetime) -> None:
        stored = self.store.append_audio(
            block.site,
            block.sensor,
            block.ts,
            block.seq,
            block.sample_rate,
            block.sample_format,
            block.pcm,
            now,
        )
        if not stored.stored:
            conflict = self.store.audio_conflict(
                block.site,
                block.sensor,
                block.ts,
                block.seq,
                block.sample_rate,
                block.sample_format,
                block.pcm,
                now,
            )
            self._conflict(block.site, block.sensor, "audio", block.ts, conflict)
            return
        sensor = state.config.sensor(block.sensor)
        assert sensor is not None
        dtype = AUDIO_FORMATS[block.sample_format][0]
        samples = np.frombuffer(block.pcm, dtype=dtype).astype(np.float64)
        if dtype.startswith("<i"):
            samples /= float(2 ** (8 * AUDIO_FORMATS[block.sample_format][1] - 1))
        meter = state.meters.get(block.sensor)
        expected = state.meter_next.get(block.sensor)
        # A new meter when the stream starts, restarts or jumps: its periods are aligned to the block's time.
        if (
            meter is None
            or meter.sample_rate != block.sample_rate
            or expected is None
            or abs((block.ts - expected).total_seconds()) > 0.5
        ):
            meter = acoustics.SoundLevelMeter(
                block.sample_rate, period_s=1.0, calibration_db=sensor.calibration.full_scale_db
            )
            state.meters[block.sensor] = meter
            state.meter_next[block.sensor] = block.ts
            setattr(meter, "origin", block.ts)  # noqa: B010 - origin of the meter's start_s axis
        state.meter_next[block.sensor] = block.ts + timedelta(seconds=len(samples) / block.sample_rate)
        origin: datetime = getattr(meter, "origin")  # noqa: B009
        for period in meter.process(samples):
            ts = origin + timedelta(seconds=period.start_s)
            levels = SoundLevels(
                block.site,
                block.sensor,
                ts,
                meter.period_samples / meter.sample_rate,
                period.LAeq,
                period.LAFmax,
                period.LCpeak,
                period.LASmax,
                period.LZpeak,
                period.LAFmin,
                period.LCeq,
                period.LZeq,
            )
            self._accept_sound(state, self._calibrated(state, levels), "audio", now)

    def _accept_reading(
        self,
        state: SiteState,
        reading: LightSummary | WeatherReading | TurbidityReading | SensorStatus,
        now: datetime,
    ) -> None:
        status = isinstance(reading, SensorStatus)  # a heartbeat has no minute to judge
        late = False if status else self._late(state, floor_minute(reading.ts), now)
        payload = payload_of(reading)
        stored = self.store.append_reading(reading, payload, late=late, now=now)
        if not stored.stored:
            conflict = self.store.reading_conflict(reading, payload, now)
            self._conflict(reading.site, reading.sensor, READING_KIND[type(reading)], reading.ts, conflict)
            return
        self.counters.accepted += 1
        self._seen(state, reading.sensor, reading.ts, now)
        tags = {"site": reading.site, "sensor": reading.sensor}
        if isinstance(reading, SensorStatus):
            self._accept_status(state, reading, now)
            return
        self._touched(state, floor_minute(reading.ts))
        self.clock.observe(reading.end)
        state.last_receipt = time.monotonic()
        if state.newest is None or reading.end > state.newest:
            state.newest = reading.end
        if isinstance(reading, LightSummary):
            self._cache_light(state, reading, now)
            fields: dict[str, Any] = {
                "lux_mean": reading.lux_mean,
                "lux_min": reading.lux_min,
                "lux_max": reading.lux_max,
            }
            self._influx(
                "light", tags, {**fields, "duration_s": reading.duration_s, "late": late}, reading.ts
            )
        elif isinstance(reading, WeatherReading):
            self._influx(
                "weather",
                tags,
                {
                    "wind_speed_ms": reading.wind_speed_ms,
                    "rain": reading.rain,
                    "rain_mm_h": reading.rain_mm_h,
                    "duration_s": reading.duration_s,
                    "late": late,
                },
                reading.ts,
            )
        else:
            self._influx(
                "turbidity",
                tags,
                {"ntu": reading.ntu, "duration_s": reading.duration_s, "late": late},
                reading.ts,
            )

    def _accept_status(self, state: SiteState, status: SensorStatus, now: datetime) -> None:
        site = state.config.id
        self._influx(
            "sensor_health",
            {"site": site, "sensor": status.sensor},
            {"online": True, "battery_pct": status.battery_pct, "clock_offset_s": status.clock_offset_s},
            status.ts,
        )
        limit = self.config.daemon.clock_drift_limit_s
        condition = f"clock:{status.sensor}"
        if status.clock_offset_s is not None and abs(status.clock_offset_s) > limit:
            self.alerts.raise_(
                site,
                ("operator",),
                "clock_drift",
                "warning",
                condition,
                f"Sensor {status.sensor} reports its clock {status.clock_offset_s:+.1f} s off "
                f"(limit {limit:g} s); its timestamps may be wrong",
                {"sensor": status.sensor},
                now,
            )
        elif status.clock_offset_s is not None:
            self.alerts.clear(site, condition, "", now, audiences=())
        if status.calibration_reference_db is not None and status.calibration_measured_db is not None:
            previous = self.store.last_calibration(site, status.sensor)
            drift = None if previous is None else status.calibration_measured_db - previous["measured_db"]
            flagged = drift is not None and abs(drift) > 0.5
            self.store.append_calibration(
                site,
                status.sensor,
                status.ts,
                status.calibration_reference_db,
                status.calibration_measured_db,
                drift,
                flagged,
                now,
            )
            if flagged and drift is not None:
                self.alerts.raise_(
                    site,
                    ("operator", "town"),
                    "calibration_drift",
                    "warning",
                    f"calibration:{status.sensor}:{format_ts(status.ts)}",
                    f"Sensor {status.sensor} calibration moved {drift:+.2f} dB since the last check "
                    "(more than 0.5 dB): its measurements since then are in doubt",
                    {"sensor": status.sensor, "drift_db": drift},
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
        when = _event_time(event)
        # An event can change the verdict on minutes already judged (a blast record
        # arriving after the impulse, a work period declared afterwards).
        if state.evaluated_until is not None:
            lookback, lookahead = state.margins()
            first = floor_minute(when - lookahead)
            last = floor_minute(_event_end(event) + lookback)
            minute = max(first, state.evaluated_until - timedelta(seconds=self.config.daemon.lateness_s))
            while minute < min(last + MINUTE, state.evaluated_until):
                state.dirty_minutes.add(minute)
                minute += MINUTE
        summary = f"{type(event).__name__} {event.id}"
        fields: dict[str, Any] = {"id": event.id, "summary": summary}
        if isinstance(event, TruckPassage):
            fields.update(gate=event.gate, direction=event.direction)
        if isinstance(event, Blast):
            fields["safety_reason"] = event.safety_reason
        if isinstance(event, WorkPeriod | TemporaryLighting):
            fields["end"] = format_ts(event.end)
        self._influx("events", {"site": event.site, "kind": event_kind(event)}, fields, when)

    # ------------------------------------------------------------------ periodic work

    def tick(self) -> None:
        if self.clock.mode == "data" and self.clock.data_now is None:
            # No data, no time yet. Stamping the wall clock on the periodic work here would put
            # the next anchor and status after a simulated past day's data, never reached.
            return
        now = self.clock.now()
        with self.store.batch():
            # Notice changes made by the town with `minewatch notices` (another process),
            # and deliveries that gave up, are announced by the daemon, the chain's one writer.
            for event in self.notices.take_announcements(now):
                self._notice_event(event, now)
            for failed in self.deliveries.claim_undeliverable():
                self.alerts.raise_(
                    failed.site,
                    failed.audiences,
                    failed.kind,
                    failed.severity,
                    failed.condition,
                    failed.message,
                    dict(failed.data),
                    now,
                    dedupe=False,
                )
            for state in self.sites.values():
                try:
                    with self.store.savepoint():
                        self._evaluate(state, now)
                        self._check_health(state, now)
                        self._status(state, now)
                        self._anchor(state, now)
                except Exception:  # one site's failure must not stop the others, or ingestion
                    log.exception(
                        "Periodic work for site %r failed; retrying on the next tick", state.config.id
                    )
        self._flush_outgoing()
        if now - self.last_prune >= PRUNE_INTERVAL:
            self.last_prune = now
            # Per-second readings expire after storage.retention_days; findings, events,
            # notices and the chain (with the readings' digests) are kept.
            removed = self.store.prune(now - timedelta(days=self.config.storage.retention_days))
            self.pruned_before = now - timedelta(days=self.config.storage.retention_days)
            if removed:
                log.info("Pruned %d readings older than %g days", removed, self.config.storage.retention_days)

    def _cache_light(self, state: SiteState, reading: LightSummary, now: datetime) -> None:
        bisect.insort(state.light, reading, key=lambda r: r.ts)
        lookback, _ = state.margins("light")
        # Kept for the minutes still to be judged (a draining backlog is behind the clock)
        # and those late data may re-judge; older ones read the store (_old_light).
        judged = min(self.clock.now(), state.final_until or now)
        keep_from = judged - lookback - timedelta(seconds=self.config.daemon.lateness_s) - MINUTE
        if state.light and state.light[0].ts < keep_from:
            del state.light[: bisect.bisect_left(state.light, keep_from, key=lambda r: r.ts)]
        # Raw bursts matter only to the flashing rule's short lookback: drop them after an hour.
        strip_before = judged - LIGHT_BURSTS_KEPT
        state.light_kept_from = max(state.light_kept_from, keep_from)
        state.bursts_kept_from = max(state.bursts_kept_from, strip_before)
        for i in range(len(state.light)):
            old = state.light[i]
            if old.ts >= strip_before:
                break
            if old.burst:
                state.light[i] = replace(old, burst=(), burst_rate_hz=None)

    def _site_data(
        self,
        state: SiteState,
        start: datetime,
        end: datetime,
        old_light: list[LightSummary] | None = None,
    ) -> SiteData:
        """Readings around [start, end), each kind with the margins its rules need; all events.

        Light comes from the in-memory cache, or from ``old_light`` (read from the store by
        ``_old_light``) for a minute re-judged further back than the cache holds whole.
        """
        site = state.config.id

        def around(kind: str) -> tuple[datetime, datetime]:
            before, after = state.margins(kind)
            return start - before, end + after

        light_from, light_to = around("light")
        light_source = state.light
        if old_light is not None and not self._light_cached(state, start):
            light_source = old_light
        lo = bisect.bisect_left(light_source, light_from, key=lambda r: r.ts)
        hi = bisect.bisect_left(light_source, light_to, key=lambda r: r.ts)
        weather = [
            reading_from_row(r) for r in self.store.readings_between(site, "weather", *around("weather"))
        ]
        turbidity = [
            reading_from_row(r) for r in self.store.readings_between(site, "turbidity", *around("turbidity"))
        ]
        events = state.events
        return SiteData(
            sound=tuple(state.recent.between(*around("sound"))),
            light=tuple(light_source[lo:hi]),
            weather=tuple(weather),
            turbidity=tuple(turbidity),
            blast_notices=tuple(e for e in events if isinstance(e, BlastNotice)),
            blasts=tuple(e for e in events if isinstance(e, Blast)),
            trucks=tuple(e for e in events if isinstance(e, TruckPassage)),
            work=tuple(e for e in events if isinstance(e, WorkPeriod)),
            temporary_lighting=tuple(e for e in events if isinstance(e, TemporaryLighting)),
            other_events=tuple(e for e in events if isinstance(e, GenericEvent)),
        )

    def _evaluate(self, state: SiteState, now: datetime) -> None:
        if state.evaluated_until is None or state.final_until is None:
            return
        _, lookahead = state.margins()
        closed = self._closed_until(state, now)
        minutes: set[datetime] = set()
        # Late data trickling into judged minutes re-judges them at most every few seconds,
        # not once per batch.
        if state.dirty_minutes and now - state.last_reevaluation >= REEVALUATION_INTERVAL:
            state.last_reevaluation = now
            minutes = self._rejudgeable(state, state.dirty_minutes)
            state.dirty_minutes.clear()
        m, f = state.evaluated_until, state.final_until
        if closed is not None:
            ready = floor_minute(closed)  # minutes before this have closed
            while m + MINUTE <= ready:
                minutes.add(m)
                m += MINUTE
            final_ready = floor_minute(closed - lookahead)
            while f + MINUTE <= final_ready and f < m:
                minutes.add(f)  # second look once the lookahead (late blast records, trucks) has passed
                f += MINUTE
        old_light = self._old_light(state, minutes)
        for minute in sorted(minutes):
            data = self._site_data(state, minute, minute + MINUTE, old_light)
            findings = rules.evaluate_site(
                state.config.context(), state.profile, data, minute, minute + MINUTE, now
            )
            self._record_findings(state, minute, findings, now)
        if m != state.evaluated_until or f != state.final_until:
            state.evaluated_until, state.final_until = m, f
            self.store.set_progress(state.config.id, m, f)
        # Minutes before the final look's lookback are read again only for late data.
        state.recent.forget_before(min(f, m) - state.margins("sound")[0] - MINUTE)
        if now - state.last_warning_check >= REEVALUATION_INTERVAL:
            state.last_warning_check = now
            self._early_warnings(state, now)

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
        quiet = closing.is_quiet(
            site_silent_s=wall - state.last_receipt,
            input_silent_s=wall - max(s.last_receipt for s in self.sites.values()),
            connected_s=None if self.input_since is None else wall - self.input_since,
            pending=self.input_pending,
            live=self.clock.mode == "wall" and stream is not None and stream >= now - lateness,
            quiet_s=QUIET_S,
        )
        return closing.closed_until(state.newest, stream, now, lateness, quiet=quiet)

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

    def _old_light(self, state: SiteState, minutes: set[datetime]) -> list[LightSummary] | None:
        """Light for minutes re-judged further back than the cache holds whole, from the store."""
        if not minutes:
            return None
        before, after = state.margins("light")
        first = min(minutes)
        if before == after == timedelta(0) or self._light_cached(state, first):
            return None
        rows = self.store.readings_between(
            state.config.id, "light", first - before, max(minutes) + MINUTE + after
        )
        return [reading_from_row(r) for r in rows]

    @staticmethod
    def _light_cached(state: SiteState, minute: datetime) -> bool:
        """Whether the light cache holds all that judging ``minute`` reads (bursts: a short lookback)."""
        before, _ = state.margins("light")
        return minute - before >= state.light_kept_from and minute - BURST_LOOKBACK >= state.bursts_kept_from

    def _record_findings(
        self, state: SiteState, minute: datetime, findings: list[Finding], now: datetime
    ) -> None:
        site = state.config.id
        window = f"{site}|{to_us(minute)}"
        previous = set(json.loads(self.store.meta(f"window:{window}") or "[]"))
        current = {f.id for f in findings}
        stored: list[Finding] = []
        for finding in findings:
            if not self.store.append_finding(finding, now):
                continue
            self.counters.findings += 1
            stored.append(finding)
            # A revision (the minute re-judged with late data) is published, not alerted again:
            # people were told of the finding when it was made.
            self._announce(state, finding, now, alert=finding.id not in previous)
        # Violation episodes open notices (section 13.3.A) or continue / escalate them.
        for event in self.notices.on_findings(state.config, state.profile, stored, now):
            self._notice_event(event, now)
        for gone in previous - current:
            self._retract(site, gone, now)
        if current != previous:
            self.store.set_meta(f"window:{window}", json.dumps(sorted(current)))

    def _retract(self, site: str, finding_id: str, now: datetime) -> None:
        row = self.store.conn.execute(
            "SELECT data FROM findings WHERE id = ? ORDER BY revision DESC LIMIT 1", (finding_id,)
        ).fetchone()
        if row is None:
            return
        finding = finding_from_json(json.loads(row["data"]))
        if self.store.append_finding(finding, now, retracted=True):
            body = {**finding_to_json(finding), "retracted": True}
            self._outgoing.append((output_topic(site, "findings", self.prefix), _json(body), False))

    def _announce(self, state: SiteState, finding: Finding, now: datetime, *, alert: bool = True) -> None:
        site = state.config.id
        body = finding_to_json(finding)
        self._outgoing.append((output_topic(site, "findings", self.prefix), _json(body), False))
        value = finding.measurements[0].value if finding.measurements else None
        limit = finding.measurements[0].limit if finding.measurements else None
        self._influx(
            "findings",
            {"site": site, "standard": finding.standard, "kind": finding.kind.value},
            {
                "id": finding.id,
                "section": finding.section,
                "summary": finding.summary,
                "sensors": ",".join(finding.sensors),
                "value": value,
                "limit": limit,
                "end": format_ts(finding.end),
                "completeness": finding.completeness,
            },
            finding.start,
        )
        if finding.kind is FindingKind.VIOLATION:
            self._outgoing.append((output_topic(site, "violations", self.prefix), _json(body), False))
        if not alert:
            return
        if finding.kind in TOWN_KINDS:
            # One alert per standard, sensors and event while it keeps recurring (a noisy half
            # hour is one alert, not thirty); AlertBook clears it after min_gap_s of quiet.
            events = ",".join(r for r in finding.refs if r.split(":")[0] in EVENT_REF_KINDS)
            condition = f"{finding.kind.value}:{finding.standard}:{','.join(finding.sensors)}:{events}"
            self.alerts.raise_(
                site,
                ("town", "operator"),
                finding.kind.value,
                "violation" if finding.kind is FindingKind.VIOLATION else "notice",
                condition,
                finding.summary,
                body,
                now,
            )
        elif finding.kind is FindingKind.WARNING:
            self.alerts.raise_(
                site,
                ("operator",),
                "warning",
                "warning",
                f"warning:{finding.standard}:{','.join(finding.sensors)}",
                finding.summary,
                body,
                now,
            )

    def _notice_event(self, event: NoticeEvent, now: datetime) -> None:
        self.alerts.raise_(
            event.site,
            event.audiences,
            event.kind,
            event.severity,
            event.condition,
            event.message,
            dict(event.payload),
            now,
            dedupe=False,
        )
        self._outgoing.append(
            (output_topic(event.site, "notices", self.prefix), notice_payload_json(event.payload), False)
        )

    def _enqueue_delivery(self, body: dict[str, Any]) -> None:
        if self.deliveries.enqueue(body, self.clock.now()):
            self.deliveries_pending = True

    def _early_warnings(self, state: SiteState, now: datetime) -> None:
        minute = floor_minute(now)
        data = self._site_data(state, minute, now)
        for finding in rules.early_warnings(state.config.context(), state.profile, data, now):
            key = (finding.id, minute)
            if key in state.warned_minutes:
                continue
            state.warned_minutes.add(key)
            body = finding_to_json(finding)
            self.alerts.raise_(
                state.config.id,
                ("operator",),
                "early_warning",
                "warning",
                f"early:{finding.standard}:{','.join(finding.sensors)}",
                finding.summary,
                body,
                now,
            )
        state.warned_minutes = {k for k in state.warned_minutes if k[1] >= minute - timedelta(hours=1)}

    def _check_health(self, state: SiteState, now: datetime) -> None:
        if self.clock.mode == "data" and self.clock.data_now is None:
            return  # no data yet: no "now" to measure silence against
        site = state.config.id
        d = self.config.daemon
        for sensor in state.config.sensors:
            health = state.health[sensor.id]
            if health.last_seen > now:
                health.last_seen = now  # started before the data clock existed: count from its start
            silent = (now - health.last_seen).total_seconds()
            limit = sensor.expected_period_s * d.offline_after_periods
            if health.online and silent > limit:
                health.online = False
                health.offline_since = health.last_seen
                self.store.append_health(
                    site,
                    sensor.id,
                    health.last_seen,
                    "offline",
                    None,
                    f"silent for {silent:.0f} s (expected every {sensor.expected_period_s:g} s)",
                    now,
                )
                self._influx("sensor_health", {"site": site, "sensor": sensor.id}, {"online": False}, now)
                self.alerts.raise_(
                    site,
                    ("operator",),
                    "sensor_offline",
                    "warning",
                    f"offline:{sensor.id}",
                    f"Sensor {sensor.id} ({sensor.location or sensor.kind.value}) has sent nothing "
                    f"since {format_ts(health.last_seen)}",
                    {"sensor": sensor.id},
                    now,
                )
            elif not health.online and not health.town_alerted and silent > d.town_offline_alert_s:
                health.town_alerted = True
                self.alerts.raise_(
                    site,
                    ("town",),
                    "sensor_offline",
                    "warning",
                    f"offline-town:{sensor.id}",
                    f"Sensor {sensor.id} at {state.config.name} has been offline for "
                    f"{silent / 60:.0f} minutes",
                    {"sensor": sensor.id},
                    now,
                )

    def _status(self, state: SiteState, now: datetime) -> None:
        if (
            state.last_status
            and (now - state.last_status).total_seconds() < self.config.daemon.status_interval_s
        ):
            return
        state.last_status = now
        online = {s: h.online for s, h in state.health.items()}
        body = site_status(self.store, state.config, now, online)
        self._outgoing.append((output_topic(state.config.id, "status", self.prefix), _json(body), True))

    def _anchor(self, state: SiteState, now: datetime) -> None:
        if (
            state.last_anchor
            and (now - state.last_anchor).total_seconds() < self.config.daemon.anchor_interval_s
        ):
            return
        state.last_anchor = now
        site = state.config.id
        seq, head = self.store.head(site)
        if seq == 0:
            return
        self.store.conn.execute(
            "INSERT OR IGNORE INTO anchors (site, seq, head, published_us) VALUES (?,?,?,?)",
            (site, seq, head, to_us(now)),
        )
        self.store.restate_config(site, now)  # first entry after the anchor: every evidence segment holds it
        body = {"site": site, "seq": seq, "head": head, "ts": format_ts(now)}
        self._outgoing.append((output_topic(site, "anchors", self.prefix), _json(body), True))
        self.alerts.raise_(
            site,
            ("town",),
            "anchor",
            "info",
            f"anchor:{seq}",
            f"Evidence chain of {site} at record {seq}: {head}",
            body,
            now,
            dedupe=False,
        )

    # ------------------------------------------------------------------ outputs

    def _influx(self, measurement: str, tags: dict[str, str], fields: dict[str, Any], ts: datetime) -> None:
        if self.outbox_put is None:
            return
        clean = {k: v for k, v in fields.items() if v is not None}
        if clean:
            self.outbox_put([line(measurement, tags, clean, ts)])

    def _publish_alert(self, site: str, body: dict[str, Any]) -> None:
        self._outgoing.append((output_topic(site, "alerts", self.prefix), _json(body), False))
        self._influx(
            "alerts",
            {"site": site, "audience": ",".join(body["audiences"]), "kind": body["kind"]},
            {"id": body["id"], "message": body["message"], "severity": body["severity"]},
            datetime.fromisoformat(body["ts"].replace("Z", "+00:00")),
        )

    def _flush_outgoing(self) -> None:
        outgoing, self._outgoing = self._outgoing, []
        for topic, payload, retain in outgoing:
            try:
                self.publish(topic, payload, retain)
            except Exception as exc:  # an output failure must not stop ingestion; the store has it
                log.error("Could not publish to %r: %s", topic, exc)


# --------------------------------------------------------------------------- helpers


def _json(body: dict[str, Any]) -> bytes:
    return json.dumps(body, separators=(",", ":"), default=str).encode()


def _event_time(event: Event) -> datetime:
    if isinstance(event, BlastNotice):
        return event.planned_ts
    if isinstance(event, WorkPeriod | TemporaryLighting):
        return event.start
    return event.ts


def _event_end(event: Event) -> datetime:
    if isinstance(event, WorkPeriod | TemporaryLighting):
        return event.end
    return _event_time(event)


# --------------------------------------------------------------------------- the process


def run(config: Config, *, stop: threading.Event | None = None, install_signals: bool = True) -> int:
    """`minewatch run`: wire everything, run until SIGTERM/SIGINT (or ``stop``), shut down cleanly."""
    stop = stop or threading.Event()
    if install_signals:

        def _on_signal(signum: int, frame: FrameType | None) -> None:
            log.info("Signal %d: shutting down", signum)
            stop.set()

        signal.signal(signal.SIGTERM, _on_signal)
        signal.signal(signal.SIGINT, _on_signal)

    # Outputs first: the store, the outbox and its forwarder exist before any message arrives.
    store = Store(config.storage.path)
    store.checkpoint_in_background()
    forwarder = None
    outbox_put = None
    if config.storage.influxdb is not None:
        outbox_put = Outbox(store.conn).put  # written inside the store's own transactions
        # The forwarder reads the same table through a connection of its own thread.
        forwarder = InfluxForwarder.from_config(Outbox.open(config.storage.path), config.storage.influxdb)
        forwarder.start()
    inbound = Handoff(config.daemon.queue_size)
    prefix = config.broker.topic_prefix
    sites = [s.id for s in config.owned_sites]
    topics = [f"{prefix}/{s}/sensors/#" for s in sites] + [f"{prefix}/{s}/events/#" for s in sites]
    clock = Clock(config.daemon.clock)

    def publish(topic: str, payload: bytes, retain: bool) -> None:
        link.publish(topic, payload, retain=retain)

    pipeline = Pipeline(config, store, publish, clock, outbox_put)
    # A refused login stops the daemon (raised as LoginRefused below): no retry can fix it.
    link: MqttLink = MqttLink(config.broker, topics, inbound, pipeline.predecode, lambda _: stop.set())
    link_record = LinkRecorder(link.watch, store.set_meta)  # "not connected since" for `status`
    link_record.poll()
    deliveries = DeliveryWorker(config.storage.path, config, publish, clock.now)
    deliveries.start()
    freeze_startup_objects()
    link.start()
    log.info("minewatch running for %s; store %s", ", ".join(sites), config.storage.path)
    last_tick = 0.0
    try:
        while not stop.is_set():
            batch = inbound.take(timeout=0.2, limit=BATCH_LIMIT)
            if batch:
                pipeline.handle_batch(batch)
                link.ack(batch)
            if time.monotonic() - last_tick >= 1.0 or not batch:
                # Minutes close on silence only while the broker is reachable and nothing
                # is in hand: until then it may hold the sites' data (closing.py).
                pipeline.set_input(link.client.is_connected(), len(inbound))
                pipeline.tick()
                last_tick = time.monotonic()
            if pipeline.deliveries_pending:
                pipeline.deliveries_pending = False
                deliveries.wake()
            link_record.poll()
    finally:
        # Reverse order: stop taking messages, finish those in hand, flush, disconnect.
        link.stop_accepting()
        rest = inbound.take(timeout=0.0, limit=len(inbound))
        if rest:
            pipeline.handle_batch(rest)
            link.ack(rest)
        pipeline.tick()
        deliveries.stop(timeout=5.0)  # what it could not send stays pending for the next start
        time.sleep(0.2)  # let paho send the last acks and publishes
        link.close()
        link_record.poll()
        if forwarder is not None:
            if not forwarder.flush(timeout=5.0):
                log.warning("InfluxDB backlog not fully written; it stays in the outbox for the next start")
            forwarder.close()
        store.close()
        c = pipeline.counters
        log.info(
            "Stopped: %d received, %d accepted, %d duplicates, %d rejected, %d findings",
            c.received,
            c.accepted,
            c.duplicates,
            c.rejected,
            c.findings,
        )
    if link.fatal is not None:
        raise LoginRefused(link.fatal)
    return 0
