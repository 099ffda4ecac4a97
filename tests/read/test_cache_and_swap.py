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
    assert held <= 1.25 * limit, (
        f"{stats.entries} entries of 1 byte hold {held} bytes under a {limit}-byte cache"
    )
    assert stats.entries > 100  # still a cache


@pytest.mark.parametrize("cache_bytes", [20_000, 2**26], ids=["small-cache", "large-cache"])
def test_planes_read_while_an_export_replaces_the_dataset_are_never_mixed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                         cache_bytes: int) -> None:  # fmt: skip
    from napari_n5zarr._napari.reader import read_path
    from napari_n5zarr.read import block_cache as bc

    monkeypatch.setattr(
        bc, "_cache", BlockCache(cache_bytes)
    )  # small: blocks of one plane evicted and read again

    root = tmp_path / "live.n5"
    shape = (8, 64, 64)  # a plane spans 16 blocks of 16×16
    export(
        np.full(shape, 1, "uint8"), root, levels=1, chunks=16, compression="raw", zarr_json=False
    )
    notes: list[str] = []
    [(data, _meta, _kind)] = read_path(str(root), lambda level, text: notes.append(text))
    level = data[0] if isinstance(data, list) else data
    seen: list[tuple[int, ...]] = []
    errors: list[str] = []
    stop = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            for z in range(shape[0]):
                try:
                    plane = np.asarray(level[z])
                except Exception as e:
                    errors.append(f"{type(e).__name__}: {e}")
                    continue
                seen.append(tuple(int(v) for v in np.unique(plane)))

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    try:
        for value in range(2, 12):
            export(
                np.full(shape, value, "uint8"),
                root,
                levels=1,
                chunks=16,
                compression="raw",
                zarr_json=False,
                overwrite=True,
            )
    finally:
        stop.set()
        thread.join(timeout=60)
    assert not thread.is_alive()
    mixed = sorted({s for s in seen if len(s) != 1})
    assert seen, f"{len(mixed)} kinds of torn planes out of {len(seen)}: {mixed[:5]}"
    assert not mixed, f"{len(mixed)} kinds of torn planes out of {len(seen)}: {mixed[:5]}"
    assert all(s[0] in range(1, 12) for s in seen), sorted(set(seen))  # never the fill value
