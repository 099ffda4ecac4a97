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
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
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
    print(
        f"array {data.shape} uint16 = {mib:.0f} MiB, blocks {block}, best of {args.repeat}; MiB/s (ratio to tensorstore)"
    )
    print(f"{'compression':12s} {'tensorstore':>12s} {'export s0':>18s} {'export pyramid':>18s}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, comp in COMPRESSIONS.items():
            targets = {k: Path(tmp) / f"{k}.n5" for k in ("ts", "s0", "pyramid")}

            def with_ts(comp=comp) -> None:
                meta = {
                    "dimensions": list(data.shape),
                    "blockSize": block,
                    "dataType": "uint16",
                    "compression": comp,
                }
                spec = {
                    "driver": "n5",
                    "kvstore": {"driver": "file", "path": str(targets["ts"])},
                    "create": True,
                    "metadata": meta,
                }
                t = ts.open(spec).result()
                t[...] = data

            def ours(levels, key, comp=comp) -> None:
                napari_n5zarr.export(
                    napari_data, targets[key], compression=comp, chunks=args.block, levels=levels
                )

            # Interleaved, each folder removed before its run and outside the timing (deleting
            # the files of the run before is no part of a write).
            fns = {
                "ts": with_ts,
                "s0": lambda: ours(1, "s0"),
                "pyramid": lambda: ours("auto", "pyramid"),
            }
            times: dict[str, list[float]] = {k: [] for k in fns}
            for _ in range(args.repeat):
                for key, fn in fns.items():
                    shutil.rmtree(targets[key], ignore_errors=True)
                    times[key].append(best_of(fn, 1))
            t_ts, t_s0, t_pyr = (min(times[k]) for k in ("ts", "s0", "pyramid"))
            np.testing.assert_array_equal(napari_n5zarr.open(targets["s0"] / "s0")[...], data)
            cell = lambda t: f"{mib / t:8.0f} ({t_ts / t:4.2f}x)"  # noqa: E731
            print(f"{name:12s} {mib / t_ts:12.0f} {cell(t_s0):>18s} {cell(t_pyr):>18s}")


if __name__ == "__main__":
    main()
