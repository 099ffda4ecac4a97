"""The save journal, its recovery, the commit of staged blocks, and the save's locks.

New blocks are staged beside their targets (``<block>.n5zarr-staged``, fsynced) under a
journal (:data:`JOURNAL`) that first says ``staging`` then ``committing`` and records each
block's checksum before and after; each staged block is then renamed over its target and
the journal removed. :func:`recover` rolls a ``staging`` journal back and redoes a
``committing`` one block by block, only where the block on disk is still the journal's
"before". Every file is reached through
:class:`~napari_n5zarr.write.dataset_files.DatasetFolder`; a journal this package did not
write is refused, naming it, and never blocks a reader (:func:`journal_problem`).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import signal
import stat
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from napari_n5zarr.errors import PlantedFileError
from napari_n5zarr.n5.constants import N5_JSON, ZARR_JSON
from napari_n5zarr.write.dataset_files import DatasetFolder, kind
from napari_n5zarr.write.edit.label_pyramid import Level, pyramid_levels
from napari_n5zarr.write.safe_destination import DestinationLock, check_ancestors

JOURNAL = ".n5zarr-save-journal"
JOURNAL_TMP = JOURNAL + ".tmp"
STAGED_SUFFIX = ".n5zarr-staged"
JOURNAL_CAP = 64 * 2**20
"""Bytes of a save journal read at most (a bigger file was not written by a save)."""
JOURNAL_BATCH = 100_000
"""Blocks per journal: a bigger save commits in batches (each one atomic per block, recoverable)."""
CRASH_ENV = "NAPARI_N5ZARR_SAVE_CRASH"
"""Tests only: ``"<point>"`` or ``"<point>:<n>"`` kills the saving process (SIGKILL) there."""
_HASH = re.compile(r"[0-9a-f]{64}")


def sha(raw: bytes | None) -> str | None:
    return None if raw is None else hashlib.sha256(raw).hexdigest()


@dataclass
class NewBlock:
    values: np.ndarray | None
    """Inside the array, napari order (None: a stored object of several blocks)."""
    encoded: bytes
    before: str | None = None
    """Checksum of the block's stored bytes when the save read them (None: missing)."""


@dataclass
class Entry:
    """One journaled block: its key and checksums before and after (None: missing)."""

    key: str
    before: str | None
    after: str | None
    known: bool = True
    """False for a journal of an older version (no checksums)."""


def _crash_point(name: str, n: int | None = None) -> None:
    wanted = os.environ.get(CRASH_ENV)
    if wanted and wanted in (name, f"{name}:{n}"):
        os.kill(os.getpid(), signal.SIGKILL)


def _write_journal(folder: DatasetFolder, state: str, entries: Sequence[Entry]) -> None:
    blocks = [{"key": e.key, "before": e.before, "after": e.after} for e in entries]
    folder.create(
        JOURNAL_TMP, json.dumps({"version": 2, "state": state, "blocks": blocks}).encode()
    )
    folder.replace(JOURNAL_TMP, JOURNAL)
    folder.sync()


def _valid_key(key: Any, levels: Sequence[Level]) -> bool:
    """``key`` names a block of one of ``levels`` (inside its grid, canonical digits)."""
    if not isinstance(key, str) or not key:
        return False
    parts = key.split("/")
    for level in levels:
        prefix = level.key.split("/") if level.key else []
        if parts[: len(prefix)] != prefix or len(parts) == len(prefix):
            continue
        if level.blocks.index_of("/".join(parts[len(prefix) :])) is not None:
            return True
    return False


def _level_of(key: str, levels: Sequence[Level]) -> Level:
    """The level whose block ``key`` is (keys were checked by :func:`read_journal`)."""
    return next(level for level in levels if _valid_key(key, [level]))


