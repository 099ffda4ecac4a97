"""Paintera label multisets vs plain uint64 labels: time to read one 512x512 plane.

    PYTHONPATH=src python benchmarks/paintera.py [--size 512] [--depth 64] [--repeat 5]

Data (written once into a temporary folder): the same labels (fragments of ~16^3 voxels) as
an N5 label-multiset dataset (varlength blocks, no stored argMax, 64^3 gzip blocks, as
Paintera writes s0) and as a uint64 default-mode dataset (64^3 gzip). Each row: best of
``--repeat`` reads of a z-plane from a fresh block cache (the blocks of one slab decoded).
Reported, never asserted.
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import struct
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

BLOCK = 64


def labels(size: int, depth: int) -> np.ndarray:
    """N5 order (x, y, z) fragment ids: 16^3 cubes."""
    x, y, z = np.meshgrid(
        np.arange(size) // 16, np.arange(size) // 16, np.arange(depth) // 16, indexing="ij"
    )
    return (x + 100 * y + 10_000 * z + 1).astype(np.uint64)


def multiset_block(cell: np.ndarray) -> bytes:
    flat = cell.ravel(order="F")
    ids, inverse = np.unique(flat, return_inverse=True)
    lists = b"".join(struct.pack("<iqi", 1, int(i), 1) for i in ids)
    offsets = (np.arange(len(ids)) * 16)[inverse].astype(">i4")
    payload = struct.pack(">i", 0) + offsets.tobytes() + lists
    return struct.pack(">HH3II", 1, 3, *cell.shape, len(payload)) + gzip.compress(payload, 6)


def write(root: Path, ids: np.ndarray) -> None:
    import napari_n5zarr

    group = napari_n5zarr.open(root, mode="w")
    plain = napari_n5zarr.create_dataset(
        group, "plain", shape=ids.shape, dtype="uint64", chunks=(BLOCK,) * 3
    )
    plain[...] = ids
    ms = root / "multiset"
    ms.mkdir()
    (ms / "attributes.json").write_text(json.dumps({
        "dataType": "uint8", "dimensions": list(ids.shape), "blockSize": [BLOCK] * 3, "isLabelMultiset": True,
        "compression": {"type": "gzip", "useZlib": False, "level": 6}}))  # fmt: skip
    for index in itertools.product(*(range(-(-n // BLOCK)) for n in ids.shape)):
        cell = ids[tuple(slice(i * BLOCK, (i + 1) * BLOCK) for i in index)]
        path = ms.joinpath(*map(str, index))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(multiset_block(cell))


def plane_time(root: Path, name: str, z: int, repeat: int) -> tuple[float, np.ndarray]:
    import napari_n5zarr
    from napari_n5zarr.read.block_cache import block_cache
    from napari_n5zarr.read.levels import LazyLevel
    from napari_n5zarr.read.multiset_levels import MultisetLevel, is_multiset_array

    best, out = float("inf"), None
    for _ in range(repeat):
        block_cache().clear()
        array: Any = napari_n5zarr.open(root / name)
        level = (MultisetLevel if is_multiset_array(array) else LazyLevel)(array, n5_order=True)
        t = time.perf_counter()
        out = np.asarray(level[z])
        best = min(best, time.perf_counter() - t)
    assert out is not None
    return best, out


def main(argv: list[str] | None = None) -> dict[str, float]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=512)
    ap.add_argument("--depth", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    ids = labels(args.size, args.depth)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "bench.n5"
        write(root, ids)
        z = args.depth // 2
        rows = {}
        for name in ("plain", "multiset"):
            seconds, plane = plane_time(root, name, z, args.repeat)
            assert (plane == ids[:, :, z].T).all(), name
            rows[name] = seconds
            print(f"{name:9s} {args.size}x{args.size} plane: {seconds * 1000:8.1f} ms")
        print(f"multiset / plain: {rows['multiset'] / rows['plain']:.2f}x")
        return rows


if __name__ == "__main__":
    main(sys.argv[1:])
