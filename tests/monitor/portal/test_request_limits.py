"""Requests that would exhaust the portal (issue 24), against the real `minewatch serve` of
tests/monitor/portal/conftest.py and one more started here with ``max_upload_mb = 1``, a host name and
a temporary folder of its own: bodies bounded by route before they are read, uploads accepted
only after the session and the form's token, the range of dates, the Host header and redirects,
and capped evidence exports started by POST."""

from __future__ import annotations

import asyncio
import os
import re
import socket
import subprocess
import threading
import time
import urllib.parse
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from monitor.config import parse_config
from monitor.errors import ConfigError
from tests.monitor.portal.conftest import DAY, PASSWORD, SITE, TOKENS, Env
from tests.monitor.test_config import MINIMAL
from tests.support.daemon import wait_until
from tests.support.portal_server import on_port, portal_serving

MB = 1024 * 1024


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes
    sent: int = 0  # body bytes the server took before it answered

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")


def exchange(port: int, head: str, body: Iterable[bytes] = (), timeout: float = 10.0) -> Reply:
    """One request on a socket of its own: the head, then ``body`` while the server reads it;
    the reply is read meanwhile, so a server that answers early and closes is seen doing so."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    received = bytearray()

    def read() -> None:
        try:
            while data := sock.recv(65536):
                received.extend(data)
                if _complete(received):
                    return
        except OSError:
            pass

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    sent = 0
    try:
        sock.sendall(head.encode("latin-1"))
        for chunk in body:
            if not reader.is_alive():
                break
            sock.sendall(chunk)
            sent += len(chunk)
    except OSError:  # the server closed the connection: it wants no more
        pass
    reader.join(timeout)
    sock.close()
    assert received, f"no answer within {timeout} s"
    head_bytes, _, rest = bytes(received).partition(b"\r\n\r\n")
    lines = head_bytes.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
    return Reply(int(lines[0].split()[1]), headers, rest, sent)


def _complete(data: bytearray) -> bool:
    head, sep, rest = bytes(data).partition(b"\r\n\r\n")
    if not sep:
        return False
    length = re.search(rb"(?im)^content-length:\s*(\d+)", head)
    return length is not None and len(rest) >= int(length.group(1))


def request(
    port: int,
    method: str,
    path: str,
    headers: dict[str, str] | None = None,
    body: bytes = b"",
    host: str | None = None,
    timeout: float = 10.0,
) -> Reply:
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host or f'127.0.0.1:{port}'}", "Connection: close"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    if body or method == "POST":
        lines.append(f"Content-Length: {len(body)}")
    return exchange(port, "\r\n".join(lines) + "\r\n\r\n", [body] if body else [], timeout)


@dataclass
class Browser:
    """A logged-in account's cookie and the form token of its session."""

    port: int
    cookie: str = ""
    csrf: str = ""

    def send(
        self, method: str, path: str, form: dict[str, str] | None = None, timeout: float = 10.0
    ) -> Reply:
        headers = {"Cookie": self.cookie} if self.cookie else {}
        body = b""
        if form is not None:
            headers["Content-Type"] = "application/x-www-form-urlencoded"
            body = urllib.parse.urlencode(form).encode()
        reply = request(self.port, method, path, headers, body, timeout=timeout)
        if cookie := re.match(r"(minewatch_session=[^;]*)", reply.headers.get("set-cookie", "")):
            self.cookie = cookie.group(1)
        if token := re.search(rb'name="csrf" value="([^"]+)"', reply.body):
            self.csrf = token.group(1).decode()
        return reply


def log_in(port: int, name: str) -> Browser:
    browser = Browser(port)
    browser.send("GET", "/login")
    reply = browser.send("POST", "/login", {"name": name, "password": PASSWORD[name], "csrf": browser.csrf})
    assert reply.status == 303, reply.text
    browser.send("GET", f"/sites/{SITE}/evidence")
    return browser


def multipart(
    boundary: str, fields: list[tuple[str, str]], file: tuple[str, str] | None
) -> tuple[bytes, bytes]:
    """The body's beginning (fields, then a file part's headers) and its end (after the file)."""
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'
        for name, value in fields
    ]
    if file:
        parts.append(
            f'--{boundary}\r\nContent-Disposition: form-data; name="{file[0]}"; filename="{file[1]}"\r\n'
            "Content-Type: application/zip\r\n\r\n"
        )
    return "".join(parts).encode(), f"\r\n--{boundary}--\r\n".encode()


