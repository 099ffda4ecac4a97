"""Read throughput of napari_n5zarr against tensorstore's n5 driver, measured in one run.

    python benchmarks/read_throughput.py [--size 256] [--block 64] [--repeat 3]

Writes one N5 dataset per compression with tensorstore (an independent writer) into a
temporary folder, then reads the whole array (warm OS cache) with
  * tensorstore (n5 driver),
  * napari_n5zarr.open(...)[...] with zarr's default BatchedCodecPipeline,
  * the same with zarr's FusedCodecPipeline,
  * dask.array.from_zarr(...).compute() (what napari does) with 2-block-per-axis tasks,
and prints MiB/s of decoded data and the ratio to tensorstore. Needs tensorstore.
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
    "lz4 (ours, java framing)": None,
}


def sample(size: int) -> np.ndarray:
    """A smooth field plus noise (compresses ~1.5x with gzip), uint16, N5 order."""
    rng = np.random.default_rng(0)
    x = np.linspace(0, 4 * np.pi, size, dtype=np.float32)
    field = 2000 + 1000 * (np.sin(x)[:, None, None] * np.cos(x)[None, :, None] + np.sin(x / 2)[None, None, :])
    return (field + rng.normal(0, 30, size=(size,) * 3)).astype(np.uint16)


def best_of(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=256, help="edge of the cubic uint16 array")
    ap.add_argument("--block", type=int, default=64, help="edge of the cubic N5 block")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    import dask.array as da
    import tensorstore as ts
    import zarr

    import napari_n5zarr
    from napari_n5zarr.n5.codec import N5DefaultCodec
    from napari_n5zarr.n5.metadata import attributes_to_zarr

    data = sample(args.size)
    mib = data.nbytes / 2**20
    block = [args.block] * 3
    print(f"array {data.shape} uint16 = {mib:.0f} MiB, blocks {block}, best of {args.repeat}; MiB/s (ratio to tensorstore)")
    header = f"{'compression':26s} {'tensorstore':>12s} {'ours batched':>18s} {'ours fused':>18s} {'ours via dask':>18s}"
    print(header)
    with tempfile.TemporaryDirectory() as tmp:
        for name, comp in COMPRESSIONS.items():
            path = Path(tmp) / f"{name.split()[0]}.n5"
            if comp is not None:
                spec = {"driver": "n5", "kvstore": {"driver": "file", "path": str(path)}}
                meta = {"dimensions": list(data.shape), "blockSize": block, "dataType": "uint16", "compression": comp}
                t = ts.open({**spec, "create": True, "metadata": meta}).result()
                t[...] = data
                t_ts = best_of(lambda: ts.open(spec).result().read().result(), args.repeat)
            else:  # tensorstore has no lz4: write with our library
                doc = attributes_to_zarr({"dimensions": list(data.shape), "blockSize": block, "dataType": "uint16", "compression": {"type": "lz4", "blockSize": 65536}})
                root = napari_n5zarr.open(path, mode="w")
                arr = root.create_array("d", shape=data.shape, dtype="uint16", chunks=block, serializer=N5DefaultCodec.from_dict(doc["codecs"][0]),
                                        compressors=None, chunk_key_encoding={"name": "v2", "separator": "/"}, fill_value=0)
                arr[...] = data
                path = path / "d"
                t_ts = float("nan")

            def ours() -> None:
                out = napari_n5zarr.open(path)[...]
                assert out.shape == data.shape

            t_batched = best_of(ours, args.repeat)
            with zarr.config.set({"codec_pipeline.path": "zarr.core.codec_pipeline.FusedCodecPipeline"}):
                t_fused = best_of(ours, args.repeat)
            chunks = tuple(min(2 * b, s) for b, s in zip(block, data.shape, strict=True))
            t_dask = best_of(lambda: da.from_zarr(napari_n5zarr.open(path), chunks=chunks).compute(), args.repeat)
            np.testing.assert_array_equal(napari_n5zarr.open(path)[...], data)

            def cell(t: float) -> str:
                ratio = t_ts / t if t_ts == t_ts else float("nan")
                return f"{mib / t:8.0f} ({ratio:4.2f}x)"

            ts_cell = f"{mib / t_ts:12.0f}" if t_ts == t_ts else f"{'n/a':>12s}"
            print(f"{name:26s} {ts_cell} {cell(t_batched):>18s} {cell(t_fused):>18s} {cell(t_dask):>18s}")


if __name__ == "__main__":
    main()
