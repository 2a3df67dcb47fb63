"""Evidence bundles prepared in the background for the portal: one thread per export, capped.

An export reads the store and writes a zip for as long as the window needs, and the zip stays
on disk until it is downloaded (or KEEP_S passes). So an account holds at most PER_ACCOUNT
bundles, being prepared or waiting for their download, and at most TOTAL exports run at once.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from monitor.errors import MinewatchError
from monitor.portal.data import NotFound, Portal, Scope

log = logging.getLogger("minewatch.portal")

PER_ACCOUNT = 2  # bundles one account holds: being prepared, or ready and not downloaded
TOTAL = 4  # exports running at once in the portal (each may keep a core busy)
KEEP_S = 3600.0  # a finished bundle not downloaded within this is removed


class TooManyJobs(Exception):
    """A new export would go over a cap: the message says which and what to do (a 429);
    ``held``: the account's own bundles in the way, to be shown with their links."""

    def __init__(self, message: str, held: list[Job] | None = None) -> None:
        super().__init__(message)
        self.held = held or []


@dataclass
class Job:
    """One bundle export running in a thread of its own, for one user."""

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

    def take(self) -> tuple[Path, Path]:
        if self.taken:
            raise NotFound("this bundle was downloaded already: prepare it again")
        self.taken = True
        return self.out, self.folder


class Jobs:
    """Bundle exports by id; an id is only found by the user who started it, on its site."""

    def __init__(self) -> None:
        self._jobs: dict[str, Job] = {}
        self._lock = threading.Lock()

    def start(self, portal: Portal, scope: Scope, site: str, start: datetime, end: datetime) -> Job:
        user = scope.user.name
        with self._lock:
            self._expire()
            held = [j for j in self._jobs.values() if j.user == user and not j.taken and not j.error]
            if len(held) >= PER_ACCOUNT:
                raise TooManyJobs(
                    f"You have {len(held)} bundles being prepared or waiting to be downloaded (at most"
                    f" {PER_ACCOUNT}): download one of them before asking for another.",
                    sorted(held, key=lambda j: j.began),
                )
            if sum(j.finished is None for j in self._jobs.values()) >= TOTAL:
                raise TooManyJobs(
                    f"The portal is preparing {TOTAL} bundles already (at most {TOTAL} at a time):"
                    " try again in a minute."
                )
            folder = Path(tempfile.mkdtemp(prefix="minewatch-portal-"))
            out = folder / f"evidence-{site}-{start:%Y%m%dT%H%M}Z.zip"
            job = Job(secrets.token_urlsafe(16), user, site, start, end, folder, out)
            self._jobs[job.id] = job

        def run() -> None:
            try:
                portal.export(scope, site, start, end, out)
            except Exception as exc:  # shown on the job's page; a bug also in the log
                if not isinstance(exc, MinewatchError):
                    log.exception("bundle export for %s failed", site)
                job.error = str(exc) or type(exc).__name__
                remove_folder(folder)
            job.finished = time.monotonic()

        threading.Thread(target=run, name=f"bundle-{job.id[:6]}", daemon=True).start()
        return job

    def get(self, job_id: str, user: str, site: str) -> Job:
        with self._lock:
            job = self._jobs.get(job_id)
        if job is None or job.user != user or job.site != site:
            raise NotFound("no such bundle")
        return job

    def _expire(self) -> None:
        now = time.monotonic()
        for key, job in list(self._jobs.items()):
            if job.finished is not None and (job.taken or now - job.finished > KEEP_S):
                if job.done and not job.taken:
                    remove_folder(job.folder)
                del self._jobs[key]


def remove_folder(folder: Path) -> None:
    """A job's or an upload's private folder and the files in it (no subfolders)."""
    for child in folder.iterdir():
        with contextlib.suppress(OSError):
            child.unlink()
    with contextlib.suppress(OSError):
        folder.rmdir()
