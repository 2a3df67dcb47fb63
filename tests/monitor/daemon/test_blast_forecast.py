"""Scaled distance before the blast (issue 27): the site law from the site's own recorded
events, and the operator's early warning on each side of the profile's threshold."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from monitor.journal.site_law import forecasts, site_law_of, vibration_params
from rules.model import Blast, BlastNotice
from sensors.seismograph import event_messages, site_law_event
from tests.support.configs import quarry_config, sensor
from tests.support.pipeline_world import World

T0 = datetime(2026, 6, 15, 17, 0, tzinfo=UTC)  # 12:00 in Dovre (CDT)
K, BETA = 1140.0, 1.6  # mm/s at SD in m/kg^0.5
CHARGE = 100.0  # kg per delay


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    text = quarry_config(
        tmp_path / "store.db",
        retention_days=1,
        sensors=[
            sensor("n1", "sound", expected_period_s=1),
            sensor("sg1", "seismograph", location="Smith house", expected_period_s=86400),
        ],
    )
    w = World(tmp_path, text, T0)
    yield w
    w.close()


def record_blasts(world: World, distances: list[float]) -> None:
    """Past blasts: each notice with its charge and distance, the blast, its seismograph event."""
    for i, distance in enumerate(distances):
        blast_id, at = f"P{i}", T0 - timedelta(minutes=50 - 5 * i)
        ppv_mm_s = K * (distance / CHARGE**0.5) ** -BETA
        world.send(
            BlastNotice("q", blast_id, T0 - timedelta(hours=1), at, ("Town",), CHARGE, distance),
            Blast("q", blast_id, at),
        )
        wave = site_law_event(distance, CHARGE, ppv_in_s=ppv_mm_s / 25.4, record_s=1.0, freqs=(15.0,) * 3)
        world.send(*event_messages(wave, "q", "sg1", f"ev{i}", at, blast_id=blast_id))


def plan(world: World, blast_id: str, distance_m: float) -> None:
    notice = BlastNotice(
        "q", blast_id, world.now, world.now + timedelta(hours=2), ("Town",), CHARGE, distance_m
    )
    world.send(notice)
    world.levels(world.now - timedelta(seconds=30), 30, 55.0)
    world.advance(30)


def forecast_warnings(world: World) -> list[dict[str, object]]:
    return [a for a in world.alerts("early_warning") if "ground_vibration" in str(a["condition"])]


def test_the_site_law_comes_from_the_sites_own_events(world: World) -> None:
    record_blasts(world, [200.0, 300.0, 450.0, 700.0])
    site = world.config.sites[0]
    params = vibration_params(world.pipeline.sites["q"].profile)
    assert params is not None and (params.forecast_hz, params.forecast_fraction) == (15.0, 0.75)
    points = site_law_of(world.store, site, params)
    assert [p.blast_id for p in points] == ["P0", "P1", "P2", "P3"]
    assert [round(p.sd) for p in points] == [20, 30, 45, 70]
    for p in points:  # the PPV measured from the waveforms is the law's, as sent
        assert p.ppv_mm_s == pytest.approx(K * p.sd**-BETA, rel=0.05)


def test_an_upper_bound_over_the_threshold_warns_the_operator_once(world: World) -> None:
    record_blasts(world, [200.0, 300.0, 450.0, 700.0])
    plan(world, "NEAR", 120.0)  # SD 12: the law says ~21 mm/s, over 75 % of ~19 mm/s at 15 Hz
    warned = forecast_warnings(world)
    assert len(warned) == 1, warned
    message = str(warned[0]["message"])
    assert "Blast NEAR planned for" in message and "scaled distance 26.5 ft/lb^0.5" in message, message
    assert "the site law from 4 recorded events predicts" in message and "reduce the charge" in message
    assert warned[0]["condition"] == "early:ground_vibration:notice:NEAR"
    world.levels(world.now, 60, 55.0)
    world.advance(60)
    assert len(forecast_warnings(world)) == 1  # deduplicated while it stands
    site = world.config.sites[0]
    (ahead,) = forecasts(world.store, site, world.pipeline.sites["q"].profile, world.now)
    assert ahead.warn and ahead.prediction is not None
    assert ahead.prediction.pi[1] >= 0.75 * ahead.limit_mm_s


def test_an_upper_bound_under_the_threshold_does_not_warn(world: World) -> None:
    record_blasts(world, [200.0, 300.0, 450.0, 700.0])
    plan(world, "FAR", 400.0)  # SD 40: ~3 mm/s
    assert forecast_warnings(world) == []
    site = world.config.sites[0]
    (ahead,) = forecasts(world.store, site, world.pipeline.sites["q"].profile, world.now)
    assert not ahead.warn and ahead.prediction is not None
    assert ahead.prediction.pi[1] < 0.75 * ahead.limit_mm_s


def test_with_too_few_events_it_says_so_instead_of_predicting(world: World) -> None:
    record_blasts(world, [200.0, 300.0])
    plan(world, "NEAR", 120.0)
    assert forecast_warnings(world) == []
    site = world.config.sites[0]
    (ahead,) = forecasts(world.store, site, world.pipeline.sites["q"].profile, world.now)
    assert ahead.prediction is None and ahead.events == 2
    assert "no PPV predicted: the site law needs at least 3 recorded seismograph events" in ahead.text("in/s")
    assert "and 2 are recorded" in ahead.text("mm/s")


def test_a_fired_blast_is_no_longer_forecast(world: World) -> None:
    record_blasts(world, [200.0, 300.0, 450.0])
    plan(world, "NEAR", 120.0)
    world.send(Blast("q", "NEAR", world.now))
    site = world.config.sites[0]
    assert forecasts(world.store, site, world.pipeline.sites["q"].profile, world.now) == []
