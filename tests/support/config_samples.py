"""Test helpers shared by several test modules (from tests/monitor/test_config.py)."""

from __future__ import annotations

MINIMAL = """
[[sites]]
id = "s1"
timezone = "America/Chicago"
latitude = 45.27
longitude = -91.62
[[sites.sensors]]
id = "n1"
kind = "sound"
"""
