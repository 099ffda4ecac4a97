"""Level 0 of a local N5 or Zarr v3 / OME-Zarr labels dataset or pyramid as an editable lazy
array-like (napari's ``Labels`` paints through ``data[key]`` / ``data[key] = value``; no napari here).

Reads go through the read-only lazy level (its cache and prefetching) with the edited
blocks laid over it; writes touch only the blocks they reach, held in memory (only
touched blocks are held) and marked dirty until :meth:`EditableLevel.save` writes them
back through :func:`napari_n5zarr.write.edit.save.save_changes`. Saved blocks leave memory
(their old decodings leave the shared block cache), so the held blocks are the unsaved ones.

:class:`ReadOnlyLevel` is the same surface over data that cannot be edited in place: the
first write calls ``on_refused(reason)`` once and every write is dropped.
"""

from __future__ import annotations

import itertools
import math
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from napari_n5zarr.block_grid import block_ranges, overlap
from napari_n5zarr.errors import NotEditableError
from napari_n5zarr.write.edit import journal as save_journal
from napari_n5zarr.write.edit import label_pyramid
from napari_n5zarr.write.edit import save as edits

Index = tuple[int, ...]


def _expand(key: Any, ndim: int) -> tuple[Any, ...]:
    key = key if isinstance(key, tuple) else (key,)
    if any(k is Ellipsis for k in key):
        at = next(i for i, k in enumerate(key) if k is Ellipsis)
        key = key[:at] + (slice(None),) * (ndim - len(key) + 1) + key[at + 1 :]
    return key + (slice(None),) * (ndim - len(key))


def _bounds(
    key: tuple[Any, ...], shape: tuple[int, ...]
) -> tuple[list[int], list[int], tuple[Any, ...]]:
    """The bounding box ``[lo, hi)`` that ``key`` reaches and ``key`` relative to it."""
    lo: list[int] = []
    hi: list[int] = []
    rel: list[Any] = []
    for k, n in zip(key, shape, strict=True):
        if isinstance(k, slice):
            start, stop, step = k.indices(n)
            span = range(start, stop, step)
            a, b = (min(span), max(span) + 1) if len(span) else (0, 0)
            lo.append(a)
            hi.append(b)
            rel.append(
                slice(start - a, (stop - a) if stop - a >= 0 else None, step)
                if len(span)
                else slice(0, 0)
            )
        elif isinstance(k, (int, np.integer)):
            i = int(k) + (n if k < 0 else 0)
            if not 0 <= i < n:
                raise IndexError(f"index {k} is out of bounds for an axis of size {n}")
            lo.append(i)
            hi.append(i + 1)
            rel.append(0)
        else:
            idx = np.asarray(k)
            if idx.dtype == bool:
                raise TypeError("boolean masks are not supported; use integer indices")
            idx = np.where(idx < 0, idx + n, idx).astype(np.intp)
            a, b = (int(idx.min()), int(idx.max()) + 1) if idx.size else (0, 0)
            lo.append(a)
            hi.append(b)
            rel.append(idx - a)
    return lo, hi, tuple(rel)


class _ArrayLike:
    """What napari asks of a layer's array besides indexing, from ``shape`` alone."""

    shape: tuple[int, ...]

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def __len__(self) -> int:
        return self.shape[0]


