"""A local labels dataset or ``s0..sN`` pyramid as the proofreading save path sees it:
its levels (napari order) and their blocks, read through
:class:`~napari_n5zarr.write.dataset_files.DatasetFolder` (never through a link)."""

from __future__ import annotations

import itertools
import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from napari_n5zarr.block_grid import block_ranges, overlap
from napari_n5zarr.errors import NotEditableError
from napari_n5zarr.n5.block_format import stored_block_limit
from napari_n5zarr.n5.compression import n5_to_zarr
from napari_n5zarr.n5.constants import N5_JSON, max_stored_bytes
from napari_n5zarr.n5.label_multiset import stored_payload
from napari_n5zarr.n5.metadata import N5DatasetMetadata
from napari_n5zarr.spatial.model import level_name, level_names, level_number
from napari_n5zarr.storage import files
from napari_n5zarr.write import pyramid
from napari_n5zarr.write.dataset_files import DatasetFolder

Index = tuple[int, ...]
Signature = tuple[tuple[int, ...], tuple[int, ...], str]
"""(shape, block shape, dtype) of a level, napari order: what a layer's edits assume."""

@dataclass
class Level:
    """One dataset of the pyramid, napari order (N5 order reversed); ``key`` is its folder
    relative to the pyramid root (``""``: the root is the dataset)."""

    folder: Path
    meta: N5DatasetMetadata
    key: str = ""
    shape: tuple[int, ...] = field(init=False)
    block: tuple[int, ...] = field(init=False)
    dtype: np.dtype = field(init=False)
    codec: Any = field(init=False, repr=False)
    stored_cap: int = field(init=False, repr=False)
    """The most bytes a stored block of this level may take (its own bound)."""

    def __post_init__(self) -> None:
        self.shape = tuple(self.meta.dimensions)[::-1]
        self.block = tuple(self.meta.block_size)[::-1]
        self.dtype = np.dtype(self.meta.data_type)
        self.codec = self.meta.codec()
        self.stored_cap = stored_cap(self.meta)

    @property
    def grid(self) -> tuple[int, ...]:
        return tuple(math.ceil(n / b) for n, b in zip(self.shape, self.block, strict=True))

    @property
    def signature(self) -> Signature:
        return self.shape, self.block, self.dtype.str

    def path(self, index: Index) -> Path:
        """The block file at grid ``index`` (napari order)."""
        return self.folder.joinpath(*(str(i) for i in reversed(index)))

    def block_key(self, index: Index) -> str:
        """The block's key relative to the pyramid root (``s0/3/2/1``)."""
        return "/".join([*([self.key] if self.key else []), *(str(i) for i in reversed(index))])

    def bounds(self, index: Index) -> tuple[slice, ...]:
        """The block's pixels inside the array."""
        return tuple(slice(i * b, min((i + 1) * b, n)) for i, b, n in zip(index, self.block, self.shape, strict=True))

    def inside(self, index: Index) -> tuple[int, ...]:
        return tuple(s.stop - s.start for s in self.bounds(index))

def stored_cap(meta: N5DatasetMetadata) -> int:
    """The most bytes one stored block of ``meta``'s dataset may take (its own bound: block
    size, element size, the compression's worst case; else the global cap)."""
    block = tuple(meta.block_size)
    payload, varlength, what = stored_payload(meta.data_type, meta.attributes, block)
    limit = stored_block_limit(block, payload, n5_to_zarr(dict(meta.compression)), varlength=varlength, what=what)
    return max_stored_bytes(False, limit)


# -- the pyramid ------------------------------------------------------------------------


def _attributes(folder: Path) -> dict[str, Any] | None:
    try:
        doc = json.loads(files.read_regular_file(folder / N5_JSON, metadata=True))
    except (FileNotFoundError, NotADirectoryError):
        return None
    return doc if isinstance(doc, dict) else None


def _pyramid_of(folder: Path) -> list[Level]:
    """The ``s0..sN`` datasets directly in ``folder`` (none: [])."""
    names = level_names(p.name for p in folder.iterdir())
    levels: list[Level] = []
    for n, name in enumerate(names):
        child = _attributes(folder / name)
        if name != level_name(n) or child is None or "dimensions" not in child:
            break
        if (folder / name).is_symlink():
            raise NotEditableError(f"{folder / name} is a symbolic link: edits would be written outside {folder}; refused")
        levels.append(Level(folder / name, N5DatasetMetadata.from_json(child, str(folder / name / N5_JSON)), name))
    return levels


