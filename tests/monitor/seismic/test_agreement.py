"""The seismograph's summary against the daemon's from its waveforms: pure comparisons with known
answers, and a real event published through Mosquitto to the real daemon whose edge summary was
altered on the way (a data-quality alert, and a line of the blast report)."""

from __future__ import annotations

import copy
import json
import sqlite3
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from monitor.seismic.agreement import TOLERANCES, disagreements
from monitor.seismic.summary import summarize
from monitor.wire.codec import SeismicSummary, encode
from sensors.seismograph import event_messages, site_law_event
from tests.support.daemon import Client, Daemon, wait_until, write_config
from tests.support.servers import Mosquitto

SITE = "quarry"


def _summary() -> dict[str, Any]:
    wave = site_law_event(600.0, 200.0, ppv_in_s=0.4, record_s=2.0, freqs=(8.0, 12.0, 25.0))
    return summarize(wave).to_json()


def _axis(summary: dict[str, Any], name: str) -> dict[str, Any]:
    return next(a for a in summary["axes"] if a["axis"] == name)


def test_the_same_summary_agrees_and_rounding_stays_within() -> None:
    daemon = _summary()
    assert disagreements(daemon, daemon) == ()
    edge = copy.deepcopy(daemon)
    _axis(edge, "V")["ppv_mm_s"] *= 1.009  # a vendor's 3 significant digits: within 1 %
    _axis(edge, "T")["fft_hz"] *= 1.049
    edge["airblast_db"] += 0.49
    assert disagreements(edge, daemon) == ()


def test_each_quantity_beyond_its_tolerance_is_named() -> None:
    daemon = _summary()
    edge = copy.deepcopy(daemon)
    _axis(edge, "V")["ppv_mm_s"] *= 1.02
    _axis(edge, "T")["zc_hz"] = _axis(daemon, "T")["zc_hz"] * 1.06
    edge["airblast_db"] += 0.6
    edge["airblast_dbc_slow"] -= 0.6
    found = {d.quantity: d for d in disagreements(edge, daemon)}
    assert set(found) == {
        "V PPV",
        "T zero-crossing frequency",
        "airblast (linear peak)",
        "airblast (C-weighted slow)",
    }
    v = found["V PPV"]
    assert v.daemon == _axis(daemon, "V")["ppv_mm_s"] and v.edge == pytest.approx(v.daemon * 1.02)
    assert v.text().startswith("V PPV: the seismograph says ") and "(more than 1% apart)" in v.text()
    assert found["airblast (C-weighted slow)"].unit == "dB(C)"
    assert "(more than 0.5 dB apart)" in found["airblast (linear peak)"].text()
    assert (TOLERANCES["ppv"].relative, TOLERANCES["frequency"].relative) == (0.01, 0.05)
    assert TOLERANCES["airblast_db"].absolute == 0.5


def test_a_quantity_one_side_does_not_state_is_not_compared() -> None:
    daemon = _summary()
    edge = copy.deepcopy(daemon)
    del edge["airblast_dbc_slow"]  # a vendor's summary without it
    _axis(edge, "V")["zc_hz"] = None
    assert disagreements(edge, daemon) == ()


def _store_rows(store: Path, sql: str) -> list[sqlite3.Row]:
    conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def test_an_altered_edge_summary_published_through_mosquitto_raises_a_data_quality_alert(
    tmp_path: Path, mosquitto: Mosquitto
) -> None:
    config = write_config(tmp_path / "minewatch.toml", mosquitto.url)
    with config.open("a") as f:  # the site's last table: its sensors go on
        f.write('[[sites.sensors]]\nid = "sg1"\nkind = "seismograph"\nlocation = "Smith house"\n')
        f.write("expected_period_s = 86400\n")
    store = tmp_path / "store.db"
    daemon = Daemon(config).start()
    daemon.wait_ready()
    watcher = Client(mosquitto.port, "watcher", (f"minewatch/{SITE}/alerts",))
    pub = Client(mosquitto.port, "seismograph")
    ts = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=2)
    try:
        wave = site_law_event(600.0, 200.0, ppv_in_s=0.4, record_s=2.0)
        messages = event_messages(wave, SITE, "sg1", "ev7", ts, max_bytes=16_384)
        edge = messages[0]
        assert isinstance(edge, SeismicSummary)
        altered = copy.deepcopy(dict(edge.payload))
        true_v = _axis(altered["summary"], "V")["ppv_mm_s"]
        _axis(altered["summary"], "V")["ppv_mm_s"] = round(true_v * 0.8, 6)  # the seismograph under-reports
        altered["summary"]["airblast_db"] = round(altered["summary"]["airblast_db"] - 3.0, 3)
        for message in [
            SeismicSummary(edge.site, edge.sensor, edge.event_id, edge.ts, edge.duration_s, altered),
            *messages[1:],
        ]:
            pub.publish(*encode(message)).wait_for_publish(10)
        assert wait_until(
            lambda: bool(
                _store_rows(store, "SELECT 1 FROM alerts WHERE kind = 'seismic_summary_disagreement'")
            ),
            timeout=30,
        ), daemon.logs()
        [alert] = _store_rows(store, "SELECT * FROM alerts WHERE kind = 'seismic_summary_disagreement'")
        assert alert["audience"] == "operator,town" and alert["condition"] == "seismic-summary:sg1:ev7"
        data = json.loads(alert["data"])
        assert [d["quantity"] for d in data["disagreements"]] == ["V PPV", "airblast (linear peak)"]
        v = data["disagreements"][0]
        assert v["daemon"] == pytest.approx(true_v, rel=1e-6) and v["edge"] == pytest.approx(true_v * 0.8)
        assert "Seismograph sg1 event 'ev7': its own summary disagrees" in alert["message"]
        assert wait_until(lambda: bool(watcher.received("/alerts")), timeout=10)
        assert any(a.get("kind") == "seismic_summary_disagreement" for a in watcher.received("/alerts"))
    finally:
        pub.close()
        watcher.close()
        assert daemon.stop() == 0
    from monitor.config import load_config
    from monitor.journal.store import Store
    from monitor.notify.blast_report import blast_report_data, render_html
    from rules.profile import load_profile

    loaded = load_config(config)
    site = loaded.site(SITE)
    assert site is not None
    reader = Store(store)
    profile = load_profile(site.profile, site.agreement)
    # A town whose profile keys its ground-vibration standard otherwise: the report read it by
    # the key "ground_vibration" and drew no limit curve, in mm/s whatever the profile said.
    renamed = replace(
        profile,
        standards={("vibration" if k == "ground_vibration" else k): v for k, v in profile.standards.items()},
    )
    try:
        report = blast_report_data(reader, site, profile, "sg1", "ev7")
        elsewhere = blast_report_data(reader, site, renamed, "sg1", "ev7")
    finally:
        reader.close()
    assert report["curve"] is not None
    assert (elsewhere["curve"], elsewhere["units"]) == (report["curve"], report["units"])
    rows = dict(report["agreement"])
    assert rows["Compared"].startswith(
        "DISAGREES: 2 quantities beyond ppv 1%, frequency 5%, airblast dB 0.5 dB"
    )
    assert rows["V PPV"].startswith(f"V PPV: the seismograph says {true_v * 0.8:.4g} mm/s")
    page = render_html(report)
    assert "The seismograph&#x27;s summary against its waveforms (data quality)" in page or (
        "summary against its waveforms (data quality)" in page
    )
    assert "DISAGREES: 2 quantities" in page
