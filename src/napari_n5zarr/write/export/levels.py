"""Step 2 of an export: the blocks of every level, written with progress and cancel.

Level 0 is cut into *regions* (a few blocks wide, aligned so every block of the finer
levels lies in one region), grouped into tasks of a few MiB. Each task writes its level-0
blocks, downsamples in memory and writes the blocks of the next levels its regions
determine: those pyramid levels cost no second read of anything, and every core
compresses. Where blocks downsample on their own (even block sizes), each block is
downsampled right after it is written, from its stored values (C order, still in cache)
rather than from the source region (often a transposed view). In-memory sources (numpy, array-likes) run their tasks on a plain thread pool
(:mod:`~napari_n5zarr.write.export.workers`); dask arrays through ``dask.array.store``. The next
level, when it fits :data:`ACCUM_BYTES`, is kept in memory with the coarser ones and their
blocks are written as soon as they are complete (:mod:`~napari_n5zarr.write.export.coarse`);
else levels coarser than a region are computed from the blocks of the last level written.
Memory stays bounded: a task (at most :data:`REGION_BYTES`) per thread, and a few tasks
per thread queued at a time.
"""

from __future__ import annotations

import functools
import itertools
import math
import os
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import dask.array as da
import numpy as np
from zarr.abc.store import Store

from napari_n5zarr.errors import ExportCancelled
from napari_n5zarr.write import pyramid
from napari_n5zarr.write.export.blocks import N5Blocks, Progress, WriteGate
from napari_n5zarr.write.export.cluster import cluster_client, store_on_cluster
from napari_n5zarr.write.export.coarse import CoarseLevels, blockwise
from napari_n5zarr.write.export.plan import ExportPlan
from napari_n5zarr.write.export.workers import CANCEL_POLL, Workers

__all__ = ["CANCEL_POLL", "REGION_BYTES", "as_cancel", "region_depth", "write_levels"]


REGION_BYTES = 8 << 20
"""Largest level-0 region whose finer levels are computed from it in memory."""

ACCUM_BYTES = 64 << 20
"""Largest level kept in memory whole while level 0 is written (see :func:`accumulated_level`)."""

BATCH_BYTES = 64 << 20
BATCH_TASKS = 4
"""Level-0 bytes, and regions per thread, given to dask in one go (see :func:`store_local`)."""

ArrayLike = Any


def as_cancel(cancel: Any) -> Callable[[], bool] | None:
    """``cancel`` (a ``threading.Event``, a callable or None) as a callable."""
    if cancel is None:
        return None
    if hasattr(cancel, "is_set"):
        return cancel.is_set
    if callable(cancel):
        return cancel
    raise TypeError("cancel must be a threading.Event or a callable returning bool")


def check_cancel(cancel: Callable[[], bool] | None) -> None:
    if cancel is not None and cancel():
        raise ExportCancelled("export cancelled")


def write_levels(
    plan: ExportPlan,
    sources: Sequence[ArrayLike],
    store: Store,
    prefix: str,
    *,
    progress: Callable[[int, int], Any] | None = None,
    cancel: Callable[[], bool] | None = None,
    scheduler: Any = None,
    gate: WriteGate | None = None,
    worker_timeout: float | None = None,
) -> None:
    """Write the blocks of every level of ``plan`` under ``prefix`` of ``store`` (no metadata).

    ``sources``: level 0 (or every level when ``plan.given_levels``). Raises
    :class:`ExportCancelled` within :data:`CANCEL_POLL` seconds of ``cancel()`` turning true.
    On a dask.distributed client, a failure stops the workers' writes before it is raised
    (:func:`~napari_n5zarr.write.export.cluster.store_on_cluster`; ``worker_timeout``: seconds
    without any worker before giving up).
    """
    local = is_local_scheduler(scheduler)
    client = None if local else cluster_client(scheduler)
    threads = _threads(scheduler)
    counter = Progress(plan.nblocks, progress)
    codec = plan.levels[0].metadata.codec()  # one compression for every level
    targets = [
        N5Blocks(
            store, f"{prefix}{lv.name}/", lv.shape, lv.block, plan.dtype, codec, plan.boundary, plan.write_empty_blocks,
            progress=counter if local else None, cancel=cancel if local else None, gate=gate,
        )
        for lv in plan.levels
    ]  # fmt: skip
    run = _LevelWrites(
        plan, targets, scheduler, cancel, gate, worker_timeout, counter, threads, local, client
    )
    with Workers(threads, cancel) as workers:
        if plan.given_levels:
            run.given_levels(sources, workers)
            return
        first = run.fine_levels(sources[0], workers)
    for k in range(first, len(targets)):
        build = functools.partial(
            next_level, targets[k - 1], targets[k], plan.steps[k - 1], plan.method
        )
        run.store_level(build, targets[k], targets[k].nblocks)


