"""A local labels dataset or pyramid as the proofreading save path sees it, described by the
read wing: its pyramid (:func:`~napari_n5zarr.read.multiscale.find_multiscales`, any
convention the reader knows), and each level's shape, blocks, block keys, decoder and
encoder (:mod:`~napari_n5zarr.write.edit.block_store`: N5 blocks through
:class:`~napari_n5zarr.read.fetch.BlockSource` and its shared cache; Zarr v3 chunks and
shards through zarr-python's codecs).

The bytes of the blocks a save reads and rewrites under its lock come from
:class:`~napari_n5zarr.write.dataset_files.DatasetFolder` alone (never through a link,
never outside the dataset folder): the read wing supplies the structure, the folder the
bytes."""

from __future__ import annotations

import itertools
import math
import os
import weakref
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from napari_n5zarr import block_grid
from napari_n5zarr.access import open as open_node
from napari_n5zarr.errors import NotEditableError
from napari_n5zarr.n5.constants import max_stored_bytes
from napari_n5zarr.n5.stores import stored_limit
from napari_n5zarr.read.fetch import BlockSource
from napari_n5zarr.read.multiscale import find_multiscales, level_arrays
from napari_n5zarr.read.pyramid_walk import Where, place
from napari_n5zarr.spatial.model import level_number
from napari_n5zarr.write import pyramid
from napari_n5zarr.write.dataset_files import DatasetFolder
from napari_n5zarr.write.edit.block_store import BlockStore, N5Blocks, ZarrBlocks

if TYPE_CHECKING:
    import zarr

    from napari_n5zarr.spatial import Multiscale

Index = tuple[int, ...]
Signature = tuple[tuple[int, ...], tuple[int, ...], str]
"""(shape, block shape, dtype) of a level, napari order: what a layer's edits assume."""


@dataclass
class Level:
    """One dataset of the pyramid at ``root``, napari order (N5 order reversed; Zarr v3 as
    stored); ``key`` is its folder relative to ``root`` (``""``: the root is the dataset).
    Built by :meth:`of` from the read wing's array; its stored blocks are reached through
    ``blocks`` (:mod:`~napari_n5zarr.write.edit.block_store`: N5 blocks, Zarr v3 chunks or
    shards)."""

    root: Path
    key: str
    blocks: BlockStore = field(repr=False)
    attrs: Mapping[str, Any] = field(repr=False)

    @classmethod
    def of(cls, root: Path, key: str, array: zarr.Array) -> Level:
        """The level ``key`` of ``root`` over ``array`` (opened by the read wing)."""
        source = BlockSource.for_array(array)
        blocks: BlockStore | None
        if source is not None:
            codec: Any = array.metadata.codecs[0]  # type: ignore[union-attr]  # n5_default, v3 (BlockSource.for_array checked it)
            cap = max_stored_bytes(False, stored_limit(array.metadata.to_dict()))
            blocks = N5Blocks(source, codec, cap)
        else:
            blocks = ZarrBlocks.for_array(array)
        if blocks is None:
            raise NotEditableError(
                f"{root / key} holds neither N5 blocks nor a Zarr v3 array; make an editable copy with `n5zarr convert`"
            )
        return cls(root, key, blocks, dict(array.attrs))

    @property
    def source(self) -> BlockSource | None:
        """The read wing's cached block path (N5 levels), else None."""
        return self.blocks.source

    @property
    def stored_cap(self) -> int:
        """The most bytes a stored block of this level may take (its own bound)."""
        return self.blocks.stored_cap

    @property
    def folder(self) -> Path:
        return self.root / self.key if self.key else self.root

    @property
    def shape(self) -> tuple[int, ...]:
        return self.blocks.shape

    @property
    def block(self) -> tuple[int, ...]:
        return self.blocks.block

    @property
    def dtype(self) -> np.dtype:
        return self.blocks.dtype

    @property
    def grid(self) -> tuple[int, ...]:
        return block_grid.grid(self.shape, self.block)

    @property
    def signature(self) -> Signature:
        return self.shape, self.block, self.dtype.str

    def block_key(self, index: Index) -> str:
        """The block's key relative to the pyramid root (``s0/3/2/1``)."""
        name = self.blocks.key(index)
        return f"{self.key}/{name}" if self.key else name

    def path(self, index: Index) -> Path:
        """The block file at grid ``index`` (napari order)."""
        return self.root.joinpath(*self.block_key(index).split("/"))

    def bounds(self, index: Index) -> tuple[slice, ...]:
        """The block's pixels inside the array."""
        return block_grid.bounds(index, self.block, self.shape)

    def inside(self, index: Index) -> tuple[int, ...]:
        return tuple(s.stop - s.start for s in self.bounds(index))


