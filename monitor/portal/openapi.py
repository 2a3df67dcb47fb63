"""The OpenAPI 3.1 document of the JSON API (/api/v1), written out rather than generated.

Each path's roles are read from ``CAN``, the table the API refuses by, so that what the document
promises and what the API does are one fact."""

from __future__ import annotations

from typing import Any

from monitor.config import PORTAL_ROLES
from monitor.portal.web import CAN


def roles_of(what: str | None) -> str:
    """Who may read a path: the roles of ``CAN[what]`` in PORTAL_ROLES' order; None: every account."""
    if what is None:
        return "all"
    return ", ".join(role for role in PORTAL_ROLES if role in CAN[what])


def _get(
    summary: str, what: str | None, params: list[dict[str, Any]], schema: dict[str, Any]
) -> dict[str, Any]:
    responses: dict[str, Any] = {
        "200": {"description": "OK", "content": {"application/json": {"schema": schema}}},
        "401": {"description": "no or unknown token"},
        "403": {"description": "not for this account's role"},
        "404": {"description": "no such site/notice, or not in this account's scope"},
    }
    if DATE in params:
        reason = "date is not a day from 1970-01-01 to 9998-12-31"
        if FROM in params:
            reason += "; from/to not both given, the wrong way round, or not 10 minutes to 31 days apart"
        responses["400"] = {
            "description": f'{reason} ({{"error": reason, naming the field}})',
            "content": {"application/json": {"schema": OBJ}},
        }
    return {
        "get": {
            "summary": summary,
            "description": f"Roles: {roles_of(what)}. Another site's or notice's path answers 404.",
            "parameters": params,
            "responses": responses,
        }
    }


SITE = {"name": "site", "in": "path", "required": True, "schema": {"type": "string"}}
DATE = {
    "name": "date",
    "in": "query",
    "required": False,
    "description": "local day of the site, YYYY-MM-DD, from 1970-01-01 to 9998-12-31 (default: today;"
    " the day view: the latest hours with data)",
    "schema": {"type": "string", "format": "date"},
}
FROM = {
    "name": "from",
    "in": "query",
    "required": False,
    "description": "start of the period, site time: YYYY-MM-DDTHH:MM or a date (with to; instead of date)",
    "schema": {"type": "string"},
}
TO = {
    "name": "to",
    "in": "query",
    "required": False,
    "description": "end of the period (exclusive), site time; 10 minutes to 31 days after from",
    "schema": {"type": "string"},
}
OBJ = {"type": "object"}
LIST = {"type": "array", "items": OBJ}


def document(version: str) -> dict[str, Any]:
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "minewatch portal API",
            "version": version,
            "description": "What the portal's pages show, as JSON. Authenticate with "
            "`Authorization: Bearer TOKEN` (a token whose hash is in the account's token_hash).",
        },
        "servers": [{"url": "/api/v1"}],
        "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
        "security": [{"bearer": []}],
        "paths": {
            "/sites": _get("The sites this account may see", None, [], LIST),
            "/sites/{site}/status": _get(
                "Live status per sensor (state: ok, early_warning, violation or offline; last minute's LAeq,"
                " online, battery, calibration, clock offset)",
                "status",
                [SITE],
                OBJ,
            ),
            "/sites/{site}/findings": _get("Findings of a local day", "findings", [SITE, DATE], LIST),
            "/sites/{site}/alerts": _get("Alerts for the account's audience", "alerts", [SITE], LIST),
            "/sites/{site}/notices": _get("Notices of violation of a site", "notices", [SITE], LIST),
            "/notices/{notice}": _get(
                "A notice with its history (who, when, note)",
                "notices",
                [{"name": "notice", "in": "path", "required": True, "schema": {"type": "string"}}],
                OBJ,
            ),
            "/sites/{site}/actions": _get(
                "What was done through the portal at the site (who, role, action, target, from"
                " where, when, chain entry): events recorded, notice changes, bundles, logins",
                "events",
                [SITE],
                LIST,
            ),
            "/sites/{site}/day": _get(
                "The day and period view's data (a local day with date, any period with from and to;"
                " neither: the whole hours of the latest day with data): every configured sensor;"
                " per sound meter LAeq per minute up to a day (resolution minute: [ts, LAeq]) or hourly"
                " LAeq, L10, L90 beyond (resolution hour: [ts, LAeq, L10, L90]) with the limit of the"
                " standard judging it; per light and sky sensor [ts, lux_mean, lux_max]; light limits;"
                " per day the blast window and sunset; blasts recorded (with what a time scope keeps of"
                " their notice) and unreported; exempt periods;"
                " violation episodes; findings, each with its episode and notice (docs/PORTAL.md)",
                "day",
                [SITE, DATE, FROM, TO],
                OBJ,
            ),
        },
    }
