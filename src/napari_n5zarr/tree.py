"""A container's node tree, read with per-node error capture (no Qt, no napari).

Used by the browser widget and ``n5zarr tree``: one unreadable node is reported in place and
never hides its siblings.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import zarr

from napari_n5zarr.n5.errors import N5FormatError


@dataclass
class TreeNode:
    """One node of an N5/Zarr hierarchy (paths relative to the opened root)."""

    name: str
    path: str
    kind: str
    """"group", "array" or "error"."""
    shape: tuple[int, ...] | None = None
    dtype: str | None = None
    chunks: tuple[int, ...] | None = None
    compression: str | None = None
    error: str | None = None
    attributes: dict[str, Any] = field(default_factory=dict)
    children: list[TreeNode] = field(default_factory=list)

    def walk(self):
        """This node and every descendant, depth first."""
        yield self
        for child in self.children:
            yield from child.walk()

    @property
    def summary(self) -> str:
        """A one-line description: shape, dtype, block size and compression, or the error."""
        if self.kind == "array":
            return f"{list(self.shape or ())} {self.dtype} blocks {list(self.chunks or ())} {self.compression}"
        if self.kind == "error":
            return f"unreadable: {self.error}"
        return f"group ({len(self.children)} children)"


def _compression(arr: zarr.Array) -> str:
    codec = arr.metadata.codecs[0] if getattr(arr.metadata, "codecs", None) else None
    comp = getattr(codec, "compressor", None)
    return "raw" if comp is None else comp.to_dict().get("name", "?")


def describe(node: zarr.Array | zarr.Group, name: str = "", path: str = "") -> TreeNode:
    """A :class:`TreeNode` for one node (no children)."""
    if isinstance(node, zarr.Array):
        return TreeNode(name, path, "array", tuple(node.shape), str(node.dtype), tuple(node.chunks),
                        _compression(node), attributes=dict(node.attrs))
    return TreeNode(name, path, "group", attributes=dict(node.attrs))


def build_tree(root: zarr.Array | zarr.Group, *, max_nodes: int = 10_000) -> TreeNode:
    """Read the hierarchy under ``root`` (metadata only), capturing errors per node."""
    top = describe(root)
    budget = [max_nodes]
    _fill(root, top, budget)
    return top


def _fill(group: zarr.Array | zarr.Group, into: TreeNode, budget: list[int]) -> None:
    if not isinstance(group, zarr.Group):
        return
    from napari_n5zarr.access import child_names

    names = sorted(child_names(group))
    for name in names:
        if budget[0] <= 0:
            into.children.append(TreeNode("…", into.path, "error", error="too many nodes; listing stopped"))
            return
        budget[0] -= 1
        path = f"{into.path}/{name}" if into.path else name
        try:
            child = group[name]
        except KeyError as e:  # no node here (e.g. a stray file), or unreadable metadata
            if isinstance(e, N5FormatError):
                into.children.append(TreeNode(name, path, "error", error=str(e)))
            continue
        except (N5FormatError, ValueError, OSError) as e:
            into.children.append(TreeNode(name, path, "error", error=str(e)))
            continue
        node = describe(child, name, path)
        into.children.append(node)
        _fill(child, node, budget)


def join(root: str | os.PathLike[str], path: str) -> str:
    """The location of ``path`` under ``root`` (a local path or a URL)."""
    base = os.fspath(root).rstrip("/")
    return f"{base}/{path}" if path else base
