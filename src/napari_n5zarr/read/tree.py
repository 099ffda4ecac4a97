"""THE hierarchy model: a container's nodes, read lazily, each metadata document once, errors in place.

Pure Python (no Qt, no napari). One model behind every face: the napari reader
(:mod:`napari_n5zarr.read.images`, through :func:`napari_n5zarr.read.pyramid_walk.detect`), the
browser's rows and its "the reader will use" panel, ``n5zarr tree``, ``info`` and ``convert``.
Metadata only, never blocks (except on request: :meth:`Tree.block_count`, :meth:`Tree.thumbnail`,
and the arrays of the levels chosen, :meth:`Tree.arrays`, built from the documents read).

* Lazy: :meth:`Tree.iter_children` lists one group, page by page, as it reads; nothing
  is read before it is asked for and there is no node cap.
* Errors in place: a node whose metadata cannot be read (bad JSON, a codec parameter out of
  range, a FIFO instead of a file, ...) becomes a ``kind == "error"`` node naming the file;
  its siblings are listed as usual.
* Pyramids: a group that the reader opens as one multiscale image (N5 Viewer, COSEM,
  OME-NGFF, Paintera, BigDataViewer setup, neuroglancer/tensorstore) is one ``kind ==
  "pyramid"`` node: :meth:`Tree.pyramids_at` drives the convention table once per group
  (:mod:`napari_n5zarr.read.group_pyramids`), for the row and the reader alike, so the row
  shows what the reader opens by construction.
* Says what it waits for: with an :class:`Activity`, each listing and metadata read is
  named while it runs, and :func:`report_waits` reports one that takes longer than a second
  or two (``n5zarr tree`` of a slow server prints ``waiting for the listing of URL ...`` on
  stderr while its output streams on stdout).
* Row fields are in napari order (z, y, x): shape with axis names, dtype, voxel size and
  units, uncompressed size, block size, N5 compression name and level.

* One reader: names and documents come through the library's store chain (the N5 Default
  Store and the implicit-group store over :func:`~napari_n5zarr.access.base_store`), which
  decides implicit groups, translates attributes.json (handed the bytes the tree read: not
  read again) and refuses FIFOs and oversized documents, for local folders, zips and URLs
  alike. A local folder answers synchronously (:func:`napari_n5zarr.n5.stores.get_many`);
  other stores get one page's reads at once.

The parts live beside it in :mod:`napari_n5zarr.read`: ``node`` (the node model and its
display text), ``node_metadata`` (metadata documents -> node fields), ``group_pyramids``,
``outer_folders`` (what the folders above a container pass on), ``thumbnail``.
"""

from __future__ import annotations

import json
import math
import os
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from napari_n5zarr import spatial
from napari_n5zarr.errors import N5FormatError, N5StoreError, NodeNotFoundError
from napari_n5zarr.n5.constants import N5_JSON, VERSION_KEY, ZARR_JSON
from napari_n5zarr.read.group_pyramids import GroupPyramids, group_pyramids
from napari_n5zarr.read.locate import Source, require
from napari_n5zarr.read.node import Node
from napari_n5zarr.read.node_metadata import (
    array_info,
    calibrate_array,
    documents_disagree,
    error_text,
    fill_from_n5,
    fill_from_zarr,
    parse_metadata,
)
from napari_n5zarr.read.outer_folders import outer_attrs, outer_paintera_table
from napari_n5zarr.spatial.conventions import PAINTERA_BOOKKEEPING, Recognised, finish, stored_name
from napari_n5zarr.spatial.model import INHERITABLE, Multiscale, natural_key
from napari_n5zarr.spatial.model import join_path as _join
from napari_n5zarr.spatial.pyramids import dataset_pyramid
from napari_n5zarr.storage.location import is_url, join, node_location

if TYPE_CHECKING:
    import numpy as np
    import zarr
    from zarr.abc.store import Store