# -- the pyramid ------------------------------------------------------------------------


def local_folder(root: str | os.PathLike[str]) -> Path:
    """``root`` resolved, or NotEditableError when it is no local folder (a URL, a zip)."""
    text = os.fspath(root)
    if "://" in text or text.lower().endswith(".zip") or ".zip/" in text.lower():
        raise NotEditableError(
            f"{text} is not a local folder; make an editable copy with `n5zarr convert`"
        )
    folder = Path(text).resolve()
    if not folder.is_dir():
        raise NotEditableError(f"{folder} is not a local folder")
    return folder


def _pyramid_at(folder: Path) -> tuple[Where, Multiscale] | None:
    """The node at ``folder`` (in the reader's tree) and the pyramid (or single dataset) it
    is, as the reader finds it; None when it is neither (nothing there, a group of several,
    or one further down)."""
    try:
        node = place(open_node(folder))
    except FileNotFoundError:
        return None
    here = [ms for ms in find_multiscales(node).multiscales if ms.name.strip("/") == ""]
    return (node, here[0]) if len(here) == 1 else None


def _enclosing_pyramid(folder: Path) -> tuple[Where, Multiscale] | None:
    """The pyramid of more than one level at ``folder``'s parent whose level ``folder`` (a
    dataset named as a level, ``sN``) is, else None."""
    if level_number(folder.name) is None:
        return None
    parent = _pyramid_at(folder.parent)
    if parent is None or len(parent[1].paths) < 2 or folder.name not in parent[1].paths:
        return None
    return parent


def pyramid_levels(root: str | os.PathLike[str]) -> tuple[Path, list[Level]]:
    """The local dataset or pyramid at ``root`` (resolved) and its levels, finest first, as
    the read wing finds them; :class:`NotEditableError` (with the reason) when it cannot be
    edited in place. Level 0 of a pyramid (``C.n5/s0``) is its pyramid; a coarser level
    alone is refused."""
    folder = local_folder(root)
    found = _pyramid_at(folder)
    if found is None:
        raise NotEditableError(f"{folder} holds no labels dataset nor one pyramid of datasets")
    node, ms = found
    parent = _enclosing_pyramid(folder) if ms.paths == ("",) else None
    if parent is not None:
        number = parent[1].paths.index(folder.name)
        if number != 0:
            raise NotEditableError(
                f"{folder} is level {number} of the pyramid {folder.parent}, computed from level 0: write "
                f"level 0 ({folder.parent / parent[1].paths[0]} or {folder.parent}) and the coarser levels follow"
            )
        folder, (node, ms) = folder.parent, parent
    if ms.label_multiset:
        raise NotEditableError(
            f"{folder} holds Paintera label multisets; make an editable copy with `n5zarr convert`"
        )
    if ms.time_paths:
        raise NotEditableError(f"{folder} is a time series; time series are not edited in place")
    return folder, levels_of(folder, ms.paths, level_arrays(node, ms))


def levels_of(folder: Path, keys: Sequence[str], arrays: Sequence[zarr.Array]) -> list[Level]:
    """The editable levels ``keys`` (relative to the local ``folder``) over their ``arrays`` as
    the read wing opened them (no metadata read again), finest first."""
    for key in keys:
        for n in range(1, key.count("/") + 2 if key else 0):
            part = folder.joinpath(*key.split("/")[:n])
            if part.is_symlink():
                raise NotEditableError(
                    f"{part} is a symbolic link: edits would be written outside {folder}; refused"
                )
    levels = [Level.of(folder, key, array) for key, array in zip(keys, arrays, strict=True)]
    for level in levels:
        check_editable(level)
    steps(levels)
    return levels


