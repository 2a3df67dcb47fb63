"""monitor/journal/config_record.py: the site's settings a bundle carries, by allow-list."""

from __future__ import annotations

import tomllib
from pathlib import Path

from monitor.config import parse_config
from monitor.journal.config_record import site_config_text
from tests.support.configs import quarry_config, sensor


def test_a_monitors_plan_point_and_a_seismographs_distance_are_recorded_only_when_set(tmp_path: Path) -> None:
    """Where a monitor stands (complaints' nearest monitors) and a seismograph's distance (the site law)
    are what was judged with; left out when not set, so that earlier records read alike."""
    plain = quarry_config(tmp_path / "s.db", sensors=[sensor("n1", "sound"), sensor("sg1", "seismograph")])
    placed = plain.replace('id = "n1"\n', 'id = "n1"\nplan = [120.0, -35.5]\n').replace(
        'id = "sg1"\n', 'id = "sg1"\ndistance_m = 450.0\n'
    )
    assert placed != plain
    for text, expected in ((plain, ({}, {})), (placed, ({"plan": [120.0, -35.5]}, {"distance_m": 450.0}))):
        config = parse_config(text)
        [site] = config.sites
        recorded = tomllib.loads(site_config_text(config, site))["sites"][0]["sensors"]
        n1, sg1 = (next(s for s in recorded if s["id"] == i) for i in ("n1", "sg1"))
        assert {k: n1[k] for k in ("plan",) if k in n1} == expected[0]
        assert {k: sg1[k] for k in ("distance_m",) if k in sg1} == expected[1]
