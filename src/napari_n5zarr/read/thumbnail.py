"""A small preview image of an array: what the browser shows beside a node.

Bounded by construction: reads a central window of one plane, refused before reading when
the blocks it touches would decode to more than a limit.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from napari_n5zarr.read.node import human_bytes

if TYPE_CHECKING:
    import numpy as np
    import zarr


def thumbnail(
    array: zarr.Array, size: int = 256, crop: int = 1024, max_decode: int = 256 * 2**20
) -> np.ndarray:
    """A uint8 2D image (y, x): the middle slice of ``array`` (central ``crop`` × ``crop``
    pixels at most), strided down to about ``size``, contrast stretched to the 0.5–99.5
    percentiles. Refused (ValueError) when the blocks it touches would decode to more than
    ``max_decode`` bytes."""
    import numpy as np

    shape = tuple(array.shape)  # N5 order: x, y first
    index: list[Any] = []
    for axis, extent in enumerate(shape):
        if axis < 2:
            lo = max(0, extent // 2 - crop // 2)
            index.append(slice(lo, min(extent, lo + crop)))
        else:
            index.append(extent // 2)
    blocks = tuple(array.chunks)
    touched = math.prod(
        math.ceil((ix.stop - ix.start) / b) + 1 if isinstance(ix, slice) else 1
        for ix, b in zip(index, blocks, strict=True)
    )
    cost = touched * math.prod(blocks) * array.dtype.itemsize
    if cost > max_decode:
        raise ValueError(
            f"a preview would decode {human_bytes(cost)} of blocks (limit {human_bytes(max_decode)})"
        )
    plane = np.asarray(array[tuple(index)])
    if plane.ndim == 1:
        plane = plane[:, None]
    plane = plane.T  # (y, x)
    step = max(1, math.ceil(max(plane.shape) / size))
    plane = plane[::step, ::step].astype("float64")
    finite = plane[np.isfinite(plane)]
    if finite.size == 0:
        return np.zeros(plane.shape, dtype="uint8")
    lo, hi = np.percentile(finite, [0.5, 99.5])
    if hi <= lo:
        hi = lo + 1
    return (np.clip((np.nan_to_num(plane, nan=lo) - lo) / (hi - lo), 0, 1) * 255).astype("uint8")
