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
Memory stays bounded (one block per task per thread): level k+1 is computed from the
blocks of level k just written (or in memory when the input is a numpy array).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import dask.array as da
import numpy as np

from napari_n5zarr.errors import ExportCancelled, N5FormatError, NodeExistsError
from napari_n5zarr.n5.codec import N5DefaultCodec
from napari_n5zarr.n5.compression import N5_TYPES, n5_to_zarr, normalize_n5, zarr_to_n5
from napari_n5zarr.n5.constants import N5_DTYPES, N5_JSON, ZARR_JSON
from napari_n5zarr.n5.metadata import attributes_to_zarr
from napari_n5zarr.n5.stores import N5DefaultStore
from napari_n5zarr.spatial.units import LENGTH_EXPONENT, unit_symbol
from napari_n5zarr.write import pyramid, safe_destination
from napari_n5zarr.write.blocks import (
    Boundary,
    N5Blocks,
    Progress,
    WriteGate,
    store_get,
    store_set,
)

if TYPE_CHECKING:
    from zarr.abc.store import Store

__all__ = ["INCOMPLETE_MARKER", "ExportCancelled", "default_chunks", "export", "parse_compression"]

INCOMPLETE_MARKER = ".n5zarr-incomplete"
"""Written first, removed last: its presence means the export never finished."""

CANCEL_POLL = 0.05
"""Seconds between two looks at ``cancel`` while a level is being written."""

LEVEL_PARAMETER = {"gzip": "level", "zstd": "level", "bzip2": "blockSize", "xz": "preset", "blosc": "clevel"}
"""Which N5 compression parameter ``"name:N"`` sets."""

ArrayLike = Any
LevelsArg = int | Literal["auto"]


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
        raise N5FormatError(f"unknown N5 compression {params.get('type')!r} (choose from {', '.join(N5_TYPES)})")
    # Normalised through the one table: defaults made explicit, invalid values refused.
    return zarr_to_n5(n5_to_zarr(params))


def _n5_dtype(dtype: Any) -> np.dtype:
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


def _chunks(chunks: int | Sequence[int] | None, shape: Sequence[int], spatial: Sequence[int]) -> tuple[int, ...]:
    if chunks is None:
        block = default_chunks(shape, spatial)
    elif isinstance(chunks, int | np.integer):
        block = tuple(int(chunks) if i in spatial else 1 for i in range(len(shape)))
    else:
        block = tuple(int(c) if c not in (None, -1) else n for c, n in zip(chunks, shape, strict=True))
        if len(block) != len(shape):
            raise ValueError(f"chunks {chunks} do not match {len(shape)} dimensions")
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
    given = _per_axis(list(axis_labels), ndim, None, "axis_labels") if axis_labels is not None else [None] * ndim
    names = [None if a is None or _is_default_label(a) else str(a) for a in given]
    used = set(filter(None, names))
    spare = (d for d in ["x", "y", "z", "t", "c", *(f"d{i}" for i in range(5, 2 * ndim + 5))] if d not in used)
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
    group.update(pixelResolution=pixel_resolution, axes=axes_n5, units=units_n5, resolution=scale_n5)
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


def _is_local_scheduler(scheduler: Any) -> bool:
    """True for dask's threaded / synchronous schedulers (progress and cancel work there)."""
    import dask.local
    import dask.threaded
    from dask.base import get_scheduler

    if scheduler is None and dask.config.get("scheduler", None) is None and "distributed" not in sys.modules:
        return True  # dask's default; get_scheduler would import distributed (~1 s)
    chosen = get_scheduler(scheduler=scheduler)
    return chosen is None or chosen in (dask.threaded.get, dask.local.get_sync)


def _join(prefix: str, key: str) -> str:
    return f"{prefix}{key}"


