"""Edits written back into a local N5 (or dual N5 + Zarr v3) integer dataset or pyramid,
block by block: the proofreading save path (no napari here).

* Level 0: read-modify-write of the touched blocks only, **under the lock, from the block
  as it is on disk at save time**: a layer's edit (:class:`Change`) writes only the voxels
  the layer changed, so another editor's saved voxels and other tools' writes survive;
  where such a voxel was changed on disk too, the layer's value wins and the result counts
  it (:attr:`SaveResult.overwritten`). Each block keeps its dataset's compression and its
  own edge convention (its header: truncated or padded; a new edge block follows the
  dataset's corner block, else n5-java's truncation).
* Coarser levels: the blocks covering the changed region recomputed from the level below
  with export's downsampling (:func:`napari_n5zarr.write.pyramid.downsample_block`, mode for
  labels), so the pyramid stays what ``export`` of the edited array would write. Writing a
  level path (``C.n5/s0``) updates its pyramid; a coarser level alone is refused.
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

import contextlib
import hashlib
import itertools
import json
import math
import os
import re
import signal
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from napari_n5zarr.errors import (
    NotEditableError,
    PlantedFileError,
    StaleLayerError,
    ValuesDoNotFitError,
)
from napari_n5zarr.n5.block_format import parse_header
from napari_n5zarr.n5.constants import N5_JSON, ZARR_JSON, max_stored_block_bytes
from napari_n5zarr.n5.metadata import N5DatasetMetadata
from napari_n5zarr.storage import files
from napari_n5zarr.write import pyramid
from napari_n5zarr.write.dataset_files import DatasetFolder

JOURNAL = ".n5zarr-save-journal"
JOURNAL_TMP = JOURNAL + ".tmp"
STAGED_SUFFIX = ".n5zarr-staged"
JOURNAL_CAP = 64 * 2**20
"""Bytes of a save journal read at most (a bigger file was not written by a save)."""
JOURNAL_BATCH = 100_000
"""Blocks per journal: a bigger save commits in batches (each one atomic per block, recoverable)."""
CRASH_ENV = "NAPARI_N5ZARR_SAVE_CRASH"
"""Tests only: ``"<point>"`` or ``"<point>:<n>"`` kills the saving process (SIGKILL) there."""
_LEVEL_NAME = re.compile(r"s(\d+)")
_HASH = re.compile(r"[0-9a-f]{64}")

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

    def __post_init__(self) -> None:
        self.shape = tuple(self.meta.dimensions)[::-1]
        self.block = tuple(self.meta.block_size)[::-1]
        self.dtype = np.dtype(self.meta.data_type)
        self.codec = self.meta.codec()

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


@dataclass
class SaveResult:
    """What a save wrote: block files per level (finest first), bytes written, what an
    interrupted save's recovery did, and how many voxels changed on disk since the layer
    read them were overwritten with the layer's values."""

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


# -- the pyramid ------------------------------------------------------------------------


def _attributes(folder: Path) -> dict[str, Any] | None:
    try:
        doc = json.loads(files.read_regular_file(folder / N5_JSON, metadata=True))
    except (FileNotFoundError, NotADirectoryError):
        return None
    return doc if isinstance(doc, dict) else None


