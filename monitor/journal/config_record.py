"""The configuration record's text: what the daemon chains at start-up and a bundle carries.

An allow-list, field by field, of the site's own settings that its findings depend on (the
site, its gates, sensors and their roles, profile choices, time zone, location, the adjoining
owners the notices name, and the Town's signing contacts), written as TOML in a fixed order.
Nothing of ``[portal]``, ``[broker]``, ``[storage]``, ``[daemon]``, ``[alerts]`` or
``[[recipients]]``, no other site, no secret, hash or file path: the chained record leaves the
operator's machine in every evidence bundle (docs/EVIDENCE.md, "What a bundle discloses").
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import tomli_w

from monitor.config import Config, SensorConfig, SiteConfig, TownConfig
from monitor.named_file import read_named_text

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
    # Recorded only when set, so that earlier records read alike: where the monitor stands on the
    # site plan or the earth (complaints' nearest monitors), a seismograph's distance to its
    # monitoring point (the site law before a blast).
    if sensor.plan is not None:
        table["plan"] = list(sensor.plan)
    if sensor.position is not None:  # [latitude, longitude]: the same use as plan
        table["position"] = list(sensor.position)
    if sensor.distance_m is not None:
        table["distance_m"] = sensor.distance_m
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
        # 6.F: who takes the notices for the Town (recorded only when listed: older records stay alike)
        **(
            {"town_contacts": [{"id": c.id, "name": c.name} for c in site.town_contacts]}
            if site.town_contacts
            else {}
        ),
    }


def _town(town: TownConfig) -> dict[str, Any]:
    """Who signs the notices and where the operator replies: printed on every notice."""
    return {"officer": town.officer, "title": town.title, "contact": town.contact}


def site_config_text(config: Config, site: SiteConfig) -> str:
    """The configuration text a bundle carries and the daemon chains for ``site``: its allow-list."""
    document: dict[str, Any] = {}
    if config.town.configured:
        document["town"] = _town(config.town)
    document["sites"] = [_site(site)]
    return _HEADER + tomli_w.dumps(document)


def profile_text(site: SiteConfig) -> tuple[str, str]:
    """(file name, TOML text) of the ordinance profile the site runs under."""
    if site.profile.endswith(".toml"):
        return Path(site.profile).name, read_named_text(site.profile, "profile")
    return f"{site.profile}.toml", resources.files("rules.profiles").joinpath(
        f"{site.profile}.toml"
    ).read_text(encoding="utf-8")


def config_record_texts(config: Config, site: SiteConfig) -> tuple[str, str, str]:
    """(profile name, profile text, configuration text): what a config record binds."""
    _, text = profile_text(site)
    return site.profile, text, site_config_text(config, site)
