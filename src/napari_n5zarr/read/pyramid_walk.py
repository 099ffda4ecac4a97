"""Walk a node (metadata only, never blocks) and describe its pyramids.

The I/O half of pyramid recognition: :func:`detect` reads what the conventions of
:mod:`napari_n5zarr.spatial.conventions` ask for (a group's attributes and children, the
datasets they reference, the attributes of the groups above the node) and hands it to them as
plain data. Nodes are seen through a :class:`NodeView`: zarr nodes (any store, local N5
folders through the N5 stores) through :class:`ZarrView`.
"""

from __future__ import annotations

import json
import logging
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import zarr

from napari_n5zarr.errors import SkippedNodeWarning
from napari_n5zarr.n5.constants import CODEC_NAME, N5_JSON, VERSION_KEY
from napari_n5zarr.spatial.conventions import (
    BIGDATAVIEWER,
    PAINTERA_BOOKKEEPING,
    PYRAMIDS,
    Convention,
    finish,
    paintera_bookkeeping,
    stored_name,
)
from napari_n5zarr.spatial.model import (
    ArrayInfo,
    Attrs,
    ErrorHandler,
    Listing,
    Multiscale,
    describe_error,
    inheritable,
    join_path,
    level_name,
    natural_key,
)
from napari_n5zarr.spatial.pyramids import dataset_pyramid

logger = logging.getLogger(__name__)


def _warn(path: str, exc: BaseException) -> None:
    warnings.warn(f"skipped {describe_error(path, exc)}", SkippedNodeWarning, stacklevel=4)


def _logged(on_error: ErrorHandler) -> ErrorHandler:
    """``on_error``, after logging the skipped node (whatever the caller does with it)."""

    def report(path: str, exc: BaseException) -> None:
        logger.info("skipped %s", describe_error(path, exc))
        on_error(path, exc)

    return report


def n5_ordered(array: zarr.Array) -> bool:
    """True for ``n5_default`` arrays (shape in N5 order, fastest axis first); plain Zarr
    arrays are in C order (their shape is reversed to describe them in N5 order)."""
    codecs: Any = getattr(array.metadata, "codecs", None) or ()
    try:
        return bool(codecs) and codecs[0].to_dict().get("name") == CODEC_NAME
    except (AttributeError, TypeError, ValueError):  # a codec without a JSON form
        return False


def array_facts(array: zarr.Array) -> ArrayInfo:
    """A zarr array's attributes, shape (N5 order) and dtype."""
    shape = tuple(int(s) for s in array.shape)
    return ArrayInfo(dict(array.attrs), shape if n5_ordered(array) else shape[::-1], str(array.dtype))


class NodeView:
    """What the walk reads of a node (metadata only, never blocks). :func:`detect` sees
    zarr nodes through :class:`ZarrView`, the one implementation."""

    is_array: bool
    basename: str
    """The node's name ("" at the root of what was opened)."""

    def attrs(self) -> dict[str, Any]:
        """The node's (user) attributes."""
        raise NotImplementedError

    def info(self) -> ArrayInfo:
        """An array's shape (N5 order), dtype and attributes."""
        raise NotImplementedError

    def children(self, where: str, on_error: ErrorHandler) -> dict[str, NodeView]:
        """A group's readable children; unreadable ones go to ``on_error(path, exc)``."""
        raise NotImplementedError

    def get(self, path: str) -> NodeView:
        """The node at ``path`` below this group (KeyError, OSError or ValueError if none)."""
        raise NotImplementedError

    def ancestor_attrs(self) -> dict[str, Any]:
        """Inheritable attributes of the node's ancestors, root first."""
        raise NotImplementedError

    def paintera_table(self) -> str | None:
        """The Paintera bookkeeping dataset (``unique-labels``, ...) the node is or is a level
        of, when opened on its own (its group above it has ``painteraData``); else None."""
        return None


