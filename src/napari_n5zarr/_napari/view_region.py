"""napari's current view of a layer as a ``n5zarr convert --region`` (the check-out command a
read-only remote labels layer suggests): the displayed axes as far as they are visible, the
other axes the current plane plus and minus :data:`SLAB` planes; level-0 voxels, napari order."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

SLAB = 32
"""Planes kept on each side of the current one along the axes not displayed."""


def view_region(layer: Any, viewer: Any) -> str | None:
    """``"Z0:Z1,Y0:Y1,X0:X1"`` for what ``viewer`` shows of ``layer``, or None when unknown."""
    try:
        shape0 = [int(s) for s in (layer.level_shapes[0] if layer.multiscale else layer.data.shape)]
        point = np.asarray(layer.world_to_data(viewer.dims.point), float)
        offset = viewer.dims.ndim - layer.ndim  # the layer's axes are the viewer's last
        displayed = [d - offset for d in viewer.dims.displayed]
        low, high = _visible(layer, viewer)
    except Exception:  # a view napari has not laid out yet: no region to suggest
        return None
    bounds = []
    for axis, extent in enumerate(shape0):
        if axis in displayed:
            lo, hi = (
                math.floor(min(low[axis], high[axis])),
                math.ceil(max(low[axis], high[axis])) + 1,
            )
        else:
            plane = round(point[axis])
            lo, hi = plane - SLAB, plane + SLAB + 1
        lo, hi = max(0, min(lo, extent - 1)), min(extent, hi)
        bounds.append(f"{lo}:{max(hi, lo + 1)}")
    return ",".join(bounds)


def _visible(layer: Any, viewer: Any) -> tuple[np.ndarray, np.ndarray]:
    """The canvas corners in ``layer``'s level-0 data coordinates: from the camera (centre,
    zoom) and the canvas's size in pixels, (height, width) (napari updates a multiscale
    layer's ``corner_pixels`` only when it loads a new tile), else ``corner_pixels``."""
    canvas = getattr(getattr(getattr(viewer, "window", None), "_qt_viewer", None), "canvas", None)
    size = getattr(canvas, "size", None)
    if size is None or viewer.dims.ndisplay != 2:
        factors = (
            np.asarray(layer.downsample_factors[layer.data_level], float)
            if layer.multiscale
            else 1.0
        )
        corners = np.asarray(layer.corner_pixels, float) * factors
        return corners[0], corners[1]
    low, high = np.asarray(viewer.dims.point, float), np.asarray(viewer.dims.point, float)
    for d, pixels in zip(viewer.dims.displayed, size, strict=True):
        half = pixels / (2 * viewer.camera.zoom)
        centre = viewer.camera.center[-2:][list(viewer.dims.displayed).index(d)]
        low[d], high[d] = centre - half, centre + half
    return np.asarray(layer.world_to_data(low), float), np.asarray(layer.world_to_data(high), float)


def pyramid_location(metadata: dict[str, Any]) -> str | None:
    """Where a layer's pyramid is (its source plus the levels' common parent), from the
    metadata the reader gives every layer."""
    source, paths = metadata.get("source"), [str(p) for p in metadata.get("paths") or []]
    if not source:
        return None
    parents = {p.rsplit("/", 1)[0] if "/" in p else "" for p in paths} if len(paths) > 1 else {""}
    parent = parents.pop() if len(parents) == 1 else ""
    return f"{str(source).rstrip('/')}/{parent}" if parent else str(source).rstrip("/")
