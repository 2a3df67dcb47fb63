"""HSTS under TLS; the security headers on a 500; background jobs that fail leaving no files and
saying no internals; check-config refusing weak or malformed password hashes and proxies that
are not addresses."""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from monitor.credentials import SCRYPT_N, SCRYPT_P, SCRYPT_R, hash_password
from tests.support.portal_server import SITES, Client, Portal, serving


@pytest.mark.parametrize("secure", [False, True])
def test_hsts_is_sent_when_tls_is_served(tmp_path: Path, secure: bool) -> None:
    extra = "secure_cookies = true\n" if secure else ""  # TLS at a proxy (tls_cert: the same switch)
    with serving(Portal(tmp_path, portal_extra=extra)) as portal:
        headers = Client(portal).get("/login").headers
    assert headers.get("strict-transport-security") == ("max-age=31536000" if secure else None)


def weak_hash(password: str, n: int, r: int, p: int) -> str:
    salt = bytes(16)
    digest = hashlib.scrypt(password.encode(), salt=salt, n=n, r=r, p=p, dklen=32)
    return f"scrypt${n}${r}${p}${salt.hex()}${digest.hex()}"


def check_config(tmp_path: Path, portal: str) -> tuple[int, str]:
    config = tmp_path / "minewatch.toml"
    config.write_text(f"{SITES}\n[portal]\n{portal}")
    done = subprocess.run(
        [sys.executable, "-m", "monitor.cli", "check-config", str(config)], capture_output=True, text=True
    )
    return done.returncode, done.stderr


@pytest.mark.parametrize(
    ("password_hash", "expected"),
    [
        (
            weak_hash("pw", 2, 1, 1),
            "portal.accounts[0].password_hash: scrypt parameters n=2, r=1, p=1 are weaker than"
            f" n={SCRYPT_N}, r={SCRYPT_R}, p={SCRYPT_P}: make a new hash with `minewatch hash-password`",
        ),
        (
            weak_hash("pw", SCRYPT_N, 1, 1),
            "portal.accounts[0].password_hash: scrypt parameters n=16384, r=1, p=1 are weaker than",
        ),
        (
            "scrypt$16384$8$1$nothex$00",
            "portal.accounts[0].password_hash: malformed: n, r and p must be whole numbers,"
            " salt and hash hexadecimal",
        ),
        (
            "scrypt$16384$8$1",
            "portal.accounts[0].password_hash: expected a hash from `minewatch hash-password`",
        ),
        (
            f"scrypt$16384$8$1${'00' * 4}${'00' * 32}",
            "portal.accounts[0].password_hash: malformed: the salt and the hash must be at least 16 bytes",
        ),
        (
            f"scrypt${2**20}$8$1${'00' * 16}${'00' * 32}",
            "portal.accounts[0].password_hash: scrypt parameters n=1048576, r=8, p=1 need more than 64 MiB",
        ),
    ],
)
def test_check_config_refuses_weak_or_malformed_password_hashes(
    tmp_path: Path, password_hash: str, expected: str
) -> None:
    code, err = check_config(
        tmp_path, f'[[portal.accounts]]\nname = "a"\npassword_hash = "{password_hash}"\n'
    )
    assert code == 2 and expected in err, err


def test_check_config_reads_trusted_proxies(tmp_path: Path) -> None:
    account = f'[[portal.accounts]]\nname = "a"\npassword_hash = "{hash_password("pw")}"\n'
    code, err = check_config(tmp_path, f'trusted_proxies = ["127.0.0.1", "10.0.0.0/8", "::1"]\n{account}')
    assert code == 0, err
    code, err = check_config(tmp_path, f'trusted_proxies = ["10.0.0.300", "*"]\n{account}')
    assert code == 2
    assert "portal.trusted_proxies: '10.0.0.300' is not an IP address or network (e.g. 10.0.0.0/8)" in err
    assert "portal.trusted_proxies: '*' is not an IP address or network" in err


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("PUT", "/login", "GET, HEAD, POST"),
        ("OPTIONS", "/sites/s1/status", "GET, HEAD"),
        ("DELETE", "/api/v1/sites", "GET, HEAD"),
        ("GET", "/logout", "POST"),
    ],
)
def test_a_method_the_path_does_not_take_is_answered_with_the_methods_it_does(
    tmp_path: Path, method: str, path: str, allowed: str
) -> None:
    """Every 405 came without its Allow header (RFC 9110 15.5.6: it must name the methods):
    the error page made for it dropped the headers Starlette's refusal carried."""
    with serving(Portal(tmp_path)) as portal:
        client = Client(portal)
        client.login("ann")
        reply = client.request(method, path)
    assert reply.status == 405
    assert reply.headers.get("allow") == allowed


