"""rules.base.only_site: each rule judges its own site's records only, whatever the shell sends."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from rules.base import only_site
from rules.model import Blast, SiteData, SoundLevels

T0 = datetime(2026, 6, 1, 15, 0, tzinfo=UTC)


def _levels(site: str, sensor: str, second: int) -> SoundLevels:
    return SoundLevels(site, sensor, T0 + timedelta(seconds=second), 1.0, 60.0, 62.0, 75.0)


def test_another_sites_records_are_dropped_and_the_sound_regrouped() -> None:
    data = SiteData(
        sound=(_levels("quarry", "n1", 0), _levels("other", "n1", 0), _levels("quarry", "n2", 1)),
        blasts=(Blast("other", "b1", T0),),
    )
    mine = only_site(data, "quarry")
    assert mine.filtered_for == "quarry"
    assert [r.site for r in mine.sound] == ["quarry", "quarry"]
    assert mine.blasts == ()
    assert {k: [r.site for r in v] for k, v in mine.sound_by_sensor.items()} == {
        "n1": ["quarry"],
        "n2": ["quarry"],
    }
    assert only_site(mine, "quarry") is mine  # filtered once, not once per rule


def test_a_sites_own_data_is_marked_without_regrouping_its_sound() -> None:
    # The shell sends one site's data: nothing to drop, and the grouping by sensor (made when
    # the data was built) is kept rather than made again for every minute judged.
    data = SiteData(sound=tuple(_levels("quarry", f"n{s % 3}", s) for s in range(9)))
    mine = only_site(data, "quarry")
    assert mine.filtered_for == "quarry" and data.filtered_for == ""
    assert mine.sound is data.sound
    assert mine.sound_by_sensor is data.sound_by_sensor
    assert replace(mine, filtered_for="") == data  # the same records, only marked
