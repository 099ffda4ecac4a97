"""Step 1 of an export: the arguments of :func:`napari_n5zarr.export` -> an :class:`ExportPlan`.

Pure (no I/O, nothing computed from the data): shapes, blocks and factors of every level,
the N5 data type and compression, and the metadata documents each node gets. Every bad
argument is refused here, before anything is written, with an error naming it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from napari_n5zarr.block_grid import grid
from napari_n5zarr.errors import N5FormatError
from napari_n5zarr.n5.compression import N5_TYPES, n5_to_zarr, normalize_n5, zarr_to_n5
from napari_n5zarr.n5.constants import N5_DTYPES
from napari_n5zarr.n5.metadata import N5DatasetMetadata
from napari_n5zarr.spatial.model import level_name
from napari_n5zarr.spatial.units import LENGTH_EXPONENT, unit_symbol
from napari_n5zarr.write import pyramid
from napari_n5zarr.write.export.blocks import Boundary

__all__ = [
    "MIN_BLOCK",
    "ExportPlan",
    "LevelPlan",
    "block_edge_problem",
    "default_chunks",
    "make_plan",
    "parse_compression",
]

MIN_BLOCK = 8
"""Smallest block edge a person may choose (the export widget, ``n5zarr convert --chunks``):
smaller blocks mean millions of tiny files, written and read one request each. The library's
:func:`make_plan` itself accepts any edge >= 1."""
MAX_BLOCK_BYTES = 512 * 2**20
"""Largest decoded block a person may choose (N5 blocks are decoded whole by every reader)."""


def block_edge_problem(block_size: int | Sequence[int] | None) -> str | None:
    """Why a chosen block size is refused, or None (None: the default blocks).

    One int is the edge on every spatial axis; in a per-axis list an entry of 1 is a
    non-spatial axis (channels, time) and allowed."""
    if block_size is None:
        return None
    edges = [block_size] if isinstance(block_size, int) else [b for b in block_size if b != 1]
    small = [b for b in edges if b < MIN_BLOCK]
    if small:
        return f"block size {small[0]} is too small (at least {MIN_BLOCK}, or auto)"
    return None


LEVEL_PARAMETER = {
    "gzip": "level",
    "zstd": "level",
    "bzip2": "blockSize",
    "xz": "preset",
    "blosc": "clevel",
}
"""Which N5 compression parameter ``"name:N"`` sets."""

ArrayLike = Any
LevelsArg = int | Literal["auto"]


@dataclass(frozen=True)
class LevelPlan:
    """One dataset ``s<k>`` of the pyramid (napari order)."""

    name: str
    shape: tuple[int, ...]
    block: tuple[int, ...]
    factors: tuple[int, ...]
    """Downsampling factors relative to level 0."""
    metadata: N5DatasetMetadata
    """Its N5 metadata (N5 order), with the attributes N5 readers see."""

    @property
    def document(self) -> dict[str, Any]:
        """Its ``zarr.json`` (``n5_default`` codec), with ``dimension_names`` (Zarr side only)."""
        from napari_n5zarr.write.ome import with_dimension_names

        return with_dimension_names(self.metadata.to_zarr_json())

    @property
    def nblocks(self) -> int:
        return math.prod(grid(self.shape, self.block))


@dataclass(frozen=True)
class ExportPlan:
    """Everything an export writes, decided before the first block (napari order)."""

    levels: tuple[LevelPlan, ...]
    steps: tuple[tuple[int, ...], ...]
    """Per-step factors from level k to k+1 (empty when the levels are given)."""
    given_levels: bool
    """True when the caller passed every level (written as they are)."""
    dtype: np.dtype
    compression: dict[str, Any]
    """The N5 compression object, defaults made explicit."""
    axes: tuple[str, ...]
    spatial: tuple[int, ...]
    method: pyramid.Method
    boundary: Boundary
    write_empty_blocks: bool
    zarr_json: bool
    group_document: dict[str, Any]
    """The pyramid group's ``zarr.json``."""
    prefix: str
    """The pyramid group inside the container (``""`` or ``"a/b/"``)."""

    @property
    def ndim(self) -> int:
        return len(self.axes)

    @property
    def nblocks(self) -> int:
        """Blocks of every level (what ``progress`` counts up to)."""
        return sum(level.nblocks for level in self.levels)


