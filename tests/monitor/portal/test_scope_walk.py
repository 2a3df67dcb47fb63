"""What an inspector scoped to a past window learns of later facts, route by route (the walk).

The leaks the walk found:
- the day view's cache was keyed by the window shown, not by whose scope it was computed for:
  an inspector asking for the same window as the Town got the Town's view, with a finding that
  reports past the inspector's scope (82.5 dB(A), a truck at 15:00:51 local).
"""

from __future__ import annotations

import json
from pathlib import Path

from monitor.portal.data import Scope, User
from monitor.portal.periods import checked_period
from tests.monitor.portal.test_time_scope_findings import CHICAGO, NOT_AFTER, NOT_BEFORE, _setup


def test_a_day_view_computed_for_the_town_is_not_served_to_a_scoped_inspector(tmp_path: Path) -> None:
    portal, scoped, _, inside, leak = _setup(tmp_path)
    town = Scope(User("bob", "town", ()), portal.config)
    period = checked_period(NOT_BEFORE, NOT_AFTER, CHICAGO)  # the inspector's whole scope
    seen, _ = portal.period_view(town, "s1", period)
    assert {f["id"] for f in seen["findings"]} == {inside, leak}
    view, plot = portal.period_view(scoped, "s1", period)
    assert [f["id"] for f in view["findings"]] == [inside]
    assert leak not in json.dumps(view) and "82.5" not in json.dumps(view) and "82.5" not in plot
    # And the other way round: the Town still gets its whole view after the inspector's.
    again, _ = portal.period_view(town, "s1", period)
    assert {f["id"] for f in again["findings"]} == {inside, leak}
