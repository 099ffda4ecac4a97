"""Read a region of an ``n5_default`` array block by block, past zarr's per-call pipeline.

zarr's read path costs one ``sync()`` round trip to its event loop per call plus an async
pipeline around each block; for a napari plane (dozens of dask tasks of a few blocks each)
that doubles the time spent decoding. :class:`BlockSource` instead fetches a region's block
bytes through the same store chain (so the N5 Default Store's checks of block files and
headers still apply, and its errors still name the block), decodes them with the codec's
own bounded decoder, concurrently on a thread pool (zlib, zstd, blosc, lz4 and the file
reads release the GIL), and copies them into the output. Decoded blocks go to the shared
:mod:`~napari_n5zarr.read.block_cache`, so scrolling through z decodes each block once.

Local stores are read with their synchronous ``get_sync`` on the pool; other stores (HTTP,
S3, zip) with one ``sync()`` per region that gathers every block request at once, and
requests the missing blocks of the region's whole y/x plane with them: dask splits a plane
into tasks and runs one per core, so the plane's other tasks find their blocks in flight
(and wait for them) instead of waiting for a free core to request them. Each block is
decoded as soon as its bytes arrive, on the pool or by the reading thread itself (it would
only wait otherwise, as a local read's does not).

Blocks are kept as views of the decompressed bytes, in napari order (C order of the
reversed N5 shape: the order of the bytes on disk, big endian), so a z-plane of a block is
contiguous and only the values copied out of a block are byte-swapped. While a person scrolls through z, the next
block slab in the direction of travel is decoded in the background (one thread, at the
lowest CPU priority: it must not slow the plane being drawn).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import itertools
import math
import os
import queue
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from napari_n5zarr.block_grid import block_ranges, grid, overlap
from napari_n5zarr.errors import N5BlockError, N5StoreError, located
from napari_n5zarr.n5.block_format import block_name
from napari_n5zarr.read.block_cache import BlockCache, block_cache, store_token

if TYPE_CHECKING:
    import zarr

MAX_REGION_BLOCKS = 4096
"""Regions touching more blocks than this are left to zarr (tiny blocks: per-block work dominates)."""

PREFETCH_ENV = "N5ZARR_PREFETCH"
"""Environment variable: ``0`` turns background prefetch of the next z block slab off."""
PREFETCH_MAX_BLOCKS = 1024
"""Largest slab (blocks) prefetched."""
PLANE_MAX_BLOCKS = 1024
"""Largest y/x block slab a remote read requests whole (see :meth:`BlockSource.blocks_for`)."""

OnError = Callable[[str], None]
_MISS = object()
_DROPPED = object()  # a prefetch given up before it started: its waiters fetch the block themselves
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()
_prefetcher: ThreadPoolExecutor | None = None
_inflight: dict[tuple[Any, ...], Future] = {}  # cache key -> result of a prefetch under way
_inflight_lock = threading.Lock()
_unclaimed: dict[tuple[Any, ...], BaseException] = {}  # failure of a block fetched for another read


def prefetch_enabled() -> bool:
    from napari_n5zarr.environment import flag

    return flag(PREFETCH_ENV, True)


def _prefetch_pool() -> ThreadPoolExecutor:
    global _prefetcher
    if _prefetcher is None:
        with _pool_lock:
            if _prefetcher is None:
                _prefetcher = ThreadPoolExecutor(
                    max_workers=1, thread_name_prefix="n5zarr-prefetch", initializer=_lower_priority
                )
    return _prefetcher


def _lower_priority() -> None:
    """Run the calling thread at the lowest CPU priority (Linux: a thread is a task, and
    ``setpriority`` on its id renices that thread only), so a background prefetch yields
    the cores to the reads and the drawing a person is waiting for. Elsewhere a no-op."""
    if not hasattr(os, "setpriority"):
        return
    with contextlib.suppress(OSError):  # not permitted here: prefetch at normal priority
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)


def decode_pool() -> ThreadPoolExecutor:
    """The shared pool that fetches and decodes blocks (one thread per core)."""
    global _pool
    if _pool is None:
        with _pool_lock:
            if _pool is None:
                _pool = ThreadPoolExecutor(
                    max_workers=max(2, os.cpu_count() or 2), thread_name_prefix="n5zarr-decode"
                )
    return _pool


def _map_here_and_on_pool(fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
    """``[fn(x) for x in items]``: the first on the calling thread (it would only wait
    otherwise), the rest on the shared pool. ``fn`` must not raise."""
    if not items:
        return []
    futures = [decode_pool().submit(fn, x) for x in items[1:]]
    return [fn(items[0]), *(f.result() for f in futures)]


def _decode_while_waiting(
    work: queue.SimpleQueue[tuple[int, Any] | None],
    decode: Callable[[tuple[int, Any]], None],
    done: concurrent.futures.Future[Any],
) -> None:
    """On the calling thread, ``decode`` the bodies queued in ``work`` until its end mark
    (``None``; or ``done`` ended without one: its event loop stopped), then those the pool
    has not taken yet."""
    while True:
        try:
            item = work.get(timeout=0.5)
        except queue.Empty:
            if done.done():
                break
            continue
        if item is None:
            break
        decode(item)
    while True:
        try:
            item = work.get_nowait()
        except queue.Empty:
            return
        if item is not None:
            decode(item)


GENERATION_TRIES = 5
"""Reads of a local dataset's blocks tried again when it was replaced meanwhile."""


