"""Edits written back into a local N5 (or dual N5 + Zarr v3) integer dataset or pyramid,
block by block: the proofreading save path (no napari here).

* Level 0: read-modify-write of the touched blocks only, with the dataset's own
  compression and each block's own edge convention (its header: truncated or padded; a new
  edge block follows the dataset's corner block, else n5-java's truncation).
* Coarser levels: the blocks covering the changed region recomputed from the level below
  with export's downsampling (:func:`napari_n5zarr.write.pyramid.downsample_block`, mode for
  labels), so the pyramid stays what ``export`` of the edited array would write.
* Only blocks whose values changed are written; every other file (metadata included) is
  left alone, same bytes and same mtime.
* Atomic and recoverable: the new blocks are staged beside their targets
  (``<block>.n5zarr-staged``, fsynced) under a journal (:data:`JOURNAL`, in the dataset or
  pyramid folder) that first says ``staging`` then ``committing``; each staged block is
  then renamed over its target (a reader sees old or new, never a torn block) and the
  journal removed. :func:`recover` (run by every save, and by an editable open) rolls a
  ``staging`` journal back (the old blocks are all intact) and redoes a ``committing`` one.
* The export lock (:class:`~napari_n5zarr.write.safe_destination.DestinationLock`) keeps a
  second saver or an export out, naming the first.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import signal
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from napari_n5zarr.errors import NotEditableError
from napari_n5zarr.n5.block_format import parse_header
from napari_n5zarr.n5.constants import N5_JSON
from napari_n5zarr.n5.metadata import N5DatasetMetadata
from napari_n5zarr.storage import files
from napari_n5zarr.write import pyramid

JOURNAL = ".n5zarr-save-journal"
STAGED_SUFFIX = ".n5zarr-staged"
CRASH_ENV = "NAPARI_N5ZARR_SAVE_CRASH"
"""Tests only: ``"<point>"`` or ``"<point>:<n>"`` kills the saving process (SIGKILL) there."""

Index = tuple[int, ...]


@dataclass
class Level:
    """One dataset of the pyramid, napari order (N5 order reversed)."""

    folder: Path
    meta: N5DatasetMetadata
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

    def path(self, index: Index) -> Path:
        """The block file at grid ``index`` (napari order)."""
        return self.folder.joinpath(*(str(i) for i in reversed(index)))

    def bounds(self, index: Index) -> tuple[slice, ...]:
        """The block's pixels inside the array."""
        return tuple(slice(i * b, min((i + 1) * b, n)) for i, b, n in zip(index, self.block, self.shape, strict=True))

    def inside(self, index: Index) -> tuple[int, ...]:
        return tuple(s.stop - s.start for s in self.bounds(index))


@dataclass
class SaveResult:
    """What a save wrote: block files per level (finest first) and bytes written."""

    blocks: list[int]
    bytes_written: int
    recovered: str | None = None

    @property
    def total_blocks(self) -> int:
        return sum(self.blocks)


# -- the pyramid ------------------------------------------------------------------------


def _attributes(folder: Path) -> dict[str, Any] | None:
    try:
        doc = json.loads(files.read_regular_file(folder / N5_JSON, metadata=True))
    except (FileNotFoundError, NotADirectoryError):
        return None
    return doc if isinstance(doc, dict) else None


def pyramid_levels(root: str | os.PathLike[str]) -> tuple[Path, list[Level]]:
    """The local dataset or ``s0..sN`` pyramid at ``root`` (resolved) and its levels, finest
    first; :class:`NotEditableError` (with the reason) when it cannot be edited in place."""
    text = os.fspath(root)
    if "://" in text or text.lower().endswith(".zip") or ".zip/" in text.lower():
        raise NotEditableError(f"{text} is not a local folder; make an editable copy with `n5zarr convert`")
    folder = Path(text).resolve()
    if not folder.is_dir():
        raise NotEditableError(f"{folder} is not a local folder")
    doc = _attributes(folder)
    if doc is not None and "dimensions" in doc:
        levels = [Level(folder, N5DatasetMetadata.from_json(doc, str(folder / N5_JSON)))]
    else:
        names = sorted((p.name for p in folder.iterdir() if p.name[:1] == "s" and p.name[1:].isdigit()), key=lambda n: int(n[1:]))
        levels = []
        for name in names:
            child = _attributes(folder / name)
            if child is None or "dimensions" not in child:
                break
            levels.append(Level(folder / name, N5DatasetMetadata.from_json(child, str(folder / name / N5_JSON))))
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
        step = tuple(pyramid.level_factor(a, b) for a, b in zip(fine.shape, coarse.shape, strict=True))
        if len(fine.shape) != len(coarse.shape) or any(
            math.ceil(a / f) != b for a, b, f in zip(fine.shape, coarse.shape, step, strict=True)
        ):
            raise NotEditableError(f"{coarse.folder} is not a downsampling of {fine.folder}; cannot keep the pyramid consistent")
        steps.append(step)
    return steps


