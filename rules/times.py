"""Time for every package: aligned windows, local clocks and how a time reads (pure, standard library).

The one home of time arithmetic and display, for the rules and the monitor alike. Two formats
live with what they define: the wire's time in monitor/wire/protocol.py and the store's
microseconds in monitor/wire/canonical.py; what a person types on the command line or in a
form is read by monitor/times.py.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import UTC, datetime, time, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo

MINUTE = timedelta(minutes=1)


@lru_cache(maxsize=4096)  # every sensor of a site sends the same seconds
def floor_minute(ts: datetime) -> datetime:
    return ts.replace(second=0, microsecond=0)


def iso(ts: datetime) -> str:
    """UTC ISO timestamp with a Z, as refs use it."""
    return ts.astimezone(UTC).isoformat().replace("+00:00", "Z")


def local_hm(ts: datetime, tz: ZoneInfo) -> str:
    return _clock_read(ts.astimezone(tz), "%H:%M")


def local_hms(ts: datetime, tz: ZoneInfo) -> str:
    return _clock_read(ts.astimezone(tz), "%H:%M:%S")


def _clock_read(local: datetime, fmt: str) -> str:
    """A local clock time, with its zone ("01:30 CDT") in the hour the clocks repeat when they
    fall back, where the time alone names two moments an hour apart."""
    shown = local.strftime(fmt)
    if local.replace(fold=1 - local.fold).utcoffset() != local.utcoffset():
        shown += local.strftime(" %Z")
    return shown


def local_stamp(ts: datetime, tz: ZoneInfo | str) -> str:
    """'2026-06-15 11:30 CDT': a time as a person at the site reads it (a zone or its name)."""
    zone = ZoneInfo(tz) if isinstance(tz, str) else tz
    return ts.astimezone(zone).strftime("%Y-%m-%d %H:%M %Z")


def floor_to(ts: datetime, step_s: int) -> datetime:
    """Floor to a multiple of step_s seconds since the Unix epoch (UTC-aligned minutes for 60)."""
    epoch = ts.timestamp()
    return datetime.fromtimestamp(math.floor(epoch / step_s) * step_s, tz=UTC)


def aligned_windows(start: datetime, end: datetime, step_s: int) -> Iterator[tuple[datetime, datetime]]:
    """Aligned windows of step_s seconds whose start lies in [start, end)."""
    window = floor_to(start, step_s)
    if window < start:
        window += timedelta(seconds=step_s)
    step = timedelta(seconds=step_s)
    while window < end:
        yield window, window + step
        window += step


def parse_clock(text: str) -> time:
    """'10:00' or '10:00:00' -> time; ValueError with a readable message otherwise."""
    try:
        return time.fromisoformat(text)
    except (TypeError, ValueError):
        raise ValueError(f"expected a local time like '10:00' or '15:00:00', got {text!r}") from None


def parse_clock_window(text: str) -> tuple[time, time]:
    """'06:00-19:00' -> (06:00, 19:00); an end before the start wraps past midnight."""
    parts = text.split("-")
    if len(parts) != 2:
        raise ValueError(f"expected a local time window like '06:00-19:00', got {text!r}")
    return parse_clock(parts[0].strip()), parse_clock(parts[1].strip())


def in_clock_window(clock: time, window: tuple[time, time]) -> bool:
    """Inclusive at both ends; a window like 22:00-06:00 wraps past midnight."""
    first, last = window
    if first <= last:
        return first <= clock <= last
    return clock >= first or clock <= last


def overlaps(a_start: datetime, a_end: datetime, b_start: datetime, b_end: datetime) -> bool:
    return a_start < b_end and b_start < a_end


def stored_time(text: str) -> datetime:
    """A stored or wire time ('2026-11-27T15:00:00Z' or with an offset) as an aware datetime in
    UTC; ValueError for anything else, a time without an offset included. The one reader of
    the record's time text (Python 3.11's ``fromisoformat`` reads the 'Z' itself)."""
    parsed = datetime.fromisoformat(text)
    if parsed.tzinfo is None:
        raise ValueError(f"{text!r} has no UTC offset")
    return parsed.astimezone(UTC)


def local_clock(ts: str | None, timezone: str) -> str:
    """'2026-11-27T15:00:00Z' -> '09:00' in the site's zone (a stored or wire time, as a clock reads)."""
    if not ts:
        return ""
    return local_hm(stored_time(ts), ZoneInfo(timezone))


def duration_text(seconds: float) -> str:
    """'6 minutes', '1 minute 30 seconds', '45 seconds', '2 hours 5 minutes': a length as people say it."""
    total = round(seconds)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [
        f"{n} {unit}{'' if n == 1 else 's'}"
        for n, unit in ((hours, "hour"), (minutes, "minute"), (secs, "second"))
        if n
    ]
    return " ".join(parts[:2]) if parts else "0 seconds"


def span_text(start: datetime, end: datetime, tz: ZoneInfo | str, *, with_date: bool = False) -> str:
    """'17:02-17:08 CST (6 minutes)': both ends and the length, so a reader's subtraction agrees.

    Seconds are shown when an end is not on a whole minute; dates when asked or when the span
    crosses midnight ('2026-11-30 23:50 CST-2026-12-01 00:10 CST (20 minutes)').
    """
    zone = ZoneInfo(tz) if isinstance(tz, str) else tz
    first, last = start.astimezone(zone), end.astimezone(zone)
    clock = "%H:%M:%S" if first.second or last.second or first.microsecond or last.microsecond else "%H:%M"
    length = duration_text((end - start).total_seconds())
    if with_date or first.date() != last.date():
        stamp = f"%Y-%m-%d {clock} %Z"
        return f"{first.strftime(stamp)} to {last.strftime(stamp)} ({length})"
    return f"{first.strftime(clock)}-{last.strftime(clock)} {last.strftime('%Z')} ({length})"


def local_moment(ts: datetime | str | None, timezone: str) -> str:
    """'2026-11-30 16:14:59 CST': a stored or wire time (a datetime or '...Z') in site time, to
    the second ('' for none): how the portal and `status` show a time a person reads."""
    if not ts:
        return ""
    moment = stored_time(ts) if isinstance(ts, str) else ts
    return moment.astimezone(ZoneInfo(timezone)).strftime("%Y-%m-%d %H:%M:%S %Z")
