"""Refusals: not found, not for the role, not logged in, a bad form token; JSON for the API.

The same 404 for what does not exist and what the account may not see.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from monitor.portal.data import NotFound
from monitor.portal.web import BadCsrf, Forbidden, NotLoggedIn, Web


class Refusals:
    def __init__(self, web: Web) -> None:
        self.web = web

    def handlers(self) -> dict[Any, Callable[[Request, Exception], Awaitable[Response]]]:
        return {
            NotFound: self.on_not_found,
            Forbidden: self.on_forbidden,
            NotLoggedIn: self.on_not_logged_in,
            BadCsrf: self.on_bad_csrf,
            HTTPException: self.on_http,
        }

    async def on_not_found(self, request: Request, exc: Exception) -> Response:
        return self.web.error_page(
            request, 404, "not found", "Not found", "There is nothing here, or nothing you may see."
        )

    async def on_forbidden(self, request: Request, exc: Exception) -> Response:
        return self.web.error_page(
            request,
            403,
            "not for this account's role",
            "Not for your role",
            "Your account's role does not include this page.",
        )

    async def on_not_logged_in(self, request: Request, exc: Exception) -> Response:
        if self.web.wants_json(request):
            return JSONResponse(
                {"error": "authentication required (Authorization: Bearer TOKEN)"},
                status_code=401,
                headers={"WWW-Authenticate": "Bearer"},
            )
        if request.method == "GET":
            return RedirectResponse("/login", status_code=303)
        return self.web.page(request, "error.html", None, 401, title="Not logged in", message="Log in first.")

    async def on_bad_csrf(self, request: Request, exc: Exception) -> Response:
        scope = self.web.scope_or_none(request)
        account = self.web.accounts.get(scope.user.name) if scope else None
        await run_in_threadpool(
            self.web.security.note, self.web.security_event("csrf_refused", request, account)
        )
        return self.web.page(
            request,
            "error.html",
            scope,
            403,
            title="Refused",
            message="The form's security token is missing or wrong: reload the page and try again.",
        )

    async def on_http(self, request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        if exc.status_code == 404:
            return await self.on_not_found(request, exc)
        return self.web.error_page(
            request, exc.status_code, str(exc.detail), str(exc.status_code), str(exc.detail)
        )
