"""A Paintera label-multiset container written by hand, as imglib2-label-multisets and n5-java
write one (see /work/shared/NOTES.md "Paintera label multisets"):

    c.n5/                      {"n5": "4.0.0"}
      raw/                     a plain uint8 dataset (N5 Viewer-free, uncalibrated)
      labels/fragments/        {"painteraData": {"type": "label"}, "maxId": ...}
        data/                  {"multiScale": true, "resolution", "offset"}
          s0, s1/              dataType uint8, isLabelMultiset true, varlength (mode 1) blocks
        unique-labels/s0/      uint64, varlength blocks (Paintera bookkeeping)
        fragment-segment-assignment/   uint64 [N, 2]: block 0/0 fragments, 0/1 their segments

s0 blocks alternate between a stored argMax (older writers) and none; block :data:`MISSING`
of s0 is never written (background); s1 edge blocks carry the full block size in their
header, as the downscaler writes them (the reader takes the cell from the grid).

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


MISSING = (1, 1, 1)
"""The s0 block never written."""
ASSIGNMENT = {1: 1000, 2: 1000, 5: 1001, 9: 1001, 10: 1000}
"""Fragment -> segment pairs of the fixture's fragment-segment-assignment."""


def argmax(entries: Counter) -> int:
    """Paintera's label of a multiset (independent of the reader): highest count, ties to the
    smaller id (signed); an empty multiset is INVALID (-2 as a Java long)."""
    if not entries:
        return -2
    return max(entries.items(), key=lambda item: (item[1], -item[0]))[0]


def expected_s0() -> np.ndarray:
    out = IDS.copy()
    out[tuple(slice(i * b, (i + 1) * b) for i, b in zip(MISSING, BLOCK, strict=True))] = 0
    return out


def s1_lists() -> np.ndarray:
    """s1's multisets (object array, N5 order): the 2x2x1 windows of s0's labels."""
    s1 = np.empty(
        tuple(math.ceil(s / f) for s, f in zip(IDS.shape, (2, 2, 1), strict=True)), object
    )
    for idx in np.ndindex(s1.shape):
        window = IDS[2 * idx[0] : 2 * idx[0] + 2, 2 * idx[1] : 2 * idx[1] + 2, idx[2]]
        s1[idx] = Counter(int(v) for v in window.ravel())
    return s1


def expected_s1() -> np.ndarray:
    lists = s1_lists()
    return np.vectorize(argmax, otypes=[np.uint64])(lists)


def segments(labels: np.ndarray) -> np.ndarray:
    return np.vectorize(lambda v: ASSIGNMENT.get(int(v), int(v)), otypes=[np.uint64])(labels)


def multiset_payload(lists: list[Counter], store_argmax: bool = False) -> bytes:
    """One block's payload; ``lists`` per voxel, x fastest; with ``store_argmax`` one
    argMax per voxel (as writers before imglib2-label-multisets 0.11.0)."""
    offsets, data, seen = [], bytearray(), {}
    for entries in lists:
        key = tuple(sorted(entries.items()))
        if key not in seen:
            seen[key] = len(data)
            data += struct.pack("<i", len(key)) + b"".join(struct.pack("<qi", i, c) for i, c in key)
        offsets.append(seen[key])
    head = struct.pack(">i", 0)
    if store_argmax:
        head = struct.pack(">i", len(lists)) + struct.pack(
            f">{len(lists)}q", *(argmax(c) for c in lists)
        )
    return head + struct.pack(f">{len(offsets)}i", *offsets) + bytes(data)


def varlength_block(shape: tuple[int, ...], payload: bytes, count: int, compression: str) -> bytes:
    header = struct.pack(f">HH{len(shape)}II", 1, len(shape), *shape, count)
    return header + (gzip.compress(payload) if compression == "gzip" else payload)


def write_multiset_level(
    folder: Path,
    lists: np.ndarray,
    factors: tuple[float, ...] | None,
    compression: str,
    *,
    argmax_every: int = 0,
    skip: tuple[int, ...] | None = None,
    full_headers: bool = False,
) -> None:
    """``lists``: an object array (N5 order) of Counters, one per voxel. ``argmax_every``:
    every so many blocks store their argMax (0: none); ``skip``: a block not written;
    ``full_headers``: edge blocks say the full block size in their header."""
    attrs = {"dataType": "uint8", "dimensions": list(lists.shape), "blockSize": list(BLOCK), "isLabelMultiset": True,
             "compression": {"type": "gzip", "useZlib": False, "level": -1} if compression == "gzip" else {"type": "raw"}}  # fmt: skip
    if factors is not None:
        attrs.update(downsamplingFactors=list(factors), maxNumEntries=-1)
    _json(folder, attrs)
    grid = [range(math.ceil(s / b)) for s, b in zip(lists.shape, BLOCK, strict=True)]
    for k, index in enumerate(itertools.product(*grid)):
        if index == skip:
            continue
        cell = lists[tuple(slice(i * b, (i + 1) * b) for i, b in zip(index, BLOCK, strict=True))]
        payload = multiset_payload(
            list(cell.ravel(order="F")), bool(argmax_every) and k % argmax_every == 0
        )  # x fastest
        path = folder.joinpath(*map(str, index))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(
            varlength_block(
                BLOCK if full_headers else cell.shape, payload, len(payload), compression
            )
        )


