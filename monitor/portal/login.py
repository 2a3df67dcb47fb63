"""Logging in and out: the form, the password check behind the limiter, the server-side session."""

from __future__ import annotations

import secrets

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from monitor import credentials
from monitor.portal.data import Scope, User
from monitor.portal.web import BadCsrf, Web


class LoginPages:
    """``/login`` and ``/logout``."""

    def __init__(self, web: Web) -> None:
        self.web = web

    def routes(self) -> list[Route]:
        return [
            Route("/login", self.login_form, methods=["GET"]),
            Route("/login", self.login, methods=["POST"]),
            Route("/logout", self.logout, methods=["POST"]),
        ]

    async def login_form(self, request: Request) -> Response:
        return self.web.page(request, "login.html", None, error="")

    async def login(self, request: Request) -> Response:
        try:
            form = await self.web.checked_form(request)
        except BadCsrf:
            await run_in_threadpool(
                self.web.security.note, self.web.security_event("csrf_refused", request, None)
            )
            return self.web.page(
                request, "login.html", None, 403, error="The form expired: please try again."
            )
        name = str(form.get("name", ""))[:64]
        password = str(form.get("password", ""))
        address = self.web.source(request)
        account = self.web.accounts.get(name)
        wait = self.web.limiter.blocked(name, address)
        if wait > 0:
            await run_in_threadpool(
                self.web.security.note, self.web.security_event("login_throttled", request, account)
            )
            return self.web.page(
                request,
                "login.html",
                None,
                429,
                error=f"Too many failed logins: try again in {int(wait) + 1} s.",
            )
        stored = account.password_hash if account else credentials.dummy_hash()
        good = await run_in_threadpool(credentials.check_password, password, stored)
        if account is None or not good:
            self.web.limiter.failed(name, address)
            await run_in_threadpool(
                self.web.security.note, self.web.security_event("login_failed", request, account)
            )
            return self.web.page(request, "login.html", None, 401, error="Wrong name or password.")
        self.web.limiter.succeeded(name, address)
        await run_in_threadpool(self.web.sessions.close, request.session.get("sid"))  # a session it replaces
        sid = await run_in_threadpool(self.web.sessions.open, account)
        request.session.clear()
        request.session.update(user=account.name, sid=sid, csrf=secrets.token_urlsafe(24))
        scope = Scope(User.of(account), self.web.config)
        for site in scope.sites():
            await run_in_threadpool(
                self.web.portal.record_action, scope, site.id, "login", account.name, address, {}
            )
        return RedirectResponse("/", status_code=303)

    async def logout(self, request: Request) -> Response:
        await self.web.checked_form(request)
        scope = self.web.scope_or_none(request)
        await run_in_threadpool(self.web.sessions.close, request.session.get("sid"))
        if scope is not None:
            for site in scope.sites():
                await run_in_threadpool(
                    self.web.portal.record_action,
                    scope,
                    site.id,
                    "logout",
                    scope.user.name,
                    self.web.source(request),
                    {},
                )
        request.session.clear()
        return RedirectResponse("/login", status_code=303)
