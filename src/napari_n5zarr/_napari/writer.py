"""npe2 writers (File > Save Layers..., ``.n5`` or ``.ome.zarr``): image / labels layers ->
:func:`export`; the suffix picks the format (``.ome.zarr``: a standard OME-Zarr, else the dual
N5 + Zarr v3 pyramid).

A multiscale layer's levels are written as they are; other layers get a pyramid.
napari's data is (..., z, y, x); scale, translate, units and axis labels come from the
layer. RGB(A) layers keep their colour axis as a last axis named ``rgb``/``rgba``: never
downsampled, and read back as an RGB layer.
"""

from __future__ import annotations

import functools
import re
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from napari_n5zarr._napari.notices import plain_name
from napari_n5zarr.spatial import COLOUR_AXES
from napari_n5zarr.spatial.conventions import NAME_KEY
from napari_n5zarr.write.export.exporter import export

LayerData = tuple[Any, dict[str, Any], str]


def layer_export_kwargs(data: Any, meta: dict[str, Any]) -> dict[str, Any]:
    """:func:`export` keywords (data, scale, translate, units, axis_labels) for a layer."""
    levels = list(data) if meta.get("multiscale") else None
    first = levels[0] if levels else data
    scale = list(meta.get("scale") or [1.0] * first.ndim)
    translate = list(meta.get("translate") or [0.0] * len(scale))
    units: list[str | None] | None = (
        [str(u) for u in meta["units"]] if meta.get("units") is not None else None
    )
    labels = list(meta["axis_labels"]) if meta.get("axis_labels") is not None else None
    extra = first.ndim - len(scale)
    if extra > 0 or meta.get("rgb"):  # rgb(a): the colour axis is not a layer dimension
        extra = max(extra, 1)
        scale = scale[: first.ndim - extra] + [1.0] * extra
        translate = translate[: first.ndim - extra] + [0.0] * extra
        units = [*units[: first.ndim - extra], *([None] * extra)] if units is not None else None
        colour = COLOUR_AXES[1] if first.shape[-1] == 4 else COLOUR_AXES[0]
        labels = (labels or [f"-{i}" for i in range(first.ndim - extra, 0, -1)])[
            : first.ndim - extra
        ] + [colour] * extra
    _warn_transforms(meta)
    return {
        "data": levels if levels else data,
        "scale": scale,
        "translate": translate,
        "units": units,
        "axis_labels": labels,
    }


def _warn_transforms(meta: dict[str, Any]) -> None:
    lost = []
    for key in ("affine", "rotate"):
        matrix = np.asarray(meta[key], dtype=float) if meta.get(key) is not None else None
        if matrix is not None and matrix.ndim == 2 and not np.allclose(matrix, np.eye(len(matrix))):
            lost.append(key)
    if meta.get("shear") is not None and np.any(np.asarray(meta["shear"], dtype=float) != 0):
        lost.append("shear")
    if lost:
        warnings.warn(
            f"N5 metadata holds scale and translate only; the layer's {', '.join(lost)} is not saved",
            stacklevel=3,
        )


def export_layer(dest: str, data: Any, meta: dict[str, Any], *, labels: bool, **kwargs: Any) -> str:
    """Export one layer's data + metadata (the writers' and the export widget's core). The
    layer's name is kept in the pyramid group (``"name"``): the reader names the layer by it."""
    attributes = {NAME_KEY: plain_name(str(meta["name"]))} if meta.get("name") else None
    return export(
        **layer_export_kwargs(data, meta), dest=dest, labels=labels, attributes=attributes, **kwargs
    )


SAVE_EXISTS = (
    "{path} already exists: File > Save Layers never replaces a container. Choose a new name, "
    'or use Plugins > Export as N5 + Zarr v3 with "overwrite" ticked.'
)


def _saving(path: str, write: Callable[[], Any]) -> Any:
    """Run a Save Layers write; an existing destination is explained in menu words."""
    try:
        return write()
    except FileExistsError as exc:
        raise FileExistsError(SAVE_EXISTS.format(path=path)) from exc


OME_ZARR_SUFFIX = ".ome.zarr"


def format_for(path: str) -> str:
    """The export format a destination's name asks for: ``.ome.zarr`` -> ``"ome-zarr"``."""
    return "ome-zarr" if str(path).rstrip("/").lower().endswith(OME_ZARR_SUFFIX) else "dual"


def write_image(path: str, data: Any, meta: dict[str, Any]) -> list[str]:
    """npe2 single-layer writer for image layers."""
    return [
        _saving(path, lambda: export_layer(path, data, meta, labels=False, format=format_for(path)))
    ]


def write_labels(path: str, data: Any, meta: dict[str, Any]) -> list[str]:
    """npe2 single-layer writer for labels layers."""
    return [
        _saving(path, lambda: export_layer(path, data, meta, labels=True, format=format_for(path)))
    ]


def write_layers(path: str, layer_data: list[LayerData]) -> list[str]:
    """npe2 multi-layer writer: each layer becomes a pyramid group named after it."""
    names = _unique_names(
        [plain_name(meta.get("name") or "") or layer_type for _, meta, layer_type in layer_data]
    )
    written = []
    fmt = format_for(path)
    places = _ome_image_places(layer_data, names) if fmt == "ome-zarr" else names
    for (data, meta, layer_type), name in zip(layer_data, places, strict=True):
        kwargs: dict[str, Any] = {"labels": layer_type == "labels", "path": name, "format": fmt}
        _saving(path, functools.partial(export_layer, path, data, meta, **kwargs))
        written.append(f"{path.rstrip('/')}/{name}" if name else path)
    return written


def _ome_image_places(layer_data: list[LayerData], names: list[str]) -> list[str]:
    """Where each layer goes in a standard OME-Zarr: one image and its labels as OME-NGFF
    lays them out (the image at the root, each labels layer at ``labels/NAME``, listed there,
    so OME readers show them together); otherwise a group per layer."""
    kinds = [layer_type for _, _, layer_type in layer_data]
    if kinds.count("image") != 1 or kinds.count("labels") != len(kinds) - 1 or len(kinds) < 2:
        return names
    return [
        "" if kind == "image" else f"labels/{name}" for kind, name in zip(kinds, names, strict=True)
    ]


def _unique_names(names: list[str], clean: Callable[[str], str] | None = None) -> list[str]:
    """Folder-safe, unique group names."""
    clean = clean or (lambda n: re.sub(r"[^\w.-]+", "_", n).strip("._") or "layer")
    out: list[str] = []
    for name in map(clean, names):
        candidate, i = name, 1
        while candidate in out:
            i += 1
            candidate = f"{name}_{i}"
        out.append(candidate)
    return out
