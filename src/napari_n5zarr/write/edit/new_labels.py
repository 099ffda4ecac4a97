"""New, empty labels for an image: a metadata-only labels pyramid (``create_labels``).

No block is written (an absent N5 block reads as 0), so creating labels for a terabyte image
takes as long as writing a few small JSON documents. The pyramid is planned as
:func:`~napari_n5zarr.write.export.exporter.export` plans one (levels, blocks, metadata, the
destination's lock and safety rules); only the writing of blocks is left out.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from napari_n5zarr.errors import InvalidArgumentError

LabelsFormat = Literal["dual", "ome-zarr"]
FORMATS = ("dual", "ome-zarr")
"""The formats :func:`create_labels` writes (``"dual"``: N5 + Zarr v3 at once; ``"ome-zarr"``:
a standard OME-Zarr, as ``export(format="ome-zarr")``)."""


@dataclass(frozen=True)
class Grid:
    """What new labels must match: level-0 shape and calibration, napari order."""

    shape: tuple[int, ...]
    scale: tuple[float, ...] | None = None
    translate: tuple[float, ...] | None = None
    units: tuple[str | None, ...] | None = None
    axis_labels: tuple[str, ...] | None = None
    chunks: tuple[int, ...] | None = None


def create_labels(
    path: str | os.PathLike[str],
    like: Any = None,
    *,
    shape: Sequence[int] | None = None,
    dtype: Any = "uint32",
    scale: Sequence[float] | None = None,
    translate: Sequence[float] | None = None,
    chunks: int | Sequence[int] | None = None,
    levels: int | Literal["auto"] = "auto",
    format: LabelsFormat = "dual",
    overwrite: bool = False,
    storage_options: dict[str, Any] | None = None,
) -> str:
    """Create empty labels (all 0) at ``path`` that overlay ``like`` exactly; no block is written.

    Parameters
    ----------
    path : str or os.PathLike
        The new labels pyramid: a folder (``.n5``) or a group inside a container.
    like : napari layer, str or os.PathLike, optional
        An image layer (its level-0 shape, scale, translate, units, axis labels) or the path
        of an image this package reads (the same, and its blocks as chunks).
    shape, scale, translate, chunks : optional
        napari order; given values win over those of ``like``; ``shape`` is needed without ``like``.
    dtype : optional
        An unsigned or signed integer type (default ``uint32``).
    levels : int or "auto", optional
        Pyramid levels (``"auto"``: 2x steps until one block).
    format : {"dual", "ome-zarr"}
        ``"dual"``: N5 + Zarr v3 at once, as export writes (editable in place in napari);
        ``"ome-zarr"``: a standard OME-Zarr (Zarr v3, OME-NGFF 0.5 labels).
    overwrite : bool, optional
        Replace existing labels that an export of this package wrote.

    Returns
    -------
    str
        ``path``.
    """
    from napari_n5zarr.write.export.exporter import export_metadata

    if format not in FORMATS:
        raise InvalidArgumentError(
            f"format {format!r}: create_labels writes {', '.join(map(repr, FORMATS))}"
        )
    grid = _grid(like, shape, scale, translate, chunks)
    kind = np.dtype(dtype)
    if kind.kind not in "iu":
        raise InvalidArgumentError(f"labels dtype must be an integer type, not {kind}")
    # A zero-strided view: any shape, no memory; the plan reads only shape and dtype.
    stand_in = np.broadcast_to(np.zeros((), kind), grid.shape)
    return export_metadata(
        stand_in, path, labels=True, scale=grid.scale, translate=grid.translate, units=grid.units,
        axis_labels=grid.axis_labels, chunks=grid.chunks, levels=levels, overwrite=overwrite,
        storage_options=storage_options, format=format,
    )  # fmt: skip


def _grid(like: Any, shape: Any, scale: Any, translate: Any, chunks: Any) -> Grid:
    """The grid of ``like`` (a layer or a path), with the given values taking precedence."""
    base = (
        Grid(shape=())
        if like is None
        else _grid_of_path(like)
        if isinstance(like, str | os.PathLike)
        else _grid_of_layer(like)
    )
    if shape is None and not base.shape:
        raise InvalidArgumentError("create_labels needs like= (an image layer or path) or shape=")
    out_shape = tuple(int(s) for s in (shape if shape is not None else base.shape))
    if not out_shape or any(s <= 0 for s in out_shape):
        raise InvalidArgumentError(f"labels shape must be positive on every axis, not {out_shape}")
    if base.shape and shape is not None and len(out_shape) != len(base.shape):
        raise InvalidArgumentError(
            f"shape {out_shape} has {len(out_shape)} axes, the image {len(base.shape)}"
        )
    block = (chunks,) * len(out_shape) if isinstance(chunks, int) else chunks
    return Grid(
        shape=out_shape,
        scale=tuple(scale) if scale is not None else base.scale,
        translate=tuple(translate) if translate is not None else base.translate,
        units=base.units,
        axis_labels=base.axis_labels,
        chunks=tuple(block) if block is not None else base.chunks,
    )


def _grid_of_path(location: str | os.PathLike[str]) -> Grid:
    from napari_n5zarr.read.images import open_images

    found = open_images(location)
    if found.error:
        raise InvalidArgumentError(f"like={os.fspath(location)!r}: {found.error}")
    if not found.images:
        raise InvalidArgumentError(f"like={os.fspath(location)!r}: no image there")
    image = found.images[0]
    ms, level0 = image.multiscale, image.levels[0]
    order = slice(None, None, -1)  # N5 order -> napari order
    block = getattr(level0, "chunks", None) or getattr(level0, "chunksize", None)
    if block is not None and isinstance(block[0], tuple):  # dask: per-axis chunk lists
        block = tuple(c[0] for c in block)
    return Grid(
        shape=tuple(int(s) for s in level0.shape),
        scale=tuple(float(s) for s in ms.scale[order]),
        translate=tuple(float(t) for t in ms.translate[order]),
        units=tuple(u or None for u in ms.units[order]),
        axis_labels=tuple(str(a) for a in ms.axes[order]),
        chunks=tuple(int(b) for b in block) if block is not None else None,
    )


def _grid_of_layer(layer: Any) -> Grid:
    """An image layer (duck-typed: no napari import here)."""
    if not hasattr(layer, "data") or not hasattr(layer, "scale"):
        raise InvalidArgumentError(
            f"like= must be an image layer or a path, not {type(layer).__name__}"
        )
    shape = layer.level_shapes[0] if getattr(layer, "multiscale", False) else np.shape(layer.data)
    if getattr(layer, "rgb", False):
        shape = shape[:-1]  # the colour axis is not a labels axis
    units = getattr(layer, "units", None)
    return Grid(
        shape=tuple(int(s) for s in shape),
        scale=tuple(float(s) for s in layer.scale),
        translate=tuple(float(t) for t in layer.translate),
        units=tuple(None if u is None else str(u) for u in units) if units is not None else None,
        axis_labels=tuple(str(a) for a in layer.axis_labels)
        if getattr(layer, "axis_labels", None) is not None
        else None,
    )
