"""The portal's configuration section, password and token hashes, login limits and the
hash-password command (no servers needed)."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from monitor.config import parse_config
from monitor.credentials import check_password, check_token, hash_password, hash_token
from monitor.errors import ConfigError
from monitor.portal.data import Scope, User
from monitor.portal.periods import day_period
from tests.support.config_samples import MINIMAL

HASH = hash_password("correct horse")
CHICAGO = ZoneInfo("America/Chicago")


def acct(body: str) -> str:
    """One [[portal.accounts]] named "a" with a valid hash (unless ``body`` gives one), then ``body``."""
    given = "password_hash" in body
    return '[[portal.accounts]]\nname = "a"\n' + ("" if given else f'password_hash = "{HASH}"\n') + body


def portal(section: str) -> str:
    return MINIMAL + "\n[portal]\n" + section


def test_portal_section_is_read_with_accounts() -> None:
    config = parse_config(
        portal(
            f'port = 8443\nbind = "0.0.0.0"\n[[portal.accounts]]\nname = "ann"\nrole = "inspector"\n'
            f'sites = ["s1"]\npassword_hash = "{HASH}"\nnot_before = "2026-06-01"\nnot_after = "2026-06-30"\n'
        )
    )
    assert config.portal.port == 8443 and config.portal.bind == "0.0.0.0"
    (ann,) = config.portal.accounts
    assert ann.role == "inspector" and ann.sites == ("s1",)
    user = User.of(ann)
    # Dates are the site's local days (America/Chicago, CDT in June), as minewatch reads every date.
    first, last = user.bounds("America/Chicago")
    assert first is not None and first.isoformat() == "2026-06-01T05:00:00+00:00"
    assert last is not None and last.isoformat() == "2026-07-01T04:59:59.999999+00:00"
    # The sites page says the scope to the second, as the portal shows every time.
    from monitor.portal.data import Scope
    from monitor.portal.web import portal_templates

    page = portal_templates().env.get_template("sites.html")
    html = page.render(user=user, sites=config.sites, csrf="", can={}, scope=Scope(user, config))
    assert "from 2026-06-01 00:00:00 CDT to 2026-06-30 23:59:59 CDT</td>" in html


def test_a_scope_of_dates_is_each_sites_local_days() -> None:
    """An inspector over two sites in two zones: the same dates are each site's own local days,
    on the sites page and wherever the scope cuts (Scope.window), as the day views show them."""
    second_site = MINIMAL.replace('id = "s1"', 'id = "s2"').replace("America/Chicago", "Europe/Berlin")
    config = parse_config(
        MINIMAL
        + second_site
        + f'\n[portal]\n[[portal.accounts]]\nname = "ann"\nrole = "inspector"\npassword_hash = "{HASH}"\n'
        'not_before = "2026-06-01"\nnot_after = "2026-06-01"\n'
    )
    scope = Scope(User.of(config.portal.accounts[0]), config)
    chicago, berlin = config.sites
    assert scope.bounds(chicago) == (
        datetime(2026, 6, 1, 5, tzinfo=UTC),
        datetime(2026, 6, 2, 5, tzinfo=UTC) - timedelta(microseconds=1),
    )
    assert scope.bounds(berlin) == (
        datetime(2026, 5, 31, 22, tzinfo=UTC),
        datetime(2026, 6, 1, 22, tzinfo=UTC) - timedelta(microseconds=1),
    )
    whole = (datetime(2026, 5, 1, tzinfo=UTC), datetime(2026, 7, 1, tzinfo=UTC))
    assert scope.window(berlin, *whole) == (
        datetime(2026, 5, 31, 22, tzinfo=UTC),
        datetime(2026, 6, 1, 22, tzinfo=UTC),
    )
    from monitor.portal.web import portal_templates

    page = portal_templates().env.get_template("sites.html")
    html = page.render(user=scope.user, sites=config.sites, csrf="", can={}, scope=scope)
    assert "from 2026-06-01 00:00:00 CDT to 2026-06-01 23:59:59 CDT</td>" in html
    assert "from 2026-06-01 00:00:00 CEST to 2026-06-01 23:59:59 CEST</td>" in html


def test_portal_defaults_bind_to_localhost() -> None:
    config = parse_config(MINIMAL)
    assert config.portal.bind == "127.0.0.1" and config.portal.accounts == ()


MISTAKES = [
    ("prot = 1\n", "portal.prot: unknown key"),
    ("port = 70000\n", "portal.port: must be at most 65535, got 70000"),
    ('tls_cert = "c.pem"\n', "portal.tls_key: tls_cert and tls_key go together"),
    (
        acct('role = "mayor"\n'),
        "portal.accounts[0].role: must be one of operator, town, inspector, got 'mayor'",
    ),
    (
        acct('role = "town"\npassword_hash = "hunter2"\n'),
        "portal.accounts[0].password_hash: expected a hash from `minewatch hash-password` (scrypt$...)",
    ),
    (acct('role = "town"\nsites = ["atlantis"]\n'), "portal.accounts[0].sites: unknown site 'atlantis'"),
    (
        acct('role = "town"\nnot_before = "2026-01-01"\n'),
        "portal.accounts[0].not_before: a time scope is for inspector accounts",
    ),
    (
        acct('role = "inspector"\nnot_after = "soon"\n'),
        "portal.accounts[0].not_after: expected a date or a time, e.g. 2026-12-15,"
        " 2026-12-15T17:20 (site time) or 2026-12-15T23:20Z; got 'soon'",
    ),
    (
        acct('role = "inspector"\nnot_before = "1960-01-01"\n'),
        "portal.accounts[0].not_before: '1960-01-01' is 1960-01-01 00:00 UTC, out of range:"
        " a time must lie from 1970-01-01 to 9998-12-31 (UTC)",
    ),
    ('[[portal.accounts]]\nname = "a"\nrole = "town"\n', "portal.accounts[0].password_hash: required"),
    (
        acct('role = "town"\ntoken_hash = "abc"\n'),
        "portal.accounts[0].token_hash: expected a hash from `minewatch hash-password --token` (sha256$...)",
    ),
]


# Named by the expected message: a section holds a salted hash, new at each import, and
# pytest-xdist refuses test ids that differ between its worker processes.
@pytest.mark.parametrize(("section", "expected"), MISTAKES, ids=[expected for _, expected in MISTAKES])
def test_portal_mistakes_name_the_key(section: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(portal(section))
    assert expected in info.value.problems


def test_passwords_and_tokens_are_stored_hashed_and_checked() -> None:
    assert HASH.startswith("scrypt$16384$8$1$") and "correct horse" not in HASH
    assert check_password("correct horse", HASH)
    assert not check_password("correct horsf", HASH)
    assert not check_password("correct horse", "scrypt$garbage")
    assert hash_password("correct horse") != HASH  # salted
    stored = hash_token("mw_abc")
    assert (
        check_token("mw_abc", stored) and not check_token("mw_abd", stored) and not check_token("mw_abc", "")
    )


def test_scope_is_the_one_site_check() -> None:
    from monitor.portal.data import NotFound

    config = parse_config(MINIMAL)
    site = config.sites[0].id
    assert Scope(User("a", "town", ()), config).site(site).id == site
    with pytest.raises(NotFound):
        Scope(User("a", "town", ("elsewhere",)), config).site(site)
    with pytest.raises(NotFound):
        Scope(User("a", "town", ()), config).site("nope")


def test_hash_password_command() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "monitor.cli", "hash-password"],
        input="a long secret\n",
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    line = run.stdout.strip()
    assert line.startswith('password_hash = "scrypt$') and check_password("a long secret", line.split('"')[1])
    short = subprocess.run(
        [sys.executable, "-m", "monitor.cli", "hash-password"],
        input="short\n",
        capture_output=True,
        text=True,
    )
    assert short.returncode == 2
    assert short.stderr == "minewatch hash-password: the password must have at least 8 characters\n"
    # Bytes that are not UTF-8 (no login form sends them) once ended in a UnicodeEncodeError
    # traceback; a line ending of a file made on Windows is no part of the password.
    for given, code, said in (
        (b"\xb2\xff\x80 random bytes\n", 2, "minewatch hash-password: the password is not UTF-8 text,"),
        ("p\u00e4ssw\u00f6rd long\r\n".encode(), 0, ""),
    ):
        piped = subprocess.run(
            [sys.executable, "-m", "monitor.cli", "hash-password"], input=given, capture_output=True
        )
        assert piped.returncode == code and piped.stderr.decode().startswith(said), piped.stderr
        if code == 0:
            hashed = piped.stdout.decode().split('"')[1]
            assert check_password("p\u00e4ssw\u00f6rd long", hashed)
    token = subprocess.run(
        [sys.executable, "-m", "monitor.cli", "hash-password", "--token"], capture_output=True, text=True
    )
    lines = token.stdout.splitlines()
    given = lines[0].split(": ")[1]
    assert check_token(given, lines[1].split('"')[1])


def test_serve_without_accounts_is_a_one_line_mistake(tmp_path: object) -> None:
    from pathlib import Path

    assert isinstance(tmp_path, Path)
    config = tmp_path / "c.toml"
    config.write_text(MINIMAL.replace("minewatch.db", str(tmp_path / "s.db")))
    run = subprocess.run(
        [sys.executable, "-m", "monitor.cli", "serve", "--config", str(config)],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 2
    assert run.stderr == f"minewatch serve: {config}: no [[portal.accounts]]: add one (see docs/PORTAL.md)\n"


def test_minute_cache_follows_the_chain_to_late_and_new_seconds(tmp_path: object) -> None:
    """The day view's minute LAeq cache: a second stored later (late or new) changes its minute."""
    import math
    from datetime import UTC, datetime, timedelta
    from pathlib import Path

    from monitor.journal.store import Store, to_us
    from monitor.portal.data import MinuteCache
    from rules.model import SoundLevels

    assert isinstance(tmp_path, Path)
    store = Store(tmp_path / "s.db")
    t0 = datetime(2026, 6, 1, 12, tzinfo=UTC)

    def put(sensor: str, second: int, laeq: float) -> None:
        level = SoundLevels("s1", sensor, t0 + timedelta(seconds=second), 1.0, laeq, laeq + 1, laeq + 10)
        with store.batch():
            store.append_sounds([(level, "levels", False)], t0 + timedelta(hours=1))

    for s in range(120):
        put("n1", s, 60.0)
    cache = MinuteCache()
    window = (to_us(t0), to_us(t0 + timedelta(hours=1)))
    minute = to_us(t0) // 60_000_000

    def rounded(values: dict[str, dict[int, float]]) -> dict[str, dict[int, float]]:
        return {s: {m: round(v, 6) for m, v in minutes.items()} for s, minutes in values.items()}

    first = rounded(cache.get(store.conn, "s1", ["n1", "n2"], *window))
    assert first["n1"] == {minute: 60.0, minute + 1: 60.0} and first["n2"] == {}
    put("n1", 61, 90.0)  # the same second again: the first kept, nothing changes
    put("n1", 130, 70.0)  # a new second in the third minute
    put("n2", 5, 50.0)  # another sensor's late second in the first minute
    second = rounded(cache.get(store.conn, "s1", ["n1", "n2"], *window))
    assert second["n1"][minute + 1] == 60.0 and second["n1"][minute + 2] == 70.0
    assert second["n2"] == {minute: 50.0}
    # The cached answer equals a fresh computation.
    fresh = rounded(MinuteCache().get(store.conn, "s1", ["n1", "n2"], *window))
    assert fresh == second
    assert math.isclose(second["n1"][minute], 60.0)
    store.close()


