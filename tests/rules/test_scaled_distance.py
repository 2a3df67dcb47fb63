"""rules/scaled_distance.py: scaled distance, the site law fitted on log-log axes, its intervals."""

from __future__ import annotations

import math
import random

import pytest

from rules.scaled_distance import MIN_EVENTS, fit_site_law, predict, scaled_distance, t975


def test_scaled_distance_is_distance_over_root_charge() -> None:
    assert scaled_distance(900.0, 100.0) == 90.0
    with pytest.raises(ValueError, match="charge_kg_per_delay"):
        scaled_distance(900.0, 0.0)
    with pytest.raises(ValueError, match="distance_m"):
        scaled_distance(-1.0, 10.0)


def test_points_on_a_law_give_it_back_with_no_scatter() -> None:
    k, beta = 1140.0, 1.6  # mm/s at SD in m/kg^0.5: a typical quarry law
    events = [(sd, k * sd**-beta) for sd in (10.0, 20.0, 35.0, 60.0, 120.0)]
    law = fit_site_law(events)
    assert law is not None and law.n == 5
    assert law.k == pytest.approx(k, rel=1e-9) and law.beta == pytest.approx(beta, rel=1e-9)
    assert law.s == pytest.approx(0.0, abs=1e-9)
    p = predict(law, 45.0)
    assert p.ppv == pytest.approx(k * 45.0**-beta, rel=1e-9)
    assert p.pi[0] == pytest.approx(p.ppv) and p.pi[1] == pytest.approx(p.ppv)


def test_intervals_widen_away_from_the_data_and_hold_most_new_blasts() -> None:
    rng = random.Random(7)
    k, beta, sigma = 1140.0, 1.6, 0.12  # log10 scatter
    events = [
        (sd, k * sd**-beta * 10 ** rng.gauss(0, sigma)) for sd in [rng.uniform(15, 80) for _ in range(25)]
    ]
    law = fit_site_law(events)
    assert law is not None and law.s == pytest.approx(sigma, rel=0.35)
    inside, outside = predict(law, 35.0), predict(law, 400.0)
    width = lambda p: math.log10(p.pi[1] / p.pi[0])  # noqa: E731
    assert width(outside) > width(inside)
    assert (
        inside.ci[0] < inside.ppv < inside.ci[1]
        and inside.pi[0] < inside.ci[0]
        and inside.ci[1] < inside.pi[1]
    )
    new = [
        (sd, k * sd**-beta * 10 ** rng.gauss(0, sigma)) for sd in [rng.uniform(15, 80) for _ in range(400)]
    ]
    held = sum(predict(law, sd).pi[0] <= ppv <= predict(law, sd).pi[1] for sd, ppv in new) / len(new)
    assert 0.88 <= held <= 0.99


def test_too_few_events_or_one_distance_fit_nothing() -> None:
    assert fit_site_law([(10.0, 50.0), (20.0, 20.0)]) is None  # fewer than MIN_EVENTS
    assert MIN_EVENTS == 3
    assert fit_site_law([(10.0, 50.0), (10.0, 40.0), (10.0, 45.0)]) is None
    assert fit_site_law([(10.0, 50.0), (20.0, 0.0), (30.0, -1.0)]) is None  # unusable PPVs dropped


def test_t_quantiles() -> None:
    assert t975(1) == 12.706 and t975(30) == 2.042 and t975(200) == 1.960
    with pytest.raises(ValueError):
        t975(0)
