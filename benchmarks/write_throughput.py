"""Write throughput of napari_n5zarr.export against tensorstore's n5 driver, in one run.

    python benchmarks/write_throughput.py [--size 256] [--block 64] [--repeat 3]

For each compression, writes the same uint16 volume (smooth field + noise) as one N5
dataset with tensorstore and with ``export(levels=1)`` (level 0 only, truncated edge
blocks, attributes.json + zarr.json), then the whole pyramid with ``export(levels="auto")``.
Prints MiB/s of input data and the ratio to tensorstore. Needs tensorstore.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

import numpy as np
from read_throughput import best_of, sample  # same folder

COMPRESSIONS = {
    "raw": {"type": "raw"},
    "gzip": {"type": "gzip", "level": 6},
    "zstd": {"type": "zstd", "level": 3},
    "blosc": {"type": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 2, "blocksize": 0},
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--block", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    import tensorstore as ts

    import napari_n5zarr

    data = sample(args.size)  # N5 order; napari order is its transpose
    napari_data = data.T
    mib = data.nbytes / 2**20
    block = [args.block] * 3
    print(f"array {data.shape} uint16 = {mib:.0f} MiB, blocks {block}, best of {args.repeat}; MiB/s (ratio to tensorstore)")
    print(f"{'compression':12s} {'tensorstore':>12s} {'export s0':>18s} {'export pyramid':>18s}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, comp in COMPRESSIONS.items():
            target = Path(tmp) / "out.n5"

            def clean() -> None:
                shutil.rmtree(target, ignore_errors=True)

            def with_ts() -> None:
                clean()
                meta = {"dimensions": list(data.shape), "blockSize": block, "dataType": "uint16", "compression": comp}
                t = ts.open({"driver": "n5", "kvstore": {"driver": "file", "path": str(target)}, "create": True, "metadata": meta}).result()
                t[...] = data

            def ours(levels) -> None:
                clean()
                napari_n5zarr.export(napari_data, target, compression=comp, chunks=args.block, levels=levels)

            t_ts = best_of(with_ts, args.repeat)
            t_s0 = best_of(lambda: ours(1), args.repeat)
            np.testing.assert_array_equal(napari_n5zarr.open(target / "s0")[...], data)
            t_pyr = best_of(lambda: ours("auto"), args.repeat)
            cell = lambda t: f"{mib / t:8.0f} ({t_ts / t:4.2f}x)"  # noqa: E731
            print(f"{name:12s} {mib / t_ts:12.0f} {cell(t_s0):>18s} {cell(t_pyr):>18s}")


if __name__ == "__main__":
    main()
