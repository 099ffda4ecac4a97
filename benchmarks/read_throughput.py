"""Read throughput of napari_n5zarr against tensorstore's n5 driver, measured in one run.

    python benchmarks/read_throughput.py [--size 256] [--depth N] [--block 64] [--repeat 3]

Writes one N5 dataset per compression with tensorstore (an independent writer) into a
temporary folder, then reads the whole array (warm OS cache) with
  * tensorstore (n5 driver),
  * napari_n5zarr.open(...)[...] (the default: zarr's fused pipeline on a local folder),
  * zarr.open_array over the same wrapped store (zarr's configured pipeline: what open()
    returned before issue 28),
  * dask.array.from_zarr(open(...)).compute() with 2-block-per-axis tasks,
interleaved (each repeat runs every reader in turn, so drift hits all alike), and prints MiB/s of
decoded data and the ratio to tensorstore (best of --repeat). ``--size 512 --depth 256``
gives issue 28's 128 MiB arrays. Needs tensorstore.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

COMPRESSIONS = {
    "raw": {"type": "raw"},
    "gzip": {"type": "gzip", "level": 6},
    "zstd": {"type": "zstd", "level": 3},
    "blosc": {"type": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 2, "blocksize": 0},
    "zlib": {"type": "gzip", "level": 6, "useZlib": True},
    "bzip2": {"type": "bzip2", "blockSize": 9},
    "xz": {"type": "xz", "preset": 6},
    "lz4 (ours, java framing)": None,
}


def sample(size: int, depth: int) -> np.ndarray:
    """A smooth field plus noise (compresses ~1.5x with gzip), uint16, N5 order."""
    rng = np.random.default_rng(0)
    x = np.linspace(0, 4 * np.pi, size, dtype=np.float32)
    z = np.linspace(0, 4 * np.pi, depth, dtype=np.float32)
    field = 2000 + 1000 * (
        np.sin(x)[:, None, None] * np.cos(x)[None, :, None] + np.sin(z / 2)[None, None, :]
    )
    return (field + rng.normal(0, 30, size=(size, size, depth))).astype(np.uint16)


def best_of_each(fns: dict, repeat: int) -> dict[str, float]:
    """Best time of each function, the functions run in turn within each repeat."""
    best = {k: float("inf") for k in fns}
    for _ in range(repeat):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            best[k] = min(best[k], time.perf_counter() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--size", type=int, default=256, help="edge of the uint16 array (x and y)")
    ap.add_argument("--depth", type=int, help="its third extent (default: --size)")
    ap.add_argument("--block", type=int, default=64, help="edge of the cubic N5 block")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", help="comma-separated compressions (default: all)")
    args = ap.parse_args()

    import dask.array as da
    import tensorstore as ts
    import zarr

    import napari_n5zarr
    from napari_n5zarr.access import base_store, wrap
    from napari_n5zarr.n5.codec import N5DefaultCodec
    from napari_n5zarr.n5.metadata import attributes_to_zarr

    data = sample(args.size, args.depth or args.size)
    mib = data.nbytes / 2**20
    block = [args.block] * 3
    print(
        f"array {data.shape} uint16 = {mib:.0f} MiB, blocks {block}, best of {args.repeat}; MiB/s (ratio to tensorstore)"
    )
    header = f"{'compression':26s} {'tensorstore':>12s} {'open()[...]':>18s} {'zarr.open_array':>18s} {'open() via dask':>18s}"
    print(header)
    with tempfile.TemporaryDirectory() as tmp:
        for name, comp in COMPRESSIONS.items():
            if args.only and name.split()[0] not in args.only.split(","):
                continue
            path = Path(tmp) / f"{name.split()[0]}.n5"
            if comp is not None:
                spec = {"driver": "n5", "kvstore": {"driver": "file", "path": str(path)}}
                meta = {
                    "dimensions": list(data.shape),
                    "blockSize": block,
                    "dataType": "uint16",
                    "compression": comp,
                }
                t = ts.open({**spec, "create": True, "metadata": meta}).result()
                t[...] = data
                read_ts = lambda: ts.open(spec).result().read().result()  # noqa: E731
            else:  # tensorstore has no lz4: write with our library
                doc = attributes_to_zarr(
                    {
                        "dimensions": list(data.shape),
                        "blockSize": block,
                        "dataType": "uint16",
                        "compression": {"type": "lz4", "blockSize": 65536},
                    }
                )
                root = napari_n5zarr.open(path, mode="w")
                arr = root.create_array(
                    "d",
                    shape=data.shape,
                    dtype="uint16",
                    chunks=block,
                    serializer=N5DefaultCodec.from_dict(doc["codecs"][0]),
                    compressors=None,
                    chunk_key_encoding={"name": "v2", "separator": "/"},
                    fill_value=0,
                )
                arr[...] = data
                path = path / "d"
                read_ts = None

            chunks = tuple(min(2 * b, s) for b, s in zip(block, data.shape, strict=True))
            readers = {
                "open": lambda: napari_n5zarr.open(path)[...],
                "zarr": lambda: zarr.open_array(store=wrap(base_store(path)), mode="r")[...],
                "dask": lambda: da.from_zarr(napari_n5zarr.open(path), chunks=chunks).compute(),
            }
            if read_ts is not None:
                readers = {"ts": read_ts, **readers}
            t = best_of_each(readers, args.repeat)
            t_ts = t.get("ts", float("nan"))
            t_fused, t_batched, t_dask = t["open"], t["zarr"], t["dask"]
            np.testing.assert_array_equal(napari_n5zarr.open(path)[...], data)

            def cell(t: float) -> str:
                ratio = t_ts / t if t_ts == t_ts else float("nan")
                return f"{mib / t:8.0f} ({ratio:4.2f}x)"

            ts_cell = f"{mib / t_ts:12.0f}" if t_ts == t_ts else f"{'n/a':>12s}"
            print(
                f"{name:26s} {ts_cell} {cell(t_fused):>18s} {cell(t_batched):>18s} {cell(t_dask):>18s}"
            )


if __name__ == "__main__":
    main()
