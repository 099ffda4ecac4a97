"""Walk a zarr node (metadata only, never chunks) and describe its pyramids."""

from __future__ import annotations

import json
import logging
import re
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import zarr

from napari_n5zarr.errors import SkippedNodeWarning
from napari_n5zarr.n5.constants import CODEC_NAME, N5_JSON
from napari_n5zarr.spatial.conventions import _inherited, calibrate
from napari_n5zarr.spatial.model import (
    _SETUP,
    _TIMEPOINT,
    ArrayInfo,
    Attrs,
    ErrorHandler,
    Multiscale,
    default_axes,
)
from napari_n5zarr.spatial.pyramids import (
    _assemble,
    bdv_setup,
    cosem_pyramid,
    is_labels,
    n5viewer_pyramid,
    ngff_pyramid,
)

logger = logging.getLogger(__name__)


def describe_error(path: str, exc: BaseException) -> str:
    """``"path: reason"`` without repeating a path the message already starts with."""
    msg = str(exc) or type(exc).__name__
    return msg if path and msg.startswith(path) else f"{path or '/'}: {msg}"


def _warn(path: str, exc: BaseException) -> None:
    warnings.warn(f"skipped {describe_error(path, exc)}", SkippedNodeWarning, stacklevel=4)


def _logged(on_error: ErrorHandler) -> ErrorHandler:
    """``on_error``, after logging the skipped node (whatever the caller does with it)."""

    def report(path: str, exc: BaseException) -> None:
        logger.info("skipped %s", describe_error(path, exc))
        on_error(path, exc)

    return report


def _natural_key(name: str) -> list[Any]:
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name)]


def _join(*parts: str) -> str:
    return "/".join(p.strip("/") for p in parts if p and p.strip("/"))


def n5_ordered(array: zarr.Array) -> bool:
    """True for ``n5_default`` arrays (shape in N5 order, fastest axis first); plain Zarr
    arrays are in C order (their shape is reversed to describe them in N5 order)."""
    codecs: Any = getattr(array.metadata, "codecs", None) or ()
    try:
        return bool(codecs) and codecs[0].to_dict().get("name") == CODEC_NAME
    except (AttributeError, TypeError, ValueError):  # a codec without a JSON form
        return False


def _info(array: zarr.Array) -> ArrayInfo:
    shape = tuple(int(s) for s in array.shape)
    return ArrayInfo(dict(array.attrs), shape if n5_ordered(array) else shape[::-1], str(array.dtype))


class NodeView:
    """What the walk reads of a node (metadata only, never blocks). :func:`detect` sees
    zarr nodes through :class:`_ZarrView`; :mod:`napari_n5zarr.read.local` offers a
    zarr-free view of local N5 folders, so both give the same :class:`Multiscale` objects."""

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


class _ZarrView(NodeView):
    """A zarr node (any store) as the walk sees it."""

    def __init__(self, node: zarr.Array | zarr.Group) -> None:
        import zarr

        self.node = node
        self.is_array = isinstance(node, zarr.Array)
        self.basename = node.basename or ""

    def attrs(self) -> dict[str, Any]:
        return dict(self.node.attrs)

    def info(self) -> ArrayInfo:
        return _info(self.node)  # type: ignore[arg-type]

    def children(self, where: str, on_error: ErrorHandler) -> dict[str, NodeView]:
        return {k: _ZarrView(v) for k, v in _children(self.node, where, on_error).items()}  # type: ignore[arg-type]

    def get(self, path: str) -> NodeView:
        return _ZarrView(self.node[path])  # type: ignore[index,arg-type]

    def ancestor_attrs(self) -> dict[str, Any]:
        return _ancestor_attrs(self.node)


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
            on_error(_join(where, key), node)
    return out or _probe_levels(group)


def _probe_levels(group: zarr.Group, limit: int = 32) -> dict[str, Any]:
    """Datasets ``s0, s1, ...`` fetched by name, up to the first missing one."""
    out: dict[str, Any] = {}
    for k in range(limit):
        try:
            out[f"s{k}"] = group[f"s{k}"]
        except (KeyError, OSError, ValueError):  # missing (or unreadable): the levels end here
            break
    return out


OUTER_LEVELS = 8
"""How many folders above a store's root are searched for inherited attributes."""


def _base_store(store: Any) -> Any:
    """The plain store under the N5 wrappers."""
    seen = 0
    while hasattr(store, "_store") and seen < 8:
        store, seen = store._store, seen + 1
    return store


