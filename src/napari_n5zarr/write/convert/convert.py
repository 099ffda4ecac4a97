"""Any N5 / Zarr source -> a dual N5 + Zarr v3 pyramid, one per image found in the source.

The library side of ``n5zarr convert``: finds the pyramids (as the napari reader does), exports
each with :func:`~napari_n5zarr.write.export.exporter.export`, and returns a report.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from napari_n5zarr.errors import InvalidArgumentError, NothingToConvertError
from napari_n5zarr.write.convert.region import REGION_ATTRIBUTE, Region, crop_translate

if TYPE_CHECKING:
    from napari_n5zarr.spatial import Multiscale
    from napari_n5zarr.write.export.blocks import Boundary

__all__ = [
    "NAMED_SCHEDULERS",
    "ConvertReport",
    "ConvertedImage",
    "NothingToConvertError",
    "convert",
]

_logger = logging.getLogger(__name__)

NAMED_SCHEDULERS = ("threads", "threading", "sync", "synchronous", "single-threaded", "processes")
"""dask's own schedulers; any other string is a dask.distributed scheduler address."""


@dataclass(frozen=True)
class ConvertedImage:
    """One pyramid written by :func:`convert`."""

    name: str
    """Its name in the source ("" for a single image)."""
    target: str
    """Where it was written: ``dest``, or ``dest/<name>`` with ``/`` in the name as ``_``."""
    is_labels: bool
    convention: str
    """The source's metadata convention (``n5-viewer``, ``bdv``, ``ome-zarr``, ...)."""


