"""The `minewatch` command line: one subcommand per module in monitor/commands/.

Each command module exposes ``add_arguments(parser)`` and ``run(args) -> int``;
they are imported only when chosen, so ``minewatch --help`` stays fast.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import io
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from monitor import __version__
from monitor.daemon.stopping import hold_stop_signals
from monitor.errors import ConfigError, StoreError, UsageError
from monitor.unfinished import exit_on_sigterm

# name -> (module under monitor.commands, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "check-config": ("check_config", "validate a configuration file and list every problem"),
    "check-topics": (
        "check_topics",
        "listen at the broker and name the topics the daemon never receives or rejects (installation)",
    ),
    "run": ("run", "run the daemon: MQTT in, store, rules, InfluxDB and alerts out"),
    "status": ("status", "last minute per sensor and recent findings, from the store"),
    "levels": ("levels", "sound levels per period from a WAV recording"),
    "sensor": ("sensor", "edge publisher for one sensor (sound, light, seismograph), store and forward"),
    "simulate": ("simulate", "play a simulated day at a quarry through the broker"),
    "notices": (
        "notices",
        "notices of violation: list, show (md/html/json/pdf), request-extension, extend, serve, close,"
        " escalate",
    ),
    "influx": ("influx", "the points InfluxDB refused: list them by reason, or queue them again (requeue)"),
    "evidence": ("evidence", "export a window of the record as a self-verifying evidence bundle (zip)"),
    "report": ("report", "a site's compliance report for a month, a day or a span of days (PDF and CSV)"),
    "report-blast": (
        "report_blast",
        "one blast's report (PDF/HTML): waveforms, limit curve, clock",
    ),
    "verify": (
        "verify",
        "check an evidence bundle (or a report's files) against the chain and the anchors the town holds",
    ),
    "serve": ("serve", "the web portal for the operator, the Town and its inspectors, and its JSON API"),
    "hash-password": ("hash_password", "hash a portal password (or make an API token) for the configuration"),
    "demo": ("demo", "simulated site, real broker, daemon, notices and evidence, in one command"),
}


class Parser(argparse.ArgumentParser):
    """argparse with a one-line error: what is wrong and where help is (no usage block)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.subcommands: tuple[str, dict[str, argparse.ArgumentParser]] | None = None  # dest, name -> parser
        self.subcommand_metavar = "ACTION"  # how help names the subcommand (sensor: KIND)

    def add_subparsers(self, **kwargs: Any) -> Any:
        action = super().add_subparsers(**kwargs)
        self.subcommands = (kwargs["dest"], action.choices)
        self.subcommand_metavar = kwargs.get("metavar") or kwargs["dest"].upper()
        return action

    def chosen(self, args: argparse.Namespace) -> argparse.ArgumentParser:
        """The innermost (sub)command's parser, whose prog names it: `minewatch notices list`."""
        if self.subcommands is None:
            return self
        dest, parsers = self.subcommands
        sub = parsers.get(getattr(args, dest, None) or "")
        if sub is None:
            return self
        return sub.chosen(args) if isinstance(sub, Parser) else sub

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def build_parser(only: str | None = None) -> Parser:
    parser = Parser(
        prog="minewatch",
        description=(
            "Compliance monitor for nonmetallic mines: noise, blasting and lighting against a town ordinance."
        ),
    )
    parser.add_argument("--version", action="version", version=f"minewatch {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (module, help_text) in COMMANDS.items():
        if only in COMMANDS and only != name:
            continue  # a command was named: its parser alone (the others only list in --help)
        command = sub.add_parser(name, help=help_text, description=help_text)
        if only is None or only == name:
            importlib.import_module(f"monitor.commands.{module}").add_arguments(command)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = list(sys.argv[1:] if argv is None else argv)
        # First: SIGTERM while the chosen command's modules loaded (a quarter of a second for
        # evidence's) ended the process by its default action. A command ends with exit 143, its
        # unfinished output removed, but for those that stop on SIGTERM in their own way (sensor,
        # simulate and demo drain and close the broker's session) once their handler is in.
        # The daemon's SIGTERM and SIGINT are noted from here (`minewatch run ...`, the command
        # first) and taken by its handler: a stop while it starts is a clean stop, exit 0; before
        # this its modules loaded (the configuration's, some 70 ms) and a SIGTERM ended it with
        # 143 and no line (monitor.daemon.stopping, imported above for this).
        if args[:1] == ["run"]:
            hold_stop_signals()
        else:
            exit_on_sigterm()
        return _main(args)
    except KeyboardInterrupt:  # also while the chosen command's modules load
        return 130


def _main(argv: list[str]) -> int:
    for at, arg in enumerate(argv, 1):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:  # bytes the locale could not decode, kept as surrogates
            shown = arg.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
            return _fail("minewatch", f"argument {at} ({shown}) is not UTF-8 text: write it in UTF-8")
    if len(argv) > 1 and argv[0].startswith("-") and argv[0] not in ("-h", "--help", "--version"):
        # `minewatch --config F status`: the option's value was taken for the command's name.
        commands = [a for a in argv if a in COMMANDS]
        where = f"minewatch {commands[0]} {argv[0]} ..." if commands else f"minewatch COMMAND {argv[0]} ..."
        return _fail("minewatch", f"{argv[0]}: give the command first, then its options: {where}")
    chosen = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(only=chosen or "")
    if misplaced := _option_before_action(parser, argv):
        return _fail(f"minewatch {argv[0]}", misplaced)
    args, extra = parser.parse_known_args(argv)
    chosen_parser = parser.chosen(args)  # its errors name the command: "minewatch notices list: ..."
    if extra:
        chosen_parser.error(f"unrecognized arguments: {' '.join(extra)}")
    from monitor.process_settings import tune_process

    tune_process()
    # A character no encoding of the terminal holds (half a UTF-16 pair from someone's JSON, a
    # name in a script the locale lacks) is printed as its escape, not a UnicodeEncodeError.
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")
    module = importlib.import_module(f"monitor.commands.{COMMANDS[args.command][0]}")
    # The commands report their own errors; these are the user's mistakes they let through,
    # as one line and exit 2 instead of a traceback.
    name = chosen_parser.prog
    try:
        code: int = module.run(args)
        sys.stdout.flush()  # here, where a full disk is told in one line, not at exit
    except UsageError as exc:
        return _fail(name, str(exc))
    except ConfigError as exc:
        return _fail(name, "\n".join(exc.problems))
    except StoreError as exc:  # storage.path is no minewatch store (a TOML, a random file)
        config = getattr(args, "config", None)
        return _fail(name, f"{exc} (storage.path in {config})" if config else str(exc))
    except BrokenPipeError:
        # The reader went away (`minewatch verify x.zip | head`): what it wanted was written.
        # Point stdout at /dev/null so the interpreter's final flush does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as exc:
        if exc.filename is None and exc.errno in _WRITE_REFUSED:  # stdout's disk: `> /dev/full`
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nor again at exit
            print(f"{name}: cannot write the output: {exc.strerror}", file=sys.stderr)
            return 1
        if exc.filename is None:
            raise
        return _fail(name, f"{exc.filename}: {exc.strerror or exc}")
    return code


_WRITE_REFUSED = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO})


def _option_before_action(parser: Parser, argv: list[str]) -> str | None:
    """`minewatch notices --config F show ...`: argparse took the option's value for the action's
    name ("invalid choice: 'F'"); said as the command-level slip is, naming the order to use."""
    if len(argv) < 2 or not argv[1].startswith("-") or argv[1] in ("-h", "--help"):
        return None
    command = parser.subcommands[1].get(argv[0]) if parser.subcommands else None
    if not isinstance(command, Parser) or command.subcommands is None:
        return None
    named = command.subcommand_metavar
    actions = [a for a in argv[2:] if a in command.subcommands[1]]
    where = f"minewatch {argv[0]} {actions[0] if actions else named} {argv[1]} ..."
    return f"{argv[1]}: give the {named.lower()} first, then its options: {where}"


def _fail(name: str, message: str) -> int:
    print(f"{name}: {message}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
