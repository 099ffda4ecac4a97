"""3D never loads a whole level: an editable labels layer whose level 0 is bigger than
:data:`MAX_3D_ENV` (default 1 GiB) is shown in 3D from the finest pyramid level that fits,
read-only (one notice), and goes back to its editable level 0 in 2D with every edit kept.

napari reads a single-scale layer's whole volume in 3D, and an editable labels layer is
single-scale (napari cannot paint a multiscale one): without this, switching a terabyte
segmentation to 3D would read a terabyte. The swap must come before napari slices the layer
for the new display, and napari calls its own handlers of a display change before any
plugin's: so each such layer's slicing entry (``_slice_dims``, napari's private method, 0.5
to 0.9) is wrapped on the instance to swap first; where it is missing, the swap follows
the display change (after one full read)."""

from __future__ import annotations

import math
import weakref
from typing import Any

import numpy as np

from napari_n5zarr._napari.notices import notify_napari, plain_name
from napari_n5zarr.environment import number
from napari_n5zarr.write.edit.editable import EditableLevel, ReadOnlyLevel

MAX_3D_ENV = "N5ZARR_3D_MAX_BYTES"
DEFAULT_MAX_3D = 1 << 30
_followed: weakref.WeakSet[Any] = weakref.WeakSet()
_level0: weakref.WeakKeyDictionary[Any, tuple[EditableLevel, np.ndarray, np.ndarray, bool]] = (
    weakref.WeakKeyDictionary()
)
"""Layer -> (its editable level 0, its scale, translate and visibility in 2D) while shown in 3D."""


def max_3d_bytes() -> int:
    return int(number(MAX_3D_ENV, DEFAULT_MAX_3D))


def editable_of(layer: Any) -> EditableLevel | None:
    """The editable level 0 of ``layer``, whether shown (2D) or stood in for (3D)."""
    data = getattr(layer, "data", None)
    data = getattr(data, "stands_for", None) or data
    return data if isinstance(data, EditableLevel) else None


def follow(viewer: Any) -> None:
    """Once per viewer: swap big editable labels layers at every 2D <-> 3D change."""
    if viewer in _followed:
        return
    _followed.add(viewer)
    ref = weakref.ref(viewer)
    viewer.dims.events.ndisplay.connect(lambda event: _switch(ref()))


def on_layer(viewer: Any, layer: Any) -> None:
    """An editable labels layer in ``viewer``: swapped before each slicing for 3D or 2D."""
    original = getattr(layer, "_slice_dims", None)
    if original is not None and not getattr(original, "_n5zarr_swaps", False):
        ref = weakref.ref(layer)

        def slice_dims(dims: Any, *args: Any, **kwargs: Any) -> Any:
            shown = ref()
            if shown is not None and not getattr(shown, "_n5zarr_swapping", False):
                shown._n5zarr_swapping = True
                try:
                    _to_3d(shown) if dims.ndisplay == 3 else _to_2d(shown)
                finally:
                    shown._n5zarr_swapping = False
            return original(dims, *args, **kwargs)

        slice_dims._n5zarr_swaps = True  # type: ignore[attr-defined]
        layer._slice_dims = slice_dims
    if viewer.dims.ndisplay == 3:
        _to_3d(layer)


def _switch(viewer: Any) -> None:
    if viewer is None:
        return
    for layer in list(viewer.layers):
        if viewer.dims.ndisplay == 3:
            _to_3d(layer)
        else:
            _to_2d(layer)


def _to_3d(layer: Any) -> None:
    if layer in _level0:
        return
    level0 = layer.data
    if (
        not isinstance(level0, EditableLevel)
        or math.prod(level0.shape) * level0.dtype.itemsize <= max_3d_bytes()
    ):
        return
    scale, translate = np.asarray(layer.scale, float), np.asarray(layer.translate, float)
    _level0[layer] = (level0, scale, translate, bool(layer.visible))
    name = plain_name(layer.name)
    found = overview(level0, max_3d_bytes())
    if found is None:
        layer.visible = False
        notify_napari(
            "warning",
            f"{name}: too big for 3D at every pyramid level (over {max_3d_bytes():,} bytes); hidden in 3D",
        )
        return
    k, reader, factors = found
    reason = f"3D shows {name} from pyramid level {k} (read-only); in 2D you edit level 0 again"
    layer.data = ReadOnlyLevel(
        reader, reason, lambda text: notify_napari("warning", text), stands_for=level0
    )
    layer.scale = scale * factors
    layer.translate = (
        translate + 0.5 * (factors - 1) * scale
    )  # a coarse pixel's centre (as the reader places it)
    notify_napari("info", reason)


def _to_2d(layer: Any) -> None:
    kept = _level0.pop(layer, None)
    if kept is None:
        return
    level0, scale, translate, visible = kept
    layer.data = level0
    layer.scale, layer.translate = scale, translate
    layer.visible = visible


def overview(level0: EditableLevel, bound: int) -> tuple[int, Any, np.ndarray] | None:
    """(level number, its lazy reader, its downsampling in napari order) of the finest level
    of ``level0``'s pyramid within ``bound`` bytes; None when none is."""
    from napari_n5zarr.read.images import open_images

    found = open_images(level0.root)
    image = next((i for i in found.images if i.multiscale.is_labels), None)
    if image is None:
        return None
    for k, reader in enumerate(image.levels):
        if math.prod(reader.shape) * level0.dtype.itemsize <= bound:
            return k, reader, np.asarray(image.multiscale.downsampling[k], float)[::-1]
    return None
