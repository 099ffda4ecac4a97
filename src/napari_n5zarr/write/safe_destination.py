"""Export destinations that never lose data: path checks, a lock, an ownership check and
replacement by staging beside the destination, then renaming into place.

* :func:`group_prefix` refuses group paths that leave the container (``..``, absolute).
* :func:`check_inside` refuses a local group path that a symlinked folder leads outside.
* :class:`DestinationLock` (a lock file beside the container, created with ``O_EXCL`` and
  held with ``flock``; a lock left by a dead process is taken over) keeps two exports apart.
* :func:`foreign_entries` lists what an overwrite would delete that no export of this
  project writes (only N5/Zarr metadata, ``sN`` block trees and groups of them are ours).
* :func:`staging_folder` / :func:`swap_in` write a replacement beside the old node and swap
  it in (``renameat2(RENAME_EXCHANGE)`` on Linux: atomic; else two renames); the old node is
  deleted only afterwards. :func:`recover` cleans what an interrupted replacement left.

Local folders only: object stores and zip files cannot rename (see :mod:`napari_n5zarr.write.exporter`).
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import re
import secrets
import shutil
import socket
import sys
import time
import warnings
from pathlib import Path
from typing import Any, TypeGuard

from napari_n5zarr.n5.constants import N5_JSON, ZARR_JSON
from napari_n5zarr.storage import location

LOCK_SUFFIX = ".n5zarr-lock"
"""``.<container name>.n5zarr-lock`` beside the container: held while an export writes."""
STAGING_TAG = ".n5zarr-new-"
OLD_TAG = ".n5zarr-old-"
NODE_FILES = frozenset({N5_JSON, ZARR_JSON, ".n5zarr-incomplete"})
"""Files an export writes in a node (the last is exporter.INCOMPLETE_MARKER)."""
_LEVEL = re.compile(r"s\d+")
_METADATA_LIMIT = 1 << 20  # bytes of attributes.json/zarr.json read to classify a folder


class DestinationBusyError(OSError):
    """Another export holds the destination's lock."""


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
        raise ValueError(f"group path {path!r} has a part {bad[0]!r} that could leave the container: refused")
    return text + "/"


def local_folder(dest: str | os.PathLike[str]) -> Path | None:
    """The absolute, symlink-resolved folder of a local destination; None for URLs and zips."""
    path = location.local_path(dest)
    if path is None or location.suffix(path) == ".zip":
        return None
    return path.resolve()


def local_zip(dest: str | os.PathLike[str]) -> Path | None:
    """The absolute path of a local ``.zip`` destination (locked like a folder), else None."""
    path = location.local_path(dest)
    if path is None or location.suffix(path) != ".zip":
        return None
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


def lock_path(container: Path) -> Path:
    return container.parent / f".{container.name}{LOCK_SUFFIX}"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class DestinationLock:
    """Exclusive right to write ``container`` (a context manager).

    The lock file (``O_EXCL``) holds pid, host and start time; the holder keeps an
    ``flock`` on it, so a lock whose process died (even by ``kill -9``) is free and taken
    over. Without ``fcntl`` (Windows) a lock of a dead pid on this host is taken over.
    """

    def __init__(self, container: Path, where: str) -> None:
        self.path, self.where = lock_path(container), where
        self._fd: int | None = None

    def __enter__(self) -> DestinationLock:
        try:
            return self._lock()
        except DestinationBusyError:
            raise
        except OSError as e:
            raise OSError(
                e.errno, f"cannot lock {self.where}: cannot create {self.path} ({e.strerror}); an export needs a "
                "writable folder around its destination"
            ) from e

    def _lock(self) -> DestinationLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for _ in range(20):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o644)
            except FileExistsError:
                try:
                    fd = os.open(self.path, os.O_RDWR)
                except FileNotFoundError:
                    continue  # released meanwhile: try to create it again
            if not self._acquire(fd):
                holder = _read_json(fd)
                os.close(fd)
                raise DestinationBusyError(errno.EBUSY, self._busy_message(holder), str(self.path))
            try:
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except FileNotFoundError:
                same = False
            if not same:  # locked a file its holder had just removed: start again
                os.close(fd)
                continue
            info = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time(), "dest": self.where}
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(info).encode(), 0)
            self._fd = fd
            return self
        raise DestinationBusyError(errno.EBUSY, f"could not lock {self.where} (lock file {self.path})", str(self.path))

    def _acquire(self, fd: int) -> bool:
        try:
            import fcntl
        except ImportError:  # no flock: a lock file naming a dead pid on this host is stale
            holder = _read_json(fd)
            if not holder:
                return True
            return holder.get("host") == socket.gethostname() and not _pid_alive(int(holder.get("pid", -1)))
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
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
            try:
                os.unlink(self.path)  # while still holding the flock
            except FileNotFoundError:
                pass
            os.close(self._fd)
            self._fd = None


def _read_json(fd: int) -> dict[str, Any]:
    try:
        doc = json.loads(os.pread(fd, 4096, 0) or b"{}")
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


# -- what an export wrote ------------------------------------------------------------------


def _metadata(folder: Path) -> dict[str, Any]:
    """attributes.json merged over zarr.json of ``folder`` ({} when missing or unreadable)."""
    doc: dict[str, Any] = {}
    for name in (ZARR_JSON, N5_JSON):
        try:
            with open(folder / name, "rb") as f:
                parsed = json.loads(f.read(_METADATA_LIMIT))
        except (OSError, ValueError):
            continue
        if isinstance(parsed, dict):
            doc.update(parsed)
    return doc


