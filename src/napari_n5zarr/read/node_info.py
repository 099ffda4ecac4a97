"""One node in full, as ``n5zarr info`` shows it: the tree row, the attributes, the blocks on
disk, and the image/labels pyramids found under it (with the nodes that could not be read)."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

    from napari_n5zarr.read.tree import Node, Tree
    from napari_n5zarr.spatial import Multiscale

__all__ = ["NodeInfo", "detect_pyramids", "multiscale_to_json", "node_info"]

_logger = logging.getLogger(__name__)


def detect_pyramids(tree: Tree, node: Node) -> tuple[list[Multiscale], list[str]]:
    """Every image/labels pyramid under ``node`` of ``tree`` (BigDataViewer setups calibrated
    by the tree's XML), and one ``"path: reason"`` line per node that could not be read
    (detection goes on past it)."""
    from napari_n5zarr.read.multiscale import find_multiscales

    found = find_multiscales((tree, node))
    _logger.debug(
        "detected %d pyramid(s), %d unreadable node(s)", len(found.multiscales), len(found.problems)
    )
    return found.multiscales, found.problems


def multiscale_to_json(ms: Multiscale) -> dict[str, Any]:
    """A pyramid as the reader sees it, napari order (slowest axis first), as JSON."""
    return {
        "name": ms.name,
        "kind": "labels" if ms.is_labels else "image",
        "convention": ms.convention,
        "dtype": ms.dtype,
        "axes": list(ms.axes[::-1]),
        "scale": list(ms.scale[::-1]),
        "translate": list(ms.translate[::-1]),
        "units": list(ms.units[::-1]),
        "levels": [
            {"path": p, "shape": list(s[::-1])} for p, s in zip(ms.paths, ms.shapes, strict=True)
        ],
        "unreadable": ms.unreadable or None,
        "notes": list(ms.notes),
    }


@dataclass
class NodeInfo:
    """What :func:`node_info` found at one location."""

    location: str
    root: Node
    incomplete: bool
    """An interrupted export (its marker is there, its metadata is not)."""
    multiscales: list[Multiscale] = field(default_factory=list)
    blocks: tuple[int, int, bool] | None = None
    """(blocks on disk, blocks expected, counting stopped early) for an array or pyramid."""
    problems: list[str] = field(default_factory=list)
    tree: Tree | None = field(default=None, repr=False, compare=False)
    """The tree it was read from (:meth:`Tree.raise_for_root` says why an error root failed)."""
    unfinished_save: str | None = None
    """A label-edit save was interrupted here (its journal's state; see write/edit/journal.py)."""

    def to_json(self) -> dict[str, Any]:
        """One JSON document (``n5zarr info --json``)."""
        doc = {**self.root.to_json(), "location": self.location, "incomplete": self.incomplete,
               "unfinished_save": self.unfinished_save,
               "attributes": self.root.attributes, "zarr_json": self.root.zarr_doc,
               "multiscales": [multiscale_to_json(ms) for ms in self.multiscales], "problems": self.problems}  # fmt: skip
        if self.blocks is not None:
            doc["blocks_on_disk"], doc["blocks_expected"], doc["blocks_counted_partially"] = (
                self.blocks
            )
        return doc


def node_info(
    location: str | os.PathLike[str], *, unfinished_save: Callable[[str], str | None] | None = None
) -> NodeInfo:
    """One node in full and the pyramids under it.

    Parameters
    ----------
    location : str or os.PathLike
        A folder, ``.zip``, BigDataViewer ``.xml`` (its N5 folder) or URL.
    unfinished_save : callable, optional
        Asked of a local folder: the state of an interrupted label-edit save there, or None
        (the CLI passes :func:`napari_n5zarr.write.edit.journal.unfinished_save`; the read
        wing knows nothing of saving). Not given: not looked for.

    Returns
    -------
    NodeInfo
        The node's tree row, whether an export there was interrupted, its pyramids, its
        block count, and the nodes that could not be read (``problems``). When the root
        itself is unreadable, ``root.kind == "error"`` and nothing else is filled in.

    Raises
    ------
    FileNotFoundError
        If nothing is at ``location``.
    """
    from napari_n5zarr.n5.constants import INCOMPLETE_MARKER
    from napari_n5zarr.read.tree import open_tree
    from napari_n5zarr.zarr_internals import sync

    text = os.fspath(location)
    tree = open_tree(text)  # a BigDataViewer XML opens its N5 folder
    incomplete = bool(sync(tree.base_store.exists(INCOMPLETE_MARKER)))
    info = NodeInfo(location=text, root=tree.root, incomplete=incomplete, tree=tree)
    if unfinished_save is not None and os.path.isdir(tree.n5_location):
        info.unfinished_save = unfinished_save(tree.n5_location)
    if info.root.kind == "error":
        return info
    info.multiscales, info.problems = detect_pyramids(tree, tree.root)
    if info.root.kind in ("array", "pyramid"):
        try:
            info.blocks = tree.block_count(info.root)
        except Exception as e:
            info.problems.append(f"{info.root.path or '/'}: cannot count blocks ({e})")
    return info