def folder_generation(folder: str) -> tuple[int, int, int] | None:
    """(device, inode, change time) of ``folder``: another value once it is replaced (a new
    folder renamed into place), None while nothing is there."""
    try:
        st = os.stat(folder)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_ctime_ns)


def _local_generation(store: Any, path: str) -> Callable[[], Any] | None:
    from zarr.storage import LocalStore

    if not isinstance(store, LocalStore):
        return None
    return functools.partial(
        folder_generation, os.path.join(str(store.root), path) if path else str(store.root)
    )


def _is_local(store: Any) -> bool:
    """True for stores whose ``get_sync`` is a plain file or memory read (no event loop)."""
    from zarr.storage import LocalStore, MemoryStore

    return isinstance(store, LocalStore | MemoryStore)


def _short(
    cell: Sequence[int], blocks: Sequence[int], held: Sequence[int], hi: Sequence[int]
) -> bool:
    """The stored block at ``cell`` holds less than its grid cell's part below ``hi``."""
    return any(
        c * b + h < min(e, (c + 1) * b) for c, b, h, e in zip(cell, blocks, held, hi, strict=True)
    )


@dataclass(frozen=True)
class BlockLayout:
    """What :class:`BlockSource` needs of an array, however it was opened (napari order:
    reversed N5)."""

    shape: tuple[int, ...]
    blocks: tuple[int, ...]
    dtype: np.dtype
    fill: Any
    encode_key: Callable[[tuple[int, ...]], str]
    """Block index (N5 order) -> key below ``prefix``."""
    decode_block: Callable[[Any, np.dtype, int, str], np.ndarray]
    """``(stored bytes, dtype, ndim, where) -> block`` (N5 order view), as
    :meth:`N5DefaultCodec.decode_block <napari_n5zarr.n5.codec.N5DefaultCodec.decode_block>`."""
    prefix: str
    """The array's path in its container (``"s0/"``), in block keys and cache keys."""
    container: str
    """Names the container in errors."""
    token: int
    """Cache key part unique to one opening of the container (:func:`store_token`)."""
    get_sync: Callable[[str], Any] | None = None
    """Stored bytes of a key (None: absent) read on the calling thread; None for stores
    read through their event loop (:attr:`store`)."""
    store: Any = None
    """The zarr store, for asynchronous reads (remote stores)."""
    generation: Callable[[], Any] | None = None
    """A local dataset's folder identity now (:func:`folder_generation`); None elsewhere."""


