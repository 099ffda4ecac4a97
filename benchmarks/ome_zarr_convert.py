"""An N5 pyramid converted to a sharded zstd OME-Zarr: ``n5zarr convert --to ome-zarr`` against
tensorstore doing the same copy, in one run.

    python benchmarks/ome_zarr_convert.py [--size 1024] [--block 64] [--shards 4] [--repeat 2] [--workdir DIR]

Builds once a gzip N5 pyramid (uint16, ``--block``^3 blocks, a smooth field plus noise as
the other benchmarks write; ``--size`` 1024 = 2 GiB at level 0, levels down to one block),
then copies it, every level, into Zarr v3 with ``sharding_indexed`` (``--shards`` blocks per
shard and axis, inner chunks = the blocks, ``bytes`` + ``zstd`` level 3) by

* ours: ``convert(src, dest, to="ome-zarr", shards=N, compression="zstd")``
  (what ``n5zarr convert --to ome-zarr --shards N --compression zstd`` runs);
* tensorstore: its ``n5`` driver read into its ``zarr3`` driver, level by level, the same
  shard and chunk shapes and codecs, in napari (C) order as ours.

``--floor`` adds a third contender that is no converter: every block of every level decoded
(libdeflate), byte-swapped, encoded (``zstandard``, level 3) and its bytes written to a file
of its own, on as many threads as cores, nothing else (no zarr, no shard index, no checks).
It is the codec work and the writes both converters must do: tensorstore's time / the
floor's is the most any converter could reach against tensorstore on this machine.

Each run is a fresh process (its peak RSS is its own), ours and tensorstore interleaved;
the destination is removed before each run, outside the timing. Prints seconds, MiB/s of
level-0 data, peak RSS and the ratio tensorstore time / ours (goal >= 1.2). Each run's
output is checked equal to the source on a sample of blocks. Needs tensorstore.
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def field_block(block: np.ndarray, block_info: dict | None = None) -> np.ndarray:
    """The smooth field plus noise at one dask block (napari order z, y, x), seeded by position."""
    loc = block_info[None]["array-location"]
    size = block_info[None]["shape"][-1]
    z, y, x = (np.arange(a, b, dtype=np.float32)[s] for (a, b), s in
               zip(loc, [np.s_[:, None, None], np.s_[None, :, None], np.s_[None, None, :]], strict=True))  # fmt: skip
    w = 4 * np.pi / size
    field = 2000 + 1000 * (np.sin(x * w) * np.cos(y * w) + np.sin(z * w / 2))
    rng = np.random.default_rng([a for a, _ in loc])
    return (field + rng.normal(0, 30, size=field.shape)).astype(np.uint16)


def build_source(path: Path, size: int, block: int) -> None:
    """The gzip N5 pyramid (written by our export, checked readable by tensorstore below)."""
    import dask.array as da

    import napari_n5zarr

    shape = (size, size, size)
    lazy = da.zeros(shape, dtype=np.uint16, chunks=(block * 2,) * 3).map_blocks(
        field_block, dtype=np.uint16
    )
    napari_n5zarr.export(lazy, path, compression="gzip", chunks=block, levels="auto")


def levels_of(src: Path) -> list[str]:
    return sorted((p.name for p in src.iterdir() if p.name.startswith("s") and p.name[1:].isdigit()),
                  key=lambda n: int(n[1:]))  # fmt: skip


def run_ours(src: Path, dest: Path, shards: int) -> None:
    from napari_n5zarr.write.convert.convert import convert

    convert(src, dest, to="ome-zarr", shards=shards, compression="zstd")


def run_tensorstore(src: Path, dest: Path, shards: int) -> None:
    import tensorstore as ts

    for name in levels_of(src):
        source = ts.open(
            {"driver": "n5", "kvstore": {"driver": "file", "path": str(src / name)}}
        ).result()
        block = list(source.chunk_layout.read_chunk.shape)[::-1]  # napari order
        shape = list(source.shape)[::-1]
        inner = [
            {"name": "bytes", "configuration": {"endian": "little"}},
            {"name": "zstd", "configuration": {"level": 3}},
        ]
        spec = {
            "driver": "zarr3", "kvstore": {"driver": "file", "path": str(dest / name)}, "create": True,
            "metadata": {
                "shape": shape, "data_type": "uint16",
                "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [b * shards for b in block]}},
                "codecs": [{"name": "sharding_indexed", "configuration": {
                    "chunk_shape": block, "codecs": inner,
                    "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}]}}],
                "dimension_names": ["z", "y", "x"],
            },
        }  # fmt: skip
        target = ts.open(spec).result()
        target.write(source.T).result()


def run_floor(src: Path, dest: Path, shards: int) -> None:
    """The codec work and the writes alone (see the module): each block's bytes to a file."""
    import os
    from concurrent.futures import ThreadPoolExecutor

    import deflate
    import zstandard

    dest.mkdir(parents=True)
    local = __import__("threading").local()
    blocks = [
        (lv, p)
        for lv in levels_of(src)
        for p in (src / lv).rglob("*")
        if p.is_file() and not p.name.endswith(".json")
    ]

    def one(item: tuple[str, Path]) -> None:
        level, path = item
        raw = path.read_bytes()
        ndim = int.from_bytes(raw[2:4], "big")
        data = deflate.gzip_decompress(raw[4 + 4 * ndim :])
        native = np.frombuffer(data, ">u2").astype("<u2")
        if not hasattr(local, "zstd"):
            local.zstd = zstandard.ZstdCompressor(level=3)
        name = level + "-" + "-".join(path.relative_to(src / level).parts)
        (dest / name).write_bytes(local.zstd.compress(native))

    with ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        list(pool.map(one, blocks))