def _pyramid_of(folder: Path) -> list[Level]:
    """The ``s0..sN`` datasets directly in ``folder`` (none: [])."""
    names = sorted((p.name for p in folder.iterdir() if _LEVEL_NAME.fullmatch(p.name)), key=lambda n: int(n[1:]))
    levels: list[Level] = []
    for n, name in enumerate(names):
        child = _attributes(folder / name)
        if name != f"s{n}" or child is None or "dimensions" not in child:
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
        name = _LEVEL_NAME.fullmatch(folder.name)
        siblings = _pyramid_of(folder.parent) if name else []
        if name and len(siblings) > 1 and any(s.folder == folder for s in siblings):
            if name[1] != "0":
                raise NotEditableError(
                    f"{folder} is level {name[1]} of the pyramid {folder.parent}, computed from level 0: write "
                    f"level 0 ({folder.parent / 's0'} or {folder.parent}) and the coarser levels follow"
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
    _steps(levels)
    return folder, levels


def check_editable(level: Level) -> None:
    """Refuse datasets whose blocks this module cannot rewrite."""
    if level.meta.attributes.get("isLabelMultiset"):
        raise NotEditableError(f"{level.folder} holds Paintera label multisets; make an editable copy with `n5zarr convert`")
    if level.dtype.kind not in "iu":
        raise NotEditableError(f"{level.folder} is {level.dtype}, not integer labels")
    if not os.access(level.folder, os.W_OK):
        raise NotEditableError(f"{level.folder} is read-only; make an editable copy with `n5zarr convert`")


def _steps(levels: Sequence[Level]) -> list[tuple[int, ...]]:
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


# -- values ------------------------------------------------------------------------------


def check_fits(values: np.ndarray, dtype: np.dtype, where: str) -> None:
    """Refuse ``values`` that ``dtype`` cannot hold (how many, their range): never wrapped."""
    if values.size == 0 or values.dtype == dtype:
        return
    if values.dtype.kind == "f" and not np.array_equal(values, np.round(values)):
        raise ValuesDoNotFitError(f"{where}: values are not whole numbers ({values.dtype}); labels are {dtype} integers")
    if values.dtype.kind not in "iubf":
        raise ValuesDoNotFitError(f"{where}: cannot write {values.dtype} values into a {dtype} dataset")
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
        raise ValuesDoNotFitError(f"{where}: cannot write {values.dtype} values into a {dtype} dataset")
    check_fits(values, dtype, where)
    return values.astype(dtype, copy=False)


# -- reading blocks (with the save's pending blocks over them) --------------------------


def _sha(raw: bytes | None) -> str | None:
    return None if raw is None else hashlib.sha256(raw).hexdigest()


def read_raw(folder: DatasetFolder, level: Level, index: Index) -> bytes | None:
    """The stored bytes of the block at ``index`` (None: missing), through ``folder``."""
    return folder.read(level.block_key(index), max_stored_block_bytes(), own=False)


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


def block_ranges(lo: Sequence[int], hi: Sequence[int], block: Sequence[int]) -> list[range]:
    """Per axis, the grid indices of the blocks that pixels ``[lo, hi)`` reach."""
    return [range(a // b, math.ceil(e / b)) for a, e, b in zip(lo, hi, block, strict=True)]


def overlap(bounds: Sequence[slice], lo: Sequence[int], hi: Sequence[int]) -> tuple[tuple[slice, ...], tuple[slice, ...]]:
    """(in the block, in the region ``[lo, hi)``) slices of their common pixels."""
    inner = tuple(slice(max(a, s.start) - s.start, min(e, s.stop) - s.start) for a, e, s in zip(lo, hi, bounds, strict=True))
    outer = tuple(slice(max(a, s.start) - a, min(e, s.stop) - a) for a, e, s in zip(lo, hi, bounds, strict=True))
    return inner, outer


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


# -- new blocks ----------------------------------------------------------------------------


@dataclass
class NewBlock:
    values: np.ndarray
    """Inside the array, napari order."""
    encoded: bytes
    before: str | None = None
    """Checksum of the block's stored bytes when the save read them (None: missing)."""


def edge_convention(level: Level, folder: DatasetFolder, looked_at: int = 64) -> str:
    """``"pad"`` when the dataset's edge blocks are stored at the full block shape (the
    corner block, else the first of up to ``looked_at`` edge blocks found), else
    ``"truncate"`` (n5-java's way, and the answer when there is no edge block to look at)."""
    grid = level.grid
    edges = [a for a, (n, b) in enumerate(zip(level.shape, level.block, strict=True)) if n % b]
    if not edges:
        return "truncate"  # no edge blocks at all
    corner = tuple(g - 1 for g in grid)
    candidates = itertools.chain(
        [corner],
        *(itertools.product(*(range(g) if i != a else [g - 1] for i, g in enumerate(grid))) for a in edges),
    )
    for index in itertools.islice(candidates, looked_at):
        raw = read_raw(folder, level, index)
        if raw is None:
            continue
        try:
            return "pad" if tuple(parse_header(raw[: 4 + 4 * len(level.shape)]).shape)[::-1] == level.block else "truncate"
        except ValueError:
            continue
    return "truncate"


def new_block(level: Level, index: Index, values: np.ndarray, convention: str, raw: bytes | None) -> NewBlock | None:
    """The block at ``index`` holding ``values`` (inside the array) over its stored bytes
    ``raw``, or None if unchanged. An existing block keeps its header shape and whatever
    its padding holds."""
    check_fits(values, level.dtype, f"{level.path(index)}")
    stored = decode(level, index, raw)
    inside = level.inside(index)
    region = tuple(slice(0, n) for n in inside)
    if stored is None:
        if not values.any():
            return None  # missing reads as 0: nothing to write
        shape = level.block if convention == "pad" else inside
        full = np.zeros(shape, dtype=level.dtype)
    else:
        if np.array_equal(inside_values(level, index, stored), values):
            return None
        full = stored
        if any(s < n for s, n in zip(stored.shape, inside, strict=True)):  # a short block: grow it
            full = np.zeros([max(s, n) for s, n in zip(stored.shape, inside, strict=True)], dtype=level.dtype)
            full[tuple(slice(0, s) for s in stored.shape)] = stored
    full[region] = values
    values = np.ascontiguousarray(values, dtype=level.dtype)
    return NewBlock(values, level.codec.encode_block(full.T), _sha(raw))


def coarser_blocks(
    folder: DatasetFolder, fine: Level, coarse: Level, step: Sequence[int], changed: Mapping[Index, NewBlock],
    method: pyramid.Method,
) -> dict[Index, NewBlock]:  # fmt: skip
    """The blocks of ``coarse`` covering the ``changed`` blocks of ``fine``, recomputed."""
    touched: set[Index] = set()
    for index in changed:
        bounds = fine.bounds(index)
        ranges = [
            range((s.start // f) // b, math.ceil(math.ceil(s.stop / f) / b))
            for s, f, b in zip(bounds, step, coarse.block, strict=True)
        ]
        touched.update(itertools.product(*ranges))
    convention = edge_convention(coarse, folder)
    out: dict[Index, NewBlock] = {}
    for index in sorted(touched):
        bounds = coarse.bounds(index)
        lo = [s.start * f for s, f in zip(bounds, step, strict=True)]
        hi = [min(s.stop * f, n) for s, f, n in zip(bounds, step, fine.shape, strict=True)]
        values = pyramid.downsample_block(read_region(fine, changed, lo, hi, folder), step, method)
        block = new_block(coarse, index, values, convention, read_raw(folder, coarse, index))
        if block is not None:
            out[index] = block
    return out


@dataclass
class Plan:
    """Every level's changed blocks (finest first) and the voxels overwritten on level 0."""

    levels: list[dict[Index, NewBlock]]
    overwritten: int = 0
    merged: dict[Index, np.ndarray] = field(default_factory=dict)


def _merge(level: Level, index: Index, disk: np.ndarray, edit: np.ndarray | Change) -> tuple[np.ndarray, int]:
    """Level-0 block values after ``edit`` over ``disk`` (the block now), and how many
    voxels changed on disk since the layer read them were overwritten."""
    if not isinstance(edit, Change):
        values = np.asarray(edit)
        if values.shape != level.inside(index):
            raise ValueError(f"block {index}: values of shape {values.shape}, expected {level.inside(index)}")
        return as_values(values, level.dtype, f"{level.path(index)}"), 0
    if edit.after.shape != level.inside(index) or edit.before.shape != edit.after.shape:
        raise ValueError(f"block {index}: values of shape {edit.after.shape}, expected {level.inside(index)}")
    after = as_values(edit.after, level.dtype, f"{level.path(index)}")
    mask = after != edit.before
    merged = disk.copy()
    merged[mask] = after[mask]
    overwritten = int(np.count_nonzero(mask & (disk != edit.before) & (disk != after)))
    return merged, overwritten


def plan_save(
    folder: DatasetFolder, levels: Sequence[Level], edits: Mapping[Index, np.ndarray | Change], method: pyramid.Method = "mode"
) -> Plan:
    """Every level's changed blocks for level-0 ``edits`` (values inside the array, or a
    layer's :class:`Change`), each merged into its block as it is on disk now."""
    first_level = levels[0]
    convention = edge_convention(first_level, folder)
    plan = Plan([{}])
    for index, edit in edits.items():
        raw = read_raw(folder, first_level, index)
        disk = inside_values(first_level, index, decode(first_level, index, raw))
        merged, overwritten = _merge(first_level, index, disk, edit)
        plan.overwritten += overwritten
        plan.merged[index] = merged
        block = new_block(first_level, index, merged, convention, raw)
        if block is not None:
            plan.levels[0][index] = block
    for (fine, coarse), step in zip(itertools.pairwise(levels), _steps(levels), strict=True):
        last = plan.levels[-1]
        plan.levels.append(coarser_blocks(folder, fine, coarse, step, last, method) if last else {})
    return plan


# -- the journal -------------------------------------------------------------------------


@dataclass
class Entry:
    """One journaled block: its key and checksums before and after (None: missing)."""

    key: str
    before: str | None
    after: str | None
    known: bool = True
    """False for a journal of an older version (no checksums)."""


def _crash_point(name: str, n: int | None = None) -> None:
    wanted = os.environ.get(CRASH_ENV)
    if wanted and wanted in (name, f"{name}:{n}"):
        os.kill(os.getpid(), signal.SIGKILL)


def _write_journal(folder: DatasetFolder, state: str, entries: Sequence[Entry]) -> None:
    blocks = [{"key": e.key, "before": e.before, "after": e.after} for e in entries]
    folder.create(JOURNAL_TMP, json.dumps({"version": 2, "state": state, "blocks": blocks}).encode())
    folder.replace(JOURNAL_TMP, JOURNAL)
    folder.sync()


def _valid_key(key: Any, levels: Sequence[Level]) -> bool:
    """``key`` names a block of one of ``levels`` (inside its grid, canonical digits)."""
    if not isinstance(key, str) or not key:
        return False
    parts = key.split("/")
    for level in levels:
        prefix = level.key.split("/") if level.key else []
        rest = parts[len(prefix) :]
        if parts[: len(prefix)] != prefix or len(rest) != len(level.shape):
            continue
        if all(p.isdigit() and p.isascii() and str(int(p)) == p for p in rest):
            return all(int(p) < g for p, g in zip(rest, reversed(level.grid), strict=True))
    return False


def read_journal(folder: DatasetFolder, levels: Sequence[Level]) -> tuple[str, list[Entry]] | None:
    """(state, entries) of the journal in ``folder``, None when there is none. A journal this
    package did not write (a link, a folder, a FIFO, too big, not a journal, naming anything
    but this dataset's blocks) raises :class:`PlantedFileError`, naming it."""
    raw = folder.read(JOURNAL, JOURNAL_CAP, own=True)
    if raw is None:
        return None

    def refuse(why: str) -> PlantedFileError:
        return folder.refuse(JOURNAL, f"a file that is not a usable save journal ({why})",
                             "move it away if no save of this dataset was interrupted")  # fmt: skip

    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError):
        raise refuse("not JSON") from None
    if not isinstance(doc, dict) or doc.get("state") not in ("staging", "committing") or doc.get("version") not in (1, 2):
        raise refuse("no version and state of a save")
    items = doc.get("blocks")
    if not isinstance(items, list):
        raise refuse("no list of blocks")
    entries: list[Entry] = []
    for item in items:
        if doc["version"] == 1:  # an older save's journal: keys only
            entry = Entry(item, None, None, known=False) if isinstance(item, str) else None
        elif isinstance(item, dict) and all(
            v is None or (isinstance(v, str) and _HASH.fullmatch(v)) for v in (item.get("before"), item.get("after"))
        ):
            entry = Entry(item.get("key"), item.get("before"), item.get("after"))  # type: ignore[arg-type]
        else:
            entry = None
        if entry is None or not _valid_key(entry.key, levels):
            raise refuse(f"an entry that names no block of this dataset: {str(item)[:80]!r}")
        entries.append(entry)
    return doc["state"], entries


def journal_problem(root: str | os.PathLike[str]) -> str | None:
    """Why the save journal at ``root`` cannot be used (None: there is none, or it is fine).
    Never blocks and never raises: for readers, which then open the labels read-only."""
    try:
        folder, levels = pyramid_levels(root)
        with DatasetFolder(folder) as df:
            read_journal(df, levels)
    except PlantedFileError as e:
        return str(e)
    except (OSError, ValueError) as e:
        if isinstance(e, NotEditableError):
            return None  # not editable anyway: the reader says so itself
        return f"{Path(root) / JOURNAL}: {e}"
    return None


def unfinished_save(root: str | os.PathLike[str]) -> str | None:
    """``"staging"`` or ``"committing"`` when a save of ``root`` was interrupted, ``"unusable:
    <why>"`` when a file there is not a usable journal, else None. Never blocks."""
    try:
        folder, levels = pyramid_levels(root)
    except (OSError, ValueError):
        folder, levels = Path(os.fspath(root)).resolve(), []
    try:
        with DatasetFolder(folder) as df:
            if not levels:
                return "unusable: not an editable dataset" if df.lstat(JOURNAL) else None
            found = read_journal(df, levels)
    except PlantedFileError as e:
        return f"unusable: {e}"
    except OSError:
        return None
    return found[0] if found else None


def recover(folder: DatasetFolder, levels: Sequence[Level]) -> str | None:
    """Finish an interrupted save (hold the lock): a ``staging`` journal is rolled back
    (its staged files removed: every block is still the old one), a ``committing`` one redone
    block by block where the block on disk is still the journal's "before" (a block written
    since is left, and said so). Returns what was done, or None."""
    tmp_removed = folder.remove(JOURNAL_TMP)  # a save killed while writing its journal
    found = read_journal(folder, levels)
    if found is None:
        return "removed an unfinished save's journal temporary" if tmp_removed else None
    state, entries = found
    redone = left = 0
    for entry in entries:
        staged = entry.key + STAGED_SUFFIX
        if state != "committing":
            folder.remove(staged)
            continue
        new = folder.read(staged, max_stored_block_bytes(), own=True)
        if new is None:
            continue  # put in place before the interruption
        current = _sha(folder.read(entry.key, max_stored_block_bytes(), own=False))
        if entry.known and _sha(new) == entry.after and current == entry.before:
            folder.replace(staged, entry.key)
            redone += 1
        else:
            folder.remove(staged)
            left += current != entry.after
    for key in {e.key.rsplit("/", 1)[0] for e in entries if "/" in e.key}:
        folder.sync(key)
    folder.remove(JOURNAL)
    folder.sync()
    if state != "committing":
        return f"rolled back an unfinished save ({len(entries)} blocks left as they were)"
    text = f"completed an unfinished save of {len(entries)} blocks ({redone} put in place now)"
    if left:
        text += f"; {left} block{'s were' if left != 1 else ' was'} written since it was interrupted and left as they are"
    return text


def commit(folder: DatasetFolder, blocks: Mapping[str, NewBlock]) -> int:
    """Replace ``blocks`` (key -> new block) atomically per block under a journal; bytes written."""
    written = 0
    keys = list(blocks)
    for start in range(0, len(keys), JOURNAL_BATCH):
        batch = keys[start : start + JOURNAL_BATCH]
        for key in batch:  # refuse anything planted before writing a byte
            if folder.lstat(key + STAGED_SUFFIX) is not None:
                folder.create(key + STAGED_SUFFIX, b"")  # raises PlantedFileError naming it
        entries = [Entry(k, blocks[k].before, _sha(blocks[k].encoded)) for k in batch]
        _write_journal(folder, "staging", entries)
        _crash_point("journal")
        staged: list[str] = []
        try:
            for n, key in enumerate(batch):
                folder.create(key + STAGED_SUFFIX, blocks[key].encoded)
                staged.append(key + STAGED_SUFFIX)
                written += len(blocks[key].encoded)
                _crash_point("staged", n)
        except BaseException:
            for name in staged:
                with contextlib.suppress(OSError):
                    folder.remove(name)
            with contextlib.suppress(OSError):
                folder.remove(JOURNAL)
            raise
        parents = {k.rsplit("/", 1)[0] for k in batch if "/" in k}
        for key in parents:
            folder.sync(key)
        _write_journal(folder, "committing", entries)
        _crash_point("committing")
        for n, key in enumerate(batch):
            folder.replace(key + STAGED_SUFFIX, key)
            _crash_point("replaced", n)
        for key in parents:
            folder.sync(key)
        folder.remove(JOURNAL)
        folder.sync()
    return written


# -- locks ------------------------------------------------------------------------------


def container_folders(root: Path, looked_at: int = 32) -> list[Path]:
    """The folders above ``root`` up to its container's root (the highest ancestor, within
    ``looked_at``, that holds N5/Zarr metadata or is named ``*.n5``/``*.zarr``), nearest first."""
    parents = list(root.parents)[:looked_at]
    top = -1
    for n, folder in enumerate(parents):
        if folder.suffix.lower() in (".n5", ".zarr") or any((folder / name).is_file() for name in (N5_JSON, ZARR_JSON)):
            top = n
    found = parents[: top + 1]
    return [f for f in found if f.parent != f]


@contextlib.contextmanager
def lock(root: Path) -> Iterator[None]:
    """The export lock of ``root`` (exclusive: a second saver or an exporter of it is refused,
    naming the first) and of every folder above it up to the container root (shared: an
    export replacing an enclosing group is refused while the save runs, and vice versa)."""
    from napari_n5zarr.write.safe_destination import DestinationLock, check_ancestors

    where = f"{root} (saving label edits)"
    with contextlib.ExitStack() as stack:
        for folder in reversed(container_folders(root)):
            stack.enter_context(DestinationLock(folder, f"{folder} (labels inside it are being saved)", shared=True))
        stack.enter_context(DestinationLock(root, where))
        check_ancestors(root, where)
        yield


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
        blocks = {level.block_key(i): b for level, new in zip(levels, plan.levels, strict=True) for i, b in new.items()}
        written = commit(folder, blocks)
    return SaveResult([len(p) for p in plan.levels], written, recovered, plan.overwritten, plan.merged)


def _sig(signature: Signature) -> str:
    shape, block, dtype = signature
    return f"{tuple(shape)}, {tuple(block)}, {np.dtype(dtype)}"


def save_blocks(
    path: str | os.PathLike[str], edits: Mapping[Index, np.ndarray], method: pyramid.Method = "mode"
) -> SaveResult:
    """Write level-0 blocks ``edits`` (grid index -> values inside the array, napari order)
    of the dataset or pyramid at ``path``, and the coarser levels' covering blocks."""
    return save_changes(path, edits, method=method)


def recover_at(root: str | os.PathLike[str]) -> str | None:
    """Finish an interrupted save of the dataset or pyramid at ``root`` under its locks."""
    folder, levels = pyramid_levels(root)
    with lock(folder), DatasetFolder(folder) as df:
        return recover(df, levels)


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
        dst, src = overlap(level.bounds(index), lo, hi)
        values[dst] = array[src]
        yield index, values


def write_region(
    path: str | os.PathLike[str], array: Any, offset: Sequence[int] | None = None, *, method: pyramid.Method = "mode"
) -> SaveResult:
    """Write ``array`` (napari order; any integer input whose values fit the dataset's dtype:
    arrays, lists) at ``offset`` (level-0 pixels) into the local N5 (or dual N5 + Zarr v3)
    integer dataset or ``s0..sN`` pyramid at ``path`` (a level path ``C.n5/s0`` writes its
    pyramid), and recompute the covering blocks of every coarser level (``method``: export's
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
        raise ValueError(f"array of {values.ndim} dimensions (offset {offset}) for a dataset of shape {levels[0].shape}")
    return _save(root, levels, lambda folder: dict(region_blocks(folder, levels[0], values, offset)), method)
