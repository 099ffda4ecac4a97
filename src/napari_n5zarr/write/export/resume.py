"""What makes a standard OME-Zarr export resumable: its plan's fingerprint and a shard journal.

An export that keeps a journal (a standard OME-Zarr written in place into a local folder)
writes the plan's fingerprint (source, format, levels, blocks, shards, codecs, metadata)
into its incomplete marker, then appends one line per shard (``s0 1.0.2``) to the marker
once that shard's write returned: the marker is the one file that says "unfinished", and
now also what is finished. A shard is done only when its line is there, whatever the
store wrote meanwhile (a shard written but not yet recorded is written again; an all-zero
shard, which zarr does not store, is recorded as well). The marker is appended through
:class:`~napari_n5zarr.write.dataset_files.DatasetFolder` (never through a link).

:func:`resumable` reads it back: a marker without a fingerprint (the dual export, an
older version) or with another one is refused in one line, nothing deleted.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
import threading
import time
from pathlib import Path
from typing import Any

from napari_n5zarr.errors import InvalidArgumentError, NodeExistsError
from napari_n5zarr.n5.constants import INCOMPLETE_MARKER
from napari_n5zarr.write.dataset_files import DatasetFolder

__all__ = [
    "Journal",
    "fingerprint",
    "marker_document",
    "remove_partial_writes",
    "resumable",
    "shard_key",
]

PLAN_KEY = "plan"
"""The marker's key holding the plan's fingerprint."""
_MARKER_CAP = 256 << 20  # bytes: one line per shard (~12 bytes), millions of shards


def fingerprint(parts: dict[str, Any]) -> str:
    """A short stable digest of the plan ``parts`` (JSON-able; anything else by ``str``)."""
    text = json.dumps(parts, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def marker_document(plan: str | None) -> bytes:
    """The incomplete marker's first line: who writes, since when, and the plan's fingerprint."""
    doc: dict[str, Any] = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time()}
    if plan is not None:
        doc[PLAN_KEY] = plan
    return json.dumps(doc).encode() + b"\n"


def shard_key(level: str, index: tuple[int, ...]) -> str:
    """The journal's name of the shard (or block) at grid ``index`` of the level ``level``."""
    return f"{level} {'.'.join(str(i) for i in index)}"


def _parse(raw: bytes) -> tuple[dict[str, Any] | None, set[str]]:
    """(the marker's document, the shards recorded); a line cut short by a kill is ignored."""
    first, _, rest = raw.partition(b"\n")
    try:
        doc = json.loads(first)
    except ValueError:
        return None, set()
    lines = rest.decode("utf-8", "replace").split("\n")[:-1]  # the last piece has no newline
    return (doc if isinstance(doc, dict) else None), {line for line in lines if line}


def resumable(folder: Path, where: str, plan: str) -> set[str]:
    """The shards an unfinished export of ``plan`` in ``folder`` recorded as written; refuses
    (one line, nothing deleted) a folder that is not such an export."""
    with DatasetFolder(folder) as node:
        raw = node.read(INCOMPLETE_MARKER, _MARKER_CAP, own=True)
    if raw is None:
        raise NodeExistsError(
            f"cannot resume {where}: it is not an unfinished export (no {INCOMPLETE_MARKER}); "
            "nothing was deleted"
        )
    doc, done = _parse(raw)
    if doc is None or PLAN_KEY not in doc:
        raise NodeExistsError(
            f"cannot resume {where}: its unfinished export cannot be resumed (only a standard "
            "OME-Zarr written in place can); nothing was deleted, pass overwrite=True to start afresh"
        )
    if doc[PLAN_KEY] != plan:
        raise InvalidArgumentError(
            f"cannot resume {where}: it is an unfinished export with other arguments (source, format, "
            "levels, chunks, shards, compression or metadata differ); nothing was deleted: resume with "
            "the same arguments, or pass overwrite=True to start afresh"
        )
    return done


_PARTIAL = re.compile(r"\d+\.[0-9a-f]{32}\.partial")
"""zarr's LocalStore writes a chunk to ``<name>.<uuid4 hex>.partial`` and renames it: a kill
in between leaves that file beside the chunk."""


def remove_partial_writes(folder: Path) -> list[str]:
    """Remove the temporary chunk files a killed write left in the chunk trees (``sN/c/...``)
    of the unfinished export in ``folder``; regular files named as zarr names them only."""
    removed = []
    with DatasetFolder(folder) as node:
        for level in sorted(os.scandir(folder), key=lambda e: e.name):
            if not level.is_dir(follow_symlinks=False) or not os.path.isdir(Path(level.path) / "c"):
                continue
            for parent, dirs, names in os.walk(Path(level.path) / "c"):
                dirs[:] = [d for d in dirs if not os.path.islink(Path(parent) / d)]
                for name in names:
                    if _PARTIAL.fullmatch(name):
                        key = (Path(parent) / name).relative_to(folder).as_posix()
                        if node.remove(key):
                            removed.append(key)
    return removed


class Journal:
    """The shards written so far (:attr:`done`) and :meth:`record` of one more, appended to
    the incomplete marker in ``folder`` (from any thread)."""

    def __init__(self, folder: Path, done: set[str]) -> None:
        self.folder, self.done = folder, set(done)
        self._lock = threading.Lock()
        self._fd: int | None = None

    def record(self, key: str) -> None:
        with self._lock:
            if self._fd is None:
                with DatasetFolder(self.folder) as node:
                    self._fd = node.open(INCOMPLETE_MARKER, os.O_WRONLY | os.O_APPEND)
            os.write(self._fd, f"{key}\n".encode())  # one small write: whole or not at all
            self.done.add(key)

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