def _count(entry: os.DirEntry[str]) -> int:
    if not entry.is_dir(follow_symlinks=False):
        return 1
    return 1 + sum(len(dirs) + len(files) for _, dirs, files in os.walk(entry.path))


def foreign_entries(folder: Path) -> tuple[list[str], int]:
    """(entries under ``folder`` that no export of this project writes, how many files and
    folders they hold in all). Ours: node metadata, the incomplete marker, ``sN`` datasets
    holding only block trees (digit-named folders and files, as deep as the dataset has
    dimensions) and groups of those. Symbolic links, other files and nested N5 containers
    (an ``"n5"`` version key below the root) are foreign."""
    found: list[str] = []
    total = [0]

    def foreign(entry: os.DirEntry[str], rel: str, why: str = "") -> None:
        n = _count(entry)
        total[0] += n
        kind = "/" if entry.is_dir(follow_symlinks=False) else ""
        found.append(f"{rel}{kind}{f' ({why})' if why else ''}{f' ({n} entries)' if n > 1 else ''}")

    def scan_group(path: Path, rel: str) -> None:
        for entry in sorted(os.scandir(path), key=lambda e: e.name):
            name = f"{rel}{entry.name}"
            if entry.is_symlink():
                foreign(entry, name, "symbolic link")
            elif entry.is_file(follow_symlinks=False):
                if entry.name not in NODE_FILES:
                    foreign(entry, name)
            elif not entry.is_dir(follow_symlinks=False):
                foreign(entry, name, "not a file")
            else:
                meta = _metadata(Path(entry.path))
                if "dimensions" in meta or meta.get("node_type") == "array":
                    scan_blocks(Path(entry.path), f"{name}/", len(meta.get("dimensions", meta.get("shape", []))) or None, 0)
                elif _LEVEL.fullmatch(entry.name) and not meta:
                    scan_blocks(Path(entry.path), f"{name}/", None, 0)  # an unfinished export's level
                elif meta and "n5" not in meta:
                    scan_group(Path(entry.path), f"{name}/")
                else:
                    foreign(entry, name, "another container" if meta else "")

    def scan_blocks(path: Path, rel: str, ndim: int | None, depth: int) -> None:
        for entry in os.scandir(path):
            name = f"{rel}{entry.name}"
            if entry.is_symlink():
                foreign(entry, name, "symbolic link")
            elif entry.is_file(follow_symlinks=False):
                ok = (depth == 0 and entry.name in NODE_FILES) or (
                    entry.name.isdigit() and (ndim is None or depth == ndim - 1)
                )
                if not ok:
                    foreign(entry, name)
            elif entry.is_dir(follow_symlinks=False) and entry.name.isdigit() and (ndim is None or depth < ndim - 1):
                scan_blocks(Path(entry.path), f"{name}/", ndim, depth + 1)
            else:
                foreign(entry, name)

    scan_group(folder, "")
    return found, total[0]


def describe_foreign(found: list[str], total: int, shown: int = 10) -> str:
    listed = ", ".join(found[:shown])
    more = f", ... and {len(found) - shown} more" if len(found) > shown else ""
    return f"{total} entr{'y' if total == 1 else 'ies'} no napari-n5zarr export wrote: {listed}{more}"


# -- staging and swap ----------------------------------------------------------------------


def staging_folder(target: Path) -> Path:
    """A new, empty folder beside ``target`` (same parent, so same filesystem)."""
    path = target.parent / f".{target.name}{STAGING_TAG}{os.getpid()}-{secrets.token_hex(4)}"
    try:
        path.mkdir()
    except OSError as e:
        raise OSError(
            e.errno, f"cannot replace {target}: overwrite writes the new data beside it first, but {path} "
            f"cannot be created ({e.strerror}); nothing was changed"
        ) from e
    return path


def _leftovers(target: Path) -> list[Path]:
    pattern = re.compile(re.escape(f".{target.name}") + r"\.n5zarr-(new|old)-\d+-[0-9a-f]+")
    try:
        return [p for p in target.parent.iterdir() if pattern.fullmatch(p.name)]
    except FileNotFoundError:
        return []


def recover(target: Path) -> list[str]:
    """Clean what an interrupted replacement of ``target`` left (call it holding the lock).

    If ``target`` is missing while an old copy waits beside it (killed between the two
    renames of the fallback swap), the old copy is renamed back. Returns what was done.
    """
    done = []
    leftovers = _leftovers(target)
    olds = [p for p in leftovers if OLD_TAG in p.name]
    if olds and not target.exists():
        os.rename(olds[0], target)
        leftovers.remove(olds[0])
        done.append(f"restored {target} from {olds[0].name}")
    for path in leftovers:
        shutil.rmtree(path, ignore_errors=True)
        done.append(f"removed {path.name}")
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
    """Put the complete ``staging`` folder at ``target``; the old ``target`` stays whole
    until then, and is deleted only after (a failure to delete it is a warning; the next
    export removes it)."""
    if _exchange(staging, target):
        old = staging  # now holds the old node
    else:
        old = target.parent / staging.name.replace(STAGING_TAG, OLD_TAG)
        os.rename(target, old)
        try:
            os.rename(staging, target)
        except OSError:
            os.rename(old, target)  # put the old one back
            raise
    try:
        shutil.rmtree(old)
    except OSError as e:
        warnings.warn(f"replaced {target}, but could not delete the old copy {old}: {e}", stacklevel=3)


def is_disk_full(exc: BaseException) -> TypeGuard[OSError]:
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC))
