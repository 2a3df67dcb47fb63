"""Reminders of a notice's cure deadline, on a real SQLite store with a controlled clock.

A notice nobody closes used to pass its deadline in silence: the operator was told nothing as
the 14 days ran out, and the Town learned of it only if a new violation escalated it.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

from monitor.commands.status import _notice_lines
from monitor.config import Config
from monitor.daemon.site_status import site_status
from monitor.journal.store import Store, digest_of
from monitor.notify.notices import NoticeBook, change_record
from rules.deadlines import end_of_local_day
from rules.profile import load_profile
from tests.support.notices import SITE, TZ, local, site_and_profile, store_findings, violation

# Issued Monday 15 June 2026 11:31 CDT: the deadline is Monday 29 June 23:59:59.999 CDT.
ISSUED = local(2026, 6, 15, 11, 31, 6)


def _open(store: Store, config: Config) -> str:
    site, profile = site_and_profile(config)
    found = store_findings(store, [violation(ISSUED - timedelta(minutes=2))], ISSUED)
    [event] = NoticeBook(store).on_findings(site, profile, found, ISSUED)
    return event.notice_id


def test_the_operator_is_reminded_before_and_the_town_after_the_deadline(
    store: Store, config: Config
) -> None:
    site, profile = site_and_profile(config)
    notice_id = _open(store, config)
    book = NoticeBook(store)

    assert book.remind(site, profile, ISSUED + timedelta(days=1)) == []
    assert book.remind(site, profile, local(2026, 6, 25, 23, 59)) == []

    # From the local day three days before the deadline's day (the profile's cure_remind_days).
    [near] = book.remind(site, profile, local(2026, 6, 26, 8, 0))
    assert (near.change, near.audiences, near.kind, near.severity) == (
        "deadline_near",
        ("operator",),
        "notice_deadline_near",
        "warning",
    )
    assert near.message == (
        "Notice DOV-2026-0001 (Noise at the mine site boundaries): the cure deadline is "
        "2026-06-29 23:59 CDT, in 3 days. Correct the violation before then, or ask the Town for more"
        " time (section 13.3.A)."
    )
    assert near.payload["deadline_local"] == "2026-06-29 23:59 CDT"
    assert near.payload["status"] == "open"
    assert book.get(notice_id).status == "open"  # a reminder changes nothing of the procedure
    assert book.remind(site, profile, local(2026, 6, 27, 8, 0)) == []  # said once

    [passed] = book.remind(site, profile, local(2026, 6, 30, 0, 5))
    assert (passed.change, passed.audiences, passed.kind) == (
        "deadline_passed",
        ("town", "operator"),
        "notice_deadline_passed",
    )
    assert passed.message.startswith(
        "Notice DOV-2026-0001 (Noise at the mine site boundaries): the cure deadline "
        "2026-06-29 23:59 CDT has passed and the notice is still open. The Town decides"
    )
    assert book.remind(site, profile, local(2026, 7, 3, 8, 0)) == []
    assert [c.change for c in book.history(notice_id)] == ["opened", "deadline_near", "deadline_passed"]
    assert book.take_announcements(local(2026, 7, 3, 8, 0)) == []  # the daemon announced them


def test_an_extension_is_reminded_of_again_and_a_closed_notice_not_at_all(
    store: Store, config: Config
) -> None:
    site, profile = site_and_profile(config)
    notice_id = _open(store, config)
    book = NoticeBook(store)
    [_] = book.remind(site, profile, local(2026, 6, 30, 9, 0))  # passed
    book.extend(notice_id, None, "Town clerk", "Granted", local(2026, 6, 30, 10, 0), extra_days=7)
    new = end_of_local_day(datetime(2026, 7, 6).date(), TZ)
    assert book.get(notice_id).deadline == new
    [near] = book.remind(site, profile, local(2026, 7, 4, 9, 0))
    assert near.change == "deadline_near" and "2026-07-06 23:59 CDT, in 2 days" in near.message

    book.close(notice_id, "Enclosure built", "Town clerk", local(2026, 7, 5, 9, 0))
    assert book.remind(site, profile, local(2026, 7, 8, 9, 0)) == []


def test_a_profile_without_near_reminders_still_says_the_deadline_passed(
    store: Store, config: Config
) -> None:
    site, _ = site_and_profile(config)
    _open(store, config)
    quiet = load_profile("dovre", {"cure_remind_days": 0})  # a site's agreement may say so
    book = NoticeBook(store)
    assert book.remind(site, quiet, local(2026, 6, 29, 9, 0)) == []
    assert [e.change for e in book.remind(site, quiet, local(2026, 6, 30, 9, 0))] == ["deadline_passed"]


def test_a_reminder_is_a_chained_change(store: Store, config: Config) -> None:
    site, profile = site_and_profile(config)
    notice_id = _open(store, config)
    book = NoticeBook(store)
    book.remind(site, profile, local(2026, 6, 27, 9, 0))
    row = store.conn.execute(
        "SELECT * FROM notice_changes WHERE notice_id = ? AND change = 'deadline_near'", (notice_id,)
    ).fetchone()
    chained = store.conn.execute(
        "SELECT digest FROM chain WHERE site = ? AND kind = 'notice_change' AND key = ?",
        (SITE, f"{notice_id}|{row['seq']}"),
    ).fetchone()
    assert chained["digest"] == digest_of(change_record(row))


def test_status_lists_the_notices_not_closed_with_their_deadline_as_of_its_time(
    store: Store, config: Config
) -> None:
    """`minewatch status` (and the retained status, the portal's status page) told nothing of
    the notices an operator has to act on; it lists them as the record stood at its time."""
    site, profile = site_and_profile(config)
    notice_id = _open(store, config)

    def listed(now: datetime) -> list[dict[str, object]]:
        return site_status(store, site, now, titles=profile.titles)["notices"]

    assert listed(ISSUED - timedelta(minutes=1)) == []  # not yet issued then
    [entry] = listed(local(2026, 6, 27, 9, 0))
    assert entry == {
        "id": notice_id,
        "standard": "noise",
        "title": "Noise at the mine site boundaries",
        "section": "6.D",
        "status": "open",
        "deadline": "2026-06-30T04:59:59.999Z",
        "deadline_local": "2026-06-29 23:59 CDT",
        "deadline_in": "in 2 days",
        "text": f"{notice_id} Noise at the mine site boundaries (6.D): open, correct by 2026-06-29 23:59 CDT"
        " (in 2 days)",
    }
    assert _notice_lines([entry]) == [
        "  notices not closed:",
        f"  - {notice_id} Noise at the mine site boundaries (6.D): open, correct by 2026-06-29 23:59 CDT"
        " (in 2 days)",
    ]
    assert listed(local(2026, 6, 30, 9, 0))[0]["deadline_in"] == "passed"
    book = NoticeBook(store)
    book.close(notice_id, "Enclosure built", "Town clerk", local(2026, 7, 1, 9, 0))
    assert listed(local(2026, 7, 2, 9, 0)) == []
    assert listed(local(2026, 6, 30, 9, 0))[0]["status"] == "open"  # as it stood then


def test_a_profile_stating_no_way_to_more_time_is_not_given_one_in_the_reminder(
    store: Store, config: Config
) -> None:
    """The reminder offered Dovre 13.3.A's request for more time under every profile."""
    site, profile = site_and_profile(config)
    _open(store, config)
    silent = replace(profile, notice=replace(profile.notice, more_time=""))
    [near] = NoticeBook(store).remind(site, silent, local(2026, 6, 27, 9, 0))
    assert near.message.endswith("in 2 days. Correct the violation before then.")
