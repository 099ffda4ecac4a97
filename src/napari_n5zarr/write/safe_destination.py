"""Export destinations that never lose data: path checks, a lock, an ownership check and
replacement by staging beside the destination, then renaming into place.

* :func:`group_prefix` refuses group paths that leave the container (``..``, absolute).
* :func:`check_inside` refuses a local group path that a symlinked folder leads outside.
* :class:`DestinationLock` (a lock file beside the target node, however the node is
  spelled, created with ``O_EXCL`` and held with ``flock``; a lock left by a dead process is
  taken over) keeps two exports apart. It never follows a link and never writes a lock path
  that is not a regular file with one name holding a lock document (or nothing).
* :func:`~napari_n5zarr.storage.foreign.foreign_entries` (a floor below, for the access
  layer too) lists what an overwrite would delete that no export of this project writes.
* :func:`staging_folder` / :func:`swap_in` write a replacement beside the old node and swap
  it in (``renameat2(RENAME_EXCHANGE)`` on Linux: atomic; else two renames); the old node is
  marked as being deleted, then deleted. :func:`recover` cleans what an interrupted
  replacement left, acting only on folders whose marker proves they are ours and whose
  export is gone: a staging folder holds the ``.n5zarr-incomplete`` marker naming its owner
  (pid, host) and token; an old copy being deleted holds ``.n5zarr-deleting``.

Local folders only: object stores and zip files cannot rename (see :mod:`napari_n5zarr.write.export.exporter`).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import re
import secrets
import shutil
import socket
import stat
import sys
import time
import warnings
from pathlib import Path
from typing import Any, TypeGuard

from napari_n5zarr.errors import DestinationBusyError, DestinationLockError
from napari_n5zarr.n5.constants import INCOMPLETE_MARKER
from napari_n5zarr.storage import files, location
from napari_n5zarr.write.dataset_files import DatasetFolder
from napari_n5zarr.write.dataset_files import kind as _kind

LOCK_SUFFIX = ".n5zarr-lock"
"""``.<node name>.n5zarr-lock`` beside the target node: held while an export writes it."""
STAGING_TAG = ".n5zarr-new-"
OLD_TAG = ".n5zarr-old-"
DELETING_TAG = ".n5zarr-deleting-"
DELETING_MARKER = ".n5zarr-deleting"
"""In an old copy being deleted: its owner and token (deleted last)."""
_LEFTOVER = re.compile(r"\.(?P<node>.+)\.n5zarr-(?P<tag>new|old|deleting)-(?P<token>\d+-[0-9a-f]+)")
_LOCK_DOC_LIMIT = 4096


# -- group paths -------------------------------------------------------------------------


def group_prefix(path: str) -> str:
    """``"a/b"`` -> ``"a/b/"`` (``""`` for the container root); refuses paths that could
    leave the container: absolute, ``..``, ``.``, empty parts, backslashes."""
    if not isinstance(path, str):
        raise TypeError(f"path must be a string, got {type(path).__name__}")
    text = path.rstrip("/")
    if not text:
        return ""
    if text.startswith("/") or re.match(r"^[A-Za-z]:", text):
        raise ValueError(f"group path {path!r} is absolute: give it relative to the container")
    parts = text.split("/")
    bad = [p for p in parts if p in ("", ".", "..") or "\\" in p or "\0" in p]
    if bad:
        raise ValueError(
            f"group path {path!r} has a part {bad[0]!r} that could leave the container: refused"
        )
    return text + "/"


def local_folder(dest: str | os.PathLike[str]) -> Path | None:
    """The absolute, symlink-resolved folder of a local destination; None for URLs and zips."""
    path = location.local_path(dest)
    if path is None or location.suffix(path) == ".zip":
        return None
    files.refuse_file_in_the_way(path, os.fspath(dest))  # resolving a link loop raises RuntimeError
    return path.resolve()


def local_zip(dest: str | os.PathLike[str]) -> Path | None:
    """The absolute path of a local ``.zip`` destination (locked like a folder), else None."""
    path = location.local_path(dest)
    if path is None or location.suffix(path) != ".zip":
        return None
    files.refuse_file_in_the_way(path.parent, os.fspath(dest))
    return path.resolve()


def check_inside(folder: Path, prefix: str) -> Path:
    """``folder/prefix``; refuses it when a symlinked folder on the way leads outside ``folder``."""
    target = folder / prefix if prefix else folder
    resolved = target.resolve()
    if resolved != folder and not resolved.is_relative_to(folder):
        raise ValueError(
            f"{target} leads to {resolved}, outside the destination {folder} (a symbolic link): refusing to write there"
        )
    return target


# -- the lock ---------------------------------------------------------------------------


def lock_path(node: Path) -> Path:
    """The lock file of ``node`` (a resolved path): ``.<name>.n5zarr-lock`` beside it."""
    return node.parent / f".{node.name}{LOCK_SUFFIX}"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


_OPEN_FLAGS = (
    os.O_RDWR
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_CLOEXEC", 0)
)


class DestinationLock:
    """Exclusive right to write ``node`` (a context manager; ``node`` is the resolved target).

    The lock file (``O_EXCL``) holds pid, host and start time; the holder keeps an
    ``flock`` on it, so a lock whose process died (even by ``kill -9``) is free and taken
    over. Without ``fcntl`` (Windows) a lock of a dead pid on this host is taken over.
    An existing lock path is opened without following links and taken over only if it is
    a regular file with one name holding a lock document or nothing; anything else (a
    link planted there, a folder, a FIFO, someone's file) is refused with
    :class:`~napari_n5zarr.errors.DestinationLockError` before a byte is written.
    """

    def __init__(self, node: Path, where: str, *, shared: bool = False) -> None:
        self.path, self.where, self.shared = lock_path(node), where, shared
        self._fd: int | None = None

    def __enter__(self) -> DestinationLock:
        files.refuse_file_in_the_way(
            self.path.parent, self.where
        )  # "notes.txt/out.n5": one line, exit 2
        try:
            return self._lock()
        except (DestinationBusyError, DestinationLockError):
            raise
        except OSError as e:
            raise OSError(
                e.errno,
                f"cannot lock {self.where}: cannot create {self.path} ({e.strerror}); an export needs a "
                "writable folder around its destination",
            ) from e

    def _refuse(self, what: str) -> DestinationLockError:
        return DestinationLockError(
            f"refusing to export to {self.where}: its lock file {self.path} is {what}, not a "
            "napari-n5zarr lock; nothing was changed (move it away if it is not needed)"
        )

    def _open(self) -> int | None:
        """The lock file, created or an existing one checked; None: it vanished meanwhile."""
        try:
            return self._os_open(_OPEN_FLAGS | os.O_CREAT | os.O_EXCL)
        except FileExistsError:
            pass
        try:
            fd = self._os_open(_OPEN_FLAGS)
        except FileNotFoundError:
            return None  # released meanwhile: try to create it again
        except OSError as e:  # ELOOP: a symbolic link (O_NOFOLLOW); EISDIR: a folder
            try:
                mode = os.lstat(self.path).st_mode
            except FileNotFoundError:
                return None
            raise self._refuse(_kind(mode)) from e
        try:
            self._check(fd)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _os_open(self, flags: int) -> int:
        """The lock file opened from its folder's descriptor, never through a link."""
        with DatasetFolder(self.path.parent) as folder:
            return folder.open(self.path.name, flags)

    def _check(self, fd: int) -> None:
        """Refuse what the open descriptor is unless it is a lock file of ours."""
        st, link = os.fstat(fd), os.lstat(self.path)
        if not stat.S_ISREG(st.st_mode) or not stat.S_ISREG(link.st_mode):
            raise self._refuse(
                _kind(link.st_mode if not stat.S_ISREG(link.st_mode) else st.st_mode)
            )
        if (st.st_dev, st.st_ino) != (link.st_dev, link.st_ino):
            raise self._refuse("a path that changed while it was opened")
        if st.st_nlink != 1:
            raise self._refuse(f"a hard link (a file with {st.st_nlink} names)")
        raw = os.pread(fd, _LOCK_DOC_LIMIT + 1, 0)
        if raw.strip() and not _is_lock_document(raw):
            raise self._refuse(f"a file of {st.st_size} bytes that holds no lock document")

    def _lock(self) -> DestinationLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for _ in range(20):
            fd = self._open()
            if fd is None:
                continue
            if not self._acquire(fd):
                holder = _read_json(fd)
                os.close(fd)
                raise DestinationBusyError(errno.EBUSY, self._busy_message(holder), str(self.path))
            try:
                self._check(fd)  # once more, holding it: still the same single-named file of ours
            except DestinationLockError:
                if not os.path.lexists(self.path):
                    os.close(fd)
                    continue  # locked a file its holder had just removed: start again
                os.close(fd)
                raise
            except FileNotFoundError:
                os.close(fd)
                continue
            info = {
                "pid": os.getpid(),
                "host": socket.gethostname(),
                "started": time.time(),
                "dest": self.where,
            }
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(info).encode(), 0)
            self._fd = fd
            return self
        raise DestinationBusyError(
            errno.EBUSY, f"could not lock {self.where} (lock file {self.path})", str(self.path)
        )

    def _acquire(self, fd: int) -> bool:
        try:
            import fcntl
        except ImportError:  # no flock: a lock file naming a dead pid on this host is stale
            holder = _read_json(fd)
            if not holder:
                return True
            return holder.get("host") == socket.gethostname() and not _pid_alive(
                int(holder.get("pid", -1))
            )
        try:
            fcntl.flock(fd, (fcntl.LOCK_SH if self.shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def _busy_message(self, holder: dict[str, Any]) -> str:
        if not holder:
            return f"{self.where} is being written by another export (lock file {self.path})"
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(holder.get("started", 0))))
        return (
            f"{self.where} is being written by pid {holder.get('pid')} on {holder.get('host')} since {since} "
            f"(lock file {self.path}; delete it only if that export is gone)"
        )

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            if not self.shared or self._sole_holder():
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.path)  # while still holding the flock
            os.close(self._fd)
            self._fd = None

    def _sole_holder(self) -> bool:
        """A shared holder removes the lock file only when no one else holds it."""
        try:
            import fcntl

            fcntl.flock(self._fd or -1, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except (ImportError, OSError):
            return False
        return True


def check_ancestors(node: Path, where: str) -> None:
    """Refuse to write ``node`` while an export holds the lock of a folder above it (it is
    replacing that folder, and with it whatever is written here). Without ``fcntl``, a no-op."""
    try:
        import fcntl
    except ImportError:
        return
    for folder in node.parents:
        if folder.parent == folder:
            return
        path = lock_path(folder)
        try:
            fd = os.open(path, os.O_RDONLY | _OPEN_FLAGS & ~os.O_RDWR)
        except OSError:
            continue  # none (or not a lock file: not held by an export of this project)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _read_json(fd)
                raise DestinationBusyError(
                    errno.EBUSY,
                    f"{where} is inside {folder}, which pid {holder.get('pid', '?')} on "
                    f"{holder.get('host', '?')} is exporting to (lock file {path})",
                    str(path),
                ) from None
        finally:
            os.close(fd)


def _is_lock_document(raw: bytes) -> bool:
    if len(raw) > _LOCK_DOC_LIMIT:
        return False
    try:
        doc = json.loads(raw)
    except ValueError:
        return False
    return isinstance(doc, dict) and isinstance(doc.get("pid"), int) and "host" in doc


def _read_json(fd: int) -> dict[str, Any]:
    try:
        doc = json.loads(os.pread(fd, 4096, 0) or b"{}")
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


# -- staging and swap ----------------------------------------------------------------------


def owner(token: str) -> dict[str, Any]:
    """The marker document of a folder this process creates beside a node."""
    return {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started": time.time(),
        "token": token,
    }


def _write_marker(path: Path, doc: dict[str, Any]) -> None:
    with DatasetFolder(path.parent) as folder:
        folder.create(path.name, json.dumps(doc).encode())


def _read_marker(path: Path) -> dict[str, Any] | None:
    """A marker document, or None (missing, a link, unreadable, not ours)."""
    try:
        with DatasetFolder(path.parent) as folder:
            raw = folder.read(path.name, _LOCK_DOC_LIMIT, own=True)
        doc = json.loads(raw) if raw is not None else None
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and isinstance(doc.get("token"), str) else None


def _alive(doc: dict[str, Any]) -> bool:
    """Whether the export that wrote the marker ``doc`` may still run. This process's own
    (earlier, finished) exports are not: the caller holds the node's lock. Another host's
    cannot be checked: taken as alive."""
    if doc.get("host") != socket.gethostname():
        return True
    pid = doc.get("pid")
    if not isinstance(pid, int) or pid == os.getpid():
        return not isinstance(pid, int)
    return _pid_alive(pid)


def staging_folder(target: Path) -> Path:
    """A new folder beside ``target`` (same parent, so same filesystem), marked as ours:
    its ``.n5zarr-incomplete`` names this process and the folder's token."""
    token = f"{os.getpid()}-{secrets.token_hex(4)}"
    path = target.parent / f".{target.name}{STAGING_TAG}{token}"
    try:
        path.mkdir()
        _write_marker(path / INCOMPLETE_MARKER, owner(token))
    except OSError as e:
        with contextlib.suppress(OSError):
            path.rmdir()  # only if empty
        raise OSError(
            e.errno,
            f"cannot replace {target}: overwrite writes the new data beside it first, but {path} "
            f"cannot be created ({e.strerror}); nothing was changed",
        ) from e
    return path


def mark_deleting(folder: Path, token: str) -> Path:
    """Mark ``folder`` (an old copy, named ``.<node>.n5zarr-(new|old)-<token>``) as being
    deleted, then rename it ``.<node>.n5zarr-deleting-<token>``: never restored after this."""
    found = _LEFTOVER.fullmatch(folder.name)
    node = found["node"] if found else folder.name.lstrip(".")
    if _read_marker(folder / DELETING_MARKER) is None:
        _write_marker(folder / DELETING_MARKER, owner(token))
    renamed = folder.parent / f".{node}{DELETING_TAG}{token}"
    os.rename(folder, renamed)
    return renamed


def delete_marked(folder: Path) -> None:
    """Delete a folder marked by :func:`mark_deleting`, its marker last."""
    for entry in os.scandir(folder):
        if entry.name == DELETING_MARKER:
            continue
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path)
        else:
            os.unlink(entry.path)
    os.unlink(folder / DELETING_MARKER)
    os.rmdir(folder)


