"""One N5 dataset's blocks in a zarr store, as a numpy-like array in napari's order.

Used by :mod:`napari_n5zarr.write.export.exporter` as a ``dask.array.store`` target (one block per
``__setitem__``) and, for the next pyramid level, as a ``dask.array.from_array`` source.
It needs no metadata in the store: export publishes metadata only after every block.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from zarr.abc.store import Store
from zarr.buffer import default_buffer_prototype
from zarr.storage import LocalStore

from napari_n5zarr.block_grid import block_ranges, grid, overlap
from napari_n5zarr.errors import ExportCancelled
from napari_n5zarr.n5.codec import N5DefaultCodec, stored_values
from napari_n5zarr.n5.stores import describe_store
from napari_n5zarr.zarr_internals import sync

Boundary = Literal["truncate", "pad"]


def store_get(store: Store, key: str) -> bytes | None:
    """The value at ``key`` or None (sync; local stores skip the event loop)."""
    if hasattr(store, "get_sync"):
        buf = store.get_sync(key, prototype=default_buffer_prototype())
    else:
        buf = sync(store.get(key, default_buffer_prototype()))
    return None if buf is None else buf.to_bytes()


def store_set(store: Store, key: str, value: bytes) -> None:
    """Store ``value`` at ``key`` (sync). Local folders are written directly: zarr's
    LocalStore writes a temporary file and renames it (~4x slower per block), which
    buys nothing here since export publishes metadata only after every block."""
    if isinstance(store, LocalStore):
        path = store.root / key
        try:
            path.write_bytes(value)
        except FileNotFoundError:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(value)
        return
    buf = default_buffer_prototype().buffer.from_bytes(value)
    if hasattr(store, "set_sync"):
        store.set_sync(key, buf)
    else:
        sync(store.set(key, buf))


def _any_nonzero(values: np.ndarray) -> bool:
    """``values.any()`` on contiguous values; integers as raw bytes (any byte order)."""
    if values.dtype.kind in "iub":  # OR of the bits: one pass, ~3x faster than any()
        return bool(np.bitwise_or.reduce(values.reshape(-1).view(f"u{values.dtype.itemsize}")))
    return bool(values.any())  # floats: -0.0 is zero


class Progress:
    """Counts finished blocks (from any thread) and reports ``callback(done, total)`` at
    most every ``interval`` seconds, and always at the end."""

    def __init__(
        self, total: int, callback: Callable[[int, int], Any] | None, interval: float = 0.1
    ) -> None:
        import threading

        self.total, self.done, self.callback, self.interval = total, 0, callback, interval
        self._lock = threading.Lock()
        self._last = 0.0

    def add(self, n: int = 1) -> None:
        with self._lock:
            self.done += n
            now = time.monotonic()
            report = self.done >= self.total or now - self._last >= self.interval
            if report:
                self._last = now
        if report and self.callback is not None:
            self.callback(self.done, self.total)


class WriteGate:
    """Lets block writes through until :meth:`close`, which also waits for writes in flight:
    a failed export removes its partial output only after the last of its threads has
    written (dask returns the first error while other threads still run).

    Pickled (a dask.distributed task), it becomes that process's gate of the same export
    (:func:`process_gate`, by :attr:`token`): :func:`shut_gate`, run on every worker, closes
    them, so a failed export on a cluster stops the workers' writes before it cleans up."""

    def __init__(self, token: str | None = None) -> None:
        import secrets
        import threading

        self.token = token or secrets.token_hex(8)
        self._cond = threading.Condition()
        self._active = 0
        self._closed = False

    def __reduce__(self) -> tuple[Any, ...]:
        return (process_gate, (self.token,))

    def __enter__(self) -> WriteGate:
        with self._cond:
            if self._closed:
                raise ExportCancelled("export stopped")
            self._active += 1
        return self

    def __exit__(self, *exc: object) -> None:
        with self._cond:
            self._active -= 1
            self._cond.notify_all()

    def shut(self) -> int:
        """No write starts after this; returns how many are still in flight."""
        with self._cond:
            self._closed = True
            return self._active

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.wait_for(lambda: self._active == 0)


_gates: weakref.WeakValueDictionary[str, WriteGate] = weakref.WeakValueDictionary()
_shut_tokens: set[str] = set()
_gates_lock = threading.Lock()


def process_gate(token: str) -> WriteGate:
    """This process's gate of the export ``token`` (closed if :func:`shut_gate` ran here)."""
    with _gates_lock:
        gate = _gates.get(token)
        if gate is None:
            gate = _gates[token] = WriteGate(token)
            if token in _shut_tokens:
                gate.shut()
        return gate


def shut_gate(token: str) -> int:
    """Close this process's gate of the export ``token`` (now and for tasks unpickled
    later); returns its writes still in flight. Run on each worker by the exporting client."""
    with _gates_lock:
        _shut_tokens.add(token)
        gate = _gates.get(token)
    return gate.shut() if gate is not None else 0


