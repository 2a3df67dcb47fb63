"""The site pages: sites, status, events recorded by the operator, alerts, notices, the day view."""

from __future__ import annotations

import functools
import math
import re
import urllib.parse
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from monitor.config import SiteConfig
from monitor.errors import DecodeError, MinewatchError, UsageError
from monitor.journal import audio_clips
from monitor.portal import limits, periods, siteplan
from monitor.portal import svg as plot
from monitor.portal.data import EVENT_KINDS, NotFound, Refused, Scope, new_event_id
from monitor.portal.periods import Period
from monitor.portal.web import CAN, Web, period_param
from monitor.times import extra_days
from monitor.wire.protocol import parse_ts, shown
from rules.deadlines import MAX_EXTRA_DAYS
from rules.model import FindingKind

BLAST_REPORT_DAYS = 30  # the operator's status page lists the blast reports of this many days
LIVE_REFRESH_S = 10  # the operator's live status: seconds between updates (in place, or a reload)
MAX_BODIES = 64  # filter choices whose rendered day view is kept (each view keeps its last 16)


class SitePages:
    """The operator's and the Town's pages of a site, and the notices."""

    def __init__(self, web: Web) -> None:
        self.web = web
        # The day view's content renderers by (filters, notice links): see body_renderer.
        self._bodies: dict[tuple[Any, ...], Callable[[dict[str, Any], str], str]] = {}

    def routes(self) -> list[Route]:
        return [
            Route("/", self.home),
            Route("/sites/{site}/status", self.status_page),
            Route("/sites/{site}/status/live", self.live_status),
            Route("/sites/{site}/events", self.events_page),
            Route("/sites/{site}/events/{kind}", self.record_event, methods=["POST"]),
            Route("/sites/{site}/alerts", self.alerts_page),
            Route("/sites/{site}/alerts/{alert}/acknowledge", self.acknowledge, methods=["POST"]),
            Route("/sites/{site}/notices", self.notices_page),
            Route("/notices/{notice}", self.notice_page),
            Route("/notices/{notice}/document.{fmt}", self.notice_document),
            Route("/notices/{notice}/request-extension", self.request_extension, methods=["POST"]),
            Route("/notices/{notice}/{action}", self.notice_act, methods=["POST"]),
            Route("/sites/{site}/day", self.day_page),
            Route("/sites/{site}/plan", self.plan_page),
            # A blast id is the operator's text and may hold a slash ("2026/06-3").
            Route("/sites/{site}/blasts/{blast:path}/report.{fmt}", self.blast_report),
            Route("/sites/{site}/audio/{sensor}.wav", self.audio_clip),
        ]

    async def home(self, request: Request) -> Response:
        scope = self.web.session_scope(request)
        return self.web.page(request, "sites.html", scope, sites=scope.sites())

    async def status_page(self, request: Request) -> Response:
        scope = self.web.session_scope(request)
        self.web.may(scope, "status")
        site = scope.site(request.path_params["site"])
        chart = self.chart_url(scope, site.id)

        def gather() -> tuple[dict[str, Any], dict[str, Any], str]:
            # One trip off the event loop for all of it: the facts are kept by the facade
            # (Portal.status_page) while the site's chain and the status moment are unchanged.
            facts = self.web.portal.status_page(scope, site.id, BLAST_REPORT_DAYS)
            plan = self.web.portal.plan(scope, site.id, chart)
            return facts, plan, siteplan.svg(plan)

        facts, plan, plan_svg = await run_in_threadpool(gather)
        return self.web.page(
            request,
            "status.html",
            scope,
            site=site,
            **facts,
            refresh_s=LIVE_REFRESH_S,
            report_days=BLAST_REPORT_DAYS,
            plan=plan,
            plan_svg=plan_svg,
        )

    async def live_status(self, request: Request) -> Response:
        """The live part of the status page alone (status_live.html), which the page's script
        puts in place of the old one every LIVE_REFRESH_S seconds."""
        scope = self.web.session_scope(request)
        self.web.may(scope, "status")
        site = scope.site(request.path_params["site"])
        live = await run_in_threadpool(self.web.portal.live_status, scope, site.id)
        return self.web.page(request, "status_live.html", scope, site=site, **live, refresh_s=LIVE_REFRESH_S)

    def chart_url(self, scope: Scope, site_id: str) -> Callable[[str], str]:
        """Where a monitor on the plan links: its chart in the day view, for a role that may open
        it; else its row on the status page."""
        if scope.user.role in CAN["day"]:
            # The day view narrowed to the sensor (its findings), opened at its chart's panel
            # (sensor ids are letters, digits, '-' and '_': nothing to quote).
            return lambda sensor: f"/sites/{site_id}/day?sensor={sensor}#panel-{sensor}"
        return lambda sensor: f"/sites/{site_id}/status#sensor-{sensor}"

    async def plan_page(self, request: Request) -> Response:
        """`/sites/{site}/plan`: the site plan, for every role (monitor/portal/siteplan.py)."""
        scope = self.web.session_scope(request)
        self.web.may(scope, "plan")
        site = scope.site(request.path_params["site"])
        plan = await run_in_threadpool(self.web.portal.plan, scope, site.id, self.chart_url(scope, site.id))
        return self.web.page(request, "plan.html", scope, site=site, plan=plan, plan_svg=siteplan.svg(plan))

    async def blast_report(self, request: Request) -> Response:
        """`/sites/{site}/blasts/{blast}/report.pdf|html` (``?sensor=`` when several recorded it)."""
        scope = self.web.session_scope(request)
        self.web.may(scope, "blast_report")
        site = scope.site(request.path_params["site"])
        fmt = request.path_params["fmt"]
        if fmt not in ("html", "pdf"):
            raise NotFound(fmt)
        sensor = request.query_params.get("sensor") or None
        body = await run_in_threadpool(
            self.web.portal.blast_report, scope, site.id, request.path_params["blast"], fmt, sensor
        )
        media = "application/pdf" if fmt == "pdf" else "text/html; charset=utf-8"
        return Response(
            body,
            media_type=media,
            headers={
                "Content-Security-Policy": "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
            },
        )

    async def audio_clip(self, request: Request) -> Response:
        """A WAV of a sensor's raw audio, ``?from=&to=`` (RFC 3339), at most MAX_CLIP_S long: the
        stored blocks' samples byte for byte, each block's chain digest checked before it is
        served (409 naming a block that does not match); 404 outside the account's scope."""
        scope = self.web.session_scope(request)
        self.web.may(scope, "audio")
        site = scope.site(request.path_params["site"])
        sensor = request.path_params["sensor"]
        try:
            start = parse_ts(request.query_params.get("from", ""), "from")
            end = parse_ts(request.query_params.get("to", ""), "to")
        except DecodeError as exc:
            raise HTTPException(400, f"{exc}; give from= and to= as RFC 3339 times") from None
        if not timedelta(0) < end - start <= timedelta(seconds=audio_clips.MAX_CLIP_S):
            raise HTTPException(400, f"to: must be after from, by at most {audio_clips.MAX_CLIP_S:g} s")
        try:
            wav = await run_in_threadpool(self.web.portal.audio_clip, scope, site.id, sensor, start, end)
        except audio_clips.ClipRefused as exc:
            return self.web.error_page(request, 409, str(exc), "Audio not served", str(exc))
        name = re.sub(r"[^A-Za-z0-9-]", "", f"{site.id}-{sensor}-{start:%Y%m%dT%H%M%S}Z")
        headers = {"Content-Disposition": f'inline; filename="{name}.wav"'}
        return Response(wav, media_type="audio/wav", headers=headers)

    async def events_page(self, request: Request) -> Response:
        scope = self.web.session_scope(request)
        self.web.may(scope, "events")
        site = scope.site(request.path_params["site"])
        return self.web.page(
            request,
            "events.html",
            scope,
            site=site,
            kinds=EVENT_KINDS,
            design_units=self.web.portal.design_units(site),
            error="",
            failed_kind="",
            values={},
            recipients=[],
            twice={},
            done=request.session.pop("event_done", None),
            recent=[a for a in self.web.portal.actions(scope, site.id) if a["action"] == "event_recorded"][
                :20
            ],
        )

    async def record_event(self, request: Request) -> Response:
        scope = self.web.session_scope(request)
        self.web.may(scope, "events")
        site = scope.site(request.path_params["site"])
        kind = request.path_params["kind"]
        if kind not in EVENT_KINDS:
            raise NotFound(kind)
        form = await self.web.checked_form(request)
        error, done, code = "", None, 200
        try:
            payload = event_payload(kind, form, ZoneInfo(site.timezone), self.web.portal.clock())
            done = await run_in_threadpool(
                self.web.portal.record_event, scope, site.id, kind, payload, self.web.source(request)
            )
        except (Refused, UsageError) as exc:
            error, code = str(exc), 400
        except MinewatchError as exc:  # the event was not sent (the broker down, or none configured)
            error, code = str(exc), 503
        if done is not None:
            # Post/redirect/get: reloading the page must not record the event again.
            # A blast notice's recipients as identities: who was missed and which names match
            # no one are said in the answer, at once (issue 27), not first as a violation.
            request.session["event_done"] = {
                "kind": done["kind"],
                "id": done["id"],
                "missed": done.get("missed", []),
                "unmatched": done.get("unmatched", ""),
                "section": done.get("section", ""),
                "forecast": done.get("forecast", ""),
            }
            return RedirectResponse(f"/sites/{site.id}/events", status_code=303)
        recent = [a for a in self.web.portal.actions(scope, site.id) if a["action"] == "event_recorded"][:20]
        return self.web.page(
            request,
            "events.html",
            scope,
            code,
            site=site,
            kinds=EVENT_KINDS,
            design_units=self.web.portal.design_units(site),
            error=error,
            done=done,
            recent=recent,
            failed_kind=kind if error else "",
            values={k: v for k, v in form.items() if isinstance(v, str) and k != "csrf"},
            recipients=[r for r in form.getlist("recipient") if isinstance(r, str)],
            twice=limits.twice_fields(form, ZoneInfo(site.timezone), EVENT_TIME_FIELDS.get(kind, ())),
        )

    async def alerts_page(self, request: Request) -> Response:
        scope = self.web.session_scope(request)
        self.web.may(scope, "alerts")
        site = scope.site(request.path_params["site"])
        audience = scope.audience
        portal = self.web.portal
        # Chain anchors come every 15 minutes, day and night: told in one line, so that they do
        # not push what a person must act on out of the list.
        anchors = await run_in_threadpool(portal.alerts, scope, site.id, audience, 1, kind="anchor")
        kinds = [
            k for k in await run_in_threadpool(portal.alert_kinds, scope, site.id, audience) if k != "anchor"
        ]
        chosen = request.query_params.get("kind", "")
        if chosen not in kinds:
            chosen = ""  # a kind with no alert (or none at all): the whole list
        alerts = await run_in_threadpool(
            functools.partial(
                portal.alerts, scope, site.id, audience, 100, kind=chosen or None, not_kind="anchor"
            )
        )
        acked = {
            a["target"]: a
            for a in self.web.portal.actions(scope, site.id, 500)
            if a["action"] == "alert_acknowledged"
        }
        return self.web.page(
            request,
            "alerts.html",
            scope,
            site=site,
            alerts=alerts,
            anchors=anchors,
            acked=acked,
            kinds=kinds,
            chosen=chosen,
        )

    async def acknowledge(self, request: Request) -> Response:
        scope = self.web.session_scope(request)
        self.web.may(scope, "acknowledge")
        site = scope.site(request.path_params["site"])
        await self.web.checked_form(request)
        alert_id = request.path_params["alert"]
        alerts = await run_in_threadpool(self.web.portal.alerts, scope, site.id, "operator", 10_000)
        if alert_id not in {a["id"] for a in alerts}:
            raise NotFound(alert_id)
        await run_in_threadpool(
            self.web.portal.record_action,
            scope,
            site.id,
            "alert_acknowledged",
            alert_id,
            self.web.source(request),
            {},
        )
        return RedirectResponse(f"/sites/{site.id}/alerts", status_code=303)

    async def notices_page(self, request: Request) -> Response:
        scope = self.web.session_scope(request)
        self.web.may(scope, "notices")
        site = scope.site(request.path_params["site"])
        notices = await run_in_threadpool(self.web.portal.notices_dated, scope, site.id)
        return self.web.page(request, "notices.html", scope, site=site, notices=list(reversed(notices)))

    async def notice_page(
        self, request: Request, error: str = "", message: str = "", code: int = 200
    ) -> Response:
        scope = self.web.session_scope(request)
        self.web.may(scope, "notices")
        notice, history = await run_in_threadpool(
            self.web.portal.notice, scope, request.path_params["notice"]
        )
        site = scope.site(notice.site)
        message = message or str(request.session.pop("flash", ""))
        from monitor.notify.document import NoticeDates, facts_rows
        from monitor.notify.notices import changes_allowed

        # The facts as the notice document states them (one set of facts), episode by episode.
        facts = [facts_rows(e, notice.timezone, notice) for e in notice.episodes]
        complaints = await run_in_threadpool(self.web.portal.notice_complaints, scope, notice.id)
        clips = [
            await run_in_threadpool(
                self.web.portal.audio_clips, scope, site.id, e.facts.get("sensors", ()), e.start, e.end
            )
            for e in notice.episodes
        ]
        return self.web.page(
            request,
            "notice.html",
            scope,
            code,
            site=site,
            notice=notice,
            history=history,
            facts=facts,
            allowed=changes_allowed(notice.status, history),
            # When it was issued (local, and the instant), when the Town served it and the cure
            # deadline (counted from service, extended), as the notice's document says them.
            dates=NoticeDates.of(notice, history),
            max_days=MAX_EXTRA_DAYS,
            complaints=complaints,
            clips=clips,
            error=error,
            message=message,
        )

    async def notice_document(self, request: Request) -> Response:
        scope = self.web.session_scope(request)
        self.web.may(scope, "notices")
        fmt = request.path_params["fmt"]
        if fmt not in ("html", "pdf"):
            raise NotFound(fmt)
        body = await run_in_threadpool(
            self.web.portal.notice_document, scope, request.path_params["notice"], fmt
        )
        media = "application/pdf" if fmt == "pdf" else "text/html; charset=utf-8"
        headers = {"Content-Security-Policy": "default-src 'none'; img-src data:; style-src 'unsafe-inline'"}
        if fmt == "pdf":  # saved under the notice's own id (ids are [A-Za-z0-9-])
            notice_id = re.sub(r"[^A-Za-z0-9-]", "", request.path_params["notice"]).upper()
            headers["Content-Disposition"] = f'inline; filename="{notice_id}.pdf"'
        return Response(body, media_type=media, headers=headers)

    async def notice_act(self, request: Request) -> Response:
        scope = self.web.session_scope(request)
        self.web.may(scope, "notice_act")
        form = await self.web.checked_form(request)
        action = request.path_params["action"]
        try:
            days = _extra_days(form)
        except UsageError as exc:
            return await self.notice_page(request, error=str(exc), code=400)
        try:
            message = await run_in_threadpool(
                self.web.portal.notice_action,
                scope,
                request.path_params["notice"],
                action,
                str(form.get("reason", "")),
                self.web.source(request),
                extra_days=days,
                before_deadline_reason=str(form.get("before_deadline_reason", "")) or None,
                served_on=str(form.get("served_on", "")) or None,
            )
        except Refused as exc:
            return await self.notice_page(request, error=str(exc), code=400)
        # Post/redirect/get: a reload shows the notice, it does not repeat the change.
        request.session["flash"] = message
        notice_id = request.path_params["notice"]
        return RedirectResponse(f"/notices/{notice_id}", status_code=303)

    async def request_extension(self, request: Request) -> Response:
        """The operator's request for more time on a notice (13.3.A): its explanation and, if it
        says, how many days; refused on the notice's page in the form's words."""
        scope = self.web.session_scope(request)
        self.web.may(scope, "notice_request")
        form = await self.web.checked_form(request)
        try:
            days = _extra_days(form)
        except UsageError as exc:
            return await self.notice_page(request, error=str(exc), code=400)
        try:
            message = await run_in_threadpool(
                self.web.portal.request_extension,
                scope,
                request.path_params["notice"],
                str(form.get("explanation", "")),
                days,
                self.web.source(request),
            )
        except Refused as exc:
            return await self.notice_page(request, error=str(exc), code=400)
        request.session["flash"] = message  # post/redirect/get, as notice_act
        return RedirectResponse(f"/notices/{request.path_params['notice']}", status_code=303)

    async def day_page(self, request: Request) -> Response:
        """The day and period view: ``?date=`` a local day, ``?from=&to=`` any period (site time),
        nothing: the latest hours with data; ``sensor``, ``standard``, ``kind`` filter the
        findings. Every link is a plain GET: the page works without JavaScript."""
        scope = self.web.session_scope(request)
        self.web.may(scope, "day")
        site = scope.site(request.path_params["site"])
        try:
            period = period_param(request, site.timezone)
        except HTTPException as exc:
            if choices := twice_choices(request, ZoneInfo(site.timezone)):
                # A time the clocks showed twice: the refusal, and a link for each reading.
                return self.web.page(
                    request, "error.html", scope, 400, title="Which one?", message=exc.detail, choices=choices
                )
            raise
        if period is None:
            period = await run_in_threadpool(self.web.portal.opening_period, scope, site.id)
        chosen = self.finding_filters(request, site)
        body = self.body_renderer(chosen, scope.user.role in CAN["notices"])
        # Data and page from the facade's view cache, off the event loop (drawing a changed
        # period takes tens of ms, a list of thousands of findings as long: either would stall
        # every other request).
        data, page = await run_in_threadpool(self.web.portal.period_view, scope, site.id, period, body)
        return self.web.page(request, "day.html", scope, site=site, day=data, body=page)

    def body_renderer(
        self, chosen: dict[str, str], notice_links: bool
    ) -> Callable[[dict[str, Any], str], str]:
        """The renderer of the view's content for these filters: one function per choice, the
        key the view cache keeps its page under (the last MAX_BODIES choices are kept)."""
        key = (tuple(sorted(chosen.items())), notice_links)
        render = self._bodies.pop(key, None) or functools.partial(
            self.day_body, chosen=dict(chosen), notice_links=notice_links
        )
        self._bodies[key] = render
        while len(self._bodies) > MAX_BODIES:
            del self._bodies[next(iter(self._bodies))]
        return render

    def day_body(self, data: dict[str, Any], svg: str, *, chosen: dict[str, str], notice_links: bool) -> str:
        """The view's content (links, plot, sensors, episodes, findings, blasts): nothing in it
        depends on the account beyond the site and window the cache is keyed by, and whether
        it may open notices."""
        site = self.web.config.site(data["site"])
        assert site is not None
        zone = ZoneInfo(site.timezone)
        period = Period(_utc(data["from"]), _utc(data["to"]), zone)

        # The links keep the findings' filters: moving through time keeps what is looked at.
        kept = "".join(f"&{k}={urllib.parse.quote(v)}" for k, v in chosen.items() if v)

        def link(p: Period | None) -> str:
            return "" if p is None else f"?{p.query()}{kept}"

        groups = finding_groups(data, chosen, zone)
        # The episodes' shading links to the notice where the reader may open it (the findings
        # list's allow-list), else to its findings on the page: there, under its group or, when
        # the filters leave the group out, its line in the list of episodes.
        if notice_links:
            svg = plot.with_notice_links(svg, data["episodes"])
        grouped = {g["episode"]["id"] for g in groups if g["episode"]}
        steps = [
            (step, link(periods.aligned(step, period.centre, zone)))
            for step in ("hour", "day", "week", "month")
        ]
        return self.web.templates.get_template("day_body.html").render(
            site=site,
            day=data,
            svg=svg,
            step=periods.step_of(period),
            nav={
                "prev": link(periods.shifted(period, -1)),
                "next": link(periods.shifted(period, 1)),
                "zoom_in": link(periods.zoomed(period, -1)),
                "zoom_out": link(periods.zoomed(period, 1)),
                "steps": steps,
            },
            form_from=periods.form_value(period.start, zone),
            form_to=periods.form_value(period.end, zone),
            # The reading of an end the clocks showed twice, chosen beside the field (_twice.html).
            form_twice={
                name: (
                    limits.twice_fields({name: periods.form_value(moment, zone)}, zone, (name,)).get(name),
                    periods.offset_if_twice(moment, zone),
                )
                for name, moment in (("from", period.start), ("to", period.end))
            },
            chosen=chosen,
            options=self.filter_options(site),
            groups=groups,
            shown=sum(len(g["findings"]) for g in groups),
            notice_links=notice_links,
            grouped=grouped,
            anchor=plot.episode_anchor,
        )

    def filter_options(self, site: SiteConfig) -> dict[str, list[tuple[str, str]]]:
        """The findings filter's choices: (value, label) of every sensor, standard and kind."""
        profile = self.web.portal.profile(site)
        return {
            "sensor": [(s.id, f"{s.id} ({s.kind.value})") for s in site.sensors],
            "standard": [(k, f"{s.section} {s.title}") for k, s in profile.standards.items()],
            "kind": [(k.value, k.value.replace("_", " ")) for k in FindingKind],
        }

    def finding_filters(self, request: Request, site: SiteConfig) -> dict[str, str]:
        """``sensor``, ``standard``, ``kind`` as asked ("" for all); 400 naming one not known."""
        chosen = {}
        for name, options in self.filter_options(site).items():
            value = request.query_params.get(name, "").strip()
            known = [v for v, _ in options]
            if value and value not in known:
                raise HTTPException(
                    400, f"{name}: no {name} {value[:40]!r}; choose one of {', '.join(known)}"
                )
            chosen[name] = value
        return chosen