def check_editable(level: Level) -> None:
    """Refuse datasets whose blocks this module cannot rewrite."""
    if level.attrs.get("isLabelMultiset"):
        raise NotEditableError(
            f"{level.folder} holds Paintera label multisets; make an editable copy with `n5zarr convert`"
        )
    if level.dtype.kind not in "iu":
        raise NotEditableError(f"{level.folder} is {level.dtype}, not integer labels")
    if not os.access(level.folder, os.W_OK):
        raise NotEditableError(
            f"{level.folder} is read-only; make an editable copy with `n5zarr convert`"
        )


def steps(levels: Sequence[Level]) -> list[tuple[int, ...]]:
    """Per-axis factors from each level to the next (a 2x pyramid: 1 or 2)."""
    steps = []
    for fine, coarse in itertools.pairwise(levels):
        if len(fine.shape) != len(coarse.shape):
            raise NotEditableError(
                f"{coarse.folder} is not a downsampling of {fine.folder}; cannot keep the pyramid consistent"
            )
        step = tuple(
            pyramid.level_factor(a, b) for a, b in zip(fine.shape, coarse.shape, strict=True)
        )
        if any(
            math.ceil(a / f) != b for a, b, f in zip(fine.shape, coarse.shape, step, strict=True)
        ):
            raise NotEditableError(
                f"{coarse.folder} is not a downsampling of {fine.folder}; cannot keep the pyramid consistent"
            )
        steps.append(step)
    return steps


# -- reading blocks -----------------------------------------------------------------------


def shown_region(level: Level, lo: Sequence[int], hi: Sequence[int]) -> np.ndarray:
    """Pixels ``[lo, hi)`` of ``level`` for display, through the read wing (its shared cache,
    concurrent decoding); an unreadable block raises (N5BlockError), naming it."""
    return level.blocks.read(lo, hi)


SHARDS_HELD = 16
"""Stored objects holding several blocks (shards) kept per save while it reads them."""
_held: weakref.WeakKeyDictionary[DatasetFolder, OrderedDict[str, bytes | None]] = (
    weakref.WeakKeyDictionary()
)


def read_raw(folder: DatasetFolder, level: Level, index: Index) -> bytes | None:
    """The stored bytes of the object holding the block at ``index`` (None: missing), through
    ``folder``. A shard read for one of its inner chunks is kept for the next ones (the last
    :data:`SHARDS_HELD`, for as long as ``folder`` is open: one save under its lock)."""
    key = level.block_key(index)
    if not level.blocks.shares_objects:
        return folder.read(key, level.stored_cap, own=False)
    held = _held.setdefault(folder, OrderedDict())
    if key in held:
        held.move_to_end(key)
        return held[key]
    raw = held[key] = folder.read(key, level.stored_cap, own=False)
    if len(held) > SHARDS_HELD:
        held.popitem(last=False)
    return raw


def decode(level: Level, index: Index, raw: bytes | None) -> np.ndarray | None:
    """A stored block at its header shape, napari order (a writable copy), or None."""
    if raw is None:
        return None
    return level.blocks.decode(index, raw)


def inside_values(level: Level, index: Index, stored: np.ndarray | None) -> np.ndarray:
    """The block's values inside the array (missing: the fill value, 0 for N5), napari order."""
    inside = level.inside(index)
    out = np.full(inside, level.blocks.fill, dtype=level.dtype)
    if stored is not None:
        common = tuple(slice(0, min(a, b)) for a, b in zip(inside, stored.shape, strict=True))
        out[common] = stored[common]
    return out


def block_values(level: Level, index: Index, folder: DatasetFolder) -> np.ndarray:
    """The block's values inside the array (missing: the fill value), napari order, read through ``folder``."""
    return inside_values(level, index, decode(level, index, read_raw(folder, level, index)))


def read_region(
    level: Level,
    pending: Mapping[Index, Any],
    lo: Sequence[int],
    hi: Sequence[int],
    folder: DatasetFolder,
) -> np.ndarray:
    """Pixels ``[lo, hi)`` of ``level``, ``pending[index].values`` over the blocks read through ``folder``."""
    out = np.zeros([b - a for a, b in zip(lo, hi, strict=True)], dtype=level.dtype)
    for index in itertools.product(*block_grid.block_ranges(lo, hi, level.block)):
        values = pending[index].values if index in pending else block_values(level, index, folder)
        src, dst = block_grid.overlap(index, level.block, lo, hi)
        out[dst] = values[src]
    return out
