"""Legal holiday calendars, computed (pure, no I/O, no dependency).

A profile lists holidays as calendar names and ISO dates, e.g.
``holidays = ["us-federal", "wisconsin", "2026-12-26"]``; :func:`holiday_dates` turns that
into the dates of one year. Two calendars are known:

* ``us-federal``: the legal public holidays of 5 U.S.C. 6103(a): New Year's Day, Birthday
  of Martin Luther King, Jr. (3rd Monday in January), Washington's Birthday (3rd Monday in
  February), Memorial Day (last Monday in May), Juneteenth (June 19, from 2021),
  Independence Day, Labor Day (1st Monday in September), Columbus Day (2nd Monday in
  October), Veterans Day (November 11), Thanksgiving (4th Thursday in November) and
  Christmas. A fixed-date holiday on a Saturday is also observed the Friday before, on a
  Sunday the Monday after (5 U.S.C. 6103(b); Executive Order 11582), as federal offices
  close then.
* ``wisconsin``: the legal holidays of Wis. Stat. 995.20 as this project reads it:
  January 1, the 3rd Monday in January, the 3rd Monday in February, the last Monday in
  May, June 19, July 4, the 1st Monday in September, the 2nd Monday in October,
  November 11, the 4th Thursday in November, December 25, and the days of the partisan
  primary (2nd Tuesday in August) and the general election (Tuesday after the 1st Monday
  in November) in even-numbered years; one falling on a Sunday moves to the Monday after.
  Good Friday (11 a.m. to 3 p.m. "observed for the purpose of worship") is not a whole
  holiday and is left out. The Town confirms the list; a profile may add dates.

No dependency: the ``holidays`` package on PyPI was considered, but which days a library
counts for a state (state-office closures, observed days) changes between releases and
would need checking against the statute at every update, while these dozen rules are
short to read and test here against 995.20 itself.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import date, timedelta
from functools import lru_cache

CALENDARS = ("us-federal", "wisconsin")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
MON, TUE, THU, SAT, SUN = 0, 1, 3, 5, 6


def nth_weekday(year: int, month: int, weekday: int, n: int) -> date:
    """The n-th given weekday of the month (n = -1: the last)."""
    if n > 0:
        first = date(year, month, 1)
        return first + timedelta(days=(weekday - first.weekday()) % 7 + 7 * (n - 1))
    following = date(year + (month == 12), month % 12 + 1, 1)
    last = following - timedelta(days=1)
    return last - timedelta(days=(last.weekday() - weekday) % 7)


def us_federal(year: int) -> frozenset[date]:
    fixed = [date(year, 1, 1), date(year, 7, 4), date(year, 11, 11), date(year, 12, 25)]
    if year >= 2021:
        fixed.append(date(year, 6, 19))
    days = set(fixed)
    for day in fixed:
        if day.weekday() == SAT:
            days.add(day - timedelta(days=1))
        elif day.weekday() == SUN:
            days.add(day + timedelta(days=1))
    if date(year + 1, 1, 1).weekday() == SAT:  # next New Year's Day is observed on December 31
        days.add(date(year, 12, 31))
    days.update(
        {
            nth_weekday(year, 1, MON, 3),
            nth_weekday(year, 2, MON, 3),
            nth_weekday(year, 5, MON, -1),
            nth_weekday(year, 9, MON, 1),
            nth_weekday(year, 10, MON, 2),
            nth_weekday(year, 11, THU, 4),
        }
    )
    return frozenset(days)


def wisconsin(year: int) -> frozenset[date]:
    fixed = [date(year, 1, 1), date(year, 6, 19), date(year, 7, 4), date(year, 11, 11), date(year, 12, 25)]
    days = {d + timedelta(days=1) if d.weekday() == SUN else d for d in fixed}
    days.update(
        {
            nth_weekday(year, 1, MON, 3),
            nth_weekday(year, 2, MON, 3),
            nth_weekday(year, 5, MON, -1),
            nth_weekday(year, 9, MON, 1),
            nth_weekday(year, 10, MON, 2),
            nth_weekday(year, 11, THU, 4),
        }
    )
    if year % 2 == 0:
        days.add(nth_weekday(year, 8, TUE, 2))  # partisan primary
        days.add(nth_weekday(year, 11, MON, 1) + timedelta(days=1))  # general election
    return frozenset(days)


_BY_NAME = {"us-federal": us_federal, "wisconsin": wisconsin}


def holiday_entry(entry: str) -> bool:
    """Whether ``entry`` is a known calendar or an ISO date."""
    if entry in _BY_NAME:
        return True
    if _DATE.fullmatch(entry):
        try:
            date.fromisoformat(entry)
            return True
        except ValueError:
            pass
    return False


def check_holidays(field_name: str, entries: Iterable[str]) -> None:
    """ValueError("field: reason") for an entry that is neither a known calendar nor a date."""
    for entry in entries:
        if holiday_entry(entry):
            continue
        raise ValueError(
            f"{field_name}: expected dates like '2026-07-03' or a calendar "
            f"({', '.join(CALENDARS)}), got {entry!r}"
        )


@lru_cache(maxsize=256)
def _year(entries: tuple[str, ...], year: int) -> frozenset[date]:
    days: set[date] = set()
    for entry in entries:
        if entry in _BY_NAME:
            days |= _BY_NAME[entry](year)
        else:
            day = date.fromisoformat(entry)
            if day.year == year:
                days.add(day)
    return frozenset(days)


def is_holiday(entries: Iterable[str], day: date) -> bool:
    return day in _year(tuple(entries), day.year)


def holiday_dates(entries: Iterable[str], year: int) -> frozenset[date]:
    return _year(tuple(entries), year)