class EditableLevel(_ArrayLike):
    """Level 0 of the dataset or pyramid at ``root`` (local), editable block by block.

    Each touched block is held twice: as the layer first read it and as it is now; a block
    is unsaved while the two differ (undo back to the read values: nothing to save). A save
    writes only the voxels that differ, merged into the block as it is on disk then
    (:func:`~napari_n5zarr.write.edit.save.save_changes`), and the layer then shows the merged
    block. Values the dtype cannot hold are refused, never wrapped."""

    def __init__(
        self,
        root: str | os.PathLike[str],
        base: Any | None = None,
        levels: list[label_pyramid.Level] | None = None,
    ) -> None:
        if levels is None:
            self.root, levels = label_pyramid.pyramid_levels(root)
        else:
            self.root = Path(os.fspath(root)).resolve()
        self.level = levels[0]
        self.shape: tuple[int, ...] = self.level.shape
        self.dtype: np.dtype = self.level.dtype
        self.signature = self.level.signature
        self.base = base
        self._blocks: dict[Index, np.ndarray] = {}
        self._read_as: dict[Index, np.ndarray] = {}
        self.dirty: set[Index] = set()
        self._lock = threading.RLock()
        self._listeners: list[Callable[[], Any]] = []
        self.last_save: edits.SaveResult | None = None

    def __repr__(self) -> str:
        return f"EditableLevel({self.root}, shape={self.shape}, dtype={self.dtype}, dirty={len(self.dirty)})"

    def subscribe(self, callback: Callable[[], Any]) -> None:
        """Call ``callback()`` after every write and every save (from the writing thread)."""
        self._listeners.append(callback)

    def _changed(self) -> None:
        for callback in list(self._listeners):
            callback()

    # -- reading ----------------------------------------------------------------------
    def _read(self, lo: list[int], hi: list[int]) -> np.ndarray:
        """Pixels ``[lo, hi)``: the base level, edited blocks over it."""
        if self.base is not None:
            out = np.array(
                self.base[tuple(slice(a, b) for a, b in zip(lo, hi, strict=True))], dtype=self.dtype
            )
        else:
            out = label_pyramid.shown_region(self.level, lo, hi)
        for index, values in self._touching(lo, hi, only_held=True):
            src, dst = overlap(index, self.level.block, lo, hi)
            out[dst] = values[src]
        return out

    def _touching(
        self, lo: list[int], hi: list[int], only_held: bool
    ) -> list[tuple[Index, np.ndarray]]:
        ranges = block_ranges(lo, hi, self.level.block)
        if only_held:
            if math.prod(len(r) for r in ranges) > len(self._blocks):
                return [
                    (i, v)
                    for i, v in self._blocks.items()
                    if all(i[a] in ranges[a] for a in range(len(i)))
                ]
            return [(i, self._blocks[i]) for i in itertools.product(*ranges) if i in self._blocks]
        return [(i, self._block(i)) for i in itertools.product(*ranges)]

    def _block(self, index: Index) -> np.ndarray:
        held = self._blocks.get(index)
        if held is None:
            bounds = self.level.bounds(index)
            held = self._read([s.start for s in bounds], [s.stop for s in bounds])
        return held

    def __getitem__(self, key: Any) -> Any:
        lo, hi, rel = _bounds(_expand(key, self.ndim), self.shape)
        with self._lock:
            region = self._read(lo, hi)
        return region[rel]

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = self[...]
        return out if dtype is None else out.astype(dtype)

    # -- writing ----------------------------------------------------------------------
    def __setitem__(self, key: Any, value: Any) -> None:
        lo, hi, rel = _bounds(_expand(key, self.ndim), self.shape)
        value = np.asarray(value)
        edits.check_fits(value, self.dtype, f"labels {self.root}")
        with self._lock:
            region = self._read(lo, hi)
            region[rel] = value
            for index, old in self._touching(lo, hi, only_held=False):
                src, dst = overlap(index, self.level.block, lo, hi)
                if np.array_equal(old[src], region[dst]):
                    continue
                if index not in self._blocks:
                    self._read_as[index] = _compact(old)
                    old = old.copy()
                old[src] = region[dst]
                self._blocks[index] = old
                if np.array_equal(old, self._read_as[index]):
                    self.dirty.discard(index)  # back to what was read (undo): nothing to save
                else:
                    self.dirty.add(index)
        self._changed()

    @property
    def modified(self) -> bool:
        """Edits not yet saved."""
        return bool(self.dirty)

    @property
    def unsaved_blocks(self) -> int:
        """Level-0 blocks holding unsaved edits."""
        return len(self.dirty)

    def save(self) -> edits.SaveResult:
        """Write the voxels changed in the dirty blocks (merged into the blocks as they are
        on disk now) and the coarser levels' covering blocks back."""
        with self._lock:
            todo = {i: edits.Change(self._read_as[i], self._blocks[i]) for i in sorted(self.dirty)}
            if not todo:
                return edits.SaveResult([], 0)
            result = edits.save_changes(self.root, todo, expect=self.signature)
            self._let_go(list(result.merged))
            self.dirty.clear()
            self.last_save = result
        self._changed()
        return result

    def _let_go(self, saved: list[Index]) -> None:
        """Saved blocks leave memory: the cached decodings of their old values are dropped
        (the level's and the base's), so reads see the blocks as saved, from disk; a long
        session holds only its unsaved blocks (memory bounded by the edits, not the data)."""
        for source in {
            id(s): s
            for s in (self.level.source, getattr(self.base, "source", None))
            if s is not None
        }.values():
            source.forget(saved)
        for index in saved:
            self._blocks.pop(index, None)
            self._read_as.pop(index, None)


def _compact(block: np.ndarray) -> np.ndarray:
    """``block`` as read, kept until its save: a block of one value (an absent block of new
    labels reads as all 0) as a read-only broadcast of that value, not a full copy."""
    first = block.flat[0] if block.size else None
    if first is not None and not np.any(block != first):
        return np.broadcast_to(block.flat[:1].copy().reshape(()), block.shape)
    return block


