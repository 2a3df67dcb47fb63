"""Compliance reports in the portal, made in the background (monitor/portal/jobs.py).

The request only starts the job: ``POST /sites/{site}/reports/{month}`` (the form's token)
checks the month against the account's time scope and either finds the account's report of
that month still matching the chain head (``Jobs.reusable``: nothing recorded since it was
made) or starts a report job; the job's page shows its progress, then the PDF and CSV. Each
report made is recorded in the chain (``Portal.make_report``), so ``minewatch verify``
checks the files downloaded.
"""

from __future__ import annotations

from pathlib import Path
from zoneinfo import ZoneInfo

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import FileResponse, RedirectResponse, Response
from starlette.routing import Route

from monitor.portal.data import NO_REPORTS_IN_A_CLOSED_SCOPE, NotFound, Refused, Scope
from monitor.portal.jobs import Job, TooManyJobs
from monitor.portal.web import Web

MEDIA = {".pdf": "application/pdf", ".csv": "text/csv; charset=utf-8"}


class ReportPages:
    """The Town's and the inspector's compliance reports."""

    def __init__(self, web: Web) -> None:
        self.web = web

    def routes(self) -> list[Route]:
        return [
            Route("/sites/{site}/reports", self.reports_page),
            Route("/sites/{site}/reports/{month}", self.prepare, methods=["POST"]),
            Route("/sites/{site}/reports/jobs/{job}", self.report_job),
            Route("/sites/{site}/reports/jobs/{job}/{file}", self.report_job),
        ]

    def _list(
        self,
        request: Request,
        scope: Scope,
        site_id: str,
        status: int = 200,
        error: str = "",
        held: list[Job] | None = None,
    ) -> Response:
        site = scope.site(site_id)
        today = self.web.portal.clock().astimezone(ZoneInfo(site.timezone)).date()
        months = []
        year, month = today.year, today.month
        for _ in range(12):
            months.append(f"{year:04d}-{month:02d}")
            year, month = (year, month - 1) if month > 1 else (year - 1, 12)
        if scope.user.not_after is not None:  # Portal.report_period refuses every month
            months, error = [], error or NO_REPORTS_IN_A_CLOSED_SCOPE
        return self.web.page(
            request, "reports.html", scope, status, site=site, months=months, error=error, held=held or []
        )

    async def reports_page(self, request: Request) -> Response:
        scope = self.web.session_scope(request)
        self.web.may(scope, "reports")
        return self._list(request, scope, request.path_params["site"])

    async def prepare(self, request: Request) -> Response:
        """Start a month's report (or hand back the one made at the current chain head)."""
        scope = self.web.session_scope(request)
        self.web.may(scope, "reports")
        site = scope.site(request.path_params["site"])
        await self.web.checked_form(request)
        month = request.path_params["month"]
        portal = self.web.portal
        try:
            period = await run_in_threadpool(portal.report_period, scope, site.id, month)
        except Refused as exc:
            return self._list(request, scope, site.id, 400, str(exc))
        head = await run_in_threadpool(portal.chain_head, site.id)
        job = self.web.jobs.reusable(scope.user.name, site.id, "report", period.label, head)
        if job is None:
            name = f"{site.id}-{period.label}.pdf"
            try:
                job = self.web.jobs.launch(
                    scope.user.name,
                    site.id,
                    period.start,
                    period.end,
                    name,
                    lambda out: portal.make_report(scope, site.id, month, out),
                    kind="report",
                    key=period.label,
                )
            except TooManyJobs as exc:
                busy = self._list(request, scope, site.id, 429, str(exc), exc.held)
                busy.headers["Retry-After"] = "30"
                return busy
        return RedirectResponse(f"/sites/{site.id}/reports/jobs/{job.id}", status_code=303)

    async def report_job(self, request: Request) -> Response:
        """Progress of a report being made (the page reloads itself), then its PDF and CSV."""
        scope = self.web.session_scope(request)
        self.web.may(scope, "reports")
        site = scope.site(request.path_params["site"])
        job = self.web.jobs.get(request.path_params["job"], scope.user.name, site.id)
        if job.kind != "report":
            raise NotFound("no such report")
        if job.error:
            return self.web.page(request, "report_job.html", scope, 500, site=site, job=job)
        wanted = request.path_params.get("file")
        if wanted:
            if not job.done or wanted not in job.result.get("files", []):
                raise NotFound("no such file")
            path = job.folder / Path(wanted).name
            return FileResponse(
                path, media_type=MEDIA[path.suffix], filename=path.name, content_disposition_type="attachment"
            )
        return self.web.page(request, "report_job.html", scope, site=site, job=job)