# -- reading blocks (with the save's pending blocks over them) --------------------------


def read_block(level: Level, index: Index) -> np.ndarray | None:
    """The stored block at its header shape, napari order (a writable copy), or None."""
    try:
        raw = files.read_regular_file(level.path(index), metadata=False)  # regular files only, capped
    except (FileNotFoundError, NotADirectoryError):
        return None
    where = f"N5 block {level.path(index)}"
    return np.array(level.codec.decode_block(raw, level.dtype, len(level.shape), where=where).T)


def block_values(level: Level, index: Index) -> np.ndarray:
    """The block's values inside the array (missing: zeros), napari order."""
    inside = level.inside(index)
    out = np.zeros(inside, dtype=level.dtype)
    stored = read_block(level, index)
    if stored is not None:
        common = tuple(slice(0, min(a, b)) for a, b in zip(inside, stored.shape, strict=True))
        out[common] = stored[common]
    return out


def read_region(level: Level, pending: Mapping[Index, Any], lo: Sequence[int], hi: Sequence[int]) -> np.ndarray:
    """Pixels ``[lo, hi)`` of ``level``, ``pending[index].values`` over the stored blocks."""
    out = np.zeros([b - a for a, b in zip(lo, hi, strict=True)], dtype=level.dtype)
    ranges = [range(a // b, math.ceil(e / b)) for a, e, b in zip(lo, hi, level.block, strict=True)]
    for index in itertools.product(*ranges):
        values = pending[index].values if index in pending else block_values(level, index)
        bounds = level.bounds(index)
        src = tuple(slice(max(a, s.start) - s.start, min(e, s.stop) - s.start) for a, e, s in zip(lo, hi, bounds, strict=True))
        dst = tuple(slice(max(a, s.start) - a, min(e, s.stop) - a) for a, e, s in zip(lo, hi, bounds, strict=True))
        out[dst] = values[src]
    return out


# -- new blocks ----------------------------------------------------------------------------


@dataclass
class NewBlock:
    values: np.ndarray
    """Inside the array, napari order."""
    encoded: bytes


def edge_convention(level: Level, looked_at: int = 64) -> str:
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
        try:
            with open(level.path(index), "rb") as f:
                head = f.read(4 + 4 * len(level.shape))
            return "pad" if tuple(parse_header(head).shape)[::-1] == level.block else "truncate"
        except (FileNotFoundError, ValueError):
            continue
    return "truncate"


def new_block(level: Level, index: Index, values: np.ndarray, convention: str) -> NewBlock | None:
    """The block at ``index`` holding ``values`` (inside the array), or None if unchanged.
    An existing block keeps its header shape and whatever its padding holds."""
    stored = read_block(level, index)
    inside = level.inside(index)
    region = tuple(slice(0, n) for n in inside)
    if stored is None:
        if not values.any():
            return None  # missing reads as 0: nothing to write
        shape = level.block if convention == "pad" else inside
        full = np.zeros(shape, dtype=level.dtype)
    else:
        old = np.zeros(inside, dtype=level.dtype)
        common = tuple(slice(0, min(a, b)) for a, b in zip(inside, stored.shape, strict=True))
        old[common] = stored[common]
        if np.array_equal(old, values):
            return None
        full = stored
        if any(s < n for s, n in zip(stored.shape, inside, strict=True)):  # a short block: grow it
            full = np.zeros([max(s, n) for s, n in zip(stored.shape, inside, strict=True)], dtype=level.dtype)
            full[tuple(slice(0, s) for s in stored.shape)] = stored
    full[region] = values
    return NewBlock(np.ascontiguousarray(values, dtype=level.dtype), level.codec.encode_block(full.T))


def coarser_blocks(
    fine: Level, coarse: Level, step: Sequence[int], changed: Mapping[Index, NewBlock], method: pyramid.Method
) -> dict[Index, NewBlock]:
    """The blocks of ``coarse`` covering the ``changed`` blocks of ``fine``, recomputed."""
    touched: set[Index] = set()
    for index in changed:
        bounds = fine.bounds(index)
        ranges = [
            range((s.start // f) // b, math.ceil(math.ceil(s.stop / f) / b))
            for s, f, b in zip(bounds, step, coarse.block, strict=True)
        ]
        touched.update(itertools.product(*ranges))
    convention = edge_convention(coarse)
    out: dict[Index, NewBlock] = {}
    for index in sorted(touched):
        bounds = coarse.bounds(index)
        lo = [s.start * f for s, f in zip(bounds, step, strict=True)]
        hi = [min(s.stop * f, n) for s, f, n in zip(bounds, step, fine.shape, strict=True)]
        values = pyramid.downsample_block(read_region(fine, changed, lo, hi), step, method)
        block = new_block(coarse, index, values, convention)
        if block is not None:
            out[index] = block
    return out


def plan_save(
    levels: Sequence[Level], edits: Mapping[Index, np.ndarray], method: pyramid.Method = "mode"
) -> list[dict[Index, NewBlock]]:
    """Every level's changed blocks for level-0 blocks ``edits`` (values inside the array)."""
    convention = edge_convention(levels[0])
    first: dict[Index, NewBlock] = {}
    for index, values in edits.items():
        if values.shape != levels[0].inside(index):
            raise ValueError(f"block {index}: values of shape {values.shape}, expected {levels[0].inside(index)}")
        block = new_block(levels[0], index, np.asarray(values, dtype=levels[0].dtype), convention)
        if block is not None:
            first[index] = block
    plans = [first]
    for (fine, coarse), step in zip(itertools.pairwise(levels), _steps(levels), strict=True):
        plans.append(coarser_blocks(fine, coarse, step, plans[-1], method) if plans[-1] else {})
    return plans


# -- committing: journal, staged files, renames --------------------------------------------


def _crash_point(name: str, n: int | None = None) -> None:
    wanted = os.environ.get(CRASH_ENV)
    if wanted and wanted in (name, f"{name}:{n}"):
        os.kill(os.getpid(), signal.SIGKILL)


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _write_durably(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _write_journal(root: Path, doc: dict[str, Any]) -> None:
    tmp = root / (JOURNAL + ".tmp")
    _write_durably(tmp, json.dumps(doc).encode())
    os.replace(tmp, root / JOURNAL)
    _fsync_dir(root)


def commit(root: Path, files: Mapping[Path, bytes]) -> int:
    """Replace ``files`` (block path -> bytes) atomically under a journal; bytes written."""
    if not files:
        return 0
    rel = sorted(os.path.relpath(p, root) for p in files)
    _write_journal(root, {"version": 1, "state": "staging", "blocks": rel})
    _crash_point("journal")
    written = 0
    for n, (path, data) in enumerate(files.items()):
        _write_durably(path.with_name(path.name + STAGED_SUFFIX), data)
        written += len(data)
        _crash_point("staged", n)
    for folder in {p.parent for p in files}:
        _fsync_dir(folder)
    _write_journal(root, {"version": 1, "state": "committing", "blocks": rel})
    _crash_point("committing")
    for n, path in enumerate(files):
        os.replace(path.with_name(path.name + STAGED_SUFFIX), path)
        _crash_point("replaced", n)
    for folder in {p.parent for p in files}:
        _fsync_dir(folder)
    (root / JOURNAL).unlink()
    _fsync_dir(root)
    return written


def unfinished_save(root: str | os.PathLike[str]) -> str | None:
    """``"staging"`` or ``"committing"`` when a save of ``root`` was interrupted, else None."""
    try:
        doc = json.loads((Path(root) / JOURNAL).read_text())
    except (FileNotFoundError, NotADirectoryError, ValueError):
        return "staging" if (Path(root) / JOURNAL).exists() else None
    return str(doc.get("state", "staging")) if isinstance(doc, dict) else "staging"


def recover(root: Path) -> str | None:
    """Finish an interrupted save of ``root`` (hold the lock): a ``staging`` journal is
    rolled back (staged files removed: every block is still the old one), a ``committing``
    one redone (the staged blocks renamed into place). Returns what was done, or None."""
    path = root / JOURNAL
    if not path.exists():
        return None
    try:
        doc = json.loads(path.read_text())
        blocks = [root / b for b in doc["blocks"] if not os.path.isabs(b) and ".." not in Path(b).parts]
        state = doc.get("state")
    except (ValueError, KeyError, TypeError):
        blocks, state = [], "staging"  # torn journal: it was being written, nothing staged is trusted
    for block in blocks:
        staged = block.with_name(block.name + STAGED_SUFFIX)
        if state == "committing":
            if staged.exists():
                os.replace(staged, block)
        else:
            staged.unlink(missing_ok=True)
    for folder in {b.parent for b in blocks}:
        _fsync_dir(folder)
    path.unlink()
    _fsync_dir(root)
    return f"completed an unfinished save of {len(blocks)} blocks" if state == "committing" else "rolled back an unfinished save"


def lock(root: Path) -> Any:
    """The export lock of ``root`` (a second saver or exporter is refused, naming the first)."""
    from napari_n5zarr.write.safe_destination import DestinationLock

    return DestinationLock(root, f"{root} (saving label edits)")


# -- public ---------------------------------------------------------------------------------


def save_blocks(
    path: str | os.PathLike[str], edits: Mapping[Index, np.ndarray], method: pyramid.Method = "mode"
) -> SaveResult:
    """Write level-0 blocks ``edits`` (grid index -> values inside the array, napari order)
    of the dataset or pyramid at ``path``, and the coarser levels' covering blocks."""
    root, levels = pyramid_levels(path)
    with lock(root):
        recovered = recover(root)
        plans = plan_save(levels, edits, method)
        files = {level.path(i): b.encoded for level, plan in zip(levels, plans, strict=True) for i, b in plan.items()}
        written = commit(root, files)
    return SaveResult([len(p) for p in plans], written, recovered)


def region_blocks(level: Level, array: np.ndarray, offset: Sequence[int]) -> Iterator[tuple[Index, np.ndarray]]:
    """The level-0 blocks ``array`` at ``offset`` touches, each with its new values."""
    lo = list(offset)
    hi = [o + n for o, n in zip(offset, array.shape, strict=True)]
    if any(a < 0 or b > n for a, b, n in zip(lo, hi, level.shape, strict=True)):
        raise ValueError(f"region {lo}..{hi} is outside the dataset's shape {level.shape}")
    ranges = [range(a // b, math.ceil(e / b)) for a, e, b in zip(lo, hi, level.block, strict=True)]
    for index in itertools.product(*ranges):
        values = block_values(level, index)
        bounds = level.bounds(index)
        src = tuple(slice(max(a, s.start) - a, min(e, s.stop) - a) for a, e, s in zip(lo, hi, bounds, strict=True))
        dst = tuple(slice(max(a, s.start) - s.start, min(e, s.stop) - s.start) for a, e, s in zip(lo, hi, bounds, strict=True))
        values[dst] = array[src]
        yield index, values


def write_region(
    path: str | os.PathLike[str], array: Any, offset: Sequence[int] | None = None, *, method: pyramid.Method = "mode"
) -> SaveResult:
    """Write ``array`` (napari order) at ``offset`` (level-0 pixels) into the local N5 (or
    dual N5 + Zarr v3) integer dataset or ``s0..sN`` pyramid at ``path``, and recompute the
    covering blocks of every coarser level (``method``: export's label downsampling).

    Only blocks whose values change are written, each atomically, under a journal that the
    next save (or an editable open) completes after an interruption; the export lock keeps
    a second saver out. Raises :class:`NotEditableError` for what cannot be edited in place
    (a URL, a zip, a read-only folder, label multisets, a non-integer dataset)."""
    root, levels = pyramid_levels(path)
    values = np.asarray(array)
    offset = tuple(offset) if offset is not None else (0,) * values.ndim
    if values.ndim != len(levels[0].shape) or len(offset) != values.ndim:
        raise ValueError(f"array of {values.ndim} dimensions (offset {offset}) for a dataset of shape {levels[0].shape}")
    if values.dtype.kind not in "iub" or not np.can_cast(values.dtype, levels[0].dtype, "same_kind"):
        raise ValueError(f"cannot write {values.dtype} values into a {levels[0].dtype} dataset")
    with lock(root):
        recovered = recover(root)
        edits = dict(region_blocks(levels[0], values.astype(levels[0].dtype, copy=False), offset))
        plans = plan_save(levels, edits, method)
        files = {level.path(i): b.encoded for level, plan in zip(levels, plans, strict=True) for i, b in plan.items()}
        written = commit(root, files)
    return SaveResult([len(p) for p in plans], written, recovered)
