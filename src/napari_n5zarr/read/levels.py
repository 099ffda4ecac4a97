"""Pyramid levels as lazy arrays in napari's order (..., z, y, x), whatever their size.

Every level is a :class:`LevelReader`: a small array-like that reads exactly the region
asked for (transposing ``n5_default`` arrays to C order). napari is handed the readers
themselves: a slice is one call that reads its blocks concurrently, no dask graph is built
and neither ``dask.array`` nor a dask scheduler (which imports ``distributed``) is loaded
on the way to the first frame; the shared decoded-block cache serves repeated slices.
:meth:`LevelReader.to_dask` (and :func:`dask_level`) give dask arrays over the reader, with
chunks grown from whole storage blocks (:func:`dask_chunks`), for dask users; a level
that would need more than :data:`MAX_TASKS` tasks of at most :data:`MAX_TASK_BYTES` /
:data:`MAX_TASK_BLOCKS` is better read as the reader itself. Building a level costs
metadata only. ``n5_default`` levels read their blocks through
:mod:`~napari_n5zarr.read.fetch` (straight from the store, decoded concurrently, kept in the
shared :mod:`~napari_n5zarr.read.block_cache`); other arrays and strided reads go through zarr.

A block that cannot be read (corrupt, unreachable) reads as the fill value, and is
reported once (naming the block) instead of failing the slice: a viewer must show what it
can and say what it cannot.
"""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from napari_n5zarr.block_grid import block_ranges
from napari_n5zarr.errors import N5BlockError
from napari_n5zarr.read.fetch import MAX_REGION_BLOCKS, BlockSource

if TYPE_CHECKING:
    import dask.array as da
    import zarr

TASK_BYTES = 2**20
"""Target decoded size of one dask task (grown from the storage block in x and y)."""
REMOTE_TASK_BYTES = 8 * 2**20
"""...for levels read over the network: each task requests all its blocks at once, so larger
tasks keep more requests in flight (dask runs only one task per core)."""
MAX_TASKS = 2**15
"""Above this many tasks per level, tasks grow (graph building and culling grow with it)."""
MAX_TASK_BYTES = 64 * 2**20
"""...but never beyond this decoded size per task..."""
MAX_TASK_BLOCKS = 4096
"""...nor this many storage blocks per task; beyond both, the level is a :class:`LevelReader`."""
SAMPLE_BLOCKS = 64
"""Most storage blocks read for a layer's contrast limits."""
SAMPLE_EDGE = 512
"""Largest y/x extent of the contrast sample (pixels)."""
SPLIT_BLOCK_BYTES = 2**14
"""Blocks of at least this decoded size: regions of any size take the block path (in pieces)."""
FALLBACK_BLOCKS = 4096
"""Most storage blocks re-read one by one after a failed read (the rest: fill value)."""

Report = Callable[[str], None]


class _Level:
    """What napari asks of a level besides indexing: ``size`` and ``__array__``."""

    shape: tuple[int, ...]
    ndim: int

    def __getitem__(self, index: Any) -> np.ndarray:
        raise NotImplementedError

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        """All of it (napari materializes its thumbnail level, the coarsest, this way)."""
        out = self._all()
        return out.astype(dtype, copy=False) if dtype is not None else out

    def _all(self) -> np.ndarray:
        return np.asarray(self[(slice(None),) * self.ndim])


