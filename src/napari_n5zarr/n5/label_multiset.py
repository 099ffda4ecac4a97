"""Paintera label multisets: one stored block -> the label Paintera shows per voxel (uint64).

A label-multiset dataset (``isLabelMultiset: true``, ``dataType: uint8``) stores, per voxel,
the multiset of labels under it, serialized by imglib2-label-multisets' ``LabelUtils``
(checked against 0.15.1; see ``NOTES.md``). Its blocks are N5 varlength blocks (mode 1)
whose element count is the payload's byte count (mode 0 only where that count equals the
voxel count). Decompressed payload:

* ``int32 BE argMaxSize``: 0 (since 0.11.0) or one per voxel (older writers);
* ``int64 BE argMax[argMaxSize]``;
* ``int32 BE listOffset[n]``, n = voxels of the block's grid cell (x fastest), taken from
  the dataset's grid, not from the header (edge headers of coarser levels can be larger);
* the list data, LITTLE endian: per distinct list ``int32 numEntries``, then per entry
  ``int64 id, int32 count`` (identical lists stored once, at the offset voxels point to).

The label of a voxel is its ``argMax``: the stored one when the block has one per voxel,
else the entry of highest count, ties to the smaller id (signed, as Java compares longs);
an empty list gives :data:`INVALID`. Computed once per distinct list, then indexed per voxel.

Every size is checked before anything is allocated; errors are :class:`N5BlockError`
naming the block (``where``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from napari_n5zarr.errors import N5BlockError, located
from napari_n5zarr.n5.block_format import MODE_DEFAULT, MODE_VARLENGTH, Decompress, parse_header
from napari_n5zarr.n5.constants import max_block_bytes

INVALID = 2**64 - 2
"""imglib2's ``Label.INVALID`` (0xfffffffffffffffe, -2 as a Java long): the label of a voxel
whose multiset is empty."""
BACKGROUND = 0
"""``Label.BACKGROUND``: what blocks never written read as."""
ATTRIBUTE = "isLabelMultiset"
"""The dataset attribute that marks a label multiset."""
MAX_BYTES_PER_VOXEL = 256
"""Largest decompressed payload a block may declare per voxel (plus 64 KiB): an offset, a
legacy argMax and the voxel's share of the lists fit many times over; a forged element
count cannot make the reader allocate more."""
_ENTRY = 12  # int64 id + int32 count


def is_label_multiset(attrs: Mapping[str, Any] | None) -> bool:
    """True for the attributes of a label-multiset dataset."""
    return bool(attrs) and attrs.get(ATTRIBUTE) is True  # type: ignore[union-attr]


def stored_payload(
    data_type: Any, attrs: Mapping[str, Any] | None, block: Sequence[int]
) -> tuple[int, bool, str]:
    """(the most decoded payload bytes a stored block of the dataset holds, whether its
    blocks may be varlength, what that is for messages): ``blockSize`` x item size, or
    for a label multiset :func:`payload_cap` of its voxels (its stored ``uint8`` says
    nothing about how large its blocks may be)."""
    voxels = math.prod(block)
    if is_label_multiset(attrs):
        return (
            payload_cap(voxels),
            True,
            f"a label-multiset block of {voxels} voxels ({payload_cap(voxels)} bytes)",
        )
    itemsize = np.dtype(data_type).itemsize
    return voxels * itemsize, False, f"a {list(block)} block of {itemsize}-byte elements"


def payload_cap(voxels: int) -> int:
    """Largest decompressed payload accepted for a block of ``voxels`` voxels."""
    return min(max_block_bytes(), MAX_BYTES_PER_VOXEL * voxels + 65536)


def cell_shape(index: Sequence[int], shape: Sequence[int], block: Sequence[int]) -> tuple[int, ...]:
    """The grid cell of block ``index`` (N5 order): the block size cut at the array's end."""
    out = tuple(min(b, n - i * b) for i, n, b in zip(index, shape, block, strict=True))
    if any(s <= 0 for s in out):
        raise N5BlockError(f"block index {list(index)} is outside the array's grid")
    return out


