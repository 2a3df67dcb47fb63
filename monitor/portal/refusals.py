"""Refusals: not found, not for the role, not logged in, a bad form token, a store that refuses
writes (a full disk), a client gone before its request was read; JSON for the API.

The same 404 for what does not exist and what the account may not see.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Match, Route

from monitor.failing_rounds import FailingRounds
from monitor.portal.data import NotFound
from monitor.portal.web import BadCsrf, Forbidden, NotLoggedIn, Web
from monitor.sqlite_files import refuses_writes

log = logging.getLogger("minewatch.portal")

_METHOD_ORDER = ("GET", "HEAD", "POST")


def _methods_taken(request: Request) -> str:
    """The Allow of a 405: every method the path's routes take. Starlette's own names those of
    the first route of the path alone (/login's GET and HEAD, not its POST)."""
    taken: set[str] = set()
    for route in request.app.router.routes:
        if isinstance(route, Route) and route.methods and route.matches(request.scope)[0] != Match.NONE:
            taken |= route.methods
    order = {method: i for i, method in enumerate(_METHOD_ORDER)}
    return ", ".join(sorted(taken, key=lambda method: (order.get(method, len(order)), method)))


class Refusals:
    def __init__(self, web: Web) -> None:
        self.web = web
        # Said once while it lasts (and every 10 minutes), not once a request.
        self.store_refusals = FailingRounds(log, f"Writing the store {web.config.storage.path}")

    def handlers(self) -> dict[Any, Callable[[Request, Exception], Awaitable[Response]]]:
        return {
            NotFound: self.on_not_found,
            Forbidden: self.on_forbidden,
            NotLoggedIn: self.on_not_logged_in,
            BadCsrf: self.on_bad_csrf,
            HTTPException: self.on_http,
            sqlite3.Error: self.on_store_error,
            ClientDisconnect: self.on_client_gone,
        }

    async def on_client_gone(self, request: Request, exc: Exception) -> Response:
        """The sender hung up before its request's body came: nobody to answer, nothing wrong
        here (it was an ERROR with a traceback in the log)."""
        return Response(status_code=400)

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
        response = self.web.error_page(
            request, exc.status_code, str(exc.detail), str(exc.status_code), str(exc.detail)
        )
        response.headers.update(exc.headers or {})
        if exc.status_code == 405 and (allowed := _methods_taken(request)):
            response.headers["Allow"] = allowed
        return response

    async def on_store_error(self, request: Request, exc: Exception) -> Response:
        """503 when the store refuses writes for now (a full disk): no fault of the visitor's, and
        nothing they sent was kept. Any other SQLite error is a 500, as before."""
        if refuses_writes(exc) is None:
            raise exc
        self.store_refusals.failed(exc)
        response = self.web.error_page(
            request,
            503,
            "the store cannot take writes now (its disk is full or failing); nothing was kept",
            "Not kept: try again later",
            "The monitor's record cannot take writes just now (its disk is full or failing), so"
            " nothing you sent was kept. The operator has been told in the log; try again later.",
        )
        response.headers["Retry-After"] = "60"
        return response
