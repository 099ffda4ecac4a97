"""THE hierarchy walker: a container's nodes, listed lazily, with errors reported in place.

Pure Python (no Qt, no napari). One model behind three faces: the browser widget,
``n5zarr tree`` and ``n5zarr info``. Metadata only, never blocks (except on request:
:meth:`Tree.block_count`, :meth:`Tree.thumbnail`).

* Lazy: :meth:`Tree.iter_children` lists one group, page by page, as it reads; nothing
  is read before it is asked for and there is no node cap.
* Errors in place: a node whose metadata cannot be read (bad JSON, a codec parameter out of
  range, a FIFO instead of a file, ...) becomes a ``kind == "error"`` node naming the file;
  its siblings are listed as usual.
* Pyramids: a group that the reader opens as one multiscale image (N5 Viewer, COSEM,
  OME-NGFF, BigDataViewer setup, neuroglancer/tensorstore) is one ``kind == "pyramid"``
  node, found with the pyramid functions of :mod:`napari_n5zarr.spatial`.
* Says what it waits for: with an :class:`Activity`, each listing and metadata read is
  named while it runs, and :func:`report_waits` reports one that takes longer than a second
  or two (``n5zarr tree`` of a slow server prints ``waiting for the listing of URL ...`` on
  stderr while its output streams on stdout).
* Row fields are in napari order (z, y, x): shape with axis names, dtype, voxel size and
  units, uncompressed size, block size, N5 compression name and level.

* One reader: names and metadata come through the library's store chain
  (:func:`napari_n5zarr.access.wrap` over :func:`~napari_n5zarr.access.base_store`), which
  decides implicit groups, translates attributes.json and refuses FIFOs and oversized
  documents, for local folders, zips and URLs alike. A local folder answers synchronously
  (:func:`napari_n5zarr.n5.stores.get_many`); other stores get one page's reads at once.

The parts live beside it in :mod:`napari_n5zarr.read`: ``node`` (the node model and its
display text), ``node_metadata`` (metadata documents -> node fields), ``thumbnail``; this
module pages, groups pyramids and opens a location.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from napari_n5zarr import spatial
from napari_n5zarr.errors import N5FormatError, N5StoreError, NodeNotFoundError
from napari_n5zarr.n5.constants import N5_JSON, VERSION_KEY, ZARR_JSON
from napari_n5zarr.n5.stores import count_keys, get_many, list_names
from napari_n5zarr.read.locate import require
from napari_n5zarr.read.multiscale import with_bdv_setups
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
from napari_n5zarr.spatial.conventions import (
    BDV_TIMEPOINTS,
    PAINTERA,
    PAINTERA_BOOKKEEPING,
    PYRAMIDS,
    Convention,
)
from napari_n5zarr.spatial.model import INHERITABLE, Listing, level_number, natural_key
from napari_n5zarr.spatial.model import join_path as _join
from napari_n5zarr.storage.location import is_url, join, node_location

if TYPE_CHECKING:
    import numpy as np
    import zarr
    from zarr.abc.store import Store

PAGE_SIZE = 500
"""Nodes per page of :meth:`Tree.iter_children` (the first page is smaller)."""
FIRST_PAGE = 100

TREE_CONVENTIONS = (*(c for c in PYRAMIDS if c is not PAINTERA), BDV_TIMEPOINTS)
"""What makes a group one pyramid row, in spatial's order (the reader's): Paintera groups are
classified with their ``data/`` pyramid (:meth:`Tree._classify_paintera`); a BigDataViewer
root is a group whose setups are the rows."""


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
def report_waits(activity: Activity, report: Callable[[str], None], after: float = 1.5, every: float = 10.0) -> Iterator[None]:
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
                 bdv_setups: dict[int, Any] | None = None, storage_options: dict[str, Any] | None = None,
                 activity: Activity | None = None) -> None:  # fmt: skip
        """``store``: the container's plain store (:func:`~napari_n5zarr.access.base_store`);
        the tree reads it through the N5 wrappers (:func:`~napari_n5zarr.access.wrap`)."""
        from napari_n5zarr.access import wrap
        from napari_n5zarr.storage.local import SafeLocalStore

        self.location = location
        self.activity = activity
        """Names each wait while it runs (see :func:`report_waits`); None: not tracked."""
        """What the user gave (folder, .zip, .xml or URL)."""
        self.n5_location = n5_location or location
        """The container the nodes live in (a BigDataViewer XML's N5 folder)."""
        self.bdv_setups = bdv_setups
        self.storage_options = storage_options
        self._base = store
        self.store = wrap(store)
        """The store chain every name and document is read through."""
        root = self.n5_location.rstrip("/") if is_url(self.n5_location) else self.n5_location.rstrip(os.sep)
        self._root_text = root or os.sep
        self._local = isinstance(store, SafeLocalStore)
        self._lock = threading.RLock()
        self._names: dict[str, list[str]] = {}
        self._nodes: dict[str, Node | None] = {}
        self._children: dict[str, list[Node]] = {}
        self._zarr_root: Any = None
        self.root_fault: BaseException | None = None
        """Why the root is unreadable (kind "error"): see :meth:`raise_for_root`."""
        self.root = self._make_nodes([""], {})[0] or self._not_found()
        if self.root.kind == "group" and not self.root.n5 and not self.root.zarr and not self._names_or_error(""):
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
        with self._waiting(lambda: f"the listing of {self._where(path)}/"):
            found = list_names(self.store, path)
        names = sorted((n for n in found if n not in (N5_JSON, ZARR_JSON) and not n.startswith(".")), key=natural_key)
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
            yield [Node("…", _join(node.path, "…"), "error", error=text if f"cannot list {where}" in text else f"cannot list {where}: {text}")]
            return
        collected: list[Node] = []
        size = min(FIRST_PAGE, page_size)
        i = 0
        while i < len(names):
            batch = names[i : i + size]
            i += size
            size = page_size
            page = [n for n in self._make_nodes([_join(node.path, b) for b in batch], node.inherited) if n is not None]
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

    def walk(self, node: Node | None = None, max_depth: int | None = None) -> Iterator[tuple[int, Node]]:
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
                    node = Node(p.rsplit("/", 1)[-1], p, "error", error=spatial.describe_error(p, exc))
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
        """For each path: its attributes.json as stored, its zarr.json as stored (a dual
        folder's, compared; the base store: the chain shows attributes.json in its place) and
        the zarr.json the chain answers where it decides (translated from attributes.json, or
        an implicit group's); bytes, None (nothing there) or the exception in place."""
        n5 = get_many(self.store, [_join(p, N5_JSON) for p in paths])
        stored = get_many(self._base, [_join(p, ZARR_JSON) for p in paths])
        ask = [i for i, (a, z) in enumerate(zip(n5, stored, strict=True)) if isinstance(a, bytes) or (a is None and z is None)]
        views: list[Any] = [z if a is None else None for a, z in zip(n5, stored, strict=True)]
        for i, view in zip(ask, get_many(self.store, [_join(paths[i], ZARR_JSON) for i in ask]), strict=True):
            views[i] = view
        return n5, stored, views

    def _node(self, path: str, n5_raw: Any, zarr_raw: Any, view: Any, inherited: dict[str, Any]) -> Node | None:
        name = path.rsplit("/", 1)[-1]
        node = Node(name, path, "group", n5=isinstance(n5_raw, bytes), zarr=isinstance(zarr_raw, bytes))
        attrs: Any = {}
        try:
            if isinstance(n5_raw, BaseException):
                raise n5_raw
            if n5_raw is not None:
                node.raw = n5_raw
                if isinstance(view, BaseException):
                    raise view
                doc = json.loads(view)  # the store's translation
                attrs = json.loads(n5_raw)  # the document the store just parsed, checked and translated
                fill_from_n5(node, attrs, doc)
                if isinstance(zarr_raw, bytes):  # a dual folder: attributes.json wins, a contradiction is flagged
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
            failed = N5_JSON if node.n5 or isinstance(n5_raw, BaseException) else ZARR_JSON  # the file that failed
            node.error = error_text(exc, self._where(_join(path, failed)), path)
            self.root_fault = exc if not path else self.root_fault
            return node
        if not path and node.n5 and not inherited and not self._is_container_root(attrs):
            inherited = self._outer_attrs()  # a node inside a container: what its ancestors give it
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

    def _outer_attrs(self) -> dict[str, Any]:
        """Inheritable attributes of the N5 groups above the root (as the reader's detection
        reads them): ``info pyr.n5/s1`` shows the voxel size ``tree pyr.n5`` shows for s1."""
        from napari_n5zarr.read.pyramid_walk import outer_attrs

        return outer_attrs(self._base)

    # -- pyramids ------------------------------------------------------------------
    def _child(self, group: Node, rel: str) -> Node | None:
        parts = [p for p in rel.split("/") if p]
        node: Node | None = group
        for part in parts:
            if node is None or node.kind not in ("group", "pyramid"):
                return None
            path = _join(node.path, part)
            node = self._make_nodes([path], node.inherited)[0]
        return node

    def _arrays(self, group: Node, names: Sequence[str]) -> dict[str, spatial.ArrayInfo]:
        found = self._make_nodes([_join(group.path, n) for n in names], group.inherited)
        return {n: array_info(c) for n, c in zip(names, found, strict=True) if c is not None and c.kind == "array"}

    def _classify(self, group: Node) -> None:
        """Make ``group`` a pyramid node if the reader would open it as one multiscale image."""
        if "painteraData" in group.attributes and self._classify_paintera(group):
            return
        try:
            ms = self._multiscale_of(group)
        except Exception:  # not a pyramid after all; its children show the problem
            return
        if ms is None or not ms.paths:
            return
        group.kind = "pyramid"
        group.convention = ms.convention
        group.levels = tuple(_join(group.path, p) for p in ms.paths)
        group.timepoints = len(ms.time_paths)
        group.dtype = ms.dtype
        shape = tuple(ms.shapes[0]) if ms.shapes else ()
        group.shape = shape[::-1]
        group.scale, group.translate = tuple(ms.scale)[::-1], tuple(ms.translate)[::-1]
        group.units, group.axes = tuple(ms.units)[::-1], tuple(ms.axes)[::-1]
        first = self._child(group, ms.paths[0])
        if first is not None:
            group.blocks, group.compression = first.blocks, first.compression
            if first.kind == "error":
                group.reason = f"level {ms.paths[0]} is unreadable: {first.error}"
        if len(ms.scale) < 2:
            group.reason = f"{len(ms.scale)}-D data cannot be shown as an image"
        if ms.label_multiset:
            group.encoding = "label multisets"
        if group.name in PAINTERA_BOOKKEEPING and self._paintera_parent(group):
            group.reason = f"Paintera lookup table ({group.name}), not an image"
            group.lookup_table = True

    def _classify_paintera(self, group: Node) -> bool:
        """A Paintera group (``painteraData``) is one row, as the reader opens it: its pyramid
        is ``data/``; its kind says which Paintera type and how the blocks are stored; its
        facts list ``maxId`` and the bookkeeping datasets (never layers of their own)."""
        data = self._child(group, "data")
        if data is None or data.kind not in ("group", "pyramid"):
            return False
        self._classify(data)
        if data.kind != "pyramid":
            return False
        paintera = group.attributes.get("painteraData")
        kind = paintera.get("type") if isinstance(paintera, dict) else None
        group.kind = "pyramid"
        group.convention = f"paintera-{kind}" if kind in ("label", "raw", "channel") else "paintera-raw"
        for name in ("levels", "timepoints", "dtype", "shape", "scale", "translate", "units", "axes",
                     "blocks", "compression", "encoding", "reason"):  # fmt: skip
            setattr(group, name, getattr(data, name))
        try:  # Paintera's own reading of data/'s resolution: its unit (nm unless said), never 0
            ms = self._multiscale_of(group, (PAINTERA,))
        except Exception:
            ms = None
        if ms is not None:
            group.scale, group.translate, group.units = tuple(ms.scale)[::-1], tuple(ms.translate)[::-1], tuple(ms.units)[::-1]
        facts = []
        if "maxId" in group.attributes:
            facts.append(("maxId", str(group.attributes["maxId"])))
        kept = [n for n in PAINTERA_BOOKKEEPING if n in self.names(group.path)]
        if kept:
            facts.append(("bookkeeping", ", ".join(kept) + " (not layers)"))
        group.facts = tuple(facts)
        return True

    def _paintera_table(self, path: str) -> str | None:
        """The Paintera bookkeeping dataset ``path`` is or lies in (``unique-labels/s0``), if any."""
        parts = path.split("/")
        for i, part in enumerate(parts[1:], start=1):
            if part not in PAINTERA_BOOKKEEPING:
                continue
            parent = self._nodes.get("/".join(parts[:i]))
            if parent is not None and "painteraData" in parent.attributes:
                return part
        return None

    def _paintera_parent(self, node: Node) -> bool:
        """The node sits in a Paintera group (``painteraData``), whose bookkeeping the reader skips."""
        parent = self._nodes.get(node.path.rsplit("/", 1)[0] if "/" in node.path else "")
        return parent is not None and "painteraData" in parent.attributes

    def _multiscale_of(self, group: Node, conventions: Sequence[Convention] = TREE_CONVENTIONS) -> spatial.Multiscale | None:
        """The pyramid the reader would open ``group`` as, by spatial's convention table
        (:data:`TREE_CONVENTIONS`, in its order: the first that builds one wins), reading
        what each convention asks for through the tree's own nodes."""
        listing = Listing()
        self._list_into(listing, "", group)
        tried: set[str] = set()
        for convention in conventions:
            if not convention.matches(listing):
                continue
            while todo := [p for p in convention.reads(listing) if p not in tried]:
                for path in todo:
                    tried.add(path)
                    child = self._child(group, path)
                    if child is not None and child.kind == "array":
                        listing.arrays[path] = array_info(child)
                    elif child is not None and child.kind in ("group", "pyramid"):
                        self._list_into(listing, path, child)
            found = [r.pyramid for r in convention.build(listing, group.inherited) if r.at == ""]
            if found:
                ms = found[0]
                return with_bdv_setups(ms, self.bdv_setups, group.path) if convention is BDV_TIMEPOINTS else ms
        return None

    def _list_into(self, listing: Listing, path: str, group: Node) -> None:
        """Record ``group`` (at ``path`` in ``listing``): its attributes, its children's names,
        and the facts of its level-named children (``s0``, ``s1``, ...)."""
        names = self.names(group.path)
        arrays = self._arrays(group, [n for n in names if level_number(n) is not None])
        listing.add(path, dict(group.attributes), arrays, [n for n in names if n not in arrays])

    # -- details (on request) ------------------------------------------------------
    def zarr_root(self) -> zarr.Array | zarr.Group:
        """The root opened with :func:`napari_n5zarr.open` (cached)."""
        with self._lock:
            if self._zarr_root is None:
                from napari_n5zarr.access import open as open_node

                self._zarr_root = open_node(self.n5_location, storage_options=self.storage_options)
            return self._zarr_root

    def zarr_node(self, node: Node) -> zarr.Array | zarr.Group:
        root: Any = self.zarr_root()  # a group whenever node.path is set
        return root if not node.path else root[node.path]

    def multiscale(self, node: Node) -> spatial.Multiscale | None:
        """What the reader's detection makes of an array or pyramid node (scale, translate,
        units in N5 order; BigDataViewer XML voxel sizes applied)."""
        if not node.openable:
            return None
        from napari_n5zarr.read.pyramid_walk import detect

        found = detect(self.zarr_node(node), node.name, max_depth=0, on_error=lambda p, e: None)
        if not found:
            return None
        return with_bdv_setups(found[0], self.bdv_setups, node.path)

    def block_count(self, node: Node, limit: int = 1_000_000) -> tuple[int, int, bool]:
        """(blocks on disk, blocks expected, counting stopped at ``limit``) for an array, or
        level 0 of a pyramid."""
        target = self._child(self.root, node.levels[0]) if node.kind == "pyramid" and node.levels else node
        if target is None or target.kind != "array":
            raise ValueError(f"{node.path or '/'} is not a dataset")
        shape, blocks = target.shape, target.blocks
        expected = math.prod(math.ceil(s / b) for s, b in zip(shape, blocks, strict=True)) if shape else 0
        def is_block(key: str) -> bool:
            base = key.rsplit("/", 1)[-1]
            return base not in (N5_JSON, ZARR_JSON) and not base.startswith(".")

        count, stopped = count_keys(self._base, target.path, is_block, limit)
        return count, expected, stopped

    def thumbnail(self, node: Node, size: int = 256, crop: int = 1024, max_decode: int = 256 * 2**20) -> np.ndarray:
        """A uint8 2D image (y, x) of an array or pyramid node: see
        :func:`napari_n5zarr.read.thumbnail.thumbnail` (the coarsest level; a BigDataViewer
        setup's middle time point)."""
        from napari_n5zarr.read.thumbnail import thumbnail

        if not node.openable:
            raise ValueError(f"{node.path or '/'} cannot be shown: {node.problem or 'not a dataset'}")
        path = node.levels[-1] if node.kind == "pyramid" and node.levels else node.path
        if node.kind == "pyramid" and node.timepoints > 1:
            ms = self.multiscale(node)
            if ms is not None and ms.time_paths:
                path = _join(node.path, ms.time_paths[len(ms.time_paths) // 2][-1])
        root: Any = self.zarr_root()  # a group whenever path is set
        return thumbnail(root if not path else root[path], size=size, crop=crop, max_decode=max_decode)


# ---------------------------------------------------------------------------
# opening a location
# ---------------------------------------------------------------------------


def open_tree(location: str | os.PathLike[str], storage_options: dict[str, Any] | None = None, activity: Activity | None = None) -> Tree:
    """The tree at a folder, ``.zip``, BigDataViewer ``.xml`` or URL (``s3://``, ``http(s)://``);
    ``activity`` names its waits (see :func:`report_waits`).

    Raises FileNotFoundError when nothing is there (the root itself unreadable is an
    error node, not an exception)."""
    from napari_n5zarr.access import base_store

    text = os.fspath(location).strip()
    if is_url(text):
        return Tree(text.rstrip("/"), base_store(text, "r", storage_options), storage_options=storage_options, activity=activity)
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