def write_paintera_container(
    root: Path, compression: str = "gzip", assignment: bool = False, block_lookup: bool = False
) -> Path:
    """``root`` (``c.n5``) as in the module docstring (with ``block_lookup``, Paintera's
    ``label-to-block-mapping`` too: :func:`write_label_to_block_mapping`); returns it."""
    import napari_n5zarr

    group = napari_n5zarr.open(root, mode="w")
    raw = napari_n5zarr.create_dataset(group, "raw", shape=IDS.shape, dtype="uint8", chunks=BLOCK)
    raw[...] = (IDS * 7 % 256).astype("uint8")
    fragments = root / "labels" / "fragments"
    _json(root / "labels", {})
    _json(fragments, {"painteraData": {"type": "label"}, "maxId": int(IDS.max())})
    _json(
        fragments / "data",
        {"multiScale": True, "resolution": [4.0, 4.0, 40.0], "offset": [0.0, 0.0, 0.0]},
    )
    s0 = np.empty(IDS.shape, object)
    for idx in np.ndindex(IDS.shape):
        s0[idx] = Counter({int(IDS[idx]): 1})
    write_multiset_level(
        fragments / "data" / "s0", s0, None, compression, argmax_every=2, skip=MISSING
    )
    write_multiset_level(
        fragments / "data" / "s1", s1_lists(), (2.0, 2.0, 1.0), compression, full_headers=True
    )
    unique = np.unique(IDS)
    _json(fragments / "unique-labels", {"multiScale": True})
    _json(fragments / "unique-labels" / "s0", {"dataType": "uint64", "dimensions": list(IDS.shape), "blockSize": list(IDS.shape),
                                                "compression": {"type": "raw"}})  # fmt: skip
    (fragments / "unique-labels" / "s0" / "0" / "0").mkdir(parents=True)
    (fragments / "unique-labels" / "s0" / "0" / "0" / "0").write_bytes(
        varlength_block(IDS.shape, unique.astype(">u8").tobytes(), len(unique), "raw")
    )
    if assignment:
        write_assignment(fragments / "fragment-segment-assignment", ASSIGNMENT)
    if block_lookup:
        write_label_to_block_mapping(fragments)
    return root


def write_assignment(folder: Path, pairs: dict[int, int]) -> None:
    """As Paintera's N5FragmentSegmentAssignmentPersister: [N, 2] uint64, blocks [N, 1]."""
    n = len(pairs)
    _json(
        folder,
        {
            "dataType": "uint64",
            "dimensions": [n, 2],
            "blockSize": [max(n, 1), 1],
            "compression": {"type": "raw"},
        },
    )
    for column, values in enumerate((list(pairs), list(pairs.values()))):
        (folder / "0").mkdir(exist_ok=True)
        (folder / "0" / str(column)).write_bytes(
            struct.pack(">HHII", 0, 2, n, 1) + struct.pack(f">{n}Q", *values)
        )


LONG_MAX = 2**63 - 1
"""Java's Long.MAX_VALUE: the ``dimensions`` of every ``label-to-block-mapping/sN``."""


def write_label_to_block_mapping(fragments: Path, levels: int = 3, step: int = 10000) -> None:
    """As label-utilities-spark's ``LabelToBlockMapping.createMappingWithMultiscaleCheckN5``
    and label-utilities-n5's ``LabelBlockLookupFromN5``: the group carries ``labelBlockLookup``;
    each ``sN`` is int8 ``[Long.MAX_VALUE]``, blocks ``[step]``, gzip; block ``id // step``
    holds the serialized map as a ``ByteArrayDataBlock`` of size ``[step]`` whose byte count
    differs from it (n5-java writes it in varlength mode)."""
    group = fragments / "label-to-block-mapping"
    _json(
        group,
        {
            "labelBlockLookup": {
                "type": "n5-filesystem-relative",
                "scaleDatasetPattern": "label-to-block-mapping/s%d",
            }
        },
    )
    for level in range(levels):
        folder = group / f"s{level}"
        _json(folder, {"dataType": "int8", "dimensions": [LONG_MAX], "blockSize": [step],
                       "compression": {"type": "gzip", "useZlib": False, "level": -1}})  # fmt: skip
        # one entry: label 1 -> one interval (min x, y, z, max x, y, z), int64 BE
        payload = struct.pack(">qi6q", 1, 1, 0, 0, 0, 7, 7, 3)
        (folder / "0").write_bytes(varlength_block((step,), payload, len(payload), "gzip"))