@dataclass
class _LevelWrites:
    """One :func:`write_levels` call: its targets, and how its tasks run (in this process's
    workers, on a dask.distributed client, or by another dask scheduler)."""

    plan: ExportPlan
    targets: list[N5Blocks]
    scheduler: Any
    cancel: Callable[[], bool] | None
    gate: WriteGate | None
    worker_timeout: float | None
    counter: Progress
    threads: int
    local: bool
    client: Any

    def store_level(
        self, level: Callable[[], da.Array], target: Any, nblocks: int, batch: int | None = None
    ) -> None:
        """Store the dask array ``level()`` builds into ``target`` by the run's scheduler."""
        check_cancel(self.cancel)
        if self.local:  # building a large graph takes seconds too: cancellable
            cancellable(
                lambda: store_local(level(), target, self.scheduler, self.cancel, batch),
                self.cancel,
            )
        elif self.client is not None:
            store_on_cluster(
                level(),
                target,
                self.client,
                self.gate,
                worker_timeout=self.worker_timeout,
                cancel=self.cancel,
            )
            self.counter.add(nblocks)
        else:
            da.store(level(), target, lock=False, scheduler=self.scheduler)
            self.counter.add(nblocks)

    def given_levels(self, sources: Sequence[ArrayLike], workers: Workers) -> None:
        """Every level from its own source (nothing computed)."""
        plan = self.plan
        for source, target in zip(sources, self.targets, strict=True):
            if self.local and not isinstance(source, da.Array):
                regions = PyramidRegions([target], (), plan.method)
                task = grown_task(
                    target.shape, target.block, plan.spatial, plan.dtype.itemsize, self.threads
                )
                workers.run(
                    functools.partial(write_region, source, regions, task),
                    task_starts(target.shape, task),
                )
            else:
                build = functools.partial(_given_level, source, target.block, plan.dtype)
                self.store_level(build, target, target.nblocks)

    def fine_levels(self, source: ArrayLike, workers: Workers) -> int:
        """Level 0 and the levels computed in the same tasks (and, in this process, the
        coarse levels accumulated from them); the first level still to write."""
        plan, targets = self.plan, self.targets
        depth = region_depth(plan, threads=self.threads)
        region = task_shape(plan, region_shape(plan, depth), threads=self.threads)
        regions = PyramidRegions(targets[: depth + 1], plan.steps[:depth], plan.method)
        # Only in this process: tasks run by dask.distributed or processes fill their own copies.
        if self.local and accumulated_level(plan, depth, region) is not None:
            regions.coarse = CoarseLevels(
                targets[depth + 1 :], plan.steps[depth + 1 :], plan.method, workers.submit
            )
            regions.coarse_step = plan.steps[depth]
        if self.local and not isinstance(source, da.Array):
            footprint = None
            if (
                regions.coarse is not None
            ):  # tasks of one coarse block one after another: it is written early
                factors = pyramid.absolute_factors(plan.steps[: depth + 1], plan.ndim)[-1]
                footprint = tuple(
                    b * f for b, f in zip(targets[depth + 1].block, factors, strict=True)
                )
            starts = task_starts(plan.levels[0].shape, region, footprint)
            workers.run(functools.partial(write_region, source, regions, region), starts)
        else:
            merges = isinstance(source, da.Array) and source.chunks != source.rechunk(region).chunks
            self.store_level(
                lambda: as_dask(source, region).astype(plan.dtype).rechunk(region),
                regions,
                sum(t.nblocks for t in regions.targets),
                batch=_batch(region, plan.dtype.itemsize, self.threads, merges=merges),
            )
            workers.run(None)  # the coarse blocks still being written
        if regions.coarse is None:
            return depth + 1
        if not regions.coarse.done():  # a bug, never data: say what is missing
            raise RuntimeError(f"export: coarse levels incomplete {regions.coarse.describe()}")
        regions.coarse = None
        return len(targets)