DAY_SITES = """
[storage]
path = "{db}"
[[sites]]
id = "s1"
timezone = "America/Chicago"
latitude = 45.27
longitude = -91.62
[[sites.sensors]]
id = "n1"
kind = "sound"
[[sites]]
id = "s2"
timezone = "America/Chicago"
latitude = 45.27
longitude = -91.62
[[sites.sensors]]
id = "n1"
kind = "sound"
"""


def day_store(tmp_path: object) -> tuple[Any, Any, Any]:
    """A two-site config on a temp store, a writer for seconds of n1 (as the daemon stores
    them, on its own connection) and the local day 2026-06-01."""
    from datetime import date
    from pathlib import Path

    from monitor.journal.store import Store
    from rules.model import SoundLevels

    assert isinstance(tmp_path, Path)
    db = tmp_path / "s.db"
    config = parse_config(DAY_SITES.format(db=db))
    writer = Store(db)

    def put(site: str, when: datetime, laeq: float) -> None:
        with writer.batch():
            writer.append_sounds(
                [(SoundLevels(site, "n1", when, 1.0, laeq, laeq + 1, laeq + 10), "levels", False)],
                when + timedelta(hours=1),
            )

    return config, put, date(2026, 6, 1)


def test_period_view_cache_is_recomputed_when_the_site_stores_a_record(tmp_path: object) -> None:
    """The cached day view (data and plot) is served while the site's chain head is unchanged
    and computed again, equal to an uncached one, once a new second is stored."""
    from monitor.portal.data import Portal

    config, put, day = day_store(tmp_path)
    noon = datetime(2026, 6, 1, 17, tzinfo=UTC)  # 12:00 in Chicago
    for s in range(60):
        put("s1", noon + timedelta(seconds=s), 60.0)
    portal = Portal(config)
    everyone = Scope(User("all", "inspector", ()), config)
    data, svg = portal.period_view(everyone, "s1", day_period(day, CHICAGO))
    assert [v for _, v in data["sound"]["n1"]] == [60.0]
    again, svg_again = portal.period_view(everyone, "s1", day_period(day, CHICAGO))
    assert again is data and svg_again is svg  # nothing stored: served from memory
    put("s2", noon, 99.0)  # another site's record leaves this view as it was
    assert portal.period_view(everyone, "s1", day_period(day, CHICAGO))[0] is data
    put("s1", noon + timedelta(minutes=5), 75.0)  # a new second of this site, in a new minute
    changed, changed_svg = portal.period_view(everyone, "s1", day_period(day, CHICAGO))
    assert [v for _, v in changed["sound"]["n1"]] == [60.0, 75.0]
    assert changed_svg != svg and changed_svg.count("<polyline") == 2  # a gap: two runs
    fresh, fresh_svg = Portal(config).period_view(everyone, "s1", day_period(day, CHICAGO))
    assert fresh == changed and fresh_svg == changed_svg


