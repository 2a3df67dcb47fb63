"""The notice decision of section 13.3, as a table: open, continue or escalate, and the deadline.

13.3.A: a violation opens a notice with fourteen days to correct it (to the end of the
site's local day); while it is open, new violations of the same standard attach to it.
13.3.B: a violation after the cure deadline, the notice still in the cure procedure,
escalates (citation recommended). A notice nobody closed is reminded of: the operator when its
deadline is near, the Town once it has passed. Pure: no store, the clock passed in.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from rules.deadlines import end_of_local_day
from rules.episodes import Episode
from rules.notice_decision import (
    ESCALATED,
    EXTENDED,
    EXTENSION_REQUESTED,
    OPEN,
    Action,
    Decision,
    Reminder,
    decide,
    reminder_due,
)
from rules.profile import Profile, load_profile

TZ = ZoneInfo("America/Chicago")
DOVRE = load_profile("dovre")
ROLLED = load_profile("dovre", {"cure_next_business_day": True})
SEVEN_DAYS = load_profile("dovre", {"cure_days": 7})
case = pytest.param


def local(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=TZ).astimezone(UTC)


def eod(year: int, month: int, day: int) -> datetime:
    return end_of_local_day(date(year, month, day), TZ)


@dataclass(frozen=True)
class Active:
    status: str
    deadline: datetime


def episode(start: datetime) -> Episode:
    return Episode("pit1", "noise", "6.B", ("n1",), start, start + timedelta(minutes=5), ("f1",), None)


NOW = local(2026, 6, 15, 11, 31)  # a Monday
DEADLINE = eod(2026, 6, 29)
BEFORE = local(2026, 6, 29, 23, 0)  # the last day of the cure period, still inside it
AFTER = local(2026, 6, 30, 0, 1)
SUNDAY = local(2026, 6, 14, 10)
OPENS, CONTINUES, ESCALATES = Action.OPEN, Action.CONTINUE, Action.ESCALATE

# fmt: off
CASES = [
    # No active notice: open one, deadline 14 days after the day of issue, end of the local day.
    case(None, NOW, DOVRE, NOW, Decision(OPENS, DEADLINE), id="13.3.A-open-14-days"),
    case(None, NOW, SEVEN_DAYS, NOW, Decision(OPENS, eod(2026, 6, 22)),
         id="13.3.A-open-cure-days-override"),
    # Issued Sunday 14 June: the last day, Sunday 28 June, moves to Monday only with the option.
    case(None, SUNDAY, DOVRE, SUNDAY, Decision(OPENS, eod(2026, 6, 28)),
         id="13.3.A-open-sunday-kept"),
    case(None, SUNDAY, ROLLED, SUNDAY, Decision(OPENS, eod(2026, 6, 29)),
         id="13.3.A-open-sunday-rolled"),
    # The deadline counts from the decision time (the day of issue), not the episode's start.
    case(None, local(2026, 6, 10, 9), DOVRE, NOW, Decision(OPENS, DEADLINE),
         id="13.3.A-counted-from-issue"),
    # An active notice inside its cure period: the episode continues it, deadline unchanged.
    case(Active(OPEN, DEADLINE), BEFORE, DOVRE, BEFORE, Decision(CONTINUES, DEADLINE),
         id="13.3-continue-within-cure"),
    case(Active(EXTENDED, DEADLINE), BEFORE, DOVRE, AFTER, Decision(CONTINUES, DEADLINE),
         id="13.3-continue-judged-late-but-began-inside"),
    # After the deadline, still in the cure procedure: escalate (13.3.B).
    case(Active(OPEN, DEADLINE), AFTER, DOVRE, AFTER, Decision(ESCALATES, DEADLINE),
         id="13.3.B-escalate-after-deadline"),
    case(Active(EXTENDED, DEADLINE), AFTER, DOVRE, AFTER, Decision(ESCALATES, DEADLINE),
         id="13.3.B-escalate-after-extended-deadline"),
    case(Active(EXTENSION_REQUESTED, DEADLINE), AFTER, DOVRE, AFTER,
         Decision(ESCALATES, DEADLINE, True),
         id="13.3.B-escalate-extension-pending"),
    # The deadline instant itself is not after it.
    case(Active(OPEN, DEADLINE), DEADLINE, DOVRE, AFTER, Decision(CONTINUES, DEADLINE),
         id="13.3.B-at-the-deadline-not-after"),
    # Escalated already: later episodes continue the escalated notice, not escalate again.
    case(Active(ESCALATED, DEADLINE), AFTER, DOVRE, AFTER, Decision(CONTINUES, DEADLINE),
         id="13.3.B-escalated-continues"),
]
# fmt: on


@pytest.mark.parametrize(("active", "start", "profile", "now", "expected"), CASES)
def test_notice_decision(
    active: Active | None, start: datetime, profile: Profile, now: datetime, expected: Decision
) -> None:
    assert decide(active, episode(start), profile, now, TZ) == expected


NEAR, PASSED = Reminder.DEADLINE_NEAR, Reminder.DEADLINE_PASSED
LATER_DEADLINE = eod(2026, 7, 6)  # an extension's
# fmt: off
REMINDERS = [
    # Three local days before the deadline's day (June 29): from 00:00 on June 26, not before
    # (23:59 CDT on June 25 is already June 26 in UTC).
    case(OPEN, DEADLINE, set(), 3, local(2026, 6, 25, 23, 59), None, id="near-not-yet"),
    case(OPEN, DEADLINE, set(), 3, local(2026, 6, 26, 0, 0), NEAR, id="near-from-local-midnight"),
    case(EXTENDED, DEADLINE, set(), 3, BEFORE, NEAR, id="near-on-the-last-day"),
    case(EXTENSION_REQUESTED, DEADLINE, set(), 3, BEFORE, NEAR, id="near-while-more-time-asked"),
    case(OPEN, DEADLINE, {(NEAR.value, DEADLINE)}, 3, BEFORE, None, id="near-said-once"),
    case(OPEN, DEADLINE, set(), 0, BEFORE, None, id="near-off-in-the-profile"),
    # Passed: said once, whether or not the near one was, and whatever remind_days says.
    case(OPEN, DEADLINE, {(NEAR.value, DEADLINE)}, 3, AFTER, PASSED, id="passed"),
    case(OPEN, DEADLINE, set(), 0, AFTER, PASSED, id="passed-near-never-said"),
    case(OPEN, DEADLINE, {(PASSED.value, DEADLINE)}, 3, AFTER, None, id="passed-said-once"),
    case(OPEN, DEADLINE, set(), 3, DEADLINE, NEAR, id="at-the-deadline-not-passed"),
    # An extension's new deadline is reminded of again.
    case(EXTENDED, LATER_DEADLINE, {(NEAR.value, DEADLINE), (PASSED.value, DEADLINE)}, 3,
         local(2026, 7, 4, 9), NEAR, id="extended-deadline-reminded-again"),
    # Closed or escalated notices are the Town's already: nothing is owed.
    case("corrected", DEADLINE, set(), 3, AFTER, None, id="corrected-nothing"),
    case(ESCALATED, DEADLINE, set(), 3, AFTER, None, id="escalated-nothing"),
]
# fmt: on


@pytest.mark.parametrize(("status", "deadline", "told", "days", "now", "expected"), REMINDERS)
def test_reminder_due(
    status: str,
    deadline: datetime,
    told: set[tuple[str, datetime]],
    days: int,
    now: datetime,
    expected: Reminder | None,
) -> None:
    assert reminder_due(status, deadline, told, days, now, TZ) is expected
