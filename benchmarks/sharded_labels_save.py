"""One brush stroke saved into a sharded OME-Zarr labels pyramid (issue 31 item 5), against
rewriting that shard with tensorstore's zarr3 driver (read the shard's region, change the
stroke, write it back), interleaved in the same run. Reported, never asserted.

    python benchmarks/sharded_labels_save.py [--shape 256,512,512] [--chunks 64] [--shards 4]
                                             [--compression zstd] [--repeat 5] [--workdir DIR]

Ours is :meth:`EditableLevel.save` after one stroke (a disk of radius 12 in one z-plane, as
``Labels.paint`` writes it): under the locks and the journal it reads the shard from disk,
merges the changed voxels, re-encodes the changed inner chunks through zarr's sharding codec,
writes the shard atomically (staged file, fsync, rename), then does the same for the covering
shard of every coarser level (mode downsampling). tensorstore rewrites level 0's shard only
(no pyramid, no journal), so ours is also timed on the same level 0 exported alone
(``levels=1``). Ratio: tensorstore's time / ours (above 1: ours is faster).
The stroke itself (reading the shard into the layer) is timed apart.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np


def _labels(shape: tuple[int, ...]) -> np.ndarray:
    rng = np.random.default_rng(0)
    coarse = rng.integers(1, 200, size=tuple(-(-n // 16) for n in shape)).astype("uint32")
    big = np.kron(coarse, np.ones((16,) * len(shape), "uint32"))
    return np.ascontiguousarray(big[tuple(slice(0, n) for n in shape)])


def _stroke(z: int, y: int, x: int, r: int) -> tuple[slice, ...]:
    return (slice(z, z + 1), slice(y - r, y + r + 1), slice(x - r, x + r + 1))


def _disk(r: int) -> np.ndarray:
    yy, xx = np.mgrid[-r : r + 1, -r : r + 1]
    return (yy**2 + xx**2 <= r * r)[None]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shape", default="256,512,512")
    p.add_argument("--chunks", type=int, default=64)
    p.add_argument("--shards", type=int, default=4, help="inner chunks per shard, per axis")
    p.add_argument("--compression", default="zstd")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--workdir", type=Path, default=None)
    args = p.parse_args()
    import tensorstore as ts

    import napari_n5zarr
    from napari_n5zarr.write.edit.editable import open_editable

    shape = tuple(int(s) for s in args.shape.split(","))
    work = Path(args.workdir or tempfile.mkdtemp(prefix="sharded-save-"))
    work.mkdir(parents=True, exist_ok=True)
    ours, theirs = work / "ours.ome.zarr", work / "theirs.ome.zarr"
    t = time.perf_counter()
    data = _labels(shape)
    napari_n5zarr.export(data, ours, format="ome-zarr", labels=True, chunks=args.chunks,
                         shards=args.shards, compression=args.compression, overwrite=True)  # fmt: skip
    export_s = time.perf_counter() - t
    shutil.copytree(ours, theirs, dirs_exist_ok=True)
    flat = work / "level0.ome.zarr"  # the same level 0 alone: the save without a pyramid
    napari_n5zarr.export(data, flat, format="ome-zarr", labels=True, chunks=args.chunks, levels=1,
                         shards=args.shards, compression=args.compression, overwrite=True)  # fmt: skip
    shard = args.chunks * args.shards
    n_levels = len([d for d in ours.iterdir() if d.is_dir()])
    print(f"{shape} uint32, chunks {args.chunks}^3, shards {shard}^3 "
          f"({shard**3 * 4 / 2**20:.0f} MiB decoded), {args.compression}, {n_levels} levels; "
          f"export {export_s:.1f} s")  # fmt: skip

    level, alone = open_editable(ours), open_editable(flat)
    store = ts.open(
        {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(theirs / "s0")}}
    ).result()
    centre = tuple(min(shard, s) // 2 for s in shape)  # inside shard (0, 0, 0)
    radius = max(1, min(12, min(centre[1:]) - 1))
    disk = _disk(radius)
    paint_t, save_t, alone_t, ts_t, written = [], [], [], [], []
    for n in range(args.repeat):
        z, y, x = centre
        where = _stroke(z + n % max(1, z), y, x, radius)
        value = 1000 + n
        t = time.perf_counter()
        region = level[where]
        region[disk] = value
        level[where] = region
        paint_t.append(time.perf_counter() - t)
        t = time.perf_counter()
        result = level.save()
        save_t.append(time.perf_counter() - t)
        written.append(result.bytes_written)
        alone[where] = region
        t = time.perf_counter()
        alone.save()
        alone_t.append(time.perf_counter() - t)
        # tensorstore: read the whole shard, change the stroke, write the shard back
        t = time.perf_counter()
        box = tuple(slice(0, min(shard, s)) for s in shape)
        block = store[box].read().result()
        local = tuple(
            slice(w.start - b.start, w.stop - b.start) for w, b in zip(where, box, strict=True)
        )
        sub = block[local]
        sub[disk] = value
        block[local] = sub
        store[box].write(block).result()
        ts_t.append(time.perf_counter() - t)
        assert result.blocks[0] == 1, result

    got = np.asarray(ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": str(ours / "s0")}})
                     .result()[_stroke(*centre, radius)].read().result())  # fmt: skip
    assert (got[disk] == 1000).all()
    med = statistics.median
    print(f"stroke into the layer (reads the shard once): median {1000 * med(paint_t):.0f} ms")
    print(f"ours: save (level 0 shard + {n_levels - 1} coarser shards, journal, fsync): "
          f"median {1000 * med(save_t):.0f} ms, {med(written) / 2**20:.1f} MiB written")  # fmt: skip
    print(f"ours, level 0 alone (no pyramid; journal, fsync): median {1000 * med(alone_t):.0f} ms")
    print(f"tensorstore: read + rewrite level 0's shard: median {1000 * med(ts_t):.0f} ms")
    print(f"ratio tensorstore / ours: pyramid {med(ts_t) / med(save_t):.2f}, "
          f"level 0 alone {med(ts_t) / med(alone_t):.2f}")  # fmt: skip
    if args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
