"""Notices of violation: the 13.3.A lifecycle on a real SQLite store, with a controlled clock.

The helpers at the top (config, findings, sample data) are shared with test_render and
test_delivery.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from monitor.config import Config
from monitor.journal import queries
from monitor.journal.store import GENESIS, Store, digest_of, next_head
from monitor.notify.notices import (
    InvalidTransition,
    NoticeBook,
    NoticeError,
    UnknownNotice,
    change_record,
    episode_record,
    facts_json,
    notice_record,
)
from monitor.wire.canonical import canonical_text
from monitor.wire.codec import finding_from_json
from rules.deadlines import end_of_local_day
from rules.episodes import episode_facts
from rules.model import (
    Finding,
    FindingKind,
)
from rules.profile import Profile, load_profile
from tests.support.notices import (
    SITE,
    TZ,
    local,
    minutes,
    site_and_profile,
    store_findings,
    violation,
)

# --------------------------------------------------------------------------- fixtures


# --------------------------------------------------------------------------- the lifecycle


def test_episode_opens_one_notice_with_its_facts(store: Store, config: Config) -> None:
    site, profile = site_and_profile(config)
    book = NoticeBook(store)
    first = local(2026, 6, 15, 11, 30)
    now = first + timedelta(minutes=1, seconds=6)
    found = store_findings(
        store,
        [violation(first, exemptions=("haul truck truck-17 entering at gate g1",), completeness=0.9)],
        now,
    )
    events = book.on_findings(site, profile, found, now)

    assert [(e.notice_id, e.change, e.audiences, e.kind) for e in events] == [
        ("DOV-2026-0001", "opened", ("town", "operator"), "notice_opened")
    ]
    notice = book.get("DOV-2026-0001")
    assert notice.status == "open"
    assert notice.opened == now
    # 13.3.A: to the end of the site's local day 14 days after the day of issue (not 11:31).
    assert notice.deadline == datetime(2026, 6, 30, tzinfo=TZ) - timedelta(milliseconds=1)
    assert notice.data["section"] == "6.D"
    assert notice.data["text"].startswith("The Operator shall use best management practices")
    assert notice.data["operator"] == "Acme Aggregates LLC"
    assert "Reduce noise at the boundary" in notice.data["required_action"]
    [episode] = notice.episodes
    assert episode.facts["sensors"] == ["n1"]
    assert episode.facts["worst"] == {"name": "LAeq,1min", "value": 84.2, "limit": 80.0, "unit": "dB(A)"}
    assert episode.facts["start_local"] == "2026-06-15 11:30 CDT"
    assert episode.facts["start"] == "2026-06-15T16:30:00Z"
    assert episode.facts["exemptions"] == ["haul truck truck-17 entering at gate g1"]
    assert episode.facts["completeness_min"] == 0.9
    payload = events[0].payload
    assert payload["notice_id"] == "DOV-2026-0001" and payload["deadline"] == "2026-06-30T04:59:59.999Z"
    assert "Correct by 2026-06-29 23:59 CDT" in events[0].message
    assert "Acme Aggregates LLC" in events[0].message

    # The episode grows minute by minute: same notice, no new alert, facts follow.
    later = now + timedelta(minutes=5)
    more = store_findings(store, minutes(first + timedelta(minutes=1), 4, value=86.0), later)
    assert book.on_findings(site, profile, more, later) == []
    [episode] = book.get("DOV-2026-0001").episodes
    assert episode.facts["findings"] == 5
    assert episode.facts["end_local"] == "2026-06-15 11:35 CDT"
    assert episode.facts["worst"]["value"] == 86.0
    assert len(book.find()) == 1


def test_non_violations_and_other_sites_open_nothing(store: Store, config: Config) -> None:
    site, profile = site_and_profile(config)
    book = NoticeBook(store)
    t = local(2026, 6, 15, 11, 30)
    exempt = violation(t)
    exempt = Finding(
        **{
            **{f: getattr(exempt, f) for f in exempt.__dataclass_fields__},  # type: ignore[arg-type]
            "kind": FindingKind.EXEMPT_EXCEEDANCE,
        }
    )
    elsewhere = Finding(
        **{
            **{f: getattr(violation(t), f) for f in exempt.__dataclass_fields__},  # type: ignore[arg-type]
            "site": "other",
        }
    )
    assert book.on_findings(site, profile, [exempt, elsewhere], t + timedelta(minutes=2)) == []
    assert book.find() == []


def test_full_lifecycle_continuing_extension_corrected(store: Store, config: Config) -> None:
    site, profile = site_and_profile(config)
    book = NoticeBook(store)
    day1 = local(2026, 6, 15, 11, 30)
    book.on_findings(
        site, profile, store_findings(store, minutes(day1, 3), day1), day1 + timedelta(minutes=4)
    )
    notice_id = "DOV-2026-0001"
    issued = book.get(notice_id).opened

    # Two days later, another episode of the same standard (another sensor too): continuing violation.
    day3 = day1 + timedelta(days=2)
    events = book.on_findings(
        site,
        profile,
        store_findings(store, minutes(day3, 2, sensor="n2", value=82.5), day3),
        day3 + timedelta(minutes=3),
    )
    assert [(e.notice_id, e.change, e.kind) for e in events] == [
        (notice_id, "continuing", "notice_continuing")
    ]
    assert "Continuing violation" in events[0].message
    assert len(book.get(notice_id).episodes) == 2
    assert book.find() == [book.get(notice_id)]  # still one notice

    # A blasting finding is another standard: its own notice, the next id.
    blast = violation(day3, standard="blast_window", section="6.F")
    events = book.on_findings(
        site, profile, store_findings(store, [blast], day3), day3 + timedelta(minutes=5)
    )
    assert [e.notice_id for e in events] == ["DOV-2026-0002"]
    assert book.get("DOV-2026-0002").data["section"] == "6.F"

    # 13.3.A: written explanation, the town grants more time, then finds it corrected.
    t = day3 + timedelta(days=1)
    event = book.request_extension(
        notice_id, "New enclosure for the crusher arrives in 3 weeks; need 21 days.", "J. Smith (Acme)", t
    )
    assert (event.change, event.audiences) == ("extension_requested", ("town",))
    new_deadline = issued + timedelta(days=35)
    event = book.extend(
        notice_id, new_deadline, "Town clerk", "Granted: 21 more days", t + timedelta(hours=2)
    )
    assert event.audiences == ("operator", "town")
    assert book.get(notice_id).status == "extended"
    assert book.get(notice_id).deadline == new_deadline
    assert book.get(notice_id).first_deadline == end_of_local_day(
        issued.astimezone(TZ).date() + timedelta(days=14), TZ
    )

    # An episode after the first deadline but before the extended one is only continuing.
    day20 = day1 + timedelta(days=20)
    events = book.on_findings(
        site, profile, store_findings(store, minutes(day20, 1), day20), day20 + timedelta(minutes=2)
    )
    assert [e.change for e in events] == ["continuing"]

    event = book.close(
        notice_id,
        "Enclosure installed; levels verified at 76 dB(A).",
        "Town board",
        day1 + timedelta(days=30),
    )
    assert event.change == "corrected"
    history = book.history(notice_id)
    assert [(c.change, c.status, c.actor) for c in history] == [
        ("opened", "open", "minewatch"),
        ("continuing", "open", "minewatch"),
        ("extension_requested", "extension_requested", "J. Smith (Acme)"),
        ("extended", "extended", "Town clerk"),
        ("continuing", "extended", "minewatch"),
        ("corrected", "corrected", "Town board"),
    ]
    assert history[2].note.startswith("New enclosure")
    assert history[3].deadline == new_deadline

    # Corrected is final; a later episode opens a new notice.
    with pytest.raises(InvalidTransition, match="is corrected"):
        book.extend(notice_id, new_deadline + timedelta(days=10), "Town clerk", "", day1 + timedelta(days=31))
    day40 = day1 + timedelta(days=40)
    events = book.on_findings(
        site, profile, store_findings(store, minutes(day40, 1), day40), day40 + timedelta(minutes=2)
    )
    assert [(e.notice_id, e.change) for e in events] == [("DOV-2026-0003", "opened")]


def test_episode_after_deadline_escalates_to_citation(store: Store, config: Config) -> None:
    site, profile = site_and_profile(config)
    book = NoticeBook(store)
    day1 = local(2026, 7, 1, 10, 0)
    book.on_findings(
        site, profile, store_findings(store, minutes(day1, 2), day1), day1 + timedelta(minutes=3)
    )
    book.request_extension("DOV-2026-0001", "Need time", "Acme", day1 + timedelta(days=1))

    day16 = day1 + timedelta(days=16)  # after the 14 days, not corrected
    events = book.on_findings(
        site,
        profile,
        store_findings(store, minutes(day16, 3, value=88.0), day16),
        day16 + timedelta(minutes=4),
    )
    assert len(events) == 1
    event = events[0]
    assert (event.change, event.audiences, event.kind, event.severity) == (
        "escalated",
        ("town",),
        "citation_recommended",
        "citation",
    )
    assert "Citation recommended (section 13.3.B)" in event.message
    assert "An extension request was pending" in event.message
    notice = book.get("DOV-2026-0001")
    assert notice.status == "escalated"
    assert len(notice.episodes) == 2

    # Escalated stays the one active notice: more episodes attach; the town can still close it.
    day17 = day16 + timedelta(days=1)
    events = book.on_findings(
        site, profile, store_findings(store, minutes(day17, 1), day17), day17 + timedelta(minutes=2)
    )
    assert [(e.notice_id, e.change) for e in events] == [("DOV-2026-0001", "continuing")]
    with pytest.raises(InvalidTransition):
        book.escalate("DOV-2026-0001", "again", "Town", day17)
    with pytest.raises(InvalidTransition):
        book.request_extension("DOV-2026-0001", "more time", "Acme", day17)
    book.close(
        "DOV-2026-0001", "Citation issued and paid; corrected.", "Town board", day17 + timedelta(days=3)
    )


@pytest.mark.parametrize(
    ("steps", "action", "message"),
    [
        ([], "close_twice", "is corrected"),
        ([], "extend_earlier", "is not after"),
        (["escalate"], "extend", "is escalated"),
        ([], "request_empty", "written explanation"),
        ([], "no_actor", "who made it"),
    ],
)
def test_invalid_transitions_are_rejected(
    store: Store, config: Config, steps: list[str], action: str, message: str
) -> None:
    site, profile = site_and_profile(config)
    book = NoticeBook(store)
    t = local(2026, 6, 15, 11, 30)
    book.on_findings(site, profile, store_findings(store, [violation(t)], t), t + timedelta(minutes=2))
    nid = "DOV-2026-0001"
    later = t + timedelta(days=1)
    for step in steps:
        if step == "escalate":
            book.escalate(nid, "ignored the notice", "Town", later, before_deadline_reason="repeat offence")
    before = book.history(nid)
    with pytest.raises(NoticeError, match=message):
        if action == "close_twice":
            book.close(nid, "ok", "Town", later)
            book.close(nid, "ok", "Town", later)
        elif action == "extend_earlier":
            book.extend(nid, book.get(nid).deadline - timedelta(days=1), "Town", "", later)
        elif action == "extend":
            book.extend(nid, later + timedelta(days=30), "Town", "", later)
        elif action == "request_empty":
            book.request_extension(nid, "  ", "Acme", later)
        elif action == "no_actor":
            book.close(nid, "ok", " ", later)
    if action != "close_twice":
        assert book.history(nid) == before  # nothing written by a refused change


def test_unknown_notice(store: Store) -> None:
    book = NoticeBook(store)
    with pytest.raises(UnknownNotice, match="DOV-2026-0099"):
        book.close("DOV-2026-0099", "x", "Town", datetime(2026, 1, 1, tzinfo=UTC))
    with pytest.raises(UnknownNotice):
        book.history("nope")


def test_ids_count_per_prefix_and_year(store: Store, config: Config) -> None:
    site, profile = site_and_profile(config)
    book = NoticeBook(store)
    ids = []
    for i, when in enumerate(
        [local(2026, 3, 1, 11, 0), local(2026, 12, 31, 22, 0), local(2027, 1, 2, 11, 0)]
    ):
        events = book.on_findings(
            site,
            profile,
            store_findings(store, [violation(when, value=81 + i)], when),
            when + timedelta(minutes=2),
        )
        ids.append(events[0].notice_id)
        book.close(ids[-1], "corrected", "Town", when + timedelta(days=1))
    # 2026-12-31 22:00 CST is already 2027 in UTC: the year is the town's.
    assert ids == ["DOV-2026-0001", "DOV-2026-0002", "DOV-2027-0001"]


def test_restart_continues_episodes_and_notices(db: Path, config: Config) -> None:
    site, profile = site_and_profile(config)
    t = local(2026, 6, 15, 11, 30)
    store = Store(db)
    book = NoticeBook(store)
    book.on_findings(site, profile, store_findings(store, minutes(t, 2), t), t + timedelta(minutes=3))
    store.close()

    store = Store(db)  # the daemon restarted
    book = NoticeBook(store)
    # The episode continues (within episode_gap_s): no new notice, no new alert.
    more = store_findings(store, minutes(t + timedelta(minutes=2), 2), t)
    assert book.on_findings(site, profile, more, t + timedelta(minutes=5)) == []
    notice = book.get("DOV-2026-0001")
    assert notice.episodes[0].facts["findings"] == 4
    # Late data extending the episode backwards merges (new episode id) into the same notice.
    early = store_findings(store, [violation(t - timedelta(minutes=1))], t)
    assert book.on_findings(site, profile, early, t + timedelta(minutes=6)) == []
    [episode] = book.get("DOV-2026-0001").episodes
    assert episode.facts["findings"] == 5 and episode.start == t - timedelta(minutes=1)
    store.close()

    store = Store(db)
    book = NoticeBook(store)
    later = t + timedelta(days=1)
    events = book.on_findings(
        site, profile, store_findings(store, [violation(later)], later), later + timedelta(minutes=2)
    )
    assert [(e.notice_id, e.change) for e in events] == [("DOV-2026-0001", "continuing")]
    store.close()


def test_every_change_is_in_the_hash_chain(store: Store, config: Config) -> None:
    site, profile = site_and_profile(config)
    book = NoticeBook(store)
    t = local(2026, 6, 15, 11, 30)
    book.on_findings(site, profile, store_findings(store, minutes(t, 2), t), t + timedelta(minutes=3))
    book.request_extension("DOV-2026-0001", "Need 10 more days", "Acme", t + timedelta(days=1))
    book.extend("DOV-2026-0001", t + timedelta(days=24), "Town", "ok", t + timedelta(days=2))
    book.close("DOV-2026-0001", "fixed", "Town", t + timedelta(days=20))

    conn = store.conn
    chain = {
        (r["kind"], r["key"]): r["digest"]
        for r in conn.execute("SELECT * FROM chain WHERE site = ?", (SITE,))
    }
    notice = conn.execute("SELECT * FROM notices").fetchone()
    assert chain[("notice", "DOV-2026-0001")] == digest_of(notice_record(notice))
    changes = conn.execute("SELECT * FROM notice_changes ORDER BY seq").fetchall()
    assert len(changes) == 4
    for row in changes:
        assert chain[("notice_change", f"DOV-2026-0001|{row['seq']}")] == digest_of(change_record(row))
    for row in conn.execute("SELECT * FROM notice_episodes"):
        key = f"{row['notice_id']}|{row['episode_id']}|{row['revision']}"
        assert chain[("notice_episode", key)] == digest_of(episode_record(row))
    # And the chain as a whole still links.
    head = GENESIS
    for row in conn.execute("SELECT digest, head FROM chain WHERE site = ? ORDER BY seq", (SITE,)):
        head = next_head(head, row["digest"])
        assert head == row["head"]


def test_cli_changes_are_announced_once_by_the_daemon(db: Path, config: Config) -> None:
    site, profile = site_and_profile(config)
    t = local(2026, 6, 15, 11, 30)
    daemon = Store(db)
    book = NoticeBook(daemon)
    book.on_findings(site, profile, store_findings(daemon, [violation(t)], t), t + timedelta(minutes=2))
    assert book.take_announcements(t) == []  # on_findings returned its own events already

    cli = Store(db)  # another process's connection
    NoticeBook(cli).close("DOV-2026-0001", "Corrected on inspection", "Inspector Lee", t + timedelta(days=3))
    cli.close()
    daemon._heads.clear()  # the chain head moved under the daemon (see the report to the lead)
    events = book.take_announcements(t + timedelta(days=3, seconds=1))
    assert [(e.change, e.audiences, e.kind) for e in events] == [
        ("corrected", ("operator", "town"), "notice_corrected")
    ]
    assert "Inspector Lee" in events[0].message
    assert book.take_announcements(t + timedelta(days=3, seconds=2)) == []
    daemon.close()


def test_list_filters(store: Store, config: Config) -> None:
    site, profile = site_and_profile(config)
    book = NoticeBook(store)
    t = local(2026, 6, 15, 11, 30)
    book.on_findings(site, profile, store_findings(store, [violation(t)], t), t + timedelta(minutes=2))
    blast = violation(t, standard="blast_window", section="6.F")
    book.on_findings(site, profile, store_findings(store, [blast], t), t + timedelta(minutes=3))
    book.close("DOV-2026-0002", "ok", "Town", t + timedelta(days=1))
    assert [n.id for n in book.find(status="open")] == ["DOV-2026-0001"]
    assert [n.id for n in book.find(site=SITE)] == ["DOV-2026-0001", "DOV-2026-0002"]
    assert book.find(site="elsewhere") == []
    assert (
        json.loads(store.conn.execute("SELECT data FROM notices WHERE id='DOV-2026-0002'").fetchone()[0])[
            "rule"
        ]
        == "blast_window"
    )


# --------------------------------------------------------------------------- deadlines (13.3.A/B)


def open_notice(store: Store, config: Config, issued: datetime, profile: Profile | None = None) -> str:
    site, default = site_and_profile(config)
    start = issued - timedelta(minutes=2)
    [event] = NoticeBook(store).on_findings(
        site, profile or default, store_findings(store, [violation(start)], issued), issued
    )
    return event.notice_id


# Issued Monday 15 June 2026 11:31 CDT: the deadline is Monday 29 June 23:59:59.999 CDT.
ISSUED = local(2026, 6, 15, 11, 31, 6)
DEADLINE = end_of_local_day(datetime(2026, 6, 29).date(), TZ)

# fmt: off
AUTO_ESCALATION_CASES = [
    pytest.param(local(2026, 6, 29, 11, 31, 7), "continuing", id="13.3.B-same-clock-hour-is-still-in-time"),
    pytest.param(local(2026, 6, 29, 23, 59, 0), "continuing", id="13.3.B-last-minute-of-the-day"),
    pytest.param(local(2026, 6, 30, 0, 0, 0), "escalated", id="13.3.B-next-local-day"),
]
# fmt: on


@pytest.mark.parametrize(("start", "change"), AUTO_ESCALATION_CASES)
def test_a_new_episode_escalates_only_after_the_end_of_the_deadline_day(
    store: Store, config: Config, start: datetime, change: str
) -> None:
    site, profile = site_and_profile(config)
    notice_id = open_notice(store, config, ISSUED)
    assert NoticeBook(store).get(notice_id).deadline == DEADLINE
    assert NoticeBook(store).get(notice_id).data["deadline_rule"] == (
        "the end of the site's local day 14 days after the day of issue"
    )
    book = NoticeBook(store)
    events = book.on_findings(
        site, profile, store_findings(store, [violation(start)], start), start + timedelta(minutes=2)
    )
    assert [e.change for e in events] == [change]


def test_deadline_rolls_to_the_next_business_day_when_the_profile_says_so(
    store: Store, config: Config
) -> None:
    site, _ = site_and_profile(config)
    rolled = load_profile(site.profile, {"cure_next_business_day": True})
    # Issued Saturday 20 June: day 14 is Saturday 4 July (a legal holiday), then a Sunday.
    notice_id = open_notice(store, config, local(2026, 6, 20, 9, 0), rolled)
    notice = NoticeBook(store).get(notice_id)
    assert notice.deadline == end_of_local_day(datetime(2026, 7, 6).date(), TZ)
    assert notice.data["cure_next_business_day"] is True
    assert notice.data["deadline_rule"] == (
        "the end of the site's local day 14 days after the day of issue, moved to the next business "
        "day when that day is a Sunday or legal holiday (Wis. Stat. 990.001(4))"
    )
    # An extension by days rolls the same way: 6 more days from Monday 6 July is Sunday 12 July.
    event = NoticeBook(store).extend(notice_id, None, "Town clerk", "", local(2026, 7, 1, 9, 0), extra_days=6)
    assert NoticeBook(store).get(notice_id).deadline == end_of_local_day(datetime(2026, 7, 13).date(), TZ)
    assert "7 more days" in event.message


def test_an_extension_records_the_extra_time_and_the_new_deadline(store: Store, config: Config) -> None:
    notice_id = open_notice(store, config, ISSUED)
    book = NoticeBook(store)
    # 13.3.A: the operator's explanation says how much more time is needed.
    asked = book.request_extension(notice_id, "Enclosure on order", "Acme", ISSUED, requested_days=21)
    assert asked.message.startswith("Acme requests 21 more days to correct notice DOV-2026-0001")
    assert book.history(notice_id)[-1].data == {"requested_days": 21}
    with pytest.raises(NoticeError, match=r"^the days requested: must be at least 1, got 0$"):
        book.request_extension(notice_id, "again", "Acme", ISSUED, requested_days=0)
    event = book.extend(notice_id, None, "Town clerk", "Granted", ISSUED + timedelta(days=2), extra_days=21)
    new = end_of_local_day(datetime(2026, 7, 20).date(), TZ)
    assert book.get(notice_id).deadline == new
    last = book.history(notice_id)[-1]
    assert last.change == "extended" and last.deadline == new
    assert last.data == {
        "previous_deadline": "2026-06-30T04:59:59.999Z",
        "new_deadline": "2026-07-21T04:59:59.999Z",
        "extra_time_s": 21 * 86400.0,
        "extra_days": 21,
    }
    assert "to 2026-07-20 23:59 CDT (21 more days after 2026-06-29 23:59 CDT)" in event.message
    # Escalation now waits for the new deadline: an episode on 1 July only continues.
    site, profile = site_and_profile(config)
    july1 = local(2026, 7, 1, 10, 0)
    events = book.on_findings(site, profile, store_findings(store, [violation(july1)], july1), july1)
    assert [e.change for e in events] == ["continuing"]
    with pytest.raises(NoticeError, match="either a new deadline or a number of extra days"):
        book.extend(notice_id, new + timedelta(days=1), "Town", "", july1, extra_days=1)


# fmt: off
BEFORE_ISSUE_CASES = [
    pytest.param("close", id="close"),
    pytest.param("extend", id="extend"),
    pytest.param("request", id="request-extension"),
    pytest.param("escalate", id="escalate"),
]
# fmt: on


@pytest.mark.parametrize("action", BEFORE_ISSUE_CASES)
def test_changes_dated_before_the_notice_are_refused(store: Store, config: Config, action: str) -> None:
    notice_id = open_notice(store, config, ISSUED)
    book = NoticeBook(store)
    before = book.history(notice_id)

    def do(at: datetime) -> None:
        if action == "close":
            book.close(notice_id, "ok", "Town", at)
        elif action == "extend":
            book.extend(notice_id, DEADLINE + timedelta(days=7), "Town", "", at)
        elif action == "request":
            book.request_extension(notice_id, "need a week", "Acme", at)
        else:
            book.escalate(notice_id, "x", "Town", at, before_deadline_reason="repeat offender")

    with pytest.raises(InvalidTransition, match="before it"):
        do(ISSUED - timedelta(seconds=1))
    assert book.history(notice_id) == before
    do(ISSUED)  # at the moment of issue is fine
    assert len(book.history(notice_id)) == len(before) + 1


# fmt: off
MANUAL_ESCALATION_CASES = [
    pytest.param(DEADLINE - timedelta(seconds=1), None, "has not passed", id="13.3.B-a-second-before"),
    pytest.param(DEADLINE, None, "has not passed", id="13.3.B-at-the-deadline-refused"),
    pytest.param(DEADLINE - timedelta(days=3), "  ", "has not passed", id="13.3.B-blank-reason-refused"),
    pytest.param(DEADLINE + timedelta(seconds=1), None, None, id="13.3.B-a-second-after-allowed"),
    pytest.param(DEADLINE - timedelta(days=3), "Third this year", None, id="13.3.B-early-with-reason"),
]
# fmt: on


@pytest.mark.parametrize(("at", "reason", "error"), MANUAL_ESCALATION_CASES)
def test_manual_escalation_before_the_deadline_needs_a_reason(
    store: Store, config: Config, at: datetime, reason: str | None, error: str | None
) -> None:
    notice_id = open_notice(store, config, ISSUED)
    book = NoticeBook(store)
    if error:
        with pytest.raises(InvalidTransition, match=error):
            book.escalate(notice_id, "not corrected", "Town", at, before_deadline_reason=reason)
        assert book.get(notice_id).status == "open"
        return
    event = book.escalate(notice_id, "not corrected", "Town", at, before_deadline_reason=reason)
    assert book.get(notice_id).status == "escalated"
    last = book.history(notice_id)[-1]
    if reason:
        assert last.data["before_deadline"] is True and last.data["override_reason"] == reason
        assert f"(before the cure deadline: {reason})" in event.message
    else:
        assert "before_deadline" not in last.data


def test_notice_ids_match_without_regard_to_case(store: Store, config: Config) -> None:
    notice_id = open_notice(store, config, ISSUED)
    book = NoticeBook(store)
    assert book.get(notice_id.lower()).id == notice_id == "DOV-2026-0001"
    event = book.close(" dov-2026-0001 ", "ok", "Town", ISSUED + timedelta(days=1))
    assert event.notice_id == "DOV-2026-0001"
    assert book.history("Dov-2026-0001")[-1].change == "corrected"


def run_cli(argv: list[str]) -> int:
    """The CLI's exit status, whether it returns it or argparse exits with it."""
    from monitor.cli import main

    try:
        return int(main(argv))
    except SystemExit as exc:
        return int(exc.code or 0)


