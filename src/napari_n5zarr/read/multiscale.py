"""node -> :class:`~napari_n5zarr.spatial.Multiscale` descriptions -> levels in napari order.

The library's one levels builder, for the napari reader and ``n5zarr convert`` alike
(as ome-zarr-py's ``Multiscales.array`` serves napari-ome-zarr's thin reader):

* :func:`find_multiscales`: every image/labels pyramid under a node (metadata only), with
  BigDataViewer XML voxel sizes applied, and the list of nodes skipped with the reason.
  Attributes inherited from ancestors are read through the node's store (any backend):
  see :func:`napari_n5zarr.read.pyramid_walk.detect`.
* :func:`levels_for`: a pyramid's levels, finest first, in napari order (..., z, y, x);
  BigDataViewer time points stacked as a leading ``t`` axis.

Per-axis values of a :class:`Multiscale` are in N5 order (the reverse of napari's).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from napari_n5zarr import spatial
from napari_n5zarr.errors import N5FormatError
from napari_n5zarr.read.levels import (
    LazyLevel,
    dask_level,
    needs_preview,
    preview_levels,
)
from napari_n5zarr.read.pyramid_walk import detect, n5_ordered
from napari_n5zarr.spatial import Multiscale

if TYPE_CHECKING:
    import dask.array as da
    import zarr

Report = Callable[[str], None]

_SETUP_NAME = re.compile(r"(?:^|/)setup(\d+)$")


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
    node: zarr.Array | zarr.Group,
    name: str | None = None,
    *,
    inherited: Mapping[str, Any] | None = None,
    bdv_setups: Mapping[int, spatial.BdvSetup] | None = None,
    limit: int | None = None,
) -> Found:
    """Every pyramid under ``node`` (paths relative to it), problems collected, never raised
    for one bad child. ``bdv_setups`` (a BigDataViewer XML's) give the setups' voxel sizes.
    With ``limit``, more than ``limit`` pyramids give ``Found(too_many=True)``."""
    problems: list[str] = []
    found = detect(
        node,
        name,
        inherited=inherited,
        on_error=lambda p, e: problems.append(spatial.describe_error(p, e)),
        limit=limit,
    )
    if limit is not None and len(found) > limit:
        return Found([], problems, too_many=True)
    problems += [s.problem for s in (bdv_setups or {}).values() if s.problem]  # their voxel size fell back to 1
    return Found([with_bdv_setups(ms, bdv_setups) for ms in found], problems)


def with_bdv_setups(ms: Multiscale, setups: Mapping[int, spatial.BdvSetup] | None, path: str | None = None) -> Multiscale:
    """``ms`` with the voxel size of its BigDataViewer setup (``setupN``, from ``path`` or
    its name) when ``setups`` (a BigDataViewer XML's) describe it; else ``ms``."""
    if not setups or ms.convention != "bdv":
        return ms
    match = _SETUP_NAME.search(ms.name if path is None else path)
    setup = setups.get(int(match.group(1))) if match else None
    return spatial.with_bdv_setup(ms, setup) if setup is not None else ms


def child(node: zarr.Array | zarr.Group, path: str) -> zarr.Array:
    """The array at ``path`` (relative; "" is ``node`` itself)."""
    import zarr

    from napari_n5zarr.access import child_nodes

    found: Any = node if path == "" else child_nodes(node, [path])[0]  # type: ignore[arg-type]  # a Group whenever path is not ""
    if isinstance(found, BaseException):
        raise found
    if not isinstance(found, zarr.Array):
        raise ValueError(f"{path or '/'} is not an array")
    return found


def children(node: zarr.Array | zarr.Group, paths: list[str]) -> list[zarr.Array]:
    """The arrays at ``paths`` (as :func:`child`), opened concurrently: one round trip to
    zarr's event loop for all, not one each (over a network, and on a busy machine, each
    costs a thread hand-off)."""
    import zarr

    from napari_n5zarr.access import child_nodes

    if len(paths) < 2 or not isinstance(node, zarr.Group) or "" in paths:
        return [child(node, p) for p in paths]
    arrays = []
    for path, item in zip(paths, child_nodes(node, paths), strict=True):  # the first failure in path order, as one by one
        if isinstance(item, BaseException):
            raise item
        if not isinstance(item, zarr.Array):
            raise ValueError(f"{path} is not an array")
        arrays.append(item)
    return arrays


def levels_for(
    node: zarr.Array | zarr.Group, ms: Multiscale, report: Report | None = None, *, strict: bool = False
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
    if ms.label_multiset and not ms.time_paths:  # Paintera: blocks decoded by the multiset reader only
        return _multiset_levels(node, ms, report, strict)
    if ms.time_paths:
        import dask.array as da

        def stacked(k: int) -> da.Array:
            arrays = children(node, [paths[k] for paths in ms.time_paths])
            return da.stack([_dask(a, report, strict) for a in arrays], axis=0)

        return [stacked(k) for k in range(len(ms.paths))]
    arrays = children(node, list(ms.paths))
    if strict:
        return [_dask(a, report, strict) for a in arrays]
    if len(arrays) == 1 and needs_preview(ms.shapes[0][::-1]):  # no pyramid: preview levels
        return preview_levels(LazyLevel(arrays[0], n5_order=n5_ordered(arrays[0]), report=report))
    return [LazyLevel(a, n5_order=n5_ordered(a), report=report) for a in arrays]


def _multiset_levels(node: zarr.Array | zarr.Group, ms: Multiscale, report: Report | None, strict: bool) -> list[Any]:
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

    levels: list[Any] = [MultisetLevel(a, report=report) for a in children(node, list(ms.paths))]
    group = ms.paths[0].rsplit("/", 2)[0] if ms.paths[0].count("/") >= 2 else ""
    if "painteraData" in ms.attrs and ms.paths[0].split("/")[-2:-1] == ["data"] and not show_fragments():
        table = read_assignment(node, f"{group}/{ASSIGNMENT}" if group else ASSIGNMENT, None if strict else report)
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

    check_addressable(array)

    data = da.from_zarr(array)
    return data.T if n5_order else data


def storage_blocks(node: zarr.Array | zarr.Group, ms: Multiscale) -> tuple[int, ...]:
    """Storage block shape of the coarsest level, napari order (``1`` for a stacked ``t``)."""
    paths = ms.time_paths[0] if ms.time_paths else ms.paths
    array = child(node, paths[-1])
    blocks = tuple(int(b) for b in array.chunks)
    if n5_ordered(array):
        blocks = blocks[::-1]
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