def _first_source(sources: Sequence[ArrayLike], boundary: str, downsample: str | None) -> ArrayLike:
    """Level 0 of ``sources``, once the choices that need no shape are checked."""
    if boundary not in ("truncate", "pad"):
        raise ValueError(f"boundary must be 'truncate' or 'pad', got {boundary!r}")
    if downsample is not None and downsample not in ("mean", "mode", "nearest"):
        raise ValueError(f"unknown downsampling method {downsample!r} (mean, mode, nearest)")
    if not sources:
        raise ValueError("no data to export")
    first = sources[0]
    if first.ndim == 0 or any(s == 0 for s in first.shape):
        raise ValueError(f"cannot export an empty array of shape {first.shape}")
    return first


def make_plan(
    sources: Sequence[ArrayLike],
    *,
    given_levels: bool,
    scale: Sequence[float] | None = None,
    translate: Sequence[float] | None = None,
    units: str | Sequence[str | None] | None = None,
    axis_labels: Sequence[str] | None = None,
    compression: str | dict[str, Any] | None = "gzip",
    chunks: int | Sequence[int] | None = None,
    levels: LevelsArg = "auto",
    boundary: Boundary = "truncate",
    labels: bool = False,
    downsample: pyramid.Method | None = None,
    path: str = "",
    attributes: dict[str, Any] | None = None,
    zarr_json: bool = True,
    write_empty_blocks: bool = False,
) -> ExportPlan:
    """The plan for exporting ``sources`` (level 0 first; only shapes and dtypes are read).

    Keywords as :func:`napari_n5zarr.export`. Raises ``ValueError`` / ``TypeError`` /
    :class:`~napari_n5zarr.errors.N5FormatError` naming the bad argument.
    """
    from napari_n5zarr.write.safe_destination import group_prefix

    first = _first_source(sources, boundary, downsample)
    ndim = first.ndim
    dtype = n5_dtype(first.dtype)
    comp = parse_compression(compression)
    scale_l = [float(s) for s in _per_axis(scale, ndim, 1.0, "scale")]
    translate_l = [float(t) for t in _per_axis(translate, ndim, 0.0, "translate")]
    units_l = [None if u is None else str(u) for u in _per_axis(units, ndim, None, "units")]
    axes = _axis_names(axis_labels, ndim)
    spatial = pyramid.spatial_axes(ndim, axes)
    block = _chunks(chunks, first.shape, spatial)
    method: pyramid.Method = downsample or ("mode" if labels else "mean")
    steps, shapes, factors = _levels(
        list(sources) if given_levels else None, first.shape, block, spatial, scale_l, levels
    )
    group_attrs, level_attrs = _metadata(
        ndim, scale_l, translate_l, units_l, axes, factors, labels, attributes
    )
    level_plans = _level_plans(shapes, factors, level_attrs, block, dtype, comp)
    return ExportPlan(
        levels=tuple(level_plans),
        steps=tuple(tuple(s) for s in steps),
        given_levels=given_levels,
        dtype=dtype,
        compression=comp,
        axes=tuple(axes),
        spatial=tuple(spatial),
        method=method,
        boundary=boundary,
        write_empty_blocks=bool(write_empty_blocks),
        zarr_json=bool(zarr_json),
        group_document=_group_document(group_attrs, level_plans, labels, path),
        prefix=group_prefix(path),
    )


def _level_plans(
    shapes: Sequence[tuple[int, ...]],
    factors: Sequence[Sequence[int]],
    level_attrs: Sequence[dict[str, Any]],
    block: Sequence[int],
    dtype: np.dtype,
    comp: dict[str, Any],
) -> list[LevelPlan]:
    """The level datasets ``s0 .. sN`` (napari order in, N5 metadata out)."""
    level_plans = []
    for k, (shape, f, attrs) in enumerate(zip(shapes, factors, level_attrs, strict=True)):
        bl = tuple(min(b, n) for b, n in zip(block, shape, strict=True))
        meta = N5DatasetMetadata(shape[::-1], bl[::-1], dtype.name, comp, attrs)
        level_plans.append(LevelPlan(level_name(k), shape, bl, tuple(f), meta))
    return level_plans


