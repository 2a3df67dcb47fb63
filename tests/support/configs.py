"""The configuration of the in-process pipeline tests: the quarry "q" near Dovre.

One site, the same in every such test; what a test varies (its sensors, daemon timings,
alert gap) it passes in, so each test still shows the settings its assertions depend on.
A test whose configuration is itself the subject (tests/monitor/test_config.py, the
notices and render documents, the deploy tests) keeps its own text inline.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

Scalar = str | int | float | bool

QUARRY_SITE = """[[sites]]
id = "q"
name = "Quarry"
timezone = "America/Chicago"
latitude = 45.27
longitude = -91.62
"""


def _value(value: Scalar) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)  # a TOML basic string for the paths and names used here
    return repr(value)


def _table(header: str, values: Mapping[str, Scalar]) -> str:
    return f"{header}\n" + "".join(f"{key} = {_value(v)}\n" for key, v in values.items())


def sensor(sensor_id: str, kind: str, **settings: Scalar) -> dict[str, Scalar]:
    return {"id": sensor_id, "kind": kind, **settings}


def quarry_config(
    store: str | Path,
    *,
    sensors: Sequence[Mapping[str, Scalar]],
    daemon: Mapping[str, Scalar] | None = None,
    alerts: Mapping[str, Scalar] | None = None,
    retention_days: int | None = None,
) -> str:
    """TOML for the quarry with ``sensors``, its store at ``store``."""
    storage: dict[str, Scalar] = {"path": str(store)}
    if retention_days is not None:
        storage["retention_days"] = retention_days
    parts = [_table("[storage]", storage)]
    if daemon:
        parts.append(_table("[daemon]", daemon))
    if alerts:
        parts.append(_table("[alerts]", alerts))
    parts.append(QUARRY_SITE)
    parts.extend(_table("[[sites.sensors]]", s) for s in sensors)
    return "".join(parts)