def _leftovers(target: Path) -> list[tuple[Path, str, str]]:
    """``(folder, tag, token)`` of every folder beside ``target`` named like a leftover."""
    try:
        entries = list(os.scandir(target.parent))
    except (FileNotFoundError, NotADirectoryError):
        return []
    found = []
    for entry in entries:
        m = _LEFTOVER.fullmatch(entry.name)
        if m and m["node"] == target.name and entry.is_dir(follow_symlinks=False):
            found.append((Path(entry.path), m["tag"], m["token"]))
    return sorted(found)


def recover(target: Path) -> list[str]:
    """Clean what an interrupted replacement of ``target`` left (call it holding the lock).

    Acts only on folders whose marker proves they are ours and whose export is gone:

    * a staging folder (its marker names it) is removed; an empty one too;
    * an old copy is put back only when ``target`` is missing while the staging folder of
      the same replacement still exists (killed between the two renames of the fallback
      swap); after the swap (``target`` holds that replacement's marker) it is deleted;
    * a copy marked as being deleted is deleted, never restored.

    Anything else named like a leftover is left alone (and said so). Returns what was done.
    """
    done: list[str] = []
    placed = _read_marker(
        target / INCOMPLETE_MARKER
    )  # a staged marker in target: that swap was done
    swapped = placed["token"] if placed else None
    stagings = {token: doc for path, tag, token in _leftovers(target)
                if tag == "new" and (doc := _read_marker(path / INCOMPLETE_MARKER)) and doc["token"] == token}  # fmt: skip
    for path, tag, token in _leftovers(target):
        doc = stagings.get(token) or (placed if token == swapped else None)
        if tag == "deleting":
            doc = _read_marker(path / DELETING_MARKER)
            doc = doc if doc and doc["token"] == token else None
        if doc is None:
            if tag == "new" and not any(path.iterdir()):
                path.rmdir()  # created, killed before its marker was written
                done.append(f"removed {path.name}")
            else:
                done.append(f"left {path.name} alone (no marker says it is an export's)")
            continue
        if _alive(doc):
            done.append(
                f"left {path.name} alone (its export, pid {doc.get('pid')} on {doc.get('host')}, runs)"
            )
            continue
        if tag == "old" and token in stagings:  # killed between the two renames
            if not os.path.lexists(target):
                os.rename(path, target)
                done.append(f"restored {target} from {path.name}")
            else:
                done.append(f"left {path.name} alone ({target} was made again since)")
            continue
        if tag == "new" and token in stagings:
            shutil.rmtree(path, ignore_errors=True)
            done.append(f"removed {path.name}")
            continue
        try:
            delete_marked(path if tag == "deleting" else mark_deleting(path, token))
            done.append(f"deleted the old copy {path.name}")
        except OSError as e:
            done.append(f"could not delete the old copy {path.name}: {e}")
    if placed is not None and not _alive(placed):
        with contextlib.suppress(FileNotFoundError):
            (target / INCOMPLETE_MARKER).unlink()
        done.append(f"removed the marker of a finished replacement from {target}")
    return done


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths (Linux ``renameat2(RENAME_EXCHANGE)``); False if unsupported."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP):
        return False
    raise OSError(err, f"cannot swap {a} and {b}: {os.strerror(err)}")