def read_journal(folder: DatasetFolder, levels: Sequence[Level]) -> tuple[str, list[Entry]] | None:
    """(state, entries) of the journal in ``folder``, None when there is none. A journal this
    package did not write (a link, a folder, a FIFO, too big, not a journal, naming anything
    but this dataset's blocks) raises :class:`PlantedFileError`, naming it."""
    raw = folder.read(JOURNAL, JOURNAL_CAP, own=True)
    if raw is None:
        return None

    def refuse(why: str) -> PlantedFileError:
        return folder.refuse(JOURNAL, f"a file that is not a usable save journal ({why})",
                             "move it away if no save of this dataset was interrupted")  # fmt: skip

    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError):
        raise refuse("not JSON") from None
    if (
        not isinstance(doc, dict)
        or doc.get("state") not in ("staging", "committing")
        or doc.get("version") not in (1, 2)
    ):
        raise refuse("no version and state of a save")
    items = doc.get("blocks")
    if not isinstance(items, list):
        raise refuse("no list of blocks")
    entries: list[Entry] = []
    for item in items:
        if doc["version"] == 1:  # an older save's journal: keys only
            entry = Entry(item, None, None, known=False) if isinstance(item, str) else None
        elif isinstance(item, dict) and all(
            v is None or (isinstance(v, str) and _HASH.fullmatch(v))
            for v in (item.get("before"), item.get("after"))
        ):
            entry = Entry(item.get("key"), item.get("before"), item.get("after"))  # type: ignore[arg-type]
        else:
            entry = None
        if entry is None or not _valid_key(entry.key, levels):
            raise refuse(f"an entry that names no block of this dataset: {str(item)[:80]!r}")
        entries.append(entry)
    return doc["state"], entries


def recover(folder: DatasetFolder, levels: Sequence[Level]) -> str | None:
    """Finish an interrupted save (hold the lock): a ``staging`` journal is rolled back
    (its staged files removed: every block is still the old one), a ``committing`` one redone
    block by block where the block on disk is still the journal's "before" (a block written
    since is left, and said so). Returns what was done, or None."""
    tmp_removed = folder.remove(JOURNAL_TMP)  # a save killed while writing its journal
    found = read_journal(folder, levels)
    if found is None:
        return "removed an unfinished save's journal temporary" if tmp_removed else None
    state, entries = found
    redone = left = 0
    for entry in entries:
        staged = entry.key + STAGED_SUFFIX
        if state != "committing":
            folder.remove(staged)
            continue
        level = _level_of(entry.key, levels)
        new = folder.read(staged, level.stored_cap, own=True)
        if new is None:
            continue  # put in place before the interruption
        current = sha(folder.read(entry.key, level.stored_cap, own=False))
        if entry.known and sha(new) == entry.after and current == entry.before:
            folder.replace(staged, entry.key)
            redone += 1
        else:
            folder.remove(staged)
            left += current != entry.after
    for key in {e.key.rsplit("/", 1)[0] for e in entries if "/" in e.key}:
        folder.sync(key)
    folder.remove(JOURNAL)
    folder.sync()
    if state != "committing":
        return f"rolled back an unfinished save ({len(entries)} blocks left as they were)"
    text = f"completed an unfinished save of {len(entries)} blocks ({redone} put in place now)"
    if left:
        text += f"; {left} block{'s were' if left != 1 else ' was'} written since it was interrupted and left as they are"
    return text


def commit(folder: DatasetFolder, blocks: Mapping[str, NewBlock]) -> int:
    """Replace ``blocks`` (key -> new block) atomically per block under a journal; bytes written."""
    written = 0
    keys = list(blocks)
    for start in range(0, len(keys), JOURNAL_BATCH):
        batch = keys[start : start + JOURNAL_BATCH]
        for key in batch:  # refuse anything planted before writing a byte
            if (found := folder.lstat(key + STAGED_SUFFIX)) is not None:
                hard = stat.S_ISREG(found.st_mode) and found.st_nlink > 1
                raise folder.refuse(
                    key + STAGED_SUFFIX, "a hard link" if hard else kind(found.st_mode)
                )
        entries = [Entry(k, blocks[k].before, sha(blocks[k].encoded)) for k in batch]
        _write_journal(folder, "staging", entries)
        _crash_point("journal")
        staged: list[str] = []
        try:
            for n, key in enumerate(batch):
                folder.create(key + STAGED_SUFFIX, blocks[key].encoded)
                staged.append(key + STAGED_SUFFIX)
                written += len(blocks[key].encoded)
                _crash_point("staged", n)
        except BaseException:
            for name in staged:
                with contextlib.suppress(OSError):
                    folder.remove(name)
            with contextlib.suppress(OSError):
                folder.remove(JOURNAL)
            raise
        parents = {k.rsplit("/", 1)[0] for k in batch if "/" in k}
        for key in parents:
            folder.sync(key)
        _write_journal(folder, "committing", entries)
        _crash_point("committing")
        for n, key in enumerate(batch):
            folder.replace(key + STAGED_SUFFIX, key)
            _crash_point("replaced", n)
        for key in parents:
            folder.sync(key)
        folder.remove(JOURNAL)
        folder.sync()
    return written


