"""Edits written back into a local N5, dual N5 + Zarr v3, or standard Zarr v3 / OME-Zarr
integer dataset or pyramid, block by block: the proofreading save path (no napari here). The
pyramid, its levels and their block structure are the read wing's
(:mod:`napari_n5zarr.write.edit.label_pyramid`); the bytes read and written under the lock go
through the dataset folder alone; how one stored object (an N5 block, a Zarr chunk, a whole
shard) is decoded and encoded is the format's
(:mod:`napari_n5zarr.write.edit.block_store`), the only part that differs between formats.

* Level 0: read-modify-write of the touched blocks only, **under the lock, from the block
  as it is on disk at save time**: a layer's edit (:class:`Change`) writes only the voxels
  the layer changed, so another editor's saved voxels and other tools' writes survive;
  where such a voxel was changed on disk too, the layer's value wins and the result counts
  it (:attr:`SaveResult.overwritten`). Each block keeps its dataset's compression and its
  own edge convention (its header: truncated or padded; a new edge block follows the
  dataset's corner block, else n5-java's truncation). In a sharded Zarr array the blocks are
  the inner chunks and the stored object replaced atomically is the whole shard.
* Coarser levels: in the blocks covering the changed region, the voxels computed from a
  changed voxel recomputed from the level below with export's downsampling
  (:func:`napari_n5zarr.write.pyramid.downsample_block`, mode for labels), so the pyramid
  stays what ``export`` of the edited array would write. Writing a level path
  (``C.n5/s0``) updates its pyramid; a coarser level alone is refused.
* Values that the dataset's dtype cannot hold are refused (never wrapped); a dataset whose
  dtype, block size or shape changed since the layer opened is refused.
* Only blocks whose values changed are written; every other file (metadata included) is
  left alone, same bytes and same mtime.
* Atomic and recoverable: the new blocks are staged beside their targets
  (``<block>.n5zarr-staged``, fsynced) under a journal (:data:`JOURNAL`, in the dataset or
  pyramid folder) that first says ``staging`` then ``committing`` and records each block's
  checksum before and after; each staged block is then renamed over its target (a reader
  sees old or new, never a torn block) and the journal removed. :func:`recover` (run by
  every save, and by an editable open) rolls a ``staging`` journal back and redoes a
  ``committing`` one, block by block, only where the block on disk is still the one the
  journal recorded as "before" (a block written since is left as it is, and said so).
* Every file is reached through :class:`~napari_n5zarr.write.dataset_files.DatasetFolder`:
  never through a link, never outside the dataset folder; anything planted at the journal's
  or a staged block's name is refused, naming it.
* Locks: the export lock of the dataset (exclusive) and of every folder above it up to the
  container root (shared), so a save and an export of an enclosing group never interleave.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from napari_n5zarr.block_grid import block_ranges, overlap
from napari_n5zarr.errors import NotEditableError, StaleLayerError, ValuesDoNotFitError  # noqa: F401 (NotEditableError: its old home)
from napari_n5zarr.write import pyramid
from napari_n5zarr.write.dataset_files import DatasetFolder
from napari_n5zarr.write.edit.journal import NewBlock, commit, lock, recover, sha
from napari_n5zarr.write.edit.label_pyramid import (
    Index,
    Level,
    Signature,
    block_values,
    decode,
    inside_values,
    pyramid_levels,
    read_raw,
    read_region,
    steps,
)


@dataclass
class SaveResult:
    """What a save wrote: block files (shards, when sharded) per level (finest first), bytes
    written, what an interrupted save's recovery did, and how many voxels changed on disk
    since the layer read them were overwritten with the layer's values."""

    blocks: list[int]
    bytes_written: int
    recovered: str | None = None
    overwritten: int = 0
    merged: dict[Index, np.ndarray] = field(default_factory=dict, repr=False)
    """Level-0 blocks as saved (values inside the array): what the layer shows from now on."""

    @property
    def total_blocks(self) -> int:
        return sum(self.blocks)


@dataclass
class Change:
    """A layer's edit of one level-0 block: the values it read (``before``) and holds now
    (``after``), both inside the array, napari order. Only voxels that differ are written."""

    before: np.ndarray
    after: np.ndarray


# -- values ------------------------------------------------------------------------------


