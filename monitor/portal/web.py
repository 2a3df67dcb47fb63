"""What every portal handler shares: who asks, what their role may open, forms and pages.

``Web`` holds the portal's parts for one configuration (the facade, templates, sessions, the
login limiter, the security log, export jobs) and the checks each request goes through: the
session or API token, the role (``CAN``), the form's CSRF token. The handlers (login.py,
pages.py, evidence_pages.py, api.py, refusals.py) take it; app.py assembles them.
"""

from __future__ import annotations

import secrets
from datetime import date, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.templating import Jinja2Templates

from monitor import __version__, credentials
from monitor.config import AccountConfig, Config
from monitor.errors import UsageError
from monitor.portal import limits
from monitor.portal.data import Portal, Scope, User
from monitor.portal.jobs import Jobs
from monitor.portal.periods import Period
from monitor.portal.security import Event, SecurityLog
from monitor.portal.sessions import Sessions
from monitor.portal.throttle import LoginLimiter
from monitor.times import parse_day
from rules.citation import citation_text
from rules.times import local_clock, local_moment

HERE = Path(__file__).parent

# What each role may open (besides its sites list). Anything else: 403.
CAN: dict[str, frozenset[str]] = {
    "status": frozenset({"operator"}),
    "events": frozenset({"operator"}),
    "alerts": frozenset({"operator", "town"}),
    "acknowledge": frozenset({"operator"}),
    "notices": frozenset({"operator", "town"}),  # the operator: the notices addressed to it
    "notice_act": frozenset({"town"}),
    "notice_request": frozenset({"operator"}),  # the operator's request for more time (13.3.A)
    "findings": frozenset({"operator", "town", "inspector"}),
    "plan": frozenset({"operator", "town", "inspector"}),  # the site plan (siteplan.py)
    "day": frozenset({"inspector", "town"}),
    "evidence": frozenset({"inspector", "town"}),
    "complaints": frozenset({"operator", "town"}),  # the operator's view leaves out contact details
    "complaint_act": frozenset({"town"}),
    "reports": frozenset({"town", "inspector"}),
    # A blast's seismograph report: whoever may see the blast (operator's status, the Town's and
    # the inspector's day view), within the account's sites and time scope.
    "blast_report": frozenset({"operator", "town", "inspector"}),
    # Raw audio around an exceedance: every role that sees the exceedance, within its sites and
    # time scope; never the public (the complaint form has no session).
    "audio": frozenset({"operator", "town", "inspector"}),
}
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


def portal_templates() -> Jinja2Templates:
    """The pages' templates with the globals and filters they use (one Web has one)."""
    templates = Jinja2Templates(directory=str(HERE / "templates"))  # .html: autoescaped
    templates.env.globals.update(version=__version__, status_label=lambda s: STATUS_LABELS.get(s, s))
    templates.env.filters["local"] = local_clock
    templates.env.filters["site_time"] = local_moment
    templates.env.filters["citation"] = citation_text
    from monitor.portal.siteplan import STATE_COLOURS, STATE_LABELS

    templates.env.globals.update(
        plan_state_labels=STATE_LABELS,
        plan_colours=STATE_COLOURS,
    )
    return templates


