"""Work prepared in the background for the portal: one thread per job, capped.

Two kinds: an evidence bundle (a zip, downloaded once, then removed) and a compliance report
(its PDF and CSV, kept for KEEP_S and handed again to whoever asks for the same period while
the site's chain head has not moved: ``Jobs.reusable``). A job reads the store and writes its
files for as long as the period needs, and they stay on disk until downloaded (a bundle) or
KEEP_S passes (a report also when the same period is made again). So an account holds at most
PER_ACCOUNT bundles being prepared or waiting, makes at most PER_ACCOUNT reports at once, and
at most TOTAL jobs run at once in the portal.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from monitor.errors import MinewatchError
from monitor.portal.data import NotFound, Portal, Scope

log = logging.getLogger("minewatch.portal")

PER_ACCOUNT = 2  # bundles one account holds: being prepared, or ready and not downloaded
TOTAL = 4  # exports running at once in the portal (each may keep a core busy)
KEEP_S = 3600.0  # a finished bundle not downloaded within this is removed


NOUNS = {"bundle": "bundles", "report": "reports"}


class TooManyJobs(Exception):
    """A new job would go over a cap: the message says which and what to do (a 429);
    ``held``: the account's own bundles in the way, to be shown with their links."""

    def __init__(self, message: str, held: list[Job] | None = None) -> None:
        super().__init__(message)
        self.held = held or []


@dataclass
class Job:
    """One bundle export or report running in a thread of its own, for one user."""

    id: str
    user: str
    site: str
    start: datetime
    end: datetime
    folder: Path
    out: Path
    began: float = field(default_factory=time.monotonic)
    finished: float | None = None
    error: str = ""
    taken: bool = False
    kind: str = "bundle"
    key: str = ""  # a report's period label: what "the same period" means for reuse
    result: dict[str, Any] = field(default_factory=dict)  # what the work returned (a report's head)

    @property
    def done(self) -> bool:
        return self.finished is not None and not self.error

    @property
    def elapsed_s(self) -> float:
        return (self.finished or time.monotonic()) - self.began

    @property
    def written_bytes(self) -> int:
        """How much of the zip is written so far: the progress a person can watch."""
        for path in (self.out, self.out.with_name(self.out.name + ".partial")):
            with contextlib.suppress(OSError):
                return path.stat().st_size
        return 0

    def untaken(self) -> Path:
        """The bundle's file while it waits for its one download."""
        if self.taken:
            raise NotFound("this bundle was downloaded already: prepare it again")
        return self.out

    def take(self) -> tuple[Path, Path]:
        out = self.untaken()
        self.taken = True
        return out, self.folder


class Jobs:
    """Jobs by id; an id is only found by the user who started it, on its site."""

    def __init__(self) -> None:
        self._jobs: dict[str, Job] = {}
        self._lock = threading.Lock()

    def start(self, portal: Portal, scope: Scope, site: str, start: datetime, end: datetime) -> Job:
        """An evidence bundle of ``site`` for [start, end)."""
        name = f"evidence-{site}-{start:%Y%m%dT%H%M}Z.zip"
        return self.launch(
            scope.user.name, site, start, end, name, lambda out: portal.export(scope, site, start, end, out)
        )

    def launch(
        self,
        user: str,
        site: str,
        start: datetime,
        end: datetime,
        name: str,
        work: Callable[[Path], dict[str, Any] | None],
        kind: str = "bundle",
        key: str = "",
    ) -> Job:
        """Run ``work(out)`` in a thread of its own; ``out``: the file ``name`` in the job's folder."""
        noun = NOUNS[kind]
        with self._lock:
            self._expire()
            # A bundle is held until downloaded; a finished report only takes disk, and the one
            # it supersedes (same key) goes now: an account holds one report per period.
            for old in [
                j for j in self._jobs.values() if (j.user, j.site, j.kind, j.key) == (user, site, kind, key)
            ]:
                if kind == "report" and old.finished is not None:
                    if old.done:
                        remove_folder(old.folder)
                    del self._jobs[old.id]
            held = [
                j
                for j in self._jobs.values()
                if j.user == user
                and j.kind == kind
                and not j.taken
                and not j.error
                and (kind == "bundle" or j.finished is None)
            ]
            if len(held) >= PER_ACCOUNT:
                raise TooManyJobs(
                    f"You have {len(held)} {noun} being prepared or waiting to be downloaded (at most"
                    f" {PER_ACCOUNT}): download one of them before asking for another.",
                    sorted(held, key=lambda j: j.began),
                )
            if sum(j.finished is None for j in self._jobs.values()) >= TOTAL:
                raise TooManyJobs(
                    f"The portal is preparing {TOTAL} bundles or reports already (at most {TOTAL} at a"
                    " time): try again in a minute."
                )
            folder = Path(tempfile.mkdtemp(prefix="minewatch-portal-"))
            out = folder / name
            job = Job(secrets.token_urlsafe(16), user, site, start, end, folder, out, kind=kind, key=key)
            self._jobs[job.id] = job

        def run() -> None:
            try:
                job.result = work(out) or {}
            except Exception as exc:
                if isinstance(exc, MinewatchError):  # said for people: shown on the job's page
                    job.error = str(exc) or type(exc).__name__
                else:  # a bug or the system's fault (its text names paths, internals): the log's
                    log.exception("%s job %s for %s failed", kind, job.id[:6], site)
                    job.error = f"an internal error, in the portal's log as {kind} job {job.id[:6]}"
                remove_folder(folder)
            job.finished = time.monotonic()

        threading.Thread(target=run, name=f"{kind}-{job.id[:6]}", daemon=True).start()
        return job

    def reusable(self, user: str, site: str, kind: str, key: str, head: tuple[int, str]) -> Job | None:
        """The user's job of this kind and key on the site, running or finished, whose result was
        made at chain head ``head`` (the head has not moved since), if any."""
        with self._lock:
            self._expire()
            for job in sorted(self._jobs.values(), key=lambda j: j.began, reverse=True):
                if (job.user, job.site, job.kind, job.key) != (user, site, kind, key) or job.error:
                    continue
                if job.finished is None or tuple(job.result.get("head_after", ())) == head:
                    return job
        return None

    def get(self, job_id: str, user: str, site: str) -> Job:
        with self._lock:
            job = self._jobs.get(job_id)
        if job is None or job.user != user or job.site != site:
            raise NotFound("no such bundle")
        return job

    def close(self) -> None:
        """The portal stops: every job's folder goes (a bundle not downloaded, a report kept for
        reuse; one still being made fails in its thread). They stayed in the temporary folder."""
        with self._lock:
            jobs, self._jobs = list(self._jobs.values()), {}
        for job in jobs:
            if not job.taken:
                remove_folder(job.folder)

    def _expire(self) -> None:
        now = time.monotonic()
        for key, job in list(self._jobs.items()):
            if job.finished is not None and (job.taken or now - job.finished > KEEP_S):
                if job.done and not job.taken:
                    remove_folder(job.folder)
                del self._jobs[key]


def remove_folder(folder: Path) -> None:
    """A job's or an upload's private folder and the files in it (no subfolders); one removed
    already (a failed job's, when the portal stops) is left alone."""
    with contextlib.suppress(FileNotFoundError):
        for child in folder.iterdir():
            with contextlib.suppress(OSError):
                child.unlink()
    with contextlib.suppress(OSError):
        folder.rmdir()
