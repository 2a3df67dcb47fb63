"""Another town's profile renders with its own sections on every surface.

A site on tests/data/profiles/fernhill.toml, a made-up town whose ordinance numbers its sections
its own way ("§ 4.2" noise, "§ 4.5(b)" light trespass, "§ 4.7" blasting hours, "§ 9.1(a)" the
cure period, "§ 9.1(b)" the citation) and sets other limits, runs through the real paths:
`minewatch demo`'s runner (Mosquitto, `minewatch run`, `minewatch simulate`, notices, plots,
blast reports, the evidence bundle) with the demo's site configuration and its dovre-short
scenario turned into Fernhill's (the profile path, and no Dovre word in what the site supplies),
then `minewatch notices`, `status`, `report` and the portal's pages. Each surface must cite
Fernhill's sections and none of Dovre's (13.3.A/B, 6.C.x, 6.D, 6.F, 6.G, SPS 307, Wis. Stat.,
1.4.C), each as written: never "section § 4.2" (rules.citation words a bare number only). No
part is mocked: the runner's two site-configuration readers are pointed at the turned
configuration (monkeypatch), as an operator would edit the file.
"""

from __future__ import annotations

import io
import re
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime
from importlib import resources
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from monitor.config import load_config, parse_config
from monitor.demo import runner
from monitor.notify.plots import plot_limits
from rules.profile import load_profile
from tests.support.paths import REPO
from tests.support.portal_server import on_port, portal_serving

FERNHILL = REPO / "tests" / "data" / "profiles" / "fernhill.toml"
SITE = runner.SITE
# Dovre's citations, which a Fernhill site must never read, and the word "section" before a
# section mark ("section § 4.2"): Fernhill's sections are cited as written.
WRONG = re.compile(
    r"Dovre|13\.3|\b6\.[A-G](?:\.\d)?\b|SPS 307|990\.001|1\.4\.C|Wis\. Stat|Wisconsin|\b[Ss]ection\s+§"
)


def wrong_citations(text: str) -> list[str]:
    """Each Dovre citation or "section §" in ``text`` with some words around it (empty: none)."""
    return [text[max(0, m.start() - 70) : m.end() + 30] for m in WRONG.finditer(text)]


def as_fernhill(text: str) -> str:
    """The demo's site configuration or scenario as Fernhill's operator would write it."""
    text = text.replace('profile = "dovre"', f'profile = "{FERNHILL}"')
    text = text.replace('section = "6.G"', 'section = "§ 4.3"').replace("(section 6.G)", "(§ 4.3)")
    text = text.replace("Barron County, Wisconsin", "Fernhill County").replace("Wisconsin", "Fernhill County")
    return text.replace("Dovre", "Fernhill")


def page_text(html_text: str) -> str:
    import html

    return html.unescape(re.sub(r"<[^>]+>", " ", html_text))


@dataclass
class Town:
    folder: Path
    config: Path
    console: str
    day: date

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "monitor.cli", *args],
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=300,
        )


@pytest.fixture(scope="module")
def town(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Town]:
    root = tmp_path_factory.mktemp("fernhill")
    scenario = root / "fernhill-short.toml"
    shipped = resources.files("sensors").joinpath("scenarios/dovre-short.toml").read_text()
    scenario.write_text(as_fernhill(shipped))
    site_text = as_fernhill(resources.files("sensors").joinpath(runner.DEMO_CONFIG).read_text())
    write_config = runner.Demo.write_config

    def fernhill_config(demo: runner.Demo, port: int) -> None:
        write_config(demo, port)
        # An operations agreement gives this site 400 days to correct, so that the notices of a day
        # last year are still in their cure period (an early escalation is refused, as said).
        site_agreement = "[sites.agreement]\ncure_days = 400\n\n[[sites.town_contacts]]"
        text = as_fernhill(demo.config.read_text()).replace("[[sites.town_contacts]]", site_agreement, 1)
        demo.config.write_text(text)

    day = date(datetime.now(ZoneInfo("America/Chicago")).year - 1, 12, 10)  # lights in the dark
    out = io.StringIO()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(runner, "_site_config", lambda: parse_config(site_text, "fernhill").site(SITE))
        patch.setattr(runner.Demo, "write_config", fernhill_config)
        # Exit 1: the demo's expectations are Dovre's story (a blast at 15:40 is late there only).
        runner.run_demo(root / "demo", str(scenario), "max", None, out, day=day)
    folder = root / "demo"
    assert list((folder / "notices").glob("FRN-*.md")), out.getvalue()
    yield Town(folder, folder / "minewatch.toml", out.getvalue(), day)