def check(src: Path, dest: Path, samples: int = 6) -> None:
    """Some blocks of each level of ``dest`` (read by zarr-python) equal the source's."""
    import tensorstore as ts
    import zarr

    rng = np.random.default_rng(1)
    for name in levels_of(src):
        source = (
            ts.open({"driver": "n5", "kvstore": {"driver": "file", "path": str(src / name)}})
            .result()
            .T
        )
        out = zarr.open_array(dest / name, mode="r")
        assert out.shape == tuple(source.shape), (name, out.shape, source.shape)
        for _ in range(samples):
            start = [int(rng.integers(0, max(1, n - 16))) for n in out.shape]
            region = tuple(slice(s, min(s + 16, n)) for s, n in zip(start, out.shape, strict=True))
            np.testing.assert_array_equal(out[region], source[region].read().result())


def child(args: argparse.Namespace) -> None:
    """One timed run in this fresh process: prints seconds and peak RSS as JSON."""
    src, dest = Path(args.src), Path(args.dest)
    if args.child == "ours":  # imports outside the timing (a second or so, the same for any size)
        import yaozarrs  # noqa: F401

        import napari_n5zarr.read.multiscale
        import napari_n5zarr.write.convert.convert
        import napari_n5zarr.write.export.exporter
        import napari_n5zarr.write.export.ome_zarr
        import napari_n5zarr.write.ome  # noqa: F401
    elif args.child == "ts":
        import tensorstore  # noqa: F401
    start = resource.getrusage(resource.RUSAGE_SELF)
    cpu0 = start.ru_utime + start.ru_stime
    t0 = time.perf_counter()
    {"ours": run_ours, "ts": run_tensorstore, "floor": run_floor}[args.child](
        src, dest, args.shards
    )
    seconds = time.perf_counter() - t0
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu = usage.ru_utime + usage.ru_stime - cpu0
    print(
        json.dumps({"seconds": seconds, "rss_mib": usage.ru_maxrss / 1024, "cpu_s": cpu})
    )  # KiB -> MiB