def _node_state(store: Store, prefix: str) -> tuple[bool, bool]:
    """(holds anything, looks like an N5/Zarr node or an unfinished export)."""
    from zarr.core.sync import sync

    empty = sync(store.is_empty(prefix))
    known = any(
        store_get(store, _join(prefix, name)) is not None for name in (N5_JSON, ZARR_JSON, INCOMPLETE_MARKER)
    )
    return not empty, known


def _remove(store: Store, prefix: str) -> None:
    from zarr.core.sync import sync

    if prefix:
        sync(store.delete_dir(prefix.rstrip("/")))
    else:
        sync(store.clear())


def _publish(store: Store, prefix: str, doc: dict[str, Any], zarr_json: bool) -> None:
    """Write zarr.json through :class:`N5DefaultStore` (which writes attributes.json too)."""
    from zarr.core.buffer import default_buffer_prototype
    from zarr.core.sync import sync

    buf = default_buffer_prototype().buffer.from_bytes(json.dumps(doc, indent=2).encode())
    sync(N5DefaultStore(store, write_zarr_json=zarr_json).set(_join(prefix, ZARR_JSON), buf))


def _check_cancel(cancel: Callable[[], bool] | None) -> None:
    if cancel is not None and cancel():
        raise ExportCancelled("export cancelled")


def _built(level: da.Array | Callable[[], da.Array]) -> da.Array:
    return level if isinstance(level, da.Array) else level()


def _store_local(level: da.Array, target: N5Blocks, scheduler: Any, cancel: Callable[[], bool] | None) -> None:
    """``da.store`` on a local scheduler that starts no task once ``cancel`` is set: dask
    keeps firing queued tasks until a failed one comes back, so the check runs in the
    scheduler's own loop (a pre-task callback), not only in the block writes."""
    kwargs: dict[str, Any] = {}
    if cancel is not None:
        from dask.callbacks import Callback

        def stop(key: Any, dsk: Any, state: Any) -> None:
            _check_cancel(cancel)

        # Passing callbacks replaces dask's global ones (e.g. a ProgressBar): keep them.
        kwargs["callbacks"] = [*Callback.active, (None, None, stop, None, None)]
    da.store(level, target, lock=False, scheduler=scheduler, **kwargs)  # type: ignore[arg-type]  # N5Blocks has the __setitem__ da.store needs


def _cancellable(work: Callable[[], Any], cancel: Callable[[], bool] | None) -> Any:
    """``work()``, but raise :class:`ExportCancelled` as soon as ``cancel`` is set even while a
    block is still being computed (a slow source, a big in-memory level, building a large
    dask graph): ``work`` then runs on in a daemon thread that starts nothing new (tasks
    check ``cancel`` before they start, block writes are shut by the export's WriteGate)."""
    if cancel is None:
        return work()
    import threading

    result: dict[str, Any] = {}
    done = threading.Event()

    def run() -> None:
        try:
            result["value"] = work()
        except BaseException as e:  # handed to the exporting thread
            result["error"] = e
        finally:
            done.set()

    threading.Thread(target=run, name="n5zarr-export", daemon=True).start()
    while not done.wait(CANCEL_POLL):
        _check_cancel(cancel)
    if "error" in result:
        raise result["error"]
    return result.get("value")


def _as_cancel(cancel: Any) -> Callable[[], bool] | None:
    if cancel is None:
        return None
    if hasattr(cancel, "is_set"):
        return cancel.is_set
    if callable(cancel):
        return cancel
    raise TypeError("cancel must be a threading.Event or a callable returning bool")