def test_cli_help_lists_every_action(capsys: pytest.CaptureFixture[str]) -> None:
    from monitor.cli import main
    from monitor.commands.notices import ACTIONS

    with pytest.raises(SystemExit) as exit_info:
        main(["notices", "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "request-extension" in ACTIONS
    for action in ACTIONS:
        assert f"\n    {action}" in out, action  # its own line in the list of actions
    assert f"notices of violation: {', '.join(ACTIONS)}" in out.replace("\n", " ").replace("  ", " ")


def test_cli_escalation_before_the_deadline_and_lowercase_ids(
    db: Path, config: Config, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The CLI dates changes with the machine's clock, so the notices here are issued around it."""
    from monitor.cli import main

    path = tmp_path / "minewatch.toml"
    path.write_text(config.raw_text)
    args = ["--config", str(path)]
    store = Store(db)
    try:
        now = datetime.now(UTC)
        recent = open_notice(store, config, now - timedelta(hours=1))
    finally:
        store.close()
    lower = recent.lower()
    capsys.readouterr()
    request = ["notices", "request-extension", lower, "--explanation", "Parts on order", "--days", "5"]
    assert main([*request, "--by", "Acme", *args]) == 0
    assert f"Acme requests 5 more days to correct notice {recent}" in capsys.readouterr().out
    assert main(["notices", "escalate", lower, "--note", "x", "--by", "Town", *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "has not passed" in err and "--before-deadline --reason" in err
    assert (
        main(["notices", "escalate", lower, "--note", "x", "--by", "Town", "--before-deadline", *args]) == 2
    )
    assert "--before-deadline and --reason go together" in capsys.readouterr().err
    assert main(["notices", "escalate", lower, "--note", "x", "--by", "Town", "--reason", "r", *args]) == 2
    capsys.readouterr()
    assert (
        main(
            [
                "notices",
                "escalate",
                lower,
                "--note",
                "Third this year",
                "--by",
                "Town",
                "--before-deadline",
                "--reason",
                "repeat violations",
                *args,
            ]
        )
        == 0
    )
    assert f"Citation recommended (section 13.3.B) on notice {recent}" in capsys.readouterr().out
    assert run_cli(["notices", "extend", recent, "--days", "0", "--by", "Town", *args]) == 2
    assert "argument --days: must be at least 1, got 0" in capsys.readouterr().err


def test_the_book_holds_every_front_end_to_the_extension_bound(store: Store, config: Config) -> None:
    """The bound is the book's (the portal and the CLI check it first, with the same words): more
    days than MAX_EXTRA_DAYS, asked for or granted, by a number or a date, is refused unwritten."""
    from rules.deadlines import MAX_EXTRA_DAYS

    notice_id = open_notice(store, config, ISSUED)
    book = NoticeBook(store)
    later = ISSUED + timedelta(days=1)
    with pytest.raises(NoticeError, match=f"must be at most {MAX_EXTRA_DAYS}, got {MAX_EXTRA_DAYS + 1}"):
        book.request_extension(notice_id, "need time", "Acme", later, requested_days=MAX_EXTRA_DAYS + 1)
    with pytest.raises(NoticeError, match=f"must be at most {MAX_EXTRA_DAYS}, got {MAX_EXTRA_DAYS + 1}"):
        book.extend(notice_id, None, "Town", "", later, extra_days=MAX_EXTRA_DAYS + 1)
    with pytest.raises(NoticeError, match=f"at most {MAX_EXTRA_DAYS} days"):
        book.extend(notice_id, DEADLINE + timedelta(days=MAX_EXTRA_DAYS + 1), "Town", "", later)
    assert [c.change for c in book.history(notice_id)] == ["opened"]
    book.extend(notice_id, DEADLINE + timedelta(days=MAX_EXTRA_DAYS), "Town", "", later)
    assert book.get(notice_id).deadline == DEADLINE + timedelta(days=MAX_EXTRA_DAYS)


def test_cli_extends_by_days_or_to_a_date_within_the_bound(
    db: Path, config: Config, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`notices extend --days N` (it once failed on the absent --until), and the bound of
    MAX_EXTRA_DAYS on --days, on a request's --days and on a date given with --until: each
    refusal one line, exit 2, nothing written."""
    from rules.deadlines import MAX_EXTRA_DAYS

    path = tmp_path / "minewatch.toml"
    path.write_text(config.raw_text)
    args = ["--config", str(path)]
    store = Store(db)
    try:
        recent = open_notice(store, config, datetime.now(UTC) - timedelta(hours=1))
        deadline = NoticeBook(store).get(recent).deadline
    finally:
        store.close()
    capsys.readouterr()
    extend = ["notices", "extend", recent, "--by", "Town", *args]
    assert run_cli([*extend, "--days", "7", "--note", "parts on order"]) == 0
    out = capsys.readouterr().out
    assert (
        out.startswith(f"Notice {recent}: the Town extended the cure deadline to ") and "7 more days" in out
    )
    for argv in (
        [*extend, "--days", str(MAX_EXTRA_DAYS + 1)],
        [
            "notices",
            "request-extension",
            recent,
            "--explanation",
            "x",
            "--days",
            "99999999999",
            "--by",
            "A",
            *args,
        ],
    ):
        assert run_cli(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"argument --days: must be at most {MAX_EXTRA_DAYS}, got" in err
    far = (deadline + timedelta(days=7 + MAX_EXTRA_DAYS + 2)).astimezone(TZ).date().isoformat()
    assert run_cli([*extend, "--until", far]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"an extension grants at most {MAX_EXTRA_DAYS} days" in err
    store = Store(db)
    try:
        assert [c.change for c in NoticeBook(store).history(recent)] == ["opened", "extended"]
    finally:
        store.close()


def test_cli_refuses_changes_before_a_notice_issued_later_than_now(
    db: Path, config: Config, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A notice issued tomorrow (a simulated day ahead of the clock) cannot be closed today."""
    from monitor.cli import main

    path = tmp_path / "minewatch.toml"
    path.write_text(config.raw_text)
    store = Store(db)
    try:
        ahead = open_notice(store, config, datetime.now(UTC) + timedelta(days=1))
    finally:
        store.close()
    capsys.readouterr()
    assert main(["notices", "close", ahead, "--note", "ok", "--by", "Town", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "before it" in err and "Traceback" not in err


def test_a_closing_or_an_escalation_needs_the_towns_words(
    db: Path, config: Config, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--note ""` closed a notice as corrected with nothing on its record of what was found."""
    from monitor.cli import main

    path = tmp_path / "minewatch.toml"
    path.write_text(config.raw_text)
    store = Store(db)
    try:
        notice_id = open_notice(store, config, ISSUED)
        with pytest.raises(NoticeError, match="closing it needs the Town's note"):
            NoticeBook(store).close(notice_id, " ", "Town", ISSUED + timedelta(days=1))
    finally:
        store.close()
    capsys.readouterr()
    for action, why in (("close", "what was found corrected"), ("escalate", "why a citation follows")):
        argv = ["notices", action, notice_id, "--note", "  ", "--by", "Town", "--config", str(path)]
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"minewatch notices {action}: notice {notice_id}: ") and err.count("\n") == 1
        assert why in err
    store = Store(db)
    try:
        assert [c.change for c in NoticeBook(store).history(notice_id)] == ["opened"]
    finally:
        store.close()


def test_an_episode_told_minute_by_minute_has_the_facts_of_its_findings_told_at_once(
    db: Path, config: Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each minute an episode grows, its notice tells the facts carried from the last minute with
    the new finding added (rules.episodes.EpisodeFold, kept in the store), reading no finding back
    (issue 31); they must be the facts of every current finding of the episode folded at once
    (rules.episodes.episode_facts), through a revised minute, a merge of two episodes, a restart,
    a retracted minute and an episode extended backwards."""
    site, profile = site_and_profile(config)
    t = local(2026, 6, 15, 11, 30)
    store = Store(db)
    book = NoticeBook(store)
    read_back: list[int] = []

    def spy(book: NoticeBook) -> None:  # counts the findings the book reads back from the store
        real = book._findings_of

        def findings_of(ids: Sequence[str], given: Mapping[str, Mapping[str, Any]]) -> list[Any]:
            read_back.append(len(ids))
            return real(ids, given)

        monkeypatch.setattr(book, "_findings_of", findings_of)

    def minute(i: int, value: float = 84.2, **details: Any) -> Finding:
        f = violation(t + timedelta(minutes=i), value=value, completeness=1.0 - (i % 3) / 7)
        start = f.start + timedelta(seconds=i % 5)
        return replace(
            f,
            refs=(f"sound:n1:{i}", f"truck:t-{i % 4}", f"weather:w-{i}"),
            exemptions=(f"haul truck truck-{i % 2}",) if i % 4 == 0 else (),
            details={
                **f.details,
                "weather_affected_s": float(i % 3) / 3,
                "window_start": start.isoformat(),
                "window_end": (start + timedelta(minutes=1)).isoformat(),
                "considered": [f"p{i % 3}", "p9"],
                **details,
            },
        )

    def feed(findings: list[Finding], at_minute: int) -> None:
        now = t + timedelta(minutes=at_minute)
        store_findings(store, findings, now)
        with store.batch():
            book.on_findings(site, profile, findings, now)

    def told_at_once() -> None:
        """Every open episode's notice facts against its current findings folded at once."""
        working = book._load_working(SITE)
        assert working
        for w in working.values():
            rows = queries.current_findings(store.conn, ids=list(w.episode.finding_ids))
            expected = facts_json(
                episode_facts(w.episode, [finding_from_json(json.loads(r["data"])) for r in rows]),
                site.timezone,
                site,
            )
            told = json.loads(
                store.conn.execute(
                    "SELECT data FROM notice_episodes WHERE episode_id = ? ORDER BY revision DESC LIMIT 1",
                    (w.episode.id,),
                ).fetchone()[0]
            )
            assert told == json.loads(canonical_text(expected))

    spy(book)
    feed([minute(0), minute(1, 86.0)], 2)  # a new episode: folded from the findings given
    for i in range(2, 5):
        feed([minute(i, 85.0 + i / 10, run_start=(t - timedelta(seconds=40 * i)).isoformat())], i + 1)
        told_at_once()
    assert read_back == []  # grown minute by minute: nothing read back

    feed([minute(1, 91.5)], 6)  # minute 1 re-judged with late data (a revision): the peak moves
    assert read_back == [5]
    told_at_once()
    assert json.loads(canonical_text(book.get("DOV-2026-0001").episodes[0].facts))["worst"]["value"] == 91.5

    feed([minute(15), minute(16, 88.0)], 17)  # more than episode_gap_s later: a second episode
    assert len(book.get("DOV-2026-0001").episodes) == 2
    told_at_once()
    feed([minute(10, 83.0)], 18)  # within episode_gap_s of both: one episode, told again
    assert read_back == [5, 8]
    [merged] = [e for e in book.get("DOV-2026-0001").episodes if e.start == t]
    assert merged.facts["findings"] == 8
    told_at_once()

    store.close()
    store = Store(db)  # a restart: the facts so far are in the store
    book = NoticeBook(store)
    spy(book)
    for i in (17, 18):
        feed([minute(i, 82.0)], i + 2)
        told_at_once()
    assert read_back == [5, 8]

    gone = minute(16, 88.0)  # minute 16 re-judged: no longer a violation (its finding withdrawn)
    with store.batch():
        assert store.append_finding(gone, t + timedelta(minutes=21), retracted=True)
        book.on_retracted(SITE, gone.id)
    feed([minute(19, 81.0)], 21)  # the episode grows: told from its findings as they are now
    assert read_back == [5, 8, 11]
    told_at_once()
    feed([minute(20, 81.5)], 22)
    assert read_back == [5, 8, 11]
    told_at_once()

    feed([minute(-2, 95.0)], 23)  # late data before the episode: a new id, replacing the old one
    assert read_back == [5, 8, 11, 13]
    [extended] = [e for e in book.get("DOV-2026-0001").episodes if e.facts["findings"] == 13]
    assert extended.start == t - timedelta(minutes=2) and extended.facts["worst"]["value"] == 95.0
    told_at_once()
    store.close()


@pytest.mark.parametrize(
    ("typed", "said"),
    [
        ("-3", "must be at least 1, got -3"),
        ("+5", "expected a whole number, got '+5'"),
        ("\u0663", "expected a whole number, got '\u0663'"),  # an Arabic-Indic 3
        ("0", "must be at least 1, got 0"),
        ("9" * 30, "must be at most 3650, got a number of 30 digits"),
        ("2.5", "expected a whole number, got '2.5'"),
    ],
)
def test_the_cli_reads_days_as_the_portal_does(
    config: Config, tmp_path: Path, capsys: pytest.CaptureFixture[str], typed: str, said: str
) -> None:
    """One reading of a notice's days (monitor/times.extra_days): the CLI took int()'s, so '+5'
    and another script's digits were days there and not on the portal, and '-3' was worded
    otherwise. The portal's words are tests/monitor/portal/test_request_limits.py's."""
    path = tmp_path / "minewatch.toml"
    path.write_text(config.raw_text)
    for action in (["extend", "DOV-2026-0001"], ["request-extension", "DOV-2026-0001", "--explanation", "x"]):
        argv = ["notices", *action, f"--days={typed}", "--by", "Town", "--config", str(path)]
        assert run_cli(argv) == 2
        assert f"argument --days: {said}" in capsys.readouterr().err


FERNHILL_PATH = str(Path(__file__).parents[2] / "data" / "profiles" / "fernhill.toml")

# The early-escalation refusal cites the citation section of the notice's own profile ([notice]
# consequence_section), as recorded when the notice was issued: Dovre 13.3.B, Fernhill § 9.1(b).
# fmt: off
EARLY_REFUSAL_CASES = [
    pytest.param("dovre", "6.D", "a citation (section 13.3.B) follows", id="dovre-13.3.B"),
    pytest.param(FERNHILL_PATH, "§ 4.2", "a citation (§ 9.1(b)) follows", id="fernhill-§9.1(b)"),
]
# fmt: on


@pytest.mark.parametrize(("profile_name", "section", "said"), EARLY_REFUSAL_CASES)
def test_an_early_escalation_is_refused_citing_the_profiles_citation_section(
    store: Store, config: Config, profile_name: str, section: str, said: str
) -> None:
    site, _ = site_and_profile(config)
    profile = load_profile(profile_name)
    start = ISSUED - timedelta(minutes=2)
    finding = replace(violation(start), section=section)
    [opened] = NoticeBook(store).on_findings(site, profile, store_findings(store, [finding], ISSUED), ISSUED)
    with pytest.raises(InvalidTransition) as refused:
        NoticeBook(store).escalate(opened.notice_id, "not corrected", "Town", ISSUED + timedelta(days=1))
    assert said in str(refused.value)
    if profile_name != "dovre":
        assert "13.3" not in str(refused.value)


def _episode_at(
    db: Path, config: Config, issued: datetime, until: datetime | None, at: datetime
) -> tuple[datetime, str]:
    """The deadline of a notice issued at ``issued`` (extended to ``until`` if given), and the
    change a new violation starting at ``at`` makes to it."""
    site, profile = site_and_profile(config)
    store = Store(db)
    try:
        notice_id = open_notice(store, config, issued)
        book = NoticeBook(store)
        if until is not None:
            book.extend(notice_id, until, "Town clerk", "", issued + timedelta(days=1))
        events = book.on_findings(
            site, profile, store_findings(store, [violation(at)], at), at + timedelta(minutes=2)
        )
        return book.get(notice_id).deadline, events[0].change
    finally:
        store.close()


def test_a_deadline_extended_to_a_date_ends_as_one_counted_to_it(tmp_path: Path, config: Config) -> None:
    """`notices extend --until 2026-06-29` set 23:59:59 while the deadline 13.3.A counts to that
    day ends at 23:59:59.999, so a violation at 23:59:59.5 escalated the extended notice and only
    continued the counted one. One end of the day: the same deadline, the same change. A deadline
    stored at 23:59:59 (an extension made before) is judged as stored: it has passed by then."""
    from monitor.commands.notices import parse_until

    at = local(2026, 6, 29, 23, 59, 59) + timedelta(milliseconds=500)
    counted = _episode_at(tmp_path / "counted.db", config, ISSUED, None, at)
    until = parse_until("2026-06-29", "America/Chicago")
    extended = _episode_at(tmp_path / "extended.db", config, ISSUED - timedelta(days=7), until, at)
    assert counted == extended == (DEADLINE, "continuing")
    stored = local(2026, 6, 29, 23, 59, 59)
    assert _episode_at(tmp_path / "stored.db", config, ISSUED - timedelta(days=7), stored, at) == (
        stored,
        "escalated",
    )
