"""numpy / dask array -> a standard OME-Zarr (Zarr v3, OME-NGFF 0.5), ``export(format="ome-zarr")``.

Unlike the dual N5 + Zarr dataset, every reader of Zarr v3 decodes it: standard codecs only
(``bytes`` + ``zstd`` / ``gzip`` / ``blosc`` or none), optional ``sharding_indexed``, arrays in
napari (C) order with ``dimension_names``, and the ``ome`` block of the group's ``zarr.json``
(typed axes, units, per-level scale and translation as this package's reader shows them;
labels carry ``image-label``). The levels, blocks and factors are those of the dual export's
plan (:func:`~napari_n5zarr.write.export.plan.make_plan`); the destination's safety (lock, staging,
refusing what is not ours) is :class:`~napari_n5zarr.write.export.publish.Destination`. Blocks go
through zarr-python's own array API, one dask task per shard (or block), so no two threads
write one shard; a coarse level is computed from the finer level already written.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from napari_n5zarr.errors import InvalidArgumentError
from napari_n5zarr.write.export.resume import Journal, shard_key
from napari_n5zarr.write.export.shards import ShardRun

if TYPE_CHECKING:
    from zarr.abc.store import Store

    from napari_n5zarr.write.export.plan import ExportPlan

__all__ = [
    "COMPRESSIONS",
    "FORMATS",
    "OmeZarrOptions",
    "export_ome_zarr",
    "parse_shards",
    "zarr_compressors",
]

FORMATS = ("dual", "ome-zarr")
"""``export(format=...)`` / ``n5zarr convert --to``: the dual N5 + Zarr v3 dataset (default) or a standard OME-Zarr."""
COMPRESSIONS = ("zstd", "gzip", "blosc", "raw")
"""``--compression`` of a standard OME-Zarr (``name:level`` sets a level; default ``zstd``)."""


def check_format(value: Any) -> str:
    if value not in FORMATS:
        raise InvalidArgumentError(f"format {value!r}: expected one of {', '.join(FORMATS)}")
    return str(value)


def zarr_compressors(compression: Any) -> tuple[Any, ...]:
    """The zarr v3 ``compressors`` for ``compression`` (``"zstd"``, ``"gzip:9"``, ``"blosc"``,
    ``"raw"`` or None); an N5 dict (as convert's dual options give) is refused."""
    from zarr.codecs import BloscCodec, GzipCodec

    if compression is None or compression == "default":
        compression = "zstd" if compression == "default" else "raw"
    if not isinstance(compression, str):
        raise InvalidArgumentError(
            f"compression {compression!r}: for OME-Zarr one of {', '.join(COMPRESSIONS)} (name:level sets a level)"
        )
    name, colon, level_text = compression.strip().lower().partition(":")
    if name not in COMPRESSIONS or (colon and name == "raw"):
        raise InvalidArgumentError(
            f"compression {compression!r}: for OME-Zarr one of {', '.join(COMPRESSIONS)} (name:level sets a level)"
        )
    level = None
    if colon:
        ok = level_text.strip().lstrip("-").isdigit()
        level = int(level_text) if ok else None
        bounds = {"zstd": (-131072, 22), "gzip": (0, 9), "blosc": (0, 9)}[name]
        if level is None or not bounds[0] <= level <= bounds[1]:
            raise InvalidArgumentError(
                f"compression {compression!r}: the {name} level is a whole number {bounds[0]}..{bounds[1]}"
            )
    if name == "raw":
        return ()
    if name == "zstd":
        from napari_n5zarr.write.export.fast_zstd import FastZstdCodec

        return (FastZstdCodec(level=3 if level is None else level),)
    if name == "gzip":
        return (GzipCodec(level=6 if level is None else level),)
    return (BloscCodec(cname="zstd", clevel=5 if level is None else level),)


def parse_shards(
    shards: int | str | Sequence[int] | None, ndim: int | None, spatial: Sequence[int]
) -> tuple[int, ...] | None:
    """Blocks per shard per axis (napari order): one int for every spatial axis (1 on the
    others) or one per axis (``"4,8,8"``); None: no sharding. ``ndim`` None checks the syntax only."""
    if shards is None:
        return None
    what = f"shards {shards!r}"
    if isinstance(shards, str):
        try:
            parts = [int(p) for p in shards.split(",")]
        except ValueError:
            raise InvalidArgumentError(
                f"{what}: blocks per shard, one whole number or one per axis (z,y,x)"
            ) from None
        shards = parts[0] if len(parts) == 1 else parts
    if isinstance(shards, bool):
        raise InvalidArgumentError(
            f"{what}: blocks per shard, one whole number or one per axis (z,y,x)"
        )
    if isinstance(shards, int):
        per_axis = [shards if i in spatial else 1 for i in range(ndim or 0)] or [shards]
    else:
        per_axis = [int(s) for s in shards]
        if ndim is not None and len(per_axis) != ndim:
            raise InvalidArgumentError(f"{what}: {len(per_axis)} values for {ndim} axes")
    if any(s < 1 for s in per_axis):
        raise InvalidArgumentError(f"{what}: blocks per shard must be at least 1")
    return tuple(per_axis)


@dataclass(frozen=True)
class OmeZarrOptions:
    """What a standard OME-Zarr adds to an export plan: codecs and sharding."""

    compressors: tuple[Any, ...]
    shards: tuple[int, ...] | None
    """Blocks per shard per axis (napari order), or None."""


def ome_attributes(plan: ExportPlan, *, scale: list[float], translate: list[float], units: list[str | None],
                   labels: bool, attributes: dict[str, Any] | None) -> dict[str, Any]:  # fmt: skip
    """The group's attributes: ``attributes`` and the ``ome`` block (napari order), validated by
    the OME-NGFF 0.5 models; a pyramid OME-NGFF cannot describe is refused."""
    from napari_n5zarr.spatial.model import Multiscale
    from napari_n5zarr.write.ome import OME_KEY, ome_metadata

    ms = Multiscale(
        name="", paths=tuple(lv.name for lv in plan.levels), scale=tuple(scale), translate=tuple(translate),
        units=tuple(units), axes=plan.axes, downsampling=tuple(tuple(float(f) for f in lv.factors) for lv in plan.levels),
        is_labels=labels,
    )  # fmt: skip
    ome, why = ome_metadata(ms, labels=labels)
    if ome is None:
        raise InvalidArgumentError(
            f"OME-NGFF 0.5 cannot describe axes {', '.join(plan.axes)}: {why}"
        )
    return {**(attributes or {}), OME_KEY: ome}


def _level_array(store: Store, path: str, level: Any, plan: ExportPlan, options: OmeZarrOptions,
                 resume: bool) -> Any:  # fmt: skip
    """The empty level array (its ``zarr.json``); when resuming, the one already written.
    Built with zarr's fused pipeline where the user kept the default (a shard's inner
    chunks are encoded without a trip through the event loop each)."""
    import contextlib

    import zarr

    from napari_n5zarr.access import _PIPELINE_CHOICE
    from napari_n5zarr.n5.constants import ZARR_JSON
    from napari_n5zarr.write.export.blocks import store_get
    from napari_n5zarr.zarr_internals import fused_pipeline

    config: Any = {"write_empty_chunks": plan.write_empty_blocks}
    shards = None
    if options.shards is not None:
        shards = tuple(b * n for b, n in zip(level.block, options.shards, strict=True))
    with _PIPELINE_CHOICE:
        fused = fused_pipeline()
        with zarr.config.set({"codec_pipeline.path": fused}) if fused else contextlib.nullcontext():
            if (
                resume and store_get(store, f"{path}/{ZARR_JSON}") is not None
            ):  # the plan's (its fingerprint)
                # zarr 3.3 ignores open_array's config: the global default is set instead
                with zarr.config.set({"array.write_empty_chunks": plan.write_empty_blocks}):
                    return zarr.open_array(store, path=path, mode="r+", config=config)
            return zarr.create_array(
                store, name=path, shape=level.shape, dtype=plan.dtype, chunks=level.block, shards=shards,
                compressors=options.compressors, fill_value=0, dimension_names=list(plan.axes), zarr_format=3,
                config=config,
            )  # fmt: skip


def _level_sources(plan: ExportPlan, sources: Sequence[Any], k: int, written: list[Any]) -> Any:
    """Level ``k``'s data: as given, level 0 itself, or downsampled (dask) from level ``k - 1``
    as written."""
    import dask.array as da

    from napari_n5zarr.write import pyramid

    if plan.given_levels or k == 0:
        src = sources[k]  # numpy and array-likes are read region by region, as they are
        return src.astype(plan.dtype) if isinstance(src, da.Array) else src
    previous = da.from_zarr(written[k - 1])
    return pyramid.downsample(previous, plan.steps[k - 1], plan.method)


@dataclass
class ShardLog:
    """Progress by shard over every level, and the resume journal (None: not resumable)."""

    total: int
    progress: Callable[[int, int], Any] | None
    journal: Journal | None

    def __post_init__(self) -> None:
        import threading

        self.done = len(self.journal.done) if self.journal is not None else 0
        self._lock = threading.Lock()
        if self.done and self.progress is not None:  # resumed: the shards written before count
            self.progress(self.done, self.total)

    def skip(self, level: str) -> Callable[[tuple[int, ...]], bool]:
        done = self.journal.done if self.journal is not None else set()
        return lambda index: shard_key(level, index) in done

    def finished(self, level: str) -> Callable[[tuple[int, ...]], None]:
        def add(index: tuple[int, ...]) -> None:
            if self.journal is not None:
                self.journal.record(shard_key(level, index))
            with self._lock:
                self.done += 1
                done = self.done
            if self.progress is not None:
                self.progress(done, self.total)

        return add


def write_ome_levels(plan: ExportPlan, sources: Sequence[Any], store: Store, prefix: str, options: OmeZarrOptions,
                     *, run: ShardRun | None = None, progress: Callable[[int, int], Any] | None = None,
                     blocks: bool = True, journal: Journal | None = None) -> None:  # fmt: skip
    """Every level's array and shards (each level's ``zarr.json`` first; the group's is written
    last, by :func:`group_writer`); ``run.cancel`` is checked before each level and shard.
    Without ``blocks``, the arrays only: every chunk absent, read as the fill value 0.
    ``progress(done, total)`` counts shards (blocks without shards); with a ``journal`` the
    shards it records are not written again, each one written is recorded."""
    from napari_n5zarr.errors import ExportCancelled

    run = run or ShardRun()
    log = ShardLog(sum(_tasks(lv, options) for lv in plan.levels), progress, journal)
    written: list[Any] = []
    for k, level in enumerate(plan.levels):
        if run.cancel is not None and run.cancel():
            raise ExportCancelled("export cancelled")
        array = _level_array(
            store, f"{prefix}{level.name}", level, plan, options, journal is not None
        )
        if blocks:
            source = _level_sources(plan, sources, k, written)
            run.write(source, array, log.skip(level.name), log.finished(level.name))
        written.append(array)


def _tasks(level: Any, options: OmeZarrOptions) -> int:
    unit = (
        level.block
        if options.shards is None
        else [b * n for b, n in zip(level.block, options.shards, strict=True)]
    )
    return math.prod(math.ceil(s / u) for s, u in zip(level.shape, unit, strict=True))


def group_writer(attributes: dict[str, Any]) -> Callable[[Store, str], None]:
    """Writes the pyramid group's ``zarr.json`` (with ``ome``) at a prefix: the last step."""

    def write(store: Store, prefix: str) -> None:
        import json

        from napari_n5zarr.n5.constants import ZARR_JSON
        from napari_n5zarr.write.export.blocks import store_set

        doc = {"zarr_format": 3, "node_type": "group", "attributes": attributes}
        store_set(store, f"{prefix}{ZARR_JSON}", json.dumps(doc, indent=2).encode())

    return write


def parents_writer(store: Store, prefix: str) -> None:
    """Plain Zarr v3 groups above ``prefix`` that have no metadata."""
    import zarr

    from napari_n5zarr.n5.constants import N5_JSON, ZARR_JSON
    from napari_n5zarr.write.export.blocks import store_get

    parts = prefix.strip("/").split("/")[:-1]
    for i in range(len(parts), -1, -1):
        parent = "/".join(parts[:i])
        key = f"{parent}/" if parent else ""
        if all(store_get(store, f"{key}{name}") is None for name in (N5_JSON, ZARR_JSON)):
            zarr.create_group(store, path=parent or None, zarr_format=3)
    link_label(store, prefix)


def link_label(store: Store, prefix: str) -> None:
    """Labels written at ``IMAGE/labels/NAME`` under an OME-Zarr image: list ``NAME`` in
    ``IMAGE/labels/zarr.json`` (OME-NGFF's ``labels`` group), keeping what else it holds, so
    OME readers show the labels with their image."""
    import json

    from napari_n5zarr.n5.constants import ZARR_JSON
    from napari_n5zarr.write.export.blocks import store_get
    from napari_n5zarr.write.ome import OME_KEY, labels_group
    from napari_n5zarr.zarr_internals import sync

    parts = prefix.strip("/").split("/")
    if len(parts) < 2 or parts[-2] != "labels":
        return
    image = "".join(f"{p}/" for p in parts[:-2])
    image_ome = _ome_of(_json_or_none(store_get(store, f"{image}{ZARR_JSON}")))
    if "multiscales" not in image_ome:
        return
    key = f"{image}labels/{ZARR_JSON}"
    doc = _json_or_none(store_get(store, key))
    if (
        doc is None
        or doc.get("node_type") != "group"
        or not isinstance(doc.get("attributes", {}), dict)
    ):
        return  # not a group we made or understand: left alone
    attributes, ome = doc.get("attributes", {}), _ome_of(doc)
    names = ome.get("labels", [])
    if not isinstance(names, list) or not isinstance(attributes.get(OME_KEY, {}), dict):
        return  # not an OME labels group this can read: left alone
    if parts[-1] in names:
        return
    doc["attributes"] = {**attributes, OME_KEY: {**ome, **labels_group([*names, parts[-1]])}}
    from zarr.buffer import default_buffer_prototype

    body = default_buffer_prototype().buffer.from_bytes(json.dumps(doc, indent=2).encode())
    sync(
        store.set(key, body)
    )  # zarr's LocalStore: a temporary file renamed over (no link followed)


def _ome_of(doc: dict[str, Any] | None) -> dict[str, Any]:
    """The ``ome`` attribute of a ``zarr.json`` document ({} if none or not a mapping)."""
    attributes = (doc or {}).get("attributes")
    ome = attributes.get("ome") if isinstance(attributes, dict) else None
    return ome if isinstance(ome, dict) else {}


def _json_or_none(raw: bytes | None) -> dict[str, Any] | None:
    import json

    if raw is None:
        return None
    try:
        doc = json.loads(raw)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def ome_axis_order(axes: Sequence[str]) -> list[int]:
    """The axes (indices) in the order OME-NGFF requires: time, then channel or custom, then
    space; stable otherwise (napari's trailing ``rgb`` or a BigDataViewer ``t`` move first)."""
    from napari_n5zarr.write.ome import SPACE_NAMES, _axis_type

    all_space = len(axes) <= 3 and not any(a.strip().lower() in SPACE_NAMES for a in axes)
    rank = {"time": 0, "channel": 1, None: 1, "space": 2}
    return sorted(range(len(axes)), key=lambda i: rank[_axis_type(axes[i], all_space)])


def _reordered(order: list[int], sources: list[Any], plan_options: dict[str, Any], shards: Any,
               axes: Sequence[str]) -> tuple[list[Any], dict[str, Any], Any]:  # fmt: skip
    """``sources``, per-axis options and ``shards`` with their axes in ``order``."""
    from napari_n5zarr.write.export.plan import _per_axis

    ndim = len(order)
    out = {k: v for k, v in plan_options.items() if v is not None}
    for key, default in (("scale", 1.0), ("translate", 0.0), ("units", None)):
        values = _per_axis(plan_options.get(key), ndim, default, key)
        out[key] = [values[i] for i in order]
    out["axis_labels"] = [axes[i] for i in order]
    chunks = plan_options.get("chunks")
    if chunks is not None and not isinstance(chunks, int):
        out["chunks"] = [list(chunks)[i] for i in order]
    if chunks is None or isinstance(
        chunks, int
    ):  # the default / one edge: per axis in the new order
        from napari_n5zarr.write.export.plan import _chunks
        from napari_n5zarr.write.pyramid import spatial_axes

        spatial = spatial_axes(ndim, axes)
        out["chunks"] = [_chunks(chunks, sources[0].shape, spatial)[i] for i in order]
    if (
        shards is not None
        and not isinstance(shards, int)
        and not (isinstance(shards, str) and "," not in shards)
    ):
        values = [int(v) for v in (shards.split(",") if isinstance(shards, str) else shards)]
        shards = [values[i] for i in order] if len(values) == ndim else values
    return [_transpose(a, order) for a in sources], out, shards


def _transpose(array: Any, order: list[int]) -> Any:
    import dask.array as da
    import numpy as np

    return (
        array.transpose(order)
        if isinstance(array, da.Array)
        else np.transpose(np.asarray(array), order)
    )


def export_ome_zarr(
    data: Any,
    dest: str | os.PathLike[str],
    *,
    compression: Any = "default",
    shards: int | str | Sequence[int] | None = None,
    overwrite: bool = False,
    progress: Callable[[int, int], Any] | None = None,
    storage_options: dict[str, Any] | None = None,
    scheduler: Any = None,
    cancel: Callable[[], bool] | None = None,
    zarr_json: bool = True,
    blocks: bool = True,
    worker_timeout: float | None = None,
    resume: bool = False,
    source_id: str | None = None,
    **plan_options: Any,
) -> str:
    """:func:`napari_n5zarr.export` with ``format="ome-zarr"`` (see there); without ``blocks``
    the metadata only (:func:`~napari_n5zarr.write.export.exporter.export_metadata`).
    ``resume`` goes on with an unfinished export of the same plan at ``dest`` (``source_id``
    names the data, else dask's token; see :mod:`~napari_n5zarr.write.export.resume`)."""
    if not zarr_json:
        raise InvalidArgumentError("zarr_json=False: an OME-Zarr is Zarr only (use format='dual')")
    from napari_n5zarr.write.export.publish import Destination

    given_levels = isinstance(data, list | tuple)
    plan, sources, options, attrs = _ome_plan(list(data) if given_levels else [data], given_levels,
                                              compression, shards, plan_options)  # fmt: skip
    identity = _plan_identity(plan, options, attrs, sources, source_id) if blocks else None
    with Destination(dest, plan.prefix, overwrite, storage_options, plan=identity,
                     resume=bool(resume)) as destination:  # fmt: skip
        store, prefix = destination.open()
        run = shard_run(scheduler, destination.gate, cancel, worker_timeout)
        write_ome_levels(plan, sources, store, prefix, options, run=run, progress=progress,
                         blocks=blocks, journal=destination.journal)  # fmt: skip
        destination.publish(plan, metadata=group_writer(attrs), parents=parents_writer)
    return os.fspath(dest)


def _ome_plan(sources: list[Any], given_levels: bool, compression: Any, shards: Any,
              plan_options: dict[str, Any]) -> tuple[ExportPlan, list[Any], OmeZarrOptions, dict[str, Any]]:  # fmt: skip
    """(the plan, the sources in OME-NGFF axis order, codecs and shards, the group's attributes)."""
    from napari_n5zarr.write.export.plan import _per_axis, make_plan

    compressors = zarr_compressors(compression)
    plan = make_plan(sources, given_levels=given_levels, compression=None, **plan_options)
    order = ome_axis_order(plan.axes)
    if order != list(range(plan.ndim)):  # OME-NGFF: time, channel / custom, then space
        sources, plan_options, shards = _reordered(order, sources, plan_options, shards, plan.axes)
        plan = make_plan(sources, given_levels=given_levels, compression=None, **plan_options)
    options = OmeZarrOptions(compressors, parse_shards(shards, plan.ndim, plan.spatial))
    ndim = plan.ndim
    attrs = ome_attributes(
        plan, scale=[float(s) for s in _per_axis(plan_options.get("scale"), ndim, 1.0, "scale")],
        translate=[float(t) for t in _per_axis(plan_options.get("translate"), ndim, 0.0, "translate")],
        units=[None if u is None else str(u) for u in _per_axis(plan_options.get("units"), ndim, None, "units")],
        labels=bool(plan_options.get("labels")), attributes=plan_options.get("attributes"),
    )  # fmt: skip
    return plan, sources, options, attrs


def _plan_identity(plan: ExportPlan, options: OmeZarrOptions, attrs: dict[str, Any], sources: list[Any],
                   source_id: str | None) -> str:  # fmt: skip
    """The fingerprint an unfinished export records and ``resume`` checks: the source
    (``source_id``, else dask's token of the data), format, levels, blocks, shards, codecs and
    the group's metadata."""
    from dask.base import tokenize

    from napari_n5zarr.write.export.resume import fingerprint

    return fingerprint({
        "format": "ome-zarr", "source": source_id if source_id is not None else tokenize(*sources),
        "dtype": str(plan.dtype), "levels": [(lv.name, lv.shape, lv.block) for lv in plan.levels],
        "shards": options.shards, "codecs": [c.to_dict() for c in options.compressors],
        "given_levels": plan.given_levels, "method": plan.method, "empty": plan.write_empty_blocks,
        "axes": plan.axes, "attributes": attrs,
    })  # fmt: skip


def shard_run(scheduler: Any, gate: Any, cancel: Callable[[], bool] | None,
              worker_timeout: float | None) -> ShardRun:  # fmt: skip
    """How the shard tasks run with ``scheduler``: threads here, a dask.distributed client, or dask."""
    from napari_n5zarr.write.export.cluster import cluster_client
    from napari_n5zarr.write.export.levels import _threads, is_local_scheduler

    local = is_local_scheduler(scheduler)
    client = None if local else cluster_client(scheduler)
    threads = _threads(scheduler) if local else 0  # 0: dask.compute (a process pool, ...)
    return ShardRun(scheduler, client, threads, gate, cancel, worker_timeout)
