"""`minewatch notices ACTION --config FILE ...`: notices of violation (the profile's cure procedure).

    list                 notices, newest last (--site, --status, --format text|json)
    show ID              the notice (--format md|html|json|pdf, --out FILE)
    request-extension ID the operator's written explanation (--explanation, --days, --by)
    extend ID            a new cure deadline (--until DATE or --days N, --note, --by)
    serve ID             the Town served it on the operator (--on DATE or time, --by, --note):
                         the cure period counts again from then
    close ID             corrected (--note, --by)
    escalate ID          citation recommended (--note, --by); before the cure deadline only
                         with --before-deadline --reason TEXT (a citation follows a failure to correct)

Notice ids are matched without regard to case (dov-2026-0007 is DOV-2026-0007). A change
dated before the notice was issued is refused.

Changes are written to the store (and its hash chain) in one transaction; the daemon
announces them to the recipients on its next tick. Errors print one line and exit 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from monitor.commands.output_paths import format_named, new_file, write_whole
from monitor.commands.site_option import chosen_site
from monitor.commands.store_file import existing_store, writable_store
from monitor.config import Config, load_config
from monitor.errors import MinewatchError, UsageError
from monitor.shown_text import one_line
from monitor.times import day_given, end_of_day, extra_days, moment_on_or_after, parse_time

if TYPE_CHECKING:
    from monitor.journal.store import Store
    from monitor.notify.notices import NoticeBook

STATUSES = ("open", "extension_requested", "extended", "corrected", "escalated")


ACTIONS = {
    "list": "list notices",
    "show": "one notice as a document",
    "request-extension": (
        "record the operator's written explanation for more time (the profile's cure section)"
    ),
    "extend": "grant more time: a new cure deadline (the profile's cure section)",
    "serve": "record that the Town served it on the operator: the cure period counts from then",
    "close": "close as corrected",
    "escalate": "recommend a citation (the profile's citation section), after the cure deadline",
}
READS = frozenset({"list", "show"})  # the others change a notice: they write the store


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # The description names every action, so `notices --help` lists them all in one line too.
    parser.description = f"notices of violation: {', '.join(ACTIONS)}"
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", required=True, help="configuration TOML file (the store is storage.path)")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    listing = actions.add_parser("list", parents=[common], help=ACTIONS["list"])
    listing.add_argument("--site", help="only this site")
    listing.add_argument("--status", choices=STATUSES, help="only notices in this status")
    listing.add_argument("--format", choices=("text", "json"), default="text")

    show = actions.add_parser("show", parents=[common], help=ACTIONS["show"])
    show.add_argument("id", help="notice id, e.g. DOV-2026-0007")
    show.add_argument(
        "--format",
        choices=SHOW_FORMATS,
        help="md, html, json or pdf (default: the --out file's suffix, else md)",
    )
    show.add_argument(
        "--out",
        help="write to this file, which must not exist; its suffix .md, .html, .json or .pdf chooses"
        " the format (required for pdf unless stdout is redirected)",
    )
    show.add_argument("--force", action="store_true", help="replace the --out file if it exists")

    request = actions.add_parser("request-extension", parents=[common], help=ACTIONS["request-extension"])
    request.add_argument("id")
    request.add_argument("--explanation", required=True, help="why more time is needed and how much")
    request.add_argument("--by", required=True, type=_who, help="who asks (name, for the record)")
    request.add_argument("--days", type=_positive_days, help="how much more time is asked for, in days")

    extend = actions.add_parser("extend", parents=[common], help=ACTIONS["extend"])
    extend.add_argument("id")
    more = extend.add_mutually_exclusive_group(required=True)
    more.add_argument("--until", help="new deadline: a date (end of that day, site time) or an RFC 3339 time")
    more.add_argument(
        "--days",
        type=_positive_days,
        help="extra days: to the end of the site's local day this many days after the current deadline",
    )
    extend.add_argument("--note", default="", help="the Town's reason")
    extend.add_argument("--by", required=True, type=_who, help="who grants it")

    serve = actions.add_parser("serve", parents=[common], help=ACTIONS["serve"])
    serve.add_argument("id")
    serve.add_argument(
        "--on",
        required=True,
        help="when it was served: a date (that day, site time; not before the notice's issue) or a time",
    )
    serve.add_argument("--by", required=True, type=_who, help="who served it (name, for the record)")
    serve.add_argument("--note", default="", help="how it was served (by hand, certified mail, ...)")

    close = actions.add_parser("close", parents=[common], help=ACTIONS["close"])
    close.add_argument("id")
    close.add_argument("--note", required=True, help="what was found corrected")
    close.add_argument("--by", required=True, type=_who)

    escalate = actions.add_parser("escalate", parents=[common], help=ACTIONS["escalate"])
    escalate.add_argument("id")
    escalate.add_argument("--note", required=True)
    escalate.add_argument("--by", required=True, type=_who)
    escalate.add_argument(
        "--before-deadline",
        action="store_true",
        help="escalate although the cure deadline has not passed (needs --reason)",
    )
    escalate.add_argument("--reason", help="why the Town escalates before the cure deadline (recorded)")


SHOW_FORMATS = ("md", "html", "json", "pdf")
# The --out file's suffix -> the format written into it.
SHOW_SUFFIXES = {
    ".md": "md",
    ".html": "html",
    ".json": "json",
    ".pdf": "pdf",
    ".markdown": "md",
    ".htm": "html",
}


def show_format(given: str | None, out: str | None) -> str:
    """The format ``show`` writes: --format, else the --out file's suffix, else md. A suffix of
    no format it writes (Markdown was written into n.docx), or one --format contradicts
    (Markdown into n2.pdf), is refused."""
    if out is None:
        return given or "md"
    named = format_named(out, SHOW_SUFFIXES, bare=given or "md")
    if given is not None and named != given:
        raise UsageError(
            f"--format {given} and --out {out} disagree: give a matching suffix, or leave --format out"
        )
    return named


def _who(text: str) -> str:
    """--by: a name for the record (the notice book refuses a blank one as its "actor")."""
    if not text.strip():
        raise argparse.ArgumentTypeError("give the name of who made the change, for the record")
    return text


def _positive_days(text: str) -> int:
    try:
        return extra_days(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def parse_until(text: str, timezone: str) -> datetime:
    """'2026-07-20' -> the end of that day in the site's time zone; or a time (monitor.times)."""
    return end_of_day(text, ZoneInfo(timezone), "--until")