def _group_document(
    group_attrs: dict[str, Any], levels: Sequence[LevelPlan], labels: bool, path: str
) -> dict[str, Any]:
    """The pyramid group's ``zarr.json``: the N5 attributes, plus OME-NGFF 0.5 (``ome``, Zarr
    side only) computed from them as this package's reader calibrates them."""
    from napari_n5zarr.spatial.model import ArrayInfo
    from napari_n5zarr.write.ome import OME_KEY, pyramid_ome

    infos = {
        lv.name: ArrayInfo(
            dict(lv.metadata.attributes), lv.metadata.dimensions, lv.metadata.data_type
        )
        for lv in levels
    }
    attrs = dict(group_attrs)
    ome = pyramid_ome(
        {k: v for k, v in attrs.items() if k != OME_KEY}, infos, labels=labels, where=path or "/"
    )
    if ome is not None:
        attrs[OME_KEY] = ome  # ours replaces one given in ``attributes`` (which is kept otherwise)
    return {"zarr_format": 3, "node_type": "group", "attributes": attrs}


def parse_compression(compression: str | dict[str, Any] | None) -> dict[str, Any]:
    """An N5 compression object from ``"gzip"``, ``"zstd:5"``, a JSON string or a dict."""
    if compression is None:
        params: dict[str, Any] = {"type": "raw"}
    elif isinstance(compression, dict):
        params = dict(compression)
    elif isinstance(compression, str) and compression.lstrip().startswith("{"):
        params = json.loads(compression)
    elif isinstance(compression, str):
        name, _, level = compression.strip().partition(":")
        params = {"type": name.lower()}
        if level:
            if name.lower() not in LEVEL_PARAMETER:
                raise ValueError(f"compression {name!r} takes no level")
            params[LEVEL_PARAMETER[name.lower()]] = int(level)
    else:
        raise TypeError(f"compression must be a string or a dict, got {type(compression).__name__}")
    params = normalize_n5({"compression": params})
    if params.get("type") not in N5_TYPES:
        raise N5FormatError(
            f"unknown N5 compression {params.get('type')!r} (choose from {', '.join(N5_TYPES)})"
        )
    # Normalised through the one table: defaults made explicit, invalid values refused.
    return zarr_to_n5(n5_to_zarr(params))


def n5_dtype(dtype: Any) -> np.dtype:
    """The N5 data type that stores ``dtype`` (bool as uint8, float16 as float32)."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return np.dtype("uint8")
    if dtype == np.float16:
        return np.dtype("float32")
    if dtype.newbyteorder("=").name not in N5_DTYPES:
        raise TypeError(f"N5 cannot store {dtype}; it stores {', '.join(N5_DTYPES)}")
    return dtype.newbyteorder("=")


def default_chunks(shape: Sequence[int], spatial: Sequence[int]) -> tuple[int, ...]:
    """Blocks of 64^3 (3D), 256^2 (2D) or 4096 (1D) on spatial axes, 1 on the others."""
    edge = {1: 4096, 2: 256}.get(len(spatial), 64)
    return tuple(min(edge, n) if i in spatial else 1 for i, n in enumerate(shape))


def _chunks(
    chunks: int | Sequence[int] | None, shape: Sequence[int], spatial: Sequence[int]
) -> tuple[int, ...]:
    if chunks is None:
        block = default_chunks(shape, spatial)
    elif isinstance(chunks, int | np.integer):
        block = tuple(int(chunks) if i in spatial else 1 for i in range(len(shape)))
    else:
        if len(chunks) != len(shape):
            raise ValueError(f"chunks {tuple(chunks)} do not match {len(shape)} dimensions")
        block = tuple(
            int(c) if c not in (None, -1) else n for c, n in zip(chunks, shape, strict=True)
        )
    if any(b < 1 for b in block):
        raise ValueError(f"block sizes must be >= 1, got {block}")
    return tuple(max(1, min(b, n)) for b, n in zip(block, shape, strict=True))


def _per_axis(value: Any, ndim: int, default: Any, name: str) -> list[Any]:
    if value is None:
        return [default] * ndim
    if isinstance(value, str) or not isinstance(value, Sequence | np.ndarray):
        return [value] * ndim
    values = list(value)
    if len(values) != ndim:
        raise ValueError(f"{name} has {len(values)} entries for {ndim} dimensions")
    return values


def _is_default_label(label: Any) -> bool:
    """napari's placeholders ('-1', 'axis -1', '0') are no axis names."""
    text = str(label).strip().lower().removeprefix("axis").strip()
    return not text or text.lstrip("-").isdigit()