class Web:
    def __init__(self, config: Config, portal: Portal, key: str) -> None:
        self.config = config
        self.portal = portal
        self.pc = config.portal
        self.limiter = LoginLimiter(self.pc.login_attempts, self.pc.login_window_s)
        self.sessions = Sessions(portal.store, key, self.pc.session_hours, portal.clock)
        self.all_sites = tuple(s.id for s in config.sites)
        self.security = SecurityLog(portal, self.all_sites)
        self.jobs = Jobs()
        self.accounts: dict[str, AccountConfig] = {a.name: a for a in self.pc.accounts}
        self.templates = portal_templates()

    def scope_or_none(self, request: Request) -> Scope | None:
        """The visitor's scope when logged in (for the menu of an error page), else None."""
        try:
            return self.session_scope(request)
        except NotLoggedIn:
            return None

    def session_scope(self, request: Request) -> Scope:
        name = request.session.get("user")
        account = self.accounts.get(name) if isinstance(name, str) else None
        # The cookie is only a claim: the session must still be open on the server (sessions.py).
        if account is None or not self.sessions.valid(request.session.get("sid"), account):
            raise NotLoggedIn
        return Scope(User.of(account), self.config)

    def api_scope(self, request: Request) -> Scope:
        header = request.headers.get("authorization", "")
        if header.lower().startswith("bearer "):
            token = header[7:].strip()
            wanted = credentials.hash_token(token)
            for account in self.accounts.values():
                if account.token_hash and secrets.compare_digest(account.token_hash, wanted):
                    return Scope(User.of(account), self.config)
            raise NotLoggedIn
        return self.session_scope(request)

    def may(self, scope: Scope, what: str) -> None:
        if scope.user.role not in CAN[what]:
            raise Forbidden(what)

    def source(self, request: Request) -> str:
        client = request.client
        return client.host if client else "unknown"

    def csrf_token(self, request: Request) -> str:
        token = request.session.get("csrf")
        if not isinstance(token, str):
            token = secrets.token_urlsafe(24)
            request.session["csrf"] = token
        return token

    async def checked_form(self, request: Request) -> FormData:
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
        self, request: Request, name: str, scope: Scope | None, status_code: int = 200, **context: Any
    ) -> Response:
        context.update(
            user=scope.user if scope else None, csrf=self.csrf_token(request), can=CAN, scope=scope
        )
        response: Response = self.templates.TemplateResponse(request, name, context, status_code=status_code)
        return response

    def security_event(self, kind: str, request: Request, account: AccountConfig | None) -> Event:
        """A security event by ``account``, or by nobody known: then recorded on every site, and
        without the name typed (people type their password into the name field)."""
        if account is None:
            return Event(kind, "", "", "unknown account", self.source(request), self.all_sites)
        scope = Scope(User.of(account), self.config)
        sites = tuple(s.id for s in scope.sites())
        return Event(kind, account.name, account.role, account.name, self.source(request), sites)

    def wants_json(self, request: Request) -> bool:
        return request.url.path.startswith("/api/")

    def error_page(self, request: Request, status: int, api_error: str, title: str, message: str) -> Response:
        """A refusal as JSON for the API, as the error page (with the visitor's menu) otherwise."""
        if self.wants_json(request):
            return JSONResponse({"error": api_error}, status_code=status)
        return self.page(
            request, "error.html", self.scope_or_none(request), status, title=title, message=message
        )


def period_param(request: Request, timezone: str) -> Period | None:
    """The period a page or API call asks for: ``from`` and ``to`` (site time, a date or
    YYYY-MM-DDTHH:MM; both), or ``date`` (that local day); None when it names none (the
    caller opens on the latest data). 400, naming the field, when out of range or wrong."""
    from monitor.portal import periods

    zone = ZoneInfo(timezone)
    given = {k: request.query_params.get(k, "").strip() for k in ("from", "to", "date")}
    try:
        if given["from"] or given["to"]:
            if not (given["from"] and given["to"]):
                missing = "to" if given["from"] else "from"
                raise UsageError(f"{missing}: give both from and to (site time, YYYY-MM-DDTHH:MM)")
            start = limits.form_time(request.query_params, zone, "from")
            end = limits.form_time(request.query_params, zone, "to")
            try:
                return periods.checked_period(start, end, zone)
            except ValueError as exc:
                raise UsageError(str(exc)) from None
        if given["date"]:
            return periods.day_period(parse_day(given["date"], "date"), zone)
    except UsageError as exc:
        raise HTTPException(400, str(exc)) from None
    return None


def day_param(request: Request, timezone: str, now: datetime) -> date:
    """The ``date`` a page or API call asks for (the site's today by default); 400 when out of range."""
    text = request.query_params.get("date")
    if not text:
        return now.astimezone(ZoneInfo(timezone)).date()
    try:
        return parse_day(text, "date")
    except UsageError as exc:
        raise HTTPException(400, str(exc)) from None