def timed(who: str, src: Path, dest: Path, shards: int) -> dict[str, float]:
    shutil.rmtree(dest, ignore_errors=True)
    done = subprocess.run([sys.executable, __file__, "--child", who, "--src", str(src), "--dest", str(dest),
                           "--shards", str(shards)], capture_output=True, text=True, check=False)  # fmt: skip
    if done.returncode:
        raise SystemExit(f"{who} failed:\n{done.stderr}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if who != "floor":  # the floor writes bare chunks, no array
        check(src, dest)
    return result


def main(argv: list[str] | None = None) -> dict[str, list[dict[str, float]]]:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--size", type=int, default=1024, help="edge of the uint16 cube (1024: 2 GiB)")
    ap.add_argument("--block", type=int, default=64)
    ap.add_argument("--shards", type=int, default=4, help="blocks per shard and axis")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--workdir", default=None, help="keep the source here (built once, reused)")
    ap.add_argument(
        "--floor", action="store_true", help="also time the codec work and writes alone"
    )
    ap.add_argument("--child", choices=("ours", "ts", "floor"), help=argparse.SUPPRESS)
    ap.add_argument("--src", help=argparse.SUPPRESS)
    ap.add_argument("--dest", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(args)
        return {}
    work = Path(args.workdir or tempfile.mkdtemp(prefix="ome-zarr-bench-"))
    src = work / f"src-{args.size}-{args.block}.n5"
    if not (src / "attributes.json").exists():
        t0 = time.perf_counter()
        build_source(src, args.size, args.block)
        print(f"built {src} in {time.perf_counter() - t0:.0f} s")
    mib = args.size**3 * 2 / 2**20
    on_disk = sum(p.stat().st_size for p in src.rglob("*") if p.is_file()) / 2**20
    print(f"source: {args.size}^3 uint16 = {mib:,.0f} MiB at level 0, {len(levels_of(src))} levels, "
          f"{args.block}^3 gzip blocks, {on_disk:,.0f} MiB on disk; shards {args.shards}^3 blocks, zstd 3")  # fmt: skip
    who_runs = ("ours", "ts", "floor") if args.floor else ("ours", "ts")
    runs: dict[str, list[dict[str, float]]] = {who: [] for who in who_runs}
    for _ in range(args.repeat):
        for who in who_runs:  # interleaved
            runs[who].append(timed(who, src, work / f"{who}.ome.zarr", args.shards))
    best = {who: min(r["seconds"] for r in rs) for who, rs in runs.items()}
    rss = {who: max(r["rss_mib"] for r in rs) for who, rs in runs.items()}
    cpu = {who: min(r["cpu_s"] for r in rs) for who, rs in runs.items()}
    labels = {"ours": "napari-n5zarr", "ts": "tensorstore", "floor": "codecs+writes"}
    for who, label in ((w, labels[w]) for w in who_runs):
        times = ", ".join(f"{r['seconds']:.1f}" for r in runs[who])
        print(
            f"{label:14s} best {best[who]:7.1f} s  {mib / best[who]:7.0f} MiB/s  CPU {cpu[who]:6.1f} s  "
            f"peak RSS {rss[who]:6.0f} MiB  (runs: {times} s)"
        )
    ratio = (
        best["ts"] / best["ours"]
        if best["ours"] > 0 and math.isfinite(best["ours"])
        else float("nan")
    )
    print(
        f"ratio tensorstore / ours: {ratio:.2f}x (goal >= 1.2); CPU time ratio {cpu['ts'] / cpu['ours']:.2f}x"
    )
    if args.floor:
        print(
            f"ratio tensorstore / codecs+writes alone: {best['ts'] / best['floor']:.2f}x "
            f"(the most any converter reaches here); ours / floor {best['ours'] / best['floor']:.2f}x"
        )
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)
    return runs


if __name__ == "__main__":
    main()
