"""The web portal: one Starlette application assembled from the portal's parts.

Who asks and what their role may open (web.py), logging in (login.py), the site pages
(pages.py), evidence (evidence_pages.py), the JSON API (api.py) and the refusals
(refusals.py) each live in a module of their own; here they are put together with the
middleware, outermost first: the host check and the per-route body limits before anything
reads the request, then the signed session cookie; security headers on every answer, a 500
among them (``PortalApp``).
Everything the pages read goes through monitor.portal.data (the facade, one site-scope check).
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.sessions import SessionMiddleware
from starlette.routing import BaseRoute, Mount
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp

from monitor.config import Config
from monitor.portal import limits
from monitor.portal.api import Api
from monitor.portal.complaint_pages import ComplaintPages
from monitor.portal.data import Portal
from monitor.portal.evidence_pages import EvidencePages
from monitor.portal.headers import SecurityHeaders
from monitor.portal.login import LoginPages
from monitor.portal.pages import SitePages
from monitor.portal.refusals import Refusals
from monitor.portal.report_pages import ReportPages
from monitor.portal.web import HERE, Web

COOKIE = "minewatch_session"


class PortalApp(Starlette):
    """Starlette with SecurityHeaders outside all of it: Starlette answers an unhandled error
    (its 500) outside every middleware added to it, so that answer went without them."""

    hsts = False

    def build_middleware_stack(self) -> ASGIApp:
        return SecurityHeaders(super().build_middleware_stack(), hsts=self.hsts)


def create_app(config: Config, portal: Portal | None = None, *, secret_key: str | None = None) -> PortalApp:
    portal = portal or Portal(config)
    pc = config.portal
    key = secret_key or pc.secret_key.value or secrets.token_urlsafe(32)
    web = Web(config, portal, key)
    routes: list[BaseRoute] = [
        *LoginPages(web).routes(),
        *SitePages(web).routes(),
        *EvidencePages(web).routes(),
        *ComplaintPages(web).routes(),
        *ReportPages(web).routes(),
        *Api(web).routes(),
        Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    tls = bool(pc.tls_cert) or pc.secure_cookies  # here, or at a proxy in front
    middleware = [
        Middleware(limits.HostCheck, hostnames=pc.hostnames),
        Middleware(limits.BodyLimit, max_upload_mb=pc.max_upload_mb),
        Middleware(
            SessionMiddleware,
            secret_key=key,
            session_cookie=COOKIE,
            max_age=int(pc.session_hours * 3600),
            same_site="strict",
            https_only=tls,
        ),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await run_in_threadpool(web.sessions.forget_stale, web.accounts)
        async with web.security.running(run_in_threadpool):
            try:
                yield
            finally:
                await run_in_threadpool(web.jobs.close)  # their files leave with the portal

    app = PortalApp(
        routes=routes,
        middleware=middleware,
        lifespan=lifespan,
        exception_handlers=Refusals(web).handlers(),
    )
    app.hsts = tls
    limits.relative_slash_redirects(app.router)
    app.state.portal = portal
    return app