class ZarrView(NodeView):
    """A zarr node (any store) as the walk sees it."""

    def __init__(self, node: zarr.Array | zarr.Group) -> None:
        import zarr

        self.node = node
        self.is_array = isinstance(node, zarr.Array)
        self.basename = node.basename or ""

    def attrs(self) -> dict[str, Any]:
        return dict(self.node.attrs)

    def info(self) -> ArrayInfo:
        return array_facts(self.node)  # type: ignore[arg-type]

    def children(self, where: str, on_error: ErrorHandler) -> dict[str, NodeView]:
        return {k: ZarrView(v) for k, v in _children(self.node, where, on_error).items()}  # type: ignore[arg-type]

    def get(self, path: str) -> NodeView:
        return ZarrView(self.node[path])  # type: ignore[index,arg-type]

    def ancestor_attrs(self) -> dict[str, Any]:
        return _ancestor_attrs(self.node)

    def paintera_table(self) -> str | None:
        return _paintera_table(self.node)


def _paintera_table(node: zarr.Array | zarr.Group) -> str | None:
    """See :meth:`NodeView.paintera_table`: the names above the node (in its store, then the
    folders above the store's root), and the attributes of the group above the table."""
    import zarr

    inside = [p for p in node.path.split("/") if p]
    try:
        outer = _outer_names(node.store)
    except (OSError, ValueError, RuntimeError):
        outer = []
    names = outer + inside
    at = next((i for i in (len(names) - 1, len(names) - 2) if i >= 1 and names[i] in PAINTERA_BOOKKEEPING), None)
    if at is None:  # the cheap check first: most nodes are named nothing like a lookup table
        return None
    try:
        if at >= len(outer):  # the Paintera group (names[at - 1]) is the store's root or in it
            attrs: Any = dict(zarr.open_group(store=node.store, path="/".join(inside[: at - len(outer)]), mode="r").attrs)
        else:  # above the store's root (names[len(outer) - 1]): its folder's attributes.json
            from zarr.buffer import default_buffer_prototype

            from napari_n5zarr.zarr_internals import sync

            parent = _parent_stores(node.store)[len(outer) - 1 - at]  # nearest first
            raw = sync(parent.get(N5_JSON, default_buffer_prototype()))
            attrs = json.loads(raw.to_bytes()) if raw is not None else {}
    except (KeyError, OSError, ValueError, IndexError):
        return None
    return names[at] if isinstance(attrs, dict) and isinstance(attrs.get("painteraData"), Mapping) else None


def _outer_names(store: Any) -> list[str]:
    """The folder names from the filesystem's root down to ``store``'s root (local and fsspec
    stores; none for others)."""
    from pathlib import Path

    from zarr.storage import FsspecStore, LocalStore

    from napari_n5zarr.n5.stores import innermost

    base = innermost(store)
    if isinstance(base, LocalStore):
        return [p for p in Path(base.root).resolve().parts if p not in ("/", "\\")]
    if isinstance(base, FsspecStore):
        return [p for p in base.path.split("://", 1)[-1].split("/") if p]
    return []


def _children(group: zarr.Group, where: str, on_error: ErrorHandler) -> dict[str, Any]:
    """Readable children of ``group``; unreadable ones go to ``on_error``.

    Every listed key's metadata is requested at once (:func:`~napari_n5zarr.access.child_nodes`);
    objects that are simply not nodes (a plain ``KeyError``) are skipped, broken nodes
    (anything else) reported. Stores that cannot list (plain HTTP) are probed for
    pyramid levels ``s0, s1, ...``.
    """
    from napari_n5zarr.access import child_names, child_nodes

    try:
        keys = child_names(group)
    except Exception as exc:  # boundary: any store's listing fault is reported for this node (plain HTTP cannot list)
        found = _probe_levels(group)
        if not found:
            on_error(where, exc)
        return found
    out: dict[str, Any] = {}
    try:
        nodes = child_nodes(group, keys)
    except Exception as exc:  # boundary: the event loop itself failed: this node's children are unreadable
        on_error(where, exc)
        return {}
    for key, node in zip(keys, nodes, strict=True):
        if not isinstance(node, BaseException):
            out[key] = node
        elif type(node) is not KeyError:  # a broken child is reported, its siblings still read
            on_error(join_path(where, key), node)
    return out or _probe_levels(group)