def test_period_view_cache_never_crosses_sites_or_time_scopes(tmp_path: object) -> None:
    """A view cached for one account is not handed to an account of another site (404 as
    before) nor to one whose time scope shows less of the day."""
    from monitor.portal.data import NotFound, Portal

    config, put, day = day_store(tmp_path)
    noon = datetime(2026, 6, 1, 17, tzinfo=UTC)
    put("s1", noon, 61.0)
    put("s2", noon - timedelta(hours=2), 52.0)  # 10:00 local
    put("s2", noon + timedelta(hours=2), 72.0)  # 14:00 local
    portal = Portal(config)
    everyone = Scope(User("all", "inspector", ()), config)
    only_s1 = Scope(User("one", "inspector", ("s1",)), config)
    afternoon = Scope(User("late", "inspector", ("s2",), not_before=noon), config)
    full, _ = portal.period_view(everyone, "s2", day_period(day, CHICAGO))
    assert [v for _, v in full["sound"]["n1"]] == [52.0, 72.0]
    with pytest.raises(NotFound):
        portal.period_view(only_s1, "s2", day_period(day, CHICAGO))
    mine, _ = portal.period_view(only_s1, "s1", day_period(day, CHICAGO))
    assert [v for _, v in mine["sound"]["n1"]] == [61.0]
    part, part_svg = portal.period_view(afternoon, "s2", day_period(day, CHICAGO))
    assert part["shown_from"] == "2026-06-01T17:00:00Z"
    assert [v for _, v in part["sound"]["n1"]] == [72.0]
    assert part_svg != portal.period_view(everyone, "s2", day_period(day, CHICAGO))[1]
    assert portal.period_view(everyone, "s2", day_period(day, CHICAGO))[0] is full


