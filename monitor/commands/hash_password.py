"""``minewatch hash-password``: the scrypt hash of a password for ``[[portal.accounts]]``
(``password_hash``); with ``--token``, a new API token and its hash (``token_hash``).

The password is read from the terminal without echo, or from standard input when piped.
"""

from __future__ import annotations

import argparse
import getpass
import sys

from monitor.errors import UsageError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--token", action="store_true", help="make a new API token; print it and the hash to configure"
    )


def run(args: argparse.Namespace) -> int:
    from monitor.credentials import MAX_PASSWORD_CHARS, hash_password, hash_token, new_token

    if args.token:
        token = new_token()
        print(f"token (give it to the client, it is not stored): {token}")
        print(f'token_hash = "{hash_token(token)}"')
        return 0
    if sys.stdin.isatty():
        try:
            password = getpass.getpass("Password: ")
            if getpass.getpass("Again: ") != password:
                raise UsageError("the two passwords differ: run it again")
        except EOFError:  # Ctrl-D at the prompt
            print(file=sys.stderr)  # the prompt's line ended
            raise UsageError("no password given (the input ended): nothing was hashed") from None
    else:
        line = sys.stdin.buffer.readline().rstrip(b"\r\n")
        try:
            password = line.decode("utf-8")
        except UnicodeDecodeError:
            raise UsageError("the password is not UTF-8 text, which no login form could send") from None
    if len(password) < 8:
        raise UsageError("the password must have at least 8 characters")
    if len(password) > MAX_PASSWORD_CHARS:
        raise UsageError(
            f"the password has {len(password):,} characters; the portal's login form carries at most"
            f" {MAX_PASSWORD_CHARS}, so it could never be sent: choose a shorter one"
        )
    print(f'password_hash = "{hash_password(password)}"')
    return 0
