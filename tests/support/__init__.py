"""Helpers shared by the test modules: servers, configurations, harnesses, builders (no tests here)."""
