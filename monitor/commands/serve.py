"""``minewatch serve --config FILE``: the web portal, a process of its own beside the daemon.

It reads the store (SQLite WAL readers), publishes operator events to the broker (the daemon
journals them) and writes notice changes and its own action records in small transactions.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

from monitor.errors import UsageError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, help="configuration TOML file with a [portal] section")
    parser.add_argument("--bind", help="address to listen on (default: portal.bind, 127.0.0.1)")
    parser.add_argument("--port", type=int, help="port (default: portal.port, 8080)")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    import uvicorn

    from monitor.config import load_config
    from monitor.portal.app import create_app
    from monitor.portal.broker import Publisher
    from monitor.portal.data import Portal

    config = load_config(args.config)
    pc = config.portal
    if not pc.accounts:
        raise UsageError(f"{args.config}: no [[portal.accounts]]: add one (see docs/PORTAL.md)")
    if not Path(config.storage.path).is_file():
        raise UsageError(
            f"no store at {config.storage.path} (storage.path in {args.config}): start the daemon first"
        )
    broker = config.broker
    if pc.mqtt_username:
        broker = dataclasses.replace(broker, username=pc.mqtt_username, password=pc.mqtt_password)
    publisher = Publisher(broker, pc.mqtt_client_id)
    portal = Portal(config, publish=publisher.publish)
    app = create_app(config, portal)
    bind = args.bind or pc.bind
    port = args.port or pc.port
    scheme = "https" if pc.tls_cert else "http"
    print(f"minewatch portal on {scheme}://{bind}:{port}/", file=sys.stderr, flush=True)
    try:
        uvicorn.run(
            app,
            host=bind,
            port=port,
            ssl_certfile=pc.tls_cert or None,
            ssl_keyfile=pc.tls_key or None,
            log_level="warning",
            server_header=False,
        )
    finally:
        publisher.close()
    return 0