def swap_in(staging: Path, target: Path) -> None:
    """Put the complete ``staging`` folder (from :func:`staging_folder`) at ``target``.

    The old ``target`` stays whole until then; afterwards it is marked as being deleted,
    the new node's staging marker is removed, and the old copy is deleted (a failure to
    delete it is a warning; the next export removes it). A kill at any point leaves
    ``target`` old or new, and leftovers :func:`recover` can prove are its own."""
    token = staging.name.rsplit(STAGING_TAG, 1)[1]
    if _exchange(staging, target):
        old = staging  # now holds the old node; target holds the staging marker (proof)
    else:
        old = target.parent / f".{target.name}{OLD_TAG}{token}"
        os.rename(target, old)  # a kill here: recover() puts it back (the staging folder proves it)
        try:
            os.rename(staging, target)
        except OSError:
            os.rename(old, target)  # put the old one back
            raise
    try:
        old = mark_deleting(old, token)
    except OSError as e:
        warnings.warn(
            f"replaced {target}, but could not mark the old copy {old} for deletion: {e}",
            stacklevel=3,
        )
        return  # the staging marker stays in target: the next export's recover() proves the old copy ours
    with contextlib.suppress(FileNotFoundError):
        (target / INCOMPLETE_MARKER).unlink()
    try:
        delete_marked(old)
    except OSError as e:
        warnings.warn(
            f"replaced {target}, but could not delete the old copy {old}: {e}", stacklevel=3
        )


def is_disk_full(exc: BaseException) -> TypeGuard[OSError]:
    return isinstance(exc, OSError) and exc.errno in (
        errno.ENOSPC,
        getattr(errno, "EDQUOT", errno.ENOSPC),
    )
