"""The manifest's profile.agreement is the agreement config.toml gives the site.

The export stated today's configuration's agreement beside config.toml, which is the one chained
at the segment's start: after an agreement was changed, an honest bundle said two things.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

from monitor.config import load_config
from monitor.evidence import export_bundle, verify_bundle
from tests.support.evidence import SITE, WINDOW, Site

Manifest = dict[str, Any]


def _manifest(bundle: Path) -> Manifest:
    with zipfile.ZipFile(bundle) as zf:
        manifest: Manifest = json.loads(zf.read("manifest.json"))
    return manifest


# ------------------------------------------------------------------ the agreement


def test_the_agreement_stated_is_the_one_config_toml_gives_after_the_configuration_changed(
    site: Site, tmp_path: Path
) -> None:
    """The store chained the site with no agreement; the configuration gives one now. The export
    stated today's agreement beside the chained config.toml (which gives none), so an honest
    bundle said two things; it states config.toml's, and verifies."""
    text = site.config_path.read_text()
    changed = text.replace(
        'profile = "dovre"', 'profile = "dovre"\nagreement = { "noise.limit_db" = 85.0 }', 1
    )
    assert changed != text
    site.config_path.write_text(changed)
    config = load_config(site.config_path)
    assert dict(config.sites[0].agreement) == {"noise.limit_db": 85.0}
    bundle = tmp_path / "b.zip"
    export_bundle(config, SITE, *WINDOW, bundle, plots=False)
    assert _manifest(bundle)["profile"]["agreement"] == {}
    report = verify_bundle(bundle)
    assert report.ok, report.lines()
