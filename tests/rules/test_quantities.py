"""How a measured value reads (rules/quantities.py): one rounding per unit, at any size."""

from __future__ import annotations

import pytest

from rules.quantities import measurement_text, number_text


@pytest.mark.parametrize(
    ("value", "unit", "text"),
    [
        (84.05, "dB(A)", "84.1"),  # the stored decimal, rounded half up (not the float's 84.0)
        (0.3, "", "0.30"),
        (0.0123, "lx", "0.0123"),
        (1234.5, "lx", "1235"),
        (12.5, "s", "13"),
        (float("nan"), "dB", "nan"),
    ],
)
def test_a_value_reads_with_its_units_places(value: float, unit: str, text: str) -> None:
    assert number_text(value, unit) == text


@pytest.mark.parametrize("value", [1e38, -1e300, 1.7976931348623157e308])
def test_a_value_far_beyond_any_instrument_still_reads(value: float) -> None:
    """A seismograph's 1e38 reached a notice's facts: Decimal's default 28 digits raised
    InvalidOperation there, and every tick of the site failed from then on."""
    text = number_text(value, "")
    assert float(text) == value and text.endswith(".00")
    assert measurement_text({"name": "PPV", "value": value, "unit": "in/s", "limit": 1.0}).startswith("PPV ")
