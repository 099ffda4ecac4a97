"""A/B of the napari read path on one file, in one run: zarr's path (old) vs the block path
with the decoded-block cache (new), and tensorstore (if installed) for reference.

    PYTHONPATH=src python benchmarks/levels_ab.py [--size 512] [--repeat 5]

Data: a ``size``^3 uint16 N5 dataset, 64^3 gzip blocks (smooth field + noise), written once
into a temporary folder. Rows (best of ``--repeat``, seconds):

* one z-plane of level 0 from the reader's dask array, each run a plane of a new block slab
  with the cache cleared and prefetch off (a far jump of the z slider);
* scrolling 64 consecutive planes (one block slab), per plane, cache cleared first
  (prefetch on: the next slab starts decoding in the background while the last planes show).

Outside napari there is no opportunistic dask cache: the old path decodes the slab's
blocks again for every plane, which napari's cache partly hides in the window.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

import napari_n5zarr
from napari_n5zarr.read import block_cache, fetch, levels


def write(path: Path, size: int) -> None:
    rng = np.random.default_rng(0)
    root = napari_n5zarr.open(path, mode="w")
    arr = napari_n5zarr.create_dataset(root, "s0", shape=(size,) * 3, dtype="uint16", chunks=(64,) * 3,
                                       compression={"type": "gzip", "level": 6})  # fmt: skip
    axis = np.linspace(0, 8 * np.pi, size, dtype=np.float32)
    for z0 in range(0, size, 64):
        z = axis[z0 : z0 + 64, None, None]
        field = 20000 + 10000 * np.sin(axis[None, None, :]) * np.cos(axis[None, :, None]) * np.cos(
            z
        )
        noise = rng.integers(0, 512, size=field.shape, dtype=np.uint16)
        arr[:, :, z0 : z0 + 64] = (field + noise).astype(np.uint16).T  # N5 order: x, y, z


def dask_level(array: Any, fast: bool) -> Any:
    reader = levels.LevelReader(array, n5_order=True)
    if not fast:
        reader.source = None  # zarr's path, as before the block path
    chunks = levels.dask_chunks(tuple(array.shape), tuple(array.chunks), 2)[::-1]
    return levels._from_reader(reader, chunks)


def best_each(fns: dict[str, Callable[[int], Any] | None], repeat: int) -> dict[str, float | None]:
    """Best time of each function, run interleaved (A, B, C, A, B, C, ...) so that a loaded
    machine slows all alike; the block cache is cleared (and prefetch settled) before every run."""
    times: dict[str, list[float]] = {name: [] for name, fn in fns.items() if fn is not None}
    for i in range(repeat):
        for name, fn in fns.items():
            if fn is None:
                continue
            fetch._prefetch_pool().submit(lambda: None).result()  # background work done
            block_cache.block_cache().clear()
            t0 = time.perf_counter()
            fn(i)
            times[name].append(time.perf_counter() - t0)
    return {name: (min(times[name]) if name in times else None) for name in fns}


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--size", type=int, default=512)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    size, repeat = args.size, args.repeat
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ab.n5"
        write(path, size)
        array = napari_n5zarr.open(path / "s0")
        old, new = dask_level(array, False), dask_level(array, True)
        slabs = size // 64

        def plane(i: int) -> int:  # a new block slab each run
            return 64 * (i % slabs) + 32

        expected = np.asarray(array[:, :, plane(0)]).T
        assert np.array_equal(np.asarray(old[plane(0)]), expected)
        assert np.array_equal(np.asarray(new[plane(0)]), expected)
        t_arr: Any = None
        try:
            import tensorstore as ts

            t_arr = ts.open({"driver": "n5", "kvstore": {"driver": "file", "path": str(path / "s0")},
                             "context": {"cache_pool": {"total_bytes_limit": 0}}}).result()  # fmt: skip
        except ImportError:
            pass

        # The hardware's limit for a plane: its blocks (bytes already in memory) decoded with
        # the codec on one thread per core, nothing else.
        source = levels.LevelReader(array, n5_order=True).source
        assert source is not None
        raws = [
            (path / "s0" / source.key((0, y, x))).read_bytes()
            for y in range(slabs)
            for x in range(slabs)
        ]
        pool = ThreadPoolExecutor(os.cpu_count() or 2)

        os.environ[fetch.PREFETCH_ENV] = "0"  # a far jump: nothing to foresee
        one = best_each({
            "old": lambda i: np.asarray(old[plane(i)]),
            "new": lambda i: np.asarray(new[plane(i)]),
            "ts": (lambda i: t_arr[:, :, plane(i)].read().result()) if t_arr is not None else None,
            "limit": lambda i: list(pool.map(lambda r: source.decode(r, "k"), raws)),
        }, repeat)  # fmt: skip

        def scroll(read: Callable[[int], Any]) -> Callable[[int], Any]:
            def run(i: int) -> None:
                z0 = 64 * (i % slabs)
                for z in range(z0, z0 + 64):
                    read(z)

            return run

        os.environ[fetch.PREFETCH_ENV] = (
            "1"  # scrolling: the next slab is decoded in the background
        )
        many = best_each({
            "old": scroll(lambda z: np.asarray(old[z])),
            "new": scroll(lambda z: np.asarray(new[z])),
            "ts": scroll(lambda z: t_arr[:, :, z].read().result()) if t_arr is not None else None,
        }, max(1, repeat // 2))  # fmt: skip
        pool.shutdown()

    def per_plane(v: float | None) -> float | None:
        return None if v is None else v / 64

    rows = [
        ("one z-plane of level 0 (dask array)", one["old"], one["new"], one["ts"]),
        (
            "scrolling 64 consecutive planes, per plane",
            per_plane(many["old"]),
            per_plane(many["new"]),
            per_plane(many["ts"]),
        ),
    ]
    limit = one["limit"]
    assert limit is not None
    print(
        f"{size}^3 uint16, 64^3 gzip blocks, interleaved best of {repeat}; ratios: old / new, tensorstore / new"
    )
    print(f"decode limit of one plane's {slabs * slabs} blocks on {os.cpu_count()} threads: {limit * 1e3:.1f} ms; "
          f"the new plane read runs at {100 * limit / (one['new'] or 1):.0f}% of it")  # fmt: skip
    print(
        f"| {'row':44} | {'old (zarr)':>11} | {'new (blocks)':>12} | {'old/new':>7} | {'tensorstore':>11} | {'ts/new':>6} |"
    )
    for name, a, b, t in rows:
        assert a is not None
        assert b is not None
        ts_cols = f"{t * 1e3:8.1f} ms | {t / b:5.2f}x" if t is not None else f"{'-':>11} | {'-':>6}"
        print(f"| {name:44} | {a * 1e3:8.1f} ms | {b * 1e3:9.1f} ms | {a / b:6.2f}x | {ts_cols} |")


if __name__ == "__main__":
    main()