@dataclass
class ConvertReport:
    """What :func:`convert` wrote, and what it skipped (``"path: reason"``, unreadable nodes)."""

    dest: str
    images: list[ConvertedImage] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def convert(
    src: str | os.PathLike[str],
    dest: str | os.PathLike[str],
    *,
    compression: str | dict[str, Any] | None = "default",
    chunks: int | Sequence[int] | None = None,
    levels: int | Literal["auto"] | None = None,
    boundary: Boundary = "truncate",
    overwrite: bool = False,
    n5_only: bool = False,
    scheduler: Any = None,
    progress: Callable[[str, int, int], Any] | None = None,
    worker_timeout: float | None = None,
    region: str | Sequence[Any] | None = None,
    level: int = 0,
    to: str = "dual",
    shards: int | str | Sequence[int] | None = None,
    resume: bool = False,
) -> ConvertReport:
    """Convert every image/labels pyramid in ``src`` into a dual N5 + Zarr v3 pyramid at ``dest``.

    One image is written at ``dest``; several are written as groups ``dest/<name>`` (``/`` in
    a name becomes ``_``). Scale, translation, units and axis names come from the source's
    metadata convention; unreadable nodes in ``src`` are skipped and listed in the report.

    Parameters
    ----------
    src : str or os.PathLike
        Any N5 or Zarr node: folder, ``.zip``, BigDataViewer ``.xml`` or URL.
    dest : str or os.PathLike
        The new container; must not overlap ``src``.
    compression : str or dict, optional
        An N5 compression type (``"gzip"``, ``"zstd:5"`` sets a level), N5 JSON or a dict;
        with ``to="ome-zarr"`` zstd, gzip, blosc or raw (``:level`` sets a level). Default:
        gzip (dual), zstd (OME-Zarr).
    chunks : int or sequence of int, optional
        Block size, napari order (one int: every spatial axis). Default: the source's blocks.
    levels : int or "auto", optional
        ``"auto"`` (2x steps until one block) or the number of levels. Default (None): the
        source's own levels when it has several, else ``"auto"``.
    boundary : {"truncate", "pad"}, optional
        Edge blocks clipped (n5-java) or padded to full blocks (tensorstore).
    overwrite : bool, optional
        Replace an existing N5/Zarr ``dest``.
    n5_only : bool, optional
        Write ``attributes.json`` only, no ``zarr.json`` (z5py 3 refuses folders with both).
    scheduler : str or distributed.Client, optional
        A dask scheduler name (see :data:`NAMED_SCHEDULERS`), a dask.distributed scheduler
        address (a client is opened and closed here), or a client.
    progress : callable, optional
        ``progress(image name, blocks done, blocks total)``.
    worker_timeout : float, optional
        On a dask.distributed cluster: fail once it has had no worker for this many
        seconds (None: wait, as dask does).
    region : str or sequence of (start, stop), optional
        Check a region out: ``"Z0:Z1,Y0:Y1,X0:X1"`` (or pairs / slices), level-0 voxel
        coordinates in napari order, for the last axes (leading ones are kept whole). The
        result is a pyramid of just that region that overlays the source exactly (the
        level's scale, the translate moved to the region's start), with the source, level
        and region recorded in its root attribute ``"n5zarr:checked-out"``.
    to : {"dual", "ome-zarr"}, optional
        ``"dual"``: N5 + Zarr v3 at once. ``"ome-zarr"``: a standard OME-Zarr (Zarr v3 with
        standard codecs, napari axis order, OME-NGFF 0.5; see :mod:`~napari_n5zarr.write.export.ome_zarr`).
    shards : int, str or sequence of int, optional
        With ``to="ome-zarr"``: blocks per shard (one int for the spatial axes, or z,y,x).
    level : int, optional
        With ``region``: crop this level of the source (the region's bounds divided by its
        downsampling, rounded outwards) instead of level 0.
    resume : bool, optional
        With ``to="ome-zarr"`` into a local folder: finish a convert that was killed or
        interrupted, run again with the same arguments: the shards it wrote are kept, the
        others written (nothing at ``dest``: a fresh convert). Refused, nothing deleted, when
        ``dest`` is not an unfinished convert of the same source and arguments.

    Returns
    -------
    ConvertReport
        The pyramids written and the source nodes skipped.

    Raises
    ------
    ValueError
        If ``src`` and ``dest`` overlap, or an option is bad (compression, chunks, levels).
    MissingPackageError
        If ``scheduler`` is an address and dask.distributed is not installed (an ImportError
        whose message says what to pip install).
    NothingToConvertError
        If ``src`` holds no readable image or labels array (nothing is written).
    FileExistsError
        If ``dest`` exists and ``overwrite`` is False.
    ClusterError
        On a cluster: a worker died too often, or none for ``worker_timeout`` (nothing is
        left behind: a re-run starts afresh).
    """
    from napari_n5zarr.read.locate import require
    from napari_n5zarr.read.multiscale import find_multiscales
    from napari_n5zarr.read.tree import tree_of

    src_text, dest_text = os.fspath(src), os.fspath(dest)
    checkout = _checkout(src_text, region, level)
    _check_target(to, compression, shards, n5_only, resume)
    source = require(src_text)  # a BigDataViewer XML: its N5 folder, with the XML's voxel sizes
    if _overlap(source.target, dest_text):
        raise InvalidArgumentError("src and dest overlap; convert into a separate folder")
    tree = tree_of(source)  # the read wing's tree and detection (as read.images)
    tree.raise_for_root()
    node = (tree, tree.root)
    found = find_multiscales(node)
    # One pyramid goes to dest itself, several to one group each (named before skipping any).
    several = len(found.multiscales) > 1
    named = [(ms, ms.name or "" if several else "") for ms in found.readable]
    # Blocks that cannot be decoded by design (Paintera label multisets): skipped with the reason.
    skipped = found.problems + found.hidden
    if not named:
        raise NothingToConvertError(f"{src_text}: no image or labels arrays to convert", skipped)
    if checkout is not None and len({tuple(ms.scale) for ms, _ in named}) > 1:
        raise InvalidArgumentError(f"--region: {src_text} holds pyramids of different voxel sizes "
                                   f"({', '.join(ms.name or '/' for ms, _ in named)}); convert one of them")  # fmt: skip
    report = ConvertReport(dest=dest_text, skipped=skipped)
    dask_scheduler, client = _scheduler(scheduler)
    try:
        for ms, name in named:
            report.images.append(
                _convert_image(
                    node, ms, name, dest_text, levels=levels, chunks=chunks, progress=progress,
                    compression=compression, boundary=boundary, overwrite=overwrite, zarr_json=not n5_only,
                    scheduler=dask_scheduler, worker_timeout=worker_timeout, checkout=checkout,
                    **_target_options(to, shards, resume, _source_id(source.target, name, checkout)),
                )
            )  # fmt: skip
    finally:
        if client is not None:
            client.close()
    return report


