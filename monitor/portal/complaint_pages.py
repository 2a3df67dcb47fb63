"""Residents' complaints on the portal: the public page (no account), its status lookup, and the
Town's and the operator's lists and the Town's triage.

The public page is bounded without third-party services: the body limit of its route
(limits.FORMS), a limit per field (monitor/complaints/book.py), a per-address rate
(``ComplaintLimiter``: ``portal.complaints_per_hour`` per client address, an IPv6 client's
/64, and throttle.PREFIX_FACTOR times that per IPv6 /48), a honeypot field people do not see
and robots fill, the form's CSRF token, and no upload. A complaint accepted is stored and
chained before the resident sees its reference.
"""

from __future__ import annotations

import math
import threading
import time
import unicodedata
from collections import deque
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from monitor import geo
from monitor.complaints.book import (
    MAX_ADDRESS,
    MAX_DESCRIPTION,
    MAX_EMAIL,
    MAX_NAME,
    MAX_NOTE,
    MAX_PHONE,
    STATUSES,
)
from monitor.config import SiteConfig
from monitor.errors import UsageError
from monitor.portal import limits, siteplan
from monitor.portal.data import ComplaintForm, NotFound, Refused
from monitor.portal.throttle import PREFIX_FACTOR, address_key, prefix_key
from monitor.portal.web import Web
from monitor.times import OccursTwice
from rules.complaints import CATEGORIES

HONEYPOT = "website"  # hidden from people by the page's CSS; a robot fills it
MAX_SPAN = timedelta(days=7)  # a complaint's "when": a time or a span of at most a week
MAX_AGE = timedelta(days=366)
MAX_AHEAD = timedelta(minutes=10)  # a clock a little ahead of the server's
MAX_PLAN_M = 20_000.0  # a complaint's point on the plan lies within this of the mine
PICK_WIDTH_PX = 340  # the plan image's width on the complaint page without JavaScript (fits a phone)
PICK_WIDTHS_PX = (100.0, 4000.0)  # the widths a page may say its plan was clicked at
LIMITS = {
    "address": MAX_ADDRESS,
    "description": MAX_DESCRIPTION,
    "name": MAX_NAME,
    "email": MAX_EMAIL,
    "phone": MAX_PHONE,
    "note": MAX_NOTE,
}
MULTILINE_FIELDS = ("description",)  # a textarea: its line breaks and tabs are text
MULTILINE_CONTROLS = "\r\n\t"


class ComplaintLimiter:
    """At most ``per_hour`` complaints an hour from one client address (throttle.address_key:
    an IPv6 client's /64, an IPv4 client written as IPv6, ``::ffff:a.b.c.d``, its IPv4 address),
    and PREFIX_FACTOR x ``per_hour`` from one IPv6 /48 (throttle.prefix_key): one subscriber is
    usually given a /56 or a /48, whose 256 or 65,536 /64s would each bring the limit again.

    Bounded: at most ``MAX_KEYS`` addresses and prefixes are remembered (the quietest dropped),
    each with at most its limit of times.
    """

    MAX_KEYS = 4096

    def __init__(self, per_hour: int) -> None:
        self.per_hour = per_hour
        self._times: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def allow(self, address: str, now: float | None = None) -> float:
        """0 when one more is allowed (and counted against the address and its /48); else the
        seconds until the next is."""
        moment = time.monotonic() if now is None else now
        # The units logins are limited as (an IPv4-mapped address: IPv4; no /48 then).
        limits = [(address_key(address), self.per_hour)]
        if (prefix := prefix_key(address)) is not None:
            limits.append((prefix, self.per_hour * PREFIX_FACTOR))
        with self._lock:
            kept = []
            for key, limit in limits:
                times = self._times.pop(key, deque())
                while times and moment - times[0] >= 3600:
                    times.popleft()
                kept.append((key, limit, times))
            wait = max((3600 - (moment - t[0]) for _, limit, t in kept if len(t) >= limit), default=0.0)
            for key, _, times in kept:
                if not wait:
                    times.append(moment)
                self._times[key] = times  # most recently used last
            while len(self._times) > self.MAX_KEYS:
                self._times.pop(next(iter(self._times)))
            return wait