def decode_multiset_block(
    data: bytes | memoryview | np.ndarray,
    cell: tuple[int, ...],
    where: str | None,
    decompress: Decompress,
) -> np.ndarray:
    """The argMax of every voxel of one stored block (header and payload) as a uint64 array
    of shape ``cell`` (the grid cell, N5 order; an F-order view, its ``.T`` is C-contiguous).
    N5BlockError naming ``where`` for anything that is not such a block."""
    raw = (
        np.frombuffer(data, dtype=np.uint8)
        if not isinstance(data, np.ndarray)
        else data.view(np.uint8).ravel()
    )
    try:
        header = parse_header(raw)
        if header.mode not in (MODE_DEFAULT, MODE_VARLENGTH):
            raise N5BlockError(
                f"mode {header.mode} block; label multisets are stored in varlength (1) mode"
            )
        if len(header.shape) != len(cell):
            raise N5BlockError(
                f"header has {len(header.shape)} dimensions, the array has {len(cell)}"
            )
        voxels = math.prod(cell)
        nbytes = header.num_elements if header.mode == MODE_VARLENGTH else math.prod(header.shape)
        assert nbytes is not None
        least = 4 + 4 * voxels
        if nbytes < least:
            raise N5BlockError(f"payload of {nbytes} bytes; {voxels} voxels need at least {least}")
        if nbytes > payload_cap(voxels):
            raise N5BlockError(
                f"payload of {nbytes} bytes is over the {payload_cap(voxels)} allowed for {voxels} voxels"
            )
        payload = decompress(raw[header.size :], nbytes)
        labels = argmax_per_voxel(payload, voxels)
    except N5BlockError as e:
        raise located(e, where) from None
    return labels.reshape(cell[::-1]).T


def argmax_per_voxel(payload: np.ndarray, voxels: int) -> np.ndarray:
    """The label of each voxel (x fastest) of a decompressed multiset payload (uint64)."""
    size = len(payload)
    (arg_size,) = payload[:4].view(">i4").tolist()
    if arg_size not in (0, voxels):
        raise N5BlockError(f"argMaxSize {arg_size}; it must be 0 or the block's {voxels} voxels")
    start = 4 + 8 * arg_size
    lists_at = start + 4 * voxels
    if lists_at > size:
        raise N5BlockError(
            f"payload of {size} bytes is too short for {arg_size} argMax values and {voxels} list offsets"
        )
    offsets = payload[start:lists_at].view(">i4").astype(np.int32)  # native: compared below
    lists = payload[lists_at:]
    starts, lengths = _runs(offsets)
    firsts, inverse = _distinct(offsets if starts is None else offsets[starts], len(lists))
    table = _list_argmax(lists, firsts)
    if arg_size:
        return payload[4:start].view(">u8").astype(np.uint64)
    return table[inverse] if lengths is None else np.repeat(table[inverse], lengths)


def _runs(offsets: np.ndarray) -> tuple[np.ndarray | None, np.ndarray | None]:
    """(where each run of voxels pointing at the same list starts, the runs' lengths), or
    (None, None) when runs are short. A fragment covers many voxels along x, so the lists
    are looked up once per run and repeated: ~4x faster per block than once per voxel."""
    change = np.flatnonzero(offsets[1:] != offsets[:-1]) + 1
    if len(offsets) < 2 or 4 * len(change) > len(offsets):
        return None, None
    starts = np.concatenate((np.zeros(1, change.dtype), change))
    return starts, np.diff(np.append(starts, len(offsets)))


