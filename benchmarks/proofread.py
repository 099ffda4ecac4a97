"""Proofreading: save after one brush stroke across 4 blocks of a big uint64 labels pyramid,
against rewriting the level with ``export``; and painting latency. Reported, never asserted.

    python benchmarks/proofread.py [--size 512] [--block 64] [--brush 10] [--napari]

Builds a ``size``^3 uint64 labels pyramid (blobby labels, gzip, ``export(labels=True)``,
from a lazy dask array), then, on level 0 opened as
:class:`~napari_n5zarr.write.edit.editable.EditableLevel`:

* one stroke in a z-plane: a disk of radius ``brush`` painted at every pixel along a line
  crossing 4 blocks, each step as napari's brush does it (``data[box]`` read,
  ``data[box] = region`` written): latency per step (median, max);
* ``save_edits``: time, blocks and bytes written (every level);
* the alternative: ``export(level0, levels=1)`` rewriting the whole level (time, bytes), and
  the whole pyramid (``levels="auto"``);
* with ``--napari``: ``Labels.paint`` latency in a real (hidden) viewer over the same data.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import dask.array as da
import numpy as np


def blobs(size: int, block: int) -> da.Array:
    """Blobby uint64 labels: constant 16^3 cubes with ids above 2^40 (a lazy array)."""

    def chunk(block_info=None) -> np.ndarray:
        loc = block_info[None]["array-location"]
        grids = np.meshgrid(*[np.arange(a, b) // 16 for a, b in loc], indexing="ij")
        ids = (grids[0] * 7919 + grids[1] * 104729 + grids[2] * 1299709) % 1000
        return (ids.astype(np.uint64) + (1 << 40)) * (ids % 5 != 0)

    return da.map_blocks(chunk, chunks=((block,) * (size // block),) * 3, dtype=np.uint64)


def folder_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def stroke(level, z: int, y: int, x0: int, x1: int, brush: int, label: int) -> list[float]:
    """napari's brush, one step per pixel along x: read the box, paint the disk, write."""
    yy, xx = np.mgrid[-brush : brush + 1, -brush : brush + 1]
    disk = yy**2 + xx**2 <= brush**2
    times = []
    for x in range(x0, x1):
        t = time.perf_counter()
        box = (slice(z, z + 1), slice(y - brush, y + brush + 1), slice(x - brush, x + brush + 1))
        region = np.asarray(level[box])
        region[0][disk] = label
        level[box] = region
        times.append(time.perf_counter() - t)
    return times


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--size", type=int, default=512)
    ap.add_argument("--block", type=int, default=64)
    ap.add_argument("--brush", type=int, default=10)
    ap.add_argument("--napari", action="store_true")
    ap.add_argument("--workdir", type=Path, default=None)
    args = ap.parse_args(argv)

    from napari_n5zarr import export, save_edits
    from napari_n5zarr.write.edit.editable import EditableLevel

    work = Path(tempfile.mkdtemp(dir=args.workdir))
    try:
        src = work / "seg.n5"
        t = time.perf_counter()
        export(blobs(args.size, args.block), src, labels=True, chunks=args.block)
        made = time.perf_counter() - t
        nlevels = len([p for p in src.iterdir() if p.name.startswith("s")])
        print(f"pyramid {args.size}^3 uint64, blocks {args.block}^3, {nlevels} levels, gzip: "
              f"{folder_bytes(src) / 2**20:.1f} MiB on disk, built in {made:.1f} s")  # fmt: skip

        level = EditableLevel(src)
        b = args.block
        z, y = b + b // 2, b + b // 2
        x0, x1 = b // 2, 3 * b + b // 2  # crosses x blocks 0..3: 4 blocks
        times = stroke(level, z, y, x0, x1, args.brush, 12345)
        print(f"brush step (radius {args.brush}): median {statistics.median(times) * 1e3:.2f} ms, "
              f"max {max(times) * 1e3:.2f} ms over {len(times)} steps; dirty blocks {len(level.dirty)}")  # fmt: skip

        before = {p: p.stat().st_mtime_ns for p in src.rglob("*") if p.is_file()}
        t = time.perf_counter()
        result = save_edits(level)
        saved = time.perf_counter() - t
        touched = sum(1 for p, m in before.items() if p.stat().st_mtime_ns != m)
        print(f"save_edits: {saved * 1e3:.1f} ms, {result.total_blocks} blocks (per level {result.blocks}), "
              f"{result.bytes_written / 1024:.1f} KiB written; files touched {touched} of {len(before)}")  # fmt: skip

        lazy = da.from_array(level, chunks=(b,) * 3)
        for levels, what in ((1, "level 0"), ("auto", "whole pyramid")):
            dest = work / f"rewrite-{levels}.n5"
            t = time.perf_counter()
            export(lazy, dest, labels=True, chunks=b, levels=levels)
            took = time.perf_counter() - t
            print(f"export rewriting the {what}: {took:.1f} s, {folder_bytes(dest) / 2**20:.1f} MiB written "
                  f"({took / saved:.0f}x the time, {folder_bytes(dest) / max(1, result.bytes_written):.0f}x the bytes)")  # fmt: skip
            shutil.rmtree(dest)

        if args.napari:
            os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
            import napari

            viewer = napari.Viewer(show=False)
            layer = viewer.open(str(src), plugin="napari-n5zarr")[0]
            viewer.dims.set_point(0, z)
            layer.brush_size = 2 * args.brush
            paint = []
            for x in range(x0, x1, 4):
                t = time.perf_counter()
                layer.paint((z, y + b, x), 777)
                paint.append(time.perf_counter() - t)
            print(f"napari Labels.paint (brush {2 * args.brush}): median {statistics.median(paint) * 1e3:.2f} ms, "
                  f"max {max(paint) * 1e3:.2f} ms over {len(paint)} calls")  # fmt: skip
            viewer.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