def test_the_demo_console_names_the_profile_and_its_sections(town: Town) -> None:
    assert "(Fernhill Township quarry ordinance)" in town.console
    assert re.search(r"FRN-\d{4}-\d{4}  Quarry sound at the property line \(§ 4\.2\)", town.console)
    assert wrong_citations(town.console) == []


def test_notice_documents_cite_the_profiles_cure_and_citation_sections(town: Town) -> None:
    documents = sorted((town.folder / "notices").glob("FRN-*.md"))
    assert len(documents) >= 4
    for document in documents:
        text = document.read_text()
        assert wrong_citations(text) == [], document.name
        assert "Under § 9.1(a) the Operator is granted 400 days" in text, document.name
        assert "written explanation of the need for additional time" not in text  # Dovre's 13.3.A words
        assert "the Township may issue a citation (§ 9.1(b))" in text, document.name
    noise = next(d.read_text() for d in documents if "Quarry sound at the property line" in d.read_text())
    assert "§ 4.2: Quarry sound at the property line" in noise
    assert "Standard violated: § 4.2, Quarry sound at the property line" in noise
    assert "the ordinance's own, § 4.2" in noise  # its limit's source, a section of the ordinance
    light = next(d.read_text() for d in documents if "Light spilling over" in d.read_text())
    # The lighting rules cite the profile's temporary lighting section, not Dovre's words for 6.C.6.
    assert "first 20 days of temporary lighting (§ 4.5(f))" in light
    blast = next(d.read_text() for d in documents if "Standard violated: § 4.7(c)" in d.read_text())
    assert "counted as elapsed time, Sundays and holidays included (minewatch reading" in blast
    assert "Owners: minewatch checks the owners the Town listed for the site" in blast
    for html_document in (town.folder / "notices").glob("FRN-*.html"):
        assert wrong_citations(page_text(html_document.read_text())) == [], html_document.name


def test_alerts_and_notice_records_cite_the_profiles_sections(town: Town) -> None:
    import sqlite3

    conn = sqlite3.connect(town.folder / "minewatch.db")
    try:
        alerts = [r[0] for r in conn.execute("SELECT message FROM alerts")]
        changes = [r[0] for r in conn.execute("SELECT note FROM notice_changes")]
        notices = [r[0] for r in conn.execute("SELECT data FROM notices")]
    finally:
        conn.close()
    for text in [*alerts, *changes, *notices]:
        assert wrong_citations(text) == [], text
    assert any("(§ 9.1(a), 400 days)" in c for c in changes), changes
    assert all('"citation_section":"§ 9.1(b)"' in n for n in notices), notices


def test_the_cli_refuses_an_early_escalation_citing_the_profiles_citation_section(town: Town) -> None:
    done = town.cli("notices", "escalate", f"FRN-{town.day.year}-0001", "--config", str(town.config),
                    "--note", "not corrected", "--by", "clerk")  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "has not passed, and a citation (§ 9.1(b)) follows a failure to correct" in done.stderr
    assert wrong_citations(done.stderr) == []
    helps = [town.cli("notices", "--help").stdout] + [
        town.cli("notices", action, "--help").stdout for action in ("request-extension", "extend", "escalate")
    ]
    for text in helps:
        assert wrong_citations(text) == [], text


def test_status_and_the_report_cite_the_profiles_sections(town: Town, tmp_path: Path) -> None:
    status = town.cli("status", "--config", str(town.config))
    assert status.returncode == 0, status.stderr
    assert wrong_citations(status.stdout) == []
    made = town.cli("report", "--config", str(town.config), "--day", str(town.day), "--out", str(tmp_path))
    assert made.returncode == 0, made.stderr
    [table] = tmp_path.glob("*.csv")
    text = table.read_text()
    assert "Temporary lighting (§ 4.5(f)): 0 day(s) used in the period (none); 0 of 20 days" in text
    assert wrong_citations(text) == []


