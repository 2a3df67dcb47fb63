"""The window the portal says it exported is the bundle's own: a scoped inspector's window ends a
microsecond after not_after (the scope holds its end), which Portal.export and the sound CSV's
record printed to the millisecond ("…21:00:00.000Z") beside a manifest whose to_us is exact.
Real store, real export through the portal."""

from __future__ import annotations

import json
import zipfile
from datetime import datetime
from pathlib import Path

from tests.monitor.evidence.test_time_scope_records import NOT_AFTER, _setup
from tests.support.notices import TZ


def test_the_window_printed_is_the_manifests_to_the_microsecond(tmp_path: Path) -> None:
    portal, scoped, _, _ = _setup(tmp_path)
    # 20:00 to 22:00Z asked; the scope ends at 21:00:00Z and holds it: the window to 21:00:00.000001Z.
    asked = datetime(2026, 12, 3, 14, tzinfo=TZ), datetime(2026, 12, 3, 16, tzinfo=TZ)
    out = tmp_path / "scoped.zip"
    said = portal.export(scoped, "quarry", *asked, out)
    with zipfile.ZipFile(out) as zf:
        window = json.loads(zf.read("manifest.json"))["window"]
    assert window["to_us"] == int(NOT_AFTER.timestamp()) * 1_000_000 + 1
    assert said["to"] == window["to_utc"] == "2026-12-03T21:00:00.000001Z", said
    assert said["from"] == window["from_utc"] == "2026-12-03T20:00:00Z", said
    # The sound CSV of the same window, as its download is recorded, says the same end.
    csv_window, _ = portal.sound_csv(scoped, "quarry", ["n1"], *asked)
    assert (csv_window["from"], csv_window["to"]) == (window["from_utc"], window["to_utc"]), csv_window