def export(
    data: ArrayLike | Sequence[ArrayLike],
    dest: str | os.PathLike[str],
    *,
    scale: Sequence[float] | None = None,
    translate: Sequence[float] | None = None,
    units: str | Sequence[str | None] | None = None,
    axis_labels: Sequence[str] | None = None,
    compression: str | dict[str, Any] | None = "gzip",
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
) -> str:
    """Write ``data`` as an N5 Viewer pyramid that is N5 and Zarr v3 at once; return ``dest``.

    ``data``: numpy or dask array in napari order (..., z, y, x), or a list of levels
    (finest first, written as they are; ``levels`` is then ignored). ``scale``,
    ``translate``, ``units``, ``axis_labels``, ``chunks``: napari order (``chunks`` may be
    one int for every spatial axis). ``compression``: an N5 type (``"gzip"``, ``"zstd"``,
    ...; ``"zstd:5"`` sets the level) or an N5 compression dict. ``levels``: ``"auto"``
    (2x steps until a level fits one block) or the number of levels. ``boundary``:
    ``"truncate"`` (edge blocks clipped, like n5-java) or ``"pad"`` (full blocks, like
    tensorstore). ``labels``: mode downsampling and an ``image-label`` marker
    (``downsample`` overrides: ``"mean"``, ``"mode"``, ``"nearest"``). ``path``: write the
    pyramid at this group inside the container ``dest``. ``zarr_json=False`` writes N5
    only (z5py 3 refuses folders holding both). ``progress(done, total)`` counts blocks;
    ``cancel`` (a ``threading.Event`` or a callable) stops the export within a fraction of
    a second, even while a block is still being computed: no block task starts and no block
    is written after it; the partial output is removed and :class:`ExportCancelled` raised
    (blocks already computing finish in the background, their results discarded). ``scheduler`` is passed to
    dask (a distributed ``Client`` also works; there progress is per level and cancel
    is checked between levels).
    """
    from zarr.core.sync import sync

    from napari_n5zarr.access import base_store
    from napari_n5zarr.n5.registry import ensure_codecs_registered

    ensure_codecs_registered()
    if boundary not in ("truncate", "pad"):
        raise ValueError(f"boundary must be 'truncate' or 'pad', got {boundary!r}")
    cancel_fn = _as_cancel(cancel)
    given_levels = isinstance(data, list | tuple)
    sources = list(data) if given_levels else [data]
    if not sources:
        raise ValueError("no data to export")
    first: Any = sources[0]
    ndim = first.ndim
    if ndim == 0 or any(s == 0 for s in first.shape):
        raise ValueError(f"cannot export an empty array of shape {first.shape}")
    dtype = _n5_dtype(first.dtype)
    comp = parse_compression(compression)
    scale_l = [float(s) for s in _per_axis(scale, ndim, 1.0, "scale")]
    translate_l = [float(t) for t in _per_axis(translate, ndim, 0.0, "translate")]
    units_l = [None if u is None else str(u) for u in _per_axis(units, ndim, None, "units")]
    axes = _axis_names(axis_labels, ndim)
    spatial = pyramid.spatial_axes(ndim, axes)
    block = _chunks(chunks, first.shape, spatial)
    method: pyramid.Method = downsample or ("mode" if labels else "mean")

    steps, shapes, factors = _levels(sources if given_levels else None, first.shape, block, spatial, scale_l, levels)
    blocks = [tuple(min(b, n) for b, n in zip(block, s, strict=True)) for s in shapes]
    group_attrs, level_attrs = _metadata(ndim, scale_l, translate_l, units_l, axes, factors, labels, attributes)

    prefix = safe_destination.group_prefix(path)
    where = f"{os.fspath(dest)}{'/' + prefix.rstrip('/') if prefix else ''}"
    folder = safe_destination.local_folder(dest)
    lock_at = folder if folder is not None else safe_destination.local_zip(dest)
    with safe_destination.DestinationLock(lock_at, where) if lock_at is not None else contextlib.nullcontext():
        target = created = None
        if folder is not None:
            target = safe_destination.check_inside(folder, prefix)
            safe_destination.recover(target)
            created = None if target.exists() else target  # removed again if the export fails
        store = base_store(dest, "a", storage_options)
        staging, swapped = None, False
        try:
            staging = _prepare(store, prefix, overwrite, where, target)
            out, out_prefix = (base_store(staging, "a"), "") if staging is not None else (store, prefix)
            marker = _join(out_prefix, INCOMPLETE_MARKER) if out.supports_deletes else None
            gate = None
            try:
                local = _is_local_scheduler(scheduler)
                total = sum(math.prod(math.ceil(n / b) for n, b in zip(s, bl, strict=True)) for s, bl in zip(shapes, blocks, strict=True))
                counter = Progress(total, progress)
                docs, targets, gate = [], [], WriteGate()
                for k, (shape, bl, attrs) in enumerate(zip(shapes, blocks, level_attrs, strict=True)):
                    n5 = {"dimensions": list(shape[::-1]), "blockSize": list(bl[::-1]), "dataType": dtype.name, "compression": comp}
                    docs.append(attributes_to_zarr({**n5, **attrs}, path=f"s{k}"))
                    codec = N5DefaultCodec.from_dict(docs[-1]["codecs"][0])
                    targets.append(
                        N5Blocks(
                            out, f"{out_prefix}s{k}/", shape, bl, dtype, codec, boundary, write_empty_blocks,
                            progress=counter if local else None, cancel=cancel_fn if local else None, gate=gate,
                        )
                    )  # fmt: skip
                if marker:
                    store_set(out, marker, json.dumps({"pid": os.getpid(), "started": time.time()}).encode())
                in_memory = not given_levels and isinstance(first, np.ndarray)
                array = np.asarray(first, dtype=dtype) if in_memory else None
                for k, tgt in enumerate(targets):
                    _check_cancel(cancel_fn)
                    level: da.Array | Callable[[], da.Array]
                    if array is not None:
                        if k:  # the in-memory pyramid, one level at a time (cancel stops between)
                            array = _cancellable(lambda a=array, s=steps[k - 1]: pyramid.downsample_block(a, s, method), cancel_fn)  # type: ignore[misc]  # mypy cannot type lambdas with defaults
                        level = da.from_array(_NoCopy(array), chunks=tgt.block)
                    elif given_levels or k == 0:
                        level = lambda k=k, t=tgt: _as_dask(sources[k], t.block).astype(dtype).rechunk(t.block)  # noqa: E731
                    else:
                        level = lambda k=k, t=tgt: _next_level(targets[k - 1], t, steps[k - 1], method)  # noqa: E731
                    if local:  # building a large graph takes seconds too: cancellable
                        _cancellable(lambda lv=level, t=tgt: _store_local(_built(lv), t, scheduler, cancel_fn), cancel_fn)  # type: ignore[misc]  # as above
                    else:
                        da.store(_built(level), tgt, lock=False, scheduler=scheduler)  # type: ignore[arg-type]  # as in _store_local
                    if not local:
                        counter.add(tgt.nblocks)
                # Publish: datasets, then the pyramid group, then groups above it; the marker last.
                for k, doc in enumerate(docs):
                    _publish(out, f"{out_prefix}s{k}/", doc, zarr_json)
                _publish(out, out_prefix, {"zarr_format": 3, "node_type": "group", "attributes": group_attrs}, zarr_json)
                if staging is not None:
                    assert marker is not None and target is not None  # staging is a local folder
                    sync(out.delete(marker))
                    out.close()
                    safe_destination.swap_in(staging, target)  # the old node stays whole until here
                    staging, swapped = None, True
                if prefix:
                    _publish_parents(store, prefix, zarr_json)
                if marker and out is store:
                    sync(store.delete(marker))
            except BaseException as e:
                if swapped:  # the new node is complete and in place: keep it
                    raise
                if gate is not None:
                    gate.close()  # no block write after this (threads still running finish first)
                cleaned = _clean_up(store, prefix, staging, where, created)
                if safe_destination.is_disk_full(e):
                    kept = "; the existing destination was not touched" if staging is not None else ""
                    raise OSError(e.errno, f"disk full while exporting to {where}: {cleaned}{kept} ({e})") from e
                raise
        finally:
            store.close()
    return os.fspath(dest)


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
        return [], shapes, [tuple(pyramid.level_factor(a, b) for a, b in zip(shapes[0], s, strict=True)) for s in shapes]
    steps = pyramid.plan(shape, block, spatial, scale, levels)
    shapes = [tuple(int(s) for s in shape)]
    for step in steps:
        shapes.append(tuple(math.ceil(s / f) for s, f in zip(shapes[-1], step, strict=True)))
    return steps, shapes, pyramid.absolute_factors(steps, len(shape))