def _parent_stores(store: Any) -> list[Any]:
    """Plain stores rooted at the folders above ``store``'s root, nearest first (local
    folders and fsspec URLs: the same filesystem, so the same credentials and options)."""
    import posixpath
    from pathlib import Path

    from zarr.storage import FsspecStore, LocalStore

    from napari_n5zarr.storage.local import SafeLocalStore

    base = _base_store(store)
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


def _outer_attrs(node: zarr.Array | zarr.Group) -> dict[str, Any]:
    """Inheritable attributes of N5 groups above the store's root, root first (see
    :func:`merge_outer_attrs`)."""
    return outer_attrs(node.store)


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
        found.append(_inherited(doc))
        if "n5" in doc or where.rstrip("/").lower().endswith(".n5"):
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
    merged: dict[str, Any] = _outer_attrs(node)
    for i in range(len(parts)):
        try:
            parent = zarr.open_group(store=node.store, path="/".join(parts[:i]), mode="r")
            merged.update(_inherited(parent.attrs))
        except (KeyError, OSError, ValueError):  # not a readable group: nothing to inherit from it
            continue
    return merged


def _lookup(group: NodeView, paths: Iterable[str], known: Mapping[str, NodeView]) -> dict[str, ArrayInfo]:
    """ArrayInfo for the given relative paths that are arrays (nested paths allowed)."""
    out = {}
    for p in paths:
        try:
            node = known[p] if p in known else group.get(p)
        except (KeyError, OSError, ValueError):  # named by metadata but not there (or broken)
            continue
        if node.is_array:
            out[p] = node.info()
    return out


def referenced_paths(attrs: Attrs) -> list[str]:
    """Dataset paths named by OME-NGFF / COSEM ``multiscales`` metadata."""
    ome = attrs.get("ome")
    root = ome if isinstance(ome, Mapping) and "multiscales" in ome else attrs
    ms = root.get("multiscales")
    if not isinstance(ms, list) or not ms or not isinstance(ms[0], Mapping):
        return []
    ds = ms[0].get("datasets")
    return [d["path"] for d in ds if isinstance(d, Mapping) and isinstance(d.get("path"), str)] if isinstance(ds, list) else []


COLOUR_AXES = ("rgb", "rgba")
"""Names of a colour axis (N5 axis 0, napari's last): written by this package's writer;
given by :func:`detect` to uncalibrated C-order RGB(A) data."""


def looks_rgb(ms: Multiscale) -> bool:
    """Uncalibrated uint8 data whose fastest N5 axis has 3 or 4 entries: an RGB(A) image
    written in C order (y, x, c) by a tool without metadata."""
    return (
        ms.convention == "none"
        and ms.ndim >= 3
        and bool(ms.shapes)
        and ms.shapes[0][0] in (3, 4)
        and ms.dtype == "uint8"
        and ms.channel_axis is None
        and not ms.time_paths
    )


def _name_colour_axis(ms: Multiscale) -> Multiscale:
    if not looks_rgb(ms):
        return ms
    axes = (COLOUR_AXES[ms.shapes[0][0] - 3], *default_axes(ms.ndim - 1))
    return replace(ms, axes=axes)


def _finish(ms: Multiscale, name: str, prefix: str) -> Multiscale:
    ms = _name_colour_axis(ms)
    return replace(
        ms,
        name=name,
        paths=tuple(_join(prefix, p) for p in ms.paths),
        time_paths=tuple(tuple(_join(prefix, p) for p in t) for t in ms.time_paths),
        is_labels=is_labels(name, ms.attrs, ms.dtype) or ms.label_multiset,
    )


NAME_KEY = "name"
"""Attribute of a pyramid group: the name it was saved under (napari's layer name). It names
the pyramid opened at that group, in place of the container's folder name."""


def stored_name(attrs: Mapping[str, Any]) -> str | None:
    """The pyramid's own name (``NAME_KEY``), if it carries one."""
    name = attrs.get(NAME_KEY)
    return name.strip() if isinstance(name, str) and name.strip() else None


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
    view = node if isinstance(node, NodeView) else _ZarrView(node)
    on_error = _logged(on_error or _warn)
    base = name if name is not None else view.basename
    inherited = {**_inherited(inherited), **view.ancestor_attrs()}
    if view.is_array:
        info = view.info()
        cal = calibrate(info.attrs, len(info.shape), name=view.basename, inherited=inherited)
        ms = _assemble([""], [info], [cal], cal.convention, info.attrs)
        return [_finish(ms, base, "")] if ms else []
    return _detect_group(view, base, "", inherited, on_error, max_depth, limit)


