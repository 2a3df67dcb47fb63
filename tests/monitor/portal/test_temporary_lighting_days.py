"""The day view shades declared temporary lighting as exempt on the year's allowed days only.

It shaded every declared period, day 31 of the year too, while the lighting rules judge that
day's light like any other (6.C.6: "not longer than 30 total days within each year"): the page
and the findings disagreed. Both now count through rules.lighting.temporary_parts.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from monitor.config import parse_config
from monitor.journal.store import Store
from monitor.portal.data import Portal, Scope, User
from monitor.portal.periods import day_period
from monitor.wire.codec import payload_of
from rules.model import TemporaryLighting
from tests.support.config_samples import MINIMAL

CHICAGO = ZoneInfo("America/Chicago")
LIGHT = '[[sites.sensors]]\nid = "l1"\nkind = "light"\n'


def test_day_31_of_temporary_lighting_is_not_shaded_as_exempt(tmp_path: Path) -> None:
    db = tmp_path / "p.db"
    config = parse_config(f'[storage]\npath = "{db}"\n' + MINIMAL + LIGHT)
    store = Store(str(db))
    first = date(2026, 11, 1)
    with store.batch():
        for n in range(31):  # one night each, 20:00-23:00 site time
            on = datetime.combine(first + timedelta(days=n), datetime.min.time(), CHICAGO) + timedelta(
                hours=20
            )
            night = TemporaryLighting(
                "s1", f"tl-{n + 1}", on.astimezone(UTC), (on + timedelta(hours=3)).astimezone(UTC)
            )
            assert store.append_event(night, payload_of(night), on.astimezone(UTC)).stored
    store.close()
    portal = Portal(config, clock=lambda: datetime(2026, 12, 10, tzinfo=UTC))
    town = Scope(User("tess", "town", ()), config)

    def shaded(day: date) -> list[str]:
        exempt = portal.period(town, "s1", day_period(day, CHICAGO))["exempt"]
        return [e["why"] for e in exempt if e["sensors"] == ["l1"]]

    assert shaded(date(2026, 11, 30)) == ["temporary-lighting: day 30 of 2026"]
    assert shaded(date(2026, 12, 1)) == []  # day 31: judged like any other light