def _prepare(store: Store, prefix: str, overwrite: bool, where: str, target: Path | None) -> Path | None:
    """Refuse an existing node unless ``overwrite``; then only replace a node an export of
    this project wrote, in a local folder: return a staging folder beside it (None: the
    destination is empty, write in place)."""
    exists, known = _node_state(store, prefix)
    if not exists:
        return None
    if not overwrite:
        raise NodeExistsError(f"{where} already exists (pass overwrite=True to replace it)")
    if not known:
        raise NodeExistsError(f"refusing to overwrite {where}: it holds files but is no N5/Zarr node; nothing was deleted")
    if target is None:
        if not store.supports_deletes:
            raise NodeExistsError(f"cannot overwrite {where}: its store ({type(store).__name__}) cannot delete")
        raise NodeExistsError(
            f"cannot overwrite {where}: only local folders are replaced safely (written beside, then renamed "
            f"into place) and {type(store).__name__} cannot rename; delete it yourself or export elsewhere"
        )
    found, total = safe_destination.foreign_entries(target)
    if found:
        raise NodeExistsError(
            f"refusing to overwrite {where}: it holds {safe_destination.describe_foreign(found, total)}. "
            "Overwrite only replaces what an export wrote; nothing was deleted"
        )
    return safe_destination.staging_folder(target)