def _text(form: FormData, name: str) -> str:
    value = form.get(name, "")
    return value.strip() if isinstance(value, str) else ""


def _bounded(form: FormData, name: str, *, required: bool = False) -> str:
    value = _text(form, name)
    if required and not value:
        raise Refused(f"{name}: required")
    if len(value) > LIMITS[name]:
        raise Refused(f"{name}: at most {LIMITS[name]} characters, got {len(value)}")
    # A NUL, a terminal escape or a second line is no resident's text: stored, the Town's pages,
    # API and exports served it back. A textarea sends its line breaks (CR LF) and tabs.
    allowed = MULTILINE_CONTROLS if name in MULTILINE_FIELDS else ""
    if control := next((c for c in value if unicodedata.category(c) == "Cc" and c not in allowed), None):
        raise Refused(f"{name}: holds U+{ord(control):04X}, a control character; remove it and send again")
    return value


def _position(form: FormData, site: SiteConfig) -> geo.LatLon | None:
    """The point clicked on the site plan (``plan_lat``/``plan_lon``, set by the page after the
    click): WGS84 degrees within ``MAX_PLAN_M`` of the mine."""
    lat_text, lon_text = _text(form, "plan_lat"), _text(form, "plan_lon")
    if not lat_text and not lon_text:
        return None
    point = []
    for name, value, bound in (("plan_lat", lat_text, 90.0), ("plan_lon", lon_text, 180.0)):
        try:
            number = float(value)
        except ValueError:
            raise Refused(f"{name}: expected degrees, got {value[:40]!r}; click on the site plan") from None
        if not math.isfinite(number) or abs(number) > bound:
            raise Refused(f"{name}: expected degrees within ±{bound:g}, got {value[:40]!r}")
        point.append(number)
    position = (point[0], point[1])
    frame = siteplan.canvas(site, siteplan.PUBLIC_LAYERS)
    centre = (site.latitude, site.longitude) if frame is None else (frame.plane.lat0, frame.plane.lon0)
    if geo.great_circle_m(centre, position) > MAX_PLAN_M:
        raise Refused(f"plan_lat: the point lies more than {MAX_PLAN_M / 1000:g} km from the mine")
    return position


def pick_width(form: FormData) -> float:
    """The CSS pixels across the plan image was drawn at when clicked: ``pick_width`` as the
    page's script wrote it (the plan then fills its box), else ``PICK_WIDTH_PX`` (without
    JavaScript the page draws it that wide)."""
    text = _text(form, "pick_width")
    if not text:
        return float(PICK_WIDTH_PX)
    try:
        width = float(text)
    except ValueError:
        width = math.nan
    low, high = PICK_WIDTHS_PX
    if not (math.isfinite(width) and low <= width <= high):
        raise Refused(
            f"pick_width: expected the plan's width in pixels, {low:g} to {high:g}; got {text[:40]!r}"
        )
    return width


def picked(form: FormData, site: SiteConfig) -> geo.LatLon:
    """The point a click on a site's plan image (``<input type="image" name="pick-{site}">``)
    stands for: the browser sends the click's CSS pixels in the image, :func:`pick_width` across."""
    frame = siteplan.canvas(site, siteplan.PUBLIC_LAYERS)
    try:
        px, py = float(_text(form, f"pick-{site.id}.x")), float(_text(form, f"pick-{site.id}.y"))
    except ValueError:
        raise Refused("pick: click on the site plan") from None
    if frame is None or not (math.isfinite(px) and math.isfinite(py)):
        raise Refused("pick: this mine has no site plan; give an address")
    units = siteplan.WIDTH / pick_width(form)
    return frame.latlon(px * units, py * units)