def test_findings_cache_follows_new_and_retracted_findings(tmp_path: object) -> None:
    """The cached findings (and the API's JSON of them) change when a finding is stored, a
    revision of one included, and only for the window and site they belong to."""
    import json

    from monitor.journal.store import Store
    from monitor.portal.data import Portal, local_day
    from rules.model import Finding, FindingKind

    config, _put, day = day_store(tmp_path)
    writer = Store(config.storage.path)
    noon = datetime(2026, 6, 1, 17, tzinfo=UTC)

    def finding(site: str, minute: int, summary: str) -> Finding:
        start = noon + timedelta(minutes=minute)
        return Finding(
            site, "noise", "6.D", FindingKind.VIOLATION, start, start + timedelta(minutes=1),
            "America/Chicago", summary, ("n1",), refs=("sound:n1:x",),
        )  # fmt: skip

    portal = Portal(config)
    everyone = Scope(User("all", "inspector", ()), config)
    start, end = local_day(day, ZoneInfo("America/Chicago"))
    assert portal.findings(everyone, "s1", start, end) == []
    first = finding("s1", 0, "too loud")
    writer.append_finding(first, noon + timedelta(hours=1))
    writer.append_finding(finding("s2", 1, "elsewhere"), noon + timedelta(hours=1))
    found = portal.findings(everyone, "s1", start, end)
    assert [(f["summary"], f["sensors"], f["start"]) for f in found] == [
        ("too loud", ["n1"], "2026-06-01T17:00:00Z")
    ]
    assert json.loads(portal.findings_json(everyone, "s1", start, end)) == found
    writer.append_finding(first, noon + timedelta(hours=2), retracted=True)
    assert portal.findings(everyone, "s1", start, end) == []
    assert portal.findings_json(everyone, "s1", start, end) == b"[]"
    assert [f["summary"] for f in portal.findings(everyone, "s2", start, end)] == ["elsewhere"]
    writer.close()


def test_portal_holds_no_read_transaction_between_requests(tmp_path: object) -> None:
    """The portal's long-lived per-thread connection leaves no statement open after a day view
    or a findings read: a WAL checkpoint (the daemon's) can then copy and truncate everything."""
    import sqlite3

    from monitor.portal.data import Portal, local_day

    config, put, day = day_store(tmp_path)
    noon = datetime(2026, 6, 1, 17, tzinfo=UTC)
    for s in range(0, 600, 7):
        put("s1", noon + timedelta(seconds=s), 60.0 + s % 9)
    portal = Portal(config)
    everyone = Scope(User("all", "inspector", ()), config)
    portal.period_view(everyone, "s1", day_period(day, CHICAGO))
    portal.findings_json(everyone, "s1", *local_day(day, ZoneInfo("America/Chicago")))
    put("s1", noon + timedelta(hours=1), 70.0)  # WAL frames written after the portal's reads
    other = sqlite3.connect(config.storage.path, timeout=5)
    busy, _, _ = other.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    other.close()
    assert busy == 0