def finding_groups(data: dict[str, Any], chosen: dict[str, str], zone: ZoneInfo) -> list[dict[str, Any]]:
    """The period's findings that pass the filters, grouped by violation episode (in time order)
    and then the rest, each finding with the chart period around its window."""
    kept = [
        f
        for f in data["findings"]
        if (not chosen["sensor"] or chosen["sensor"] in f["sensors"])
        and (not chosen["standard"] or f["standard"] == chosen["standard"])
        and (not chosen["kind"] or f["kind"] == chosen["kind"])
    ]

    def chart(start: str, end: str, sensors: list[str]) -> str:
        p = periods.around(_utc(start), _utc(end), zone)
        return f"?{p.query()}#panel-{sensors[0]}" if sensors else f"?{p.query()}"

    for_each = [
        {
            **f,
            "chart": chart(f["window_start"] or f["start"], f["window_end"] or f["end"], f["sensors"]),
        }
        for f in kept
    ]
    groups = []
    for e in data["episodes"]:
        mine = [f for f in for_each if f["episode"] == e["id"]]
        if mine:
            groups.append(
                {"episode": e, "chart": chart(e["start"], e["end"], e["sensors"]), "findings": mine}
            )
    rest = [f for f in for_each if f["episode"] is None]
    if rest:
        groups.append({"episode": None, "chart": "", "findings": rest})
    return groups


