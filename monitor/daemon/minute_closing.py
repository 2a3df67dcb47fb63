"""When a site's minutes close: a pure decision from the data's own progress.

A minute ``[m, m + 1 min)`` is judged once it has closed. Closing follows the *data*,
not the wall clock: after an outage the broker delivers what it queued oldest first,
faster than real time, and a minute must not be judged before its queued seconds have
been read. So a site's minutes close

- as the site's own data moves past them (by ``delay``, so the last second of every
  sensor is in): in real time a few seconds after the minute, while a backlog drains
  where the backlog has got to, however long the outage was;
- as the input stream as a whole (every site's data, the position in what the broker
  held) moves ``lateness`` past them: a site whose sensors went silent is judged with
  what it has, in data time, not ahead of a backlog still being read;
- when the site has been quiet in wall time (``is_quiet``: nothing for it, with the input
  connected, nothing in hand, and the broker not still delivering a backlog): everything
  up to ``now - delay`` is as complete as it gets.

Data that arrives for a minute already judged re-judges that minute (the shell marks it);
it is *late* when the site's own data had moved more than ``lateness`` past the minute:
a reading resent by a sensor after its own outage, not a backlog read in order.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from rules.times import MINUTE

EVALUATION_DELAY = timedelta(seconds=5)  # let the last second of a minute arrive from every sensor


def closed_until(
    site_newest: datetime | None,
    stream_newest: datetime | None,
    now: datetime,
    lateness: timedelta,
    *,
    quiet: bool,
    delay: timedelta = EVALUATION_DELAY,
) -> datetime | None:
    """Time before which the site's minutes have closed; None while nothing has.

    ``site_newest``: end of the newest reading stored for the site; ``stream_newest``: the
    same over every site of the daemon (where its input has got to); ``now``: the clock
    (wall, or the data clock); ``quiet``: the site has been silent for a while in wall time
    with the input connected and nothing in hand. Data ahead of ``now`` (a sensor clock
    running fast, within the allowed skew) does not close minutes that have not happened.
    """
    if quiet:
        return now - delay
    closed: datetime | None = None
    if site_newest is not None:
        closed = min(site_newest, now) - delay
    if stream_newest is not None:
        by_stream = min(stream_newest, now) - lateness - delay
        closed = by_stream if closed is None else max(closed, by_stream)
    return closed


def is_late(minute: datetime, site_newest: datetime | None, now: datetime, lateness: timedelta) -> bool:
    """Whether data for ``minute`` arriving now is late: the site's data was more than ``lateness`` past it.

    Measured in data time, so a backlog read in order after an outage is never late,
    whatever the outage length; a sensor resending its own seconds long after the other
    sensors of the site moved on is.
    """
    if site_newest is None:
        return False
    return min(site_newest, now) - (minute + MINUTE) > lateness


def is_quiet(
    *,
    site_silent_s: float,
    input_silent_s: float,
    connected_s: float | None,
    pending: int,
    live: bool,
    quiet_s: float,
) -> bool:
    """Whether a site's silence means its data is as complete as it gets (wall seconds).

    ``site_silent_s``: since the site's last reading; ``input_silent_s``: since the last
    reading of any site; ``connected_s``: since the broker connection came up (None: down);
    ``pending``: messages received and not yet handled; ``live``: the input is in real time
    (wall clock, newest data within the lateness of now). While the broker is unreachable,
    or delivers a backlog (messages in hand, or data behind real time still arriving), it
    may hold the site's data: silence proves nothing then.
    """
    if connected_s is None or pending > 0 or min(connected_s, site_silent_s) < quiet_s:
        return False
    return live or input_silent_s >= quiet_s
