"""A region of a source pyramid, checked out as a pyramid of its own (``convert --region``).

A :class:`Region` is a ``start:stop`` per axis in level-0 voxel coordinates, napari order
(the last axes of the array: leading axes such as channels or time are kept whole). At a
coarser level its bounds are divided by that level's downsampling (start rounded down, stop
up, so the crop covers the region). The crop's calibration places it exactly over the source
in napari: the level's scale, and its translate moved by the crop's start.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from napari_n5zarr.errors import InvalidArgumentError

REGION_ATTRIBUTE = "n5zarr:checked-out"
"""Root attribute of a checked-out region: where it came from (source, level, region)."""

_AXIS = re.compile(r"^\s*(\d+)\s*:\s*(\d+)\s*$")


@dataclass(frozen=True)
class Region:
    """``start:stop`` per axis, level-0 voxels, napari order (the array's last axes)."""

    bounds: tuple[tuple[int, int], ...]

    @classmethod
    def parse(cls, text: str | Sequence[Any]) -> Region:
        """``"Z0:Z1,Y0:Y1,X0:X1"``, or a sequence of ``(start, stop)`` pairs or slices."""
        if isinstance(text, str):
            parts = text.split(",") if text.strip() else []
            matches = [_AXIS.match(p) for p in parts]
            if not parts or not all(matches):
                raise InvalidArgumentError(
                    f"region {text!r}: expected start:stop per axis, e.g. 0:64,100:356,100:356"
                )
            bounds = [(int(m.group(1)), int(m.group(2))) for m in matches if m]
        else:
            bounds = [_pair(item) for item in text]
        for start, stop in bounds:
            if stop <= start:
                raise InvalidArgumentError(
                    f"region {_text(bounds)}: stop must be past start on every axis"
                )
        return cls(tuple(bounds))

    def __str__(self) -> str:
        return _text(self.bounds)

    def crop(
        self, shape0: Sequence[int], shape: Sequence[int], factors: Sequence[float]
    ) -> tuple[slice, ...]:
        """The slices of a level of ``shape`` (napari order; level 0 has ``shape0``) with
        downsampling ``factors`` (napari order) that cover this region; refused when the
        region is not inside level 0."""
        ndim, n = len(shape), len(self.bounds)
        if n > ndim:
            raise InvalidArgumentError(
                f"region {self} has {n} axes, the array {ndim} (shape {tuple(shape0)})"
            )
        out: list[slice] = [slice(None)] * (ndim - n)
        for axis, (start, stop) in enumerate(self.bounds, start=ndim - n):
            if stop > shape0[axis]:
                raise InvalidArgumentError(
                    f"region {self} is outside the array (level-0 shape {tuple(shape0)})"
                )
            f = float(factors[axis])
            out.append(slice(math.floor(start / f), min(int(shape[axis]), math.ceil(stop / f))))
        return tuple(out)


def crop_translate(
    translate: Sequence[float], scale: Sequence[float], crop: Sequence[slice]
) -> list[float]:
    """The translate (napari order) of a crop whose level has ``translate`` and ``scale``."""
    return [t + (c.start or 0) * s for t, s, c in zip(translate, scale, crop, strict=True)]


def _pair(item: Any) -> tuple[int, int]:
    if isinstance(item, slice):
        if item.step not in (None, 1) or item.start is None or item.stop is None:
            raise InvalidArgumentError(f"region: {item} must be start:stop (no step, both ends)")
        return int(item.start), int(item.stop)
    try:
        start, stop = item
        return int(start), int(stop)
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"region: {item!r} is not a (start, stop) pair") from None


def _text(bounds: Sequence[tuple[int, int]]) -> str:
    return ",".join(f"{a}:{b}" for a, b in bounds)
