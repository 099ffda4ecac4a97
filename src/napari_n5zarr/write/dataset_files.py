"""The one way files beside user data are touched (a save's journal and staged blocks, the
blocks it replaces, export locks and staging markers): through the folder's own descriptor.

Every path (a block, the journal and its temporary, a staged block) is a relative key such
as ``s0/3/2/1``, opened component by component from the dataset folder with ``O_NOFOLLOW``
(a symbolic link on the way is refused, ``..`` and empty parts are refused), so nothing
here can write, rename or remove a byte outside the dataset folder. New files are created
with ``O_EXCL``; the save's own files are read only when they are regular files with one
name, under a size cap, without waiting on a FIFO. Anything else found at one of those
names is refused with :class:`~napari_n5zarr.errors.PlantedFileError`, naming it, before a
byte is written.

Hand-written on purpose: ``pathlib``/``shutil`` follow links, and no library offers
``openat``-relative, link-refusing file operations (``os`` does, with ``dir_fd``).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from napari_n5zarr.errors import PlantedFileError

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def kind(mode: int) -> str:
    """What a file of ``mode`` is, in words."""
    for test, name in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):  # fmt: skip
        if test(mode):
            return name
    return "a regular file"


def split_key(key: str) -> list[str]:
    """``"s0/3/2/1"`` -> its parts; refuses keys that could leave the folder."""
    parts = key.split("/")
    if not key or any(p in ("", ".", "..") or "\0" in p or "\\" in p for p in parts):
        raise ValueError(f"{key!r} is not a key inside the dataset")
    return parts


class DatasetFolder:
    """The dataset (or pyramid) folder ``root``, held open; every operation is relative to it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> DatasetFolder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def path(self, key: str) -> Path:
        """The path ``key`` names (for messages)."""
        return self.root.joinpath(*split_key(key))

    def refuse(
        self, key: str, what: str, advice: str = "move it away", *, own: bool = True
    ) -> PlantedFileError:
        """The one-line refusal of what was found at ``key`` (``own``: a name the save uses)."""
        found = f"{what}, not a file napari-n5zarr's save wrote" if own else what
        return PlantedFileError(
            f"{self.path(key)} is {found}; refused, nothing was changed ({advice})"
        )

    @contextlib.contextmanager
    def at(self, key: str, create: bool = False) -> Iterator[tuple[int, str]]:
        """``(folder descriptor, last part)`` of ``key``; folders on the way are opened without
        following links (and made when ``create``). FileNotFoundError when one is missing."""
        parts = split_key(key)
        fd = os.dup(self.fd)
        try:
            for n, part in enumerate(parts[:-1]):
                try:
                    sub = os.open(part, _DIR, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(part, dir_fd=fd)
                    sub = os.open(part, _DIR, dir_fd=fd)
                except OSError as e:
                    if e.errno in (errno.ELOOP, errno.ENOTDIR):
                        where = "/".join(parts[: n + 1])
                        what = f"{kind(os.lstat(part, dir_fd=fd).st_mode)} where a folder of the dataset was expected"
                        raise self.refuse(
                            where, what, "edits are never written through links", own=False
                        ) from None
                    raise
                os.close(fd)
                fd = sub
            yield fd, parts[-1]
        finally:
            os.close(fd)

    def open(self, key: str, flags: int, mode: int = 0o644) -> int:
        """``os.open`` of ``key`` with ``flags`` and ``O_NOFOLLOW`` (the caller closes it)."""
        with self.at(key) as (dir_fd, name):
            return os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dir_fd)

    def lstat(self, key: str) -> os.stat_result | None:
        """``lstat`` of ``key``, or None when it (or a folder on the way) is missing."""
        try:
            with self.at(key) as (fd, name):
                return os.lstat(name, dir_fd=fd)
        except (FileNotFoundError, NotADirectoryError):
            return None

    def read(self, key: str, cap: int, *, own: bool) -> bytes | None:
        """The bytes of the regular file ``key`` (None when missing). ``own``: a file of the
        save's (journal, staged block) must also have one name. Over ``cap`` bytes, a link,
        a folder, a FIFO or a device: refused, naming it."""
        try:
            with self.at(key) as (dir_fd, name):
                advice = (
                    "move it away"
                    if own
                    else "a block must be a regular file inside the dataset to be edited in place"
                )
                try:
                    fd = os.open(name, _READ, dir_fd=dir_fd)
                except OSError as e:
                    if e.errno in (errno.ELOOP, errno.ENXIO):
                        raise self.refuse(
                            key, kind(os.lstat(name, dir_fd=dir_fd).st_mode), advice, own=own
                        ) from None
                    raise
                try:
                    info = os.fstat(fd)
                    if not stat.S_ISREG(info.st_mode):
                        raise self.refuse(key, kind(info.st_mode), advice, own=own)
                    if own and info.st_nlink != 1:
                        raise self.refuse(key, f"a hard link (a file with {info.st_nlink} names)")
                    if info.st_size > cap:
                        raise self.refuse(key, f"a file of {info.st_size} bytes (over the {cap}-byte cap of such files)",
                                          advice, own=own)  # fmt: skip
                    chunks, left = [], info.st_size
                    while left > 0 and (chunk := os.read(fd, min(left, 1 << 24))):
                        chunks.append(chunk)
                        left -= len(chunk)
                    return b"".join(chunks)
                finally:
                    os.close(fd)
        except (FileNotFoundError, NotADirectoryError):
            return None

    def create(self, key: str, data: bytes) -> None:
        """A new file ``key`` holding ``data``, fsynced (folders on the way made); refused
        when anything is at that name already."""
        with self.at(key, create=True) as (dir_fd, name):
            try:
                fd = os.open(name, _CREATE, 0o644, dir_fd=dir_fd)
            except FileExistsError:
                raise self.refuse(key, kind(os.lstat(name, dir_fd=dir_fd).st_mode)) from None
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            finally:
                os.close(fd)

    def replace(self, src: str, dst: str) -> None:
        """Rename ``src`` over ``dst`` (same folder): a reader sees the old or the new file.
        A folder at ``dst`` is refused, naming it."""
        src_parts, dst_parts = split_key(src), split_key(dst)
        if src_parts[:-1] != dst_parts[:-1]:
            raise ValueError(f"{src} and {dst} are not in one folder")
        with self.at(dst) as (dir_fd, name):
            found = _lstat(name, dir_fd)
            if found is not None and stat.S_ISDIR(found.st_mode):
                raise self.refuse(dst, "a folder", "a block's name must hold a file")
            os.replace(src_parts[-1], name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)

    def remove(self, key: str) -> bool:
        """Remove the save's own file ``key`` (a regular file with one name); True if removed,
        False when missing. Anything else there is refused, naming it."""
        try:
            with self.at(key) as (dir_fd, name):
                found = _lstat(name, dir_fd)
                if found is None:
                    return False
                if not stat.S_ISREG(found.st_mode):
                    raise self.refuse(key, kind(found.st_mode))
                if found.st_nlink != 1:
                    raise self.refuse(key, f"a hard link (a file with {found.st_nlink} names)")
                os.unlink(name, dir_fd=dir_fd)
                return True
        except (FileNotFoundError, NotADirectoryError):
            return False

    def sync(self, folder_key: str | None = None) -> None:
        """fsync the dataset folder, or the folder ``folder_key`` inside it."""
        try:
            if folder_key is None:
                os.fsync(self.fd)
                return
            with self.at(folder_key + "/x") as (fd, _):
                os.fsync(fd)
        except OSError:
            pass  # some filesystems refuse fsync on folders: the rename is still atomic


def _lstat(name: str, dir_fd: int) -> os.stat_result | None:
    try:
        return os.lstat(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
