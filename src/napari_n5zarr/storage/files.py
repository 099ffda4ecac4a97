"""Reading local files that are regular files only, with plain ``os`` calls (no zarr).

Opening a FIFO named like a block blocks the read forever, and a link to ``/dev/zero``
reads until memory runs out: :func:`read_regular_file` opens without blocking, checks the
opened file (no race between the check and the read), and refuses anything that is not a
regular file, naming it. Used by :class:`~napari_n5zarr.storage.local.SafeLocalStore` and
by the zarr-free local block reader (:mod:`napari_n5zarr.read.local`).
"""

from __future__ import annotations

import errno
import io
import os
import stat
from collections.abc import Callable

from napari_n5zarr.errors import N5StoreError
from napari_n5zarr.n5.limits import check_metadata_size, check_stored_size

Span = Callable[[int], tuple[int, int]]
"""file size -> (start, end) of the bytes to read."""

_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
MISSING = (FileNotFoundError, IsADirectoryError, NotADirectoryError)
"""What reading a key that holds nothing raises (a store answers None)."""


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):  # fmt: skip
        if test(mode):
            return name
    return "not a regular file"


def read_regular_file(path: str | os.PathLike[str], span: Span | None = None, *, metadata: bool) -> bytes:
    """The bytes of ``path`` (all, or ``span(size)``) if it is a regular file; N5StoreError
    naming it if it is a FIFO, device or socket; N5MetadataError (``metadata``) or
    N5BlockError if what is to be read is over its cap
    (:func:`~napari_n5zarr.n5.limits.max_stored_bytes`); the ``OSError`` of
    :data:`MISSING` when nothing is there."""
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
        start, end = (0, info.st_size) if span is None else span(info.st_size)
        if end <= start:
            return b""
        check_stored_size(end - start, str(path), metadata=metadata)
        f.seek(start)
        return f.read(end - start)