def test_an_internal_error_carries_the_security_headers_of_every_answer(tmp_path: Path) -> None:
    """A 500 (here: the sessions' table renamed under the running portal, so reading the session
    fails) is answered outside the application's middleware; it went without Cache-Control:
    no-store, the CSP, X-Frame-Options and nosniff."""
    with serving(Portal(tmp_path)) as portal:
        client = Client(portal)
        assert client.login("bob").status == 303
        fine = client.get("/")
        store = sqlite3.connect(portal.store)
        store.execute("ALTER TABLE portal_sessions RENAME TO portal_sessions_elsewhere")
        store.commit()
        store.close()
        broken = client.get("/")
    assert fine.status == 200 and broken.status == 500
    names = ("cache-control", "content-security-policy", "x-frame-options", "x-content-type-options")
    assert {n: broken.headers.get(n) for n in names} == {n: fine.headers.get(n) for n in names}
    assert "Traceback" not in broken.body and str(tmp_path) not in broken.body


def test_the_portal_stopping_after_a_failed_job_removes_the_other_jobs_files(tmp_path: Path) -> None:
    """A failed job's folder is removed when it fails; Jobs.close (the portal stopping) removed
    it again, raised FileNotFoundError from the lifespan's end and left the later jobs' files
    in the temporary folder."""
    from datetime import UTC, datetime

    from monitor.portal.data import Refused
    from monitor.portal.jobs import Jobs

    def refuses(out: Path) -> None:
        raise Refused("from: nothing to export")

    now = datetime.now(UTC)
    jobs = Jobs()
    failed = jobs.launch("bob", "s1", now, now, "a.zip", refuses)
    made = jobs.launch("bob", "s1", now, now, "b.zip", lambda out: out.write_bytes(b"zip") and None)
    for job in (failed, made):
        while job.finished is None:
            time.sleep(0.01)
    assert failed.error and made.done and made.out.is_file()
    jobs.close()
    assert not made.folder.exists() and not failed.folder.exists()


def test_a_job_failing_on_the_system_shows_no_path_and_a_refusal_shows_its_words(tmp_path: Path) -> None:
    """A bundle's or report's page showed any exception's text: an OSError's names a path on the
    server. Only a refusal said for people (MinewatchError) is shown; anything else is in the log."""
    from datetime import UTC, datetime

    from monitor.portal.data import Refused
    from monitor.portal.jobs import Jobs

    jobs = Jobs()
    missing = tmp_path / "no-such-folder"

    def fails_on_the_disk(out: Path) -> None:
        (missing / out.name).write_bytes(b"")  # a real OSError naming the path

    def refuses(out: Path) -> None:
        raise Refused("to: a CSV covers at most 31 days; choose a shorter window")

    now = datetime.now(UTC)
    try:
        system = jobs.launch("bob", "s1", now, now, "a.zip", fails_on_the_disk)
        refusal = jobs.launch("bob", "s1", now, now, "b.zip", refuses)
        for job in (system, refusal):
            while job.finished is None:
                time.sleep(0.01)
    finally:
        jobs.close()
    assert str(missing) not in system.error and "Errno" not in system.error
    assert system.error == f"an internal error, in the portal's log as bundle job {system.id[:6]}"
    assert refusal.error == "to: a CSV covers at most 31 days; choose a shorter window"
