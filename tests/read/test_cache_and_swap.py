"""Issue 19 item 9, tested here first: the block cache bounds real memory (per-entry
overhead counted, not just array bytes), and a level read while an export replaces its
dataset gives whole planes, old or new, never mixed."""

from __future__ import annotations

import gc
import threading
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from napari_n5zarr import export
from napari_n5zarr.read.block_cache import BlockCache

HEADER = bytes([0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 1])  # N5 default mode, 2-D, 1×1


def tiny_block(value: int) -> np.ndarray:
    """A decoded 1-byte block as the reader keeps it: a read-only view of the stored bytes."""
    raw = HEADER + bytes([value % 256])
    out = np.frombuffer(raw, np.uint8)[len(HEADER) :].reshape(1, 1).T
    out.flags.writeable = False
    return out


def test_cache_of_tiny_blocks_bounds_traced_memory() -> None:
    limit = 256 * 2**10
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        cache = BlockCache(limit)
        for i in range(100_000):
            cache.put((7, "s0", (i // 512, i % 512)), tiny_block(i))
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    stats = cache.stats()
    assert stats.nbytes <= limit
    assert held <= 1.25 * limit, f"{stats.entries} entries of 1 byte hold {held} bytes under a {limit}-byte cache"
    assert stats.entries > 100  # still a cache
