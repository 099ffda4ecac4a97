"""Paintera label multisets read lazily as uint64 labels, at every pyramid level.

A multiset level is a :class:`MultisetLevel`: a :class:`~napari_n5zarr.read.levels.LazyLevel`
whose every read goes through its :class:`MultisetSource` (the block path of
:mod:`~napari_n5zarr.read.fetch`: cache, concurrency, prefetch, errors naming the block),
which decodes blocks with :func:`~napari_n5zarr.n5.label_multiset.decode_multiset_block`.
zarr is never asked for the values (its ``n5_default`` codec refuses varlength blocks): the
blocks come through the zarr array's store chain.
Blocks never written read as 0 (background). Strided reads read the covering region.

Paintera's ``fragment-segment-assignment`` (:func:`read_assignment`) maps fragments to
segments per read (:attr:`MultisetLevel.assignment`).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import numpy as np

from napari_n5zarr.errors import N5FormatError
from napari_n5zarr.n5.label_multiset import (
    apply_assignment,
    assignment_table,
    cell_shape,
    decode_multiset_block,
)
from napari_n5zarr.read.fetch import BlockSource
from napari_n5zarr.read.levels import LazyLevel, Report

if TYPE_CHECKING:
    import zarr

ASSIGNMENT = "fragment-segment-assignment"
"""The dataset of a Paintera label group mapping fragments to segments."""
FRAGMENTS_ENV = "N5ZARR_PAINTERA_FRAGMENTS"
"""Environment variable: ``1`` shows (and converts) Paintera labels as raw fragments, not
segments (the default, as Paintera shows them)."""
UINT64 = np.dtype("uint64")


def show_fragments() -> bool:
    from napari_n5zarr.environment import flag

    return flag(FRAGMENTS_ENV, False)


class MultisetSource(BlockSource):
    """The blocks of a label-multiset dataset as uint64 labels (napari order)."""

    def __init__(self, layout: Any, decompress: Any, cache: Any = None) -> None:
        super().__init__(dataclasses.replace(layout, dtype=UINT64, fill=0), cache)
        self._decompress = decompress

    def decode(self, raw: Any, key: str) -> np.ndarray:
        where = self.where(key)
        data = (
            raw.as_numpy_array() if hasattr(raw, "as_numpy_array") else np.frombuffer(raw, np.uint8)
        )
        try:
            index = tuple(int(p) for p in key[len(self.prefix) :].split("/"))
        except ValueError:
            raise N5FormatError(f"{where}: not a block key") from None
        cell = cell_shape(index, self.shape[::-1], self.blocks[::-1])
        out = decode_multiset_block(
            data, cell, where, self._decompress
        ).T  # napari order, C-contiguous
        out.flags.writeable = False
        return out


def source_for_array(array: zarr.Array) -> MultisetSource:
    """The block path of a multiset dataset opened with zarr (any store)."""
    plain = BlockSource.for_array(array)
    codecs = tuple(getattr(array.metadata, "codecs", ()))
    if plain is None or not codecs:
        raise N5FormatError(
            f"{array.path or '/'}: a label multiset this store cannot serve block by block"
        )
    return MultisetSource(
        plain.layout, codecs[0]._decompress
    )  # the n5_default codec's bounded decompression


class MultisetLevel(LazyLevel):
    """One label-multiset level in napari order, uint64 (see the module docstring)."""

    assignment: tuple[np.ndarray, np.ndarray] | None = None
    """(sorted fragments, their segments) applied to every read; None: fragments as stored."""

    def __init__(
        self, array: zarr.Array, *, n5_order: bool = True, report: Report | None = None
    ) -> None:
        source = source_for_array(array)
        self._setup(
            source.shape, source.blocks, UINT64, n5_order=True, source=source, report=report
        )
        self.array = array

    def _fast(self, basic: tuple[slice, ...]) -> bool:
        return True

    def read(
        self, basic: tuple[slice, ...], squeeze: Any = frozenset(), rest: tuple | None = None
    ) -> np.ndarray:
        steps = tuple(s.step or 1 for s in basic)
        cover = tuple(slice(s.start, max(s.start, s.stop), 1) for s in basic)
        out = self._read_fast(cover)
        if any(k != 1 for k in steps):
            out = out[tuple(slice(None, None, k) for k in steps)]
        out = apply_assignment(out, self.assignment)
        if squeeze:
            out = out.reshape([n for i, n in enumerate(out.shape) if i not in squeeze])
        return out[rest] if rest is not None else out

    def __reduce__(self) -> tuple[Any, ...]:
        return (_with_assignment, (super().__reduce__(), self.assignment))


def _with_assignment(reduced: tuple[Any, ...], assignment: Any) -> MultisetLevel:
    level = reduced[0](*reduced[1])
    level.assignment = assignment
    return level


def is_multiset_array(array: Any) -> bool:
    from napari_n5zarr.n5.label_multiset import is_label_multiset

    try:
        return is_label_multiset(dict(array.attrs))
    except (AttributeError, TypeError, ValueError):
        return False


MAX_EXPANSION = 1032
"""Most bytes one stored byte of a compressed block decodes to (deflate's limit, 1032:1):
a table declaring more than its stored bytes can hold is refused before it is allocated."""


def check_assignment_size(array: zarr.Array, path: str) -> str | None:
    """Why the table ``array`` cannot be what its metadata declares, checked against the
    bytes actually stored (one listing, no block read), else None: its values would be
    allocated whole (a 200-byte ``attributes.json`` may declare 200M pairs)."""
    shape = tuple(array.shape)
    if len(shape) != 2 or shape[1] != 2:
        return f"{path}: fragment-segment-assignment of shape {list(shape)}; expected [N, 2]"
    declared = shape[0] * 2 * array.dtype.itemsize
    if not declared:
        return None
    from napari_n5zarr.n5.stores import stored_size

    stored = stored_size(array.store, array.path)  # its blocks and metadata document
    if stored is None:  # too many files to add up: as many as that hold a table
        return None
    codecs = getattr(array.metadata, "codecs", None) or (None,)  # Zarr v2 metadata has none
    codec = codecs[0]
    bound = stored if getattr(codec, "compressor", None) is None else stored * MAX_EXPANSION
    if declared > bound:
        from napari_n5zarr.n5.stores import store_location

        where = store_location(array.store, array.path)
        return f"{where}: declares {shape[0]} fragment-segment pairs ({declared} bytes) but stores {stored} bytes"
    return None


def read_assignment(
    node: zarr.Group | zarr.Array, path: str, report: Report | None = None
) -> tuple[np.ndarray, np.ndarray] | None:
    """Paintera's fragment -> segment table at ``path`` below the zarr group ``node``, None
    where there is none. A table that cannot be read raises (N5FormatError): segments must
    not silently be fragments. A table larger than its stored bytes can hold
    (:func:`check_assignment_size`) is never allocated: with ``report`` it is said in one
    line and the labels show as fragments (Paintera's loader falls back to an empty table
    too), without it raises."""
    import zarr

    try:
        array = node[path]  # type: ignore[index]
    except KeyError:
        return None
    except Exception as e:
        raise N5FormatError(
            f"{path}: cannot read Paintera's fragment-segment assignment: {e}"
        ) from None
    if not isinstance(array, zarr.Array):
        return None
    try:
        refused = check_assignment_size(array, path)
    except Exception as e:
        raise N5FormatError(
            f"{path}: cannot read Paintera's fragment-segment assignment: {e}"
        ) from None
    if refused is not None:
        if report is None:
            raise N5FormatError(refused)
        report(f"{refused}; shown as fragments")
        return None
    try:
        pairs = np.asarray(array[...]).T  # zarr sees N5 order: [N, 2]
    except Exception as e:
        raise N5FormatError(
            f"{path}: cannot read Paintera's fragment-segment assignment: {e}"
        ) from None
    return assignment_table(pairs)


__all__ = [
    "ASSIGNMENT",
    "FRAGMENTS_ENV",
    "MAX_EXPANSION",
    "MultisetLevel",
    "MultisetSource",
    "check_assignment_size",
    "read_assignment",
    "show_fragments",
]
