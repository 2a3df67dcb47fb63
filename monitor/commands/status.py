"""`minewatch status --config FILE`: the retained status message, computed from the store."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime

from monitor.config import load_config
from monitor.errors import ConfigError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, help="configuration TOML file")
    parser.add_argument("--at", help="status as of this RFC 3339 time (default: now)")
    parser.add_argument("--format", choices=("text", "json"), default="text")


def run(args: argparse.Namespace) -> int:
    from monitor.linkstate import META_KEY, LinkState
    from monitor.pipeline import site_status
    from monitor.store import Store
    from monitor.wire import parse_ts

    try:
        config = load_config(args.config)
    except ConfigError as exc:
        print("\n".join(exc.problems), file=sys.stderr)
        return 2
    now = parse_ts(args.at) if args.at else datetime.now(UTC)
    store = Store(config.storage.path)
    try:
        statuses = [site_status(store, site, now) for site in config.sites]
        for status in statuses:  # resends that contradicted a kept reading, since the store began
            conflicts = store.conflict_counts(status["site"])
            for sensor, entry in status["sensors"].items():
                entry["conflicts"] = conflicts.get(sensor, 0)
        link = LinkState.from_json(store.meta(META_KEY))  # written by the daemon
    finally:
        store.close()
    if args.format == "json":
        if link is not None:
            for status in statuses:
                status["broker_link"] = json.loads(link.to_json())
        print(json.dumps(statuses, indent=2))
        return 0
    if link is not None:
        print(link.describe(datetime.now(UTC)))
    for status in statuses:
        print(f"{status['name']} ({status['site']}) at {status['ts']}")
        for sensor, entry in status["sensors"].items():
            level = f"  LAeq,1min {entry['LAeq_1min']} dB(A)" if "LAeq_1min" in entry else ""
            level += f"  conflicts {entry['conflicts']}" if entry["conflicts"] else ""
            print(f"  {sensor:<8} {entry['kind']:<8} last data {entry['last_ts'] or 'never'}{level}")
        kinds = ", ".join(f"{k}: {n}" for k, n in status["findings_24h"].items()) or "none"
        print(f"  findings in the last 24 h: {kinds}")
        for summary in status["violations_24h"]:
            print(f"  - {summary}")
    return 0