def _utc(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


# The time fields of each event form (datetime-local, site time).
EVENT_TIME_FIELDS = {
    "blast-notice": ("planned",),
    "blast": ("ts",),
    "truck": ("ts",),
    "work": ("start", "end"),
    "temporary-lighting": ("start", "end"),
}


def event_payload(kind: str, form: FormData, zone: ZoneInfo, now: datetime) -> dict[str, Any]:
    """The MQTT payload an event form stands for (then decoded like any MQTT event)."""
    from monitor.portal.data import format_ts

    def text(name: str) -> str:
        value = form.get(name, "")
        return value.strip() if isinstance(value, str) else ""

    def when(name: str, payload_name: str, out: dict[str, Any]) -> None:
        value = text(name)
        if value:
            # A time the clocks showed twice waits for the form's choice (<name>_offset).
            moment = limits.checked_time(value, zone, payload_name, text(f"{name}_offset"))
            out[payload_name] = format_ts(moment)

    def number(name: str, out: dict[str, Any]) -> None:
        value = text(name)
        if value:
            try:
                number = float(value)
            except ValueError:
                raise Refused(f"{name}: expected a number, got {shown(value)}") from None
            # float() takes nan, inf and 1e999, which a number field never sends but a script
            # can: JSON has no such number, and the payload would be refused for no field.
            if not math.isfinite(number):
                raise Refused(f"{name}: expected a finite number, got {shown(value)}")
            out[name] = number

    payload: dict[str, Any] = {}
    if kind == "blast-notice":
        payload["blast_id"] = text("blast_id")
        payload["issued_ts"] = format_ts(now)
        when("planned", "planned_ts", payload)
        # The checklist's identities (ids of Town contacts and adjoining owners), then any other
        # names written in, one a line or comma-separated.
        checked = [r for r in form.getlist("recipient") if isinstance(r, str) and r.strip()]
        written = [r.strip() for r in text("recipients").replace(",", "\n").splitlines() if r.strip()]
        payload["recipients"] = list(dict.fromkeys([*checked, *written]))
        # The planned blast's design (optional), in the units the form shows (the profile's).
        for name in ("charge_per_delay_kg", "charge_per_delay_lb", "distance_m", "distance_ft"):
            number(name, payload)
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


def twice_choices(request: Request, zone: ZoneInfo) -> list[tuple[str, str]]:
    """The period picker (a GET form) with a time the clocks showed twice and no reading chosen
    for it: the same request with each reading chosen (``<field>_offset``), as (label, link)."""
    query = request.query_params
    for name, readings in limits.twice_fields(query, zone, ("from", "to")).items():
        if query.get(f"{name}_offset", "") in (offset for offset, _ in readings):
            continue
        clock = query[name].strip().partition("T")[2]
        choices = []
        for (offset, zone_name), order in zip(readings, ("first", "second"), strict=True):
            link = urllib.parse.urlencode([*query.multi_items(), (f"{name}_offset", offset)])
            choices.append((f"{name} {clock} {zone_name}, the {order}", f"?{link}"))
        return choices
    return []


def _extra_days(form: FormData) -> int | None:
    """The notice forms' optional ``days`` (an extension granted or asked for), held to the
    bound NoticeBook enforces, in its words."""
    text = str(form.get("days", "")).strip()
    if not text:
        return None
    try:
        return extra_days(text)
    except ValueError as exc:
        raise UsageError(f"days: {exc}") from None
