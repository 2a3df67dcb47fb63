"""What a new violation episode does to a site's notice (section 13.3): pure, clock passed in.

    decide(active, episode, profile, now, tz)
        no active notice for the standard           -> OPEN, cure deadline counted from now
        active, still in the cure procedure, and the
        episode began after its (current) deadline   -> ESCALATE (13.3.B: citation recommended)
        otherwise                                    -> CONTINUE (attached to the active notice)

The notice statuses are named here; ``monitor.notify.notices`` keeps the wording, the storage
and the delivery of what is decided.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Protocol
from zoneinfo import ZoneInfo

from rules.deadlines import after_deadline, cure_deadline
from rules.episodes import Episode
from rules.profile import Profile

OPEN, EXTENSION_REQUESTED, EXTENDED, CORRECTED, ESCALATED = (
    "open",
    "extension_requested",
    "extended",
    "corrected",
    "escalated",
)
# At most one notice per site and standard is in one of these; new episodes attach to it.
ACTIVE_STATUSES = (OPEN, EXTENSION_REQUESTED, EXTENDED, ESCALATED)
CURE_STATUSES = (OPEN, EXTENSION_REQUESTED, EXTENDED)  # still inside the cure procedure


class Action(StrEnum):
    OPEN = "open"
    CONTINUE = "continue"
    ESCALATE = "escalate"


class ActiveNotice(Protocol):
    """What the decision reads of the site's active notice for the episode's standard."""

    @property
    def status(self) -> str: ...

    @property
    def deadline(self) -> datetime: ...


@dataclass(frozen=True, slots=True)
class Decision:
    action: Action
    deadline: datetime  # OPEN: the new notice's cure deadline; else the active notice's current one
    extension_pending: bool = False  # ESCALATE while an extension request was still undecided


def decide(
    active: ActiveNotice | None, episode: Episode, profile: Profile, now: datetime, tz: ZoneInfo
) -> Decision:
    """Open, continue or escalate for a new ``episode``; ``tz`` is the site's time zone."""
    if active is None:
        # 13.3.A: to the end of the site's local day cure_days after the day of issue.
        return Decision(Action.OPEN, cure_deadline(now, profile.cure_days, tz, profile.cure_calendar()))
    if active.status in CURE_STATUSES and after_deadline(episode.start, active.deadline):
        return Decision(Action.ESCALATE, active.deadline, active.status == EXTENSION_REQUESTED)
    return Decision(Action.CONTINUE, active.deadline)