def _probe_levels(group: zarr.Group, limit: int = 32) -> dict[str, Any]:
    """Datasets ``s0, s1, ...`` fetched by name, up to the first missing one."""
    out: dict[str, Any] = {}
    for k in range(limit):
        try:
            out[level_name(k)] = group[level_name(k)]
        except (KeyError, OSError, ValueError):  # missing (or unreadable): the levels end here
            break
    return out


OUTER_LEVELS = 8
"""How many folders above a store's root are searched for inherited attributes."""


def _parent_stores(store: Any) -> list[Any]:
    """Plain stores rooted at the folders above ``store``'s root, nearest first (local
    folders and fsspec URLs: the same filesystem, so the same credentials and options)."""
    import posixpath
    from pathlib import Path

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


def outer_attrs(store: Any) -> dict[str, Any]:
    """Inheritable attributes of the N5 groups above ``store``'s root (a local folder or an
    fsspec URL, also under the N5 wrappers), root first: what a level opened on its own
    (``pyr.n5/s1``) inherits from its pyramid (see :func:`merge_outer_attrs`)."""
    from zarr.buffer import default_buffer_prototype

    from napari_n5zarr.zarr_internals import sync

    try:
        parents = _parent_stores(store)
    except (OSError, ValueError, RuntimeError):  # an unresolvable path (symlink loop, ...): nothing to inherit
        return {}

    def reader(parent: Any) -> Callable[[], bytes | None]:
        def read() -> bytes | None:
            raw = sync(parent.get(N5_JSON, default_buffer_prototype()))
            return raw.to_bytes() if raw is not None else None

        return read

    return merge_outer_attrs((str(getattr(p, "root", None) or getattr(p, "path", "")), reader(p)) for p in parents)


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


def _ancestor_attrs(node: zarr.Array | zarr.Group) -> dict[str, Any]:
    """Inheritable attributes of the node's ancestors (root first): the groups above its
    store's root (same backend), then the groups above it in its store."""
    import zarr

    parts = [p for p in node.path.split("/") if p]
    merged: dict[str, Any] = outer_attrs(node.store)
    for i in range(len(parts)):
        try:
            parent = zarr.open_group(store=node.store, path="/".join(parts[:i]), mode="r")
            merged.update(inheritable(parent.attrs))
        except (KeyError, OSError, ValueError):  # not a readable group: nothing to inherit from it
            continue
    return merged


class _GroupReader:
    """Reads what the conventions ask for below one group into its :class:`Listing`."""

    def __init__(self, group: NodeView, prefix: str, on_error: ErrorHandler) -> None:
        self.group, self.prefix, self.on_error = group, prefix, on_error
        self.views: dict[str, NodeView] = {}
        self.tried: set[str] = set()
        self.listing = Listing()

    def list(self, path: str, view: NodeView) -> dict[str, NodeView]:
        """Record the group at ``path`` and its children."""
        attrs = view.attrs()
        children = view.children(join_path(self.prefix, path), self.on_error)
        arrays = {k: v.info() for k, v in children.items() if v.is_array}
        self.listing.add(path, attrs, arrays, [k for k, v in children.items() if not v.is_array])
        self.views.update({join_path(path, k): v for k, v in children.items()})
        return children

    def fill(self, convention: Convention) -> None:
        """Read the paths ``convention`` asks for, round after round, each path once."""
        while todo := [p for p in convention.reads(self.listing) if p not in self.tried]:
            for path in todo:
                self.tried.add(path)
                self._read(path)

    def _read(self, path: str) -> None:
        try:
            view = self.views[path] if path in self.views else self.group.get(path)
        except (KeyError, OSError, ValueError):  # named by metadata but not there (or broken)
            return
        if view.is_array:
            self.listing.arrays[path] = view.info()
        else:
            self.list(path, view)


