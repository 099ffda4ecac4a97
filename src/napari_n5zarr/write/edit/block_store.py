"""The one seam between the proofreading save and a format: how a level's stored blocks are
named, decoded and encoded. A *block* is the unit edits are tracked in (an N5 block, a Zarr
v3 chunk, an inner chunk of a shard); a *stored object* is the file a save replaces
atomically (the block itself, or the whole shard holding it): :class:`N5Blocks`,
:class:`ZarrBlocks`. Everything else (merging into the block on disk, the pyramid, the
journal, the locks, :class:`~napari_n5zarr.write.dataset_files.DatasetFolder` for every
byte read and written) is the same for all formats and lives in ``save.py`` / ``journal.py``.

All shapes and indices are napari order (N5 order reversed; Zarr v3 arrays are already C
order)."""

from __future__ import annotations

import itertools
import math
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from napari_n5zarr import block_grid
from napari_n5zarr.errors import N5BlockError
from napari_n5zarr.n5.block_format import parse_header

if TYPE_CHECKING:
    import zarr

    from napari_n5zarr.n5.codec import N5DefaultCodec
    from napari_n5zarr.read.fetch import BlockSource

Index = tuple[int, ...]
RawOf = Callable[[Index], "bytes | None"]


Changes = Mapping[Index, tuple[np.ndarray, "np.ndarray | None"]]
"""Blocks of one stored object -> (new values inside the array, stored values or None)."""


