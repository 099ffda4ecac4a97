"""The one unit table, used both ways: read spellings -> full names (napari/pint), full
names -> the SI symbols written to N5 metadata (neuroglancer and tensorstore parse them),
and short display text (the browser, ``n5zarr tree``).

Kept by hand on purpose: pint (napari's unit library) reads ``"a"`` as year and ``"px"``
as css_pixel, and N5 writers spell units freely (``um``, ``µm``, ``micron``, ``4nm``).
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple


class Unit(NamedTuple):
    """One row of :data:`UNITS`."""

    name: str
    """Full name, as napari (pint) spells it."""
    symbol: str | None
    """Written to N5 metadata; None: the spelling given is written as it is."""
    display: str
    """Short text for people."""
    aliases: tuple[str, ...] = ()
    """Other spellings read (lower case)."""
    meters_exponent: int | None = None
    """A length unit: its size as a power of ten of a meter."""


UNITS = (
    Unit("picometer", "pm", "pm", ("pm",), -12),
    Unit("nanometer", "nm", "nm", ("nm",), -9),
    Unit(
        "micrometer", "um", "µm", ("um", "µm", "μm", "micron", "microns"), -6
    ),  # micro sign, greek mu
    Unit("millimeter", "mm", "mm", ("mm",), -3),
    Unit("centimeter", "cm", "cm", ("cm",), -2),
    Unit("meter", "m", "m", ("m",), 0),
    Unit("angstrom", None, "Å", ("å", "a")),
    Unit("second", "s", "s", ("s", "sec")),
    Unit("millisecond", "ms", "ms", ("ms",)),
    Unit("microsecond", "us", "µs", ("us",)),
    Unit("nanosecond", "ns", "ns", ("ns",)),
    Unit("minute", None, "min", ("min",)),
    Unit("hour", None, "h", ("h",)),
    Unit("pixel", "", "pixel", ("px", "pixels")),
)

_BY_NAME = {u.name: u for u in UNITS}
_BY_SPELLING = {**{a: u for u in UNITS for a in u.aliases}, **_BY_NAME}

LENGTH_EXPONENT = {
    u.symbol: u.meters_exponent for u in UNITS if u.symbol and u.meters_exponent is not None
}
"""Length unit symbols -> power of ten of a meter (to express mixed units in one)."""

NO_UNIT = ("none",)
"""Spellings of "no unit" written as an empty symbol."""

_UNIT_WITH_FACTOR = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*([^\d\s].*)$")


def normalize_unit(unit: str | None) -> str | None:
    """A unit spelling as a full unit name (``"um"`` -> ``"micrometer"``); unknowns kept."""
    if not isinstance(unit, str) or not unit.strip():
        return None
    text = unit.strip()
    row = _BY_SPELLING.get(text.lower()) if text.lower() not in _BY_NAME else None
    return row.name if row is not None else text


def unit_symbol(unit: Any) -> str:
    """The symbol written to N5 metadata (``"micrometer"`` -> ``"um"``; ``"pixel"`` -> "");
    unknown spellings are written as given."""
    if unit is None:
        return ""
    text = str(unit).strip()
    if text.lower() in NO_UNIT:
        return ""
    row = _BY_SPELLING.get(text.lower())
    return row.symbol if row is not None and row.symbol is not None else text


def unit_display(unit: str | None) -> str:
    """Short text for people (``µm``); ``px`` when there is no unit."""
    name = normalize_unit(unit)
    if name is None:
        return "px"
    row = _BY_NAME.get(name)
    return row.display if row is not None else name


def unit_and_factor(unit: str | None) -> tuple[str | None, float]:
    """Split neuroglancer-style ``"4nm"`` into ``("nm", 4.0)``."""
    if not isinstance(unit, str):
        return None, 1.0
    m = _UNIT_WITH_FACTOR.match(unit)
    if m:
        return m.group(2).strip(), float(m.group(1))
    return unit.strip() or None, 1.0
