"""How a measured value reads (rules/quantities.py): one rounding per unit, at any size."""

from __future__ import annotations

import pytest

from rules.quantities import measurement_text, number_text, stored_value


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


@pytest.mark.parametrize(
    ("value", "limit", "text"),
    [
        (80.04, 80.0, "80.04"),  # above the limit: never "80.0" beside "above the 80 dB limit"
        (80.0001, 80.0, "80.0001"),
        (79.96, 80.0, "79.96"),  # below it: never "80.0" either
        (80.0, 80.0, "80.0"),
        (84.05, 80.0, "84.1"),  # far from it: the unit's places
    ],
)
def test_a_value_never_reads_as_its_limit_unless_it_is(value: float, limit: float, text: str) -> None:
    assert number_text(value, "dB(A)", limit) == text
    m = {"name": "LAeq,1min", "value": stored_value(value, limit), "unit": "dB(A)", "limit": limit}
    assert measurement_text(m) == f"LAeq,1min {text} dB(A) (limit 80 dB(A))"


def test_a_stored_measurement_keeps_its_side_of_the_limit() -> None:
    assert stored_value(84.123, 80.0) == 84.12
    assert stored_value(80.004, 80.0) == 80.004  # round(80.004, 2) is 80.0: on the limit
    assert stored_value(79.996, 80.0) == 79.996
    assert stored_value(float("nan"), 80.0) != stored_value(float("nan"), 80.0)
