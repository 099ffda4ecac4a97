"""Pyramid levels as lazy dask arrays in napari's order (..., z, y, x), whatever their size.

Each level is ``da.from_array`` over a :class:`LevelReader`: a small object that reads a
region of the zarr array (transposing ``n5_default`` arrays to C order). dask fuses a
slice of the level into that read, so a slice costs the storage blocks it touches, even
when a dask chunk is huge. Building a level costs metadata only: its dask chunks are whole
storage blocks grown until there are at most :data:`MAX_TASKS` of them, so a declared
size of 2^32 x 2^32 pixels in 1 x 1 blocks gives a small graph.

A block that cannot be read (corrupt, unreachable) reads as the fill value, and is
reported once (naming the block) instead of failing the slice: a viewer must show what it
can and say what it cannot.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import dask.array as da
    import zarr

TASK_BYTES = 2**20
"""Target decoded size of one dask task (grown from the storage block in x and y)."""
MAX_TASKS = 2**14
"""Above this many tasks per level, tasks grow (graph building and culling grow with it)."""
SAMPLE_BLOCKS = 64
"""Most storage blocks read for a layer's contrast limits."""
SAMPLE_EDGE = 512
"""Largest y/x extent of the contrast sample (pixels)."""
FALLBACK_BLOCKS = 4096
"""Most storage blocks re-read one by one after a failed read (the rest: fill value)."""

Report = Callable[[str], None]