def _distinct(offsets: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """(sorted distinct offsets as int64, each voxel's index into them). Lists written one
    after another start at multiples of 4 (4 + 12 n bytes each): then a mark per 4-byte slot
    finds them in linear time (a sort, ``np.unique``, costs ~10x more per block)."""
    at = offsets.astype(np.int32, copy=False)  # native order: the arithmetic below runs on it
    if len(at) and at.min() >= 0 and at.max() < size and not np.bitwise_or.reduce(at) & 3:
        slots = at >> 2
        mark = np.zeros(size // 4 + 1, dtype=bool)
        mark[slots] = True
        rank = np.cumsum(mark, dtype=np.int32) - 1
        return np.flatnonzero(mark).astype(np.int64) << 2, rank[slots]
    firsts, inverse = np.unique(at, return_inverse=True)  # odd offsets: checked in _list_argmax
    return firsts.astype(np.int64), inverse.ravel()


def _list_argmax(lists: np.ndarray, firsts: np.ndarray) -> np.ndarray:
    """argMax (uint64) of the lists starting at ``firsts`` (sorted, distinct) in ``lists``;
    every list checked to lie inside ``lists``, their entries in all at most its size."""
    size = len(lists)
    if len(firsts) and (firsts[0] < 0 or firsts[-1] + 4 > size):
        bad = firsts[0] if firsts[0] < 0 else firsts[-1]
        raise N5BlockError(f"list offset {bad} is outside the {size} bytes of list data")
    counts = (
        lists[firsts[:, None] + np.arange(4)].view("<i4").ravel().astype(np.int64)
        if len(firsts)
        else firsts
    )
    if len(counts) and counts.min() < 0:
        raise N5BlockError(f"a list has {counts.min()} entries")
    ends = firsts + 4 + _ENTRY * counts
    if len(ends) and ends.max() > size:
        raise N5BlockError(
            f"a list of {counts[np.argmax(ends)]} entries runs past the {size} bytes of list data"
        )
    if int((4 + _ENTRY * counts).sum()) > size:
        raise N5BlockError(f"the lists' entries add up to more than the {size} bytes of list data")
    table = np.full(len(firsts), INVALID, np.uint64)
    total = int(counts.sum())
    if not total:
        return table
    owner = np.repeat(np.arange(len(firsts)), counts)
    rank = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
    at = np.repeat(firsts + 4, counts) + _ENTRY * rank
    ids = lists[at[:, None] + np.arange(8)].view("<i8").ravel()
    hits = lists[at[:, None] + np.arange(8, 12)].view("<i4").ravel().astype(np.int64)
    order = np.lexsort((ids, -hits, owner))  # per list: highest count first, then smaller signed id
    best = order[np.r_[True, owner[order][1:] != owner[order][:-1]]]
    table[owner[best]] = ids[best].view(np.uint64)
    return table


def apply_assignment(
    labels: np.ndarray, assignment: tuple[np.ndarray, np.ndarray] | None
) -> np.ndarray:
    """``labels`` with every fragment that ``assignment`` (sorted fragments, their segments)
    names replaced by its segment; other labels stay as they are (Paintera's rule)."""
    if assignment is None or not len(assignment[0]) or not labels.size:
        return labels
    keys, values = assignment
    flat = labels.ravel()
    at = np.searchsorted(keys, flat).clip(0, len(keys) - 1)
    hit = keys[at] == flat
    return np.where(hit, values[at], flat).reshape(labels.shape).astype(labels.dtype, copy=False)


def assignment_table(pairs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sorted distinct fragments, their segments) from Paintera's ``fragment-segment-assignment``
    read in napari order: shape (2, N), row 0 the fragments, row 1 their segments
    (``N5FragmentSegmentAssignmentPersister``: N5 dimensions [N, 2], block 0/0 the
    fragments, block 0/1 the segments). A fragment listed twice keeps its last segment, as
    Paintera's loader (``N5FragmentSegmentAssignmentInitialLut``: ``TLongLongHashMap(keys,
    values)`` puts the pairs in order)."""
    pairs = np.asarray(pairs, dtype=np.uint64)
    if pairs.ndim != 2 or pairs.shape[0] != 2:
        raise N5BlockError(
            f"fragment-segment-assignment of shape {list(pairs.shape[::-1])}; expected [N, 2]"
        )
    order = np.argsort(pairs[0], kind="stable")
    keys, values = pairs[0][order], pairs[1][order]
    last = (
        np.append(keys[1:] != keys[:-1], True) if len(keys) else np.zeros(0, bool)
    )  # the last of each run
    return keys[last], values[last]


__all__ = [
    "ATTRIBUTE",
    "BACKGROUND",
    "INVALID",
    "apply_assignment",
    "argmax_per_voxel",
    "assignment_table",
    "cell_shape",
    "decode_multiset_block",
    "is_label_multiset",
    "payload_cap",
    "stored_payload",
]
