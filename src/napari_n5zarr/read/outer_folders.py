"""What the folders above a container's root say about a node opened inside them.

A level opened on its own (``pyr.n5/s1``) inherits its pyramid's voxel size
(:func:`outer_attrs`); a Paintera lookup table opened on its own (``paintera.n5/seg/unique-labels``)
is known for one by its Paintera group above (:func:`outer_paintera_table`). Local folders and
fsspec URLs (the same filesystem: the same credentials and options); none for other stores.
"""

from __future__ import annotations

import json
import logging
import posixpath
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from napari_n5zarr.n5.constants import N5_JSON, VERSION_KEY
from napari_n5zarr.spatial.conventions import PAINTERA_BOOKKEEPING
from napari_n5zarr.spatial.model import inheritable

logger = logging.getLogger(__name__)

OUTER_LEVELS = 8
"""How many folders above a store's root are searched for inherited attributes."""


def outer_names(store: Any) -> list[str]:
    """The folder names from the filesystem's root down to ``store``'s root."""
    from zarr.storage import FsspecStore, LocalStore

    from napari_n5zarr.n5.stores import innermost

    base = innermost(store)
    if isinstance(base, LocalStore):
        return [p for p in Path(base.root).resolve().parts if p not in ("/", "\\")]
    if isinstance(base, FsspecStore):
        return [p for p in base.path.split("://", 1)[-1].split("/") if p]
    return []


def parent_stores(store: Any) -> list[Any]:
    """Plain stores rooted at the folders above ``store``'s root, nearest first."""
    from zarr.storage import FsspecStore, LocalStore

    from napari_n5zarr.n5.stores import innermost
    from napari_n5zarr.storage.local import SafeLocalStore

    base = innermost(store)
    out: list[Any] = []
    if isinstance(base, LocalStore):
        for folder in list(Path(base.root).resolve().parents)[:OUTER_LEVELS]:
            # regular files only, metadata capped: a FIFO named attributes.json above the
            # container must not block the open
            out.append(SafeLocalStore(folder, read_only=True))
    elif isinstance(base, FsspecStore):
        path = base.path.rstrip("/")
        for _ in range(OUTER_LEVELS):
            parent = posixpath.dirname(path)
            if not parent or parent == path or parent.endswith(":/"):  # the host or bucket
                break
            if "://" in parent and parent.split("://", 1)[1].count("/") == 0:
                break  # http(s)://host: no container above it
            out.append(FsspecStore(base.fs, read_only=True, path=parent))
            path = parent
    return out


def _reader(parent: Any) -> Callable[[], bytes | None]:
    def read() -> bytes | None:
        from zarr.buffer import default_buffer_prototype

        from napari_n5zarr.zarr_internals import sync

        raw = sync(parent.get(N5_JSON, default_buffer_prototype()))
        return raw.to_bytes() if raw is not None else None

    return read


def outer_attrs(store: Any) -> dict[str, Any]:
    """Inheritable attributes of the N5 groups above ``store``'s root, root first (see
    :func:`merge_outer_attrs`)."""
    try:
        parents = parent_stores(store)
    except (
        OSError,
        ValueError,
        RuntimeError,
    ):  # an unresolvable path (symlink loop, ...): nothing to inherit
        return {}
    return merge_outer_attrs(
        (str(getattr(p, "root", None) or getattr(p, "path", "")), _reader(p)) for p in parents
    )


def merge_outer_attrs(parents: Iterable[tuple[str, Callable[[], bytes | None]]]) -> dict[str, Any]:
    """Inheritable attributes of the N5 groups above a container, root first, from
    ``(folder, read its attributes.json or None)`` nearest first.

    The walk stops above the first folder named ``*.n5`` or holding the ``"n5"`` version
    key (the container root), and at the second folder in a row without attributes.json.
    """
    found: list[dict[str, Any]] = []
    missing = 0
    for where, read in parents:
        try:
            raw = read()
            doc = json.loads(raw) if raw is not None else None
        except (OSError, ValueError):  # unreadable or not JSON: no attributes from this folder
            logger.debug("no inheritable attributes from %s", where, exc_info=True)
            doc = None
        if not isinstance(doc, dict):
            missing += 1
            if missing >= 2:
                break
            continue
        missing = 0
        found.append(inheritable(doc))
        if VERSION_KEY in doc or where.rstrip("/").lower().endswith(".n5"):
            break
    merged: dict[str, Any] = {}
    for attrs in reversed(found):
        merged.update(attrs)
    return merged


def outer_paintera_table(store: Any) -> str | None:
    """The Paintera bookkeeping dataset (``unique-labels``, ...) that ``store``'s root is, or is
    a level of, when its Paintera group (``painteraData``) lies above the store's root."""
    try:
        names = outer_names(store)
    except (OSError, ValueError, RuntimeError):
        return None
    at = next(
        (
            i
            for i in (len(names) - 1, len(names) - 2)
            if i >= 1 and names[i] in PAINTERA_BOOKKEEPING
        ),
        None,
    )
    if at is None:  # the cheap check first: most folders are named nothing like a lookup table
        return None
    try:
        raw = _reader(parent_stores(store)[len(names) - 1 - at])()
        attrs = json.loads(raw) if raw is not None else {}
    except (OSError, ValueError, IndexError):
        return None
    return (
        names[at]
        if isinstance(attrs, dict) and isinstance(attrs.get("painteraData"), Mapping)
        else None
    )
