"""A sound row's floats in a bundle are spelled as repr() spells them (the digests are of that text).

The exporter spells a column of floats at once through orjson (monitor/evidence/export.py,
float_texts); these tests hold it to repr() where the two agree and where they do not.
"""

from __future__ import annotations

import math
import random
import struct

import pytest

from monitor.evidence.export import float_texts


def expected(values: list[float | None]) -> list[str]:
    return ["" if value is None else repr(value) for value in values]


def test_random_doubles_of_every_magnitude_are_spelled_as_repr_spells_them() -> None:
    rng = random.Random(31)
    values: list[float | None] = [
        struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0] for _ in range(200_000)
    ]
    # Split into columns as a stretch is: each column takes its own path (orjson or repr()).
    for start in range(0, len(values), 4096):
        column = values[start : start + 4096]
        assert float_texts(column) == expected(column)


@pytest.mark.parametrize(
    ("low", "high", "decimals"),
    [(0.0, 200.0, None), (0.0, 200.0, 1), (0.0, 200.0, 2), (0.5, 2.0, None), (1e14, 1e16, None)],
)
def test_levels_as_meters_and_calibration_make_them_take_the_fast_path_exactly(
    low: float, high: float, decimals: int | None
) -> None:
    rng = random.Random(f"{low}-{high}-{decimals}")
    values: list[float | None] = []
    for _ in range(50_000):
        value = rng.uniform(low, high)
        values.append(value if decimals is None else round(value, decimals) + 0.35)  # an offset added
    assert float_texts(values) == expected(values)


@pytest.mark.parametrize(
    "odd",
    [
        1e16,  # repr 1e+16, orjson 1e16
        9.999e-05,  # repr 9.999e-05, orjson 0.00009999
        -0.00001234,
        5e-324,
        1.7976931348623157e308,
        math.inf,  # orjson null
        -math.inf,
        math.nan,
        -0.0,
        0.0,
        None,
    ],
)
def test_a_value_orjson_spells_otherwise_is_spelled_by_repr_within_its_column(odd: float | None) -> None:
    column: list[float | None] = [63.2, 71.04999999999998, odd, 1.0, None, 80.0]
    texts = float_texts(column)
    assert texts == expected(column)
    assert texts[4] == ""  # NULL: an optional level not sent


def test_a_column_of_nulls_and_an_empty_column() -> None:
    assert float_texts([None, None, None]) == ["", "", ""]
    assert float_texts([]) == []
