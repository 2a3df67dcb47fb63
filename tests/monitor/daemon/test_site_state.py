"""monitor/daemon/site_state.py: a site's state restored from the store, its light cache, its SiteData.

A real store in the test's folder, filled through its append methods; the profile is Dovre's
(light: three days of lookback, sound and weather: a minute either side).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import rules
from monitor.config import Config, SiteConfig, parse_config
from monitor.daemon.site_state import EVENT_HISTORY, LIGHT_BURSTS_KEPT, SiteState, site_data
from monitor.journal.store import Store
from monitor.wire.codec import payload_of
from rules.model import Blast, LightSummary, SoundLevels, TruckPassage, WeatherReading, WorkKind, WorkPeriod
from rules.profile import Profile, load_profile
from tests.support.configs import quarry_config, sensor

NOW = datetime(2026, 6, 15, 17, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)
LIGHT_BACK = timedelta(days=3)  # Dovre's longest light lookback (the upward-light baseline)


@pytest.fixture
def config(tmp_path: Path) -> Config:
    text = quarry_config(
        tmp_path / "store.db",
        sensors=[
            sensor("n2", "sound"),
            sensor("l1", "light", expected_period_s=60),
            sensor("wx", "weather", expected_period_s=60),
            sensor("n1", "sound"),
        ],
    )
    return parse_config(text + "[sites.sensors.calibration]\noffset_db = 1.5\n")  # n1's


@pytest.fixture
def site(config: Config) -> SiteConfig:
    found = config.site("q")
    assert found is not None
    return found


@pytest.fixture
def profile(site: SiteConfig) -> Profile:
    return load_profile(site.profile, site.agreement)


@pytest.fixture
def store(config: Config) -> Iterator[Store]:
    s = Store(config.storage.path)
    yield s
    s.close()


def light(ts: datetime, burst: tuple[float, ...] = ()) -> LightSummary:
    return LightSummary("q", "l1", ts, 60.0, 5.0, 4.0, 6.0, burst, 10.0 if burst else None)


def store_light(store: Store, *readings: LightSummary) -> None:
    with store.batch():
        for r in readings:
            store.append_reading(r, payload_of(r), late=False, now=NOW)


def test_restore_reads_progress_events_and_light_from_the_store(
    store: Store, site: SiteConfig, profile: Profile
) -> None:
    evaluated, final = NOW - 2 * MINUTE, NOW - 4 * MINUTE
    blast = Blast("q", "b-7", NOW - timedelta(hours=3))
    old_work = WorkPeriod(
        "q",
        "w-1",
        NOW - EVENT_HISTORY - timedelta(days=2),
        NOW - EVENT_HISTORY - timedelta(days=1),
        WorkKind.REPAIR,
    )
    kept_from = final - LIGHT_BACK - MINUTE  # what judging the next minute needs, from the final look
    with store.batch():
        store.set_progress("q", evaluated, final)
        for event in (blast, old_work):
            store.append_event(event, payload_of(event), NOW)
    store_light(store, light(kept_from - MINUTE), light(kept_from), light(NOW - MINUTE))

    state = SiteState.restore(site, profile, store, NOW - timedelta(seconds=3), NOW)
    assert (state.evaluated_until, state.final_until) == (evaluated, final)
    assert state.newest == NOW - timedelta(seconds=3)
    assert state.events == [blast]  # a work period ended over EVENT_HISTORY ago is not read
    assert [r.ts for r in state.light] == [kept_from, NOW - MINUTE]
    assert state.light_kept_from == kept_from
    assert set(state.health) == {"n1", "n2", "l1", "wx"}
    assert all(h.online and h.last_seen == NOW for h in state.health.values())
    assert state.offsets == {"n1": 1.5}  # sensors without an offset have no entry
    assert len(state.recent) == 0


def test_restore_of_a_new_site_counts_from_now(store: Store, site: SiteConfig, profile: Profile) -> None:
    state = SiteState.restore(site, profile, store, None, NOW)
    assert state.evaluated_until is None and state.final_until is None and state.newest is None
    assert state.events == [] and state.light == []
    assert state.light_kept_from == NOW - LIGHT_BACK - MINUTE


def test_margins_are_the_profiles_and_asked_once(store: Store, site: SiteConfig, profile: Profile) -> None:
    state = SiteState.restore(site, profile, store, None, NOW)
    assert state.margins("sound") == rules.data_margins(profile, "sound") == (MINUTE, MINUTE)
    assert state.margins("light") == (LIGHT_BACK, timedelta(0))
    state.margin_cache["sound"] = (timedelta(seconds=7), timedelta(seconds=8))
    assert state.margins("sound") == (timedelta(seconds=7), timedelta(seconds=8))  # not asked again


def test_the_light_cache_keeps_time_order_and_lets_go_of_what_no_judgement_reads(
    store: Store, site: SiteConfig, profile: Profile
) -> None:
    state = SiteState.restore(site, profile, store, None, NOW)
    lateness = timedelta(minutes=5)
    judged = NOW + timedelta(minutes=10)  # the clock has moved on since the start
    keep_from = judged - LIGHT_BACK - lateness - MINUTE
    old = light(keep_from - timedelta(seconds=1))
    state.light = [old]
    burst = (1.0, 900.0, 1.0, 900.0)
    for reading in (
        light(NOW - timedelta(minutes=3), burst),
        light(NOW - LIGHT_BURSTS_KEPT - MINUTE, burst),  # a burst older than an hour: stripped
        light(NOW - timedelta(minutes=10)),
    ):
        state.cache_light(reading, judged, lateness)
    assert [r.ts for r in state.light] == sorted(r.ts for r in state.light)
    assert old not in state.light
    stripped = state.light[0]
    assert stripped.ts == NOW - LIGHT_BURSTS_KEPT - MINUTE
    assert stripped == replace(light(stripped.ts), burst=(), burst_rate_hz=None)
    assert state.light[-1].burst == burst  # recent bursts are kept for the flashing rule
    assert state.light_kept_from == keep_from  # later than restored (from NOW): moved on
    assert state.bursts_kept_from == judged - LIGHT_BURSTS_KEPT
    # Judging behind the clock (a backlog) never moves what is kept back.
    state.cache_light(light(NOW - timedelta(minutes=20)), judged - timedelta(hours=2), lateness)
    assert state.light_kept_from == keep_from and state.bursts_kept_from == judged - LIGHT_BURSTS_KEPT


def test_minutes_older_than_the_cache_read_their_light_from_the_store(
    store: Store, site: SiteConfig, profile: Profile
) -> None:
    old_minute = NOW - timedelta(days=4)
    store_light(store, light(old_minute - LIGHT_BACK), light(old_minute), light(old_minute + MINUTE))
    with store.batch():
        store.set_progress(site.id, NOW, NOW)  # judged up to now (else judging starts at the first reading)
    state = SiteState.restore(site, profile, store, None, NOW)
    assert state.light_cached(NOW)
    assert state.old_light(store, {NOW}) is None  # the cache holds it all
    assert state.old_light(store, set()) is None
    assert not state.light_cached(old_minute)
    found = state.old_light(store, {old_minute, old_minute + 2 * MINUTE})
    assert found is not None
    # From the first minute's lookback to the last minute's end (light looks no further ahead).
    assert [r.ts for r in found] == [old_minute - LIGHT_BACK, old_minute, old_minute + MINUTE]
    data = site_data(state, store, old_minute, old_minute + MINUTE, found)
    assert [r.ts for r in data.light] == [old_minute - LIGHT_BACK, old_minute]
    assert site_data(state, store, old_minute, old_minute + MINUTE).light == ()  # the cache has none


def test_site_data_reads_each_kind_with_its_margins(store: Store, site: SiteConfig, profile: Profile) -> None:
    start = NOW - 5 * MINUTE
    sound = [
        SoundLevels("q", "n1", start + timedelta(seconds=s), 1.0, 60.0, 61.0, 75.0)
        for s in range(-90, 150, 10)
    ]
    weather = [
        WeatherReading("q", "wx", start + timedelta(seconds=s), 60.0, 3.0, False)
        for s in (-120, -60, 60, 120)
    ]
    blast = Blast("q", "b-1", start - timedelta(hours=2))
    truck = TruckPassage("q", "t-1", start + timedelta(seconds=5), "g1", "in")
    with store.batch():
        for levels in sound:
            store.append_sound(levels, source="levels", late=False, now=NOW)
        for reading in weather:
            store.append_reading(reading, payload_of(reading), late=False, now=NOW)
    store_light(
        store, light(start - LIGHT_BACK - MINUTE), light(start - timedelta(hours=1)), light(start + MINUTE)
    )
    state = SiteState.restore(site, profile, store, None, NOW)
    state.events = [blast, truck]

    data = site_data(state, store, start, start + MINUTE)
    # Sound: from the in-memory mirror, a minute either side of the minute judged.
    assert list(data.sound) == [lv for lv in sound if start - MINUTE <= lv.ts < start + 2 * MINUTE]
    assert list(data.sound) == store.sound_between("q", start - MINUTE, start + 2 * MINUTE)
    assert [r.ts for r in data.weather] == [start - MINUTE, start + MINUTE]
    assert [r.ts for r in data.light] == [start - timedelta(hours=1)]  # three days back, none ahead
    assert data.blasts == (blast,) and data.trucks == (truck,)
    assert data.work == () and data.blast_notices == () and data.other_events == ()