class ReadOnlyLevel(_ArrayLike):
    """``base`` (a lazy level) whose writes are refused: ``on_refused(reason)`` once."""

    def __init__(self, base: Any, reason: str, on_refused: Callable[[str], Any] | None = None,
                 stands_for: EditableLevel | None = None) -> None:  # fmt: skip
        self.base, self.reason, self.on_refused = base, reason, on_refused
        self.stands_for = stands_for
        """The editable level 0 this (coarser) view stands in for, if any: saves go to it."""
        self.shape, self.dtype = tuple(base.shape), np.dtype(base.dtype)
        self._told = False

    def __getitem__(self, key: Any) -> Any:
        return np.asarray(self.base[key])

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return np.asarray(self.base, dtype=dtype)

    def __setitem__(self, key: Any, value: Any) -> None:
        if not self._told:
            self._told = True
            if self.on_refused is not None:
                self.on_refused(self.reason)


def editable_reason(root: str | os.PathLike[str]) -> str | None:
    """Why the labels at ``root`` cannot be edited in place (None: they can). A save
    journal there that cannot be used makes them read-only too (never waited on)."""
    found = _editable_levels(root)
    return found if isinstance(found, str) else None


def _editable_levels(
    root: str | os.PathLike[str],
    find: Callable[[], tuple[Path, list[label_pyramid.Level]]] | None = None,
) -> tuple[Path, list[label_pyramid.Level]] | str:
    """The pyramid at ``root`` and its levels (read once, or by ``find``), or why it cannot be
    edited in place."""
    try:
        folder, levels = find() if find is not None else label_pyramid.pyramid_levels(root)
    except NotEditableError as e:
        return str(e)
    except Exception as e:  # anything unusual: read-only, saying why
        return f"{e}"
    return save_journal.journal_problem(folder, levels) or (folder, levels)


def open_editable(
    root: str | os.PathLike[str],
    base: Any | None = None,
    levels: list[label_pyramid.Level] | None = None,
) -> EditableLevel:
    """An :class:`EditableLevel` of ``root`` (``levels``: its levels, found already); an
    interrupted save there is finished first (under the export locks)."""
    folder = Path(os.fspath(root)).resolve()
    state = save_journal.unfinished_save(folder, levels)
    if state in ("staging", "committing"):
        save_journal.recover_at(folder, levels)
    return EditableLevel(folder, base, levels)


def _reader_levels(
    root: Path, keys: Sequence[str], arrays: Sequence[Any]
) -> tuple[Path, list[label_pyramid.Level]]:
    folder = label_pyramid.local_folder(root)
    return folder, label_pyramid.levels_of(folder, keys, arrays)


def pyramid_root(
    source: str, paths: Sequence[str], arrays: Sequence[Any] = ()
) -> tuple[tuple[Path, list[label_pyramid.Level]] | None, str | None]:
    """The local pyramid (its folder and levels) whose levels are the level ``paths`` under
    ``source``, and None; or None and why those labels cannot be edited in place.
    ``arrays``: the levels' zarr arrays as the reader opened them; a pyramid whose levels
    are the datasets of one folder is then not read again."""
    from napari_n5zarr.storage.location import local_path

    base = local_path(source) if source else None
    if base is None:
        return (
            None,
            f"{source or 'this layer'} is not a local folder; make an editable copy with `n5zarr convert`",
        )
    parts = [p.strip("/") for p in paths]
    root = base / parts[0] if len(parts) == 1 else base / str(Path(parts[0]).parent)
    keys = [os.path.relpath(base / p, root).replace(os.sep, "/") for p in parts]
    if (
        len(parts) > 1
        and len(arrays) == len(parts)
        and all(a is not None and "/" not in k for a, k in zip(arrays, keys, strict=True))
    ):
        found = _editable_levels(root, lambda: _reader_levels(root, keys, arrays))
    else:
        found = _editable_levels(root)
    if isinstance(found, str):
        return None, found
    got = [level.folder for level in found[1]]
    expected = [(base / p).resolve() for p in parts]
    if got[: len(expected)] != expected:
        names = [os.path.relpath(f, found[0]) for f in got]
        return (
            None,
            f"{found[0]}: its levels {parts} are not the datasets {names} of the pyramid this editor writes",
        )
    return found, None


def save_edits(layer: Any) -> edits.SaveResult:
    """Write the edited blocks of ``layer`` (a napari Labels layer opened editable by
    napari-n5zarr, or its data) back into its dataset or pyramid (N5, Zarr v3): changed level-0
    blocks, then the coarser levels' covering blocks (see :func:`~napari_n5zarr.write.edit.save.save_changes`).

    Raises :class:`~napari_n5zarr.write.NotEditableError` (saying why and how to get
    an editable copy) for a layer that is not editable."""
    data = getattr(layer, "data", layer)
    data = getattr(data, "stands_for", None) or data  # a 3D view of a level too big for 3D
    if isinstance(data, EditableLevel):
        return data.save()
    reason = getattr(data, "reason", None)
    if reason is None:
        meta = getattr(layer, "metadata", {}) or {}
        reason = (meta.get("napari_n5zarr") or {}).get(
            "read_only"
        ) or "it was not opened editable by napari-n5zarr"
    raise NotEditableError(f"cannot save {getattr(layer, 'name', 'these labels')}: {reason}")
