"""Write golden.sqlite and golden-digests.json: a store holding every chain kind and the
SHA-256 of each member of the bundle exported from it.

Run once from the repository root with the code whose output is to be pinned (it was run
at commit cd944b8, before the codec and evidence restructure of issue 18):

    python3 -m tests.data.evidence.make_golden

tests/monitor/evidence/test_golden.py exports the committed store again and compares.

``--seismic`` writes golden-seismic.sqlite and golden-seismic-digests.json instead (and leaves the
files above alone): the same store with a seismograph event (its waveform chunks and both summaries,
``tests.support.evidence.add_seismograph_event``) chained inside the window, before the last anchor.
It was run at the commit that made waveform chunks rows of a bundle (issue 27):

    python3 -m tests.data.evidence.make_golden --seismic
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
import sys
import tempfile
import zipfile
from datetime import timedelta
from pathlib import Path

from monitor.evidence import export_bundle
from monitor.journal.store import Store
from monitor.notify.notices import NoticeBook
from rules.profile import load_profile
from tests.support.evidence import SITE, T0, WINDOW, _finding, build_site

HERE = Path(__file__).parent
CREATED = T0 + timedelta(days=1)


# The Dovre profile as it was when golden.sqlite was made: notices name the chained profile's
# version, so the rebuilt data must be judged under the same text, not today's profile.
PINNED_PROFILE = HERE / "golden-profile-dovre.toml"


def build(tmp: Path, *, seismic: bool = False) -> Path:
    site = build_site(tmp, seismic=seismic)
    store = Store(site.store)
    with store.batch():  # config entries are not compared (they digest the temp path)
        store.append_config_record(SITE, "dovre", PINNED_PROFILE.read_text(), "", T0 - timedelta(minutes=5))
    site_config = site.config.site(SITE)
    assert site_config is not None
    profile = load_profile(site_config.profile, site_config.agreement)
    t = T0 + timedelta(seconds=200)
    book = NoticeBook(store)  # outside a transaction: it creates its tables
    with store.batch():
        store.append_rejection(SITE, f"minewatch/{SITE}/n1/levels", "ts: not a time", '{"ts":"x"}', t)
        store.append_health(SITE, "n1", t, "offline", None, "silent for 30 s", t)
        store.append_health(SITE, "n1", t + timedelta(seconds=5), "online", 5.0, "back", t)
        store.append_calibration(SITE, "n1", t, 94.0, 94.3, 0.3, False, t)
        store.append_calibration(SITE, "n2", t, 94.0, 95.1, None, True, t)
        kept = store.sound_between(SITE, T0, T0 + timedelta(seconds=1))[0]
        store.sound_conflict(kept._replace(LAeq=kept.LAeq + 1.5), "levels", t)
        found = [_finding(T0 + timedelta(minutes=1), "83.0 dB(A) at n2")]
        for finding in found:
            store.append_finding(finding, t)
        book.on_findings(site_config, profile, found, t)
    store.close()
    return site.store


def digests(bundle: Path) -> dict[str, str]:
    with zipfile.ZipFile(bundle) as zf:
        out = {name: hashlib.sha256(zf.read(name)).hexdigest() for name in sorted(zf.namelist())}
        manifest = json.loads(zf.read("manifest.json"))
    manifest["software"]["version"] = ""  # changes with every release
    if "source" in manifest["config"]:  # formats 2 and 3: the configuration file's path (a temp dir here)
        manifest["config"]["source"] = ""
    out["manifest.json"] = hashlib.sha256(json.dumps(manifest, sort_keys=True).encode()).hexdigest()
    return out


def main(seismic: bool = False) -> None:
    name = "golden-seismic" if seismic else "golden"
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        store = build(tmp, seismic=seismic)
        with sqlite3.connect(store) as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        if seismic:  # a smaller file in the repository (golden.sqlite was written without it)
            vacuum = sqlite3.connect(store)
            vacuum.execute("VACUUM")
            vacuum.close()
        conn.close()
        shutil.copy(store, HERE / f"{name}.sqlite")
        from monitor.config import load_config

        config = load_config(tmp / "minewatch.toml")
        bundle = tmp / "golden.zip"
        export_bundle(config, SITE, *WINDOW, bundle, plots=False, now=CREATED)
        (HERE / f"{name}-digests.json").write_text(json.dumps(digests(bundle), indent=2) + "\n")


if __name__ == "__main__":
    main(seismic="--seismic" in sys.argv[1:])