class BlockStore:
    """What the save needs of one level's stored blocks (subclasses per format)."""

    shape: tuple[int, ...]
    block: tuple[int, ...]
    """The unit edits are tracked in (an inner chunk when the array is sharded)."""
    stored: tuple[int, ...]
    """Pixels per stored object, the unit a save replaces atomically (a shard, else ``block``)."""
    dtype: np.dtype
    fill: Any = 0
    """What a missing block reads as."""
    stored_cap: int
    """The most bytes a stored object may take (a bigger file was not written as one)."""
    shares_objects = False
    """Several blocks share one stored object (sharding)."""
    source: BlockSource | None = None
    """The read wing's cached block path (N5), whose decodings a save invalidates."""

    def stored_key(self, unit: Index) -> str:
        """The key of the stored object at ``unit`` (its grid), relative to the level's folder."""
        raise NotImplementedError

    def key(self, index: Index) -> str:
        """The key of the stored object holding block ``index``."""
        return self.stored_key(
            tuple(i * b // s for i, b, s in zip(index, self.block, self.stored, strict=True))
        )

    def decode(self, index: Index, raw: bytes) -> np.ndarray:
        """Block ``index`` of the stored object ``raw`` (its stored shape; writable)."""
        raise NotImplementedError

    def encode(self, changes: Changes, raw: bytes | None, convention: str) -> bytes:
        """The stored object ``raw`` (None: missing) with the blocks ``changes`` replaced."""
        raise NotImplementedError

    def edge_convention(self, raw_of: RawOf) -> str:
        """``"pad"`` or ``"truncate"``: how new edge blocks are stored."""
        return "pad"

    def read(self, lo: Sequence[int], hi: Sequence[int]) -> np.ndarray:
        """Pixels ``[lo, hi)`` for display (not under a save's lock)."""
        raise NotImplementedError

    def index_of(self, name: str) -> Index | None:
        """The stored object's grid index whose key is ``name`` exactly, else None (journal checks)."""
        digits = re.findall(r"[0-9]+", name)
        if len(digits) != len(self.shape) or not all(d.isascii() for d in digits):
            return None
        grid = block_grid.grid(self.shape, self.stored)
        for order in (digits, digits[::-1]):
            unit = tuple(int(d) for d in order)
            if (
                all(i < g for i, g in zip(unit, grid, strict=True))
                and self.stored_key(unit) == name
            ):
                return unit
        return None


class N5Blocks(BlockStore):
    """N5 blocks (header + compressed payload) of an ``n5_default`` array."""

    def __init__(self, source: BlockSource, codec: N5DefaultCodec, stored_cap: int) -> None:
        self.source = source
        self.codec = codec
        self.shape, self.block, self.dtype = source.shape, source.blocks, source.dtype
        self.stored = self.block
        self.stored_cap = stored_cap

    def stored_key(self, unit: Index) -> str:
        return self.source.layout.encode_key(tuple(int(i) for i in reversed(unit)))  # type: ignore[union-attr]

    def decode(self, index: Index, raw: bytes) -> np.ndarray:
        assert self.source is not None
        return np.array(self.source.decode(raw, self.source.key(index)), dtype=self.dtype)

    def encode(self, changes: Changes, raw: bytes | None, convention: str) -> bytes:
        """An existing block keeps its header shape and whatever its padding holds; a short
        one grows to the array's edge; a new one follows ``convention``."""
        ((index, (values, stored)),) = changes.items()  # one block per stored object
        inside = tuple(s.stop - s.start for s in block_grid.bounds(index, self.block, self.shape))
        if stored is None:
            full = np.zeros(self.block if convention == "pad" else inside, dtype=self.dtype)
        elif any(s < n for s, n in zip(stored.shape, inside, strict=True)):
            full = np.zeros(
                [max(s, n) for s, n in zip(stored.shape, inside, strict=True)], dtype=self.dtype
            )
            full[tuple(slice(0, s) for s in stored.shape)] = stored
        else:
            full = stored
        full[tuple(slice(0, n) for n in inside)] = values
        return bytes(self.codec.encode_block(full.T))

    def edge_convention(self, raw_of: RawOf, looked_at: int = 64) -> str:
        """``"pad"`` when the edge blocks are stored at the full block shape (the corner
        block, else the first of up to ``looked_at`` edge blocks found), else ``"truncate"``
        (n5-java's way, and the answer when there is no edge block to look at)."""
        grid = block_grid.grid(self.shape, self.block)
        edges = [a for a, (n, b) in enumerate(zip(self.shape, self.block, strict=True)) if n % b]
        if not edges:
            return "truncate"
        corner = tuple(g - 1 for g in grid)
        candidates = itertools.chain(
            [corner],
            *(
                itertools.product(*(range(g) if i != a else [g - 1] for i, g in enumerate(grid)))
                for a in edges
            ),
        )
        for index in itertools.islice(candidates, looked_at):
            raw = raw_of(index)
            if raw is None:
                continue
            try:
                header = parse_header(raw[: 4 + 4 * len(self.shape)])
            except ValueError:
                continue
            return "pad" if tuple(header.shape)[::-1] == self.block else "truncate"
        return "truncate"

    def read(self, lo: Sequence[int], hi: Sequence[int]) -> np.ndarray:
        assert self.source is not None
        errors: list[str] = []
        out = self.source.read(
            tuple(slice(a, b) for a, b in zip(lo, hi, strict=True)), errors.append
        )
        if errors:
            raise N5BlockError(errors[0])
        return out


class ZarrBlocks(BlockStore):
    """The chunks of a Zarr v3 array (blocks) and the chunks or whole shards that hold them
    (stored objects), decoded and encoded by zarr-python's own codec pipeline: the array's
    metadata is opened again over an in-memory store holding only the one stored object a
    call works on, and plain zarr array reads and writes do the rest. A sharded write thereby
    goes through zarr's ``sharding_indexed`` codec (its partial-shard path: only the changed
    inner chunks are encoded, the others keep their bytes) and the save gets back the whole
    new shard, which it replaces atomically through the journal like any block. No sharding
    or codec code is written here by hand, and nothing here touches the disk."""

    def __init__(self, array: zarr.Array) -> None:
        import zarr
        from zarr.buffer import default_buffer_prototype
        from zarr.storage import MemoryStore

        meta: Any = array.metadata
        self.display = array
        self.shape = tuple(int(s) for s in array.shape)
        self.block = tuple(int(c) for c in array.chunks)
        self.stored = tuple(int(c) for c in (array.shards or array.chunks))
        self.shares_objects = self.stored != self.block
        self.dtype = np.dtype(array.dtype)
        self.fill = array.fill_value if array.fill_value is not None else 0
        self._encode_key: Callable[[tuple[int, ...]], str] = meta.encode_chunk_key
        inner = math.prod(s // b for s, b in zip(self.stored, self.block, strict=True))
        self.stored_cap = 2 * math.prod(self.stored) * self.dtype.itemsize + 16 * inner + 2**20
        self._buffer = default_buffer_prototype().buffer
        self._meta = meta.to_buffer_dict(default_buffer_prototype())
        self._mem: dict[str, Any] = dict(self._meta)
        self._lock = threading.Lock()
        self._current: tuple[str, bytes | None] | None = None
        # write_empty_chunks: a chunk the save writes is always stored, so a staged object is
        # never "deleted" (every journal entry has new bytes to put in place).
        self._array = zarr.open_array(
            MemoryStore(self._mem), mode="r+", config={"write_empty_chunks": True}
        )

    @classmethod
    def for_array(cls, array: zarr.Array) -> ZarrBlocks | None:
        """A Zarr v3 array on a regular grid (any codecs zarr-python encodes), else None."""
        meta: Any = getattr(array, "metadata", None)
        if getattr(meta, "zarr_format", None) != 3:
            return None
        if getattr(meta.chunk_grid, "chunk_shape", None) is None:
            return None
        if any(type(c).__name__ == "N5DefaultCodec" for c in meta.codecs):
            return None
        return cls(array)

    def stored_key(self, unit: Index) -> str:
        return self._encode_key(tuple(int(i) for i in unit))

    def _bounds(self, index: Index) -> tuple[slice, ...]:
        return block_grid.bounds(index, self.block, self.shape)

    def _holding(self, key: str, raw: bytes | None) -> None:
        """The in-memory store: the metadata and ``raw`` at ``key`` (kept while the next call
        decodes the same stored object: a shard's inner chunks one after another)."""
        if self._current is not None and self._current[0] == key and self._current[1] is raw:
            return
        self._mem.clear()
        self._mem.update(self._meta)
        if raw is not None:
            self._mem[key] = self._buffer.from_bytes(raw)
        self._current = (key, raw)

    def decode(self, index: Index, raw: bytes) -> np.ndarray:
        key = self.key(index)
        with self._lock:
            self._holding(key, raw)
            try:
                return np.array(self._array[self._bounds(index)], dtype=self.dtype)
            except Exception as e:  # any codec failure: name the stored object
                raise N5BlockError(f"{key}: cannot be decoded ({e})") from e

    def encode(self, changes: Changes, raw: bytes | None, convention: str) -> bytes:
        """Each changed chunk written into the stored object (zarr pads edge chunks)."""
        keys = {self.key(index) for index in changes}
        if len(keys) != 1:
            raise ValueError(f"blocks of several stored objects at once: {sorted(keys)}")
        (key,) = keys
        with self._lock:
            self._holding(key, raw)
            self._current = None  # the store is about to hold the new object
            for index, (values, _) in sorted(changes.items()):
                self._array[self._bounds(index)] = values
            out = self._mem.get(key)
        if out is None:  # cannot happen with write_empty_chunks; never stage nothing
            raise N5BlockError(f"{key}: zarr wrote no bytes")
        return bytes(out.to_bytes())

    def read(self, lo: Sequence[int], hi: Sequence[int]) -> np.ndarray:
        return np.asarray(
            self.display[tuple(slice(a, b) for a, b in zip(lo, hi, strict=True))], dtype=self.dtype
        )