def test_blast_reports_head_their_findings_with_the_profiles_blasting_sections(town: Town) -> None:
    reports = sorted((town.folder / "blast-reports").glob("*.html"))
    assert reports
    for report in reports:
        text = page_text(report.read_text())
        assert "Findings (§ 4.7, § 4.7(c), § 4.7(d), § 4.7(e), § 4.7(f)): window, sunset, notice" in text
        assert wrong_citations(text) == [], report.name


def test_the_evidence_bundle_says_the_profiles_sections(town: Town) -> None:
    with zipfile.ZipFile(town.folder / "evidence-dovre-quarry.zip") as bundle:
        texts = {
            name: bundle.read(name).decode()
            for name in bundle.namelist()
            # what the site supplied (its profile and configuration) and the measurements aside
            if name.endswith((".json", ".txt")) and not name.startswith("profile/")
        }
    assert "records/findings.json" in texts and "README.txt" in texts
    for name, text in texts.items():
        assert wrong_citations(text) == [], name
    assert '"section": "§ 4.5(b)"' in texts["records/findings.json"]
    # The bundle's day plots draw each limit labelled by the profile's section (plots.plot_limits,
    # which already read it from the profile).
    site = load_config(town.config).site(SITE)
    assert site is not None
    labels = [label for lines in plot_limits(site, load_profile(site.profile)).values() for label, _ in lines]
    assert "§ 4.2 limit 75 dB (LAeq)" in labels and "§ 4.3 limit 75 dB (LAeq)" in labels
    assert "§ 4.5(b) limit 0.5 lux at night, longer than 300 s" in labels
    assert [label for label in labels if wrong_citations(label)] == []


def test_portal_pages_cite_the_profiles_sections(town: Town) -> None:
    from tests.support.portal_server import Client, Portal

    text = town.config.read_text()

    def config_for(port: int) -> Path:
        town.config.write_text(on_port(text, port))
        return town.config

    notice = f"FRN-{town.day.year}-0001"
    own_pages = {"operator": [f"/sites/{SITE}/status"], "town": [f"/sites/{SITE}/day?date={town.day}"]}
    with portal_serving(config_for, town.folder / "portal-test.log") as (port, _):
        seen: dict[str, str] = {}
        for name, password in (("operator", "demo-operator"), ("town", "demo-town")):
            client = Client(Portal(town.folder, port=port))
            assert client.login(name, password).status == 303
            for path in (
                "/",
                f"/sites/{SITE}/plan",
                f"/sites/{SITE}/notices",
                f"/sites/{SITE}/alerts",
                f"/notices/{notice}",
                f"/notices/{notice}/document.html",
                f"/api/v1/sites/{SITE}/findings?date={town.day}",
                f"/api/v1/sites/{SITE}/notices",
                f"/api/v1/notices/{notice}",
                f"/sites/{SITE}/blasts/b-{town.day:%m%d}-2/report.html",
                *own_pages[name],
            ):
                reply = client.get(path)
                assert reply.status == 200, (name, path, reply.status)
                seen[f"{name} {path}"] = page_text(reply.body)
    for where, body in seen.items():
        assert wrong_citations(body) == [], where
    # The operator's request for more time cites the profile's cure section; the plan's parcel
    # legend the parcel's own section from the site configuration.
    assert "Request an extension of the cure deadline (§ 9.1(a))" in seen[f"operator /notices/{notice}"]
    assert "parcel (e.g. a conveyor's, § 4.3)" in seen[f"town /sites/{SITE}/plan"]
    assert "§ 4.2" in seen[f"town /api/v1/sites/{SITE}/findings?date={town.day}"]
    blast = seen[f"town /sites/{SITE}/blasts/b-{town.day:%m%d}-2/report.html"]
    assert "Findings (§ 4.7, § 4.7(c), § 4.7(d), § 4.7(e), § 4.7(f))" in blast
