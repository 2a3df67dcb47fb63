"""Helpers for the edge publisher and simulator tests (real Mosquitto from tests/conftest.py)."""

from __future__ import annotations
