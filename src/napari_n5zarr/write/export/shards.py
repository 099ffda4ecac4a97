"""A standard OME-Zarr level's data, one task per shard (or per block without shards).

Each task reads its shard's region of the source (a dask array: only the source blocks
under it), and writes it with one ``array[region] = values`` of zarr-python, which encodes
the inner chunks and stores the shard as one key: no two tasks ever touch one shard, and
memory stays at about a shard (plus its source blocks) per running task, however big the
level. In this process the tasks run on a few threads (:class:`~napari_n5zarr.write.export.workers.Workers`,
a bounded number queued); on a dask.distributed client, as futures, through
:func:`~napari_n5zarr.write.export.cluster.run_on_cluster` (a lost worker or none for
``worker_timeout`` stops the export cleanly); on other dask schedulers by ``dask.compute``.
``done(index)`` runs in this process after each shard was written (progress, the resume
journal); shards in ``skip`` (written by an interrupted run) are neither read nor written.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from napari_n5zarr.errors import ExportCancelled
from napari_n5zarr.write.export.blocks import WriteGate

__all__ = ["ShardRun", "shard_grid", "shard_region"]

Index = tuple[int, ...]


def shard_grid(shape: Sequence[int], unit: Sequence[int]) -> tuple[int, ...]:
    """Shards per axis."""
    return tuple(math.ceil(n / u) for n, u in zip(shape, unit, strict=True))


def shard_region(index: Index, unit: Sequence[int], shape: Sequence[int]) -> tuple[slice, ...]:
    """The voxels of the shard at ``index``."""
    return tuple(
        slice(i * u, min((i + 1) * u, n)) for i, u, n in zip(index, unit, shape, strict=True)
    )


def write_shard(array: Any, region: tuple[slice, ...], values: Any, gate: WriteGate | None) -> None:
    """One shard (a task): ``values`` into ``array`` at ``region``, unless the export stopped."""
    import numpy as np

    values = np.asarray(values, dtype=array.dtype)
    if gate is None:
        array[region] = values
        return
    with gate:  # raises ExportCancelled once the export stopped: nothing written after that
        array[region] = values


def read_region(source: Any, region: tuple[slice, ...]) -> Any:
    """The values of ``source`` (dask, numpy or an array-like such as a level reader, which
    reads a region's blocks in one call) at ``region``, in this thread."""
    import dask.array as da
    import numpy as np

    if isinstance(source, da.Array):
        return source[region].compute(scheduler="sync")
    return np.asarray(source[region])


def _lazy_region(source: Any, region: tuple[slice, ...], unit: Sequence[int]) -> Any:
    """``source`` at ``region`` for a task elsewhere: a dask slice, or the region read by the
    task itself from an array-like (it pickles small: a level reader as its store and path)."""
    import dask
    import dask.array as da
    import numpy as np

    if isinstance(source, da.Array):
        return source[region]
    if isinstance(source, np.ndarray):  # sent in pieces, not whole with every task
        return da.from_array(source, chunks=tuple(unit))[region]
    return dask.delayed(read_region, pure=True)(source, region)


@dataclass
class ShardRun:
    """How one export runs its shard tasks (the same for every level)."""

    scheduler: Any = None
    client: Any = None
    """A dask.distributed client, or None."""
    threads: int = 1
    """Threads in this process (dask's threaded or default scheduler); 0: ``dask.compute``."""
    gate: WriteGate | None = None
    cancel: Callable[[], bool] | None = None
    worker_timeout: float | None = None

    def write(self, source: Any, array: Any, skip: Callable[[Index], bool],
              done: Callable[[Index], Any]) -> None:  # fmt: skip
        """``source`` (dask, the level's shape) into ``array`` shard by shard."""
        unit = tuple(array.shards or array.chunks)
        grid = shard_grid(array.shape, unit)
        todo = [i for i in itertools.product(*(range(n) for n in grid)) if not skip(i)]
        if not todo:
            return
        regions = [shard_region(i, unit, array.shape) for i in todo]
        if self.client is not None:
            self._on_cluster(source, array, todo, regions, done)
        elif self.threads:
            self._in_threads(source, array, todo, regions, done)
        else:
            import dask

            tasks = [
                dask.delayed(write_shard, pure=False)(
                    array, r, _lazy_region(source, r, unit), self.gate
                )
                for r in regions
            ]
            dask.compute(*tasks, scheduler=self.scheduler)
            for index in todo:
                done(index)

    def _in_threads(self, source: Any, array: Any, todo: list[Index], regions: list[tuple[slice, ...]],
                    done: Callable[[Index], Any]) -> None:  # fmt: skip
        from napari_n5zarr.write.export.workers import Workers

        def job(n: int) -> None:
            if self.cancel is not None and self.cancel():
                raise ExportCancelled("export cancelled")
            write_shard(array, regions[n], read_region(source, regions[n]), self.gate)
            done(todo[n])

        with Workers(self.threads, self.cancel) as workers:
            workers.run(job, range(len(todo)), window=self.threads + 1)

    def _on_cluster(self, source: Any, array: Any, todo: list[Index], regions: list[tuple[slice, ...]],
                    done: Callable[[Index], Any]) -> None:  # fmt: skip
        import dask

        from napari_n5zarr.write.export.cluster import run_on_cluster

        unit = tuple(array.shards or array.chunks)
        tasks = [
            dask.delayed(write_shard, pure=False)(
                array, r, _lazy_region(source, r, unit), self.gate
            )
            for r in regions
        ]
        run_on_cluster(tasks, self.client, self.gate, worker_timeout=self.worker_timeout,
                       cancel=self.cancel, done=lambda n: done(todo[n]))  # fmt: skip