def check_fits(values: np.ndarray, dtype: np.dtype, where: str) -> None:
    """Refuse ``values`` that ``dtype`` cannot hold (how many, their range): never wrapped."""
    if values.size == 0 or values.dtype == dtype:
        return
    if values.dtype.kind == "f" and not np.array_equal(values, np.round(values)):
        raise ValuesDoNotFitError(
            f"{where}: values are not whole numbers ({values.dtype}); labels are {dtype} integers"
        )
    if values.dtype.kind not in "iubf":
        raise ValuesDoNotFitError(
            f"{where}: cannot write {values.dtype} values into a {dtype} dataset"
        )
    info = np.iinfo(dtype)
    lo, hi = values.min(), values.max()
    if lo >= info.min and hi <= info.max:
        return
    bad = int(np.count_nonzero((values < info.min) | (values > info.max)))
    raise ValuesDoNotFitError(
        f"{where}: {bad} value{'s' if bad != 1 else ''} do not fit {dtype} ({info.min}..{info.max}); they range "
        f"{lo.item()}..{hi.item()}; nothing was written"
    )


def as_values(array: Any, dtype: np.dtype, where: str) -> np.ndarray:
    """``array`` (any integer input: arrays, lists) as ``dtype``, refused if a value does not fit."""
    values = np.asarray(array)
    if values.dtype.kind not in "iubf":
        raise ValuesDoNotFitError(
            f"{where}: cannot write {values.dtype} values into a {dtype} dataset"
        )
    check_fits(values, dtype, where)
    return values.astype(dtype, copy=False)


# -- new blocks ----------------------------------------------------------------------------


def edge_convention(level: Level, folder: DatasetFolder) -> str:
    """How new edge blocks of ``level`` are stored (``"pad"`` or ``"truncate"``), from the
    blocks stored now (:meth:`~napari_n5zarr.write.edit.block_store.BlockStore.edge_convention`)."""
    return level.blocks.edge_convention(lambda index: read_raw(folder, level, index))


@dataclass
class Changed:
    """A block whose values change: the new values (inside the array, napari order), the
    block as stored (None: missing), its stored object's bytes when the save read them, and
    the box (``[lo, hi)`` in the block) holding every voxel that changes."""

    values: np.ndarray
    stored: np.ndarray | None
    raw: bytes | None
    lo: tuple[int, ...] = ()
    hi: tuple[int, ...] = ()


def new_block(level: Level, index: Index, values: np.ndarray, raw: bytes | None) -> Changed | None:
    """The block at ``index`` holding ``values`` (inside the array) over its stored object's
    bytes ``raw``, or None if unchanged."""
    check_fits(values, level.dtype, f"{level.path(index)}")
    stored = decode(level, index, raw)
    differs = values != inside_values(level, index, stored)  # missing: the fill value
    if not differs.any():
        return None
    where = [np.flatnonzero(differs.any(axis=tuple(a for a in range(differs.ndim) if a != axis)))
             for axis in range(differs.ndim)]  # fmt: skip
    return Changed(np.ascontiguousarray(values, dtype=level.dtype), stored, raw,
                   tuple(int(w[0]) for w in where), tuple(int(w[-1]) + 1 for w in where))  # fmt: skip


def stored_objects(
    level: Level, changed: Mapping[Index, Changed], convention: str
) -> dict[str, NewBlock]:
    """The new stored objects (key relative to the pyramid root -> bytes) holding the
    ``changed`` blocks of ``level``, each encoded once by the level's format
    (:meth:`~napari_n5zarr.write.edit.block_store.BlockStore.encode`): an N5 block or Zarr
    chunk per block, a whole shard for all its changed inner chunks."""
    groups: dict[str, dict[Index, Changed]] = {}
    for index, block in changed.items():
        groups.setdefault(level.block_key(index), {})[index] = block
    out: dict[str, NewBlock] = {}
    for key, blocks in groups.items():
        raw = next(iter(blocks.values())).raw
        changes = {i: (b.values, b.stored) for i, b in blocks.items()}
        out[key] = NewBlock(None, level.blocks.encode(changes, raw, convention), sha(raw))
    return out


