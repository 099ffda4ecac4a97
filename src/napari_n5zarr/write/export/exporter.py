"""numpy / dask array -> N5 Viewer pyramid that is N5 and Zarr v3 at once.

Layout (per-axis lists in N5 order, the reverse of napari's):

* root group: ``pixelResolution`` {unit, dimensions}, ``axes``, ``units``, ``resolution``
  (N5 Viewer, neuroglancer), ``offset`` (physical translate, as Paintera) when non-zero,
  ``image-label`` {} for labels; the root ``attributes.json`` carries ``"n5": "4.0.0"``.
* ``s0 .. sN`` datasets: ``downsamplingFactors`` (relative to s0), ``pixelResolution`` (of s0
  pixels, N5 Viewer), ``axes``/``units``/``resolution`` (of this level's pixels, tensorstore).
* attributes.json and zarr.json (``n5_default`` codec) at every node.

Safety (see :mod:`napari_n5zarr.write.safe_destination`): an existing destination is refused
unless ``overwrite=True``; a local one is then replaced only if everything in it is what an
export writes (else the error lists what would have been deleted), by writing the new
pyramid in a staging folder beside it and swapping it in once complete: the old data stays
readable until then and survives any failure, cancel or ``kill -9`` before (so re-compressing
a destination in place works). Stores that cannot rename (zip, fsspec URLs, memory) refuse
overwrite. A lock file beside the container keeps a second export out. Blocks are written
first, then each dataset's metadata, the root group last; until then a marker file
``.n5zarr-incomplete`` sits in the root. An interrupted export therefore never looks
complete; a failed or cancelled one is removed (a full disk says so).
Memory stays bounded (a region of a few blocks per thread): each level-0 region is written
with the finer levels computed from it in memory; coarser levels from the blocks of the
last level written (see :mod:`napari_n5zarr.write.export.levels`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from napari_n5zarr.errors import ExportCancelled, InvalidArgumentError
from napari_n5zarr.write import pyramid
from napari_n5zarr.write.export.blocks import Boundary
from napari_n5zarr.write.export.levels import as_cancel, write_levels
from napari_n5zarr.write.export.plan import (
    ArrayLike,
    LevelsArg,
    default_chunks,
    make_plan,
    parse_compression,
)
from napari_n5zarr.write.export.publish import INCOMPLETE_MARKER, Destination

__all__ = ["INCOMPLETE_MARKER", "ExportCancelled", "default_chunks", "export", "parse_compression"]


def export(
    data: ArrayLike | Sequence[ArrayLike],
    dest: str | os.PathLike[str],
    *,
    scale: Sequence[float] | None = None,
    translate: Sequence[float] | None = None,
    units: str | Sequence[str | None] | None = None,
    axis_labels: Sequence[str] | None = None,
    compression: str | dict[str, Any] | None = "default",
    chunks: int | Sequence[int] | None = None,
    levels: LevelsArg = "auto",
    boundary: Boundary = "truncate",
    overwrite: bool = False,
    progress: Callable[[int, int], Any] | None = None,
    labels: bool = False,
    downsample: pyramid.Method | None = None,
    path: str = "",
    attributes: dict[str, Any] | None = None,
    zarr_json: bool = True,
    write_empty_blocks: bool = False,
    storage_options: dict[str, Any] | None = None,
    scheduler: Any = None,
    cancel: Any = None,
    worker_timeout: float | None = None,
    format: str = "dual",
    shards: int | str | Sequence[int] | None = None,
    resume: bool = False,
    source_id: str | None = None,
) -> str:
    """Write ``data`` as an N5 Viewer pyramid that is N5 and Zarr v3 at once (or a standard OME-Zarr).

    Three steps: :func:`~napari_n5zarr.write.export.plan.make_plan` checks every argument and
    decides every level and metadata document before anything is written;
    :func:`~napari_n5zarr.write.export.levels.write_levels` writes the blocks;
    :class:`~napari_n5zarr.write.export.publish.Destination` makes them visible (metadata, swap,
    marker) or removes them on failure.

    Parameters
    ----------
    data : numpy or dask array, or a sequence of them
        napari order (..., z, y, x); a list is the levels, finest first, written as they
        are (``levels`` is then ignored).
    dest : str or path
        The container: a local folder, a ``.zip`` file or an fsspec URL.
    scale, translate : sequence of float, optional
        Pixel size and physical offset per axis (napari order).
    units : str or sequence of str, optional
        One unit for every axis or one per axis (``"micrometer"``, ``"nm"``, ...).
    axis_labels : sequence of str, optional
        Axis names (napari's placeholders such as ``"-1"`` are named x, y, z, t, c, ...).
    compression : str or dict, optional
        An N5 type (``"gzip"``, ``"zstd"``, ...; ``"zstd:5"`` sets the level), an N5
        compression dict or its JSON; None is raw. Default: gzip (dual), zstd (OME-Zarr,
        which takes ``"zstd"``, ``"gzip"``, ``"blosc"``, ``"raw"`` with an optional ``:level``).
    chunks : int or sequence of int, optional
        Block size per axis (napari order), or one int for every spatial axis; default
        64^3 / 256^2 / 4096 on spatial axes, 1 on the others.
    levels : int or "auto"
        ``"auto"``: 2x steps until a level fits one block; else the number of levels.
    boundary : {"truncate", "pad"}
        Edge blocks clipped (like n5-java) or full (like tensorstore).
    overwrite : bool
        Replace an existing node, only if it holds nothing but what an export writes
        (local folders only: written beside it, then swapped in).
    progress : callable, optional
        ``progress(done, total)`` counts blocks.
    labels : bool
        Mode downsampling and an ``image-label`` marker.
    downsample : {"mean", "mode", "nearest"}, optional
        Overrides the downsampling method ``labels`` chooses.
    path : str
        Write the pyramid at this group inside the container ``dest``.
    attributes : dict, optional
        Extra attributes of the pyramid group.
    zarr_json : bool
        False writes N5 only (z5py 3 refuses folders holding both). The ``zarr.json`` of the
        pyramid group carries OME-NGFF 0.5 (``ome``) where OME-NGFF can describe its axes in
        the Zarr (= N5) order; ``attributes.json`` never does (see docs/formats.md).
    write_empty_blocks : bool
        Also write blocks that are all zero (skipped by default: they read as 0).
    storage_options : dict, optional
        fsspec options for a URL ``dest``.
    scheduler : optional
        Passed to dask; a distributed ``Client`` also works (progress is then per level
        and cancel is checked between levels).
    cancel : threading.Event or callable, optional
        Stops the export within a fraction of a second, even while a block is still being
        computed: no block task starts and no block is written after it (blocks already
        computing finish in the background, their results discarded).
    worker_timeout : float, optional
        With a dask.distributed scheduler: fail (:class:`~napari_n5zarr.errors.ClusterError`)
        once the cluster has had no worker for this many seconds; None waits, as dask does.
    format : {"dual", "ome-zarr"}
        ``"dual"``: this N5 + Zarr v3 dataset. ``"ome-zarr"``: a standard OME-Zarr (Zarr v3,
        OME-NGFF 0.5, standard codecs, napari axis order) every Zarr reader opens; ``boundary``,
        ``zarr_json`` and ``cancel`` do not apply (see :mod:`~napari_n5zarr.write.export.ome_zarr`).
    shards : int, str or sequence of int, optional
        OME-Zarr only: blocks per shard (one int for every spatial axis, or ``"z,y,x"``);
        None writes no shards.
    resume : bool
        OME-Zarr into a local folder only: go on with an unfinished export of the same data
        and arguments at ``dest`` (killed, or interrupted by Ctrl-C), writing only the shards
        it had not finished; nothing there: start afresh. Another unfinished export, or
        anything else at ``dest``, is refused and nothing deleted.
    source_id : str, optional
        OME-Zarr: names the data for ``resume`` (default: dask's token of ``data``;
        convert passes its source's path, image and region).

    Returns
    -------
    str
        ``dest``.

    Raises
    ------
    ValueError, TypeError, N5FormatError
        A bad argument (named in the message); nothing was written.
    FileExistsError
        ``dest`` exists and ``overwrite`` is False, or it holds what an export did not write.
    DestinationBusyError
        Another export is writing to ``dest``.
    ExportCancelled
        ``cancel`` was set; the partial output is removed.
    ClusterError
        On a dask.distributed cluster: a worker died running a task more often than
        ``distributed.scheduler.allowed-failures`` allows, or no worker for ``worker_timeout``.
        Any failure on a cluster cancels the export's tasks and waits for the workers'
        writes in flight before the partial output is removed.
    OSError
        The disk is full (the message says what was removed; an overwritten node is untouched).
    """
    from napari_n5zarr.access import ensure_codecs_registered
    from napari_n5zarr.write.export.ome_zarr import check_format, export_ome_zarr

    if check_format(format) == "ome-zarr":
        return export_ome_zarr(
            data, dest, compression=compression, shards=shards, overwrite=overwrite, progress=progress,
            cancel=as_cancel(cancel), zarr_json=zarr_json,
            storage_options=storage_options, scheduler=scheduler, scale=scale, translate=translate, units=units,
            axis_labels=axis_labels, chunks=chunks, levels=levels, labels=labels, downsample=downsample, path=path,
            attributes=attributes, write_empty_blocks=write_empty_blocks, worker_timeout=worker_timeout,
            resume=resume, source_id=source_id,
        )  # fmt: skip
    _refuse_ome_only(shards, resume)
    compression = "gzip" if compression == "default" else compression
    ensure_codecs_registered()
    cancel_fn = as_cancel(cancel)
    given_levels = isinstance(data, list | tuple)
    sources = list(data) if given_levels else [data]
    plan = make_plan(
        sources, given_levels=given_levels, scale=scale, translate=translate, units=units, axis_labels=axis_labels,
        compression=compression, chunks=chunks, levels=levels, boundary=boundary, labels=labels,
        downsample=downsample, path=path, attributes=attributes, zarr_json=zarr_json,
        write_empty_blocks=write_empty_blocks,
    )  # fmt: skip
    with Destination(dest, plan.prefix, overwrite, storage_options) as destination:
        store, prefix = destination.open()
        write_levels(plan, sources, store, prefix, progress=progress, cancel=cancel_fn, scheduler=scheduler,
                     gate=destination.gate, worker_timeout=worker_timeout)  # fmt: skip
        destination.publish(plan)
    return os.fspath(dest)


def _refuse_ome_only(shards: Any, resume: bool) -> None:
    """The standard OME-Zarr's options, refused for the dual dataset."""
    if shards is not None:
        raise InvalidArgumentError("shards: only with format='ome-zarr' (N5 has no shards)")
    if resume:
        raise InvalidArgumentError(
            "resume: only with format='ome-zarr' (the dual N5 export writes several levels per task and "
            "cannot be resumed; run it again with overwrite=True)"
        )


def export_metadata(
    data: ArrayLike,
    dest: str | os.PathLike[str],
    *,
    overwrite: bool = False,
    storage_options: dict[str, Any] | None = None,
    format: str = "dual",
    **plan_options: Any,
) -> str:
    """As :func:`export` for ``data``'s shape and dtype, but without a single block: every
    block is absent and reads as the fill value 0 (new labels, :mod:`~napari_n5zarr.write.edit.new_labels`).
    ``plan_options`` are :func:`export`'s metadata keywords (scale, translate, units,
    axis_labels, chunks, levels, labels, path, attributes, zarr_json, ...)."""
    from napari_n5zarr.access import ensure_codecs_registered
    from napari_n5zarr.write.export.ome_zarr import check_format, export_ome_zarr

    if check_format(format) == "ome-zarr":
        return export_ome_zarr(data, dest, overwrite=overwrite, storage_options=storage_options, blocks=False,
                               **plan_options)  # fmt: skip
    ensure_codecs_registered()
    plan = make_plan([data], given_levels=False, **plan_options)
    with Destination(dest, plan.prefix, overwrite, storage_options) as destination:
        destination.open()
        destination.publish(plan)
    return os.fspath(dest)
