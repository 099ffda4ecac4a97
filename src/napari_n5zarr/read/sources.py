"""Where a tree's names and metadata bytes come from: a local folder or any zarr store.

Both answer the same small protocol (``where``, ``names``, ``read``, ``read_many``,
``is_group_dir``, ``walk_files``) for :class:`~napari_n5zarr.read.tree.Tree`'s paged listing.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from napari_n5zarr.errors import N5MetadataError
from napari_n5zarr.n5.constants import N5_JSON, ZARR_JSON, max_metadata_bytes
from napari_n5zarr.read.node import human_bytes
from napari_n5zarr.storage.files import LinkGuard, read_regular_file
from napari_n5zarr.storage.location import join

if TYPE_CHECKING:
    from zarr.abc.store import Store


class LocalSource:
    """A local folder read with ``os`` calls.

    Written by hand on purpose: zarr's LocalStore runs every call through its event-loop
    thread and a thread pool (~0.2 ms each), which made a 10,000-node listing take seconds;
    ``os.scandir`` also tells folders from files without one request per name."""

    def __init__(self, root: Path) -> None:
        self.root = str(root).rstrip(os.sep) or os.sep  # str, not Path: pathlib costs ~40 us a join
        self.links = LinkGuard(self.root)  # each real folder once: link loops and fan-out end

    def where(self, key: str) -> str:
        return f"{self.root}{os.sep}{key}" if key else self.root

    def names(self, path: str) -> list[str]:
        return [name for name in self.links.folders(self.where(path)) if not name.startswith(".")]

    def read(self, key: str) -> bytes | None:
        path = self.where(key)
        try:
            st = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        if not stat.S_ISREG(st.st_mode):
            raise N5MetadataError(f"{path}: not a regular file")
        if st.st_size > max_metadata_bytes():
            raise N5MetadataError(f"{path}: {human_bytes(st.st_size)} is over the {human_bytes(max_metadata_bytes())} metadata limit")
        return read_regular_file(path, metadata=True)  # opened without blocking; checked again once open

    def read_many(self, keys: Sequence[str]) -> list[bytes | None | BaseException]:
        out: list[bytes | None | BaseException] = []
        for key in keys:
            try:
                out.append(self.read(key))
            except Exception as exc:  # noqa: BLE001 (per-key boundary: the error is returned in place of the bytes)
                out.append(exc)
        return out

    def is_group_dir(self, path: str) -> bool:
        return True  # names() returns folders only

    def walk_files(self, path: str) -> Iterator[str]:
        for dirpath, _dirs, files in os.walk(self.where(path)):
            for f in files:
                yield os.path.join(dirpath, f)


class StoreSource:
    """Any zarr store (zip, fsspec URLs, memory); reads of one page go out concurrently."""

    def __init__(self, store: Store, location: str) -> None:
        self.store = store
        self.location = location.rstrip("/")

    def where(self, key: str) -> str:
        return join(self.location, key)

    def names(self, path: str) -> list[str]:
        from napari_n5zarr.zarr_internals import sync

        async def names() -> list[str]:
            return [k async for k in self.store.list_dir(path)]

        return [n for n in sync(names()) if n not in (N5_JSON, ZARR_JSON) and not n.startswith(".")]

    def read_many(self, keys: Sequence[str]) -> list[bytes | None | BaseException]:
        import asyncio

        from zarr.buffer import default_buffer_prototype

        from napari_n5zarr.zarr_internals import sync

        async def one(key: str) -> bytes | None:
            buf = await self.store.get(key, default_buffer_prototype())
            if buf is None:
                return None
            if len(buf) > max_metadata_bytes():
                raise N5MetadataError(f"{self.where(key)}: over the {human_bytes(max_metadata_bytes())} metadata limit")
            return buf.to_bytes()

        async def many() -> list[Any]:
            return await asyncio.gather(*(one(k) for k in keys), return_exceptions=True)

        return sync(many())

    def read(self, key: str) -> bytes | None:
        value = self.read_many([key])[0]
        if isinstance(value, BaseException):
            raise value
        return value

    def is_group_dir(self, path: str) -> bool:
        try:
            return bool(self.names(path)) or bool(self._any_key(path))
        except Exception:  # noqa: BLE001 (any store failure means "not a group folder" here; reading it reports the error)
            return False

    def _any_key(self, path: str) -> bool:
        from napari_n5zarr.zarr_internals import sync

        async def first() -> bool:
            async for _ in self.store.list_dir(path):
                return True
            return False

        return sync(first())

    def walk_files(self, path: str) -> Iterator[str]:
        from napari_n5zarr.zarr_internals import sync

        async def keys() -> list[str]:
            return [k async for k in self.store.list_prefix(f"{path}/" if path else "")]

        yield from sync(keys())
