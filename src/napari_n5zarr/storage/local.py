"""A local folder store that reads regular files only and caps metadata documents.

zarr's ``LocalStore`` opens whatever sits at a key: a FIFO named ``attributes.json`` (or a
block) blocks the read forever, and a link to ``/dev/zero`` reads until memory runs out.
:class:`SafeLocalStore` opens without blocking, checks the opened file (no race between
the check and the read), and refuses anything that is not a regular file, naming it.
"""

from __future__ import annotations

import asyncio
import errno
import io
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from zarr.abc.store import OffsetByteRequest, RangeByteRequest, SuffixByteRequest
from zarr.core.buffer import default_buffer_prototype
from zarr.storage import LocalStore

from napari_n5zarr.errors import N5StoreError
from napari_n5zarr.n5.limits import check_metadata_size

if TYPE_CHECKING:
    from collections.abc import Iterable

    from zarr.abc.store import ByteRequest
    from zarr.core.buffer import Buffer, BufferPrototype

METADATA_NAMES = frozenset({"attributes.json", "zarr.json", ".zarray", ".zgroup", ".zattrs", ".zmetadata"})
"""Keys whose documents are capped by :func:`~napari_n5zarr.n5.limits.max_metadata_bytes`."""
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
_MISSING = (FileNotFoundError, IsADirectoryError, NotADirectoryError)


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):  # fmt: skip
        if test(mode):
            return name
    return "not a regular file"


def is_metadata_key(key: str) -> bool:
    """True for metadata documents (``attributes.json``, ``zarr.json``, Zarr v2 files)."""
    return key.rsplit("/", 1)[-1] in METADATA_NAMES


def read_regular_file(path: Path, prototype: BufferPrototype, byte_range: ByteRequest | None, *, metadata: bool) -> Buffer:
    """Read ``path`` (all or ``byte_range``) if it is a regular file; N5StoreError naming it
    if it is a FIFO, device or socket; N5MetadataError if ``metadata`` and over the cap."""
    try:
        fd = os.open(path, _OPEN_FLAGS)  # O_NONBLOCK: opening a FIFO must not wait for a writer
    except OSError as e:
        if e.errno == errno.ENXIO:  # a socket, or a device without a driver
            raise N5StoreError(f"{path}: not a regular file; refused") from None
        raise
    with io.FileIO(fd, "rb", closefd=True) as f:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(str(path))
        if not stat.S_ISREG(info.st_mode):
            raise N5StoreError(f"{path}: {_kind(info.st_mode)}, not a regular file; refused (it could block or never end)")
        if metadata:
            check_metadata_size(info.st_size, str(path))
        size = info.st_size
        if byte_range is None:
            start, end = 0, size
        elif isinstance(byte_range, RangeByteRequest):
            start, end = byte_range.start, min(byte_range.end, size)
        elif isinstance(byte_range, OffsetByteRequest):
            start, end = byte_range.offset, size
        elif isinstance(byte_range, SuffixByteRequest):
            start, end = max(0, size - byte_range.suffix), size
        else:
            raise TypeError(f"Unexpected byte_range, got {byte_range}.")
        f.seek(start)
        data = f.read(max(0, end - start)) if end > start else b""
    return prototype.buffer.from_bytes(data)


class SafeLocalStore(LocalStore):
    """``LocalStore`` that refuses non-regular files and oversized metadata documents."""

    def __repr__(self) -> str:
        return f"SafeLocalStore('{self.root}')"

    def _read(self, key: str, prototype: BufferPrototype | None, byte_range: ByteRequest | None) -> Buffer | None:
        try:
            return read_regular_file(self.root / key, prototype or default_buffer_prototype(), byte_range,
                                     metadata=is_metadata_key(key))  # fmt: skip
        except _MISSING:
            return None

    def get_sync(self, key: str, *, prototype: BufferPrototype | None = None, byte_range: ByteRequest | None = None) -> Buffer | None:
        self._ensure_open_sync()
        return self._read(key, prototype, byte_range)

    async def get(self, key: str, prototype: BufferPrototype | None = None, byte_range: ByteRequest | None = None) -> Buffer | None:
        await self._ensure_open()
        return await asyncio.to_thread(self._read, key, prototype, byte_range)

    async def get_partial_values(
        self, prototype: BufferPrototype, key_ranges: Iterable[tuple[str, ByteRequest | None]]
    ) -> list[Buffer | None]:
        await self._ensure_open()
        return list(await asyncio.gather(*(asyncio.to_thread(self._read, k, prototype, r) for k, r in key_ranges)))
