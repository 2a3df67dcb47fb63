"""monitor/daemon/recent_sound.py: the in-memory mirror of a site's recent sound readings.

The mirror loads from a real store (``Store.sound_between``, counted) and is kept as the
pipeline keeps it: ``ensure`` a minute before the store takes its readings, ``add`` each
reading the store stored. Whatever it holds, it must answer what the store would.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from monitor.daemon.recent_sound import RecentSound
from monitor.journal.store import Store
from rules.model import SoundLevels
from rules.times import MINUTE, floor_minute
from tests.support.pipeline_world import in_time_order

T0 = datetime(2026, 6, 15, 17, 0, tzinfo=UTC)


class Loads:
    """The store's loader, with each (site, start, end) it was asked for."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.asked: list[tuple[str, datetime, datetime]] = []

    def __call__(self, site: str, start: datetime, end: datetime) -> list[SoundLevels]:
        self.asked.append((site, start, end))
        return self.store.sound_between(site, start, end)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(tmp_path / "store.db")
    yield s
    s.close()


@pytest.fixture
def loads(store: Store) -> Loads:
    return Loads(store)


@pytest.fixture
def recent(loads: Loads) -> RecentSound:
    return RecentSound("q", loads)


def levels(seconds: float, sensor: str = "n1", level: float = 60.0, site: str = "q") -> SoundLevels:
    return SoundLevels(site, sensor, T0 + timedelta(seconds=seconds), 1.0, level, level + 1, level + 15)


def keep(store: Store, recent: RecentSound, readings: Sequence[SoundLevels]) -> None:
    """What the pipeline does with a batch: ensure the minutes, store, add what was new."""
    recent.ensure({floor_minute(lv.ts) for lv in readings if lv.site == recent.site})
    with store.batch():
        new = store.append_sounds([(lv, "levels", False) for lv in readings], T0)
    for lv, stored in zip(readings, new, strict=True):
        if stored and lv.site == recent.site:
            recent.add(lv, floor_minute(lv.ts))


def test_it_answers_what_the_store_would(store: Store, recent: RecentSound) -> None:
    keep(store, recent, [levels(s, level=60.0 + s % 7) for s in range(0, 180, 3)])
    keep(store, recent, [levels(s) for s in range(30, 60, 3)])  # duplicates: the store keeps the first
    keep(store, recent, [levels(400, site="other")])  # another site's reading is not this mirror's
    keep(store, recent, [levels(s + 0.5, level=90.0) for s in (10, 100)])  # late seconds, between
    for start, end in [
        (T0, T0 + 3 * MINUTE),
        (T0 + timedelta(seconds=30), T0 + timedelta(seconds=61)),  # inside minutes, across one
        (T0 + timedelta(seconds=3), T0 + timedelta(seconds=3)),  # empty: start <= ts < end
        (T0 - MINUTE, T0 + 10 * MINUTE),  # minutes with no data at all
    ]:
        assert in_time_order(recent.by_sensor(start, end)) == store.sound_between("q", start, end)
    assert len(in_time_order(recent.by_sensor(T0, T0 + 3 * MINUTE))) == 60 + 2
    assert in_time_order(recent.by_sensor(T0 + timedelta(seconds=3), T0 + timedelta(seconds=6))) == [
        levels(3, level=63.0)
    ]


def test_readings_come_out_per_sensor_in_time_order_as_the_store_has_them(
    store: Store, recent: RecentSound
) -> None:
    keep(store, recent, [levels(1, "n1"), levels(0, "n2")])
    keep(store, recent, [levels(0, "n1"), levels(1, "n2")])  # arrived later, for earlier seconds
    got = recent.by_sensor(T0, T0 + MINUTE)
    # Filed by sensor as they arrive; a sensor's earlier second goes in its place in time.
    assert got == {"n1": (levels(0, "n1"), levels(1, "n1")), "n2": (levels(0, "n2"), levels(1, "n2"))}
    assert in_time_order(got) == store.sound_between("q", T0, T0 + MINUTE)


def test_each_minute_is_loaded_once(store: Store, recent: RecentSound, loads: Loads) -> None:
    keep(store, recent, [levels(s) for s in range(0, 120, 10)])  # minutes T0 and T0+1 loaded first
    assert sorted(loads.asked) == [("q", T0, T0 + MINUTE), ("q", T0 + MINUTE, T0 + 2 * MINUTE)]
    loads.asked.clear()
    keep(store, recent, [levels(s) for s in range(5, 120, 10)])
    recent.by_sensor(T0, T0 + 2 * MINUTE)
    recent.by_sensor(T0 + timedelta(seconds=30), T0 + timedelta(seconds=90))
    assert loads.asked == []  # held: no more reads
    recent.by_sensor(T0 + 2 * MINUTE, T0 + timedelta(minutes=2, seconds=1))
    assert loads.asked == [("q", T0 + 2 * MINUTE, T0 + 3 * MINUTE)]  # a minute not held yet: read once
    assert len(recent) == 24


def test_a_minute_is_a_copy_taken_once_so_ensure_must_come_before_the_store(
    store: Store, recent: RecentSound
) -> None:
    recent.ensure([T0])
    with store.batch():  # stored behind the mirror's back, as the contract forbids
        store.append_sound(levels(5), source="levels", late=False, now=T0)
    assert in_time_order(recent.by_sensor(T0, T0 + MINUTE)) == []  # the mirror does not look again
    recent.clear()  # what the pipeline does when memory may differ from the store
    assert in_time_order(recent.by_sensor(T0, T0 + MINUTE)) == [levels(5)]


def test_adding_to_a_minute_never_ensured_is_an_error(recent: RecentSound) -> None:
    with pytest.raises(KeyError):
        recent.add(levels(5), T0)


def test_forget_before_evicts_whole_minutes_and_they_are_read_again_when_asked(
    store: Store, recent: RecentSound, loads: Loads
) -> None:
    keep(store, recent, [levels(s) for s in range(0, 240, 2)])  # four minutes, 30 a minute
    assert len(recent) == 120
    recent.forget_before(T0 + timedelta(minutes=2, seconds=30))  # minutes T0, T0+1 and T0+2 go
    assert len(recent) == 30
    loads.asked.clear()
    assert in_time_order(recent.by_sensor(T0 + 3 * MINUTE, T0 + 4 * MINUTE)) == store.sound_between(
        "q", T0 + 3 * MINUTE, T0 + 4 * MINUTE
    )
    assert loads.asked == []  # the minute kept is still held
    assert in_time_order(recent.by_sensor(T0, T0 + 4 * MINUTE)) == store.sound_between(
        "q", T0, T0 + 4 * MINUTE
    )
    assert [a[1] for a in loads.asked] == [T0, T0 + MINUTE, T0 + 2 * MINUTE]  # evicted: read again
    recent.forget_before(T0)  # nothing is older
    assert len(recent) == 120


def test_clear_forgets_everything(store: Store, recent: RecentSound, loads: Loads) -> None:
    keep(store, recent, [levels(s) for s in range(0, 60, 6)])
    recent.clear()
    assert len(recent) == 0
    loads.asked.clear()
    assert in_time_order(recent.by_sensor(T0, T0 + MINUTE)) == store.sound_between("q", T0, T0 + MINUTE)
    assert loads.asked == [("q", T0, T0 + MINUTE)]