def _convert_image(
    node: Any,
    ms: Multiscale,
    name: str,
    dest: str,
    *,
    levels: Any,
    chunks: Any,
    progress: Callable[[str, int, int], Any] | None,
    checkout: Checkout | None = None,
    **options: Any,
) -> ConvertedImage:
    """One pyramid of the source exported to ``dest`` (to its own group when ``name``): its
    calibration, the source's blocks as chunks unless ``chunks`` is given, and its levels
    unless ``levels`` is given; ``options`` go to :func:`~napari_n5zarr.write.export.exporter.export`."""
    from napari_n5zarr.read.multiscale import level_arrays, levels_for, strict_reader
    from napari_n5zarr.write.export.exporter import export

    if (
        options.get("format") == "ome-zarr"
        and checkout is None
        and not ms.time_paths
        and not ms.label_multiset
    ):
        # read region by region: one call per shard reads its blocks concurrently
        data = [strict_reader(a) for a in level_arrays(node, ms)]
    else:
        data = levels_for(node, ms, strict=True)  # source blocks as dask chunks; read errors raised
    keep = levels is None and len(data) > 1 and checkout is None
    order = slice(None, None, -1)  # N5 order -> napari order
    scale, translate = list(ms.scale[order]), list(ms.translate[order])
    source: Any = data if keep else data[0]
    attributes = None
    if checkout is not None:
        source, scale, translate, attributes = checkout.apply(data, ms)
    group = name.replace("/", "_")
    _logger.debug(
        "converting %s (%s, %d level(s)) -> %s", name or "/", ms.convention, len(data), dest
    )
    chunksize = getattr(data[0], "chunksize", None) or data[0].storage_blocks  # dask, or a reader
    blocks = tuple(min(int(c), int(s)) for c, s in zip(chunksize, source.shape if checkout else data[0].shape,
                                                      strict=True))  # fmt: skip
    export(
        source,
        dest,
        path=group,
        scale=scale,
        translate=translate,
        units=[u or "pixel" for u in ms.units[order]],
        axis_labels=list(ms.axes[order]),
        chunks=chunks if chunks is not None else blocks,  # the source's blocks
        levels="auto" if levels is None else levels,
        labels=ms.is_labels,
        progress=None if progress is None else _per_image(progress, name or "export"),
        attributes=attributes,
        **options,
    )
    target = f"{dest.rstrip('/')}/{group}" if group else dest
    return ConvertedImage(name, target, ms.is_labels, ms.convention)


@dataclass(frozen=True)
class Checkout:
    """A region of level ``level`` of the source at ``source`` (``convert --region``)."""

    source: str
    region: Region
    level: int

    def apply(
        self, data: Sequence[Any], ms: Multiscale
    ) -> tuple[Any, list[float], list[float], dict[str, Any]]:
        """(the crop, its scale, its translate, its root attributes) of one pyramid."""
        if self.level >= len(data):
            raise InvalidArgumentError(
                f"--level {self.level}: {ms.name or self.source} has levels 0 to {len(data) - 1}"
            )
        factors = list(ms.downsampling[self.level])[::-1]  # napari order
        crop = self.region.crop(data[0].shape, data[self.level].shape, factors)
        scale = list(ms.level_scale(self.level))[::-1]
        translate = crop_translate(list(ms.level_translate(self.level))[::-1], scale, crop)
        record = {"source": self.source, "level": self.level, "region": [list(b) for b in self.region.bounds],
                  "level_region": [[c.start, c.stop] for c in crop[len(crop) - len(self.region.bounds):]]}  # fmt: skip
        return data[self.level][crop], scale, translate, {REGION_ATTRIBUTE: record}


