"""``minewatch serve --config FILE``: the web portal, a process of its own beside the daemon.

It reads the store (SQLite WAL readers), publishes operator events to the broker (the daemon
journals them) and writes notice changes and its own action records in small transactions.
"""

from __future__ import annotations

import argparse
import dataclasses
import socket
import ssl
import sys
from typing import Any

from monitor.commands.numbers import whole
from monitor.errors import UsageError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, help="configuration TOML file with a [portal] section")
    parser.add_argument("--bind", help="address to listen on (default: portal.bind, 127.0.0.1)")
    parser.add_argument("--port", type=whole(1, 65535), help="port (default: portal.port, 8080)")


def _check_listen(bind: str, port: int) -> None:
    """A user's mistake (address in use, not this machine's) as one line, before the server starts."""
    family = socket.AF_INET6 if ":" in bind else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            probe.bind((bind, port))
        except OSError as exc:
            raise UsageError(
                f"cannot listen on {bind}:{port}: {exc.strerror or exc}; choose another --port or --bind"
            ) from None


def _check_tls(cert: str, key: str, config: str) -> None:
    """The certificate and key as uvicorn will load them, tried first: a missing, unreadable or
    mismatched file is one line naming the key, not a traceback from inside the server."""
    from monitor.named_file import NamedFileError, open_named_file

    for name, path in (("tls_cert", cert), ("tls_key", key)):
        try:
            open_named_file(path, "PEM file").close()
        except NamedFileError as exc:
            raise UsageError(f"portal.{name} in {config}: {exc}") from None

    def encrypted() -> bytes:
        raise UsageError(
            f"portal.tls_key in {config}: {key}: the key is encrypted; give the portal an unencrypted"
            " key (readable by its user alone)"
        )

    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(cert, key, password=encrypted)
    except ssl.SSLError as exc:
        why = (
            "the key does not belong to the certificate"
            if exc.reason == "KEY_VALUES_MISMATCH"
            else "not a PEM certificate and its private key"
        )
        raise UsageError(
            f"portal.tls_cert {cert} and portal.tls_key {key} in {config}: {why};"
            " give the certificate (chain) and the key that belongs to it"
        ) from None


def forwarded(trusted_proxies: tuple[str, ...]) -> dict[str, Any]:
    """uvicorn's settings for X-Forwarded-For/-Proto: believed only from ``trusted_proxies``.
    Without any, they are not read at all (uvicorn by default believes 127.0.0.1, and any
    local process could then choose the address the login limits and action records see)."""
    if not trusted_proxies:
        return {"proxy_headers": False, "forwarded_allow_ips": ""}
    return {"proxy_headers": True, "forwarded_allow_ips": list(trusted_proxies)}


def run(args: argparse.Namespace) -> int:

    import uvicorn

    from monitor.commands.store_file import writable_store
    from monitor.config import load_config
    from monitor.portal.app import create_app
    from monitor.portal.broker import Publisher
    from monitor.portal.connections import guarded
    from monitor.portal.data import Portal

    config = load_config(args.config)
    pc = config.portal
    if not pc.accounts:
        raise UsageError(f"{args.config}: no [[portal.accounts]]: add one (see docs/PORTAL.md)")
    # Missing, no database, another program's, or one this user cannot write: one line, before it listens.
    writable_store(config.storage.path, args.config)
    broker = config.broker
    if pc.mqtt_username:
        broker = dataclasses.replace(broker, username=pc.mqtt_username, password=pc.mqtt_password)
    publisher = Publisher(broker, pc.mqtt_client_id)
    portal = Portal(config, publish=publisher.publish)
    app = create_app(config, portal)
    bind = args.bind or pc.bind
    port = args.port or pc.port
    _check_listen(bind, port)
    if pc.tls_cert:
        _check_tls(pc.tls_cert, pc.tls_key, args.config)
    scheme = "https" if pc.tls_cert else "http"
    host = f"[{bind}]" if ":" in bind else bind  # an IPv6 address is bracketed in a URL
    print(f"minewatch portal on {scheme}://{host}:{port}/", file=sys.stderr, flush=True)
    try:
        uvicorn.run(
            app,
            host=bind,
            port=port,
            ssl_certfile=pc.tls_cert or None,
            ssl_keyfile=pc.tls_key or None,
            log_level="warning",
            server_header=False,
            http=guarded(pc.trusted_proxies),  # bounds uvicorn leaves open (connections.py)
            **forwarded(pc.trusted_proxies),
        )
    finally:
        publisher.close()
    return 0