@dataclass
class N5Blocks:
    """Blocks of the dataset at ``prefix`` (``"s0/"``) of ``store``, napari order.

    ``shape``/``block`` are in napari order; keys and headers are in N5 order.
    """

    store: Store
    prefix: str
    shape: tuple[int, ...]
    block: tuple[int, ...]
    dtype: np.dtype
    codec: N5DefaultCodec
    boundary: Boundary = "truncate"
    write_empty_blocks: bool = False
    progress: Progress | None = field(default=None, repr=False)
    cancel: Callable[[], bool] | None = field(default=None, repr=False)
    gate: WriteGate | None = field(default=None, repr=False)
    keep_stored: bool = field(default=False, repr=False)
    """Keep the stored values of each thread's last block written, for :meth:`last_stored`."""
    _last: dict[int, np.ndarray] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def grid(self) -> tuple[int, ...]:
        return grid(self.shape, self.block)

    @property
    def nblocks(self) -> int:
        return math.prod(self.grid)

    def key(self, index: tuple[int, ...]) -> str:
        """Store key of the block at grid ``index`` (napari order): N5 path order reversed."""
        return self.prefix + "/".join(str(i) for i in reversed(index))

    def __dask_tokenize__(self) -> tuple:
        return (
            type(self).__name__,
            str(self.store),
            self.prefix,
            self.shape,
            self.block,
            str(self.dtype),
        )

    def __getstate__(self) -> dict[str, Any]:  # progress/cancel live in the calling process
        return {
            **self.__dict__,
            "progress": None,
            "cancel": None,
            "_last": {},
        }  # the gate: see WriteGate

    # -- write: one block per call (dask chunks == blocks) -----------------------------
    def _check_cancel(self) -> None:
        if self.cancel is not None and self.cancel():
            raise ExportCancelled("export cancelled")

    def __setitem__(self, key: tuple[slice, ...], value: np.ndarray) -> None:
        index, payload = self.stored(key, value)
        self.put(index, payload)
        if self.keep_stored:
            self._last[threading.get_ident()] = payload

    def last_stored(self) -> np.ndarray:
        """The stored values of the block this thread wrote last (``keep_stored``), once:
        C order and likely still in cache, for writers that use them next (downsampling)."""
        return self._last.pop(threading.get_ident())

    def stored(
        self, key: tuple[slice, ...], value: np.ndarray
    ) -> tuple[tuple[int, ...], np.ndarray]:
        """Grid index and stored values (:func:`stored_values`, napari order, big endian,
        C order, padded for ``boundary="pad"``) of the one block ``value`` at ``key``."""
        self._check_cancel()
        start = tuple(s.start or 0 for s in key)
        index = tuple(st // b for st, b in zip(start, self.block, strict=True))
        expected = tuple(
            min(b, n - st) for st, b, n in zip(start, self.block, self.shape, strict=True)
        )
        if any(st % b for st, b in zip(start, self.block, strict=True)) or value.shape != expected:
            raise ValueError(f"{self.prefix}: write {key} is not one block of {self.block}")
        value = np.asarray(value, dtype=self.dtype)
        if self.boundary == "pad" and value.shape != self.block:  # zeros added: empty stays empty
            value = np.pad(
                value, [(0, b - n) for n, b in zip(value.shape, self.block, strict=True)]
            )
        return index, stored_values(value.T)  # the one copy (swap + transpose) of the block

    def put(self, index: tuple[int, ...], payload: np.ndarray) -> None:
        """Encode and write the block at grid ``index`` from its :meth:`stored` values."""
        if self.write_empty_blocks or _any_nonzero(payload):
            encoded = self.codec.encode_payload(payload.shape[::-1], payload)
            with self.gate or contextlib.nullcontext():
                self._check_cancel()  # encoding a big block takes a while: look again
                store_set(self.store, self.key(index), encoded)
        if self.progress is not None:
            self.progress.add()

    # -- read: any region (missing blocks read as 0, truncated or padded blocks) --------
    def __getitem__(self, key: tuple[slice, ...]) -> np.ndarray:
        key = key if isinstance(key, tuple) else (key,)
        key = key + (slice(None),) * (self.ndim - len(key))
        region = []
        for k, n in zip(key, self.shape, strict=True):
            if not isinstance(k, slice):
                raise TypeError("N5Blocks supports slices only")
            start, stop, step = k.indices(n)
            if step != 1:
                raise ValueError("N5Blocks supports step 1 only")
            region.append((start, max(start, stop)))
        out = np.zeros([b - a for a, b in region], dtype=self.dtype)
        lo, hi = [a for a, _ in region], [e for _, e in region]
        for index in itertools.product(*block_ranges(lo, hi, self.block)):
            self._check_cancel()  # the next pyramid level reads many blocks per task
            block_key = self.key(index)
            raw = store_get(self.store, block_key)
            if raw is None:
                continue
            where = f"N5 block {block_key} in {describe_store(self.store)}"
            data = self.codec.decode_block(raw, self.dtype, self.ndim, where=where).T
            src, dst = overlap(
                index, self.block, lo, hi, data.shape
            )  # a truncated block holds less than its grid cell
            if any(s.stop <= s.start for s in src):
                continue
            out[dst] = data[src]
        return out