def pyramid_levels(root: str | os.PathLike[str]) -> tuple[Path, list[Level]]:
    """The local dataset or ``s0..sN`` pyramid at ``root`` (resolved) and its levels, finest
    first; :class:`NotEditableError` (with the reason) when it cannot be edited in place.
    Level 0 of a pyramid (``C.n5/s0``) is its pyramid; a coarser level alone is refused."""
    text = os.fspath(root)
    if "://" in text or text.lower().endswith(".zip") or ".zip/" in text.lower():
        raise NotEditableError(f"{text} is not a local folder; make an editable copy with `n5zarr convert`")
    folder = Path(text).resolve()
    if not folder.is_dir():
        raise NotEditableError(f"{folder} is not a local folder")
    doc = _attributes(folder)
    if doc is not None and "dimensions" in doc:
        number = level_number(folder.name)
        siblings = _pyramid_of(folder.parent) if number is not None else []
        if number is not None and len(siblings) > 1 and any(s.folder == folder for s in siblings):
            if number != 0:
                raise NotEditableError(
                    f"{folder} is level {number} of the pyramid {folder.parent}, computed from level 0: write "
                    f"level 0 ({folder.parent / level_name(0)} or {folder.parent}) and the coarser levels follow"
                )
            folder, levels = folder.parent, siblings
        else:
            levels = [Level(folder, N5DatasetMetadata.from_json(doc, str(folder / N5_JSON)))]
    else:
        levels = _pyramid_of(folder)
        if not levels:
            raise NotEditableError(f"{folder} holds no N5 dataset nor s0..sN pyramid")
    for level in levels:
        check_editable(level)
    steps(levels)
    return folder, levels


def check_editable(level: Level) -> None:
    """Refuse datasets whose blocks this module cannot rewrite."""
    if level.meta.attributes.get("isLabelMultiset"):
        raise NotEditableError(f"{level.folder} holds Paintera label multisets; make an editable copy with `n5zarr convert`")
    if level.dtype.kind not in "iu":
        raise NotEditableError(f"{level.folder} is {level.dtype}, not integer labels")
    if not os.access(level.folder, os.W_OK):
        raise NotEditableError(f"{level.folder} is read-only; make an editable copy with `n5zarr convert`")


def steps(levels: Sequence[Level]) -> list[tuple[int, ...]]:
    """Per-axis factors from each level to the next (a 2x pyramid: 1 or 2)."""
    steps = []
    for fine, coarse in itertools.pairwise(levels):
        if len(fine.shape) != len(coarse.shape):
            raise NotEditableError(f"{coarse.folder} is not a downsampling of {fine.folder}; cannot keep the pyramid consistent")
        step = tuple(pyramid.level_factor(a, b) for a, b in zip(fine.shape, coarse.shape, strict=True))
        if any(math.ceil(a / f) != b for a, b, f in zip(fine.shape, coarse.shape, step, strict=True)):
            raise NotEditableError(f"{coarse.folder} is not a downsampling of {fine.folder}; cannot keep the pyramid consistent")
        steps.append(step)
    return steps

# -- reading blocks (with the save's pending blocks over them) --------------------------


def read_raw(folder: DatasetFolder, level: Level, index: Index) -> bytes | None:
    """The stored bytes of the block at ``index`` (None: missing), through ``folder``."""
    return folder.read(level.block_key(index), level.stored_cap, own=False)


def decode(level: Level, index: Index, raw: bytes | None) -> np.ndarray | None:
    """A stored block at its header shape, napari order (a writable copy), or None."""
    if raw is None:
        return None
    return np.array(level.codec.decode_block(raw, level.dtype, len(level.shape), where=f"N5 block {level.path(index)}").T)


def read_block(level: Level, index: Index, folder: DatasetFolder | None = None) -> np.ndarray | None:
    """The stored block at its header shape, napari order (a writable copy), or None."""
    if folder is None:
        root = level.folder.parents[level.key.count("/")] if level.key else level.folder
        with DatasetFolder(root) as own:
            return decode(level, index, read_raw(own, level, index))
    return decode(level, index, read_raw(folder, level, index))


def inside_values(level: Level, index: Index, stored: np.ndarray | None) -> np.ndarray:
    """The block's values inside the array (missing: zeros), napari order."""
    inside = level.inside(index)
    out = np.zeros(inside, dtype=level.dtype)
    if stored is not None:
        common = tuple(slice(0, min(a, b)) for a, b in zip(inside, stored.shape, strict=True))
        out[common] = stored[common]
    return out


def block_values(level: Level, index: Index, folder: DatasetFolder | None = None) -> np.ndarray:
    """The block's values inside the array (missing: zeros), napari order."""
    return inside_values(level, index, read_block(level, index, folder))


def read_region(
    level: Level, pending: Mapping[Index, Any], lo: Sequence[int], hi: Sequence[int], folder: DatasetFolder | None = None
) -> np.ndarray:
    """Pixels ``[lo, hi)`` of ``level``, ``pending[index].values`` over the stored blocks."""
    out = np.zeros([b - a for a, b in zip(lo, hi, strict=True)], dtype=level.dtype)
    for index in itertools.product(*block_ranges(lo, hi, level.block)):
        values = pending[index].values if index in pending else block_values(level, index, folder)
        src, dst = overlap(level.bounds(index), lo, hi)
        out[dst] = values[src]
    return out