def journal_problem(folder: Path, levels: Sequence[Level]) -> str | None:
    """Why the save journal in the pyramid ``folder`` (its ``levels`` known) cannot be used
    (None: there is none, or it is fine). Never blocks and never raises: for readers, which
    then open the labels read-only."""
    try:
        with DatasetFolder(folder) as df:
            read_journal(df, levels)
    except PlantedFileError as e:
        return str(e)
    except (OSError, ValueError) as e:
        return f"{folder / JOURNAL}: {e}"
    return None


def unfinished_save(
    root: str | os.PathLike[str], levels: Sequence[Level] | None = None
) -> str | None:
    """``"staging"`` or ``"committing"`` when a save of ``root`` (whose ``levels`` are known,
    else found here) was interrupted, ``"unusable: <why>"`` when a file there is not a usable
    journal, else None. Never blocks."""
    folder = Path(os.fspath(root)).resolve()
    if levels is None:
        try:
            folder, levels = pyramid_levels(root)
        except (OSError, ValueError):
            levels = []
    try:
        with DatasetFolder(folder) as df:
            if not levels:
                return "unusable: not an editable dataset" if df.lstat(JOURNAL) else None
            found = read_journal(df, levels)
    except PlantedFileError as e:
        return f"unusable: {e}"
    except OSError:
        return None
    return found[0] if found else None


# -- locks ------------------------------------------------------------------------------


def container_folders(root: Path, looked_at: int = 32) -> list[Path]:
    """The folders above ``root`` up to its container's root (the highest ancestor, within
    ``looked_at``, that holds N5/Zarr metadata or is named ``*.n5``/``*.zarr``), nearest first."""
    parents = list(root.parents)[:looked_at]
    top = -1
    for n, folder in enumerate(parents):
        if folder.suffix.lower() in (".n5", ".zarr") or any(
            (folder / name).is_file() for name in (N5_JSON, ZARR_JSON)
        ):
            top = n
    found = parents[: top + 1]
    return [f for f in found if f.parent != f]


@contextlib.contextmanager
def lock(root: Path) -> Iterator[None]:
    """The export lock of ``root`` (exclusive: a second saver or an exporter of it is refused,
    naming the first) and of every folder above it up to the container root (shared: an
    export replacing an enclosing group is refused while the save runs, and vice versa)."""
    where = f"{root} (saving label edits)"
    with contextlib.ExitStack() as stack:
        for folder in reversed(container_folders(root)):
            try:
                stack.enter_context(
                    DestinationLock(
                        folder, f"{folder} (labels inside it are being saved)", shared=True
                    )
                )
            except OSError as e:
                if e.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
                    raise
                # a folder around the container that this user cannot write: no export can replace
                # what is in it either; check_ancestors below still sees an export's lock there
        stack.enter_context(DestinationLock(root, where))
        check_ancestors(root, where)
        yield


def recover_at(root: str | os.PathLike[str], levels: Sequence[Level] | None = None) -> str | None:
    """Finish an interrupted save of the dataset or pyramid at ``root`` (whose ``levels`` are
    known, else found here) under its locks."""
    folder, levels = (
        pyramid_levels(root) if levels is None else (Path(os.fspath(root)).resolve(), levels)
    )
    with lock(folder), DatasetFolder(folder) as df:
        return recover(df, levels)