def complaint_form(form: FormData, zone: ZoneInfo, now: datetime, site: SiteConfig) -> ComplaintForm:
    """The public form, checked field by field; Refused names the field and the reason."""
    if _text(form, HONEYPOT):
        raise Refused("form: not accepted (a field meant to stay empty was filled)")
    what = _text(form, "what")
    if what not in CATEGORIES:
        raise Refused(f"what: choose one of {', '.join(CATEGORIES)}")
    start_text, end_text = _text(form, "from"), _text(form, "to")
    if not start_text:
        raise Refused("from: required (when it was noticed, site time)")
    try:
        start = limits.checked_time(start_text, zone, "from", _text(form, "from_offset"))
        end = limits.checked_time(end_text, zone, "to", _text(form, "to_offset")) if end_text else start
    except OccursTwice:  # the form is shown again with the two readings to choose from
        raise
    except UsageError as exc:
        raise Refused(str(exc)) from None
    if end < start:
        raise Refused("to: before from")
    if end - start > MAX_SPAN:
        raise Refused("to: a span of at most 7 days")
    if end > now + MAX_AHEAD:
        raise Refused("from: in the future" if start > now + MAX_AHEAD else "to: in the future")
    if start < now - MAX_AGE:
        raise Refused("from: more than a year ago")
    address = _bounded(form, "address")
    position = _position(form, site)
    if not address and position is None:
        raise Refused("address: give an address or a point on the site plan")
    description = _bounded(form, "description", required=True)
    contact = {name: _bounded(form, name) for name in ("name", "email", "phone")}
    return ComplaintForm(what, start, end, address, None, description, contact, position)


