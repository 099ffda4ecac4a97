"""Every image/labels pyramid under a node of a tree (metadata only, never blocks).

The reader's walk (:func:`detect`) over the tree's nodes (:mod:`napari_n5zarr.read.tree`: each
metadata document read once per tree): a group's pyramids come from
:meth:`~napari_n5zarr.read.tree.Tree.pyramids_at` (the convention table, driven once per group,
the same answer the group's row shows); the children no pyramid claimed are walked in turn, an
array being a single-level pyramid. A zarr node opened elsewhere is walked through a tree of its
store (:func:`~napari_n5zarr.read.tree.tree_at`).
"""

from __future__ import annotations

import logging
import warnings
from typing import TYPE_CHECKING

from napari_n5zarr.errors import N5FormatError, SkippedNodeWarning
from napari_n5zarr.read.node import Node
from napari_n5zarr.read.tree import Tree, tree_at
from napari_n5zarr.spatial.model import ErrorHandler, Multiscale, describe_error, join_path

if TYPE_CHECKING:
    import zarr

Where = tuple[Tree, Node]
"""A node of a tree: where a walk starts (paths it finds are relative to it)."""

logger = logging.getLogger(__name__)


def _warn(path: str, exc: BaseException) -> None:
    warnings.warn(f"skipped {describe_error(path, exc)}", SkippedNodeWarning, stacklevel=4)


def _logged(on_error: ErrorHandler) -> ErrorHandler:
    """``on_error``, after logging the skipped node (whatever the caller does with it)."""

    def report(path: str, exc: BaseException) -> None:
        logger.info("skipped %s", describe_error(path, exc))
        on_error(path, exc)

    return report


def place(where: Where | zarr.Array | zarr.Group) -> Where:
    """``where`` as (tree, node): a zarr node opened elsewhere is read through its store's tree."""
    return where if isinstance(where, tuple) else tree_at(where)


def detect(
    where: Where | zarr.Array | zarr.Group,
    name: str | None = None,
    *,
    on_error: ErrorHandler | None = None,
    max_depth: int = 6,
    limit: int | None = None,
) -> list[Multiscale]:
    """Every image/labels pyramid under ``where`` (a tree's node, or a zarr node); paths
    relative to it.

    A group that is a pyramid gives one :class:`Multiscale`; a group of several
    pyramids/datasets one per pyramid/dataset (named by relative path); an array a
    single-scale one. ``name`` names a pyramid or array at the node itself (default: its
    name). A node that cannot be read is passed to ``on_error(path, exception)`` (default: a
    :class:`SkippedNodeWarning`) and its siblings are still described. With ``limit``, the
    walk stops once more than ``limit`` pyramids were found (``len(result) > limit`` says
    "too many to show").
    """
    tree, node = place(where)
    on_error = _logged(on_error or _warn)
    label = (node.name if node.path else "") if name is None else name
    if node.kind == "error":
        on_error(node.path or "/", N5FormatError(node.error or "unreadable"))
        return []
    if node.kind == "array":
        ms = tree.multiscale(node, label)
        return [ms] if ms is not None else []
    return _walk(tree, node, label, "", on_error, max_depth, limit)


def _walk(
    tree: Tree,
    group: Node,
    label: str,
    prefix: str,
    on_error: ErrorHandler,
    depth: int,
    limit: int | None,
) -> list[Multiscale]:
    """The pyramids of ``group`` (at ``prefix`` below the walk's start), then its children's."""
    table = tree.pyramids_at(group)
    if table.fault is not None:
        on_error(prefix or "/", table.fault)
    found: list[Multiscale] = []
    for r in table.recognised:
        if r.at or not found:  # a group is at most one pyramid itself
            ms = (
                tree.multiscale(group, label or prefix, prefix)
                if not r.at
                else tree.finished(group, r, join_path(prefix, r.at), prefix)
            )
            if ms is not None:
                found.append(ms)
    if depth <= 0:
        return found
    for child in (c for page in tree.iter_children(group) for c in page):
        if limit is not None and len(found) > limit:
            break
        name = child.path.rsplit("/", 1)[-1]
        path = join_path(prefix, name)
        if name in table.used or (name == "…" and table.recognised):
            continue
        if child.kind == "error":
            on_error(path, N5FormatError(child.error or "unreadable"))
        elif child.kind == "array":
            ms = tree.multiscale(child, path, path)
            found += [ms] if ms is not None else []
        else:
            try:
                left = None if limit is None else limit - len(found)
                found += _walk(tree, child, "", path, on_error, depth - 1, left)
            except (
                Exception
            ) as exc:  # boundary: one broken subtree is reported, never its siblings'
                on_error(path, exc)
    return found
