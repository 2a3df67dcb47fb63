"""What the daemon holds in memory per site between ticks, and the data a judgement reads.

``SiteState`` is the pipeline's per-site progress (minutes judged, late-touched minutes,
sensor health, audio meters) and the caches that keep the rules' input off SQLite: the
recent sound (``recent.RecentSound``) and the light summaries over the longest light
lookback. ``site_data`` assembles a minute's ``rules.SiteData`` from them and the store.
"""

from __future__ import annotations

import bisect
import time
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

import rules
from monitor.config import SiteConfig
from monitor.daemon.audio_streams import AudioStreams
from monitor.daemon.recent_sound import RecentSound
from monitor.daemon.sensor_health import SensorHealth
from monitor.journal.store import Store
from monitor.wire.codec import seismic_events
from rules.model import (
    Blast,
    BlastNotice,
    Event,
    GenericEvent,
    LightSummary,
    SiteData,
    SiteLawPoint,
    TemporaryLighting,
    TruckPassage,
    WorkPeriod,
)
from rules.profile import Profile
from rules.times import MINUTE, floor_minute

NEVER = datetime.min.replace(tzinfo=UTC)
EVENT_HISTORY = timedelta(days=400)  # a year of temporary-lighting days, with room
LIGHT_BURSTS_KEPT = timedelta(hours=1)  # raw light bursts stay in the in-memory cache this long
BURST_LOOKBACK = timedelta(minutes=15)  # at least the flashing rule's lookback (Dovre: 3 minutes)


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
    audio: AudioStreams = field(default_factory=AudioStreams)
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
    # The hour (from the epoch) before which the store's hourly histograms hold the site's
    # seconds (Store.keep_sound_hours); None until the first look at the store's.
    sound_hours_until: int | None = None

    margin_cache: dict[str | None, tuple[timedelta, timedelta]] = field(default_factory=dict)
    offsets: dict[str, float] = field(init=False)  # calibration offsets (dB) of the sensors that have one

    def __post_init__(self) -> None:
        self.offsets = {s.id: s.calibration.offset_db for s in self.config.sensors if s.calibration.offset_db}

    @classmethod
    def restore(
        cls, config: SiteConfig, profile: Profile, store: Store, newest: datetime | None, now: datetime
    ) -> SiteState:
        """The state of a site on start-up, from the store: progress, events, the light cache.

        ``newest``: the end of the newest reading stored for the site (``Store.newest_data_end``).
        """
        state = cls(config, profile, RecentSound(config.id, store.sound_between))
        state.newest = newest
        state.events = store.events_since(config.id, now - EVENT_HISTORY)
        progress = store.progress(config.id)
        if progress:
            state.evaluated_until, state.final_until = progress
        elif (first := store.first_data_start(config.id)) is not None:
            # Stored before any judging was recorded (a stop, or a store that refused the write):
            # judged from its first minute, as the pipeline that took it in would have.
            state.evaluated_until = state.final_until = floor_minute(first)
        state.health = {s.id: SensorHealth(now) for s in config.sensors}
        light_back, _ = state.margins("light")
        # From what the next minute to judge needs (a restart may be behind the clock).
        light_from = min(now, state.final_until or now) - light_back - MINUTE
        state.light_kept_from = light_from
        state.light = store.light_between(config.id, light_from, now + EVENT_HISTORY)
        return state

    def margins(self, kind: str | None = None) -> tuple[timedelta, timedelta]:
        """(lookback, lookahead) of reading data the profile's rules need; fixed, so asked once."""
        if kind not in self.margin_cache:
            self.margin_cache[kind] = rules.data_margins(self.profile, kind)
        return self.margin_cache[kind]

    # ------------------------------------------------------------------ the light cache

    def cache_light(self, reading: LightSummary, judged: datetime, lateness: timedelta) -> None:
        """Add a stored light summary; drop what no judgement from ``judged`` on will read.

        ``judged``: the oldest minute still to be judged (a draining backlog is behind the
        clock); ``lateness``: how far back late data may re-judge. Older light is read from
        the store (``old_light``).
        """
        bisect.insort(self.light, reading, key=lambda r: r.ts)
        lookback, _ = self.margins("light")
        keep_from = judged - lookback - lateness - MINUTE
        if self.light and self.light[0].ts < keep_from:
            del self.light[: bisect.bisect_left(self.light, keep_from, key=lambda r: r.ts)]
        # Raw bursts matter only to the flashing rule's short lookback: drop them after an hour.
        strip_before = judged - LIGHT_BURSTS_KEPT
        self.light_kept_from = max(self.light_kept_from, keep_from)
        self.bursts_kept_from = max(self.bursts_kept_from, strip_before)
        for i in range(len(self.light)):
            old = self.light[i]
            if old.ts >= strip_before:
                break
            if old.burst:
                self.light[i] = replace(old, burst=(), burst_rate_hz=None)

    def light_cached(self, minute: datetime) -> bool:
        """Whether the light cache holds all that judging ``minute`` reads (bursts: a short lookback)."""
        before, _ = self.margins("light")
        return minute - before >= self.light_kept_from and minute - BURST_LOOKBACK >= self.bursts_kept_from

    def old_light(self, store: Store, minutes: set[datetime]) -> list[LightSummary] | None:
        """Light for minutes re-judged further back than the cache holds whole, from the store."""
        if not minutes:
            return None
        before, after = self.margins("light")
        first = min(minutes)
        if before == after == timedelta(0) or self.light_cached(first):
            return None
        return store.light_between(self.config.id, first - before, max(minutes) + MINUTE + after)


def site_data(
    state: SiteState,
    store: Store,
    start: datetime,
    end: datetime,
    old_light: list[LightSummary] | None = None,
    site_law: tuple[SiteLawPoint, ...] = (),
) -> SiteData:
    """Readings around [start, end), each kind with the margins its rules need; all events.

    Light comes from the in-memory cache, or from ``old_light`` (``SiteState.old_light``)
    for a minute re-judged further back than the cache holds whole.
    """
    site = state.config.id

    def around(kind: str) -> tuple[datetime, datetime]:
        before, after = state.margins(kind)
        return start - before, end + after

    light_from, light_to = around("light")
    light_source = state.light
    if old_light is not None and not state.light_cached(start):
        light_source = old_light
    lo = bisect.bisect_left(light_source, light_from, key=lambda r: r.ts)
    hi = bisect.bisect_left(light_source, light_to, key=lambda r: r.ts)
    weather = store.weather_between(site, *around("weather"))
    turbidity = store.turbidity_between(site, *around("turbidity"))
    events = state.events
    locations = {s.id: s.location for s in state.config.sensors if s.location}
    seismic = seismic_events(store.seismic_between(site, start - MINUTE, end), locations)
    return SiteData.grouped(
        state.recent.by_sensor(*around("sound")),
        light=tuple(light_source[lo:hi]),
        weather=tuple(weather),
        turbidity=tuple(turbidity),
        blast_notices=tuple(e for e in events if isinstance(e, BlastNotice)),
        blasts=tuple(e for e in events if isinstance(e, Blast)),
        trucks=tuple(e for e in events if isinstance(e, TruckPassage)),
        work=tuple(e for e in events if isinstance(e, WorkPeriod)),
        temporary_lighting=tuple(e for e in events if isinstance(e, TemporaryLighting)),
        other_events=tuple(e for e in events if isinstance(e, GenericEvent)),
        seismic=tuple(seismic),
        site_law=site_law,
    )
