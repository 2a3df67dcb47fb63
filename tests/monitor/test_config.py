"""Configuration: the shipped example is valid; every mistake is reported with its key path."""

from __future__ import annotations

from pathlib import Path

import pytest

from monitor.cli import main
from monitor.config import load_config, parse_config
from monitor.errors import ConfigError
from tests.support.config_samples import MINIMAL
from tests.support.paths import REPO

EXAMPLE = REPO / "deploy" / "dovre-quarry.toml"


def test_example_config_is_valid(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MINEWATCH_MQTT_PASSWORD", "secret")
    config = load_config(EXAMPLE)
    site = config.sites[0]
    kinds = [s.kind.value for s in site.sensors]
    assert kinds.count("sound") == 4 and kinds.count("light") == 2
    assert kinds.count("sky") == 1 and kinds.count("weather") == 1
    assert len(site.gates) == 2
    assert site.timezone == "America/Chicago" and site.preexisting
    assert config.broker.password.value == "secret"
    assert "secret" not in repr(config.broker)
    ctx = site.context()
    assert ctx.sensors["n4"].at_boundary  # conveyor perimeter counts as boundary (6.G)


def test_check_config_command_ok(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("MINEWATCH_MQTT_PASSWORD", "x")
    assert main(["check-config", str(EXAMPLE)]) == 0
    assert "OK" in capsys.readouterr().out


def test_five_mistakes_all_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(
        """
[broker]
url = "http://localhost:1883"
[storage]
retention_dayz = 30
[[sites]]
id = "s1"
timezone = "America/Chicgo"
latitude = 145.0
longitude = -91.62
[[sites.sensors]]
id = "n1"
kind = "microphone"
"""
    )
    assert main(["check-config", str(bad)]) == 2
    err = capsys.readouterr().err
    for expected in (
        "broker.url: expected mqtt://host[:port] or mqtts://host[:port], got 'http://localhost:1883'",
        "storage.retention_dayz: unknown key",
        "sites[0].timezone: unknown time zone 'America/Chicgo'",
        "sites[0].latitude: must be at most 90, got 145",
        "sites[0].sensors[0].kind: must be one of sound, light, sky, weather, turbidity, seismograph,"
        " got 'microphone'",
    ):
        assert expected in err
    assert "5 problem(s)" in err


@pytest.mark.parametrize(
    ("snippet", "expected"),
    [
        ('[daemon]\nclock = "sundial"', "daemon.clock: must be one of wall, data, got 'sundial'"),
        ('[daemon]\nlateness_s = "soon"', "daemon.lateness_s: expected a number, got 'soon'"),
        # Durations past a year passed, and a lateness of 1e300 s then failed the site's judging
        # every round (Python's date arithmetic overflows); MQTT's fields have sizes of their own.
        ("[daemon]\nlateness_s = 1e300", "daemon.lateness_s: must be at most 86400 s, got 1e+300"),
        ("[daemon]\nstatus_interval_s = 1e308", "daemon.status_interval_s: must be at most 316224000 s"),
        ("[alerts]\nretry_max_s = 1e20", "alerts.retry_max_s: must be at most 316224000 s"),
        ("[storage]\nretention_days = 1e9", "storage.retention_days: must be at most 36600 days"),
        (
            "[broker]\nsession_expiry_s = 99999999999999999",
            "broker.session_expiry_s: must be at most 4294967295 s",
        ),
        ("[broker]\nkeepalive_s = 70000", "broker.keepalive_s: must be at most 65535 s"),
        (
            '[storage.influxdb]\nversion = 2\nurl = "http://x:8086"',
            "storage.influxdb.org: required for the v2 API",
        ),
        (
            '[storage.influxdb]\nversion = 1\nurl = "http://x:8086"',
            "storage.influxdb.database: required for the v1 API",
        ),
        (
            '[storage.influxdb]\nversion = 3\nurl = "http://x:8086"\nbucket="b"\norg="o"',
            "storage.influxdb.version: must be 1",
        ),
        (
            '[broker]\npassword_env = "MINEWATCH_NOT_SET_ANYWHERE"',
            "broker.password_env: environment variable",
        ),
        ('[broker]\npassword = "a"\npassword_file = "/x"', "broker.password: give only one of"),
        ('[broker]\nprotocol = "4"', "broker.protocol: must be one of 5, 3.1.1"),
        # A prefix with a wildcard passed, then the daemon subscribed to nothing and the edge
        # publisher died in paho (a level separator breaks the daemon's own topic tests).
        *(
            (
                f"[broker]\ntopic_prefix = {prefix!r}",
                f"broker.topic_prefix: {prefix!r} is not one topic level",
            )
            for prefix in ("a/+/#", "", "acme/minewatch", "$SYS", "mine#")
        ),
        ('[daemon]\nsites = ["nowhere"]', "daemon.sites: unknown site 'nowhere'"),
        (
            '[[recipients]]\nname = "x"\n[[recipients.channels]]\ntype = "email"',
            "recipients[0].channels[0].to:",
        ),
        (
            '[[recipients]]\nname = "x"\n[[recipients.channels]]\ntype = "webhook"\nurl = "ftp://x"',
            "webhook needs an http(s) URL",
        ),
    ],
)
def test_single_mistakes(snippet: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(snippet + "\n" + MINIMAL)
    assert any(expected in p for p in info.value.problems), info.value.problems


@pytest.mark.parametrize(
    ("sensor_extra", "expected"),
    [
        ('gates = ["nowhere"]', "sites[0].sensors[1].gates: unknown gate 'nowhere'"),
        ("require_signature = true", "sites[0].sensors[1].require_signature: needs signing_key"),
        ('id = "n1"', "duplicate sensor id 'n1'"),
        ('id = ""', "sites[0].sensors[1].id: must not be empty"),
        (
            "calibration = { full_scale_db = 500 }",
            "sites[0].sensors[1].calibration.full_scale_db: must be at most 200",
        ),
        ('placement = "roof"', "sites[0].sensors[1].placement: must be one of"),
    ],
)
def test_sensor_mistakes(sensor_extra: str, expected: str) -> None:
    text = (
        MINIMAL
        + "[[sites.sensors]]\n"
        + ('id = "n2"\n' if "id =" not in sensor_extra else "")
        + sensor_extra
        + "\n"
    )
    with pytest.raises(ConfigError) as info:
        parse_config(text)
    assert any(expected in p for p in info.value.problems), info.value.problems


def test_unknown_profile_and_bad_agreement() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(MINIMAL.replace('id = "s1"', 'id = "s1"\nprofile = "atlantis"'))
    assert any(p.startswith("sites[0].profile:") for p in info.value.problems), info.value.problems
    text = MINIMAL.replace('id = "s1"', 'id = "s1"\nagreement = { "noise.limit_dbb" = 85 }')
    with pytest.raises(ConfigError) as info:
        parse_config(text)
    assert any(p.startswith("sites[0].agreement:") and "limit_dbb" in p for p in info.value.problems)


def test_a_problem_in_the_profiles_file_is_placed_under_profile_not_agreement(tmp_path: Path) -> None:
    """A value in the profile's own file was reported under sites[0].agreement, which the site
    may not even have; it is the profile's. An override's problem stays the agreement's."""
    from tests.support.paths import REPO

    dovre = (REPO / "rules" / "profiles" / "dovre.toml").read_text()
    profile = tmp_path / "town.toml"
    profile.write_text(dovre.replace("limit_db = 80.0", "limit_db = nan"))
    text = MINIMAL.replace('id = "s1"', f'id = "s1"\nprofile = "{profile}"')
    with pytest.raises(ConfigError) as info:
        parse_config(text)
    assert "sites[0].profile: standards.noise.params.limit_db: expected a finite number, got nan" in (
        info.value.problems
    )
    overridden = text.replace('id = "s1"', 'id = "s1"\nagreement = { "noise.limit_db" = "loud" }')
    with pytest.raises(ConfigError) as info:
        parse_config(overridden)
    assert "sites[0].agreement: noise.limit_db: expected a number, got 'loud'" in info.value.problems


@pytest.mark.parametrize("area", ['"12000"', "true", "-5", "nan"])
def test_a_sites_area_that_is_no_area_is_refused_naming_the_flag(area: str) -> None:
    """land-disturbing's 28-5(d) sediment standard reads the site fact disturbed_area_sqft as the
    area in square feet; any other value was taken as no area given, the site's findings saying
    so only once turbidity rose."""
    site = 'id = "s1"\nprofile = "land-disturbing"'
    with pytest.raises(ConfigError) as info:
        parse_config(MINIMAL.replace('id = "s1"', f"{site}\nflags = {{ disturbed_area_sqft = {area} }}"))
    assert [p for p in info.value.problems if "flags" in p] == [
        "sites[0].flags.disturbed_area_sqft: expected the site's area in square feet, 0 or more, got"
        f" {_toml_value(area)!r}"
    ], info.value.problems
    given = parse_config(MINIMAL.replace('id = "s1"', f"{site}\nflags = {{ disturbed_area_sqft = 12000 }}"))
    assert given.sites[0].flags == {"disturbed_area_sqft": 12000}


def _toml_value(text: str) -> object:
    import tomllib

    return tomllib.loads(f"v = {text}")["v"]


def test_secret_from_file(tmp_path: Path) -> None:
    secret = tmp_path / "pw"
    secret.write_text("hunter2\n")
    config = parse_config(f'[broker]\npassword_file = "{secret}"\n' + MINIMAL)
    assert config.broker.password.value == "hunter2"


def test_not_toml() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config("[[sites]\n", "x.toml")
    assert info.value.problems[0].startswith("x.toml: not valid TOML")


# ------------------------------------------------------------------------ [town] and the operator's address


def test_town_and_operator_address_are_read_for_notices() -> None:
    text = (
        '[town]\nofficer = "Robin Clerk"\ntitle = "Town Clerk"\ncontact = "Town Hall\\nclerk@example.org"\n'
        + MINIMAL.replace(
            "latitude = 45.27",
            'operator = "Acme"\noperator_address = "7 Quarry Rd\\nDovre"\nlatitude = 45.27',
        )
    )
    config = parse_config(text)
    assert (config.town.officer, config.town.title) == ("Robin Clerk", "Town Clerk")
    assert config.town.contact.splitlines() == ["Town Hall", "clerk@example.org"]
    assert config.sites[0].operator_address == "7 Quarry Rd\nDovre"
    assert not parse_config(MINIMAL).town.configured  # optional: notices then say it is missing


@pytest.mark.parametrize(
    ("town", "expected"),
    [
        ('title = "Clerk"\ncontact = "Town Hall"', "town.officer: required"),
        ('officer = " "\ntitle = "Clerk"\ncontact = "Town Hall"', "town.officer: must not be empty"),
        (
            'officer = "A"\ntitle = "Clerk\\nand Treasurer"\ncontact = "x"',
            "town.title: at most 1 line, got 2",
        ),
        ('officer = "A"\ntitle = "Clerk"', "town.contact: required"),
        ('officer = "A"\ntitle = "Clerk"\ncontact = "x"\nphone = "1"', "town.phone: unknown key"),
        ('officer = 7\ntitle = "Clerk"\ncontact = "x"', "town.officer: expected a string, got 7"),
    ],
)
def test_town_mistakes(town: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config("[town]\n" + town + "\n" + MINIMAL)
    assert any(expected in p for p in info.value.problems), info.value.problems


def test_shipped_configurations_name_the_towns_officer_and_the_operators_address(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MINEWATCH_MQTT_PASSWORD", "secret")
    for path in (EXAMPLE, REPO / "sensors" / "demo" / "dovre-demo.toml"):
        config = load_config(path)
        assert config.town.configured and config.town.title and config.town.contact, path
        assert config.sites[0].operator_address, path


def test_site_id_underscore_is_reserved_for_rejections_of_no_site() -> None:
    """docs/PROTOCOL.md: <prefix>/_/rejected carries rejections under no configured site."""
    with pytest.raises(ConfigError) as info:
        parse_config(MINIMAL.replace('id = "s1"', 'id = "_"'))
    assert any(p.startswith("sites[0].id: '_' is reserved") for p in info.value.problems), info.value.problems


def test_broker_ca_file_must_hold_a_certificate(tmp_path: Path) -> None:
    """A ca_file that is no certificate passed check-config and ended `check-topics` (and the
    daemon's first connection) in an ssl.SSLError traceback from paho's tls_set."""
    from tests.support.servers import self_signed_cert

    cert, key = self_signed_cert(tmp_path)
    binary = tmp_path / "random.bin"
    binary.write_bytes(bytes([0xB2, 0xFF]) * 32)
    text = tmp_path / "notes.txt"
    text.write_text("not a certificate\n")
    broker = '[broker]\nurl = "mqtts://broker.example:8883"\nca_file = "{}"\n'
    assert parse_config(broker.format(cert) + MINIMAL).broker.ca_file == str(cert)
    for path, said in (
        (tmp_path / "missing.crt", "no such file"),
        (tmp_path, "is a folder, not a CA certificate file"),
        (binary, "cannot read: not UTF-8 text"),
        (text, "holds no certificate TLS can use (expected PEM, -----BEGIN CERTIFICATE-----)"),
        (key, "holds no certificate TLS can use (expected PEM, -----BEGIN CERTIFICATE-----)"),  # a slip
    ):
        with pytest.raises(ConfigError) as info:
            parse_config(broker.format(path) + MINIMAL)
        assert info.value.problems == [f"broker.ca_file: {path}: {said}"]


def test_an_id_beginning_with_a_hyphen_is_refused() -> None:
    """A sensor id "-n1" passed check-config: the CLI then took it for an option (``minewatch
    levels --sensor -n1``: "expected one argument") and a spreadsheet opening the portal's or a
    bundle's CSV read its cell as a formula."""
    for old, new, key in (
        ('id = "s1"', 'id = "-s1"', "sites[0].id"),
        ('id = "n1"', 'id = "-n1"', "sites[0].sensors[0].id"),
    ):
        with pytest.raises(ConfigError) as info:
            parse_config(MINIMAL.replace(old, new, 1))
        said = new.split('"')[1]
        assert f"{key}: {said!r} must begin with a letter, a digit or '_', not '-'" in info.value.problems
    assert parse_config(MINIMAL.replace('id = "n1"', 'id = "n-1"', 1)).sites[0].sensors[0].id == "n-1"


def test_an_empty_site_id_is_refused() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(MINIMAL.replace('id = "s1"', 'id = ""', 1))
    assert any(p.startswith("sites[0].id: must not be empty") for p in info.value.problems), (
        info.value.problems
    )


def test_reversed_bounds_and_a_port_past_65535_are_refused() -> None:
    """Each passed check-config: an inspector's scope that holds nothing, retries whose most is
    below their first wait, and an SMTP port no TCP has."""
    text = """
[alerts]
retry_base_s = 100
retry_max_s = 1
[[recipients]]
name = "Town clerk"
channels = [{type = "email", to = ["c@d.e"], smtp_host = "h", smtp_port = 70000, sender = "m@q.e"}]
""" + _inspector("2026-12-10", "2026-12-01")
    with pytest.raises(ConfigError) as info:
        parse_config(text + MINIMAL)
    problems = info.value.problems
    for expected in (
        "alerts.retry_max_s: 1 is below retry_base_s (100)",
        "recipients[0].channels[0].smtp_port: must be at most 65535, got 70000",
        "portal.accounts[0].not_after: 2026-12-01 is before not_before (2026-12-10): the scope holds nothing",
    ):
        assert expected in problems, problems


def test_a_site_id_used_twice_is_named() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(MINIMAL + MINIMAL)
    assert "sites: site ids must be unique; 's1' is used more than once" in info.value.problems


def test_the_log_level_is_read_in_either_case() -> None:
    from monitor.cli import build_parser

    args = build_parser("run").parse_args(["run", "--config", "x.toml", "--log-level", "debug"])
    assert args.log_level == "DEBUG"


def _inspector(not_before: str, not_after: str) -> str:
    from monitor.credentials import hash_password

    return f"""
[portal]
[[portal.accounts]]
name = "insp"
role = "inspector"
sites = ["s1"]
password_hash = "{hash_password("a long enough password")}"
not_before = "{not_before}"
not_after = "{not_after}"
"""


# fmt: off
SCOPE_CASES = [
    # A date alone as not_after is the end of that day, as the portal reads it: the afternoon holds.
    pytest.param("2026-12-10T12:00:00Z", "2026-12-10", None, id="from-noon-to-the-end-of-that-day"),
    pytest.param("2026-12-10", "2026-12-10", None, id="one-whole-day"),
    pytest.param("2026-12-10T12:00:00Z", "2026-12-10T11:59:59Z",
                 "2026-12-10T11:59:59Z is before not_before (2026-12-10T12:00:00Z)", id="a-second-before"),
    pytest.param("2026-12-11", "2026-12-10", "2026-12-10 is before not_before (2026-12-11)",
                 id="a-day-before"),
    # A date is the site's local day: 2026-12-10 at s1 (CST) ends at 05:59:59Z on the 11th, so a
    # scope from 03:00Z that day holds three hours there (in UTC it held nothing).
    pytest.param("2026-12-11T03:00:00Z", "2026-12-10", None, id="a-local-day-ends-after-utc-midnight"),
    pytest.param("2026-12-11T07:00:00Z", "2026-12-10",
                 "2026-12-10 is before not_before (2026-12-11T07:00:00Z) at site 's1' (America/Chicago)",
                 id="after-the-local-day"),
]
# fmt: on


@pytest.mark.parametrize(("not_before", "not_after", "refused"), SCOPE_CASES)
def test_an_inspectors_scope_is_judged_as_the_portal_reads_it(
    not_before: str, not_after: str, refused: str | None
) -> None:
    """Each scope time is parsed once, into what the portal's user holds (monitor.portal.data.User):
    check-config compared the times as parsed a second time, a date in not_after as its 00:00, and
    refused a scope from noon to the end of that day the portal reads as twelve hours."""
    from monitor.portal.data import User

    text = _inspector(not_before, not_after) + MINIMAL
    if refused is not None:
        with pytest.raises(ConfigError) as info:
            parse_config(text)
        assert info.value.problems == [f"portal.accounts[0].not_after: {refused}: the scope holds nothing"]
        return
    first, last = User.of(parse_config(text).portal.accounts[0]).bounds("America/Chicago")
    assert first is not None and last is not None and first < last


def test_an_inspectors_local_time_must_be_one_moment_at_each_of_its_sites() -> None:
    """A scope time without an offset is the site's local time, read as every other time a
    person types (monitor.times): one the clocks skip, or one that occurs twice, has no single
    reading there and is refused naming the site, before the portal meets it."""
    text = _inspector("2026-11-01T01:30", "2026-11-02") + MINIMAL
    with pytest.raises(ConfigError) as info:
        parse_config(text)
    (problem,) = info.value.problems
    assert problem.startswith("portal.accounts[0].not_before: at site 's1' (America/Chicago): ")
    assert "'2026-11-01T01:30' occurs twice" in problem and "-05:00" in problem and "-06:00" in problem
    parse_config(_inspector("2026-11-01T01:30-05:00", "2026-11-02") + MINIMAL)  # its offset given: one moment


@pytest.mark.parametrize(
    ("snippet", "expected"),
    [
        ('[broker]\nurl = "mqtt://[::1"', "broker.url: expected mqtt://host[:port] or mqtts://host[:port]"),
        ('[broker]\nurls = ["mqtt://a", "mqtt://[b"]', "broker.urls[1]: expected mqtt://host[:port]"),
        (
            '[storage.influxdb]\nversion = 2\nurl = "http://[::1:8086"\norg = "o"\nbucket = "b"',
            "storage.influxdb.url: expected http(s)://host:port",
        ),
        (
            '[[recipients]]\nname = "x"\n[[recipients.channels]]\ntype = "webhook"\nurl = "https://[town"',
            "recipients[0].channels[0].url: a webhook needs an http(s) URL",
        ),
    ],
)
def test_a_url_with_an_unclosed_bracket_is_one_line_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], snippet: str, expected: str
) -> None:
    """urllib refuses '[' without its ']' (an IPv6 address half typed) with a ValueError, which
    ended every command loading such a configuration in a traceback, exit 1."""
    path = tmp_path / "m.toml"
    path.write_text(snippet + "\n" + MINIMAL)
    assert main(["check-config", str(path)]) == 2
    out = capsys.readouterr()
    text = out.out + out.err
    assert expected in text and "is not a URL (Invalid IPv6 URL)" in text, text
    assert "Traceback" not in text


def test_a_toml_date_where_text_is_expected_says_to_quote_it(tmp_path: Path) -> None:
    """TOML reads `not_before = 2026-12-01` (no quotes) as a date, and the problem showed
    Python's repr of it (expected a string, got datetime.date(2026, 12, 1)), not what to write."""
    from monitor.credentials import hash_password

    account = (
        f'\n[portal]\nsecret_key = "k"\n[[portal.accounts]]\nname = "ins"\nrole = "inspector"\n'
        f'password_hash = "{hash_password("x")}"\nnot_before = 2026-12-01\nnot_after = 2026-12-31T23:59:00\n'
    )
    with pytest.raises(ConfigError) as info:
        parse_config(MINIMAL + account)
    assert info.value.problems == [
        "portal.accounts[0].not_before: expected a string, got 2026-12-01, a TOML date: write it in quotes,"
        ' "2026-12-01"',
        "portal.accounts[0].not_after: expected a string, got 2026-12-31T23:59:00, a TOML date: write it in"
        ' quotes, "2026-12-31T23:59:00"',
    ], info.value.problems
    quoted = account.replace("2026-12-01", '"2026-12-01"')
    quoted = quoted.replace("2026-12-31T23:59:00", '"2026-12-31T23:59:00"')
    assert parse_config(MINIMAL + quoted).portal is not None


@pytest.mark.parametrize(
    ("snippet", "expected"),
    [
        (
            "[alerts]\nmin_gap_s = " + "9" * 5000,
            "an integer of more than 4,300 digits, more than any key takes",
        ),
        ("nested = " + "[" * 5000 + "]" * 5000, "arrays or tables nested too deeply to read"),
    ],
    ids=["5000-digit-integer", "nested-5000-deep"],
)
def test_toml_python_cannot_read_is_one_line_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], snippet: str, expected: str
) -> None:
    """tomllib raises a bare ValueError for an integer past Python's 4,300 digits and a
    RecursionError for arrays nested thousands deep: check-config (and every command loading the
    configuration) ended in a traceback, exit 1. Each is the file's TOML mistake (rules.toml_text)."""
    path = tmp_path / "m.toml"
    path.write_text(MINIMAL + "\n" + snippet + "\n")
    assert main(["check-config", str(path)]) == 2
    out = capsys.readouterr()
    text = out.out + out.err
    assert f"not valid TOML: {expected}" in text, text
    assert "Traceback" not in text and len(text.splitlines()) <= 2, text