def _checkout(src: str, region: str | Sequence[Any] | None, level: int) -> Checkout | None:
    """``region`` and ``level`` checked before anything is read."""
    if region is None:
        if level:
            raise InvalidArgumentError("--level goes with --region (the level to crop)")
        return None
    if isinstance(level, bool) or not isinstance(level, int) or level < 0:
        raise InvalidArgumentError(f"--level {level!r}: a level number (0 = full resolution)")
    return Checkout(src, region if isinstance(region, Region) else Region.parse(region), level)


def _check_target(
    to: str, compression: Any, shards: Any, n5_only: bool, resume: bool = False
) -> None:
    """``to`` and its options checked before anything is read."""
    from napari_n5zarr.write.export.ome_zarr import check_format, parse_shards, zarr_compressors

    if check_format(to) == "dual":
        if shards is not None:
            raise InvalidArgumentError("--shards goes with --to ome-zarr (N5 has no shards)")
        if resume:
            raise InvalidArgumentError(
                "--resume goes with --to ome-zarr (a dual N5 convert cannot be resumed: run it again with --overwrite)"
            )
        return
    if n5_only:
        raise InvalidArgumentError("--n5-only goes with --to dual (an OME-Zarr is Zarr only)")
    zarr_compressors(compression)
    if shards is not None:
        parse_shards(shards, None, ())  # its syntax; the axes are checked per image


def _target_options(to: str, shards: Any, resume: bool, source_id: str) -> dict[str, Any]:
    """export's options for ``to`` (the dual dataset: its defaults)."""
    if to == "dual":
        return {}
    return {"format": to, "shards": shards, "resume": resume, "source_id": source_id}


def _source_id(src: str, name: str, checkout: Checkout | None) -> str:
    """What a resumed convert must read again: the source (resolved), the image, the region."""
    import json

    from napari_n5zarr.storage.location import real_path

    region = None if checkout is None else [list(b) for b in checkout.region.bounds]
    return json.dumps([real_path(src) or src, name, region, checkout and checkout.level])


def _per_image(progress: Callable[[str, int, int], Any], label: str) -> Callable[[int, int], Any]:
    return lambda done, total: progress(label, done, total)


def _overlap(src: str, dest: str) -> bool:
    from napari_n5zarr.storage.location import real_path

    a, b = real_path(src), real_path(dest)
    if a is None or b is None:
        return src.rstrip("/") == dest.rstrip("/")
    return a == b or a.startswith(b + os.sep) or b.startswith(a + os.sep)


def _scheduler(value: Any) -> tuple[Any, Any]:
    """(scheduler for dask, client to close): a named scheduler, a client, or a distributed address."""
    if not isinstance(value, str) or value in NAMED_SCHEDULERS:
        return value, None
    try:
        from distributed import Client
    except ModuleNotFoundError as e:
        from napari_n5zarr.extras import needs_package

        raise needs_package(e, f"the scheduler address {value}") from None
    _logger.debug("connecting to the dask.distributed scheduler at %s", value)
    try:
        client = Client(value, timeout=scheduler_connect_timeout())
    except (OSError, TimeoutError) as e:
        from napari_n5zarr.errors import N5StoreError

        reason = " ".join(str(e).split()) or type(e).__name__
        raise N5StoreError(f"cannot connect to the dask scheduler at {value} ({reason})") from None
    return client, client


SCHEDULER_TIMEOUT_ENV = "N5ZARR_SCHEDULER_TIMEOUT"
"""Seconds to wait for a dask.distributed scheduler to answer (default 5; dask's own is 30)."""


def scheduler_connect_timeout() -> float:
    from napari_n5zarr.environment import number

    return max(0.1, number(SCHEDULER_TIMEOUT_ENV, 5.0))