def _axis_names(axis_labels: Sequence[str] | None, ndim: int) -> list[str]:
    """Unique axis names in napari order. Placeholders are named from the last axis
    backwards: x, y, z, t, c, d5, ... (skipping names already given)."""
    given = (
        _per_axis(list(axis_labels), ndim, None, "axis_labels")
        if axis_labels is not None
        else [None] * ndim
    )
    names = [None if a is None or _is_default_label(a) else str(a) for a in given]
    used = set(filter(None, names))
    spare = (
        d
        for d in ["x", "y", "z", "t", "c", *(f"d{i}" for i in range(5, 2 * ndim + 5))]
        if d not in used
    )
    for i in reversed(range(ndim)):
        if names[i] is None:
            names[i] = next(spare)
    if len(set(names)) != ndim:
        raise ValueError(f"axis labels must be unique, got {names}")
    return names  # type: ignore[return-value]


def _common_length_unit(
    scale: list[float], translate: list[float], units: list[str]
) -> tuple[list[float], list[float], list[str]]:
    """Express mixed length units (e.g. nm and um) in the finest one: N5 Viewer's
    ``pixelResolution`` has a single unit that readers apply to every axis."""
    present = {u for u in units if u}
    if len(present) < 2 or not present <= LENGTH_EXPONENT.keys():
        return scale, translate, units
    target = min(present, key=LENGTH_EXPONENT.__getitem__)
    factors = [10 ** (LENGTH_EXPONENT[u] - LENGTH_EXPONENT[target]) if u else 1 for u in units]
    return (
        [s * f for s, f in zip(scale, factors, strict=True)],
        [t * f for t, f in zip(translate, factors, strict=True)],
        [target if u else u for u in units],
    )


def _metadata(
    ndim: int,
    scale: Sequence[float],
    translate: Sequence[float],
    units: Sequence[str | None],
    axes: Sequence[str],
    factors: Sequence[Sequence[int]],
    labels: bool,
    attributes: dict[str, Any] | None,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(group attributes, per-level attributes); inputs in napari order, output N5 order."""
    scale_n5, translate_n5, units_n5 = _common_length_unit(
        [float(s) for s in reversed(scale)],
        [float(t) for t in reversed(translate)],
        [unit_symbol(u) for u in reversed(units)],
    )
    axes_n5 = list(reversed(axes))
    unit = next((u for u in units_n5 if u), "pixel")
    pixel_resolution = {"unit": unit, "dimensions": scale_n5}
    group: dict[str, Any] = dict(attributes or {})
    group.update(
        pixelResolution=pixel_resolution, axes=axes_n5, units=units_n5, resolution=scale_n5
    )
    if any(t != 0 for t in translate_n5):
        group["offset"] = translate_n5
    if labels:
        group.setdefault("image-label", {})
    levels = []
    for f in factors:
        f_n5 = [int(x) for x in reversed(f)]
        levels.append(
            {
                "downsamplingFactors": f_n5,
                "pixelResolution": pixel_resolution,
                "axes": axes_n5,
                "units": units_n5,
                "resolution": [s * x for s, x in zip(scale_n5, f_n5, strict=True)],
            }
        )
    return group, levels


def _levels(
    given: list[ArrayLike] | None,
    shape: Sequence[int],
    block: Sequence[int],
    spatial: Sequence[int],
    scale: Sequence[float],
    levels: LevelsArg,
) -> tuple[list[tuple[int, ...]], list[tuple[int, ...]], list[tuple[int, ...]]]:
    """(per-step factors, level shapes, factors relative to level 0), napari order."""
    if given is not None:
        shapes = [tuple(int(s) for s in a.shape) for a in given]
        if any(len(s) != len(shape) for s in shapes):
            raise ValueError("all levels must have the same number of dimensions")
        return (
            [],
            shapes,
            [
                tuple(pyramid.level_factor(a, b) for a, b in zip(shapes[0], s, strict=True))
                for s in shapes
            ],
        )
    steps = pyramid.plan(shape, block, spatial, scale, levels)
    shapes = [tuple(int(s) for s in shape)]
    for step in steps:
        shapes.append(tuple(math.ceil(s / f) for s, f in zip(shapes[-1], step, strict=True)))
    return steps, shapes, pyramid.absolute_factors(steps, len(shape))
