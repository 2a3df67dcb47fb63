"""`minewatch status --config FILE`: the retained status message, computed from the store, and
the outputs' backlogs: each site's deliveries (pending, failing with their last error,
undeliverable) and the InfluxDB outbox (points queued, the oldest's time, points rejected) with
the forwarder's state as the daemon recorded it (writing, or not since when and why; how old it
is when no daemon has reported for a while: one killed outright leaves its last state)."""

from __future__ import annotations

import argparse
import json
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from monitor.commands.store_file import existing_store
from monitor.config import Config, load_config, site_profile_problems
from monitor.errors import ConfigError, UsageError
from monitor.shown_text import one_line
from monitor.shown_url import shown_url
from monitor.times import FORMS, parse_time

if TYPE_CHECKING:
    from monitor.journal.store import Store
    from monitor.wire.link_state import LinkState


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, help="configuration TOML file")
    parser.add_argument("--at", metavar="TIME", help=f"status as of this time ({FORMS}; default: now)")
    parser.add_argument("--format", choices=("text", "json"), default="text")


def _when(text: str | None, config: Config) -> datetime:
    if text is None:
        return datetime.now(UTC)
    zones = sorted({site.timezone for site in config.sites})
    parsed = parse_time(text, ZoneInfo(zones[0]), "--at")  # no offset: the site's local time
    # With sites in several zones, a time without an offset does not say whose.
    if len(zones) > 1 and parse_time(text, ZoneInfo(zones[1]), "--at") != parsed:
        raise UsageError(f"--at {text!r}: the sites are in different time zones; add an offset, e.g. Z")
    now = datetime.now(UTC)
    if parsed > now:  # the store holds nothing yet to say of it: a status as of then would be made up
        raise UsageError(
            f"--at {text!r}: a time after now ({now.isoformat(timespec='seconds')}); give a time"
            " already past, or leave --at out for now"
        )
    return parsed


def run(args: argparse.Namespace) -> int:
    from monitor.daemon.site_status import site_status
    from monitor.influx.forwarder_record import META_KEY as FORWARDER_KEY
    from monitor.influx.forwarder_record import ForwarderRecord
    from monitor.journal.store import Store
    from monitor.wire.link_state import META_KEY, LinkState
    from rules.profile import ProfileError, episode_gap_of, standard_titles_of
    from rules.times import local_moment

    # Reads the store only: secrets (the broker's password) are not needed here, nor the
    # profiles (check-config and the daemon check them; loading one imports every rule).
    config = load_config(args.config, secrets="defer", profiles=False)
    now = _when(args.at, config)
    existing_store(config.storage.path, args.config)
    gaps: dict[str, float] = {}
    titles: dict[str, dict[str, str]] = {}
    for index, site in enumerate(config.sites):
        try:
            gaps[site.id] = episode_gap_of(site.profile, site.agreement)
            titles[site.id] = standard_titles_of(site.profile)
        except ProfileError as exc:
            problems = site_profile_problems(f"sites[{index}]", exc.problems, site.agreement)
            raise ConfigError(problems) from None
    store = Store(config.storage.path)
    try:
        statuses = [
            site_status(store, site, now, episode_gap_s=gaps[site.id], titles=titles[site.id])
            for site in config.sites
        ]
        for status in statuses:  # resends that contradicted a kept reading, since the store began
            conflicts = store.conflict_counts(status["site"])
            for sensor, entry in status["sensors"].items():
                entry["conflicts"] = conflicts.get(sensor, 0)
        for status in statuses:
            status["deliveries"] = _deliveries(store, status["site"], now)
        outbox = _outbox(store)
        forwarder = ForwarderRecord.from_json(store.meta(FORWARDER_KEY))  # written by the daemon
        link = LinkState.from_json(store.meta(META_KEY))  # written by the daemon
        links = _worker_links(store, config)
    finally:
        store.close()
    wall = datetime.now(UTC)  # the records' ages are by the wall clock, whatever --at says
    # The forwarder runs in the leader (worker 1 of several): whether it still reports is told
    # by that process's broker link record, the one record a running daemon refreshes.
    leader = next(iter(links.values()))[1] if links else link
    silent = leader.silent_since(wall) if leader is not None else None
    if args.format == "json":
        for status in statuses:
            status["influx_outbox"] = outbox  # the store's, beside each site as broker_link is
            if forwarder is not None:
                status["influx_forwarder"] = {
                    **forwarder.to_dict(),
                    "current": forwarder.current(silent),
                    "daemon_silent_since": silent.isoformat() if silent is not None else None,
                }
            if link is not None:
                status["broker_link"] = json.loads(link.to_json())
            for worker, (sites, state) in links.items():
                if status["site"] in sites:
                    status["worker"] = worker
                    if state is not None:
                        status["broker_link"] = json.loads(state.to_json())
        print(json.dumps(statuses, indent=2))
        return 0
    if link is not None and not links:
        print(link.describe(wall))
    space = store_space(config.storage.path, shutil.disk_usage(Path(config.storage.path).parent).free)
    if space is not None:
        print(space)
    if config.storage.influxdb is not None or outbox["queued"] or outbox["rejected"]:
        print(_outbox_line(outbox))
    if forwarder is not None and config.storage.influxdb is not None:
        print(one_line(forwarder.describe(wall, silent)))  # the server's words may be in it
    for worker, (sites, state) in links.items():
        seen = state.describe(wall) if state is not None else "not reported yet"
        print(f"worker {worker} ({', '.join(sites)}): {seen}")
    for status in statuses:
        print(f"{status['name']} ({status['site']}) at {status['ts_local']} ({status['ts']})")
        # Columns as wide as the longest id and kind (a seismograph's kind is 11 letters), at least 8.
        id_width = max([8, *(len(sensor) for sensor in status["sensors"])])
        kind_width = max([8, *(len(entry["kind"]) for entry in status["sensors"].values())])
        for sensor, entry in status["sensors"].items():
            level = f"  LAeq,1min {entry['LAeq_1min_text']}" if "LAeq_1min_text" in entry else ""
            level += f"  conflicts {entry['conflicts']}" if entry["conflicts"] else ""
            last = entry["last_ts"]
            seen = local_moment(last, status["timezone"]) or "never"
            print(f"  {sensor:<{id_width}} {entry['kind']:<{kind_width}} last data {seen}{level}")
        kinds = ", ".join(f"{k}: {n}" for k, n in status["findings_24h"].items()) or "none"
        print(f"  findings (judged windows) in the last 24 h: {kinds}")
        if status["episodes_24h"]:
            print("  violation episodes in the last 24 h:")
        for episode in status["episodes_24h"]:
            print(f"  - {one_line(episode['text'])}")  # may quote the operator's words
        for line in _notice_lines(status["notices"]):
            print(line)
        for line in _delivery_lines(status["deliveries"], status["timezone"]):
            print(line)
    return 0