def upload_head(path: str, cookie: str, length: int | None, port: int) -> str:
    lines = [
        f"POST {path} HTTP/1.1",
        f"Host: 127.0.0.1:{port}",
        "Content-Type: multipart/form-data; boundary=XyZ",
        "Connection: close",
    ]
    if cookie:
        lines.append(f"Cookie: {cookie}")
    lines.append(f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked")
    return "\r\n".join(lines) + "\r\n\r\n"


def chunked(parts: Iterable[bytes]) -> Iterator[bytes]:
    for part in parts:
        yield b"%x\r\n%s\r\n" % (len(part), part)
    yield b"0\r\n\r\n"


def zeros(total: int, size: int = 64 * 1024) -> Iterator[bytes]:
    block = b"\0" * size
    for _ in range(total // size):
        yield block


def written(pid: int) -> int:
    """Bytes the process has passed to write() so far (files, the log, sockets)."""
    found = re.search(r"wchar: (\d+)", Path(f"/proc/{pid}/io").read_text())
    assert found
    return int(found.group(1))


@dataclass
class Own:
    """A `minewatch serve` of this module: max_upload_mb = 1, a host name, its own TMPDIR."""

    port: int
    tmp: Path
    proc: subprocess.Popen[bytes]


@pytest.fixture(scope="module")
def own(env: Env, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Own]:
    root = tmp_path_factory.mktemp("limits")
    config = root / "limits.toml"
    tmp = root / "tmp"
    tmp.mkdir()

    def config_for(port: int) -> Path:
        limits = 'max_upload_mb = 1\nhostnames = ["portal.quarry.example"]\n'
        config.write_text(on_port(env.config.read_text(), port, "portal-limits", limits))
        return config

    environment = {**os.environ, "TMPDIR": str(tmp)}
    with portal_serving(config_for, root / "portal.log", env=environment) as (port, proc):
        yield Own(port, tmp, proc)


def port_of(env: Env) -> int:
    return int(env.url.rsplit(":", 1)[1])


# ---------------------------------------------------------------------- bodies by route


def test_a_100_mb_login_post_is_refused_unread_and_nothing_reaches_the_temporary_folder(own: Own) -> None:
    big = 100 * MB
    start, end = multipart("XyZ", [("csrf", "x"), ("name", "town")], ("password", "big.bin"))
    # Announced: 413 at once, without a byte of the body read.
    began = time.monotonic()
    reply = exchange(own.port, upload_head("/login", "", len(start) + big + len(end), own.port))
    assert reply.status == 413 and time.monotonic() - began < 5, reply
    assert "at most 8 KB" in reply.text and reply.headers["connection"] == "close"
    # Chunked (no length): counted as it streams and cut at the limit.
    before = written(own.proc.pid)
    reply = exchange(
        own.port,
        upload_head("/login", "", None, own.port),
        chunked([start, *zeros(big), end]),
        timeout=30,
    )
    assert reply.status == 413, reply
    assert reply.sent < 20 * MB  # the server stopped reading: the rest was never sent
    assert written(own.proc.pid) - before < MB  # no spooled form on disk (only the log line)
    assert list(own.tmp.iterdir()) == []


def test_every_small_form_has_a_small_limit(env: Env) -> None:
    port = port_of(env)
    for path, limit in [
        ("/logout", "8 KB"),
        (f"/sites/{SITE}/events/blast", "64 KB"),
        (f"/sites/{SITE}/alerts/a1/acknowledge", "8 KB"),
        (f"/notices/{env.notice_id}/close", "64 KB"),
        (f"/sites/{SITE}/evidence/bundle", "8 KB"),
    ]:
        head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: {100 * MB}\r\n\r\n"
        reply = exchange(port, head)
        assert reply.status == 413 and f"at most {limit}" in reply.text, (path, reply)
    # A GET has no use for a body.
    head = f"GET /login HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: {MB}\r\n\r\n"
    assert exchange(port, head).status == 413


def test_an_upload_is_refused_before_its_body_is_read_without_a_session_or_the_forms_token(env: Env) -> None:
    port = port_of(env)
    path = f"/sites/{SITE}/evidence/verify"
    # No session: refused from the head alone (the body announced is never sent).
    began = time.monotonic()
    reply = exchange(port, upload_head(path, "", 50 * MB, port))
    assert reply.status == 401 and time.monotonic() - began < 5, reply
    assert reply.headers["connection"] == "close"  # the server does not read the rest either
    # A session, but the form's first field is another token: refused before the file.
    insp = log_in(port, "insp")
    start, _ = multipart("XyZ", [("csrf", "0" * 32)], ("bundle", "b.zip"))
    reply = exchange(port, upload_head(path, insp.cookie, 50 * MB, port), [start])
    assert reply.status == 403 and "security token" in reply.text, reply
    # The token, but not first: refused as well (the file would have to be read to find it).
    start, _ = multipart("XyZ", [], ("bundle", "b.zip"))
    reply = exchange(port, upload_head(path, insp.cookie, 50 * MB, port), [start])
    assert reply.status == 403, reply
    # Over max_upload_mb (512 by default) by its length: 413 at once.
    reply = exchange(port, upload_head(path, insp.cookie, 513 * MB, port))
    assert reply.status == 413 and "at most 512 MB" in reply.text, reply
    # An operator may not upload: the role is checked before the body too.
    op = log_in(port, "op")
    assert exchange(port, upload_head(path, op.cookie, 50 * MB, port)).status == 403


def test_an_upload_over_max_upload_mb_is_cut_and_a_bundle_within_it_verifies(own: Own) -> None:
    insp = log_in(own.port, "insp")
    path = f"/sites/{SITE}/evidence/verify"
    start, end = multipart("XyZ", [("csrf", insp.csrf)], ("bundle", "big.zip"))
    reply = exchange(own.port, upload_head(path, insp.cookie, len(start) + 2 * MB + len(end), own.port))
    assert reply.status == 413 and "at most 1 MB" in reply.text, reply
    before = written(own.proc.pid)
    reply = exchange(
        own.port, upload_head(path, insp.cookie, None, own.port), chunked([start, *zeros(50 * MB), end])
    )
    assert reply.status == 413 and reply.sent < 20 * MB, reply
    assert written(own.proc.pid) - before < 2 * MB  # the file's first megabyte, then nothing
    assert not any(own.tmp.glob("minewatch-verify-*"))  # the part written is removed
    # A bundle prepared by the portal (a POST job), uploaded in the same form: verified.
    reply = insp.send("POST", f"/sites/{SITE}/evidence/bundle", _window(insp.csrf))
    assert reply.status == 303, reply.text
    bundle = _download(insp, reply.headers["location"])
    assert len(bundle) < MB
    start, end = multipart("XyZ", [("csrf", insp.csrf)], ("bundle", "mine.zip"))
    body = start + bundle + end
    reply = exchange(own.port, upload_head(path, insp.cookie, len(body), own.port), [body])
    assert reply.status == 200, reply.text
    assert re.search(
        r'id="verify-verdict">mine\.zip: internal consistency only: no problem found', reply.text
    )
    assert "Verification of mine.zip" in reply.text
    assert not any(own.tmp.glob("minewatch-verify-*"))


def _window(csrf: str) -> dict[str, str]:
    return {"from": f"{DAY.isoformat()}T08:00", "to": f"{DAY.isoformat()}T18:00", "csrf": csrf}


def _download(browser: Browser, job: str, timeout: float = 120) -> bytes:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        page = browser.send("GET", job)
        assert page.status == 200, page.text
        if link := re.search(r'url=(/sites/[^"]+\.zip)"', page.text):
            download = browser.send("GET", link.group(1))
            assert download.status == 200
            return download.body
        time.sleep(0.2)
    raise AssertionError(f"{job} not ready within {timeout} s")


# ---------------------------------------------------------------------- dates


def test_days_and_times_out_of_range_answer_400_with_the_range(env: Env) -> None:
    port = port_of(env)
    town = log_in(port, "town")
    for day in ("9999-12-31", "0001-01-01", "1969-12-31"):
        reply = town.send("GET", f"/sites/{SITE}/day?date={day}")
        assert reply.status == 400, (day, reply.status)
        assert "from 1970-01-01 to 9998-12-31" in reply.text, reply.text
    for day in ("1970-01-01", "9998-12-31"):  # the ends of the range are days like any other
        assert town.send("GET", f"/sites/{SITE}/day?date={day}").status == 200, day
    bearer = {"Authorization": f"Bearer {TOKENS['insp']}"}
    for api in ("day", "findings"):
        for day in ("9999-12-31", "0001-01-01"):
            reply = request(port, "GET", f"/api/v1/sites/{SITE}/{api}?date={day}", bearer)
            assert reply.status == 400, (api, day, reply)
            assert "from 1970-01-01 to 9998-12-31" in reply.text and reply.text.startswith('{"error"')
        assert request(port, "GET", f"/api/v1/sites/{SITE}/{api}?date=9998-12-31", bearer).status == 200
    # An evidence window and an event's time: the form again, saying what is allowed.
    for start, end in (("0001-01-01", "2026-01-01"), ("2026-01-01", "9999-12-31T23:59")):
        window = {"from": start, "to": end, "csrf": town.csrf}
        reply = town.send("POST", f"/sites/{SITE}/evidence/bundle", window)
        assert reply.status == 400 and "from 1970-01-01 to 9998-12-31" in reply.text, reply.text
    # A notice's extension by a number of days that no date holds.
    town.send("GET", f"/notices/{env.notice_id}")
    changes = env.count("SELECT COUNT(*) FROM notice_changes")
    # Every wording is the notices' own (rules.deadlines.extra_days_problem), as on the command line.
    for days, said in (
        ("999999999", "days: must be at most 3650, got 999999999"),
        ("9" * 5000, "days: must be at most 3650, got a number of 5000 digits"),
        ("0", "days: must be at least 1, got 0"),
        ("-3", "days: must be at least 1, got -3"),
        # an Arabic-Indic 3
        ("\u0663", "days: expected a whole number, got &#39;\u0663&#39;"),
    ):
        form = {"days": days, "reason": "r", "csrf": town.csrf}
        reply = town.send("POST", f"/notices/{env.notice_id}/extend", form)
        assert reply.status == 400 and said in reply.text, (days[:20], reply.text)
    assert env.count("SELECT COUNT(*) FROM notice_changes") == changes
    op = log_in(port, "op")
    op.send("GET", f"/sites/{SITE}/events")
    reply = op.send(
        "POST", f"/sites/{SITE}/events/blast", {"blast_id": "B-9", "ts": "9999-12-31T23:30", "csrf": op.csrf}
    )
    assert reply.status == 400 and "ts: must be a time from 1970-01-01" in reply.text, reply.text


# ---------------------------------------------------------------------- hosts and redirects


def test_redirects_are_relative_and_other_host_names_are_refused(env: Env, own: Own) -> None:
    port = port_of(env)
    town = log_in(port, "town")
    reply = request(port, "GET", "/sites/x/status/", host="evil.example")
    assert reply.status == 400 and "host name" in reply.text, reply
    assert "evil.example" not in reply.text
    reply = request(port, "GET", "/sites/x/status/?a=1", {"Cookie": town.cookie})
    assert reply.status == 307 and reply.headers["location"] == "/sites/x/status?a=1", reply
    reply = request(port, "GET", f"/sites/{SITE}/day/", {"Cookie": town.cookie}, host=f"localhost:{port}")
    assert reply.status == 307 and reply.headers["location"] == f"/sites/{SITE}/day", reply
    # A path that would read as another site's address is no redirect.
    assert request(port, "GET", "//evil.example/").status == 404
    # Names a fresh portal answers to: localhost and its address; a configured one besides.
    for host in ("127.0.0.1", f"[::1]:{port}", "LocalHost"):
        assert request(port, "GET", "/login", host=host).status == 200, host
    for host in ("portal.quarry.example", "Portal.Quarry.Example:443"):
        assert request(own.port, "GET", "/login", host=host).status == 200, host
        assert request(port, "GET", "/login", host=host).status == 400, host
    assert request(own.port, "GET", "/login", host="evil.example").status == 400


@pytest.mark.parametrize(
    ("section", "expected"),
    [
        ('hostnames = ["https://portal.example"]\n', "portal.hostnames: expected a host name or IP address"),
        ('hostnames = ["portal.example:443"]\n', "portal.hostnames: expected a host name or IP address"),
        ('hostnames = "portal.example"\n', "portal.hostnames: expected a list of strings"),
        ("max_upload_mb = 0\n", "portal.max_upload_mb: must be at least 1, got 0"),
    ],
)
def test_check_config_names_a_wrong_hostname_or_upload_limit(section: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(MINIMAL + "\n[portal]\n" + section)
    assert any(p.startswith(expected) for p in info.value.problems), info.value.problems


def test_hostnames_and_upload_limit_are_read() -> None:
    config = parse_config(MINIMAL + '\n[portal]\nhostnames = ["portal.example", "::1"]\nmax_upload_mb = 64\n')
    assert config.portal.hostnames == ("portal.example", "::1") and config.portal.max_upload_mb == 64
    assert parse_config(MINIMAL).portal.max_upload_mb == 512


# ---------------------------------------------------------------------- evidence exports


def test_an_export_starts_only_by_post_with_the_token_and_is_capped(env: Env, own: Own) -> None:
    insp = log_in(own.port, "insp")
    query = urllib.parse.urlencode(_window(insp.csrf))
    # The old GET link starts nothing; a POST without the form's token neither.
    assert insp.send("GET", f"/sites/{SITE}/evidence/bundle?{query}").status == 405
    refused = insp.send("POST", f"/sites/{SITE}/evidence/bundle", {**_window(insp.csrf), "csrf": "x"})
    assert refused.status == 403
    assert not any(own.tmp.glob("minewatch-portal-*"))
    # An account holds two bundles (being prepared or not yet downloaded): a third is refused
    # (429), with links to the two; once one is downloaded, there is room again.
    bundle = f"/sites/{SITE}/evidence/bundle"
    jobs = [insp.send("POST", bundle, _window(insp.csrf)) for _ in range(2)]
    assert [r.status for r in jobs] == [303, 303]
    busy = insp.send("POST", bundle, _window(insp.csrf))
    assert busy.status == 429 and busy.headers["retry-after"], busy.text
    assert "You have 2 bundles being prepared or waiting to be downloaded (at most 2)" in busy.text
    links = re.findall(r'<a href="(/sites/quarry/evidence/jobs/[\w-]+)"', busy.text)
    assert links == [r.headers["location"] for r in jobs]
    _download(insp, links[0])
    jobs = [jobs[1], insp.send("POST", bundle, _window(insp.csrf))]
    assert jobs[1].status == 303
    for reply in jobs:
        _download(insp, reply.headers["location"])
    # At most four exports run at once in all: of five asked at the same moment by three
    # accounts, one is refused. (An export here takes some 50-200 ms: should one end before
    # the last request is read, all five pass and the round is repeated.)
    town, other = log_in(own.port, "town"), log_in(own.port, "ratelimited")
    browsers = [insp, insp, town, town, other]
    for _ in range(5):
        replies = _at_once(own.port, browsers)
        for browser, reply in zip(browsers, replies, strict=True):
            if reply.status == 303:
                _download(browser, reply.headers["location"])
        statuses = sorted(r.status for r in replies)
        assert statuses in ([303] * 5, [303] * 4 + [429]), replies
        if statuses[-1] == 429:
            break
    assert statuses == [303] * 4 + [429]
    busy = next(r for r in replies if r.status == 429)
    assert "The portal is preparing 4 bundles or reports already" in busy.text


def _at_once(port: int, browsers: list[Browser]) -> list[Reply]:
    """The bundle form posted by each browser at the same moment (connections opened first)."""
    heads = []
    for b in browsers:
        body = urllib.parse.urlencode(_window(b.csrf))
        heads.append(
            f"POST /sites/{SITE}/evidence/bundle HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nCookie: {b.cookie}\r\n"
            f"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {len(body)}\r\n"
            f"Connection: close\r\n\r\n{body}"
        )
    replies: list[Reply | None] = [None] * len(heads)
    go = threading.Barrier(len(heads))

    def post(i: int) -> None:
        go.wait()
        replies[i] = exchange(port, heads[i])

    threads = [threading.Thread(target=post, args=(i,)) for i in range(len(heads))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert all(r is not None for r in replies)
    return [r for r in replies if r is not None]


# ---------------------------------------------------------------------- the broker down


def test_an_event_form_says_the_broker_is_down_and_the_portal_goes_on(
    env: Env, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A portal whose broker does not answer (a free port nobody listens on): recording an event
    is refused on the form with the reason, 503, not an internal error."""
    from tests.support.secure_broker import free_port

    root = tmp_path_factory.mktemp("no-broker")
    config = root / "no-broker.toml"
    dead = f"mqtt://127.0.0.1:{free_port()}"

    def config_for(port: int) -> Path:
        config.write_text(on_port(env.config.read_text().replace(env.broker.url, dead), port, "no-broker"))
        return config

    with portal_serving(config_for, root / "portal.log") as (port, _):
        op = log_in(port, "op")
        op.send("GET", f"/sites/{SITE}/events")
        form = {"ts": f"{DAY.isoformat()}T10:00:00", "gate": "g1", "direction": "in", "truck_id": "T07"}
        form["csrf"] = op.csrf
        reply = op.send("POST", f"/sites/{SITE}/events/truck", form, timeout=30)  # the broker's 10 s
        assert reply.status == 503, (reply.status, reply.text[:500])
        assert f"the broker {dead} is not reachable: the event was not sent, try again" in reply.text
        assert op.send("GET", f"/sites/{SITE}/events").status == 200
    assert "Traceback" not in (root / "portal.log").read_text()


def test_two_uploads_are_verified_at_once_and_a_third_waits_its_turn(own: Own) -> None:
    """Each verification may keep a core busy and hold max_upload_mb on disk; exports were
    capped, uploads were not, so a few at once could take the host's memory."""
    insp = log_in(own.port, "insp")
    path = f"/sites/{SITE}/evidence/verify"
    start, end = multipart("XyZ", [("csrf", insp.csrf)], ("bundle", "slow.zip"))
    held = []
    for _ in range(2):  # two uploads whose files are still arriving
        sock = socket.create_connection(("127.0.0.1", own.port), timeout=10)
        sock.sendall(upload_head(path, insp.cookie, len(start) + 1000 + len(end), own.port).encode())
        sock.sendall(start + b"PK")
        held.append(sock)
    try:
        time.sleep(0.5)
        body = start + b"not a zip" + end
        reply = exchange(own.port, upload_head(path, insp.cookie, len(body), own.port), [body])
        assert reply.status == 429 and reply.headers["retry-after"] == "30", reply
        assert "2 bundles are being verified: try again in a minute" in reply.text
    finally:
        for sock in held:
            sock.close()
    # Given up by their senders: their turns are free again.
    assert wait_until(
        lambda: exchange(own.port, upload_head(path, insp.cookie, len(body), own.port), [body]).status == 200,
        10,
    )


def _closed_within(sock: socket.socket, seconds: float) -> bool:
    """Whether the server closes ``sock`` within ``seconds`` (whatever it says first)."""
    sock.settimeout(seconds)
    try:
        while sock.recv(65536):
            pass
    except TimeoutError:
        return False
    except OSError:  # reset
        return True
    return True


def test_connections_that_hold_the_portal_without_a_request_are_closed(own: Own) -> None:
    """Reached directly, 1,100 connections that sent nothing took every file handle and the portal
    answered no one. A request's head must come within 10 s, a body may pause 30 s, and one
    address holds at most 64 connections (monitor/portal/connections.py)."""
    from monitor.portal.connections import HEAD_S, IDLE_S, PER_ADDRESS

    def connect() -> socket.socket:
        return socket.create_connection(("127.0.0.1", own.port), timeout=10)

    began = time.monotonic()
    silent = [connect() for _ in range(PER_ADDRESS - 2)]
    half_head = connect()
    half_head.sendall(b"GET /login HTTP/1.1\r\nHost: 127.0.0.1\r\nX-a: ")
    insp = log_in(own.port, "insp")  # a request of its own, on connections that come and go
    stalled = connect()  # its body announced, then six bytes of it
    stalled.sendall(
        f"POST /login HTTP/1.1\r\nHost: 127.0.0.1:{own.port}\r\nCookie: {insp.cookie}\r\n"
        "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 5000\r\n\r\nname=x".encode()
    )
    try:
        over = connect()  # the address's 65th
        assert _closed_within(over, 2), "a connection over the address's limit was kept"
        over.close()
        assert all(_closed_within(s, HEAD_S + 5) for s in (*silent, half_head))
        assert time.monotonic() - began >= HEAD_S - 1  # not before their time
        assert insp.send("GET", f"/sites/{SITE}/evidence").status == 200  # the portal answers
        assert _closed_within(stalled, IDLE_S + 5)
    finally:
        for sock in (*silent, half_head, stalled):
            sock.close()


class _PeerTransport(asyncio.Transport):
    """A connection's transport seen from a given client address (all the protocol asks of it)."""

    def __init__(self, host: str) -> None:
        super().__init__()
        self.host = host
        self.closed = False

    def get_extra_info(self, name: str, default: object = None) -> object:
        return {"peername": (self.host, 40000), "sockname": ("::1", 8080)}.get(name, default)

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True


def test_an_ipv6_client_holds_its_connections_limit_across_its_whole_64() -> None:
    """One IPv6 host picks any of its /64's 2**64 addresses, and each had its own 64 connections:
    a thousand such addresses took every file handle. The /64 is the address here, as the login
    and complaint limits count it (throttle.address_key); an IPv4 client written as IPv6 is its
    IPv4 address. The portal's own protocol class, with transports that say where they come
    from: this machine cannot connect from many IPv6 addresses (a stand-in for the socket)."""
    from uvicorn.config import Config
    from uvicorn.server import ServerState

    from monitor.portal.connections import PER_ADDRESS, GuardedH11Protocol

    config = Config(app=lambda scope, receive, send: None, factory=False)
    config.load()
    state = ServerState()

    async def held(hosts: list[str]) -> list[bool]:
        opened = []
        for host in hosts:
            protocol = GuardedH11Protocol(config, state, {})
            protocol.connection_made(_PeerTransport(host))
            opened.append(protocol)
        closed = [p.transport.is_closing() for p in opened]
        for p in opened:
            p.connection_lost(None)
        return closed

    one_host = [f"2001:db8:0:7::{i + 1:x}" for i in range(PER_ADDRESS)]
    closed = asyncio.run(held([*one_host, "2001:db8:0:7::ffff", "2001:db8:0:8::1"]))
    assert closed == [False] * PER_ADDRESS + [True, False]  # its /64 is full; the next /64 is not
    one_v4 = ["192.0.2.1" if i % 2 else "::ffff:192.0.2.1" for i in range(PER_ADDRESS)]
    closed = asyncio.run(held([*one_v4, "192.0.2.1", "::ffff:192.0.2.2"]))
    assert closed == [False] * PER_ADDRESS + [True, False]


def test_an_ipv6_48_holds_its_connections_limit_across_its_64s() -> None:
    """One subscriber's /56 or /48 holds 256 or 65,536 /64s, each with its PER_ADDRESS
    connections: a /48 holds at most PER_PREFIX (throttle.PREFIX_FACTOR times that) across them;
    another /48 is not held back. The portal's own protocol class, with transports that say
    where they come from (a stand-in for the socket, as above)."""
    from uvicorn.config import Config
    from uvicorn.server import ServerState

    from monitor.portal.connections import PER_ADDRESS, PER_PREFIX, GuardedH11Protocol

    config = Config(app=lambda scope, receive, send: None, factory=False)
    config.load()
    state = ServerState()

    async def held(hosts: list[str]) -> list[bool]:
        opened = []
        for host in hosts:
            protocol = GuardedH11Protocol(config, state, {})
            protocol.connection_made(_PeerTransport(host))
            opened.append(protocol)
        closed = [p.transport.is_closing() for p in opened]
        for p in opened:
            p.connection_lost(None)
        return closed

    per_64 = PER_ADDRESS // 2  # under each /64's own limit
    one_subscriber = [f"2001:db8:9:{i // per_64:x}::{i % per_64 + 1:x}" for i in range(PER_PREFIX)]
    closed = asyncio.run(held([*one_subscriber, "2001:db8:9:ffff::1", "2001:db8:a::1"]))
    assert closed == [False] * PER_PREFIX + [True, False]
    assert not GuardedH11Protocol._open  # every connection's counts given back
    # A trusted proxy's connections, however many, leave the rest of its /48 its own limit.
    import ipaddress

    before = GuardedH11Protocol.trusted
    GuardedH11Protocol.trusted = (ipaddress.ip_network("2001:db8:d::1/128"),)
    try:
        closed = asyncio.run(held(["2001:db8:d::1"] * (PER_PREFIX + 1) + ["2001:db8:d:1::1"]))
    finally:
        GuardedH11Protocol.trusted = before
    assert closed == [False] * (PER_PREFIX + 2)


def test_a_client_that_leaves_mid_body_leaves_no_traceback_in_the_log(own: Own) -> None:
    """A login form whose sender hung up half-way logged an ERROR with a ClientDisconnect
    traceback: nobody to answer, nothing wrong with the portal."""
    log = own.tmp.parent / "portal.log"
    before = log.stat().st_size
    for path in ("/login", f"/sites/{SITE}/evidence/bundle"):
        sock = socket.create_connection(("127.0.0.1", own.port), timeout=10)
        sock.sendall(
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{own.port}\r\n"
            "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 5000\r\n\r\n"
            "name=town&pa".encode()
        )
        time.sleep(0.3)
        sock.close()
    time.sleep(1.0)
    assert log_in(own.port, "insp").cookie  # the portal answers on
    said = log.read_bytes()[before:].decode(errors="replace")
    assert "Traceback" not in said and "ClientDisconnect" not in said, said


def test_a_bundle_not_downloaded_leaves_with_the_portal(env: Env, tmp_path: Path) -> None:
    """Stopped (SIGTERM), the portal left its jobs' files in the temporary folder."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    config = tmp_path / "portal.toml"

    def config_for(port: int) -> Path:
        config.write_text(on_port(env.config.read_text(), port, "portal-jobs-left"))
        return config

    with portal_serving(config_for, tmp_path / "portal.log", env={**os.environ, "TMPDIR": str(tmp)}) as (
        port,
        _,
    ):
        insp = log_in(port, "insp")
        job = insp.send("POST", f"/sites/{SITE}/evidence/bundle", _window(insp.csrf)).headers["location"]
        assert wait_until(lambda: "url=/sites/" in insp.send("GET", job).text, 120)  # ready, not downloaded
        assert any(tmp.glob("minewatch-portal-*/*.zip"))
    assert not any(tmp.glob("minewatch-portal-*")), list(tmp.iterdir())


def test_a_head_request_for_a_bundle_leaves_its_one_download(tmp_path: Path) -> None:
    """A HEAD (a download manager's, a link checker's) took the bundle's one download and recorded
    it as downloaded though no byte went out; the GET after it found nothing. A HEAD answers
    the download's headers and changes nothing."""
    from tests.support.portal_server import Client, Portal, serving

    with serving(Portal(tmp_path)) as portal:
        bob = Client(portal)
        assert bob.login("bob").status == 303
        form = {"csrf": bob.csrf("/sites/s1/evidence"), "from": "2026-12-01", "to": "2026-12-02"}
        job = bob.request("POST", "/sites/s1/evidence/bundle", form).location

        def download_links() -> list[str]:
            return re.findall(r'href="(/sites/s1/evidence/jobs/[^"]+/[^"]+)"', bob.get(job).body)

        assert wait_until(lambda: bool(download_links()), 30)
        (link,) = download_links()
        head = bob.request("HEAD", link)
        assert head.status == 200 and head.raw == b""
        assert head.headers["content-type"] == "application/zip"
        assert portal.actions("bundle_downloaded") == []
        got = bob.get(link)
        assert got.status == 200 and got.raw[:2] == b"PK"
        assert int(head.headers["content-length"]) == len(got.raw)
        (record,) = portal.actions("bundle_downloaded")
        assert record["data"]["bytes"] == len(got.raw)
        assert bob.request("HEAD", link).status == 404  # downloaded: gone, as for a GET
