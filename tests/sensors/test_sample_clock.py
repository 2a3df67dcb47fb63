"""A live source's level times: counted from its samples, following the system clock.

The system clock is passed in (each block's capture time), so a sound card whose clock runs off,
and a step of the system clock, are played here without hardware. The clock is compared every
CLOCK_CHECK_S (10) seconds of samples, on the least offset of those seconds."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from monitor.wire.codec import AudioBlock
from rules.model import SoundLevels
from sensors.sound import CLOCK_BOUND_S, CLOCK_CHECK_S, SampleClock, SoundProcessor

RATE = 8000
T0 = datetime(2026, 6, 15, 16, 0, tzinfo=UTC)


def card(
    seconds: int, wall_per_second: float, step_at: int | None = None, step_s: float = 0.0
) -> Iterator[tuple[np.ndarray, datetime]]:
    """Half-second blocks of noise, each with the system-clock time its last sample came in: the
    card delivers a second of samples every ``wall_per_second`` s of the system clock, which is
    set ``step_s`` at second ``step_at``."""
    rng = np.random.default_rng(5)
    for half in range(2 * seconds):
        wall_s = (half + 1) / 2 * wall_per_second
        if step_at is not None and (half + 1) / 2 > step_at:
            wall_s += step_s
        yield 0.05 * rng.standard_normal(RATE // 2), T0 + timedelta(seconds=wall_s)


def run(blocks: Iterator[tuple[np.ndarray, datetime]], audio: str = "off") -> list[object]:
    processor = SoundProcessor("q", "n1", RATE, 100.0, T0, audio=audio)
    return [record for block, captured in blocks for record in processor.feed(block, captured)]


def levels_of(records: list[object]) -> list[SoundLevels]:
    return [r for r in records if isinstance(r, SoundLevels)]


def assert_in_order(spans: list[tuple[datetime, datetime]]) -> None:
    """No span overlaps the one before, none goes back."""
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert start >= end, (end, start)


def test_a_card_on_time_is_counted_as_ever(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, "minewatch.sensors.sound"):
        levels = levels_of(run(card(20, 1.0)))
    assert [lv.ts for lv in levels] == [T0 + timedelta(seconds=s) for s in range(20)]
    assert caplog.records == []


def test_a_slow_card_is_re_anchored_forward_once_it_is_half_a_second_behind(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A card 0.5 % slow (its second lasts 1.005 s): the counted time is over 0.5 s behind all
    through the seconds 101 to 110, and is brought forward at the check after them."""
    with caplog.at_level(logging.WARNING, "minewatch.sensors.sound"):
        levels = levels_of(run(card(150, 1.005)))
    assert len(levels) == 150  # nothing left out: a gap forward
    assert_in_order([(lv.ts, lv.end) for lv in levels])
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and "its levels follow the system clock from here" in said[0], said
    gaps = [(b.ts - a.end).total_seconds() for a, b in itertools.pairwise(levels)]
    [(at, gap)] = [(i, g) for i, g in enumerate(gaps) if g]
    assert (at, gap) == (108, pytest.approx(0.505)), (at, gap)  # before the second ending at 110
    last_wall = T0 + timedelta(seconds=150 * 1.005)
    assert abs((levels[-1].end - last_wall).total_seconds()) <= CLOCK_BOUND_S


def test_a_step_of_the_system_clock_forward_is_followed_with_a_gap(caplog: pytest.LogCaptureFixture) -> None:
    """Set 30 s ahead at 10 s: followed at the check at 20 s, from the second ending there."""
    with caplog.at_level(logging.WARNING, "minewatch.sensors.sound"):
        levels = levels_of(run(card(30, 1.0, step_at=10, step_s=30.0)))
    assert [lv.ts for lv in levels] == [T0 + timedelta(seconds=s + (30 if s >= 19 else 0)) for s in range(30)]
    assert len(caplog.records) == 1


def test_a_step_back_leaves_out_the_periods_that_would_overlap_and_never_goes_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, "minewatch.sensors.sound"):
        records = run(card(30, 1.0, step_at=10, step_s=-2.6), audio="continuous")
    levels = levels_of(records)
    # Followed at the check at 20 s: seconds 19 to 21 would start at 16.4, 17.4 and 18.4 s, before
    # the 19 s the last one sent ended at.
    assert [(lv.ts - T0).total_seconds() for lv in levels] == pytest.approx(
        [*range(19), *(s - 2.6 for s in range(22, 30))]
    )
    assert_in_order([(lv.ts, lv.end) for lv in levels])
    blocks = [r for r in records if isinstance(r, AudioBlock)]
    assert_in_order([(b.ts, b.ts + timedelta(seconds=len(b.pcm) / 2 / RATE)) for b in blocks])
    assert len(blocks) == len(levels)
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 2, said  # the re-anchoring, and the seconds left out: once each
    assert "the system clock -2.60 s from it (beyond 0.5 s" in said[0]
    assert "are left out until they pass 2026-06-15T16:00:19+00:00" in said[1]


def test_fifty_ppm_over_a_day_is_re_anchored_every_half_second_of_drift() -> None:
    """The clock alone (no audio): a card 50 ppm fast drifts 4.3 s a day ahead of the system clock;
    the counted times are brought back each time they are half a second off."""
    clock = SampleClock(T0, "n1")
    reanchored_at = []
    for second in range(1, 86_401):
        captured = T0 + timedelta(seconds=second * (1 - 50e-6))
        if clock.follow(second, captured):
            reanchored_at.append(second)
        # off by at most the bound and what the card drifts between two checks
        assert abs((clock.at(second) - captured).total_seconds()) <= CLOCK_BOUND_S + CLOCK_CHECK_S * 50e-6
    assert len(reanchored_at) == 8  # 4.32 s / 0.5 s
    assert reanchored_at[0] == 10_010  # the first check past 10,000 s (0.5 s off)


def test_a_late_delivery_alone_moves_nothing() -> None:
    """A block handed over 2 s late (a busy machine) among blocks on time: the least offset of the
    check's seconds is the true one, so nothing is re-anchored (a gap and then a drop otherwise)."""
    clock = SampleClock(T0, "n1")
    late = {5: 2.0, 14: 2.0}
    for second in range(1, 31):
        captured = T0 + timedelta(seconds=second + late.get(second, 0.0))
        assert not clock.follow(second, captured)
    assert clock.at(30) == T0 + timedelta(seconds=30)