class ComplaintPages:
    def __init__(self, web: Web) -> None:
        self.web = web
        self.limiter = ComplaintLimiter(web.pc.complaints_per_hour)

    def routes(self) -> list[Route]:
        return [
            Route("/complaint", self.form_page),
            Route("/complaint", self.submit, methods=["POST"]),
            Route("/complaint/status", self.status_page),
            Route("/complaint/plan.svg", self.plan_image),
            Route("/sites/{site}/complaints", self.list_page),
            Route("/complaints/{complaint}", self.detail_page),
            Route("/complaints/{complaint}/{action}", self.act, methods=["POST"]),
            Route("/api/v1/sites/{site}/complaints", self.api_list),
        ]

    async def plan_image(self, request: Request) -> Response:
        """`/complaint/plan.svg?site=&lat=&lon=`: the public plan (``PUBLIC_LAYERS`` only), with
        the chosen point marked when given."""
        site = self.web.config.site(request.query_params.get("site", ""))
        if site is None:  # the form asks for each plan by its site; not the first site's for any other
            raise NotFound("no such site")
        plan = siteplan.view(site, siteplan.PUBLIC_LAYERS)
        frame = siteplan.canvas(site, siteplan.PUBLIC_LAYERS)
        if frame is None:
            raise NotFound("no site plan")
        chosen = None
        try:
            lat, lon = float(request.query_params["lat"]), float(request.query_params["lon"])
            if math.isfinite(lat) and math.isfinite(lon):
                chosen = frame.at((lat, lon))
        except (KeyError, ValueError):
            chosen = None
        return Response(
            siteplan.svg(plan, element_id="public-plan", chosen=chosen, font=siteplan.PUBLIC_FONT_UNITS),
            media_type="image/svg+xml",
        )

    def _form(
        self,
        request: Request,
        error: str = "",
        code: int = 200,
        form: FormData | None = None,
        point: geo.LatLon | None = None,
    ) -> Response:
        sites = self.web.config.sites
        values = {k: v for k, v in (form or {}).items() if isinstance(v, str) and k not in ("csrf", HONEYPOT)}
        chosen_site = self.web.config.site(values.get("site", "")) or sites[0]
        if point is not None:
            values["plan_lat"], values["plan_lon"] = f"{point[0]:.6f}", f"{point[1]:.6f}"
        # One plan a site that has one: a click on it names the site as well as the point.
        plans = []
        for site in sites:
            plan = siteplan.view(site, siteplan.PUBLIC_LAYERS)
            if plan["drawn"]:
                height = round(PICK_WIDTH_PX * plan["height"] / plan["width"])
                plans.append({"site": site, "height": height, "chosen": values.get("site") == site.id})
        return self.web.page(
            request,
            "complaint.html",
            self.web.scope_or_none(request),
            code,
            sites=sites,
            categories=CATEGORIES,
            limits=LIMITS,
            error=error,
            values=values,
            plans=plans,
            pick_width=PICK_WIDTH_PX,
            twice=limits.twice_fields(values, ZoneInfo(chosen_site.timezone), ("from", "to")),
        )

    async def form_page(self, request: Request) -> Response:
        return self._form(request)

    async def submit(self, request: Request) -> Response:
        form = await self.web.checked_form(request)
        clicked = next((s for s in self.web.config.sites if f"pick-{s.id}.x" in form), None)
        if clicked is not None:  # a click on a plan: the page again, with the site and point chosen
            values = dict(form)
            values["site"] = clicked.id
            try:
                return self._form(request, form=FormData(values), point=picked(form, clicked))
            except Refused as exc:
                return self._form(request, str(exc), 400, form)
        wait = self.limiter.allow(self.web.source(request))
        if wait:
            minutes = max(1, math.ceil(wait / 60))
            return self._form(
                request,
                f"form: too many complaints from this address; try again in {minutes} minute(s)"
                " or call the Town",
                429,
                form,
            )
        site_id = _text(form, "site") or (
            self.web.config.sites[0].id if len(self.web.config.sites) == 1 else ""
        )
        site = self.web.config.site(site_id)
        try:
            if site is None:
                raise Refused("site: choose the mine the complaint is about")
            checked = complaint_form(form, ZoneInfo(site.timezone), self.web.portal.clock(), site)
            done = await run_in_threadpool(self.web.portal.submit_complaint, site.id, checked)
        except (OccursTwice, Refused) as exc:
            return self._form(request, str(exc), 400, form)
        request.session["complaint_done"] = done["id"]
        return RedirectResponse(f"/complaint/status?reference={done['id']}", status_code=303)

    async def status_page(self, request: Request) -> Response:
        reference = request.query_params.get("reference", "").strip()[:40]
        complaint, error, code = None, "", 200
        if reference:
            try:
                complaint = await run_in_threadpool(self.web.portal.complaint_status, reference)
            except NotFound:
                error, code = f"reference: no complaint {reference!r}", 404
        new = request.session.pop("complaint_done", None) == (complaint or {}).get("id")
        return self.web.page(
            request,
            "complaint_status.html",
            self.web.scope_or_none(request),
            code,
            complaint=complaint,
            reference=reference,
            error=error,
            new=new,
        )

    async def list_page(self, request: Request) -> Response:
        scope = self.web.session_scope(request)
        self.web.may(scope, "complaints")
        site = scope.site(request.path_params["site"])
        complaints = await run_in_threadpool(self.web.portal.complaints, scope, site.id)
        signals = await run_in_threadpool(self.web.portal.placement_signals, scope, site.id)
        return self.web.page(
            request, "complaints.html", scope, site=site, complaints=complaints, signals=signals
        )

    async def detail_page(self, request: Request, error: str = "", code: int = 200) -> Response:
        scope = self.web.session_scope(request)
        self.web.may(scope, "complaints")
        complaint = await run_in_threadpool(
            self.web.portal.complaint, scope, request.path_params["complaint"]
        )
        site = scope.site(complaint["site"])
        notices = []
        if scope.user.role == "town":
            notices = await run_in_threadpool(self.web.portal.notices, scope, site.id)
        return self.web.page(
            request,
            "complaint_detail.html",
            scope,
            code,
            site=site,
            complaint=complaint,
            notices=notices,
            statuses=STATUSES,
            error=error,
            message=str(request.session.pop("flash", "")),
        )

    async def act(self, request: Request) -> Response:
        scope = self.web.session_scope(request)
        self.web.may(scope, "complaint_act")
        form = await self.web.checked_form(request)
        reference = request.path_params["complaint"]
        try:
            message = await run_in_threadpool(
                self.web.portal.complaint_action,
                scope,
                reference,
                request.path_params["action"],
                _text(form, "status"),
                _text(form, "notice"),
                _text(form, "note"),
                self.web.source(request),
            )
        except Refused as exc:
            return await self.detail_page(request, str(exc), 400)
        request.session["flash"] = message
        return RedirectResponse(f"/complaints/{reference}", status_code=303)

    async def api_list(self, request: Request) -> Response:
        scope = self.web.api_scope(request)
        self.web.may(scope, "complaints")
        return JSONResponse(
            await run_in_threadpool(self.web.portal.complaints, scope, request.path_params["site"])
        )
