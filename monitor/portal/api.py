"""The JSON API under /api/v1 (docs/PORTAL.md; openapi.py describes it): a token or a session."""

from __future__ import annotations

from typing import Any
from zoneinfo import ZoneInfo

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from monitor import __version__
from monitor.portal.web import Web, day_param, period_param


class Api:
    """The machine clients' view of the same facts as the pages."""

    def __init__(self, web: Web) -> None:
        self.web = web

    def routes(self) -> list[Route]:
        return [
            Route("/api/v1/openapi.json", self.api_openapi),
            Route("/api/v1/sites", self.api_sites),
            Route("/api/v1/sites/{site}/status", self.api_status),
            Route("/api/v1/sites/{site}/findings", self.api_findings),
            Route("/api/v1/sites/{site}/alerts", self.api_alerts),
            Route("/api/v1/sites/{site}/notices", self.api_notices),
            Route("/api/v1/sites/{site}/day", self.api_day),
            Route("/api/v1/sites/{site}/actions", self.api_actions),
            Route("/api/v1/notices/{notice}", self.api_notice),
        ]

    async def api_sites(self, request: Request) -> Response:
        scope = self.web.api_scope(request)
        return JSONResponse([{"id": s.id, "name": s.name, "timezone": s.timezone} for s in scope.sites()])

    async def api_status(self, request: Request) -> Response:
        scope = self.web.api_scope(request)
        self.web.may(scope, "status")
        return JSONResponse(
            await run_in_threadpool(self.web.portal.status, scope, request.path_params["site"])
        )

    async def api_findings(self, request: Request) -> Response:
        scope = self.web.api_scope(request)
        self.web.may(scope, "findings")
        site = scope.site(request.path_params["site"])
        day = day_param(request, site.timezone, self.web.portal.clock())
        from monitor.portal.data import local_day

        start, end = local_day(day, ZoneInfo(site.timezone))
        body = await run_in_threadpool(self.web.portal.findings_json, scope, site.id, start, end)
        return Response(body, media_type="application/json")

    async def api_alerts(self, request: Request) -> Response:
        scope = self.web.api_scope(request)
        self.web.may(scope, "alerts")
        alerts = await run_in_threadpool(
            self.web.portal.alerts, scope, request.path_params["site"], scope.audience
        )
        return JSONResponse(alerts)

    async def api_notices(self, request: Request) -> Response:
        scope = self.web.api_scope(request)
        self.web.may(scope, "notices")
        notices = await run_in_threadpool(self.web.portal.notices, scope, request.path_params["site"])
        return JSONResponse([_notice_json(n, None) for n in notices])

    async def api_notice(self, request: Request) -> Response:
        scope = self.web.api_scope(request)
        self.web.may(scope, "notices")
        notice, history = await run_in_threadpool(
            self.web.portal.notice, scope, request.path_params["notice"]
        )
        return JSONResponse(_notice_json(notice, history))

    async def api_actions(self, request: Request) -> Response:
        scope = self.web.api_scope(request)
        self.web.may(scope, "events")
        actions = await run_in_threadpool(self.web.portal.actions, scope, request.path_params["site"], 200)
        return JSONResponse(actions)

    async def api_day(self, request: Request) -> Response:
        scope = self.web.api_scope(request)
        self.web.may(scope, "day")
        site = scope.site(request.path_params["site"])
        period = period_param(request, site.timezone)
        if period is None:
            period = await run_in_threadpool(self.web.portal.opening_period, scope, site.id)
        data, _ = await run_in_threadpool(self.web.portal.period_view, scope, site.id, period)
        return JSONResponse(data)

    async def api_openapi(self, request: Request) -> Response:
        from monitor.portal.openapi import document

        return JSONResponse(document(__version__))


def _notice_json(notice: Any, history: list[Any] | None) -> dict[str, Any]:
    from monitor.notify.formats import change_json
    from monitor.portal.data import format_ts

    out: dict[str, Any] = {
        "id": notice.id,
        "site": notice.site,
        "standard": notice.standard,
        "section": notice.section,
        "status": notice.status,
        "opened": format_ts(notice.opened),
        "deadline": format_ts(notice.deadline),
        "title": notice.data.get("title", ""),
        "episodes": len(notice.episodes),
    }
    if history is not None:
        out["history"] = [change_json(c) for c in history]  # without the change's data
    return out
