"""What in a local folder no export of this project wrote: the scan an overwrite runs before
it deletes anything (:func:`foreign_entries`), below both the access layer (mode ``"w"``) and
the export's publish step."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from napari_n5zarr.n5.constants import INCOMPLETE_MARKER, N5_JSON, VERSION_KEY, ZARR_JSON
from napari_n5zarr.spatial.model import level_number
from napari_n5zarr.storage import files

NODE_FILES = frozenset({N5_JSON, ZARR_JSON, INCOMPLETE_MARKER})
"""Files an export writes in a node (the last is its incomplete marker)."""
_METADATA_LIMIT = 1 << 20  # bytes of attributes.json/zarr.json read to classify a folder


def _metadata(folder: Path) -> dict[str, Any]:
    """attributes.json merged over zarr.json of ``folder`` ({} when missing or unreadable)."""
    doc: dict[str, Any] = {}
    for name in (ZARR_JSON, N5_JSON):
        try:
            raw = files.read_regular_file(
                folder / name, lambda size: (0, min(size, _METADATA_LIMIT)), metadata=False
            )
            parsed = json.loads(
                raw
            )  # a FIFO or device named like metadata is refused, never opened to wait
        except (OSError, ValueError):
            continue
        if isinstance(parsed, dict):
            doc.update(parsed)
    return doc


def _count(entry: os.DirEntry[str]) -> int:
    if not entry.is_dir(follow_symlinks=False):
        return 1
    return 1 + sum(len(dirs) + len(names) for _, dirs, names in os.walk(entry.path))


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
                    ndim = len(meta.get("dimensions", meta.get("shape", []))) or None
                    scan_blocks(Path(entry.path), f"{name}/", ndim, 0, c_keys=_default_keys(meta))
                elif level_number(entry.name) is not None and not meta:
                    scan_blocks(
                        Path(entry.path), f"{name}/", None, 0
                    )  # an unfinished export's level
                elif meta and VERSION_KEY not in meta:
                    scan_group(Path(entry.path), f"{name}/")
                else:
                    foreign(entry, name, "another container" if meta else "")

    def scan_blocks(
        path: Path, rel: str, ndim: int | None, depth: int, c_keys: bool = False
    ) -> None:
        for entry in os.scandir(path):
            name = f"{rel}{entry.name}"
            if c_keys and entry.name == "c" and entry.is_dir(follow_symlinks=False):
                scan_blocks(Path(entry.path), f"{name}/", ndim, 0)  # Zarr v3 default keys: c/i/j/k
            elif entry.is_symlink():
                foreign(entry, name, "symbolic link")
            elif entry.is_file(follow_symlinks=False):
                ok = (depth == 0 and entry.name in NODE_FILES) or (
                    entry.name.isdigit() and (ndim is None or depth == ndim - 1)
                )
                if not ok:
                    foreign(entry, name)
            elif (
                entry.is_dir(follow_symlinks=False)
                and entry.name.isdigit()
                and (ndim is None or depth < ndim - 1)
            ):
                scan_blocks(Path(entry.path), f"{name}/", ndim, depth + 1)
            else:
                foreign(entry, name)

    scan_group(folder, "")
    return found, total[0]


def _default_keys(meta: dict[str, Any]) -> bool:
    """A Zarr v3 array whose chunk keys are ``c/i/j/k`` (a standard OME-Zarr export)."""
    encoding = meta.get("chunk_key_encoding")
    return (
        meta.get("node_type") == "array"
        and isinstance(encoding, dict)
        and encoding.get("name") == "default"
    )


def describe_foreign(found: list[str], total: int, shown: int = 10) -> str:
    listed = ", ".join(found[:shown])
    more = f", ... and {len(found) - shown} more" if len(found) > shown else ""
    return (
        f"{total} entr{'y' if total == 1 else 'ies'} no napari-n5zarr export wrote: {listed}{more}"
    )
