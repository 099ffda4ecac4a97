"""The one unit table (spatial/units.py), both ways."""

from __future__ import annotations

import pytest

from napari_n5zarr.spatial.units import (
    LENGTH_EXPONENT,
    UNITS,
    normalize_unit,
    unit_display,
    unit_symbol,
)


@pytest.mark.parametrize(
    ("spelling", "name", "symbol", "display"),
    [("um", "micrometer", "um", "µm"), ("µm", "micrometer", "um", "µm"), ("microns", "micrometer", "um", "µm"),
     ("nm", "nanometer", "nm", "nm"), ("nanometer", "nanometer", "nm", "nm"), ("sec", "second", "s", "s"),
     ("px", "pixel", "", "pixel"), ("a", "angstrom", "a", "Å"), ("parsec", "parsec", "parsec", "parsec")],
)  # fmt: skip
def test_spellings(spelling, name, symbol, display):
    assert normalize_unit(spelling) == name
    assert unit_symbol(spelling) == symbol
    assert unit_display(spelling) == display


def test_read_back_what_is_written():
    for unit in UNITS:
        if unit.symbol:
            assert normalize_unit(unit_symbol(unit.name)) == unit.name, unit


def test_no_unit():
    assert normalize_unit(None) is None
    assert normalize_unit("  ") is None
    assert unit_symbol(None) == unit_symbol("none") == unit_symbol("pixel") == ""
    assert unit_display(None) == "px"


def test_length_exponents():
    assert LENGTH_EXPONENT == {"pm": -12, "nm": -9, "um": -6, "mm": -3, "cm": -2, "m": 0}
