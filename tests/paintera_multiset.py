"""A Paintera label-multiset container written by hand, as imglib2-label-multisets and n5-java
write one (see /work/shared/NOTES.md "Paintera label multisets"):

    c.n5/                      {"n5": "4.0.0"}
      raw/                     a plain uint8 dataset (N5 Viewer-free, uncalibrated)
      labels/fragments/        {"painteraData": {"type": "label"}, "maxId": ...}
        data/                  {"multiScale": true, "resolution", "offset"}
          s0, s1/              dataType uint8, isLabelMultiset true, varlength (mode 1) blocks
        unique-labels/s0/      uint64, varlength blocks (Paintera bookkeeping)

Block: u16 BE mode 1, u16 BE ndim, ndim x u32 BE block shape, u32 BE numElements (the payload's
byte count), then the (compressed) payload: int32 BE argMaxSize (0), int32 BE listOffset per
voxel (x fastest), then the distinct lists in little endian: int32 numEntries, then per entry
int64 id, int32 count.
"""

from __future__ import annotations

import gzip
import itertools
import json
import math
import struct
from collections import Counter
from pathlib import Path

import numpy as np

BLOCK = (8, 8, 4)  # N5 order
IDS = (np.arange(20 * 12 * 6).reshape(20, 12, 6) // 37 + 1).astype("uint64")  # N5 order x, y, z


def _json(folder: Path, doc: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "attributes.json").write_text(json.dumps(doc))


def multiset_payload(lists: list[Counter]) -> bytes:
    """One block's payload; ``lists`` per voxel, x fastest."""
    offsets, data, seen = [], bytearray(), {}
    for entries in lists:
        key = tuple(sorted(entries.items()))
        if key not in seen:
            seen[key] = len(data)
            data += struct.pack("<i", len(key)) + b"".join(struct.pack("<qi", i, c) for i, c in key)
        offsets.append(seen[key])
    return struct.pack(">i", 0) + struct.pack(f">{len(offsets)}i", *offsets) + bytes(data)


def varlength_block(shape: tuple[int, ...], payload: bytes, count: int, compression: str) -> bytes:
    header = struct.pack(f">HH{len(shape)}II", 1, len(shape), *shape, count)
    return header + (gzip.compress(payload) if compression == "gzip" else payload)


def write_multiset_level(folder: Path, lists: np.ndarray, factors: tuple[float, ...] | None, compression: str) -> None:
    """``lists``: an object array (N5 order) of Counters, one per voxel."""
    attrs = {"dataType": "uint8", "dimensions": list(lists.shape), "blockSize": list(BLOCK), "isLabelMultiset": True,
             "compression": {"type": "gzip", "useZlib": False, "level": -1} if compression == "gzip" else {"type": "raw"}}  # fmt: skip
    if factors is not None:
        attrs.update(downsamplingFactors=list(factors), maxNumEntries=-1)
    _json(folder, attrs)
    grid = [range(math.ceil(s / b)) for s, b in zip(lists.shape, BLOCK, strict=True)]
    for index in itertools.product(*grid):
        cell = lists[tuple(slice(i * b, (i + 1) * b) for i, b in zip(index, BLOCK, strict=True))]
        payload = multiset_payload(list(cell.ravel(order="F")))  # x fastest
        path = folder.joinpath(*map(str, index))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(varlength_block(cell.shape, payload, len(payload), compression))


def write_paintera_container(root: Path, compression: str = "gzip") -> Path:
    """``root`` (``c.n5``) as in the module docstring; returns it."""
    import napari_n5zarr

    group = napari_n5zarr.open(root, mode="w")
    raw = napari_n5zarr.create_dataset(group, "raw", shape=IDS.shape, dtype="uint8", chunks=BLOCK)
    raw[...] = (IDS * 7 % 256).astype("uint8")
    fragments = root / "labels" / "fragments"
    _json(root / "labels", {})
    _json(fragments, {"painteraData": {"type": "label"}, "maxId": int(IDS.max())})
    _json(fragments / "data", {"multiScale": True, "resolution": [4.0, 4.0, 40.0], "offset": [0.0, 0.0, 0.0]})
    s0 = np.empty(IDS.shape, object)
    for idx in np.ndindex(IDS.shape):
        s0[idx] = Counter({int(IDS[idx]): 1})
    write_multiset_level(fragments / "data" / "s0", s0, None, compression)
    s1 = np.empty(tuple(math.ceil(s / f) for s, f in zip(IDS.shape, (2, 2, 1), strict=True)), object)
    for idx in np.ndindex(s1.shape):
        window = IDS[2 * idx[0] : 2 * idx[0] + 2, 2 * idx[1] : 2 * idx[1] + 2, idx[2]]
        s1[idx] = Counter(int(v) for v in window.ravel())
    write_multiset_level(fragments / "data" / "s1", s1, (2.0, 2.0, 1.0), compression)
    unique = np.unique(IDS)
    _json(fragments / "unique-labels", {"multiScale": True})
    _json(fragments / "unique-labels" / "s0", {"dataType": "uint64", "dimensions": list(IDS.shape), "blockSize": list(IDS.shape),
                                                "compression": {"type": "raw"}})  # fmt: skip
    (fragments / "unique-labels" / "s0" / "0" / "0").mkdir(parents=True)
    (fragments / "unique-labels" / "s0" / "0" / "0" / "0").write_bytes(
        varlength_block(IDS.shape, unique.astype(">u8").tobytes(), len(unique), "raw")
    )
    return root
