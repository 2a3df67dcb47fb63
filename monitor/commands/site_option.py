"""``--site`` of the commands that read one site's record (report, report-blast, evidence).

It may be left out when the configuration has one site; a site the configuration lacks, or none
named among several, is one line listing the configured sites.
"""

from __future__ import annotations

import argparse

from monitor.config import Config, SiteConfig
from monitor.errors import UsageError

HELP = "site id (may be left out when the configuration has one site)"


def add_site_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--site", help=HELP)


def chosen_site(config: Config, given: str | None) -> SiteConfig:
    """The site ``--site`` names, or the configuration's only site when it names none."""
    if given is None and len(config.sites) == 1:
        return config.sites[0]
    site = config.site(given) if given is not None else None
    if site is None:
        known = ", ".join(s.id for s in config.sites)
        said = f"unknown site {given!r}" if given is not None else "--site is needed"
        raise UsageError(f"{said}; the configuration has: {known}")
    return site
