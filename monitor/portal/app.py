"""The web portal: Starlette routes, server-rendered Jinja2 pages and the JSON API.

Everything it reads or changes goes through monitor.portal.data (the facade and the one
site-scope check). Here: who is asking (session cookie or API token), what their role may
open, CSRF on every change, and turning the facade's answers into pages and JSON.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.sessions import SessionMiddleware
from starlette.requests import Request
from starlette.responses import (
    JSONResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from monitor import __version__
from monitor.config import AccountConfig, Config, SiteConfig
from monitor.errors import UsageError
from monitor.portal import auth, limits, upload
from monitor.portal.data import EVENT_KINDS, NotFound, Portal, Refused, Scope, User, new_event_id
from monitor.portal.jobs import Job, Jobs, TooManyJobs, remove_folder
from monitor.portal.security import Event, SecurityLog
from monitor.portal.sessions import Sessions

HERE = Path(__file__).parent
log = logging.getLogger("minewatch.portal")
COOKIE = "minewatch_session"

# What each role may open (besides its sites list). Anything else: 403.
CAN: dict[str, frozenset[str]] = {
    "status": frozenset({"operator"}),
    "events": frozenset({"operator"}),
    "alerts": frozenset({"operator", "town"}),
    "acknowledge": frozenset({"operator"}),
    "notices": frozenset({"town"}),
    "notice_act": frozenset({"town"}),
    "findings": frozenset({"operator", "town", "inspector"}),
    "day": frozenset({"inspector", "town"}),
    "evidence": frozenset({"inspector", "town"}),
}
AUDIENCE = {"operator": "operator", "town": "town", "inspector": "town"}
STATUS_LABELS = {
    "open": "open",
    "extension_requested": "extension requested",
    "extended": "extended",
    "corrected": "closed (corrected)",
    "escalated": "escalated",
}


class Forbidden(Exception):
    pass


class NotLoggedIn(Exception):
    pass


class BadCsrf(Exception):
    pass


def create_app(config: Config, portal: Portal | None = None, *, secret_key: str | None = None) -> Starlette:
    portal = portal or Portal(config)
    pc = config.portal
    key = secret_key or pc.secret_key.value or secrets.token_urlsafe(32)
    limiter = auth.LoginLimiter(pc.login_attempts, pc.login_window_s)
    sessions = Sessions(portal.store, key, pc.session_hours, portal.clock)
    all_sites = tuple(s.id for s in config.sites)
    security = SecurityLog(portal, all_sites)
    jobs = Jobs()
    accounts: dict[str, AccountConfig] = {a.name: a for a in pc.accounts}
    templates = Jinja2Templates(directory=str(HERE / "templates"))  # .html: autoescaped
    templates.env.globals.update(version=__version__, status_label=lambda s: STATUS_LABELS.get(s, s))
    templates.env.filters["local"] = _local_clock

    # ------------------------------------------------------------------ who asks

    def session_scope(request: Request) -> Scope:
        name = request.session.get("user")
        account = accounts.get(name) if isinstance(name, str) else None
        # The cookie is only a claim: the session must still be open on the server (sessions.py).
        if account is None or not sessions.valid(request.session.get("sid"), account):
            raise NotLoggedIn
        return Scope(User.of(account), config)

    def api_scope(request: Request) -> Scope:
        header = request.headers.get("authorization", "")
        if header.lower().startswith("bearer "):
            token = header[7:].strip()
            wanted = auth.hash_token(token)
            for account in accounts.values():
                if account.token_hash and secrets.compare_digest(account.token_hash, wanted):
                    return Scope(User.of(account), config)
            raise NotLoggedIn
        return session_scope(request)

    def may(scope: Scope, what: str) -> None:
        if scope.user.role not in CAN[what]:
            raise Forbidden(what)

    def source(request: Request) -> str:
        client = request.client
        return client.host if client else "unknown"

    def csrf_token(request: Request) -> str:
        token = request.session.get("csrf")
        if not isinstance(token, str):
            token = secrets.token_urlsafe(24)
            request.session["csrf"] = token
        return token

    async def checked_form(request: Request) -> FormData:
        form = await request.form()
        given = form.get("csrf")
        wanted = request.session.get("csrf")
        if (
            not isinstance(given, str)
            or not isinstance(wanted, str)
            or not secrets.compare_digest(given.encode(), wanted.encode())  # str: ASCII only
        ):
            raise BadCsrf
        return form

    def page(
        request: Request, name: str, scope: Scope | None, status_code: int = 200, **context: Any
    ) -> Response:
        context.update(user=scope.user if scope else None, csrf=csrf_token(request), can=CAN, scope=scope)
        response: Response = templates.TemplateResponse(request, name, context, status_code=status_code)
        return response

    def day_body(data: dict[str, Any], svg: str) -> str:
        """The day view's content (plot, findings, blasts): nothing in it depends on the account
        beyond the site and window the cache is keyed by, so it is rendered once per change."""
        site = config.site(data["site"])
        day = date.fromisoformat(data["date"])
        return templates.get_template("day_body.html").render(
            site=site,
            day=data,
            svg=svg,
            prev=(day - timedelta(days=1)).isoformat(),
            next=(day + timedelta(days=1)).isoformat(),
        )

    # ------------------------------------------------------------------ login

    async def login_form(request: Request) -> Response:
        return page(request, "login.html", None, error="")

    def security_event(kind: str, request: Request, account: AccountConfig | None) -> Event:
        """A security event by ``account``, or by nobody known: then recorded on every site, and
        without the name typed (people type their password into the name field)."""
        if account is None:
            return Event(kind, "", "", "unknown account", source(request), all_sites)
        scope = Scope(User.of(account), config)
        sites = tuple(s.id for s in scope.sites())
        return Event(kind, account.name, account.role, account.name, source(request), sites)

    async def login(request: Request) -> Response:
        try:
            form = await checked_form(request)
        except BadCsrf:
            await run_in_threadpool(security.note, security_event("csrf_refused", request, None))
            return page(request, "login.html", None, 403, error="The form expired: please try again.")
        name = str(form.get("name", ""))[:64]
        password = str(form.get("password", ""))
        address = source(request)
        account = accounts.get(name)
        wait = limiter.blocked(name, address)
        if wait > 0:
            await run_in_threadpool(security.note, security_event("login_throttled", request, account))
            return page(
                request,
                "login.html",
                None,
                429,
                error=f"Too many failed logins: try again in {int(wait) + 1} s.",
            )
        good = await run_in_threadpool(
            auth.check_password, password, account.password_hash if account else auth.dummy_hash()
        )
        if account is None or not good:
            limiter.failed(name, address)
            await run_in_threadpool(security.note, security_event("login_failed", request, account))
            return page(request, "login.html", None, 401, error="Wrong name or password.")
        limiter.succeeded(name, address)
        await run_in_threadpool(sessions.close, request.session.get("sid"))  # a session it replaces
        sid = await run_in_threadpool(sessions.open, account)
        request.session.clear()
        request.session.update(user=account.name, sid=sid, csrf=secrets.token_urlsafe(24))
        scope = Scope(User.of(account), config)
        for site in scope.sites():
            await run_in_threadpool(portal.record_action, scope, site.id, "login", account.name, address, {})
        return RedirectResponse("/", status_code=303)

    async def logout(request: Request) -> Response:
        await checked_form(request)
        scope = _try(session_scope, request)
        await run_in_threadpool(sessions.close, request.session.get("sid"))
        if scope is not None:
            for site in scope.sites():
                await run_in_threadpool(
                    portal.record_action, scope, site.id, "logout", scope.user.name, source(request), {}
                )
        request.session.clear()
        return RedirectResponse("/login", status_code=303)

    # ------------------------------------------------------------------ pages

    async def home(request: Request) -> Response:
        scope = session_scope(request)
        return page(request, "sites.html", scope, sites=scope.sites())

    async def status_page(request: Request) -> Response:
        scope = session_scope(request)
        may(scope, "status")
        site = scope.site(request.path_params["site"])
        status = await run_in_threadpool(portal.status, scope, site.id)
        start, end = portal.today(site)
        findings = await run_in_threadpool(portal.findings, scope, site.id, start, end)
        warnings = await run_in_threadpool(portal.early_warnings, scope, site.id, start, end)
        return page(
            request,
            "status.html",
            scope,
            site=site,
            status=status,
            findings=findings,
            warnings=warnings,
        )

    async def events_page(request: Request) -> Response:
        scope = session_scope(request)
        may(scope, "events")
        site = scope.site(request.path_params["site"])
        return page(
            request,
            "events.html",
            scope,
            site=site,
            kinds=EVENT_KINDS,
            error="",
            done=request.session.pop("event_done", None),
            recent=[a for a in portal.actions(scope, site.id) if a["action"] == "event_recorded"][:20],
        )

    async def record_event(request: Request) -> Response:
        scope = session_scope(request)
        may(scope, "events")
        site = scope.site(request.path_params["site"])
        kind = request.path_params["kind"]
        if kind not in EVENT_KINDS:
            raise NotFound(kind)
        form = await checked_form(request)
        error, done, code = "", None, 200
        try:
            payload = event_payload(kind, form, ZoneInfo(site.timezone), portal.clock())
            done = await run_in_threadpool(
                portal.record_event, scope, site.id, kind, payload, source(request)
            )
        except (Refused, UsageError) as exc:
            error, code = str(exc), 400
        if done is not None:
            # Post/redirect/get: reloading the page must not record the event again.
            request.session["event_done"] = {"kind": done["kind"], "id": done["id"]}
            return RedirectResponse(f"/sites/{site.id}/events", status_code=303)
        recent = [a for a in portal.actions(scope, site.id) if a["action"] == "event_recorded"][:20]
        return page(
            request,
            "events.html",
            scope,
            code,
            site=site,
            kinds=EVENT_KINDS,
            error=error,
            done=done,
            recent=recent,
            failed_kind=kind if error else "",
        )

    async def alerts_page(request: Request) -> Response:
        scope = session_scope(request)
        may(scope, "alerts")
        site = scope.site(request.path_params["site"])
        alerts = await run_in_threadpool(portal.alerts, scope, site.id, AUDIENCE[scope.user.role])
        acked = {
            a["target"]: a for a in portal.actions(scope, site.id, 500) if a["action"] == "alert_acknowledged"
        }
        return page(request, "alerts.html", scope, site=site, alerts=alerts, acked=acked)

    async def acknowledge(request: Request) -> Response:
        scope = session_scope(request)
        may(scope, "acknowledge")
        site = scope.site(request.path_params["site"])
        await checked_form(request)
        alert_id = request.path_params["alert"]
        alerts = await run_in_threadpool(portal.alerts, scope, site.id, "operator", 10_000)
        if alert_id not in {a["id"] for a in alerts}:
            raise NotFound(alert_id)
        await run_in_threadpool(
            portal.record_action, scope, site.id, "alert_acknowledged", alert_id, source(request), {}
        )
        return RedirectResponse(f"/sites/{site.id}/alerts", status_code=303)

    async def notices_page(request: Request) -> Response:
        scope = session_scope(request)
        may(scope, "notices")
        site = scope.site(request.path_params["site"])
        notices = await run_in_threadpool(portal.notices, scope, site.id)
        return page(
            request,
            "notices.html",
            scope,
            site=site,
            notices=list(reversed(notices)),
            tz=ZoneInfo(site.timezone),
        )

    async def notice_page(request: Request, error: str = "", message: str = "", code: int = 200) -> Response:
        scope = session_scope(request)
        may(scope, "notices")
        notice, history = await run_in_threadpool(portal.notice, scope, request.path_params["notice"])
        site = scope.site(notice.site)
        message = message or str(request.session.pop("flash", ""))
        return page(
            request,
            "notice.html",
            scope,
            code,
            site=site,
            notice=notice,
            history=history,
            error=error,
            message=message,
            tz=ZoneInfo(notice.timezone),
        )

    async def notice_document(request: Request) -> Response:
        scope = session_scope(request)
        may(scope, "notices")
        fmt = request.path_params["fmt"]
        if fmt not in ("html", "pdf"):
            raise NotFound(fmt)
        body = await run_in_threadpool(portal.notice_document, scope, request.path_params["notice"], fmt)
        media = "application/pdf" if fmt == "pdf" else "text/html; charset=utf-8"
        return Response(
            body,
            media_type=media,
            headers={
                "Content-Security-Policy": "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
            },
        )

    async def notice_act(request: Request) -> Response:
        scope = session_scope(request)
        may(scope, "notice_act")
        form = await checked_form(request)
        action = request.path_params["action"]
        days_text = str(form.get("days", "")).strip()
        try:
            days = int(days_text) if days_text else None
        except ValueError:
            return await notice_page(
                request, error=f"days: expected a whole number, got {days_text!r}", code=400
            )
        if days is not None and days > limits.MAX_EXTRA_DAYS:
            return await notice_page(
                request, error=f"days: at most {limits.MAX_EXTRA_DAYS}, got {days}", code=400
            )
        try:
            message = await run_in_threadpool(
                portal.notice_action,
                scope,
                request.path_params["notice"],
                action,
                str(form.get("reason", "")),
                source(request),
                extra_days=days,
                before_deadline_reason=str(form.get("before_deadline_reason", "")) or None,
            )
        except Refused as exc:
            return await notice_page(request, error=str(exc), code=400)
        # Post/redirect/get: a reload shows the notice, it does not repeat the change.
        request.session["flash"] = message
        notice_id = request.path_params["notice"]
        return RedirectResponse(f"/notices/{notice_id}", status_code=303)

    async def day_page(request: Request) -> Response:
        scope = session_scope(request)
        may(scope, "day")
        site = scope.site(request.path_params["site"])
        day = _day_param(request, site.timezone, portal.clock())
        # Data and plot from the facade's day cache, off the event loop (drawing a changed day
        # takes tens of ms, which would stall every other request).
        data, body = await run_in_threadpool(portal.day_view, scope, site.id, day, day_body)
        return page(request, "day.html", scope, site=site, day=data, body=body)

    def evidence_form(
        request: Request,
        scope: Scope,
        site: SiteConfig,
        status: int = 200,
        *,
        report: dict[str, Any] | None = None,
        error: str = "",
        held: list[Job] | None = None,
    ) -> Response:
        """The evidence page (window form, upload form), with a verify report or an error (and
        the account's bundles in the way of another, ``held``)."""
        today = portal.clock().astimezone(ZoneInfo(site.timezone)).date().isoformat()
        return page(
            request,
            "evidence.html",
            scope,
            status,
            site=site,
            today=today,
            report=report,
            error=error,
            held=held or [],
            max_upload_mb=pc.max_upload_mb,
        )

    async def evidence_page(request: Request) -> Response:
        scope = session_scope(request)
        may(scope, "evidence")
        return evidence_form(request, scope, scope.site(request.path_params["site"]))

    async def bundle(request: Request) -> Response:
        """Start preparing a bundle (a POST with the form's token: it costs a thread and disk)."""
        scope = session_scope(request)
        may(scope, "evidence")
        site = scope.site(request.path_params["site"])
        form = await checked_form(request)
        zone = ZoneInfo(site.timezone)
        try:
            start = limits.checked_time(str(form.get("from", "")), zone, "from")
            end = limits.checked_time(str(form.get("to", "")), zone, "to")
        except UsageError as exc:
            return evidence_form(request, scope, site, 400, error=str(exc))
        if end <= start:
            return evidence_form(request, scope, site, 400, error="to: must be after from")
        try:
            job = jobs.start(portal, scope, site.id, start, end)
        except TooManyJobs as exc:
            busy = evidence_form(request, scope, site, 429, error=str(exc), held=exc.held)
            busy.headers["Retry-After"] = "30"
            return busy
        window = {"from": start.isoformat(), "to": end.isoformat()}
        await run_in_threadpool(
            portal.record_action, scope, site.id, "bundle_prepared", job.id, source(request), window
        )
        return RedirectResponse(f"/sites/{site.id}/evidence/jobs/{job.id}", status_code=303)

    async def bundle_job(request: Request) -> Response:
        """Progress of a bundle being prepared (the page reloads itself), then the download."""
        scope = session_scope(request)
        may(scope, "evidence")
        site = scope.site(request.path_params["site"])
        job = jobs.get(request.path_params["job"], scope.user.name, site.id)
        if job.error:
            return page(request, "job.html", scope, 500, site=site, job=job)
        if job.done and request.path_params.get("file"):
            out, folder = job.take()
            from monitor.evidence import exported_window

            # the window the bundle discloses (the account's time scope cuts the one requested)
            await run_in_threadpool(
                portal.record_action,
                scope,
                site.id,
                "bundle_downloaded",
                out.name,
                source(request),
                {**exported_window(out), "bytes": out.stat().st_size},
            )
            return StreamingResponse(
                _stream_file(out, folder),
                media_type="application/zip",
                headers={
                    "Content-Disposition": f'attachment; filename="{out.name}"',
                    "Content-Length": str(out.stat().st_size),
                },
            )
        return page(request, "job.html", scope, site=site, job=job)

    async def verify_upload(request: Request) -> Response:
        scope = session_scope(request)
        may(scope, "evidence")
        site = scope.site(request.path_params["site"])

        def check_csrf(given: str) -> None:
            wanted = request.session.get("csrf")
            if not isinstance(wanted, str) or not secrets.compare_digest(given.encode(), wanted.encode()):
                raise BadCsrf

        # Who asks and the form's token are checked before the file is read (upload.py); the
        # body's size is bounded by portal.max_upload_mb (limits.BodyLimit).
        folder = Path(tempfile.mkdtemp(prefix="minewatch-verify-"))
        try:
            path = folder / "bundle.zip"
            try:
                name = await upload.receive_file(request, check_csrf, "bundle", path)
            except upload.BadUpload as exc:
                return evidence_form(request, scope, site, 400, error=str(exc))
            report = await run_in_threadpool(portal.verify, path)
        finally:
            remove_folder(folder)
        report["name"] = name
        outcome = {"ok": report["ok"], "problems": len(report["problems"]) + report["more_problems"]}
        await run_in_threadpool(
            portal.record_action, scope, site.id, "bundle_verified", name, source(request), outcome
        )
        return evidence_form(request, scope, site, report=report)

    # ------------------------------------------------------------------ API

    async def api_sites(request: Request) -> Response:
        scope = api_scope(request)
        return JSONResponse([{"id": s.id, "name": s.name, "timezone": s.timezone} for s in scope.sites()])

    async def api_status(request: Request) -> Response:
        scope = api_scope(request)
        may(scope, "status")
        return JSONResponse(await run_in_threadpool(portal.status, scope, request.path_params["site"]))

    async def api_findings(request: Request) -> Response:
        scope = api_scope(request)
        may(scope, "findings")
        site = scope.site(request.path_params["site"])
        day = _day_param(request, site.timezone, portal.clock())
        from monitor.portal.data import local_day

        start, end = local_day(day, ZoneInfo(site.timezone))
        body = await run_in_threadpool(portal.findings_json, scope, site.id, start, end)
        return Response(body, media_type="application/json")

    async def api_alerts(request: Request) -> Response:
        scope = api_scope(request)
        may(scope, "alerts")
        alerts = await run_in_threadpool(
            portal.alerts, scope, request.path_params["site"], AUDIENCE[scope.user.role]
        )
        return JSONResponse(alerts)

    async def api_notices(request: Request) -> Response:
        scope = api_scope(request)
        may(scope, "notices")
        notices = await run_in_threadpool(portal.notices, scope, request.path_params["site"])
        return JSONResponse([_notice_json(n, None) for n in notices])

    async def api_notice(request: Request) -> Response:
        scope = api_scope(request)
        may(scope, "notices")
        notice, history = await run_in_threadpool(portal.notice, scope, request.path_params["notice"])
        return JSONResponse(_notice_json(notice, history))

    async def api_actions(request: Request) -> Response:
        scope = api_scope(request)
        may(scope, "events")
        actions = await run_in_threadpool(portal.actions, scope, request.path_params["site"], 200)
        return JSONResponse(actions)

    async def api_day(request: Request) -> Response:
        scope = api_scope(request)
        may(scope, "day")
        site = scope.site(request.path_params["site"])
        day = _day_param(request, site.timezone, portal.clock())
        data, _ = await run_in_threadpool(portal.day_view, scope, site.id, day)
        return JSONResponse(data)

    async def api_openapi(request: Request) -> Response:
        from monitor.portal.openapi import document

        return JSONResponse(document(__version__))

    # ------------------------------------------------------------------ errors

    def wants_json(request: Request) -> bool:
        return request.url.path.startswith("/api/")

    def error_page(request: Request, status: int, api_error: str, title: str, message: str) -> Response:
        """A refusal as JSON for the API, as the error page (with the visitor's menu) otherwise."""
        if wants_json(request):
            return JSONResponse({"error": api_error}, status_code=status)
        return page(request, "error.html", _try(session_scope, request), status, title=title, message=message)

    async def on_not_found(request: Request, exc: Exception) -> Response:
        return error_page(
            request, 404, "not found", "Not found", "There is nothing here, or nothing you may see."
        )

    async def on_forbidden(request: Request, exc: Exception) -> Response:
        return error_page(
            request,
            403,
            "not for this account's role",
            "Not for your role",
            "Your account's role does not include this page.",
        )

    async def on_not_logged_in(request: Request, exc: Exception) -> Response:
        if wants_json(request):
            return JSONResponse(
                {"error": "authentication required (Authorization: Bearer TOKEN)"},
                status_code=401,
                headers={"WWW-Authenticate": "Bearer"},
            )
        if request.method == "GET":
            return RedirectResponse("/login", status_code=303)
        return page(request, "error.html", None, 401, title="Not logged in", message="Log in first.")

    async def on_bad_csrf(request: Request, exc: Exception) -> Response:
        scope = _try(session_scope, request)
        account = accounts.get(scope.user.name) if scope else None
        await run_in_threadpool(security.note, security_event("csrf_refused", request, account))
        return page(
            request,
            "error.html",
            scope,
            403,
            title="Refused",
            message="The form's security token is missing or wrong: reload the page and try again.",
        )

    async def on_http(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        if exc.status_code == 404:
            return await on_not_found(request, exc)
        return error_page(request, exc.status_code, str(exc.detail), str(exc.status_code), str(exc.detail))

    routes = [
        Route("/", home),
        Route("/login", login_form, methods=["GET"]),
        Route("/login", login, methods=["POST"]),
        Route("/logout", logout, methods=["POST"]),
        Route("/sites/{site}/status", status_page),
        Route("/sites/{site}/events", events_page),
        Route("/sites/{site}/events/{kind}", record_event, methods=["POST"]),
        Route("/sites/{site}/alerts", alerts_page),
        Route("/sites/{site}/alerts/{alert}/acknowledge", acknowledge, methods=["POST"]),
        Route("/sites/{site}/notices", notices_page),
        Route("/notices/{notice}", notice_page),
        Route("/notices/{notice}/document.{fmt}", notice_document),
        Route("/notices/{notice}/{action}", notice_act, methods=["POST"]),
        Route("/sites/{site}/day", day_page),
        Route("/sites/{site}/evidence", evidence_page),
        Route("/sites/{site}/evidence/bundle", bundle, methods=["POST"]),
        Route("/sites/{site}/evidence/jobs/{job}", bundle_job),
        Route("/sites/{site}/evidence/jobs/{job}/{file:path}", bundle_job),
        Route("/sites/{site}/evidence/verify", verify_upload, methods=["POST"]),
        Route("/api/v1/openapi.json", api_openapi),
        Route("/api/v1/sites", api_sites),
        Route("/api/v1/sites/{site}/status", api_status),
        Route("/api/v1/sites/{site}/findings", api_findings),
        Route("/api/v1/sites/{site}/alerts", api_alerts),
        Route("/api/v1/sites/{site}/notices", api_notices),
        Route("/api/v1/sites/{site}/day", api_day),
        Route("/api/v1/sites/{site}/actions", api_actions),
        Route("/api/v1/notices/{notice}", api_notice),
        Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    middleware = [
        Middleware(limits.HostCheck, hostnames=pc.hostnames),
        Middleware(limits.BodyLimit, max_upload_mb=pc.max_upload_mb),
        Middleware(
            SessionMiddleware,
            secret_key=key,
            session_cookie=COOKIE,
            max_age=int(pc.session_hours * 3600),
            same_site="strict",
            https_only=bool(pc.tls_cert) or pc.secure_cookies,
        ),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await run_in_threadpool(sessions.forget_stale, accounts)
        async with security.running(run_in_threadpool):
            yield

    app = Starlette(
        routes=routes,
        middleware=middleware,
        lifespan=lifespan,
        exception_handlers={
            NotFound: on_not_found,
            Forbidden: on_forbidden,
            NotLoggedIn: on_not_logged_in,
            BadCsrf: on_bad_csrf,
            HTTPException: on_http,
        },
    )
    app.add_middleware(_Headers, hsts=bool(pc.tls_cert) or pc.secure_cookies)
    limits.relative_slash_redirects(app.router)
    app.state.portal = portal
    return app


class _Headers:
    """Security headers on every response: no framing, no foreign scripts, no sniffing; and
    under TLS (``hsts``: here or at a proxy) browsers told to use HTTPS only for a year."""

    def __init__(self, app: Callable[..., Awaitable[None]], hsts: bool = False) -> None:
        self.app = app
        self.hsts = hsts

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                names = {k.lower() for k, _ in headers}
                extra = {
                    b"x-frame-options": b"DENY",
                    b"x-content-type-options": b"nosniff",
                    b"referrer-policy": b"same-origin",
                    b"content-security-policy": b"default-src 'self'; img-src 'self' data:;"
                    b" style-src 'self' 'unsafe-inline'; frame-ancestors 'none'",
                    b"cache-control": b"no-store",
                }
                if self.hsts:
                    extra[b"strict-transport-security"] = b"max-age=31536000"
                headers += [(k, v) for k, v in extra.items() if k not in names]
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, with_headers)


def _local_clock(ts: str | None, timezone: str) -> str:
    """'2026-11-27T15:00:00Z' -> '09:00' in the site's zone (the day view's times)."""
    if not ts:
        return ""
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).astimezone(ZoneInfo(timezone)).strftime("%H:%M")


def _try(get: Callable[[Request], Scope], request: Request) -> Scope | None:
    try:
        return get(request)
    except NotLoggedIn:
        return None


def _day_param(request: Request, timezone: str, now: datetime) -> date:
    text = request.query_params.get("date")
    if not text:
        return now.astimezone(ZoneInfo(timezone)).date()
    try:
        return limits.parse_day(text, "date")
    except UsageError as exc:
        raise HTTPException(400, str(exc)) from None


def _notice_json(notice: Any, history: list[Any] | None) -> dict[str, Any]:
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
        out["history"] = [
            {
                "seq": c.seq,
                "change": c.change,
                "status": c.status,
                "actor": c.actor,
                "note": c.note,
                "at": format_ts(c.at),
                "deadline": format_ts(c.deadline),
            }
            for c in history
        ]
    return out


def event_payload(kind: str, form: FormData, zone: ZoneInfo, now: datetime) -> dict[str, Any]:
    """The MQTT payload an event form stands for (then decoded like any MQTT event)."""
    from monitor.portal.data import format_ts

    def text(name: str) -> str:
        value = form.get(name, "")
        return value.strip() if isinstance(value, str) else ""

    def when(name: str, payload_name: str, out: dict[str, Any]) -> None:
        value = text(name)
        if value:
            out[payload_name] = format_ts(limits.checked_time(value, zone, payload_name))

    def number(name: str, out: dict[str, Any]) -> None:
        value = text(name)
        if value:
            try:
                out[name] = float(value)
            except ValueError:
                raise Refused(f"{name}: expected a number, got {value!r}") from None

    payload: dict[str, Any] = {}
    if kind == "blast-notice":
        payload["blast_id"] = text("blast_id")
        payload["issued_ts"] = format_ts(now)
        when("planned", "planned_ts", payload)
        recipients = [r.strip() for r in text("recipients").replace(",", "\n").splitlines() if r.strip()]
        payload["recipients"] = recipients
    elif kind == "blast":
        payload["blast_id"] = text("blast_id")
        when("ts", "ts", payload)
        if text("safety_reason"):
            payload["safety_reason"] = text("safety_reason")
        number("charge_kg", payload)
        number("overpressure_db", payload)
    elif kind == "truck":
        payload["id"] = new_event_id(kind)
        when("ts", "ts", payload)
        payload["gate"] = text("gate")
        payload["direction"] = text("direction")
        if text("truck_id"):
            payload["truck_id"] = text("truck_id")
    elif kind == "work":
        payload["id"] = new_event_id(kind)
        when("start", "start", payload)
        when("end", "end", payload)
        payload["kind"] = text("work_kind")
        payload["sensors"] = [s for s in form.getlist("sensors") if isinstance(s, str) and s]
    elif kind == "temporary-lighting":
        payload["id"] = new_event_id(kind)
        when("start", "start", payload)
        when("end", "end", payload)
        if text("description"):
            payload["description"] = text("description")
    return payload


async def _stream_file(path: Path, folder: Path) -> AsyncIterator[bytes]:
    try:
        with path.open("rb") as f:
            while chunk := await run_in_threadpool(f.read, 1 << 20):
                yield chunk
    finally:
        remove_folder(folder)
