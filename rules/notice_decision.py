"""What a new violation episode does to a site's notice (section 13.3): pure, clock passed in.

    decide(active, episode, profile, now, tz)
        no active notice for the standard           -> OPEN, cure deadline counted from now
        active, still in the cure procedure, and the
        episode began after its (current) deadline   -> ESCALATE (13.3.B: citation recommended)
        otherwise                                    -> CONTINUE (attached to the active notice)

    reminder_due(status, deadline, told, remind_days, now, tz)
        still in the cure procedure, the deadline
        passed, not yet said for this deadline       -> DEADLINE_PASSED (the Town decides: close
                                                        as corrected, extend, or cite)
        within ``remind_days`` local days of it,
        not yet said for this deadline               -> DEADLINE_NEAR (the operator's early warning)

The notice statuses are named here; ``monitor.notify.notices`` keeps the wording, the storage
and the delivery of what is decided.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta
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


class Reminder(StrEnum):
    """What is said of a notice's cure deadline while nobody has closed the notice. Each is
    said once per deadline: an extension's new deadline is reminded of again."""

    DEADLINE_NEAR = "deadline_near"
    DEADLINE_PASSED = "deadline_passed"


def reminder_due(
    status: str,
    deadline: datetime,
    told: Collection[tuple[str, datetime]],
    remind_days: int,
    now: datetime,
    tz: ZoneInfo,
) -> Reminder | None:
    """The reminder owed at ``now`` for a notice in ``status`` whose cure deadline is ``deadline``.

    ``told``: the (reminder, deadline) pairs already said for the notice. ``remind_days``: the
    near-deadline reminder is owed from the start of the site's local day that many days before
    the deadline's day (0: none). Only the passed one is owed once the deadline has passed, so a
    daemon that was down over both says the one that still matters.
    """
    if status not in CURE_STATUSES:
        return None
    if after_deadline(now, deadline):
        passed = (Reminder.DEADLINE_PASSED.value, deadline)
        return None if passed in told else Reminder.DEADLINE_PASSED
    if remind_days <= 0 or (Reminder.DEADLINE_NEAR.value, deadline) in told:
        return None
    first_day = deadline.astimezone(tz).date() - timedelta(days=remind_days)
    return Reminder.DEADLINE_NEAR if now.astimezone(tz).date() >= first_day else None
