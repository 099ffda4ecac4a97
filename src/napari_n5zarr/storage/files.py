"""Reading local files that are regular files only, with plain ``os`` calls (no zarr).

Opening a FIFO named like a block blocks the read forever, and a link to ``/dev/zero``
reads until memory runs out: :func:`read_regular_file` opens without blocking, checks the
opened file (no race between the check and the read), and refuses anything that is not a
regular file, naming it; :class:`LinkGuard` keeps walks through symbolic links finite. Used by
:class:`~napari_n5zarr.storage.local.SafeLocalStore` and the few local reads outside a store.
"""

from __future__ import annotations

import errno
import io
import os
import stat
import threading
from collections.abc import Callable
from typing import Any

from napari_n5zarr.errors import N5StoreError
from napari_n5zarr.n5.constants import ReadLimit, check_metadata_size, check_stored_size

Span = Callable[[int], tuple[int, int]]
"""file size -> (start, end) of the bytes to read."""

_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_NOCTTY", 0)
    | getattr(os, "O_CLOEXEC", 0)
)
MISSING = (FileNotFoundError, IsADirectoryError, NotADirectoryError)
"""What reading a key that holds nothing raises (a store answers None)."""


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):  # fmt: skip
        if test(mode):
            return name
    return "not a regular file"


def read_regular_file(path: str | os.PathLike[str], span: Span | None = None, *, metadata: bool,
                      limit: ReadLimit | None = None) -> bytes:  # fmt: skip
    """The bytes of ``path`` (all, or ``span(size)``) if it is a regular file; N5StoreError
    naming it if it is a FIFO, device or socket; N5MetadataError (``metadata``) or
    N5BlockError if what is to be read is over its cap, checked before reading
    (:func:`~napari_n5zarr.n5.constants.max_stored_bytes`: ``limit`` is the block's
    dataset's own); the ``OSError`` of
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
            raise N5StoreError(
                f"{path}: {_kind(info.st_mode)}, not a regular file; refused (it could block or never end)"
            )
        if metadata:
            check_metadata_size(info.st_size, str(path))
        start, end = (0, info.st_size) if span is None else span(info.st_size)
        if end <= start:
            return b""
        check_stored_size(end - start, str(path), metadata=metadata, limit=limit)
        f.seek(start)
        return f.read(end - start)


class LinkGuard:
    """One walk's rule for symbolic links to folders: every real folder is listed once.

    A walk lists real folders as they are. A link to a folder is followed only if it leads
    out of the container (``root``) and to a folder this walk has not reached through
    another link: a link to the container itself, to one of its ancestors or to anything
    inside it (the node is listed under its real name) is not followed, nor a second link to
    the same folder. Loops (``up -> ..``) and fan-out (24 links to the parent) therefore
    end; the answer for a given name is the same however often it is asked."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = os.path.realpath(root)
        self._first: dict[tuple[int, int], str] = {}
        self._lock = threading.Lock()

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (LinkGuard, (self.root,))  # a copy (another process) starts its own walk

    def _inside_root(self, real: str) -> bool:
        """``real`` is the container, inside it, or one of its ancestors (a loop)."""
        return (
            real == self.root
            or real.startswith(self.root.rstrip(os.sep) + os.sep)
            or (self.root.startswith(real.rstrip(os.sep) + os.sep))
        )

    def follows(self, path: str, is_link: bool) -> bool:
        """Whether the walk lists the folder at ``path`` (a folder, or a link to one)."""
        if not is_link:
            return True
        try:
            info = os.stat(path)
            real = os.path.realpath(path)
        except (OSError, ValueError, RuntimeError):
            return False
        if self._inside_root(real):
            return False
        with self._lock:
            return self._first.setdefault((info.st_dev, info.st_ino), path) == path

    def folders(self, folder: str) -> list[str]:
        """Names of the folders in ``folder`` that the walk lists (see the class)."""
        out = []
        with os.scandir(folder) as entries:
            for e in entries:
                try:
                    if e.is_dir() and self.follows(e.path, e.is_symlink()):
                        out.append(e.name)
                except OSError:
                    continue
        return out


def refuse_file_in_the_way(folder: str | os.PathLike[str], where: str) -> None:
    """Refuse to write the folder ``folder`` (for the destination ``where``) when it, or a
    folder above it, exists as something that is not a folder (a file named like the
    destination, ``notes.txt/out.n5``) or as a symbolic link that leads nowhere (or to
    itself): :class:`~napari_n5zarr.errors.NodeExistsError` naming it, before anything is
    created."""
    from napari_n5zarr.errors import NodeExistsError

    path = os.path.abspath(folder)
    while True:
        try:
            st = os.stat(path)
        except OSError as e:
            if os.path.islink(path) and e.errno in (errno.ENOENT, errno.ELOOP):
                raise NodeExistsError(f"refusing to write into {where}: {path} is a symbolic link that leads nowhere "
                                      "(or to itself); nothing was changed") from None  # fmt: skip
            if e.errno not in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
                return  # unreadable: the write that follows reports it
            parent = os.path.dirname(path)
            if parent == path:
                return
            path = parent
            continue
        if stat.S_ISDIR(st.st_mode):
            return
        raise NodeExistsError(
            f"refusing to write into {where}: {path} is a file, not a folder; nothing was changed"
        )
