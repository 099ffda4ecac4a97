"""What the format tests run over and write (tests/ is on sys.path through conftest.py):
every N5 compression (one setting each), the dtypes, sample arrays, and N5 datasets
written block by block with missing, truncated and padded edge blocks."""

from __future__ import annotations

import itertools
import json
import math
import os
from pathlib import Path

import numpy as np
from zarr.core.buffer.cpu import Buffer
from zarr.core.sync import sync
from zarr.storage import LocalStore

import napari_n5zarr

COMPRESSIONS = {
    "raw": {"type": "raw"},
    "gzip": {"type": "gzip", "level": -1},
    "gzip-zlib": {"type": "gzip", "level": 4, "useZlib": True},
    "bzip2": {"type": "bzip2", "blockSize": 9},
    "xz": {"type": "xz", "preset": 6},
    "lz4": {"type": "lz4", "blockSize": 65536},
    "blosc": {"type": "blosc", "cname": "zstd", "clevel": 5, "shuffle": 1, "blocksize": 0},
    "zstd": {"type": "zstd", "level": 3},
}
TENSORSTORE_COMPRESSIONS = {name: c for name, c in COMPRESSIONS.items() if c["type"] != "lz4"}
"""What tensorstore's n5 driver reads (it has no lz4)."""
COMPRESSION_TYPES = list(dict.fromkeys(c["type"] for c in COMPRESSIONS.values()))
"""Each N5 compression type once (``raw``, ``gzip``, ``bzip2``, ``xz``, ``lz4``, ``blosc``,
``zstd``): what the writers are asked for by name."""
DTYPES = [
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "int8",
    "int16",
    "int32",
    "int64",
    "float32",
    "float64",
]
PAD = 99
"""What padded edge blocks hold beyond the array (readers crop it away)."""


def sample(shape, dtype, seed=0) -> np.ndarray:
    """Random values over the whole range of an integer dtype; normal values for floats."""
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
    return rng.normal(size=shape).astype(dtype)


def write_blockwise(
    root: Path,
    path: str,
    data: np.ndarray,
    block,
    compression,
    *,
    boundary="truncate",
    skip=(),
    attrs=None,
):
    """``data`` (N5 order) as the N5 dataset ``path`` of ``root``, written block by block:
    edge blocks truncated, padded (with :data:`PAD`) or mixed (every other one padded);
    blocks in ``skip`` not written (fill value). Returns the dataset opened."""
    store = LocalStore(root)
    group = napari_n5zarr.open(root, mode="a")
    arr = napari_n5zarr.create_dataset(group, path, shape=data.shape, dtype=data.dtype, chunks=block,
                                       compression=compression, attributes=attrs)  # fmt: skip
    codec = arr.metadata.codecs[0]
    grid = [math.ceil(s / b) for s, b in zip(data.shape, block, strict=True)]
    for n, pos in enumerate(itertools.product(*map(range, grid))):
        if pos in skip:
            continue
        piece = data[
            tuple(
                slice(p * b, min((p + 1) * b, s))
                for p, b, s in zip(pos, block, data.shape, strict=True)
            )
        ]
        if piece.shape != tuple(block) and (
            boundary == "pad" or (boundary == "mixed" and n % 2 == 0)
        ):
            padded = np.full(block, PAD, dtype=data.dtype)
            padded[tuple(slice(0, s) for s in piece.shape)] = piece
            piece = padded
        sync(
            store.set(
                f"{path}/" + "/".join(map(str, pos)), Buffer.from_bytes(codec.encode_block(piece))
            )
        )
    return napari_n5zarr.open(root / path)


METADATA_ONLY_ATTRS = json.dumps({"dimensions": [64, 64, 8], "blockSize": [32, 32, 8], "dataType": "uint16",
                                  "compression": {"type": "gzip", "level": -1}})  # fmt: skip


def write_container(root: Path, names: list[str]) -> Path:
    """Metadata-only datasets at the given relative paths (fast: no zarr, no blocks): the
    browser's tests and ``benchmarks/browser_stalls.py`` list thousands of them."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "attributes.json").write_text('{"n5": "4.0.0"}')
    for name in names:
        os.makedirs(root / name, exist_ok=True)
        (root / name / "attributes.json").write_text(METADATA_ONLY_ATTRS)
    return root