class BlockSource:
    """The decoded blocks of one ``n5_default`` array, in napari order (reversed N5).

    Build with :meth:`for_array` (a zarr array; None when it is not one this path reads:
    other codecs, sharding, irregular grids). :meth:`read` fills a region.
    """

    def __init__(self, layout: BlockLayout, cache: BlockCache | None = None) -> None:
        self.layout = layout
        self.store = layout.store
        self.prefix = layout.prefix
        self.shape = layout.shape
        self.blocks = layout.blocks
        self.ndim = len(self.shape)
        self.dtype = layout.dtype
        self.fill = layout.fill
        self.container = layout.container
        self.synchronous = layout.get_sync is not None
        self.token = layout.token
        self._generation = layout.generation
        self._encode_key = layout.encode_key
        self._decode_block = layout.decode_block
        self._get_sync = layout.get_sync
        self._cache = cache
        self._lock = threading.Lock()
        self._last_z: dict[
            tuple[tuple[int, int], ...], int
        ] = {}  # region (but z) -> last z start read
        self._asked_z: dict[tuple[tuple[int, int], ...], int] = {}  # ... -> last z asked for

    @classmethod
    def for_array(cls, array: zarr.Array, cache: BlockCache | None = None) -> BlockSource | None:
        """The block path of a zarr ``n5_default`` array: its bytes fetched through the
        array's store chain (the N5 Default Store's checks apply), decoded by its codec."""
        from napari_n5zarr.n5.codec import N5DefaultCodec
        from napari_n5zarr.n5.stores import N5DefaultStore, describe_store, store_chain

        try:
            codecs = tuple(getattr(array.metadata, "codecs", ()))  # Zarr v2 arrays have none
            if (
                len(codecs) != 1
                or not isinstance(codecs[0], N5DefaultCodec)
                or array.shards is not None
            ):
                return None
            if (
                getattr(array.metadata.chunk_grid, "chunk_shape", None) is None
            ):  # regular grids only
                return None
            store = array.store_path.store
            path = array.store_path.path.strip("/")
            chain = store_chain(store)
            n5 = next((s for s in chain if isinstance(s, N5DefaultStore)), None)
            fill = array.fill_value
            synchronous = all(hasattr(s, "get_sync") for s in chain) and _is_local(chain[-1])
            layout = BlockLayout(
                shape=tuple(int(s) for s in array.shape)[::-1],
                blocks=tuple(int(b) for b in array.chunks)[::-1],
                dtype=np.dtype(array.dtype),
                fill=fill if fill is not None else 0,
                encode_key=array.metadata.encode_chunk_key,
                decode_block=codecs[0].decode_block,
                prefix=path + "/" if path else "",
                container=n5.container if n5 is not None else describe_store(chain[-1]),
                token=store_token(store),
                get_sync=store.get_sync if synchronous else None,  # type: ignore[attr-defined]
                store=store,
                generation=_local_generation(chain[-1], path),
            )
        except (AttributeError, TypeError, ValueError, NotImplementedError):
            return None
        return cls(layout, cache)

    @property
    def cache(self) -> BlockCache:
        return self._cache if self._cache is not None else block_cache()

    # -- one block -----------------------------------------------------------------
    def key(self, cell: Sequence[int]) -> str:
        """Store key of the block at ``cell`` (napari order)."""
        return self.prefix + self._encode_key(tuple(int(c) for c in cell[::-1]))

    def where(self, key: str) -> str:
        return block_name(key, self.container)

    def decode(self, raw: Any, key: str) -> np.ndarray:
        """The block in ``raw`` (bytes with header), napari order, read-only, in the stored
        (big-endian) byte order: a view of the decompressed bytes, no second pass over the
        block. :meth:`read` swaps the bytes of only what it copies out (a plane of a 64^3
        block is 1/64 of it), which takes a sixth off decoding a block for a new plane.
        Its shape is the header's (reversed): truncated edge blocks stay truncated."""
        where = self.where(key)
        data = (
            raw.as_numpy_array() if hasattr(raw, "as_numpy_array") else np.frombuffer(raw, np.uint8)
        )
        block = self._decode_block(data, self.dtype, self.ndim, where)  # N5 order view
        header = block.shape
        chunk = self.blocks[::-1]
        if any(
            h > c for h, c in zip(header, chunk, strict=True)
        ):  # as the codec refuses it in zarr's path
            raise located(
                N5BlockError(f"header shape {list(header)} exceeds the block size {list(chunk)}"),
                where,
            )
        out = block.T  # the stored bytes are C order here
        if not out.flags.c_contiguous:
            out = np.ascontiguousarray(out)
        out.flags.writeable = False
        return out

    def _load_sync(self, cell: tuple[int, ...]) -> Any:
        """Decoded block, None (absent) or the exception that prevented reading it."""
        key = self.key(cell)
        try:
            raw = self._get_sync(key)  # type: ignore[misc]  # checked: self.synchronous
            return None if raw is None else self.decode(raw, key)
        except Exception as exc:
            return exc

    def _decode_or_error(self, item: tuple[tuple[int, ...], Any]) -> Any:
        cell, raw = item
        if raw is None or isinstance(raw, BaseException):
            return raw
        try:
            return self.decode(raw, self.key(cell))
        except Exception as exc:
            return exc

    def _load_many(self, cells: list[tuple[int, ...]]) -> list[Any]:
        if self.synchronous:
            return _map_here_and_on_pool(self._load_sync, cells)
        from zarr.buffer import default_buffer_prototype

        from napari_n5zarr.zarr_internals import event_loop

        proto = default_buffer_prototype()
        pool = decode_pool()
        work: queue.SimpleQueue[tuple[int, Any] | None] = queue.SimpleQueue()
        results: list[Future] = [Future() for _ in cells]

        def decode_one(item: tuple[int, Any]) -> None:
            i, raw = item
            results[i].set_result(self._decode_or_error((cells[i], raw)))

        def decode_next() -> None:  # a pool thread takes the next body, if the caller has not
            with contextlib.suppress(queue.Empty):
                item = work.get_nowait()
                if item is not None:
                    decode_one(item)
                else:
                    work.put(None)  # the end mark is the caller's

        async def fetch_one(i: int, cell: tuple[int, ...]) -> None:
            try:
                raw = await self.store.get(self.key(cell), proto)
            except Exception as exc:
                results[i].set_result(exc)
                return
            if raw is None:
                results[i].set_result(None)
                return
            # decoded as soon as it arrives, on the pool or by the waiting caller; the loop
            # does not wait for it (a wake-up of the loop per block would cost it time the
            # other downloads need)
            work.put((i, raw))
            pool.submit(decode_next)

        async def fetch_all() -> None:  # one event-loop round trip, every request in flight
            try:
                await asyncio.gather(*(fetch_one(i, c) for i, c in enumerate(cells)))
            finally:
                work.put(None)

        try:
            done = asyncio.run_coroutine_threadsafe(fetch_all(), event_loop())
        except Exception as exc:
            return [exc] * len(cells)
        _decode_while_waiting(work, decode_one, done)  # the caller decodes too
        try:
            done.result()
        except Exception as exc:
            for future in results:
                if not future.done():
                    future.set_result(exc)
        return [future.result() for future in results]

    def blocks_for(
        self, cells: Sequence[tuple[int, ...]], on_error: OnError
    ) -> dict[tuple[int, ...], np.ndarray | None]:
        """Decoded block (or None: absent or unreadable) of every cell (see :meth:`_blocks_for`),
        all from one version of the dataset: a local dataset replaced while its blocks are
        read (an export's ``overwrite=True`` swap) is read again, never mixed. The folder's
        identity (device, inode, change time) is part of the cache key and is checked before
        and after the reads; blocks cached for a version whose folder is gone are never
        found again."""
        if self._generation is None:
            return self._blocks_for(cells, on_error, self.token)
        for _ in range(GENERATION_TRIES):
            before = self._generation()
            if before is not None:
                errors: list[str] = []
                found = self._blocks_for(cells, errors.append, (self.token, before))
                if self._generation() == before:
                    for message in errors:
                        on_error(message)
                    return found
            time.sleep(0.01)  # the folder is being swapped: let the rename finish
        raise N5StoreError(
            f"{self.container}/{self.prefix.rstrip('/')}: replaced again and again while being read; nothing returned (read again)"
        )

    def forget(self, cells: Iterable[Sequence[int]]) -> None:
        """Drop ``cells`` from the block cache (they were rewritten: read them afresh)."""
        cache, token = self.cache, self.cache_token()
        for cell in cells:
            cache.discard((token, self.prefix, tuple(int(c) for c in cell)))

    def cache_token(self) -> Any:
        """The cache key part for blocks read now (see :meth:`blocks_for`)."""
        return self.token if self._generation is None else (self.token, self._generation())

    def _blocks_for(
        self, cells: Sequence[tuple[int, ...]], on_error: OnError, token: Any
    ) -> dict[tuple[int, ...], np.ndarray | None]:
        """Decoded block (or None: absent or unreadable) of every cell; from the cache where
        it can, the rest fetched and decoded concurrently and cached. Over the network, the
        missing blocks of the whole planes (y/x block slabs) holding ``cells`` are requested
        too, all at once: the other dask tasks of the same plane then find their blocks
        cached or in flight and wait for them instead of requesting them again."""
        cache = self.cache
        found: dict[tuple[int, ...], np.ndarray | None] = {}
        missing = []
        for cell in cells:
            value = cache.get((token, self.prefix, cell), _MISS)
            if value is _MISS:
                missing.append(cell)
            else:
                found[cell] = value
        if not missing:
            return found
        with _inflight_lock:  # blocks another read is fetching right now: wait for it, not again
            waiting = {
                c: _inflight[k] for c in missing if (k := (token, self.prefix, c)) in _inflight
            }
            failed = {
                c: _unclaimed.pop(k)
                for c in missing
                if (k := (token, self.prefix, c)) in _unclaimed
            }
            own = [c for c in missing if c not in waiting and c not in failed]
            load = own
            if own and not self.synchronous:
                load = own + self._rest_of_planes(own, cache, token)
                for cell in load:
                    _inflight[(token, self.prefix, cell)] = Future()
        results: dict[tuple[int, ...], Any] = dict(
            failed
        )  # a failure fetched for us: reported once, not fetched again
        if load:
            results.update(
                zip(own, self._load_and_release(load, len(own), token)[: len(own)], strict=True)
            )
        for cell, future in waiting.items():
            results[cell] = future.result()
            if isinstance(results[cell], BaseException):
                with _inflight_lock:  # claimed here: a later read tries the block again
                    _unclaimed.pop((token, self.prefix, cell), None)
        dropped = [cell for cell, value in results.items() if value is _DROPPED]
        if dropped:  # a prefetch given up (the user moved away) before it fetched them
            results.update(
                zip(dropped, self._load_and_release(dropped, len(dropped), token), strict=True)
            )
        for cell in missing:
            value = results[cell]
            if isinstance(value, BaseException):
                on_error(self._message(cell, value))
                found[cell] = None  # fill value, not cached: a later read tries again
            else:
                found[cell] = value
        return found

    def _rest_of_planes(
        self, cells: Sequence[tuple[int, ...]], cache: BlockCache, token: Any
    ) -> list[tuple[int, ...]]:
        """The blocks besides ``cells`` of the y/x block slabs holding them that are neither
        cached nor in flight (call with ``_inflight_lock`` held); none when those slabs
        exceed :data:`PLANE_MAX_BLOCKS` or a quarter of the cache."""
        lead = sorted({c[:-2] for c in cells})
        yx = grid(self.shape[-2:], self.blocks[-2:])
        plane = math.prod(yx)
        total = plane * len(lead)
        if (
            total > PLANE_MAX_BLOCKS
            or total * math.prod(self.blocks) * self.dtype.itemsize > cache.max_bytes // 4
        ):
            return []
        asked = set(cells)
        extra = []
        for head in lead:
            for rest in itertools.product(*(range(g) for g in yx)):
                cell = head + rest
                key = (token, self.prefix, cell)
                if cell not in asked and key not in _inflight and key not in cache:
                    extra.append(cell)
        return extra

    def _load_and_release(
        self, cells: list[tuple[int, ...]], asked: int | None = None, token: Any = None
    ) -> list[Any]:
        """:meth:`_load_many`, caching what decoded, then hand every result to the readers
        waiting for it (remote reads register their blocks as in flight). Failures of the
        cells past the first ``asked`` (fetched for other reads) that nobody waited for
        are kept for the first read that asks for them (so a failing block is requested,
        and reported, once per attempt rather than once per dask task)."""
        token = self.token if token is None else token
        try:
            values = self._load_many(cells)
        except BaseException as exc:
            values = [exc] * len(cells)
        for i, (cell, value) in enumerate(zip(cells, values, strict=True)):
            key = (token, self.prefix, cell)
            if not isinstance(value, BaseException):
                self.cache.put(key, value)
            with _inflight_lock:
                future = _inflight.pop(key, None)
                if (
                    asked is not None
                    and i >= asked
                    and isinstance(value, BaseException)
                    and future is not None
                ):
                    if len(_unclaimed) > 4096:
                        _unclaimed.clear()
                    _unclaimed[key] = value
            if future is not None:
                future.set_result(value)
        return values

    # -- prefetch ------------------------------------------------------------------
    def _maybe_prefetch(self, selection: Sequence[slice], cells: Sequence[tuple[int, ...]]) -> None:
        """While a person scrolls through z (axis -3), decode the next block slab in the
        direction of travel in the background (one thread: the foreground keeps the rest).
        Scrolling is a step of less than a block from the last read of the same region; a
        jump prefetches nothing (the frame it waits for would share the cores with it).
        Only for reads of at most :data:`PREFETCH_MAX_BLOCKS` blocks per slab, and slabs of
        at most a quarter of the cache."""
        if self.ndim < 3 or not prefetch_enabled():
            return
        z = self.ndim - 3
        where = tuple((s.start, s.stop) for i, s in enumerate(selection) if i != z)
        start = selection[z].start
        with self._lock:
            last = self._last_z.get(where)
            if len(self._last_z) > 1024:
                self._last_z.clear()
            self._last_z[where] = start
        b = self.blocks[z]
        if last is None or last == start or abs(start - last) >= b or not cells:
            return  # not scrolling: first read, same plane, or a jump (the next step prefetches)
        target = (selection[z].stop - 1) // b + 1 if start > last else start // b - 1
        if not 0 <= target < -(-self.shape[z] // b):
            return
        plane = sorted({c[:z] + c[z + 1 :] for c in cells})
        cache = self.cache
        if (
            len(plane) > PREFETCH_MAX_BLOCKS
            or len(plane) * math.prod(self.blocks) * self.dtype.itemsize > cache.max_bytes // 4
        ):
            return
        todo = []
        token = self.cache_token()
        with _inflight_lock:
            for rest in plane:
                cell = (*rest[:z], target, *rest[z:])
                key = (token, self.prefix, cell)
                if key in _inflight or key in cache:
                    continue
                _inflight[key] = Future()
                todo.append(cell)
        if todo:
            _prefetch_pool().submit(self._prefetch, todo, token, (where, target))

    def _still_wanted(self, where: tuple[tuple[int, int], ...], target: int) -> bool:
        """The last read of the region ``where`` is still within a block slab of ``target``
        (a far jump since the prefetch was queued makes it useless: the person waits for
        another frame, and the prefetch would take the cores and connections it needs)."""
        z = self.ndim - 3
        with self._lock:
            last = self._asked_z.get(where)
        return last is not None and abs(last // self.blocks[z] - target) <= 1

    def _note_asked(self, selection: Sequence[slice]) -> None:
        """Remember the z a region is read at, as the read starts (a queued prefetch that
        the person has jumped away from is given up while the jump's own blocks load)."""
        if self.ndim < 3:
            return
        z = self.ndim - 3
        where = tuple((s.start, s.stop) for i, s in enumerate(selection) if i != z)
        with self._lock:
            if len(self._asked_z) > 1024:
                self._asked_z.clear()
            self._asked_z[where] = selection[z].start

    def _drop(self, cells: list[tuple[int, ...]], token: Any) -> None:
        """Release the waiters of a prefetch that will not run: they fetch the blocks."""
        for cell in cells:
            with _inflight_lock:
                future = _inflight.pop((token, self.prefix, cell), None)
            if future is not None:
                future.set_result(_DROPPED)

    def _prefetch(
        self,
        cells: list[tuple[int, ...]],
        token: Any,
        wanted: tuple[tuple[tuple[int, int], ...], int] | None = None,
    ) -> None:
        """Decode ``cells`` into the cache (local stores one after another, remote ones
        requested all at once), releasing their waiters. ``wanted`` (region, target slab):
        given up before it starts when the person has jumped away meanwhile."""
        if wanted is not None and not self._still_wanted(*wanted):
            self._drop(cells, token)
            return
        if not self.synchronous:
            self._load_and_release(cells, None, token)
            return
        for i, cell in enumerate(cells):
            if wanted is not None and i and not self._still_wanted(*wanted):
                self._drop(cells[i:], token)  # jumped away meanwhile: the rest is not needed
                return
            key = (token, self.prefix, cell)
            try:
                value = self._load_sync(cell)
            except BaseException as exc:
                value = exc
            if not isinstance(value, BaseException):
                self.cache.put(key, value)
            with _inflight_lock:
                future = _inflight.pop(key, None)
            if future is not None:
                future.set_result(value)

    def _message(self, cell: tuple[int, ...], exc: BaseException) -> str:
        key = self.key(cell)
        message = str(exc)
        return message if key in message else f"{self.where(key)}: {message or type(exc).__name__}"

    # -- regions -------------------------------------------------------------------
    def cells(self, selection: Sequence[slice]) -> list[tuple[int, ...]]:
        """Block indices (napari order) touched by ``selection`` (unit-step slices in range)."""
        grids = block_ranges([s.start for s in selection], [s.stop for s in selection], self.blocks)
        return list(itertools.product(*grids))

    def read(self, selection: Sequence[slice], on_error: OnError) -> np.ndarray:
        """The region ``selection`` (napari order, unit-step slices within the shape) as a
        new array: absent and unreadable blocks, and the part of a truncated edge block
        beyond its header, read as the fill value (unreadable ones go to ``on_error``)."""
        out_shape = tuple(max(0, s.stop - s.start) for s in selection)
        cells = self.cells(selection)
        self._note_asked(selection)
        blocks = self.blocks_for(cells, on_error) if cells else {}
        copies: list[tuple[np.ndarray, tuple[slice, ...], tuple[slice, ...]]] = []
        complete = True
        lo, hi = [s.start for s in selection], [s.stop for s in selection]
        # where each full-size block meets the region, per axis once (cells are their product)
        per_axis = [
            [overlap((i,), (b,), (a,), (e,)) for i in r]
            for r, b, a, e in zip(
                block_ranges(lo, hi, self.blocks), self.blocks, lo, hi, strict=True
            )
        ]
        inners = itertools.product(*([p[0][0] for p in axis] for axis in per_axis))
        outers = itertools.product(*([p[1][0] for p in axis] for axis in per_axis))
        for cell, inner, outer in zip(cells, inners, outers, strict=True):
            block = blocks[cell]
            if block is None:
                complete = False
                continue
            if block.shape == self.blocks:
                copies.append((block, inner, outer))
                continue
            if _short(cell, self.blocks, block.shape, hi):
                complete = False  # a truncated edge block: the data ends at its header's extent
            copies.append((block, *overlap(cell, self.blocks, lo, hi, block.shape)))
        out = (
            np.empty(out_shape, self.dtype)
            if complete
            else np.full(out_shape, self.fill, self.dtype)
        )
        for block, source, target in copies:
            out[target] = block[source]
        self._maybe_prefetch(selection, cells)
        return out
