"""Evidence in the browser: bundles prepared in the background and downloaded once, uploads verified."""

from __future__ import annotations

import functools
import secrets
import tempfile
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

from monitor.config import SiteConfig
from monitor.errors import UsageError
from monitor.portal import limits, upload
from monitor.portal.data import Refused, Scope
from monitor.portal.jobs import Job, TooManyJobs, remove_folder
from monitor.portal.web import BadCsrf, Web
from rules.model import SensorKind

# What an uploaded bundle is held against (the verify form's choices, evidence.html)
VERIFY_AGAINST = ("nothing", "published", "file")
# Uploads received or verified at once in the portal: each may keep a core busy and hold up to
# portal.max_upload_mb on disk; more wait their turn with a 429, as bundles do (jobs.TOTAL).
VERIFYING = 2


class EvidencePages:
    """The inspector's and the Town's evidence pages."""

    def __init__(self, web: Web) -> None:
        self.web = web
        self._verifying = 0  # uploads being received or verified (the event loop's own count)

    def routes(self) -> list[Route]:
        return [
            Route("/sites/{site}/evidence", self.evidence_page),
            Route("/sites/{site}/evidence/bundle", self.bundle, methods=["POST"]),
            Route("/sites/{site}/evidence/jobs/{job}", self.bundle_job),
            Route("/sites/{site}/evidence/jobs/{job}/{file:path}", self.bundle_job),
            Route("/sites/{site}/evidence/verify", self.verify_upload, methods=["POST"]),
            Route("/sites/{site}/evidence/sound.csv", self.sound_csv),
        ]

    def evidence_form(
        self,
        request: Request,
        scope: Scope,
        site: SiteConfig,
        status: int = 200,
        *,
        report: dict[str, Any] | None = None,
        error: str = "",
        held: list[Job] | None = None,
        refused: tuple[str, Mapping[str, Any]] | None = None,
    ) -> Response:
        """The evidence page (window form, upload form), with a verify report or an error (and
        the account's bundles in the way of another, ``held``). ``refused``: the window form
        (``bundle`` or ``csv``) and what it sent, shown again as typed, with the choice beside a
        time the clocks showed twice."""
        zone = ZoneInfo(site.timezone)
        today = self.web.portal.clock().astimezone(zone).date().isoformat()
        window = {"from": f"{today}T00:00", "to": f"{today}T23:59"}
        typed = {name: window for name in ("bundle", "csv")}
        twice: dict[str, Any] = {}
        if refused is not None:
            form_id, sent = refused
            typed[form_id] = {k: str(sent.get(k, "")) for k in ("from", "to", "from_offset", "to_offset")}
            twice = {form_id: limits.twice_fields(sent, zone, ("from", "to"))}
        return self.web.page(
            request,
            "evidence.html",
            scope,
            status,
            site=site,
            typed=typed,
            twice=twice,
            report=report,
            error=error,
            held=held or [],
            meters=[s.id for s in site.sensors if s.kind is SensorKind.SOUND],
            max_upload_mb=self.web.pc.max_upload_mb,
            # What a scoped bundle shows, in the words its manifest states it (one text for both).
            scope_rule=times.manifest()["rule"]
            if (times := self.web.portal.times(scope, site)) is not None
            else None,
        )

    async def evidence_page(self, request: Request) -> Response:
        scope = self.web.session_scope(request)
        self.web.may(scope, "evidence")
        return self.evidence_form(request, scope, scope.site(request.path_params["site"]))

    async def bundle(self, request: Request) -> Response:
        """Start preparing a bundle (a POST with the form's token: it costs a thread and disk)."""
        scope = self.web.session_scope(request)
        self.web.may(scope, "evidence")
        site = scope.site(request.path_params["site"])
        form = await self.web.checked_form(request)
        zone = ZoneInfo(site.timezone)
        try:
            start, end = limits.form_time(form, zone, "from"), limits.form_time(form, zone, "to")
        except UsageError as exc:
            return self.evidence_form(request, scope, site, 400, error=str(exc), refused=("bundle", form))
        if end <= start:
            return self.evidence_form(request, scope, site, 400, error="to: must be after from")
        try:
            job = self.web.jobs.start(self.web.portal, scope, site.id, start, end)
        except TooManyJobs as exc:
            busy = self.evidence_form(request, scope, site, 429, error=str(exc), held=exc.held)
            busy.headers["Retry-After"] = "30"
            return busy
        window = {"from": start.isoformat(), "to": end.isoformat()}
        await run_in_threadpool(
            self.web.portal.record_action,
            scope,
            site.id,
            "bundle_prepared",
            job.id,
            self.web.source(request),
            window,
        )
        return RedirectResponse(f"/sites/{site.id}/evidence/jobs/{job.id}", status_code=303)

    async def bundle_job(self, request: Request) -> Response:
        """Progress of a bundle being prepared (the page reloads itself), then the download."""
        scope = self.web.session_scope(request)
        self.web.may(scope, "evidence")
        site = scope.site(request.path_params["site"])
        job = self.web.jobs.get(request.path_params["job"], scope.user.name, site.id)
        if job.error:
            return self.web.page(request, "job.html", scope, 500, site=site, job=job)
        if job.done and request.path_params.get("file"):
            if request.method == "HEAD":  # the download's headers; its one download stays
                return Response(headers=_download_headers(job.untaken()), media_type="application/zip")
            out, folder = job.take()
            from monitor.evidence import exported_window

            # the window the bundle discloses (the account's time scope cuts the one requested)
            await run_in_threadpool(
                self.web.portal.record_action,
                scope,
                site.id,
                "bundle_downloaded",
                out.name,
                self.web.source(request),
                {**exported_window(out), "bytes": out.stat().st_size},
            )
            return StreamingResponse(
                _stream_file(out, folder),
                media_type="application/zip",
                headers=_download_headers(out),
            )
        return self.web.page(request, "job.html", scope, site=site, job=job)

    async def sound_csv(self, request: Request) -> Response:
        """The stored sound levels of the chosen meters over a window (site time), streamed as
        CSV (Portal.sound_csv): ``?from=&to=&sensor=...`` from the evidence page's form."""
        scope = self.web.session_scope(request)
        self.web.may(scope, "evidence")
        site = scope.site(request.path_params["site"])
        zone = ZoneInfo(site.timezone)
        query = request.query_params
        try:
            start, end = limits.form_time(query, zone, "from"), limits.form_time(query, zone, "to")
            if end <= start:
                raise Refused("to: must be after from")
            asked, lines = await run_in_threadpool(
                self.web.portal.sound_csv, scope, site.id, query.getlist("sensor"), start, end
            )
        except (UsageError, Refused) as exc:
            return self.evidence_form(request, scope, site, 400, error=str(exc), refused=("csv", query))
        name = f"sound-{site.id}-{asked['from'][:10]}.csv"
        headers = {"Content-Disposition": f'attachment; filename="{name}"'}
        if request.method == "HEAD":  # the headers only: nothing read, no download recorded
            head = Response(media_type="text/csv; charset=utf-8", headers=headers)
            del head.headers["content-length"]  # streamed: its length is not known ahead
            return head
        await run_in_threadpool(
            self.web.portal.record_action,
            scope,
            site.id,
            "sound_csv_downloaded",
            ",".join(asked["sensors"]),
            self.web.source(request),
            asked,
        )
        return StreamingResponse(lines, media_type="text/csv; charset=utf-8", headers=headers)

    async def verify_upload(self, request: Request) -> Response:
        scope = self.web.session_scope(request)
        self.web.may(scope, "evidence")
        site = scope.site(request.path_params["site"])
        if self._verifying >= VERIFYING:  # refused before the body is read
            error = f"{VERIFYING} bundles are being verified: try again in a minute"
            busy = self.evidence_form(request, scope, site, 429, error=error)
            busy.headers["Retry-After"] = "30"
            return busy
        self._verifying += 1
        try:
            return await self._verify_upload(request, scope, site)
        finally:
            self._verifying -= 1

    async def _verify_upload(self, request: Request, scope: Scope, site: SiteConfig) -> Response:

        def check_csrf(given: str) -> None:
            wanted = request.session.get("csrf")
            if not isinstance(wanted, str) or not secrets.compare_digest(given.encode(), wanted.encode()):
                raise BadCsrf

        # Who asks and the form's token are checked before the file is read (upload.py); the
        # body's size is bounded by portal.max_upload_mb (limits.BodyLimit).
        folder = Path(tempfile.mkdtemp(prefix="minewatch-verify-"))
        try:
            path, anchors_file = folder / "bundle.zip", folder / "anchors.json"
            try:
                name, fields, files = await upload.receive_file(
                    request, check_csrf, "bundle", path, fields={"against"}, files={"anchors": anchors_file}
                )
            except upload.BadUpload as exc:
                return self.evidence_form(request, scope, site, 400, error=str(exc))
            # What the bundle is held against, as `minewatch verify [--anchors FILE]`: nothing
            # (internal consistency only), the heads this installation published to the Town,
            # or the Town's own file of them.
            against = fields.get("against", "nothing")
            try:
                if against not in VERIFY_AGAINST:
                    raise Refused(f"against: {against[:40]!r} is not one of {', '.join(VERIFY_AGAINST)}")
                if against == "file":
                    if "anchors" not in files:
                        raise Refused(
                            "anchors: choose the Town's anchors file (JSON), or verify against another"
                        )
                    report = await run_in_threadpool(
                        functools.partial(self.web.portal.verify, path, anchors_file, name=name)
                    )
                elif against == "published":
                    held = await run_in_threadpool(self.web.portal.published_anchors, scope, site.id)
                    report = await run_in_threadpool(
                        functools.partial(self.web.portal.verify, path, None, held, name=name)
                    )
                else:
                    report = await run_in_threadpool(
                        functools.partial(self.web.portal.verify, path, name=name)
                    )
            except Refused as exc:
                return self.evidence_form(request, scope, site, 400, error=str(exc))
        finally:
            remove_folder(folder)
        report["name"] = name
        report["against"] = against
        outcome = {
            "ok": report["ok"],
            "problems": len(report["problems"]) + report["more_problems"],
            "against": report["against"],
            "anchored": report["anchored"],
        }
        await run_in_threadpool(
            self.web.portal.record_action,
            scope,
            site.id,
            "bundle_verified",
            name,
            self.web.source(request),
            outcome,
        )
        return self.evidence_form(request, scope, site, report=report)


def _download_headers(out: Path) -> dict[str, str]:
    return {
        "Content-Disposition": f'attachment; filename="{out.name}"',
        "Content-Length": str(out.stat().st_size),
    }


async def _stream_file(path: Path, folder: Path) -> AsyncIterator[bytes]:
    try:
        with path.open("rb") as f:
            while chunk := await run_in_threadpool(f.read, 1 << 20):
                yield chunk
    finally:
        remove_folder(folder)
