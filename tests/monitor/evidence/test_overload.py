"""Overloaded seconds in the chain and in a bundle: stored, exported with their flag, verified."""

from __future__ import annotations

import zipfile
from datetime import timedelta
from pathlib import Path

from monitor.evidence import load_anchors, verify_bundle
from monitor.journal.store import Store, digest_of, levels_digest, sound_record, to_us
from monitor.wire.canonical import canonical_json
from rules.model import SoundLevels
from tests.support.evidence import (
    SITE,
    T0,
    build_site,
    csv_rows,
    edit_rows,
    export,
    first_problem,
    rewrite,
)

OVERLOADED = frozenset({40, 41})
PART = "data/sound/part-00001.csv"


def test_a_level_without_the_flag_digests_as_before_and_one_with_it_says_so(tmp_path: Path) -> None:
    levels = SoundLevels(SITE, "n1", T0, 1.0, 78.25, 80.5, 99.0, LASmax=79.0)
    before = {  # the record as it was chained before the flag existed
        "t": "sound",
        "site": SITE,
        "sensor": "n1",
        "ts_us": to_us(T0),
        "duration_s": 1.0,
        **dict.fromkeys(("LAFmin", "LCeq", "LZpeak", "LZeq")),
        "LAeq": 78.25,
        "LAFmax": 80.5,
        "LASmax": 79.0,
        "LCpeak": 99.0,
        "source": "levels",
    }
    assert levels_digest(levels, "levels") == digest_of(before)
    flagged = levels._replace(overload=True)
    assert levels_digest(flagged, "levels") == digest_of({**before, "overload": True})
    assert b'"overload":true' in canonical_json(sound_record({**before, "overload": 1}))

    store = Store(tmp_path / "s.db")
    with store.batch():
        store.append_sounds([(levels, "levels", False), (flagged._replace(sensor="n2"), "levels", False)], T0)
    rows = {
        r["sensor"]: r
        for r in store.conn.execute(
            "SELECT s.*, c.digest AS chained FROM sound s"
            " JOIN chain c ON c.site = s.site AND c.seq = s.chain_seq"
        )
    }
    assert (rows["n1"]["overload"], rows["n2"]["overload"]) == (None, 1)
    for row in rows.values():  # the row as stored rebuilds the digest chained for it
        assert digest_of(sound_record(row)) == row["chained"]
    read = store.sound_between(SITE, T0, T0 + timedelta(seconds=1))
    assert sorted((r.sensor, r.overload) for r in read) == [("n1", False), ("n2", True)]
    store.close()


def test_a_bundle_with_overloaded_seconds_carries_the_flag_and_verifies(tmp_path: Path) -> None:
    site = build_site(tmp_path, overloaded=OVERLOADED)
    bundle = export(site, tmp_path / "b.zip")
    with zipfile.ZipFile(bundle) as zf:
        rows = csv_rows(zf.read(PART))
    assert rows[0][-1] == "overload"
    flagged = {(r[2], r[3]) for r in rows[1:] if r[-1] == "1"}
    assert flagged == {("n2", str(to_us(T0 + timedelta(seconds=s)))) for s in OVERLOADED}
    assert all(r[-1] in ("", "1") for r in rows[1:])
    report = verify_bundle(bundle, load_anchors(site.anchors))
    assert report.ok, report.lines()
    assert report.anchored

    # The flag is part of the chained record: taking it away is a changed row, named.
    def unflag(rows: list[list[str]]) -> None:
        for row in rows[1:]:
            row[-1] = ""

    forged = rewrite(bundle, tmp_path / "forged.zip", {PART: edit_rows(unflag)})
    message = first_problem(forged)
    assert message.startswith(f"row altered: {PART} line "), message
    assert "(sensor n2 at 2024-03-10T07:58:40Z" in message


def test_the_readme_describes_the_overload_column_only_in_a_bundle_that_has_it(tmp_path: Path) -> None:
    """README.txt listed data/sound/'s columns' meaning but not the overload column's: a reader of a
    bundle with it had no word on what 1 means (the levels read low, a lower bound)."""
    (tmp_path / "plain").mkdir()
    (tmp_path / "over").mkdir()
    plain = export(build_site(tmp_path / "plain"), tmp_path / "plain.zip")
    overloaded = export(build_site(tmp_path / "over", overloaded=OVERLOADED), tmp_path / "over.zip")
    with zipfile.ZipFile(plain) as zf:
        plain_readme = zf.read("README.txt").decode()
    with zipfile.ZipFile(overloaded) as zf:
        readme = zf.read("README.txt").decode()
    assert "overload" not in plain_readme  # as every bundle without the column always had it
    described = readme.split("data/sound/part-*.csv", 1)[1].split("data/*.csv", 1)[0]
    assert "overload (their last column" in described and "1 for such a second" in described, readme
    assert "at least the value given" in described and "empty for the others" in described
    # Apart from that, the two texts are the same.
    assert [line for line in readme.splitlines() if line not in described.splitlines()] == [
        line for line in plain_readme.splitlines() if line not in described.splitlines()
    ]
    assert verify_bundle(overloaded).ok

    # A README that describes a column the parts do not have is a changed file, said as such.
    forged = rewrite(plain, tmp_path / "forged.zip", {"README.txt": lambda _: readme.encode()})
    assert first_problem(forged) == (
        "file changed: README.txt describes an overload column that no part of data/sound/ has"
    )
    # A bundle exported with the column before the README described it verifies as it did.
    earlier = rewrite(overloaded, tmp_path / "earlier.zip", {"README.txt": lambda _: plain_readme.encode()})
    assert verify_bundle(earlier).ok