def _clean_up(store: Store, prefix: str, staging: Path | None, where: str, created: Path | None) -> str:
    """Remove a failed export's partial output (and the folder it created); say what."""
    if staging is not None:
        shutil.rmtree(staging, ignore_errors=True)
        return f"removed the partial export {staging}"
    if store.supports_deletes:
        _remove(store, prefix)
        if created is not None:
            with contextlib.suppress(OSError):
                created.rmdir()  # only if empty
        return f"removed the partial export at {where}"
    return f"could not remove the partial export at {where} (its store cannot delete)"


class _NoCopy:
    """A numpy array handed to ``da.from_array`` without the full copy dask makes of
    array-likes (it doubled memory and a third of the export time for in-memory layers)."""

    def __init__(self, array: np.ndarray) -> None:
        self._array = array
        self.shape, self.dtype, self.ndim = array.shape, array.dtype, array.ndim

    def __getitem__(self, key: Any) -> np.ndarray:
        return self._array[key]


def _as_dask(data: ArrayLike, block: tuple[int, ...]) -> da.Array:
    if isinstance(data, da.Array):
        return data
    return da.from_array(_NoCopy(data) if isinstance(data, np.ndarray) else data, chunks=block)


def _next_level(prev: N5Blocks, target: N5Blocks, step: Sequence[int], method: pyramid.Method) -> da.Array:
    """Level k+1 from the blocks of level k just written: one read of 2x the block per
    output block, so memory stays at a few blocks per thread whatever the data size."""
    read = tuple(min(b * f, n) for b, f, n in zip(target.block, step, prev.shape, strict=True))
    level = pyramid.downsample(da.from_array(prev, chunks=read, asarray=False), step, method)
    return level.rechunk(target.block)  # a no-op: downsample already gives the block grid


def _publish_parents(store: Store, prefix: str, zarr_json: bool) -> None:
    """Group metadata for the container root and groups above ``prefix`` that have none."""
    parts = prefix.strip("/").split("/")[:-1]
    for i in range(len(parts), -1, -1):
        parent = "".join(f"{p}/" for p in parts[:i])
        if all(store_get(store, _join(parent, name)) is None for name in (N5_JSON, ZARR_JSON)):
            _publish(store, parent, {"zarr_format": 3, "node_type": "group", "attributes": {}}, zarr_json)