def task_starts(
    shape: Sequence[int], task: Sequence[int], footprint: Sequence[int] | None = None
) -> list[tuple[int, ...]]:
    """Starts of the tasks tiling ``shape``; grouped by ``footprint`` (the tasks inside one
    footprint one after another) when given, else in C order."""
    starts = list(itertools.product(*(range(0, n, t) for n, t in zip(shape, task, strict=True))))
    if footprint is not None:
        starts.sort(key=lambda s: (tuple(a // f for a, f in zip(s, footprint, strict=True)), s))
    return starts


def write_region(
    source: ArrayLike, regions: PyramidRegions, task: Sequence[int], start: tuple[int, ...]
) -> None:
    """One task of an in-memory source: its region read (a view of a numpy array) and written."""
    key = tuple(slice(s, min(s + t, n)) for s, t, n in zip(start, task, regions.shape, strict=True))
    regions[key] = np.asarray(source[key]).astype(regions.dtype, copy=False)


def _given_level(source: ArrayLike, block: tuple[int, ...], dtype: np.dtype) -> da.Array:
    return as_dask(source, block).astype(dtype).rechunk(block)


def _batch(region: Sequence[int], itemsize: int, threads: int, merges: bool) -> int:
    """Regions per ``da.store`` call, at most :data:`BATCH_BYTES`. When a region merges
    several blocks, dask orders one call's tasks breadth-first (computing most sources
    before writing any region): a few regions per thread per call then keep the first
    blocks, and progress, early."""
    most = max(2 * threads, BATCH_BYTES // (math.prod(region) * itemsize))
    return min(most, max(2 * threads, BATCH_TASKS * threads)) if merges else most


def region_shape(plan: ExportPlan, depth: int) -> tuple[int, ...]:
    """Level-0 region whose ``depth`` downsampling steps give whole blocks of each level."""
    factors = pyramid.absolute_factors(plan.steps[:depth], plan.ndim)[-1]
    block = plan.levels[0].block
    return tuple(
        min(b * f, n) for b, f, n in zip(block, factors, plan.levels[0].shape, strict=True)
    )


def task_shape(plan: ExportPlan, region: tuple[int, ...], threads: int = 2) -> tuple[int, ...]:
    """Level-0 ``region`` grown by :func:`grown_task`."""
    return grown_task(plan.levels[0].shape, region, plan.spatial, plan.dtype.itemsize, threads)


def grown_task(
    shape: Sequence[int],
    region: Sequence[int],
    spatial: Sequence[int],
    itemsize: int,
    threads: int = 2,
) -> tuple[int, ...]:
    """``region`` doubled along the ``spatial`` axes (last first) while a task stays within
    :data:`REGION_BYTES` and ``shape`` keeps ``8 * threads`` tasks: the cost per task
    (about a millisecond with dask) is then small next to the task's compression."""
    task = list(region)

    def count(t: Sequence[int]) -> int:
        return math.prod(math.ceil(n / r) for n, r in zip(shape, t, strict=True))

    grown = True
    while grown:
        grown = False
        for axis in reversed(spatial):
            bigger = [*task[:axis], min(shape[axis], task[axis] * 2), *task[axis + 1 :]]
            if bigger[axis] == task[axis] or (
                bigger[axis] % region[axis] and bigger[axis] != shape[axis]
            ):
                continue
            if math.prod(bigger) * itemsize > REGION_BYTES or count(bigger) < 8 * threads:
                continue
            task, grown = bigger, True
    return tuple(task)


def accumulated_level(plan: ExportPlan, depth: int, task: Sequence[int]) -> int | None:
    """``depth + 1`` when that level is kept in memory whole while level 0 is written: it
    fits :data:`ACCUM_BYTES` and every task's level-``depth`` piece downsamples on its own
    exactly as the whole level would (even extents on the stepped axes, or the whole axis).
    The coarser levels are then computed from it, not read back from the store."""
    if depth >= len(plan.steps):
        return None
    if math.prod(plan.levels[depth + 1].shape) * plan.dtype.itemsize > ACCUM_BYTES:
        return None
    factors = pyramid.absolute_factors(plan.steps[:depth], plan.ndim)[-1]
    for t, f, n, step in zip(task, factors, plan.levels[0].shape, plan.steps[depth], strict=True):
        if step > 1 and t < n and (t % f or (t // f) % step):
            return None
    return depth + 1


def region_depth(plan: ExportPlan, threads: int = 2) -> int:
    """How many pyramid steps each level-0 region computes in memory: as many as fit in
    :data:`REGION_BYTES` while level 0 still has ``8 * threads`` regions to share out (so
    both cores work, and progress and the first blocks come early)."""
    depth = 0
    for d in range(1, len(plan.steps) + 1):
        region = region_shape(plan, d)
        count = math.prod(
            math.ceil(n / r) for n, r in zip(plan.levels[0].shape, region, strict=True)
        )
        if math.prod(region) * plan.dtype.itemsize > REGION_BYTES or count < 8 * threads:
            break
        depth = d
    return depth


def _threads(scheduler: Any) -> int:
    import dask

    return (
        int(dask.config.get("num_workers", None) or os.cpu_count() or 1)
        if scheduler in (None, "threads")
        else 1
    )


@dataclass
class PyramidRegions:
    """A ``dask.array.store`` target for level 0 that also writes the finer levels: each
    region written is downsampled ``len(steps)`` times in memory, every result cut into
    the blocks of its level."""

    targets: list[N5Blocks]
    steps: Sequence[Sequence[int]]
    method: pyramid.Method
    coarse: CoarseLevels | None = None
    """The next levels, in memory: each region's last level downsampled once more into the first."""
    coarse_step: Sequence[int] = ()

    @property
    def shape(self) -> tuple[int, ...]:
        return self.targets[0].shape

    @property
    def dtype(self) -> np.dtype:
        return self.targets[0].dtype

    @property
    def ndim(self) -> int:
        return self.targets[0].ndim

    def __dask_tokenize__(self) -> tuple:
        return (
            type(self).__name__,
            *(t.__dask_tokenize__() for t in self.targets),
            tuple(map(tuple, self.steps)),
        )

    def __setitem__(self, key: tuple[slice, ...], value: np.ndarray) -> None:
        start = tuple(s.start or 0 for s in key)
        value = np.asarray(value, dtype=self.dtype)
        for j, target in enumerate(self.targets):
            last = j + 1 == len(self.targets)
            if last and self.coarse is None:
                _write_blocks(target, start, value)
                return
            step = tuple(self.coarse_step if last else self.steps[j])
            below = tuple(s // f for s, f in zip(start, step, strict=True))
            if not blockwise(value.shape, target.block, step):  # odd blocks: from the whole region
                _write_blocks(target, start, value)
                coarser = pyramid.downsample_block(value, step, self.method)
            elif last:  # each block's piece straight to the coarse levels
                assert self.coarse is not None
                _write_blocks(
                    target,
                    start,
                    value,
                    step,
                    self.method,
                    functools.partial(_add_at, self.coarse, below),
                )
                return
            else:  # each block's piece into the next level's region
                coarser = np.empty(
                    [-(-n // f) for n, f in zip(value.shape, step, strict=True)], dtype=self.dtype
                )
                _write_blocks(
                    target, start, value, step, self.method, functools.partial(_put_at, coarser)
                )
            if last:
                assert self.coarse is not None
                self.coarse.add(below, coarser)
                return
            value, start = coarser, below


def _add_at(
    coarse: CoarseLevels, start: tuple[int, ...], offset: tuple[int, ...], piece: np.ndarray
) -> None:
    coarse.add(tuple(s + o for s, o in zip(start, offset, strict=True)), piece)


def _put_at(out: np.ndarray, offset: tuple[int, ...], piece: np.ndarray) -> None:
    out[tuple(slice(o, o + n) for o, n in zip(offset, piece.shape, strict=True))] = piece


Feed = Callable[[tuple[int, ...], np.ndarray], None]


def _write_blocks(
    target: N5Blocks,
    start: tuple[int, ...],
    value: np.ndarray,
    step: Sequence[int] | None = None,
    method: pyramid.Method = "mean",
    feed: Feed | None = None,
) -> None:
    """Write ``value`` (a whole number of blocks of ``target`` at ``start``) block by block.

    With ``feed``: each block is also downsampled by ``step`` (blocks must downsample on
    their own as ``value`` does, see :func:`~napari_n5zarr.write.export.coarse.blockwise`) from its
    stored values once written (C order and still in cache: cheaper than downsampling
    ``value``, often a transposed view of the source, a second time); ``feed(offset, piece)``
    gets each piece at its offset in the downsampled ``value``."""
    ranges = [range(0, n, b) for n, b in zip(value.shape, target.block, strict=True)]
    for offset in itertools.product(*ranges):
        src = tuple(slice(o, o + b) for o, b in zip(offset, target.block, strict=True))
        part = value[src]
        key = tuple(
            slice(s + o, s + o + n) for s, o, n in zip(start, offset, part.shape, strict=True)
        )
        if feed is None:
            target[key] = part
            continue
        assert step is not None
        target.keep_stored = True
        target[key] = part
        values = target.last_stored()[
            tuple(slice(0, n) for n in part.shape)
        ]  # without boundary="pad"'s padding
        feed(
            tuple(o // f for o, f in zip(offset, step, strict=True)),
            pyramid.downsample_block(values, step, method),
        )


def is_local_scheduler(scheduler: Any) -> bool:
    """True for dask's threaded / synchronous schedulers (progress and cancel work there)."""
    import dask.local
    import dask.threaded
    from dask.base import get_scheduler

    if (
        scheduler is None
        and dask.config.get("scheduler", None) is None
        and "distributed" not in sys.modules
    ):
        return True  # dask's default; get_scheduler would import distributed (~1 s)
    chosen = get_scheduler(scheduler=scheduler)
    return chosen is None or chosen in (dask.threaded.get, dask.local.get_sync)


def store_local(
    level: da.Array,
    target: Any,
    scheduler: Any,
    cancel: Callable[[], bool] | None,
    batch: int | None = None,
) -> None:
    """``da.store`` on a local scheduler that starts no task once ``cancel`` is set: dask
    keeps firing queued tasks until a failed one comes back, so the check runs in the
    scheduler's own loop (a pre-task callback), not only in the block writes.

    ``batch``: store about this many chunks at a time (slabs along the first axes): dask
    orders a big graph whose source chunks share inputs breadth-first, holding many of
    them; slabs bound that."""
    if batch is not None and level.npartitions > batch:
        for piece in _slabs(level.chunks, batch):
            store_local(level[piece], _Offset(target, piece), scheduler, cancel)
        return
    kwargs: dict[str, Any] = {}
    if cancel is not None:
        from dask.callbacks import Callback

        def stop(key: Any, dsk: Any, state: Any) -> None:
            check_cancel(cancel)

        # Passing callbacks replaces dask's global ones (e.g. a ProgressBar): keep them.
        kwargs["callbacks"] = [*Callback.active, (None, None, stop, None, None)]
    da.store(level, target, lock=False, scheduler=scheduler, **kwargs)


def _slabs(chunks: tuple[tuple[int, ...], ...], batch: int) -> list[tuple[slice, ...]]:
    """Slices cutting an array of ``chunks`` into slabs of whole chunks, at most ``batch``
    chunks each (or one chunk): single chunks along the first axes, groups along the axis
    below which a slab fits, whole extents after it."""
    counts = [len(c) for c in chunks]
    bounds = [np.cumsum((0, *c)).tolist() for c in chunks]
    axis = next(a for a in range(len(chunks)) if math.prod(counts[a + 1 :]) <= batch)
    group = max(1, batch // math.prod(counts[axis + 1 :]))
    per_axis = []
    for a, n in enumerate(counts):
        step = 1 if a < axis else group if a == axis else n
        cuts = [*range(0, n, step), n]
        per_axis.append(
            [slice(bounds[a][lo], bounds[a][hi]) for lo, hi in itertools.pairwise(cuts)]
        )
    return list(itertools.product(*per_axis))


@dataclass
class _Offset:
    """A store target seen from ``piece`` (a slab of it): keys shift by the slab's start."""

    target: Any
    piece: tuple[slice, ...]

    def __setitem__(self, key: tuple[slice, ...], value: np.ndarray) -> None:
        shifted = []
        for k, p in zip(
            key, self.piece + (slice(None),) * (len(key) - len(self.piece)), strict=True
        ):
            o = p.start or 0
            shifted.append(slice((k.start or 0) + o, (k.stop if k.stop is not None else 0) + o))
        self.target[tuple(shifted)] = value

    def __dask_tokenize__(self) -> tuple:
        return ("_Offset", self.target.__dask_tokenize__(), str(self.piece))


def cancellable(work: Callable[[], Any], cancel: Callable[[], bool] | None) -> Any:
    """``work()``, but raise :class:`ExportCancelled` as soon as ``cancel`` is set even while a
    block is still being computed (a slow source, building a large dask graph): ``work``
    then runs on in a daemon thread that starts nothing new (tasks check ``cancel`` before
    they start, block writes are shut by the export's WriteGate)."""
    if cancel is None:
        return work()
    result: dict[str, Any] = {}
    done = threading.Event()

    def run() -> None:
        try:
            result["value"] = work()
        except BaseException as e:  # handed to the exporting thread, re-raised there
            result["error"] = e
        finally:
            done.set()

    threading.Thread(target=run, name="n5zarr-export", daemon=True).start()
    while not done.wait(CANCEL_POLL):
        check_cancel(cancel)
    if "error" in result:
        raise result["error"]
    return result.get("value")


class _NoCopy:
    """A numpy array handed to ``da.from_array`` without the full copy dask makes of
    array-likes (it doubled memory and a third of the export time for in-memory layers)."""

    def __init__(self, array: np.ndarray) -> None:
        self._array = array
        self.shape, self.dtype, self.ndim = array.shape, array.dtype, array.ndim

    def __getitem__(self, key: Any) -> np.ndarray:
        return self._array[key]


def as_dask(data: ArrayLike, chunks: tuple[int, ...]) -> da.Array:
    """``data`` as a dask array (numpy arrays and array-likes in ``chunks``, uncopied)."""
    if isinstance(data, da.Array):
        return data
    return da.from_array(_NoCopy(data) if isinstance(data, np.ndarray) else data, chunks=chunks)


def next_level(
    prev: N5Blocks, target: N5Blocks, step: Sequence[int], method: pyramid.Method
) -> da.Array:
    """Level k+1 from the blocks of level k just written: one read of 2x the block per
    output block, so memory stays at a few blocks per thread whatever the data size."""
    read = tuple(min(b * f, n) for b, f, n in zip(target.block, step, prev.shape, strict=True))
    level = pyramid.downsample(da.from_array(prev, chunks=read, asarray=False), step, method)
    return level.rechunk(target.block)  # a no-op: downsample already gives the block grid
