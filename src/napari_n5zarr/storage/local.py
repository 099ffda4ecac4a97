"""A local folder store that reads regular files only and caps metadata documents.

zarr's ``LocalStore`` opens whatever sits at a key: a FIFO named ``attributes.json`` (or a
block) blocks the read forever, and a link to ``/dev/zero`` reads until memory runs out.
:class:`SafeLocalStore` reads through :func:`napari_n5zarr.storage.files.read_regular_file`,
which refuses anything that is not a regular file, naming it.
"""

from __future__ import annotations

import asyncio
import os
from typing import TYPE_CHECKING

from zarr.buffer import default_buffer_prototype
from zarr.storage import LocalStore

from napari_n5zarr.byte_ranges import span_of
from napari_n5zarr.n5.constants import METADATA_FILES, ZARR_V2_FILES, ReadLimit
from napari_n5zarr.storage import files

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterable

    from zarr.abc.buffer import Buffer, BufferPrototype
    from zarr.abc.store import ByteRequest

METADATA_NAMES = METADATA_FILES | ZARR_V2_FILES
"""Keys whose documents are capped by :func:`~napari_n5zarr.n5.constants.max_metadata_bytes`."""


def is_metadata_key(key: str) -> bool:
    """True for metadata documents (``attributes.json``, ``zarr.json``, Zarr v2 files)."""
    return key.rsplit("/", 1)[-1] in METADATA_NAMES


class SafeLocalStore(LocalStore):
    """``LocalStore`` that refuses non-regular files and oversized metadata documents, and
    lists each real folder once (:class:`~napari_n5zarr.storage.files.LinkGuard`: links back
    into the container are not listed, so walks through link loops and fan-out end)."""

    _links: files.LinkGuard | None = None
    limited_reads = True
    """:meth:`get` and :meth:`get_sync` take ``limit``: a block's dataset's own cap
    (:class:`~napari_n5zarr.n5.stores.N5DefaultStore` passes it), checked before reading."""
    sync_reads = True
    """:meth:`get_sync` and :meth:`list_dir_sync` answer without zarr's event loop (see
    :func:`napari_n5zarr.n5.stores.get_many`): a listing of 10,000 nodes costs os calls only."""

    @property
    def _root_text(self) -> str:
        """The root as a string (joining a str costs ~1 us, a Path ~40 us)."""
        text = self.__dict__.get("_root_str")
        if text is None or self.__dict__.get("_root_of") is not self.root:
            text = self.__dict__["_root_str"] = os.fspath(self.root)
            self.__dict__["_root_of"] = self.root
        return text

    def _listed(self, prefix: str) -> list[str]:
        folder = os.path.join(self.root, prefix) if prefix else str(self.root)
        if self._links is None:
            self._links = files.LinkGuard(self.root)
        try:
            with os.scandir(folder) as entries:
                found = [(e.name, e.path, e.is_symlink()) for e in entries]
        except (FileNotFoundError, NotADirectoryError):
            return []
        return [
            name
            for name, path, link in found
            if not link or not os.path.isdir(path) or self._links.follows(path, True)
        ]

    async def list_dir(self, prefix: str) -> AsyncIterator[str]:
        for name in await asyncio.to_thread(self._listed, prefix.rstrip("/")):
            yield name

    def list_dir_sync(self, prefix: str) -> list[str]:
        """What :meth:`list_dir` yields, read in the calling thread."""
        return self._listed(prefix.rstrip("/"))

    def __repr__(self) -> str:
        return f"SafeLocalStore('{self.root}')"

    def _read(self, key: str, prototype: BufferPrototype | None, byte_range: ByteRequest | None,
              limit: ReadLimit | None = None) -> Buffer | None:  # fmt: skip
        span = span_of(byte_range)
        try:
            data = files.read_regular_file(
                os.path.join(self._root_text, key), span, metadata=is_metadata_key(key), limit=limit
            )
        except files.MISSING:
            return None
        return (prototype or default_buffer_prototype()).buffer.from_bytes(data)

    def get_sync(self, key: str, *, prototype: BufferPrototype | None = None, byte_range: ByteRequest | None = None,
                 limit: ReadLimit | None = None) -> Buffer | None:  # fmt: skip
        self._ensure_open_sync()
        return self._read(key, prototype, byte_range, limit)

    async def get(self, key: str, prototype: BufferPrototype | None = None, byte_range: ByteRequest | None = None,
                  *, limit: ReadLimit | None = None) -> Buffer | None:  # fmt: skip
        await self._ensure_open()
        return await asyncio.to_thread(self._read, key, prototype, byte_range, limit)

    async def get_partial_values(
        self, prototype: BufferPrototype, key_ranges: Iterable[tuple[str, ByteRequest | None]]
    ) -> list[Buffer | None]:
        await self._ensure_open()
        return list(
            await asyncio.gather(
                *(asyncio.to_thread(self._read, k, prototype, r) for k, r in key_ranges)
            )
        )