def run(args: argparse.Namespace) -> int:
    # Reads and writes the store only: secrets (the broker's password) are not needed here.
    config = load_config(args.config, secrets="defer")
    from monitor.journal.store import Store
    from monitor.notify.notices import NoticeBook

    if args.action in READS:
        existing_store(config.storage.path, args.config)
    else:  # a notice's change is recorded in its chain
        writable_store(config.storage.path, args.config)
    if args.action == "show":
        args.format = show_format(args.format, args.out)
    if args.action == "list" and args.site is not None:
        chosen_site(config, args.site)  # a site the configuration lacks: one line naming them
    out = new_file(args.out, force=args.force) if getattr(args, "out", None) else None

    store = Store(config.storage.path)
    try:
        book = NoticeBook(store)
        return _run(args, config, store, book, out)
    except MinewatchError as exc:
        print(f"minewatch notices {args.action}: {exc}", file=sys.stderr)
        return 2
    finally:
        store.close()


def _run(args: argparse.Namespace, config: Config, store: Store, book: NoticeBook, out: Path | None) -> int:
    from monitor.notify.formats import render_notice
    from monitor.wire.protocol import format_ts
    from rules.times import local_stamp

    now = datetime.now(UTC)
    if args.action == "list":
        notices = book.find(site=args.site, status=args.status)
        if args.format == "json":
            print(
                json.dumps(
                    [
                        {
                            "id": n.id,
                            "site": n.site,
                            "standard": n.standard,
                            "section": n.section,
                            "status": n.status,
                            "opened": format_ts(n.opened),
                            "deadline": format_ts(n.deadline),
                            "episodes": len(n.episodes),
                        }
                        for n in notices
                    ],
                    indent=2,
                )
            )
            return 0
        if not notices:
            print("No notices.")
        for n in notices:
            print(
                f"{n.id}  {n.site:<10} {n.section:<6} {n.status.replace('_', ' '):<20} "
                f"issued {local_stamp(n.opened, n.timezone)}  deadline {local_stamp(n.deadline, n.timezone)}"
                f"  {one_line(str(n.data.get('title', '')))}"  # may quote the operator's words
            )
        return 0
    if args.action == "show":
        document = render_notice(store.conn, args.id, args.format, config=config)
        if out is not None:
            write_whole(out, document)  # a file replaced with --force: whole, or left as it was
            print(f"Wrote {out} ({len(document)} bytes)", file=sys.stderr)
        elif args.format == "pdf" and sys.stdout.isatty():
            raise MinewatchError("a PDF needs --out FILE (or stdout redirected to a file)")
        else:
            sys.stdout.buffer.write(document)
            sys.stdout.flush()
        return 0
    if args.action == "request-extension":
        event = book.request_extension(args.id, args.explanation, args.by, now, requested_days=args.days)
    elif args.action == "extend":
        if args.until is not None:  # a malformed time is named before the notice is looked up
            parse_until(args.until, "UTC")
        notice = book.get(args.id)
        if args.days is not None:
            event = book.extend(args.id, None, args.by, args.note, now, extra_days=args.days)
        else:
            event = book.extend(args.id, parse_until(args.until, notice.timezone), args.by, args.note, now)
    elif args.action == "serve":
        parse_time(args.on, UTC, "--on")  # a malformed time is named before the notice is looked up
        notice = book.get(args.id)
        served = moment_on_or_after(args.on, ZoneInfo(notice.timezone), "--on", notice.opened)
        event = book.serve(args.id, served, args.by, args.note, now, served_day=day_given(args.on, "--on"))
    elif args.action == "close":
        event = book.close(args.id, args.note, args.by, now)
    elif args.action == "escalate":
        if args.before_deadline != bool(args.reason and args.reason.strip()):
            raise MinewatchError(
                "--before-deadline and --reason go together: give both to escalate before the cure deadline"
            )
        event = book.escalate(
            args.id,
            args.note,
            args.by,
            now,
            before_deadline_reason=args.reason if args.before_deadline else None,
        )
    else:  # argparse allows only the actions above
        raise MinewatchError(f"unknown action {args.action!r}")
    print(event.message)
    return 0