class LevelReader:
    """A zarr array seen in napari order (basic indexing only): ``n5_default`` arrays are
    transposed, plain Zarr arrays kept in their own C order. Reads that fail are retried
    block by block; unreadable blocks become the fill value and go to ``report`` once."""

    def __init__(self, array: zarr.Array, *, n5_order: bool, report: Report | None = None) -> None:
        self.array = array
        self.n5_order = n5_order
        shape = tuple(int(s) for s in array.shape)
        self.shape = shape[::-1] if n5_order else shape
        self.dtype = np.dtype(array.dtype)
        self.ndim = len(shape)
        self.report = report
        self._reported: set[str] = set()
        self._lock = threading.Lock()

    def __getitem__(self, index: Any) -> np.ndarray:
        basic, squeeze, rest = _basic(index, self.shape)
        selection = basic[::-1] if self.n5_order else basic
        try:
            out = np.asarray(self.array[selection])
        except Exception as exc:  # any read failure: fill what cannot be read, say so
            out = self._read_blockwise(selection, exc)
        if self.n5_order:
            out = out.T
        if squeeze:
            out = out.reshape([n for i, n in enumerate(out.shape) if i not in squeeze])
        return out[rest] if rest is not None else out

    def _read_blockwise(self, selection: tuple[slice, ...], first: Exception) -> np.ndarray:
        """Read ``selection`` (zarr order, slices with steps > 0) one storage block at a time."""
        blocks = tuple(int(b) for b in self.array.chunks)
        ranges = [range(*s.indices(n)) for s, n in zip(selection, self.array.shape, strict=True)]
        fill = self.array.fill_value
        out = np.full([len(r) for r in ranges], fill if fill is not None else 0, dtype=self.dtype)
        grids = [
            (sorted({i // b for i in r}) if len(r) <= 2**16 else range(r[0] // b, r[-1] // b + 1)) if len(r) else []
            for r, b in zip(ranges, blocks, strict=True)
        ]
        if math.prod(len(g) for g in grids) > FALLBACK_BLOCKS:
            self._say(str(first))
            return out
        import itertools

        for cell in itertools.product(*grids):
            src, dst = [], []
            for r, b, c in zip(ranges, blocks, cell, strict=True):
                lo, hi = c * b, (c + 1) * b
                first_i = max(0, -((r.start - lo) // r.step))  # first k with r[k] >= lo
                if first_i >= len(r) or r[first_i] >= hi:
                    break
                last_i = min(len(r) - 1, (hi - 1 - r.start) // r.step)
                src.append(slice(r[first_i], r[last_i] + 1, r.step))
                dst.append(slice(first_i, last_i + 1))
            else:
                try:
                    out[tuple(dst)] = self.array[tuple(src)]
                except Exception as exc:
                    self._say(str(exc) or f"{type(exc).__name__} in block {'/'.join(map(str, cell))}")
        return out

    def _say(self, message: str) -> None:
        with self._lock:
            if message in self._reported:
                return
            self._reported.add(message)
        if self.report is not None:
            self.report(f"{message} (shown as fill value)")


def _basic(index: Any, shape: Sequence[int]) -> tuple[tuple[slice, ...], set[int], tuple | None]:
    """(one slice per axis, axes given as integers, the non-basic rest to apply after)."""
    if not isinstance(index, tuple):
        index = (index,)
    if any(i is Ellipsis for i in index):
        at = next(k for k, i in enumerate(index) if i is Ellipsis)
        index = index[:at] + (slice(None),) * (len(shape) - len(index) + 1) + index[at + 1 :]
    index = index + (slice(None),) * (len(shape) - len(index))
    slices, squeeze, rest, fancy = [], set(), [], False
    for axis, (i, n) in enumerate(zip(index, shape, strict=True)):
        if isinstance(i, int | np.integer):
            k = int(i) + n if i < 0 else int(i)
            slices.append(slice(k, k + 1))
            squeeze.add(axis)
        elif isinstance(i, slice) and (i.step is None or i.step > 0):
            slices.append(slice(*i.indices(n)))
            rest.append(slice(None))
        else:  # negative steps, lists, arrays: read the axis whole, index in memory
            slices.append(slice(0, n))
            rest.append(i)
            fancy = True
    return tuple(slices), squeeze, (tuple(rest) if fancy else None)


def dask_chunks(
    shape: Sequence[int],
    blocks: Sequence[int],
    itemsize: int,
    target: int = TASK_BYTES,
    max_tasks: int = MAX_TASKS,
) -> tuple[int, ...]:
    """Dask chunks (N5 order): whole storage blocks, doubled along x and y (N5 axes 0
    and 1, napari's last two) until a task decodes ``target`` bytes, so a 2D slice reads
    no block it does not show along the slower axes. Then, while the level has more than
    ``max_tasks`` tasks, doubled further, x and y first (reads stay proportional to the
    slice: dask fuses slicing into the read)."""
    chunks = [max(1, min(b, s)) for b, s in zip(blocks, shape, strict=True)]
    xy = [i for i in (0, 1) if i < len(shape)]
    rest = [i for i in range(len(shape)) if i not in xy]

    def grow(wanted: Callable[[], bool], axes: Sequence[int]) -> None:
        while wanted():
            candidates = [i for i in axes if chunks[i] < shape[i]]
            if not candidates:
                return
            i = min(candidates, key=lambda j: chunks[j] / blocks[j])
            chunks[i] = min(chunks[i] * 2, shape[i])

    def tasks() -> int:
        return math.prod(math.ceil(s / c) for s, c in zip(shape, chunks, strict=True))

    grow(lambda: math.prod(chunks) * itemsize < target, xy)
    grow(lambda: tasks() > max_tasks, xy)
    grow(lambda: tasks() > max_tasks, rest)
    return tuple(chunks)


def dask_level(array: zarr.Array, *, n5_order: bool = True, report: Report | None = None) -> da.Array:
    """A lazy dask view of one level in napari order (metadata only, whatever its size)."""
    import dask.array as da

    reader = LevelReader(array, n5_order=n5_order, report=report)
    shape, blocks = tuple(array.shape), tuple(array.chunks)
    if not n5_order:  # plan in N5 order (x first), whatever the storage order
        shape, blocks = shape[::-1], blocks[::-1]
    chunks = dask_chunks(shape, blocks, reader.dtype.itemsize)[::-1]
    name = f"n5zarr-{id(reader):x}-{'x'.join(map(str, reader.shape))}"
    return da.from_array(reader, chunks=chunks, name=name, asarray=False, fancy=True, meta=np.empty((0,) * reader.ndim, reader.dtype))


def contrast_sample(level: da.Array, blocks: Sequence[int]) -> da.Array:
    """``level`` (napari order) if it has at most :data:`SAMPLE_BLOCKS` storage blocks
    (``blocks``, napari order), else a central piece touching about that many: the middle
    of every axis but y and x, and a y-x window of at most :data:`SAMPLE_EDGE` pixels."""
    ndim = level.ndim
    nblocks = math.prod(math.ceil(s / max(1, int(b))) for s, b in zip(level.shape, blocks, strict=True))
    if nblocks <= SAMPLE_BLOCKS and level.nbytes <= SAMPLE_BLOCKS * 2**20:
        return level  # small: all of it
    index: list[Any] = [s // 2 for s in level.shape[: ndim - 2]]
    per_axis = max(1, int(math.sqrt(SAMPLE_BLOCKS)))
    for s, b in zip(level.shape[ndim - 2 :], blocks[ndim - 2 :], strict=True):
        edge = max(1, min(s, SAMPLE_EDGE, per_axis * int(b)))
        start = max(0, min(s - edge, s // 2 - edge // 2))
        index.append(slice(start, start + edge))
    return level[tuple(index)]


def contrast_limits(level: da.Array, blocks: Sequence[int] | None = None) -> tuple[float, float]:
    """(min, max) of a bounded central sample of ``level`` (see :func:`contrast_sample`)."""
    import dask.array as da

    sample = contrast_sample(level, blocks or level.chunksize) if level.ndim >= 2 else level
    if sample.size == 0:
        return (0.0, 1.0)
    if np.issubdtype(sample.dtype, np.floating):
        lo, hi = da.compute(da.nanmin(sample), da.nanmax(sample))
    else:
        lo, hi = da.compute(sample.min(), sample.max())
    lo, hi = float(lo), float(hi)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return (0.0, 1.0)
    return (lo, hi) if hi > lo else (lo, lo + 1.0)