def coarser_blocks(
    folder: DatasetFolder, fine: Level, coarse: Level, step: Sequence[int], changed: Mapping[Index, Changed],
    method: pyramid.Method,
) -> dict[Index, Changed]:  # fmt: skip
    """The blocks of ``coarse`` over the ``changed`` blocks of ``fine``: in each, the voxels
    computed from a changed voxel of ``fine`` are computed again (export's downsampling over
    the fine region as it is now), the others kept as stored."""
    boxes: dict[Index, tuple[list[int], list[int]]] = {}
    for index, block in changed.items():
        start = [s.start for s in fine.bounds(index)]
        lo = [(o + a) // f for o, a, f in zip(start, block.lo, step, strict=True)]
        hi = [-(-(o + b) // f) for o, b, f in zip(start, block.hi, step, strict=True)]
        for cell in itertools.product(*block_ranges(lo, hi, coarse.block)):
            bounds = coarse.bounds(cell)
            a = [max(x, s.start) for x, s in zip(lo, bounds, strict=True)]
            b = [min(x, s.stop) for x, s in zip(hi, bounds, strict=True)]
            if cell in boxes:
                a = [min(x, y) for x, y in zip(a, boxes[cell][0], strict=True)]
                b = [max(x, y) for x, y in zip(b, boxes[cell][1], strict=True)]
            boxes[cell] = (a, b)
    out: dict[Index, Changed] = {}
    for index in sorted(boxes):
        a, b = boxes[index]
        lo = [x * f for x, f in zip(a, step, strict=True)]
        hi = [min(x * f, n) for x, f, n in zip(b, step, fine.shape, strict=True)]
        part = pyramid.downsample_block(read_region(fine, changed, lo, hi, folder), step, method)
        raw = read_raw(folder, coarse, index)
        values = inside_values(coarse, index, decode(coarse, index, raw))
        start = [s.start for s in coarse.bounds(index)]
        values[tuple(slice(x - o, y - o) for x, y, o in zip(a, b, start, strict=True))] = part
        new = new_block(coarse, index, values, raw)
        if new is not None:
            out[index] = new
    return out


@dataclass
class Plan:
    """Every level's changed blocks (finest first) and the voxels overwritten on level 0."""

    levels: list[dict[Index, Changed]]
    overwritten: int = 0
    merged: dict[Index, np.ndarray] = field(default_factory=dict)


def _merge(
    level: Level, index: Index, disk: np.ndarray, edit: np.ndarray | Change
) -> tuple[np.ndarray, int]:
    """Level-0 block values after ``edit`` over ``disk`` (the block now), and how many
    voxels changed on disk since the layer read them were overwritten."""
    if not isinstance(edit, Change):
        values = np.asarray(edit)
        if values.shape != level.inside(index):
            raise ValueError(
                f"block {index}: values of shape {values.shape}, expected {level.inside(index)}"
            )
        return as_values(values, level.dtype, f"{level.path(index)}"), 0
    if edit.after.shape != level.inside(index) or edit.before.shape != edit.after.shape:
        raise ValueError(
            f"block {index}: values of shape {edit.after.shape}, expected {level.inside(index)}"
        )
    after = as_values(edit.after, level.dtype, f"{level.path(index)}")
    mask = after != edit.before
    merged = disk.copy()
    merged[mask] = after[mask]
    overwritten = int(np.count_nonzero(mask & (disk != edit.before) & (disk != after)))
    return merged, overwritten


def plan_save(
    folder: DatasetFolder,
    levels: Sequence[Level],
    edits: Mapping[Index, np.ndarray | Change],
    method: pyramid.Method = "mode",
) -> Plan:
    """Every level's changed blocks for level-0 ``edits`` (values inside the array, or a
    layer's :class:`Change`), each merged into its block as it is on disk now."""
    first_level = levels[0]
    plan = Plan([{}])
    for index, edit in edits.items():
        raw = read_raw(folder, first_level, index)
        disk = inside_values(first_level, index, decode(first_level, index, raw))
        merged, overwritten = _merge(first_level, index, disk, edit)
        plan.overwritten += overwritten
        plan.merged[index] = merged
        block = new_block(first_level, index, merged, raw)
        if block is not None:
            plan.levels[0][index] = block
    for (fine, coarse), step in zip(itertools.pairwise(levels), steps(levels), strict=True):
        last = plan.levels[-1]
        plan.levels.append(coarser_blocks(folder, fine, coarse, step, last, method) if last else {})
    return plan


# -- public ---------------------------------------------------------------------------------


def save_changes(
    path: str | os.PathLike[str], edits: Mapping[Index, np.ndarray | Change], *, expect: Signature | None = None,
    method: pyramid.Method = "mode",
) -> SaveResult:  # fmt: skip
    """Write level-0 ``edits`` (grid index -> the block's new values inside the array, or a
    layer's :class:`Change`) of the dataset or pyramid at ``path``, each merged into the block
    as it is on disk now, and the coarser levels' covering blocks. ``expect``: the level-0
    signature the edits were made against (refused with :class:`StaleLayerError` if the
    dataset changed on disk since)."""
    root, levels = pyramid_levels(path)
    if expect is not None and tuple(expect) != levels[0].signature:
        raise StaleLayerError(
            f"{levels[0].folder} changed on disk since the layer opened (shape, block, dtype were {_sig(expect)}, "
            f"are {_sig(levels[0].signature)}); nothing was saved: reopen it to edit"
        )
    return _save(root, levels, lambda folder: edits, method)


def _save(
    root: Path, levels: Sequence[Level], edits_of: Callable[[DatasetFolder], Mapping[Index, np.ndarray | Change]],
    method: pyramid.Method,
) -> SaveResult:  # fmt: skip
    """Under the locks: finish an interrupted save, plan ``edits_of(folder)`` from the blocks
    as they are on disk now, commit."""
    with lock(root), DatasetFolder(root) as folder:
        recovered = recover(folder, levels)
        plan = plan_save(folder, levels, edits_of(folder), method)
        per_level = [
            stored_objects(level, changed, edge_convention(level, folder)) if changed else {}
            for level, changed in zip(levels, plan.levels, strict=True)
        ]
        written = commit(folder, {k: b for new in per_level for k, b in new.items()})
    return SaveResult(
        [len(new) for new in per_level], written, recovered, plan.overwritten, plan.merged
    )


def _sig(signature: Signature) -> str:
    shape, block, dtype = signature
    return f"{tuple(shape)}, {tuple(block)}, {np.dtype(dtype)}"


def region_blocks(
    folder: DatasetFolder, level: Level, array: np.ndarray, offset: Sequence[int]
) -> Iterator[tuple[Index, np.ndarray]]:
    """The level-0 blocks ``array`` at ``offset`` touches, each with its new values."""
    lo = list(offset)
    hi = [o + n for o, n in zip(offset, array.shape, strict=True)]
    if any(a < 0 or b > n for a, b, n in zip(lo, hi, level.shape, strict=True)):
        raise ValueError(f"region {lo}..{hi} is outside the dataset's shape {level.shape}")
    for index in itertools.product(*block_ranges(lo, hi, level.block)):
        values = block_values(level, index, folder)
        dst, src = overlap(index, level.block, lo, hi)
        values[dst] = array[src]
        yield index, values


def write_region(
    path: str | os.PathLike[str],
    array: Any,
    offset: Sequence[int] | None = None,
    *,
    method: pyramid.Method = "mode",
) -> SaveResult:
    """Write ``array`` (napari order; any integer input whose values fit the dataset's dtype:
    arrays, lists) at ``offset`` (level-0 pixels) into the local N5 (or dual N5 + Zarr v3)
    integer dataset or pyramid at ``path`` (the pyramid the reader finds there; a level path
    ``C.n5/s0`` writes its pyramid), and recompute the covering blocks of every coarser level (``method``: export's
    label downsampling).

    Only blocks whose values change are written, each atomically, under a journal that the
    next save (or an editable open) completes after an interruption; the export locks keep a
    second saver and exports of enclosing groups out. Raises :class:`NotEditableError` for
    what cannot be edited in place (a URL, a zip, a read-only folder, label multisets, a
    non-integer dataset, a coarser level alone) and
    :class:`~napari_n5zarr.errors.ValuesDoNotFitError` for values the dtype cannot hold."""
    root, levels = pyramid_levels(path)
    values = as_values(array, levels[0].dtype, f"write_region into {levels[0].folder}")
    offset = tuple(offset) if offset is not None else (0,) * values.ndim
    if values.ndim != len(levels[0].shape) or len(offset) != values.ndim:
        raise ValueError(
            f"array of {values.ndim} dimensions (offset {offset}) for a dataset of shape {levels[0].shape}"
        )
    return _save(
        root, levels, lambda folder: dict(region_blocks(folder, levels[0], values, offset)), method
    )