class LevelReader(_Level):
    """A zarr array seen in napari order (basic indexing only): ``n5_default`` arrays are
    transposed, plain Zarr arrays kept in their own C order. Reads that fail are retried
    block by block; unreadable blocks become the fill value and go to ``report`` once."""

    def __init__(self, array: zarr.Array, *, n5_order: bool, report: Report | None = None) -> None:
        shape = tuple(int(s) for s in array.shape)
        blocks = tuple(int(b) for b in array.chunks)
        source = BlockSource.for_array(array) if n5_order else None
        self._setup(shape[::-1] if n5_order else shape, blocks[::-1] if n5_order else blocks, np.dtype(array.dtype),
                    n5_order=n5_order, source=source, report=report)  # fmt: skip
        self.array = array

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled (a dask.distributed task) as its zarr array (which pickles as its store
        and path): the unpickled reader reopens the store, with a lock and cache of its own
        process. It has no ``report`` (a worker has nobody to show it to): a block it cannot
        read raises instead of reading as the fill value, so a copy never writes fill values
        for unread data."""
        return (_strict, (functools.partial(_over_array, self.array, self.n5_order), type(self)))

    def _setup(self, shape: tuple[int, ...], blocks: tuple[int, ...], dtype: np.dtype, *, n5_order: bool,
               source: BlockSource | None, report: Report | None) -> None:  # fmt: skip
        self.n5_order = n5_order
        self.shape = shape  # napari order
        self.dtype = dtype
        self.ndim = len(shape)
        self.storage_blocks = blocks  # storage block, napari order
        self.report = report
        self.strict = False
        """Raise on a block that cannot be read (else: fill value, and ``report``)."""
        self._reported: set[str] = set()
        self._lock = threading.Lock()
        self.source = source
        """The fast block path (``n5_default`` arrays), else None: zarr reads every region."""

    def __getitem__(self, index: Any) -> np.ndarray:
        basic, squeeze, rest = _basic(index, self.shape)
        return self._index(basic, squeeze, rest)

    def _all(self) -> np.ndarray:
        return self.read(tuple(slice(0, n, 1) for n in self.shape))

    def _index(self, basic: tuple[slice, ...], squeeze: set[int], rest: tuple | None) -> Any:
        return self.read(basic, squeeze, rest)

    def read(
        self,
        basic: tuple[slice, ...],
        squeeze: set[int] | frozenset[int] = frozenset(),
        rest: tuple | None = None,
    ) -> np.ndarray:
        """The region ``basic`` (napari order, slices with positive steps, in range) as an
        array, ``squeeze`` axes dropped, then the in-memory index ``rest`` applied."""
        if self._fast(basic):
            out = self._read_fast(basic)
        else:
            selection = basic[::-1] if self.n5_order else basic
            try:
                out = self._read(selection)
            except Exception as exc:  # any read failure: fill what cannot be read, say so
                out = self._read_blockwise(selection, exc)
            if self.n5_order:
                out = out.T
        if squeeze:
            out = out.reshape([n for i, n in enumerate(out.shape) if i not in squeeze])
        return out[rest] if rest is not None else out

    def _fast(self, basic: tuple[slice, ...]) -> bool:
        """True when the block path reads ``basic`` (napari order): unit steps, inside the
        array; a region of more than :data:`MAX_REGION_BLOCKS` blocks only when blocks are
        not tiny (it is then read in pieces). Strided previews and tiny blocks go to zarr."""
        if self.source is None:
            return False
        if any(
            s.step not in (None, 1) or s.stop > n or s.start < 0
            for s, n in zip(basic, self.shape, strict=True)
        ):
            return False
        return _block_count(basic, self.storage_blocks) <= MAX_REGION_BLOCKS or (
            math.prod(self.storage_blocks) * self.dtype.itemsize >= SPLIT_BLOCK_BYTES
        )

    def _read_fast(self, basic: tuple[slice, ...]) -> np.ndarray:
        """``basic`` through the block path, in pieces of at most :data:`MAX_REGION_BLOCKS`
        blocks (split along the slowest axis that spans several blocks)."""
        assert self.source is not None
        count = _block_count(basic, self.storage_blocks)
        if count <= MAX_REGION_BLOCKS:
            return self.source.read(basic, self._say)
        spans = [_block_count((s,), (b,)) for s, b in zip(basic, self.storage_blocks, strict=True)]
        axis = next(i for i, n in enumerate(spans) if n > 1)
        b = self.storage_blocks[axis]
        per_piece = max(
            1, MAX_REGION_BLOCKS // (count // spans[axis])
        )  # blocks along `axis` per piece
        out = np.empty(tuple(s.stop - s.start for s in basic), self.dtype)
        s = basic[axis]
        lo = s.start
        while lo < s.stop:
            hi = min(s.stop, (lo // b + per_piece) * b)
            piece = (*basic[:axis], slice(lo, hi), *basic[axis + 1 :])
            out[(slice(None),) * axis + (slice(lo - s.start, hi - s.start),)] = self._read_fast(
                piece
            )
            lo = hi
        return out

    def to_dask(self) -> da.Array:
        """This level as a dask array (chunks from :func:`dask_chunks`), for dask users;
        napari gets the reader itself (no dask import, no scheduler on the open path)."""
        shape, blocks = (
            self.shape[::-1],
            self.storage_blocks[::-1],
        )  # N5 order, whatever the storage order
        return _from_reader(
            self, dask_chunks(shape, blocks, self.dtype.itemsize, _task_bytes(self))[::-1]
        )

    def _read(self, selection: tuple[slice, ...]) -> np.ndarray:
        if all(s.step in (None, 1) for s in selection):
            return np.asarray(self.array[selection])
        # Strided: explicit indices, so zarr visits only the blocks holding them (a slice
        # with a step makes it walk every block between start and stop).
        index = tuple(
            s if s.step in (None, 1) else np.arange(s.start, s.stop, s.step) for s in selection
        )
        return np.asarray(self.array.oindex[index])

    def _read_blockwise(self, selection: tuple[slice, ...], first: Exception) -> np.ndarray:
        """Read ``selection`` (zarr order, slices with steps > 0) one storage block at a time."""
        blocks = tuple(int(b) for b in self.array.chunks)
        ranges = [range(*s.indices(n)) for s, n in zip(selection, self.array.shape, strict=True)]
        fill = self.array.fill_value
        out = np.full([len(r) for r in ranges], fill if fill is not None else 0, dtype=self.dtype)
        grids = [
            (sorted({i // b for i in r}) if len(r) <= 2**16 else range(r[0] // b, r[-1] // b + 1))
            if len(r)
            else []
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
                    self._say(
                        str(exc) or f"{type(exc).__name__} in block {'/'.join(map(str, cell))}"
                    )
        return out

    def _say(self, message: str) -> None:
        if self.strict:
            raise N5BlockError(message)
        with self._lock:
            if message in self._reported:
                return
            self._reported.add(message)
        if self.report is not None:
            self.report(f"{message} (shown as fill value)")


def _over_array(array: zarr.Array, n5_order: bool, cls: type[LevelReader]) -> LevelReader:
    return cls(array, n5_order=n5_order)


def _strict(reopen: Callable[[type], LevelReader], cls: type[LevelReader]) -> LevelReader:
    """The reader ``reopen(cls)`` builds, raising on unreadable blocks (see ``__reduce__``)."""
    reader = reopen(cls)
    reader.strict = True
    return reader


class LazyLevel(LevelReader):
    """The :class:`LevelReader` napari is handed: indexed with slices alone it gives a lazy
    :class:`RegionView` (read by ``np.asarray`` or further indexing), as a dask array would;
    with an integer or an array, the array."""

    def _index(self, basic: tuple[slice, ...], squeeze: set[int], rest: tuple | None) -> Any:
        if not squeeze and rest is None:
            return RegionView(self, basic)
        return self.read(basic, squeeze, rest)


class RegionView(_Level):
    """A region of a :class:`LevelReader` (slices with positive steps), read when asked:
    napari cuts the visible tile out of a level with every z before it picks the plane
    (``level[:, y0:y1, x0:x1][z]``), so a region must not be read before it is indexed
    with an integer or turned into an array (as a dask array would behave)."""

    def __init__(self, base: LevelReader, region: tuple[slice, ...]) -> None:
        self.base, self.region = base, region
        self.shape = tuple(len(range(s.start, s.stop, s.step)) for s in region)
        self.dtype = base.dtype
        self.ndim = len(region)
        self.storage_blocks = base.storage_blocks

    def __getitem__(self, index: Any) -> Any:
        basic, squeeze, rest = _basic(index, self.shape)
        parent = tuple(
            slice(r.start + s.start * r.step, r.start + s.stop * r.step, r.step * s.step)
            for r, s in zip(self.region, basic, strict=True)
        )
        return self.base._index(parent, squeeze, rest)

    def _all(self) -> np.ndarray:
        return self.base.read(self.region)


def _block_count(basic: Sequence[slice], blocks: Sequence[int]) -> int:
    """Storage blocks touched by unit-step slices ``basic``."""
    return math.prod(
        len(r) for r in block_ranges([s.start for s in basic], [s.stop for s in basic], blocks)
    )


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
            slices.append(slice(k, k + 1, 1))
            squeeze.add(axis)
        elif isinstance(i, slice) and (i.step is None or i.step > 0):
            start, stop, step = i.indices(n)
            slices.append(slice(start, max(start, stop), step))
            rest.append(slice(None))
        else:  # negative steps, lists, arrays: read the axis whole, index in memory
            slices.append(slice(0, n, 1))
            rest.append(i)
            fancy = True
    return tuple(slices), squeeze, (tuple(rest) if fancy else None)


def dask_chunks(
    shape: Sequence[int],
    blocks: Sequence[int],
    itemsize: int,
    target: int = TASK_BYTES,
    max_tasks: int = MAX_TASKS,
    max_bytes: int = MAX_TASK_BYTES,
    max_blocks: int = MAX_TASK_BLOCKS,
) -> tuple[int, ...]:
    """Dask chunks (N5 order): whole storage blocks, doubled along x and y (N5 axes 0
    and 1, napari's last two) until a task decodes ``target`` bytes, so a 2D slice reads
    no block it does not show along the slower axes. Then, while the level has more than
    ``max_tasks`` tasks, doubled further, x and y first, up to ``max_bytes`` and
    ``max_blocks`` per task (so the result may still have more than ``max_tasks``)."""
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

    def room() -> bool:
        nblocks = math.prod(math.ceil(c / b) for c, b in zip(chunks, blocks, strict=True))
        return math.prod(chunks) * itemsize * 2 <= max_bytes and nblocks * 2 <= max_blocks

    grow(lambda: math.prod(chunks) * itemsize < target and room(), xy)
    for axes in (xy, rest):
        grow(lambda: task_count(shape, chunks) > max_tasks and room(), axes)
    return tuple(chunks)


def task_count(shape: Sequence[int], chunks: Sequence[int]) -> int:
    """Number of dask tasks (chunks) of an array."""
    return math.prod(math.ceil(s / c) for s, c in zip(shape, chunks, strict=True))


def dask_level(
    array: zarr.Array, *, n5_order: bool = True, report: Report | None = None
) -> da.Array:
    """One level in napari order as a dask array (chunks from :func:`dask_chunks`)."""
    return LevelReader(array, n5_order=n5_order, report=report).to_dask()


def _task_bytes(reader: LevelReader) -> int:
    remote = reader.source is not None and not reader.source.synchronous
    return REMOTE_TASK_BYTES if remote else TASK_BYTES


def _from_reader(reader: LevelReader, chunks: Sequence[int]) -> da.Array:
    import dask.array as da

    name = f"n5zarr-{id(reader):x}-{'x'.join(map(str, reader.shape))}"
    meta = np.empty((0,) * reader.ndim, reader.dtype)
    return da.from_array(
        reader, chunks=tuple(chunks), name=name, asarray=True, fancy=True, meta=meta
    )


class StridedReader(_Level):
    """Every ``step``-th pixel of a level in y and x (napari's last two axes): a
    nearest-neighbour preview level for a huge array stored without a pyramid."""

    def __init__(self, base: Any, step: int) -> None:
        self.base, self.step = base, int(step)
        self.dtype = np.dtype(base.dtype)
        self.ndim = base.ndim
        self.shape = tuple(base.shape[:-2]) + tuple(
            math.ceil(n / self.step) for n in base.shape[-2:]
        )
        self.storage_blocks = tuple(base.storage_blocks[:-2]) + tuple(
            max(1, b // self.step) for b in base.storage_blocks[-2:]
        )

    def __getitem__(self, index: Any) -> np.ndarray:
        basic, squeeze, rest = _basic(index, self.shape)
        parent = list(basic[:-2]) + [
            slice(s.start * self.step, s.stop * self.step, (s.step or 1) * self.step)
            for s in basic[-2:]
        ]
        out = np.asarray(self.base[tuple(parent)])
        if squeeze:
            out = out.reshape([n for i, n in enumerate(out.shape) if i not in squeeze])
        return out[rest] if rest is not None else out


PREVIEW_EDGE = 1024
"""A single huge level gets nearest-neighbour preview levels down to this y/x extent..."""
HUGE_EDGE = 16384
"""...when its y or x extent is above this (napari reads a single level's plane whole)."""


def needs_preview(shape: Sequence[int]) -> bool:
    """True for a level whose y-x plane napari could not read whole."""
    return len(shape) >= 2 and max(shape[-2:]) > HUGE_EDGE


def preview_levels(level: LevelReader) -> list[Any]:
    """``[level, every 2nd pixel, every 4th, ...]`` until y and x fit :data:`PREVIEW_EDGE`
    (napari shows a single level whole: a 100000^2 plane would be read in full)."""
    base = level
    out: list[Any] = [level]
    step = 2
    while max(math.ceil(n / (step // 2)) for n in level.shape[-2:]) > PREVIEW_EDGE:
        out.append(StridedReader(base, step))
        step *= 2
    return out


def contrast_sample(level: Any, blocks: Sequence[int]) -> Any:
    """``level`` (napari order) if it has at most :data:`SAMPLE_BLOCKS` storage blocks
    (``blocks``, napari order), else a central piece touching about that many: the middle
    of every axis but y and x, and a y-x window of at most :data:`SAMPLE_EDGE` pixels."""
    ndim = level.ndim
    nblocks = math.prod(
        math.ceil(s / max(1, int(b))) for s, b in zip(level.shape, blocks, strict=True)
    )
    if (
        nblocks <= SAMPLE_BLOCKS
        and math.prod(level.shape) * level.dtype.itemsize <= SAMPLE_BLOCKS * 2**20
    ):
        return level  # small: all of it
    index: list[Any] = [s // 2 for s in level.shape[: ndim - 2]]
    per_axis = max(1, int(math.sqrt(SAMPLE_BLOCKS)))
    for s, b in zip(level.shape[ndim - 2 :], blocks[ndim - 2 :], strict=True):
        edge = max(1, min(s, SAMPLE_EDGE, per_axis * int(b)))
        start = max(0, min(s - edge, s // 2 - edge // 2))
        index.append(slice(start, start + edge))
    return level[tuple(index)]


def contrast_limits(level: Any, blocks: Sequence[int] | None = None) -> tuple[float, float]:
    """(min, max) of a bounded central sample of ``level`` (see :func:`contrast_sample`),
    read in one piece (never whole dask chunks)."""
    blocks = (
        getattr(level, "storage_blocks", None)
        or blocks
        or getattr(level, "chunksize", None)
        or (1,) * level.ndim
    )
    sample = contrast_sample(level, blocks) if level.ndim >= 2 else level
    values = np.asarray(sample)
    if values.size == 0:
        return (0.0, 1.0)
    if np.issubdtype(values.dtype, np.floating):
        lo, hi = np.nanmin(values), np.nanmax(values)
    else:
        lo, hi = values.min(), values.max()
    lo, hi = float(lo), float(hi)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return (0.0, 1.0)
    return (lo, hi) if hi > lo else (lo, lo + 1.0)