PAGE_SIZE = 500
"""Nodes per page of :meth:`Tree.iter_children` (the first page is smaller)."""
FIRST_PAGE = 100


class Activity:
    """What a tree is waiting for now (a listing, a page of metadata), and since when;
    thread-safe. Read by :func:`report_waits`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._now: tuple[str, float, int] | None = None
        self._serial = 0

    @contextmanager
    def doing(self, text: str) -> Iterator[None]:
        """Name the wait for the duration of the block."""
        with self._lock:
            self._serial += 1
            mine = self._now = (text, time.monotonic(), self._serial)
        try:
            yield
        finally:
            with self._lock:
                if self._now is mine:
                    self._now = None

    def current(self) -> tuple[str, float, int] | None:
        """(what, started at (``time.monotonic``), serial number) or None when idle."""
        with self._lock:
            return self._now


@contextmanager
def report_waits(
    activity: Activity, report: Callable[[str], None], after: float = 1.5, every: float = 10.0
) -> Iterator[None]:
    """Within the block, ``report("waiting for WHAT (N s)")`` from a watcher thread when a
    wait of ``activity`` lasts longer than ``after`` seconds, and every ``every`` seconds
    while it goes on."""
    stop = threading.Event()

    def watch() -> None:
        told: tuple[int, float] | None = None  # (serial, when) of the last report
        while not stop.wait(0.2):
            now = activity.current()
            if now is None:
                continue
            text, since, serial = now
            t = time.monotonic()
            due = t - since >= after if told is None or told[0] != serial else t - told[1] >= every
            if due:
                told = (serial, t)
                try:
                    report(f"waiting for {text} ({t - since:.0f} s)")
                except Exception:
                    return

    thread = threading.Thread(target=watch, name="n5zarr-waits", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(1.0)


class Tree:
    """The hierarchy at one location, read lazily; safe to list from one worker thread
    while another thread reads the nodes it has handed out."""

    def __init__(self, location: str, store: Store, *, n5_location: str | None = None,
                 bdv_setups: dict[int, Any] | None = None,
                 activity: Activity | None = None, compare_documents: bool = True) -> None:  # fmt: skip
        """``store``: the container's plain store (:func:`~napari_n5zarr.access.base_store`);
        the tree reads it through the N5 wrappers (:func:`~napari_n5zarr.access.wrap`).
        ``compare_documents``: also read the zarr.json beside an attributes.json, to flag a
        contradiction (:attr:`Node.warning`); the reader, which uses attributes.json either
        way, does not ask (one request less per node over a network)."""
        from napari_n5zarr.n5.stores import ImplicitGroupStore, N5DefaultStore
        from napari_n5zarr.storage.local import SafeLocalStore

        self.location = location
        self.activity = activity
        """Names each wait while it runs (see :func:`report_waits`); None: not tracked."""
        """What the user gave (folder, .zip, .xml or URL)."""
        self.n5_location = n5_location or location
        """The container the nodes live in (a BigDataViewer XML's N5 folder)."""
        self.bdv_setups = bdv_setups
        self.compare_documents = compare_documents
        self._base = store
        self._n5 = N5DefaultStore(store)
        self.store = ImplicitGroupStore(self._n5)
        """The store chain every name and array is read through (:func:`napari_n5zarr.access.wrap`)."""
        root = (
            self.n5_location.rstrip("/")
            if is_url(self.n5_location)
            else self.n5_location.rstrip(os.sep)
        )
        self._root_text = root or os.sep
        self._local = isinstance(store, SafeLocalStore)
        self._lock = threading.RLock()
        self._names: dict[str, list[str]] = {}
        self._nodes: dict[str, Node | None] = {}
        self._children: dict[str, list[Node]] = {}
        self._pyramids: dict[str, GroupPyramids] = {}
        self._outer_table: str | None = None
        self.root_fault: BaseException | None = None
        """Why the root is unreadable (kind "error"): see :meth:`raise_for_root`."""
        self.root = self._make_nodes([""], {})[0] or self._not_found()
        if (
            self.root.kind == "group"
            and not self.root.n5
            and not self.root.zarr
            and not self._names_or_error("")
        ):
            self.root = self._not_found()
        if self.root.kind == "group":
            self.root.name = Path(self.n5_location.rstrip("/")).name
            self._classify(self.root)

    @property
    def base_store(self) -> Store:
        """The container's plain store, as given (no N5 wrappers)."""
        return self._base

    def _not_found(self) -> Node:
        message = f"no N5 or Zarr node at {self.location}"
        self.root_fault = NodeNotFoundError(message)
        return Node("", "", "error", error=message)

    def raise_for_root(self) -> None:
        """Raise why the root cannot be read, in one line naming the place, if it cannot:
        :class:`NodeNotFoundError` (nothing there), :class:`N5StoreError` (a remote fault, a
        refused connection, a permission) or :class:`N5FormatError` (invalid metadata)."""
        if self.root.kind != "error":
            return
        text = " ".join(str(self.root.error).split())
        if isinstance(self.root_fault, FileNotFoundError):
            raise NodeNotFoundError(text)
        if isinstance(self.root_fault, OSError):
            raise N5StoreError(text)
        raise N5FormatError(text)

    # -- listing -------------------------------------------------------------------
    def _where(self, key: str) -> str:
        """The path or URL of ``key`` (for messages)."""
        if self._local:
            return f"{self._root_text}{os.sep}{key}" if key else self._root_text
        return join(self._root_text, key)

    @contextmanager
    def _waiting(self, what: Callable[[], str]) -> Iterator[None]:
        if self.activity is None:
            yield
            return
        with self.activity.doing(what()):
            yield

    def _names_or_error(self, path: str) -> list[str]:
        try:
            return self.names(path)
        except Exception:
            return []

    def names(self, path: str) -> list[str]:
        """Names of the candidate children of the group at ``path``, naturally sorted."""
        with self._lock:
            if path in self._names:
                return self._names[path]
        from napari_n5zarr.n5.stores import list_names

        with self._waiting(lambda: f"the listing of {self._where(path)}/"):
            found = list_names(self.store, path)
        names = sorted(
            (n for n in found if n not in (N5_JSON, ZARR_JSON) and not n.startswith(".")),
            key=natural_key,
        )
        with self._lock:
            self._names[path] = names
        return names

    def iter_children(self, node: Node, page_size: int = PAGE_SIZE) -> Iterator[list[Node]]:
        """The children of ``node``, one page at a time as they are read (all of them: no
        cap). A listing failure yields one error node in place of the children."""
        with self._lock:
            done = self._children.get(node.path)
        if done is not None:
            yield done
            return
        if not node.has_children:
            return
        try:
            names = self.names(node.path)
        except Exception as exc:
            where, text = self._where(node.path), str(exc)
            yield [
                Node(
                    "…",
                    _join(node.path, "…"),
                    "error",
                    error=text
                    if f"cannot list {where}" in text
                    else f"cannot list {where}: {text}",
                )
            ]
            return
        collected: list[Node] = []
        size = min(FIRST_PAGE, page_size)
        i = 0
        while i < len(names):
            batch = names[i : i + size]
            i += size
            size = page_size
            page = [
                n
                for n in self._make_nodes([_join(node.path, b) for b in batch], node.inherited)
                if n is not None
            ]
            for child in page:
                if child.kind == "group":
                    self._classify(child)
            collected.extend(page)
            if page:
                yield page
        with self._lock:
            self._children[node.path] = collected

    def children(self, node: Node) -> list[Node]:
        """All children of ``node`` (see :meth:`iter_children`)."""
        return [c for page in self.iter_children(node) for c in page]

    def walk(
        self, node: Node | None = None, max_depth: int | None = None
    ) -> Iterator[tuple[int, Node]]:
        """``(depth, node)`` depth first, streamed as found (the root at depth 0)."""
        top = self.root if node is None else node
        yield 0, top
        if max_depth is not None and max_depth <= 0:
            return
        for page in self.iter_children(top):
            for child in page:
                for depth, n in self.walk(child, None if max_depth is None else max_depth - 1):
                    yield depth + 1, n

    def find(self, path: str) -> Node:
        """The node at ``path`` (listing its ancestors as needed); KeyError if none."""
        path = path.strip("/")
        node = self.root
        for part in [p for p in path.split("/") if p]:
            match = next((c for c in self.children(node) if c.name == part), None)
            if match is None:
                raise KeyError(f"no node {path!r} in {self.location}")
            node = match
        return node

    # -- reading one page of nodes --------------------------------------------------
    def _make_nodes(self, paths: Sequence[str], inherited: dict[str, Any]) -> list[Node | None]:
        with self._lock:
            cached = {p: self._nodes[p] for p in paths if p in self._nodes}
        todo = [p for p in paths if p not in cached]
        if todo:
            with self._waiting(lambda: self._what_metadata(todo)):
                n5, zj, views = self._documents(todo)
            for p, a, z, v in zip(todo, n5, zj, views, strict=True):
                try:
                    node = self._node(p, a, z, v, inherited)
                except Exception as exc:  # one node's problem, never its siblings'
                    node = Node(
                        p.rsplit("/", 1)[-1], p, "error", error=spatial.describe_error(p, exc)
                    )
                    self.root_fault = exc if not p else self.root_fault
                with self._lock:
                    self._nodes[p] = node
                cached[p] = node
        return [cached[p] for p in paths]

    def _what_metadata(self, paths: Sequence[str]) -> str:
        if len(paths) == 1:
            return f"the metadata of {self._where(paths[0])}"
        parent = paths[0].rsplit("/", 1)[0] if "/" in paths[0] else ""
        return f"the metadata of {len(paths)} nodes in {self._where(parent)}"

    def _documents(self, paths: Sequence[str]) -> tuple[list[Any], list[Any], list[Any]]:
        """For each path: its attributes.json and its zarr.json as stored (bytes, None: nothing
        there, or the exception in place), and the Zarr v3 document the chain makes of the node:
        attributes.json translated by the N5 store (read once: the store is handed the bytes),
        else, where neither document is there, the chain's answer (an implicit group, or None)."""
        from napari_n5zarr.n5.stores import get_many

        n5 = get_many(self._base, [_join(p, N5_JSON) for p in paths])
        ask = [i for i, a in enumerate(n5) if self.compare_documents or not isinstance(a, bytes)]
        stored: list[Any] = [None] * len(paths)
        for i, raw in zip(
            ask, get_many(self._base, [_join(paths[i], ZARR_JSON) for i in ask]), strict=True
        ):
            stored[i] = raw
        docs: list[Any] = [None] * len(paths)
        for i, (p, a) in enumerate(zip(paths, n5, strict=True)):
            if isinstance(a, bytes):
                try:
                    docs[i] = self._n5.translation(f"{p}/" if p else "", a)
                except Exception as exc:  # this node's problem (named where it is shown)
                    docs[i] = exc
        ask = [
            i for i, (a, z) in enumerate(zip(n5, stored, strict=True)) if a is None and z is None
        ]
        for i, view in zip(
            ask, get_many(self.store, [_join(paths[i], ZARR_JSON) for i in ask]), strict=True
        ):
            docs[i] = view
        return n5, stored, docs

    def _node(
        self, path: str, n5_raw: Any, zarr_raw: Any, view: Any, inherited: dict[str, Any]
    ) -> Node | None:
        name = path.rsplit("/", 1)[-1]
        node = Node(
            name, path, "group", n5=isinstance(n5_raw, bytes), zarr=isinstance(zarr_raw, bytes)
        )
        attrs: Any = {}
        try:
            if isinstance(n5_raw, BaseException):
                raise n5_raw
            if n5_raw is not None:
                node.raw = n5_raw
                if isinstance(view, BaseException):
                    raise view
                doc = view  # the store's translation
                attrs = json.loads(
                    n5_raw
                )  # the document the store just parsed, checked and translated
                fill_from_n5(node, attrs, doc)
                if isinstance(
                    zarr_raw, bytes
                ):  # a dual folder: attributes.json wins, a contradiction is flagged
                    node.warning = documents_disagree(doc, zarr_raw)
            elif isinstance(zarr_raw, BaseException):
                raise zarr_raw
            elif zarr_raw is not None:
                node.raw = zarr_raw
                doc = parse_metadata(zarr_raw)
                fill_from_zarr(node, doc)
                attrs = dict(doc.get("attributes") or {})
            elif isinstance(view, BaseException):
                raise view
            elif view is None:
                return None  # nothing there, or a stray file: not a node
            # else an implicit group (N5 groups need no attributes.json): the store decides
        except Exception as exc:
            node.kind = "error"
            failed = (
                N5_JSON if node.n5 or isinstance(n5_raw, BaseException) else ZARR_JSON
            )  # the file that failed
            node.error = error_text(exc, self._where(_join(path, failed)), path)
            self.root_fault = exc if not path else self.root_fault
            return node
        if not path:
            self._outer_table = None if node.kind == "error" else outer_paintera_table(self._base)
        if not path and node.n5 and not inherited and not self._is_container_root(attrs):
            inherited = outer_attrs(
                self._base
            )  # a node inside a container: what its ancestors give it
            # (as the reader sees it): ``info pyr.n5/s1`` shows the voxel size ``tree pyr.n5`` shows for s1
        own = {k: attrs[k] for k in INHERITABLE if k in attrs} if attrs else {}
        node.inherited = {**inherited, **own} if own else inherited  # shared when nothing is added
        if node.kind == "array":
            calibrate_array(node, inherited, attrs)
            table = self._paintera_table(path)
            if table:
                node.reason = f"Paintera lookup table ({table}), not an image"
                node.lookup_table = True
        return node

    def _is_container_root(self, attrs: dict[str, Any]) -> bool:
        return VERSION_KEY in attrs or self.n5_location.rstrip("/").lower().endswith(".n5")

    # -- pyramids: the convention table, driven once per group (read/group_pyramids) ----
    def nodes_in(self, group: Node, names: Sequence[str]) -> list[Node | None]:
        """The children ``names`` of ``group`` (None: nothing there), read once per tree."""
        return self._make_nodes([_join(group.path, n) for n in names], group.inherited)

    def child(self, group: Node, rel: str) -> Node | None:
        """The node at ``rel`` below ``group`` (its ancestors read, not listed), or None."""
        node: Node | None = group
        for part in [p for p in rel.split("/") if p]:
            if node is None or node.kind not in ("group", "pyramid"):
                return None
            node = self.nodes_in(node, [part])[0]
        return node

    def node_at(self, path: str) -> Node:
        """The node at ``path`` from the root, without listing its ancestors; KeyError if none."""
        found = self.child(self.root, path)
        if found is None:
            raise KeyError(f"no node {path.strip('/') or '/'} in {self.location}")
        if found.kind == "group":
            self._classify(found)
        return found

    def pyramids_at(self, group: Node) -> GroupPyramids:
        """What the convention table makes of ``group`` (worked out once per tree)."""
        with self._lock:
            known = self._pyramids.get(group.path)
        if known is None:
            known = group_pyramids(self, group)
            with self._lock:
                self._pyramids[group.path] = known
        return known

    def finished(self, group: Node, found: Recognised, name: str, prefix: str = "") -> Multiscale:
        """A pyramid ``found`` in ``group`` as the reader opens it: named ``name``, its paths
        under ``prefix`` (:func:`~napari_n5zarr.spatial.conventions.finish`), a BigDataViewer
        setup with its XML's voxel size."""
        ms = finish(found.pyramid, name, _join(prefix, found.at))
        return with_bdv_setups(ms, self.bdv_setups, _join(group.path, found.at))

    def multiscale(
        self, node: Node, name: str | None = None, prefix: str = ""
    ) -> Multiscale | None:
        """The pyramid the reader opens at an array or pyramid node (named ``name``, default
        its stored name or the node's; paths under ``prefix``); a Paintera lookup table is
        described, never shown (``unreadable``). None for anything else."""
        label = node.name if name is None else name
        if node.kind == "array":
            ms = dataset_pyramid(array_info(node), "", name=node.name, inherited=node.inherited)
            found = finish(ms, label, prefix) if ms is not None else None
        elif node.kind in ("group", "pyramid") and (own := self.pyramids_at(node).own) is not None:
            found = self.finished(
                node, own, (not prefix and stored_name(node.attributes)) or label, prefix
            )
        else:
            return None
        return (
            replace(found, unreadable=node.reason)
            if found is not None and node.lookup_table and node.reason
            else found
        )

    def _classify(self, group: Node) -> None:
        """Make ``group`` a pyramid node (its row) if the reader opens it as one multiscale image."""
        own = self.pyramids_at(group).own
        if own is None or not own.pyramid.paths:
            return
        group.kind = "pyramid"
        ms = self.multiscale(group)
        assert ms is not None  # a pyramid node with its own pyramid
        group.convention = ms.convention
        group.levels = tuple(_join(group.path, p) for p in ms.paths)
        group.timepoints = len(ms.time_paths)
        group.dtype = ms.dtype
        group.shape = tuple(ms.shapes[0])[::-1] if ms.shapes else ()
        group.scale, group.translate = tuple(ms.scale)[::-1], tuple(ms.translate)[::-1]
        group.units, group.axes = tuple(ms.units)[::-1], tuple(ms.axes)[::-1]
        first = self.child(group, (ms.time_paths[0] if ms.time_paths else ms.paths)[0])
        if first is not None:
            group.blocks, group.compression = first.blocks, first.compression
            if first.kind == "error":
                group.reason = f"level {ms.paths[0]} is unreadable: {first.error}"
        if ms.ndim < 2:
            group.reason = f"{ms.ndim}-D data cannot be shown as an image"
        if ms.label_multiset:
            group.encoding = "label multisets"
        table = (
            self._outer_table
            if not group.path
            else (
                group.name
                if group.name in PAINTERA_BOOKKEEPING and self._paintera_parent(group)
                else None
            )
        )
        if table:
            group.reason = f"Paintera lookup table ({table}), not an image"
            group.lookup_table = True
        paintera = group.attributes.get("painteraData")
        if isinstance(paintera, dict) and ms.paths[0].startswith("data/"):
            self._paintera_row(group, paintera)

    def _paintera_row(self, group: Node, paintera: dict[str, Any]) -> None:
        """A Paintera group's row: which Paintera type (its kind), ``maxId`` and the
        bookkeeping datasets (never layers of their own) in its facts."""
        kind = paintera.get("type")
        group.convention = (
            f"paintera-{kind}" if kind in ("label", "raw", "channel") else "paintera-raw"
        )
        facts = []
        if "maxId" in group.attributes:
            facts.append(("maxId", str(group.attributes["maxId"])))
        kept = [n for n in PAINTERA_BOOKKEEPING if n in self._names_or_error(group.path)]
        if kept:
            facts.append(("bookkeeping", ", ".join(kept) + " (not layers)"))
        group.facts = tuple(facts)

    def _paintera_table(self, path: str) -> str | None:
        """The Paintera bookkeeping dataset ``path`` is or lies in (``unique-labels/s0``), if any."""
        parts = path.split("/")
        for i, part in enumerate(parts[1:], start=1):
            if part not in PAINTERA_BOOKKEEPING:
                continue
            parent = self._nodes.get("/".join(parts[:i]))
            if parent is not None and "painteraData" in parent.attributes:
                return part
        return (
            self._outer_table if "/" not in path else None
        )  # the root opened is the table (or its group's level)

    def _paintera_parent(self, node: Node) -> bool:
        """The node sits in a Paintera group (``painteraData``), whose bookkeeping the reader skips."""
        parent = self._nodes.get(node.path.rsplit("/", 1)[0] if "/" in node.path else "")
        return parent is not None and "painteraData" in parent.attributes

    # -- arrays: opened for the levels chosen only, from the documents read ----------
    def array(self, node: Node) -> zarr.Array:
        """The zarr array of an array node, built from its document as read (not read again)."""
        from napari_n5zarr.access import array_from_document
        from napari_n5zarr.n5.codec import ensure_codecs_registered

        ensure_codecs_registered()
        if node.kind != "array":
            raise ValueError(
                f"{node.path or '/'} is not an array" + (f": {node.error}" if node.error else "")
            )
        return array_from_document(self.store, self._document(node), node.path)

    def _document(self, node: Node) -> dict[str, Any]:
        """The node's Zarr v3 document from the bytes read: the N5 store's translation of its
        attributes.json (kept by the store, which learns the array's block grid from it), its
        zarr.json, or an implicit group's."""
        if node.n5:
            return self._n5.translation(f"{node.path}/" if node.path else "", node.raw)
        return (
            parse_metadata(node.raw)
            if node.raw
            else {"zarr_format": 3, "node_type": "group", "attributes": {}}
        )

    def arrays(self, paths: Sequence[str]) -> list[zarr.Array]:
        """The arrays at ``paths`` (from the root), their documents read at most once."""
        return [self.array(self.node_at(p)) for p in paths]

    def zarr_group(self, node: Node) -> zarr.Group:
        """The zarr group of a group or pyramid node (what it holds is read as asked)."""
        import zarr
        from zarr.storage import StorePath

        if node.kind not in ("group", "pyramid"):
            raise ValueError(f"{node.path or '/'} is not a group")
        return zarr.Group(
            zarr.AsyncGroup.from_dict(StorePath(self.store, node.path), dict(self._document(node)))
        )  # (it pops keys)

    def block_count(self, node: Node, limit: int = 1_000_000) -> tuple[int, int, bool]:
        """(blocks on disk, blocks expected, counting stopped at ``limit``) for an array, or
        level 0 of a pyramid."""
        target = (
            self.child(self.root, node.levels[0])
            if node.kind == "pyramid" and node.levels
            else node
        )
        if target is None or target.kind != "array":
            raise ValueError(f"{node.path or '/'} is not a dataset")
        shape, blocks = target.shape, target.blocks
        expected = (
            math.prod(math.ceil(s / b) for s, b in zip(shape, blocks, strict=True)) if shape else 0
        )

        def is_block(key: str) -> bool:
            base = key.rsplit("/", 1)[-1]
            return base not in (N5_JSON, ZARR_JSON) and not base.startswith(".")

        from napari_n5zarr.n5.stores import count_keys

        count, stopped = count_keys(self._base, target.path, is_block, limit)
        return count, expected, stopped

    def thumbnail(
        self, node: Node, size: int = 256, crop: int = 1024, max_decode: int = 256 * 2**20
    ) -> np.ndarray:
        """A uint8 2D image (y, x) of an array or pyramid node: see
        :func:`napari_n5zarr.read.thumbnail.thumbnail` (the coarsest level; a BigDataViewer
        setup's middle time point)."""
        from napari_n5zarr.read.thumbnail import thumbnail

        if not node.openable:
            raise ValueError(
                f"{node.path or '/'} cannot be shown: {node.problem or 'not a dataset'}"
            )
        path = node.levels[-1] if node.kind == "pyramid" and node.levels else node.path
        if node.kind == "pyramid" and node.timepoints > 1:
            ms = self.multiscale(node)
            if ms is not None and ms.time_paths:
                path = _join(node.path, ms.time_paths[len(ms.time_paths) // 2][-1])
        return thumbnail(
            self.array(self.node_at(path)), size=size, crop=crop, max_decode=max_decode
        )


_SETUP_NAME = re.compile(r"(?:^|/)setup(\d+)$")


def with_bdv_setups(
    ms: Multiscale, setups: Mapping[int, spatial.BdvSetup] | None, path: str
) -> Multiscale:
    """``ms`` with the voxel size of its BigDataViewer setup (``setupN``, from ``path``) when
    ``setups`` (a BigDataViewer XML's) describe it; else ``ms``."""
    if not setups or ms.convention != "bdv":
        return ms
    match = _SETUP_NAME.search(path)
    setup = setups.get(int(match.group(1))) if match else None
    return spatial.with_bdv_setup(ms, setup) if setup is not None else ms


def tree_at(node: zarr.Array | zarr.Group) -> tuple[Tree, Node]:
    """The tree of an open zarr node's store (read through the N5 wrappers) and the node in it."""
    from napari_n5zarr.n5.stores import (
        ImplicitGroupStore,
        N5DefaultStore,
        store_chain,
        store_location,
    )

    base = next(
        s for s in store_chain(node.store) if not isinstance(s, ImplicitGroupStore | N5DefaultStore)
    )
    tree = Tree(store_location(base, "").rstrip("/") or "/", base)
    tree.raise_for_root()
    return tree, tree.node_at(node.path)


# ---------------------------------------------------------------------------
# opening a location
# ---------------------------------------------------------------------------


def tree_of(source: Source, storage_options: dict[str, Any] | None = None) -> Tree:
    """The reader's tree at a resolved location (:func:`~napari_n5zarr.read.locate.resolve`):
    its target, with its BigDataViewer XML's setups; zarr.json read only where no
    attributes.json is. Its root is an error node when nothing readable is there
    (:meth:`Tree.raise_for_root`)."""
    from napari_n5zarr.access import base_store

    target = source.target.rstrip("/") if is_url(source.target) else source.target
    return Tree(
        target,
        base_store(target, "r", storage_options),
        bdv_setups=source.bdv_setups,
        compare_documents=False,
    )


def open_tree(
    location: str | os.PathLike[str],
    storage_options: dict[str, Any] | None = None,
    activity: Activity | None = None,
) -> Tree:
    """The tree at a folder, ``.zip``, BigDataViewer ``.xml`` or URL (``s3://``, ``http(s)://``);
    ``activity`` names its waits (see :func:`report_waits`).

    Raises FileNotFoundError when nothing is there (the root itself unreadable is an
    error node, not an exception)."""
    from napari_n5zarr.access import base_store

    text = os.fspath(location).strip()
    if is_url(text):
        return Tree(text.rstrip("/"), base_store(text, "r", storage_options), activity=activity)
    path = Path(node_location(text))
    if path.suffix.lower() == ".xml":
        source = require(path)  # one line for a missing or foreign XML, or a missing folder
        return Tree(str(path), base_store(source.target, "r"), n5_location=source.target, bdv_setups=source.bdv_setups,
                    activity=activity)  # fmt: skip
    if path.suffix.lower() == ".zip":
        return Tree(str(path), base_store(path, "r"), activity=activity)
    if not path.exists():
        raise NodeNotFoundError(f"no such N5/Zarr container: {path}")
    if not path.is_dir():
        raise NodeNotFoundError(f"not a folder, .zip or BigDataViewer .xml: {path}")
    return Tree(str(path), base_store(path, "r"), activity=activity)
