"""`minewatch check-config FILE` (or `--config FILE`): validate a configuration, print every problem.

A profile given by path that lacks a key the texts cite from (``[notice] more_time``,
``consequence_section``, ...) is valid, and each such key is said on one line of warning: the texts
then cite nothing there. So is a value still the deploy template's placeholder ("REPLACE with the
name of the officer ..."), which notices would print.

Exit status: 0 valid; 2 the configuration is invalid (every problem as ``path.to.key: reason``);
3 the configuration is valid but a secret it names is not available on this machine (an
environment variable not set, a secret file not readable): fix the machine, not the file.
"""

from __future__ import annotations

import argparse
import sys

from monitor.config import (
    PLACEHOLDER,
    SecretProblem,
    area_not_given,
    load_config,
    placeholder_warning,
    profile_citation_gaps,
    template_placeholders,
)
from monitor.errors import ConfigError, UsageError
from monitor.named_file import NamedFileError, open_named_file, read_named_text

EXIT_INVALID = 2
EXIT_SECRET_UNAVAILABLE = 3


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", nargs="?", metavar="FILE", help="configuration TOML file")
    parser.add_argument("--config", metavar="FILE", help="the same, as the other commands spell it")


def _file(args: argparse.Namespace) -> str:
    if args.file and args.config and args.file != args.config:
        raise UsageError(f"two files given ({args.file} and --config {args.config}); give one")
    file: str | None = args.file or args.config
    if not file:
        raise UsageError("which configuration? give FILE or --config FILE")
    try:  # no file to check is a usage error (exit 2), worded as load_config words it
        open_named_file(file, "configuration file").close()
    except NamedFileError as exc:
        raise UsageError(str(exc)) from None
    return file


def run(args: argparse.Namespace) -> int:
    file = _file(args)
    try:
        config = load_config(file)
    except ConfigError as exc:
        invalid = [p for p in exc.problems if not isinstance(p, SecretProblem)]
        secrets = [p for p in exc.problems if isinstance(p, SecretProblem)]
        for problem in invalid:
            print(problem, file=sys.stderr)
        if invalid:
            for problem in secrets:
                print(f"{problem} (a secret not available on this machine)", file=sys.stderr)
            print(f"{file}: invalid configuration, {len(invalid)} problem(s)", file=sys.stderr)
            return EXIT_INVALID
        for problem in secrets:
            print(problem, file=sys.stderr)
        # No configuration object when a secret is missing: the file is read again for its text.
        _warn_placeholders(file, read_named_text(file, "configuration file"))
        print(
            f"{file}: the configuration is valid, but {len(secrets)} secret(s) are not available on this"
            " machine; provide them before `minewatch run` (status, notices and evidence work without)",
            file=sys.stderr,
        )
        return EXIT_SECRET_UNAVAILABLE
    # The daemon would refuse it at start, said here in its words.
    from monitor.commands.store_file import daemon_refusal

    blocked = daemon_refusal(config.storage.path)
    if blocked is not None:
        print(f"storage.path: {blocked}", file=sys.stderr)
        print(f"{file}: invalid configuration, 1 problem(s)", file=sys.stderr)
        return EXIT_INVALID
    sensors = sum(len(s.sensors) for s in config.sites)
    influx = f"InfluxDB v{config.storage.influxdb.version}" if config.storage.influxdb else "no InfluxDB"
    print(
        f"{file}: OK ({len(config.sites)} site(s), {sensors} sensor(s), "
        f"store {config.storage.path}, {influx})"
    )
    # Valid all the same: a town may have no such section (then it writes the key as "").
    gaps = profile_citation_gaps(config.sites)
    for gap in gaps:
        print(f"warning: {gap}", file=sys.stderr)
    if gaps:
        print(
            f"{file}: {len(gaps)} citation key(s) not given; write each the ordinance has no section"
            ' for as "" (docs/CONFIG.md, "Another town")',
            file=sys.stderr,
        )
    for unjudged in area_not_given(config.sites):
        print(f"warning: {unjudged}", file=sys.stderr)
    _warn_placeholders(file, config.raw_text)
    return 0


def _warn_placeholders(file: str, text: str) -> None:
    """One line of warning a value of ``text`` still the deploy template's placeholder, and how many."""
    placeholders = template_placeholders(text)
    for key in placeholders:
        print(f"warning: {placeholder_warning(key)}", file=sys.stderr)
    if placeholders:
        print(
            f"{file}: {len(placeholders)} value(s) still to fill in before notices go out"
            f" (the deploy template's {PLACEHOLDER} text)",
            file=sys.stderr,
        )
