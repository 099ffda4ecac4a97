"""A tree's node -> :class:`~napari_n5zarr.spatial.Multiscale` descriptions -> levels in napari order.

The library's one levels builder, for the napari reader and ``n5zarr convert`` alike
(as ome-zarr-py's ``Multiscales.array`` serves napari-ome-zarr's thin reader):

* :func:`find_multiscales`: every image/labels pyramid under a node (metadata only, through
  the tree: :func:`napari_n5zarr.read.pyramid_walk.detect`), BigDataViewer XML voxel sizes
  applied, and the list of nodes skipped with the reason.
* :func:`levels_for`: a pyramid's levels, finest first, in napari order (..., z, y, x);
  BigDataViewer time points stacked as a leading ``t`` axis. Only these levels' arrays are
  opened, from the documents the tree read.

Per-axis values of a :class:`Multiscale` are in N5 order (the reverse of napari's).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from napari_n5zarr import spatial
from napari_n5zarr.errors import N5FormatError
from napari_n5zarr.n5.constants import CODEC_NAME
from napari_n5zarr.read.levels import (
    LazyLevel,
    dask_level,
    needs_preview,
    preview_levels,
)
from napari_n5zarr.read.pyramid_walk import Where, detect, place
from napari_n5zarr.spatial import Multiscale
from napari_n5zarr.spatial.model import join_path

if TYPE_CHECKING:
    import dask.array as da
    import zarr

Report = Callable[[str], None]


@dataclass(frozen=True)
class Found:
    """What :func:`find_multiscales` found under a node."""

    multiscales: list[Multiscale] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    """``"path: reason"`` for every node that could not be read (its siblings were)."""
    too_many: bool = False
    """More pyramids than the ``limit``: ``multiscales`` is left empty."""

    @property
    def readable(self) -> list[Multiscale]:
        """The pyramids whose blocks can be decoded (all but :attr:`hidden`)."""
        return [ms for ms in self.multiscales if not ms.unreadable]

    @property
    def hidden(self) -> list[str]:
        """``"path: reason"`` of every pyramid found whose blocks cannot be decoded by
        design (a label multiset that would read as zeros)."""
        return [f"{ms.name or '/'}: {ms.unreadable}" for ms in self.multiscales if ms.unreadable]


def find_multiscales(
    where: Where | zarr.Array | zarr.Group, name: str | None = None, *, limit: int | None = None
) -> Found:
    """Every pyramid under ``where`` (a tree's node or a zarr node; paths relative to it),
    problems collected, never raised for one bad child; BigDataViewer setups with the voxel
    sizes of the tree's XML. With ``limit``, more than ``limit`` pyramids give
    ``Found(too_many=True)``."""
    tree, node = place(where)
    problems: list[str] = []
    found = detect(
        (tree, node),
        name,
        on_error=lambda p, e: problems.append(spatial.describe_error(p, e)),
        limit=limit,
    )
    if limit is not None and len(found) > limit:
        return Found([], problems, too_many=True)
    problems += [
        s.problem for s in (tree.bdv_setups or {}).values() if s.problem
    ]  # their voxel size fell back to 1
    return Found(found, problems)


def n5_ordered(array: zarr.Array) -> bool:
    """True for ``n5_default`` arrays (shape in N5 order, fastest axis first); plain Zarr
    arrays are in C order."""
    codecs: Any = getattr(array.metadata, "codecs", None) or ()
    try:
        return bool(codecs) and codecs[0].to_dict().get("name") == CODEC_NAME
    except (AttributeError, TypeError, ValueError):  # a codec without a JSON form
        return False


def _arrays(where: Where, paths: list[str]) -> list[zarr.Array]:
    """The arrays at ``paths`` (relative to ``where``), built from the documents the tree read."""
    tree, node = where
    return tree.arrays([join_path(node.path, p) for p in paths])


def level_arrays(where: Where | zarr.Array | zarr.Group, ms: Multiscale) -> list[zarr.Array]:
    """The zarr arrays of the levels of ``ms`` (paths relative to ``where``), finest first, in
    N5 order, built from the documents the tree read (what the levels are made of)."""
    return _arrays(place(where), list(ms.paths))


def levels_for(
    where: Where | zarr.Array | zarr.Group,
    ms: Multiscale,
    report: Report | None = None,
    *,
    strict: bool = False,
) -> list[Any]:
    """The levels of ``ms`` (paths relative to ``node``), finest first, napari order.

    Default (viewing): one :class:`~napari_n5zarr.read.levels.LazyLevel` per level
    (array-likes napari slices directly; ``to_dask()`` gives a dask array), dask arrays for
    stacked BigDataViewer time points; an unreadable block reads as the fill value and
    goes to ``report``; a single huge level gets nearest-neighbour preview levels.

    ``strict`` (copying, ``n5zarr convert``): dask arrays straight over the zarr arrays,
    one dask chunk per storage block, read errors raised (a copy must never write the fill
    value for a block it could not read), no preview levels.
    """
    node = place(where)
    if (
        ms.label_multiset and not ms.time_paths
    ):  # Paintera: blocks decoded by the multiset reader only
        return _multiset_levels(node, ms, report, strict)
    if ms.time_paths:
        import dask.array as da

        def stacked(k: int) -> da.Array:
            arrays = _arrays(node, [paths[k] for paths in ms.time_paths])
            return da.stack([_dask(a, report, strict) for a in arrays], axis=0)

        return [stacked(k) for k in range(len(ms.paths))]
    arrays = _arrays(node, list(ms.paths))
    if strict:
        return [_dask(a, report, strict) for a in arrays]
    if len(arrays) == 1 and needs_preview(ms.shapes[0][::-1]):  # no pyramid: preview levels
        return preview_levels(LazyLevel(arrays[0], n5_order=n5_ordered(arrays[0]), report=report))
    return [LazyLevel(a, n5_order=n5_ordered(a), report=report) for a in arrays]


def _multiset_levels(node: Where, ms: Multiscale, report: Report | None, strict: bool) -> list[Any]:
    """Label-multiset levels (:class:`~napari_n5zarr.read.multiset_levels.MultisetLevel`), with
    the Paintera group's fragment-segment assignment applied unless fragments are asked for
    (:func:`~napari_n5zarr.read.multiset_levels.show_fragments`); ``strict``: dask arrays that
    raise on unreadable blocks."""
    from napari_n5zarr.read.multiset_levels import (
        ASSIGNMENT,
        MultisetLevel,
        read_assignment,
        show_fragments,
    )

    levels: list[Any] = [MultisetLevel(a, report=report) for a in _arrays(node, list(ms.paths))]
    group = ms.paths[0].rsplit("/", 2)[0] if ms.paths[0].count("/") >= 2 else ""
    if (
        "painteraData" in ms.attrs
        and ms.paths[0].split("/")[-2:-1] == ["data"]
        and not show_fragments()
    ):
        tree, top = node
        table = read_assignment(
            tree.zarr_group(top),
            f"{group}/{ASSIGNMENT}" if group else ASSIGNMENT,
            None if strict else report,
        )
        for level in levels:
            level.assignment = table
    if strict:  # one dask chunk per storage block, as the other levels of a copy
        from napari_n5zarr.read.levels import _from_reader

        for level in levels:
            level.strict = True
        return [_from_reader(level, level.storage_blocks) for level in levels]
    return levels


MAX_AXIS_BLOCKS = 2**24
"""Most blocks along one axis a copy (one dask task per block) addresses: N5 dimensions go up
to 2**63 - 1 (Paintera's ``label-to-block-mapping``), dask's block list per axis does not."""


def check_addressable(array: zarr.Array) -> None:
    """Refuse, in one line (N5FormatError), a copy of ``array`` whose block grid is too long
    along one axis to be addressed block by block (:data:`MAX_AXIS_BLOCKS`)."""
    for axis, (size, block) in enumerate(zip(array.shape, array.chunks, strict=True)):
        count = -(-size // block)
        if count > MAX_AXIS_BLOCKS:
            from napari_n5zarr.n5.stores import store_location

            raise N5FormatError(
                f"{store_location(array.store, array.path)}: {count} blocks along axis {axis} (extent {size}, blocks of {block}); "
                f"a copy addresses at most {MAX_AXIS_BLOCKS} per axis"
            )


def _dask(array: zarr.Array, report: Report | None, strict: bool) -> da.Array:
    """One level in napari order as a dask array (see :func:`levels_for`)."""
    n5_order = n5_ordered(array)
    if not strict:
        return dask_level(array, n5_order=n5_order, report=report)
    import dask.array as da
    import numpy as np

    reader = strict_reader(array)
    return da.from_array(reader, chunks=reader.storage_blocks, asarray=True, fancy=False,
                         meta=np.empty((0,) * reader.ndim, reader.dtype))  # fmt: skip


def strict_reader(array: zarr.Array) -> Any:
    """``array`` in napari order as a :class:`~napari_n5zarr.read.levels.LevelReader` that
    raises on a block it cannot read (a copy never writes the fill value for unread data):
    one call reads a region's blocks concurrently (the block path of ``n5_default`` arrays)."""
    from napari_n5zarr.read.block_cache import BlockCache
    from napari_n5zarr.read.fetch import BlockSource
    from napari_n5zarr.read.levels import LevelReader

    check_addressable(array)
    reader = LevelReader(array, n5_order=n5_ordered(array))
    reader.strict = True
    if reader.source is not None:  # a copy reads each block once: no cache to fill
        reader.source = BlockSource.for_array(array, cache=BlockCache(0))
    return reader


def storage_blocks(where: Where | zarr.Array | zarr.Group, ms: Multiscale) -> tuple[int, ...]:
    """Storage block shape of the coarsest level, napari order (``1`` for a stacked ``t``)."""
    tree, node = place(where)
    paths = ms.time_paths[0] if ms.time_paths else ms.paths
    blocks = tree.node_at(join_path(node.path, paths[-1])).blocks  # napari order
    return ((1, *blocks)) if ms.time_paths else blocks


def is_rgb(ms: Multiscale) -> bool:
    """A colour axis (named ``rgb``/``rgba`` by the writer or by :func:`detect` for
    uncalibrated C-order RGB) as N5 axis 0 with 3 or 4 entries."""
    return (
        ms.ndim >= 3
        and ms.axes[0] in spatial.COLOUR_AXES
        and ms.shapes[0][0] in (3, 4)
        and not ms.time_paths
        and not ms.is_labels
    )
