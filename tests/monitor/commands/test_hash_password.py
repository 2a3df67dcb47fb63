"""`minewatch hash-password` at a terminal (a real pseudo-terminal: getpass reads /dev/tty)."""

from __future__ import annotations

import os
import pty
import secrets
import select
import signal
import subprocess
import sys
import time
from urllib.parse import urlencode

from monitor.credentials import MAX_PASSWORD_CHARS
from monitor.portal.limits import SMALL
from tests.support.paths import REPO


def _at_a_terminal(*keys: bytes) -> tuple[int, str]:
    """The command run on a pseudo-terminal, ``keys`` typed one by one as each prompt shows;
    its exit status and all it showed there."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: the command, with this checkout first
        os.environ["PYTHONPATH"] = str(REPO)
        os.chdir(REPO)
        os.execv(sys.executable, [sys.executable, "-m", "monitor.cli", "hash-password"])
    shown = b""
    pending = list(keys)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # the command ended: the terminal is gone
                break
            if not chunk:
                break
            shown += chunk
            if pending and shown.rstrip().endswith(b":"):  # a prompt waits
                # getpass flushes what was typed before it turned echo off (TCSAFLUSH): wait.
                time.sleep(0.5)
                os.write(fd, pending.pop(0))
    else:
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), shown.decode(errors="replace")


def test_ctrl_d_at_the_prompt_is_one_line() -> None:
    """Ctrl-D (the input ended) at either prompt ended in an EOFError traceback from getpass."""
    for keys in ((b"\x04",), (b"long enough password\n", b"\x04")):
        code, shown = _at_a_terminal(*keys)
        assert code == 2, shown
        assert "Traceback" not in shown, shown
        assert shown.rstrip().endswith(
            "minewatch hash-password: no password given (the input ended): nothing was hashed"
        ), shown


def test_a_password_typed_twice_is_hashed() -> None:
    code, shown = _at_a_terminal(b"long enough password\n", b"long enough password\n")
    assert code == 0, shown
    assert 'password_hash = "scrypt$' in shown and "long enough" not in shown, shown


def _from_a_pipe(password: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "monitor.cli", "hash-password"],
        input=password + "\n",
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=60,
    )


def test_a_password_no_login_could_send_is_refused() -> None:
    """A 2 MB password was hashed (exit 0) though the login form's body limit (8 KB) means it
    could never be sent: its account could not log in. The longest accepted, in the characters
    that URL-encode longest, fits that body with the form's other fields."""
    refused = _from_a_pipe("a" * (MAX_PASSWORD_CHARS + 1))
    assert refused.returncode == 2, refused
    assert refused.stderr.strip() == (
        f"minewatch hash-password: the password has {MAX_PASSWORD_CHARS + 1} characters; the portal's"
        f" login form carries at most {MAX_PASSWORD_CHARS}, so it could never be sent: choose a shorter one"
    )
    assert refused.stdout == ""
    longest = "\U0001f600" * MAX_PASSWORD_CHARS  # 4 UTF-8 bytes, 12 characters URL-encoded
    assert _from_a_pipe(longest).returncode == 0
    body = urlencode({"name": "a" * 64, "password": longest, "csrf": secrets.token_urlsafe(24)})
    assert len(body) < SMALL, len(body)
