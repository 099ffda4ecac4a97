"""The spatial model: :class:`Multiscale`, :class:`Calibration`, :class:`ArrayInfo`, and the
small helpers shared by every convention (numbers, units, axes). Per-axis tuples are in
N5 order (index 0 = fastest axis = x)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

Attrs = Mapping[str, Any]
ErrorHandler = Callable[[str, BaseException], None]

DEFAULT_AXES = ("x", "y", "z", "t", "c")
# Group keys that N5 Viewer and neuroglancer let children inherit.
INHERITABLE = ("pixelResolution", "resolution", "units", "axes", "offset")

_LEVEL = re.compile(r"^s(\d+)$")
_SETUP = re.compile(r"^setup(\d+)$")
_TIMEPOINT = re.compile(r"^timepoint(\d+)$")
LABEL_WORDS = frozenset({"label", "labels", "seg", "segmentation", "segmentations"})
"""A dataset/group name whose last word is one of these names labels (``labels``,
``raw_labels``, ``neuronLabels``, ``seg``, ``cell-segmentation``): see
:func:`~napari_n5zarr.spatial.pyramids.is_labels`."""
CONTAINER_SUFFIXES = (".n5", ".zarr", ".zip", ".xml")
"""Names with these endings are containers (or point at one): never a labels name."""
LABEL_MULTISET = "Paintera label multiset (isLabelMultiset): not readable yet"
"""Why a label-multiset dataset was not shown before they were read (issue 21); kept for callers."""
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_UNIT_WITH_FACTOR = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*([^\d\s].*)$")


class ArrayInfo(NamedTuple):
    """What the conventions need to know about one array (metadata only)."""

    attrs: Attrs
    shape: tuple[int, ...]
    dtype: str = ""


class Calibration(NamedTuple):
    """Scale/translate/units/axes of one array, N5 order."""

    scale: tuple[float, ...]
    translate: tuple[float, ...]
    units: tuple[str | None, ...]
    axes: tuple[str, ...]
    convention: str = "none"


@dataclass(frozen=True)
class Multiscale:
    """One image (or labels) pyramid, finest level first; per-axis values in N5 order.

    ``scale``/``translate`` are those of level 0. ``downsampling[k]`` is level k's
    factor relative to level 0. ``time_paths`` (BigDataViewer) lists, per time point,
    the level paths; a reader stacks them along a trailing (slowest) ``t`` axis that
    ``scale``/``axes``/... already include.
    """

    name: str
    paths: tuple[str, ...]
    scale: tuple[float, ...]
    translate: tuple[float, ...]
    units: tuple[str | None, ...]
    axes: tuple[str, ...]
    downsampling: tuple[tuple[float, ...], ...]
    convention: str = "none"
    is_labels: bool = False
    shapes: tuple[tuple[int, ...], ...] = ()
    dtype: str = ""
    time_paths: tuple[tuple[str, ...], ...] = ()
    channel_axis: int | None = None
    attrs: Attrs = field(default_factory=dict, compare=False, repr=False)
    unreadable: str = ""
    """Why its blocks cannot be decoded, by design (:func:`~napari_n5zarr.spatial.unreadable_reason`:
    none today); "" when they can. Such a pyramid is described, never shown."""
    label_multiset: bool = False
    """Paintera label multisets (``isLabelMultiset``): read as uint64 labels (``dtype``) by
    :mod:`napari_n5zarr.read.label_multiset`."""

    @property
    def ndim(self) -> int:
        return len(self.scale)

    def level_scale(self, level: int) -> tuple[float, ...]:
        """Scale of ``level`` (level 0 scale times its downsampling)."""
        return tuple(s * f for s, f in zip(self.scale, self.downsampling[level], strict=True))

    def level_translate(self, level: int) -> tuple[float, ...]:
        """Translate of ``level`` by the N5 Viewer rule (pixel centre at 0.5 * (f - 1))."""
        return tuple(
            t + 0.5 * (f - 1) * s
            for t, s, f in zip(self.translate, self.scale, self.downsampling[level], strict=True)
        )




def _floats(value: Any) -> tuple[float, ...] | None:
    """A list of finite numbers as floats, else None."""
    if not isinstance(value, list | tuple) or not value:
        return None
    try:
        out = tuple(float(v) for v in value)
    except (TypeError, ValueError):
        return None
    if any(isinstance(v, bool) for v in value) or not all(math.isfinite(v) for v in out):
        return None
    return out


def _strings(value: Any) -> tuple[str | None, ...] | None:
    if not isinstance(value, list | tuple) or not value:
        return None
    return tuple(v if isinstance(v, str) else None for v in value)


def _fit(values: Sequence[Any], ndim: int, fill: Any) -> tuple[Any, ...]:
    """Truncate or pad ``values`` to ``ndim`` entries."""
    return tuple(values[:ndim]) + (fill,) * max(0, ndim - len(values))


def default_axes(ndim: int) -> tuple[str, ...]:
    """Axis names in N5 order when metadata gives none: x, y, z, t, c, d5, ..."""
    return tuple(DEFAULT_AXES[i] if i < len(DEFAULT_AXES) else f"d{i}" for i in range(ndim))


def identity(ndim: int) -> Calibration:
    """Unit scale, zero translate, unknown units."""
    return Calibration((1.0,) * ndim, (0.0,) * ndim, (None,) * ndim, default_axes(ndim))


def _unique_axes(axes: Sequence[str | None], ndim: int) -> tuple[str, ...]:
    """Axis names fitted to ``ndim``, blanks and duplicates replaced by defaults."""
    names = list(_fit(list(axes), ndim, None))
    defaults = default_axes(ndim)
    seen: set[str] = set()
    for i, name in enumerate(names):
        if not isinstance(name, str) or not name or name in seen:
            name = defaults[i] if defaults[i] not in seen and defaults[i] not in names else f"d{i}"
        names[i] = name
        seen.add(name)
    return tuple(names)


def _n5_order(axes: Sequence[Any] | None) -> bool | None:
    """True if axis names list x before y (or z): N5 order; False if after; None if unknown."""
    if not axes:
        return None
    names = [a.lower() if isinstance(a, str) else None for a in axes]
    if "x" in names:
        for other in ("y", "z"):
            if other in names:
                return names.index("x") < names.index(other)
    return None


def _unit_and_factor(unit: str | None) -> tuple[str | None, float]:
    """Split neuroglancer-style ``"4nm"`` into ``("nm", 4.0)``."""
    if not isinstance(unit, str):
        return None, 1.0
    m = _UNIT_WITH_FACTOR.match(unit)
    if m:
        return m.group(2).strip(), float(m.group(1))
    return unit.strip() or None, 1.0