def _detect_group(
    group: NodeView,
    label: str,
    prefix: str,
    inherited: Attrs,
    on_error: ErrorHandler,
    depth: int,
    limit: int | None = None,
) -> list[Multiscale]:
    attrs = group.attrs()
    children = group.children(prefix, on_error)
    arrays = {k: v.info() for k, v in children.items() if v.is_array}
    groups = {k: v for k, v in children.items() if not v.is_array}
    merged = {**inherited, **_inherited(attrs)}
    name = label or prefix
    found: list[Multiscale] = []
    used: set[str] = set()

    referenced = _lookup(group, referenced_paths(attrs), children)
    pyramid = (
        ngff_pyramid(attrs, referenced)
        or cosem_pyramid(attrs, referenced)
        or n5viewer_pyramid(attrs, arrays, inherited)
    )
    if pyramid is None:
        pyramid = _paintera(attrs, groups, prefix, merged, on_error)
    if pyramid is not None:
        found.append(_finish(pyramid, (not prefix and stored_name(attrs)) or name, prefix))
        used.update(p.split("/", 1)[0] for p in pyramid.paths)
        if "painteraData" in attrs:
            used.update(k for k in PAINTERA_BOOKKEEPING if k in children)

    setups = sorted((k for k in groups if _SETUP.match(k)), key=_natural_key)
    if any(_TIMEPOINT.match(k) for k in groups):  # opened at a BigDataViewer setup
        ms = _bdv(group, attrs, groups, prefix, merged, on_error)
        if ms is not None:
            found.append(_finish(ms, name, prefix))
            used.update(k for k in groups if _TIMEPOINT.match(k))
    for key in setups:
        setup = groups[key]
        sub = setup.children(_join(prefix, key), on_error)
        tgroups = {k: v for k, v in sub.items() if not v.is_array}
        ms = _bdv(setup, setup.attrs(), tgroups, _join(prefix, key), merged, on_error)
        if ms is not None:
            found.append(_finish(ms, _join(prefix, key), _join(prefix, key)))
            used.add(key)

    if depth <= 0:
        return found
    for key in sorted(set(children) - used, key=_natural_key):
        if limit is not None and len(found) > limit:
            break
        path = _join(prefix, key)
        child = children[key]
        if child.is_array:
            info = arrays[key]
            cal = calibrate(info.attrs, len(info.shape), name=key, inherited=merged)
            ms = _assemble([key], [info], [cal], cal.convention, info.attrs)
            if ms is not None:
                found.append(_finish(ms, path, prefix))
        else:
            try:
                left = None if limit is None else limit - len(found)
                found.extend(_detect_group(child, "", path, merged, on_error, depth - 1, left))
            except Exception as exc:  # boundary: one broken subtree is reported, never its siblings'
                on_error(path, exc)
    return found


PAINTERA_BOOKKEEPING = ("unique-labels", "label-to-block-mapping", "fragment-segment-assignment")
"""What a Paintera label group keeps beside its ``data`` pyramid: lookup tables, not images."""


def _paintera(
    attrs: Attrs, groups: Mapping[str, NodeView], prefix: str, inherited: Attrs, on_error: ErrorHandler
) -> Multiscale | None:
    """A Paintera group (``painteraData``): its ``data/s0, s1, ...`` pyramid, named after
    the group, with the group's ``painteraData`` (the layer type) beside ``data``'s attributes."""
    paintera = attrs.get("painteraData")
    if not isinstance(paintera, Mapping) or "data" not in groups:
        return None
    data = groups["data"]
    sub = data.children(_join(prefix, "data"), on_error)
    data_attrs = data.attrs()
    ms = n5viewer_pyramid(data_attrs, {k: v.info() for k, v in sub.items() if v.is_array}, inherited)
    if ms is None:
        return None
    return replace(ms, paths=tuple(_join("data", p) for p in ms.paths), attrs={**data_attrs, "painteraData": dict(paintera)})


def _bdv(
    setup: NodeView,
    setup_attrs: Attrs,
    tgroups: Mapping[str, NodeView],
    prefix: str,
    inherited: Attrs,
    on_error: ErrorHandler,
) -> Multiscale | None:
    timepoints = {}
    for key in sorted((k for k in tgroups if _TIMEPOINT.match(k)), key=_natural_key):
        tp = tgroups[key]
        sub = tp.children(_join(prefix, key), on_error)
        arrays = {k: v.info() for k, v in sub.items() if v.is_array}
        timepoints[key] = (tp.attrs(), arrays)
    merged = {**inherited, **_inherited(setup_attrs)}
    return bdv_setup(setup_attrs, timepoints, merged)