def _notice_lines(notices: list[dict[str, Any]]) -> list[str]:
    """The notices not closed, each with its deadline as the notice states it."""
    return (["  notices not closed:"] if notices else []) + [f"  - {n['text']}" for n in notices]


FAILURES_SHOWN = 20  # failing deliveries listed per site (the counts hold them all)


def _deliveries(store: Store, site: str, now: datetime) -> dict[str, Any]:
    """A site's deliveries as `status` shows them: counts, and the failing ones (a webhook's URL
    as ``shown_url`` shows it; whether a sender holds it now)."""
    from monitor.journal import queries
    from monitor.wire.canonical import from_us, to_us
    from monitor.wire.protocol import format_ts

    counts = queries.delivery_counts(store.conn, site, to_us(now - timedelta(hours=24)))
    wall_us = to_us(datetime.now(UTC))  # claims are by the wall clock, whatever --at says
    failures = [
        {
            "id": row["id"],
            "recipient": row["recipient"],
            "channel_type": row["channel_type"],
            "target": shown_url(row["target"]) if row["channel_type"] == "webhook" else row["target"],
            "attempts": row["attempts"],
            "next_try": format_ts(from_us(row["next_us"])),
            "last_error": row["last_error"],
            "sending": row["claim_owner"] if row["claim_until_us"] > wall_us else None,
        }
        for row in queries.failing_deliveries(store.conn, site, FAILURES_SHOWN)
    ]
    return {
        "pending": counts.pending,
        "failing": counts.failing,
        "undeliverable_24h": counts.undeliverable,
        "failures": failures,
    }


def _outbox(store: Store) -> dict[str, Any]:
    from monitor.journal import queries

    state = queries.influx_outbox(store.conn)
    return {"queued": state.queued, "oldest_queued": state.oldest_queued, "rejected": state.rejected}


def _outbox_line(outbox: dict[str, Any]) -> str:
    queued = (
        f"{outbox['queued']:,} point(s) queued, the oldest since {outbox['oldest_queued']}"
        if outbox["queued"]
        else "nothing queued"
    )
    return f"InfluxDB outbox: {queued}; {outbox['rejected']:,} point(s) rejected"


def _delivery_lines(deliveries: dict[str, Any], timezone: str) -> list[str]:
    from rules.times import local_moment

    counts = (
        f"  deliveries: {deliveries['pending']} pending, {deliveries['failing']} of them failing,"
        f" {deliveries['undeliverable_24h']} undeliverable in the last 24 h"
    )
    lines = [counts]
    for failure in deliveries["failures"]:
        when = local_moment(failure["next_try"], timezone)
        now = f", being sent by {failure['sending']}" if failure["sending"] else f", next try {when}"
        lines.append(
            f"  - {failure['recipient']} by {failure['channel_type']} ({one_line(failure['target'])}):"
            f" {failure['attempts']} attempt(s){now}: {one_line(failure['last_error'])}"
        )
    if deliveries["failing"] > len(deliveries["failures"]):
        lines.append(f"  - and {deliveries['failing'] - len(deliveries['failures'])} more failing")
    return lines


# Below this much free space on the store's disk, `status` says so: SQLite needs room for the
# WAL's new frames, and a full disk stops the daemon's storing (docs/DEPLOY.md, section 5).
LOW_SPACE_BYTES = 64 * 1024 * 1024
FULL_BYTES = 1024 * 1024


def store_space(path: str, free: int) -> str | None:
    """A line about the store's disk when it is low on space (``free`` bytes), else None."""
    if free >= LOW_SPACE_BYTES:
        return None
    if free < FULL_BYTES:
        return (
            f"store {path}: its disk is full ({free:,} bytes free): the daemon stores nothing and"
            " what arrives waits at the broker until there is space"
        )
    mib = free / (1024 * 1024)
    return f"store {path}: only {mib:.0f} MiB free on its disk; the daemon stops storing when it is full"


def _worker_links(store: Store, config: Config) -> dict[str, tuple[tuple[str, ...], LinkState | None]]:
    """Each worker's sites and broker link as it wrote it (daemon.workers > 1); {} for one process."""
    from monitor.daemon.workers import Partition, worker_count
    from monitor.wire.link_state import LinkState

    count = worker_count(config)
    if count == 1:
        return {}
    links: dict[str, tuple[tuple[str, ...], LinkState | None]] = {}
    for index in range(1, count + 1):
        part = Partition(index, count)
        links[part.name] = (part.sites(config), LinkState.from_json(store.meta(part.link_key)))
    return links
