"""What an evidence bundle discloses: the configuration by allow-list, records by reader and window.

A bundle leaves the operator's machine (an inspector downloads it, a court reads it), so what it
shows in clear is decided here, field by field and kind by kind, never by what to leave out:

- ``evidence_config_text``: the exported site's own settings the findings depend on, written as
  TOML in a fixed order. Nothing of ``[portal]``, ``[broker]``, ``[storage]``, ``[daemon]``,
  ``[alerts]`` or ``[[recipients]]``, no other site, no secret, hash or file path. The daemon
  chains this very text at start-up (``Store.append_config_record``), so verify proves it.
- ``Disclosure``: the records a reader may see (their kinds, the alerts' audiences); a record
  outside the exported window or not for the reader is carried in ``chain.csv`` as its digest
  alone, so the chain still recomputes from anchor to anchor.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import tomli_w

from monitor.config import Config, SensorConfig, SiteConfig, TownConfig
from monitor.evidence.format import RECORD_KINDS

_HEADER = (
    "# minewatch evidence: the exported site's settings its findings depend on (an allow-list,\n"
    "# see docs/EVIDENCE.md). Nothing else of the monitor's configuration is disclosed.\n"
)


def _sorted(value: Any) -> Any:
    """Tables in key order at every depth: the same settings always give the same bytes."""
    if isinstance(value, Mapping):
        return {str(k): _sorted(value[k]) for k in sorted(value, key=str)}
    if isinstance(value, list | tuple):
        return [_sorted(v) for v in value]
    return value


def _sensor(sensor: SensorConfig) -> dict[str, Any]:
    table: dict[str, Any] = {
        "id": sensor.id,
        "kind": sensor.kind.value,
        "placement": sensor.placement.value,
        "location": sensor.location,
        "gates": list(sensor.gates),
        "expected_period_s": sensor.expected_period_s,
        # whether its messages had to be signed, not the key they were signed with
        "require_signature": sensor.require_signature,
    }
    if sensor.kind.value == "sound":  # only sound sensors take a calibration
        table["calibration"] = {
            "full_scale_db": sensor.calibration.full_scale_db,
            "offset_db": sensor.calibration.offset_db,
        }
    return table


def _site(site: SiteConfig) -> dict[str, Any]:
    return {
        "id": site.id,
        "name": site.name,
        "timezone": site.timezone,
        "latitude": site.latitude,
        "longitude": site.longitude,
        "operator": site.operator,
        "operator_address": site.operator_address,
        "preexisting": site.preexisting,
        "profile": site.profile,
        "agreement": _sorted(site.agreement),
        "flags": _sorted(site.flags),
        "gates": [{"id": g.id, "name": g.name} for g in site.gates],
        "sensors": [_sensor(s) for s in site.sensors],
        # 6.F: the owners each blast notice goes to, as the notices name them
        "adjoining_owners": [{"id": o.id, "name": o.name, "parcel": o.parcel} for o in site.adjoining_owners],
    }


def _town(town: TownConfig) -> dict[str, Any]:
    """Who signs the notices and where the operator replies: printed on every notice."""
    return {"officer": town.officer, "title": town.title, "contact": town.contact}


def evidence_config_text(config: Config, site: SiteConfig) -> str:
    """The configuration text a bundle carries and the daemon chains for ``site``: its allow-list."""
    document: dict[str, Any] = {}
    if config.town.configured:
        document["town"] = _town(config.town)
    document["sites"] = [_site(site)]
    return _HEADER + tomli_w.dumps(document)


# Every audience an alert may have but the operator's own: what the Town and its inspectors see
# (the portal's inspector and Town pages show alerts addressed to the town).
READER_AUDIENCES = frozenset({"town", "inspector"})


@dataclass(frozen=True, slots=True)
class Disclosure:
    """The records a bundle shows in clear, inside its window: the reader's view.

    ``kinds``: record kinds (``monitor.evidence.format.RECORD_KINDS``) the reader may see;
    ``audiences``: an alert is shown when one of its audiences is among these. Everything else
    in the chain segment, and every record outside the window, is carried as its digest alone.
    The default is the Town's and its inspectors' view (``minewatch evidence``, the portal).
    """

    kinds: frozenset[str] = frozenset(RECORD_KINDS)
    audiences: frozenset[str] = READER_AUDIENCES

    def manifest(self) -> dict[str, Any]:
        return {"kinds": sorted(self.kinds), "alert_audiences": sorted(self.audiences)}


TOWN_VIEW = Disclosure()
