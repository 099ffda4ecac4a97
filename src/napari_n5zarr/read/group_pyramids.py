"""Which pyramids one group is: the convention table, driven once per group over a tree's nodes.

The only driver of :mod:`napari_n5zarr.spatial.conventions`: the tree's rows
(:meth:`napari_n5zarr.read.tree.Tree.pyramids_at`) and the reader's walk
(:func:`napari_n5zarr.read.pyramid_walk.detect`) both take a group's pyramids from here, so a
row shows what the reader opens by construction. It reads what a convention asks for through
the tree's nodes (each metadata document read once per tree): a group's attributes, its
children's names, the facts of its level-named children (``s0``, ``s1``, ...), and what the
convention names (referenced datasets, Paintera's ``data``, BigDataViewer setups and time points).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from napari_n5zarr.read.node import Node
from napari_n5zarr.read.node_metadata import array_info
from napari_n5zarr.spatial.conventions import (
    BIGDATAVIEWER,
    PYRAMIDS,
    Convention,
    Recognised,
    paintera_bookkeeping,
)
from napari_n5zarr.spatial.model import Listing, level_name, level_number

PROBED_LEVELS = 32
"""A group that lists nothing (plain HTTP) is probed for ``s0, s1, ...`` up to this many."""


class Nodes(Protocol):
    """What the driver reads through (the tree)."""

    def names(self, path: str) -> list[str]:
        """Names of the candidate children of the group at ``path``."""
        ...

    def nodes_in(self, group: Node, names: Sequence[str]) -> list[Node | None]:
        """The children ``names`` of ``group`` (None: nothing there)."""
        ...

    def child(self, group: Node, rel: str) -> Node | None:
        """The node at ``rel`` below ``group`` (None: nothing there)."""
        ...


@dataclass(frozen=True)
class GroupPyramids:
    """What the convention table makes of one group."""

    recognised: tuple[Recognised, ...] = ()
    """In the table's order: the first of ``PYRAMIDS`` that built one, then ``BIGDATAVIEWER``'s."""
    used: frozenset[str] = frozenset()
    """The children they are made of, and Paintera's bookkeeping: not walked as images."""
    fault: BaseException | None = None
    """The group could not be listed and no level was found by name."""

    @property
    def own(self) -> Recognised | None:
        """The pyramid at the group itself (its row), if any."""
        return next((r for r in self.recognised if r.at == ""), None)


def group_pyramids(nodes: Nodes, group: Node) -> GroupPyramids:
    """Apply the table to ``group``: the first of ``PYRAMIDS`` that builds one, then every
    entry of ``BIGDATAVIEWER``. ``group.inherited`` holds what its ancestors pass on."""
    reader = _Reader(nodes, group)
    found: list[Recognised] = []
    for convention in PYRAMIDS:
        built = reader.build(convention)
        if built:
            found += built
            break
    for convention in BIGDATAVIEWER:
        found += reader.build(convention)
    used = {c for r in found for c in r.claims} | set(paintera_bookkeeping(reader.listing))
    return GroupPyramids(tuple(found), frozenset(used), reader.fault)


class _Reader:
    """Reads what the conventions ask for below one group into its :class:`Listing`."""

    def __init__(self, nodes: Nodes, group: Node) -> None:
        self.nodes, self.group = nodes, group
        self.listing = Listing()
        self.tried: set[str] = set()
        self.fault: BaseException | None = None
        self._list("", group)

    def _list(self, path: str, group: Node) -> None:
        """Record ``group`` (at ``path``): its attributes, its children's names and the facts
        of its level-named children; a group that cannot be listed is probed for levels."""
        fault: BaseException | None = None
        try:
            names = self.nodes.names(group.path)
        except Exception as exc:  # boundary: any store's listing fault (plain HTTP cannot list)
            names, fault = [], exc
        if not names:  # nothing listed (plain HTTP lists nothing, or fails): levels by name
            names = self._probe(group)
            self.fault = fault if not names and not path else self.fault
        levels = [n for n in names if level_number(n) is not None]
        found = self.nodes.nodes_in(group, levels)
        arrays = {
            n: array_info(c)
            for n, c in zip(levels, found, strict=True)
            if c is not None and c.kind == "array"
        }
        self.listing.add(path, group.attributes, arrays, [n for n in names if n not in arrays])

    def _probe(self, group: Node) -> list[str]:
        names: list[str] = []
        for k in range(PROBED_LEVELS):
            found = self.nodes.nodes_in(group, [level_name(k)])[0]
            if found is None or found.kind != "array":
                break
            names.append(level_name(k))
        return names

    def build(self, convention: Convention) -> list[Recognised]:
        """What ``convention`` finds, after reading what it asks for, round after round."""
        if not convention.matches(self.listing):
            return []
        while todo := [p for p in convention.reads(self.listing) if p not in self.tried]:
            for path in todo:
                self.tried.add(path)
                child = self.nodes.child(self.group, path)
                if child is not None and child.kind == "array":
                    self.listing.arrays[path] = array_info(child)
                elif child is not None and child.kind in ("group", "pyramid"):
                    self._list(path, child)
        return convention.build(self.listing, self.group.inherited)
