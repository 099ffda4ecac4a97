"""The first block of an N5 dataset on disk: found by listing, without the dataset's metadata.

For decisions about a whole dataset before anything is written (``n5zarr add-zarr-metadata``
refuses a dataset whose blocks are not in default mode: see
:func:`napari_n5zarr.n5.header.require_default_mode`, the one block-mode check).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from napari_n5zarr.n5.header import parse_header

if TYPE_CHECKING:
    from zarr.abc.store import Store


def first_block_key(store: Store, prefix: str, ndim: int) -> str | None:
    """Key of the first block (lowest index along every axis present) under the dataset at
    ``prefix``, or None if it has no blocks. One listing per dimension."""
    from napari_n5zarr.zarr_internals import sync

    async def names(path: str) -> list[str]:
        return sorted([k async for k in store.list_dir(path)])

    path = prefix.rstrip("/")
    for _ in range(ndim):
        entries = [e for e in sync(names(path)) if e.isdigit()]
        if not entries:
            return None
        path = f"{path}/{entries[0]}" if path else entries[0]
    return path


def first_block_mode(store: Store, prefix: str, ndim: int) -> int | None:
    """Mode of the first block found (None if the dataset has no blocks)."""
    from zarr.buffer import default_buffer_prototype

    from napari_n5zarr.zarr_internals import sync

    key = first_block_key(store, prefix, ndim)
    if key is None:
        return None
    raw = sync(store.get(key, default_buffer_prototype()))
    return None if raw is None else parse_header(raw.to_bytes()).mode
