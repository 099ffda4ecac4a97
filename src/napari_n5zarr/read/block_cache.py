"""A bounded, thread-safe LRU cache of decoded storage blocks, shared by every level and layer.

Scrolling through z re-reads the same blocks plane after plane (a 64^3 block holds 64
planes); with this cache each block is fetched and decoded once. Entries are keyed by
``(store token, array path, block index)``; the store token is unique per store object
(never reused, unlike ``id()``), so a container opened again (perhaps rewritten in between)
never sees blocks cached for an earlier opening.

Size: :data:`ENV_VAR` (bytes; ``0`` turns caching off), else ``min(1 GiB, RAM / 8)``;
change it at run time with :func:`set_cache_bytes`.
"""

from __future__ import annotations

import itertools
import os
import sys
import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Any, NamedTuple

ENV_VAR = "N5ZARR_CACHE_BYTES"
"""Environment variable: the cache's size in bytes (``0``: no caching)."""
DEFAULT_MAX_BYTES = 2**30
"""Upper bound of the default size (the default is also at most 1/8 of the RAM)."""
ABSENT_COST = 64
"""Bytes charged for remembering that a block does not exist (fill value)."""
ENTRY_OVERHEAD = 200
"""Bytes charged per entry beyond its key and value: the LRU's link and table slot, the
(value, cost) pair. With the key's and the value's objects counted too (see
:func:`entry_cost`), a cache of 1-byte blocks holds what its size says, not 500 times more."""


def _object_chain_size(value: Any) -> int:
    """The bytes ``value`` keeps alive: each object of its view chain (an ndarray's header,
    the array or bytes object that owns the data) counted once."""
    size, obj, seen = 0, value, 0
    while obj is not None and seen < 8:
        size += sys.getsizeof(obj)  # an ndarray counts its data only if it owns it; bytes always
        obj = obj.obj if isinstance(obj, memoryview) else getattr(obj, "base", None)
        seen += 1
    return size


def entry_cost(key: Hashable, value: Any) -> int:
    """Bytes one cache entry holds: the block's data and objects, its key, the LRU's share."""
    key_size = sys.getsizeof(key) + (
        sum(sys.getsizeof(k) for k in key) if isinstance(key, tuple) else 0
    )
    if value is None:
        return ABSENT_COST + key_size + ENTRY_OVERHEAD
    return (
        max(int(getattr(value, "nbytes", 0)), _object_chain_size(value)) + key_size + ENTRY_OVERHEAD
    )


class CacheStats(NamedTuple):
    hits: int
    misses: int
    entries: int
    nbytes: int
    max_bytes: int


class BlockCache:
    """LRU mapping of hashable keys to decoded blocks (numpy arrays, or None for a block
    that does not exist), holding at most ``max_bytes`` (array data plus each entry's
    objects and bookkeeping: :func:`entry_cost`). A block larger than a quarter of the
    cache is not kept (it would evict everything else)."""

    def __init__(self, max_bytes: int) -> None:
        self._entries: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._lock = threading.Lock()
        self._max = max(0, int(max_bytes))
        self._nbytes = 0
        self.hits = 0
        self.misses = 0

    @property
    def max_bytes(self) -> int:
        return self._max

    def get(self, key: Hashable, default: Any = None) -> Any:
        """The cached value (and mark it recently used), else ``default``."""
        with self._lock:
            item = self._entries.get(key)
            if item is None:
                self.misses += 1
                return default
            self._entries.move_to_end(key)
            self.hits += 1
            return item[0]

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._entries

    def put(self, key: Hashable, value: Any) -> None:
        """Keep ``value`` (an array, or None for an absent block), evicting the least recently used."""
        cost = entry_cost(key, value)
        with self._lock:
            if cost > self._max // 4:
                return
            old = self._entries.pop(key, None)
            if old is not None:
                self._nbytes -= old[1]
            self._entries[key] = (value, cost)
            self._nbytes += cost
            self._evict()

    def discard(self, key: Hashable) -> None:
        """Forget ``key`` (a block rewritten on disk: the next read decodes it afresh)."""
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._nbytes -= old[1]

    def _evict(self) -> None:
        while self._nbytes > self._max and self._entries:
            _, (_, cost) = self._entries.popitem(last=False)
            self._nbytes -= cost

    def resize(self, max_bytes: int) -> None:
        with self._lock:
            self._max = max(0, int(max_bytes))
            self._evict()

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._nbytes = 0
            self.hits = self.misses = 0

    def stats(self) -> CacheStats:
        with self._lock:
            return CacheStats(self.hits, self.misses, len(self._entries), self._nbytes, self._max)


def default_cache_bytes() -> int:
    """:data:`ENV_VAR` if set (bytes), else ``min(1 GiB, RAM / 8)``."""
    from napari_n5zarr.environment import number

    if os.environ.get(ENV_VAR, "").strip():
        return int(number(ENV_VAR, 0))
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # not POSIX: assume 8 GiB
        ram = 8 * 2**30
    return min(DEFAULT_MAX_BYTES, ram // 8)


_cache: BlockCache | None = None
_cache_lock = threading.Lock()


def block_cache() -> BlockCache:
    """The process-wide cache (created on first use with :func:`default_cache_bytes`)."""
    global _cache
    if _cache is None:
        with _cache_lock:
            if _cache is None:
                _cache = BlockCache(default_cache_bytes())
    return _cache


def set_cache_bytes(max_bytes: int) -> None:
    """Resize the shared cache (``0`` turns caching off); evicts at once if it shrinks."""
    block_cache().resize(max_bytes)


def cache_stats() -> CacheStats:
    """Hits, misses, entries and bytes of the shared cache."""
    return block_cache().stats()


_TOKEN_ATTR = "_n5zarr_cache_token"
_token_counter = itertools.count(1)
_token_lock = threading.Lock()


def store_token(store: Any) -> int:
    """A number unique to ``store`` (the object) for the life of the process. Kept on the
    store itself: zarr stores define ``__eq__`` and so are not hashable, and ``id()`` is
    reused once a store is gone."""
    with _token_lock:
        token = store.__dict__.get(_TOKEN_ATTR)
        if token is None:
            token = next(_token_counter)
            store.__dict__[_TOKEN_ATTR] = token
        return token