def detect(
    node: zarr.Array | zarr.Group | NodeView,
    name: str | None = None,
    *,
    inherited: Attrs | None = None,
    on_error: ErrorHandler | None = None,
    max_depth: int = 6,
    limit: int | None = None,
) -> list[Multiscale]:
    """Every image/labels pyramid under ``node``; paths relative to ``node``.

    A group that is a pyramid gives one :class:`Multiscale`; a group of several
    pyramids/datasets one per pyramid/dataset (named by relative path); an array a
    single-scale one. ``name`` names a pyramid or array at ``node`` itself (default:
    the node's basename). ``inherited`` holds attributes of ancestors outside the
    node's store (N5 Viewer/neuroglancer defaults). Reads metadata only. A child that cannot be read is passed
    to ``on_error(path, exception)`` (default: a :class:`SkippedNodeWarning`) and its
    siblings are still described. With ``limit``, the walk stops once more than ``limit``
    pyramids were found (so ``len(result) > limit`` says "too many to show").
    """
    view = node if isinstance(node, NodeView) else ZarrView(node)
    on_error = _logged(on_error or _warn)
    base = name if name is not None else view.basename
    inherited = {**inheritable(inherited), **view.ancestor_attrs()}
    if view.is_array:
        ms = dataset_pyramid(view.info(), "", name=view.basename, inherited=inherited)
        found = [finish(ms, base, "")] if ms else []
    else:
        found = _detect_group(view, base, "", inherited, on_error, max_depth, limit)
    table = view.paintera_table() if found else None
    if table:  # a Paintera lookup table opened on its own: described, never shown
        found = [replace(ms, unreadable=f"Paintera lookup table ({table}), not an image") for ms in found]
    return found


def _detect_group(
    group: NodeView,
    label: str,
    prefix: str,
    inherited: Attrs,
    on_error: ErrorHandler,
    depth: int,
    limit: int | None = None,
) -> list[Multiscale]:
    reader = _GroupReader(group, prefix, on_error)
    children = reader.list("", group)
    listing = reader.listing
    name = label or prefix
    found: list[Multiscale] = []
    used: set[str] = set()

    def take(convention: Convention, here: str) -> bool:
        """Apply ``convention``; ``here`` names what it finds at the group itself."""
        if not convention.matches(listing):
            return False
        reader.fill(convention)
        recognised = convention.build(listing, inherited)
        for r in recognised:
            found.append(finish(r.pyramid, join_path(prefix, r.at) if r.at else here, join_path(prefix, r.at)))
            used.update(r.claims)
        return bool(recognised)

    saved = (not prefix and stored_name(listing.attrs)) or name  # a pyramid opened at its group keeps its saved name
    any(take(c, saved) for c in PYRAMIDS)  # the first that builds one
    for convention in BIGDATAVIEWER:
        take(convention, name)
    used.update(paintera_bookkeeping(listing))  # lookup tables, with or without a data/ pyramid

    if depth <= 0:
        return found
    merged = {**inherited, **inheritable(listing.attrs)}
    for key in sorted(set(children) - used, key=natural_key):
        if limit is not None and len(found) > limit:
            break
        path = join_path(prefix, key)
        child = children[key]
        if child.is_array:
            ms = dataset_pyramid(listing.arrays[key], key, inherited=merged)
            if ms is not None:
                found.append(finish(ms, path, prefix))
        else:
            try:
                left = None if limit is None else limit - len(found)
                found.extend(_detect_group(child, "", path, merged, on_error, depth - 1, left))
            except Exception as exc:  # boundary: one broken subtree is reported, never its siblings'
                on_error(path, exc)
    return found
