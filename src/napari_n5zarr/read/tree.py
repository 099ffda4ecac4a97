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
* Row fields are in napari order (z, y, x): shape with axis names, dtype, voxel size and
  units, uncompressed size, block size, N5 compression name and level.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from napari_n5zarr import spatial
from napari_n5zarr.spatial.detect import referenced_paths
from napari_n5zarr.spatial.model import INHERITABLE
from napari_n5zarr.errors import N5FormatError, N5MetadataError, NodeNotFoundError

if TYPE_CHECKING:
    import numpy as np
    import zarr
    from zarr.abc.store import Store

N5_JSON = "attributes.json"
ZARR_JSON = "zarr.json"
MAX_METADATA_BYTES = 16 * 2**20
"""Largest attributes.json / zarr.json read; bigger ones are reported as errors."""
PAGE_SIZE = 500
"""Nodes per page of :meth:`Tree.iter_children` (the first page is smaller)."""
FIRST_PAGE = 100

_LEVEL = re.compile(r"^s(\d+)$")
_TIMEPOINT = re.compile(r"^timepoint(\d+)$")
_URL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")
_CONVENTIONS = {
    "n5viewer": "N5 Viewer",
    "n5viewer-old": "N5 Viewer (old)",
    "cosem": "COSEM",
    "ngff": "OME-NGFF",
    "ome-ngff": "OME-NGFF",
    "bdv": "BigDataViewer",
    "bdv-xml": "BigDataViewer",
    "neuroglancer": "neuroglancer",
    "tensorstore": "tensorstore",
    "imagej": "ImageJ",
    "none": "uncalibrated",
}
_UNITS = {"micrometer": "µm", "nanometer": "nm", "millimeter": "mm", "meter": "m", "second": "s",
          "millisecond": "ms", "angstrom": "Å", "centimeter": "cm"}  # fmt: skip


def natural_key(name: str) -> list[Any]:
    """Sort key that puts ``s2`` before ``s10``."""
    return [(0, int(p)) if p.isdigit() else (1, p) for p in re.split(r"(\d+)", name)]


def join(root: str | os.PathLike[str], path: str) -> str:
    """The location of ``path`` under ``root`` (a local path or a URL)."""
    base = os.fspath(root).rstrip("/")
    return f"{base}/{path}" if path else base


def _join(*parts: str) -> str:
    return "/".join(p.strip("/") for p in parts if p and p.strip("/"))


# ---------------------------------------------------------------------------
# nodes
# ---------------------------------------------------------------------------


@dataclass(slots=True)
class Node:
    """One node of a hierarchy. Per-axis tuples are in napari order (slowest axis first).

    Kept small on purpose (slots, metadata kept as the stored bytes and parsed on demand):
    a listing holds tens of thousands of nodes, and every long-lived container object
    lengthens CPython's full garbage collections, which stall the GUI thread."""

    name: str
    path: str
    """Relative to the tree's root ("" for the root)."""
    kind: str
    """"group", "array", "pyramid" (a group opened as one multiscale image) or "error"."""
    raw: bytes = b""
    """The metadata document as stored: attributes.json for N5, else zarr.json."""
    array_shape: tuple[int, ...] = ()
    """Shape in the stored order (N5 ``dimensions``; zarr.json ``shape``)."""
    shape: tuple[int, ...] = ()
    axes: tuple[str, ...] = ()
    dtype: str = ""
    blocks: tuple[int, ...] = ()
    compression: str = ""
    scale: tuple[float, ...] = ()
    translate: tuple[float, ...] = ()
    units: tuple[str | None, ...] = ()
    convention: str = ""
    levels: tuple[str, ...] = ()
    """Pyramid level paths (relative to the tree root), finest first."""
    timepoints: int = 0
    error: str | None = None
    """Why the node's metadata cannot be read (kind "error")."""
    reason: str | None = None
    """Why a readable node cannot be opened as a layer (e.g. 1-D data)."""
    n5: bool = False
    """An attributes.json is present."""
    zarr: bool = False
    """A zarr.json is present."""
    inherited: dict[str, Any] = field(default_factory=dict, repr=False)
    """Attributes children inherit (N5 Viewer/neuroglancer resolution, units, axes)."""

    @property
    def attributes(self) -> dict[str, Any]:
        """The node's metadata as stored (attributes.json, else zarr.json's attributes)."""
        if not self.raw:
            return {}
        try:
            doc = json.loads(self.raw)
        except (ValueError, RecursionError):
            return {}
        if not isinstance(doc, dict):
            return {}
        return doc if self.n5 else dict(doc.get("attributes") or {})

    @property
    def zarr_doc(self) -> dict[str, Any] | None:
        """The Zarr v3 view (zarr.json; translated from attributes.json for N5)."""
        if self.kind == "error":
            return None
        if not self.raw:
            return {"zarr_format": 3, "node_type": "group", "attributes": {}}
        try:
            doc = json.loads(self.raw)
            if not self.n5:
                return doc
            from napari_n5zarr.n5.metadata import attributes_to_zarr

            return attributes_to_zarr(doc, path=self.path or "/")
        except Exception:
            return None

    @property
    def has_children(self) -> bool:
        return self.kind in ("group", "pyramid")

    @property
    def openable(self) -> bool:
        """Opens as layer(s) through the reader: a dataset or a pyramid without a problem."""
        return self.kind in ("array", "pyramid") and self.reason is None

    @property
    def problem(self) -> str | None:
        """The error or the reason the node cannot be opened, if any."""
        return self.error or self.reason

    @property
    def nbytes(self) -> int | None:
        """Uncompressed size of the array (level 0 of a pyramid)."""
        if not self.shape or not self.dtype:
            return None
        try:
            import numpy as np

            return math.prod(self.shape) * np.dtype(self.dtype).itemsize
        except TypeError:
            return None

    @property
    def kind_text(self) -> str:
        """"dataset", "group", "unreadable", or "COSEM, 3 levels" for a pyramid."""
        if self.kind == "pyramid":
            label = _CONVENTIONS.get(self.convention, self.convention)
            n = len(self.levels)
            text = f"{label}, {n} level{'s' if n != 1 else ''}"
            return text + (f", {self.timepoints} timepoints" if self.timepoints > 1 else "")
        return {"array": "dataset", "error": "unreadable"}.get(self.kind, self.kind)

    def row(self) -> dict[str, str]:
        """Display text of every column (the widget and ``n5zarr tree`` use the same)."""
        return {
            "name": self.name or "/",
            "shape": shape_text(self.shape, self.axes),
            "dtype": self.dtype,
            "kind": self.kind_text,
            "compression": self.compression,
            "voxel": voxel_text(self.scale, self.units) if self.convention not in ("", "none") else "",
            "size": human_bytes(self.nbytes) if self.nbytes is not None else "",
            "blocks": "×".join(str(b) for b in self.blocks),
            "problem": self.problem or "",
        }

    def to_json(self) -> dict[str, Any]:
        """Plain JSON values (``--json``): napari-order lists, no display formatting."""
        return {
            "path": self.path,
            "name": self.name,
            "kind": self.kind,
            "shape": list(self.shape),
            "axes": list(self.axes),
            "dtype": self.dtype or None,
            "blocks": list(self.blocks),
            "compression": self.compression or None,
            "scale": list(self.scale),
            "translate": list(self.translate),
            "units": list(self.units),
            "convention": self.convention or None,
            "levels": list(self.levels),
            "nbytes": self.nbytes,
            "n5": self.n5,
            "zarr": self.zarr,
            "openable": self.openable,
            "error": self.error,
            "reason": self.reason,
        }


def shape_text(shape: Sequence[int], axes: Sequence[str]) -> str:
    """``200×512×512 zyx`` (or ``3×200×512×512 (c,z,y,x)`` for longer axis names)."""
    if not shape:
        return ""
    dims = "×".join(str(s) for s in shape)
    if not axes or len(axes) != len(shape):
        return dims
    if all(len(a) == 1 for a in axes):
        return f"{dims} {''.join(axes)}"
    return f"{dims} ({','.join(axes)})"


def _unit(unit: str | None) -> str:
    name = spatial.normalize_unit(unit) if unit else None
    return _UNITS.get(name or "", name or "px")


def voxel_text(scale: Sequence[float], units: Sequence[str | None]) -> str:
    """``40 × 4 × 4 nm`` (napari order); mixed units are given per axis; axes without a
    unit are left out when others have one."""
    if not scale:
        return ""
    known = [i for i in range(len(scale)) if i < len(units) and units[i]]
    keep = known if known else list(range(len(scale)))  # axes without a unit (t, c) are left out
    names = [_unit(units[i] if i < len(units) else None) for i in keep]
    values = [f"{scale[i]:g}" for i in keep]
    if len(set(names)) == 1:
        return f"{' × '.join(values)} {names[0]}"
    return " × ".join(f"{v} {u}" for v, u in zip(values, names, strict=True))


def human_bytes(n: int) -> str:
    """``1.5 GiB``."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "PiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} PiB"


def compression_text(n5_compression: Mapping[str, Any]) -> str:
    """N5 name and level: ``gzip 6``, ``zstd 3``, ``blosc lz4 5``, ``raw``."""
    kind = str(n5_compression.get("type", "?"))
    if kind == "gzip":
        level = n5_compression.get("level", -1)
        name = "gzip (zlib)" if n5_compression.get("useZlib") else "gzip"
        return name if level in (-1, None) else f"{name} {level}"
    if kind == "bzip2":
        return f"bzip2 {n5_compression.get('blockSize', 9)}"
    if kind == "xz":
        return f"xz {n5_compression.get('preset', 6)}"
    if kind == "zstd":
        return f"zstd {n5_compression.get('level', 3)}"
    if kind == "blosc":
        return f"blosc {n5_compression.get('cname', 'blosclz')} {n5_compression.get('clevel', 6)}"
    return kind


def _zarr_compression(doc: Mapping[str, Any]) -> str:
    """N5-style compression text of a Zarr v3 array (its codec mapped through N5's table)."""
    from napari_n5zarr.n5.compression import zarr_to_n5

    codecs = doc.get("codecs") or []
    if codecs and isinstance(codecs[0], dict) and codecs[0].get("name") == "n5_default":
        inner = (codecs[0].get("configuration") or {}).get("codecs") or []
        comp = inner[2] if len(inner) > 2 else None
    else:
        rest = [c for c in codecs if isinstance(c, dict) and c.get("name") not in ("bytes", "transpose")]
        if len(rest) > 1:
            return "+".join(str(c.get("name")) for c in rest)
        comp = rest[0] if rest else None
    try:
        return compression_text(zarr_to_n5(comp))
    except (N5FormatError, ValueError, AttributeError):
        return str(comp.get("name")) if isinstance(comp, dict) else str(comp)


# ---------------------------------------------------------------------------
# sources: names and metadata bytes under a root
# ---------------------------------------------------------------------------


class _LocalSource:
    """A local folder read with ``os`` calls.

    Written by hand on purpose: zarr's LocalStore runs every call through its event-loop
    thread and a thread pool (~0.2 ms each), which made a 10,000-node listing take seconds;
    ``os.scandir`` also tells folders from files without one request per name."""

    def __init__(self, root: Path) -> None:
        self.root = str(root).rstrip(os.sep) or os.sep  # str, not Path: pathlib costs ~40 us a join

    def where(self, key: str) -> str:
        return f"{self.root}{os.sep}{key}" if key else self.root

    def names(self, path: str) -> list[str]:
        with os.scandir(self.where(path)) as entries:
            return [e.name for e in entries if not e.name.startswith(".") and e.is_dir()]

    def read(self, key: str) -> bytes | None:
        path = self.where(key)
        try:
            st = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        if not stat.S_ISREG(st.st_mode):
            raise N5MetadataError(f"{path}: not a regular file")
        if st.st_size > MAX_METADATA_BYTES:
            raise N5MetadataError(f"{path}: {human_bytes(st.st_size)} is over the {human_bytes(MAX_METADATA_BYTES)} metadata limit")
        with open(path, "rb") as f:
            return f.read(MAX_METADATA_BYTES + 1)

    def read_many(self, keys: Sequence[str]) -> list[bytes | None | BaseException]:
        out: list[bytes | None | BaseException] = []
        for key in keys:
            try:
                out.append(self.read(key))
            except Exception as exc:
                out.append(exc)
        return out

    def is_group_dir(self, path: str) -> bool:
        return True  # names() returns folders only

    def walk_files(self, path: str) -> Iterator[str]:
        for dirpath, _dirs, files in os.walk(self.where(path)):
            for f in files:
                yield os.path.join(dirpath, f)


class _StoreSource:
    """Any zarr store (zip, fsspec URLs, memory); reads of one page go out concurrently."""

    def __init__(self, store: Store, location: str) -> None:
        self.store = store
        self.location = location.rstrip("/")

    def where(self, key: str) -> str:
        return join(self.location, key)

    def names(self, path: str) -> list[str]:
        from zarr.core.sync import sync

        async def names() -> list[str]:
            return [k async for k in self.store.list_dir(path)]

        return [n for n in sync(names()) if n not in (N5_JSON, ZARR_JSON) and not n.startswith(".")]

    def read_many(self, keys: Sequence[str]) -> list[bytes | None | BaseException]:
        import asyncio

        from zarr.core.buffer import default_buffer_prototype
        from zarr.core.sync import sync

        async def one(key: str) -> bytes | None:
            buf = await self.store.get(key, default_buffer_prototype())
            if buf is None:
                return None
            if len(buf) > MAX_METADATA_BYTES:
                raise N5MetadataError(f"{self.where(key)}: over the {human_bytes(MAX_METADATA_BYTES)} metadata limit")
            return buf.to_bytes()

        async def many() -> list[Any]:
            return await asyncio.gather(*(one(k) for k in keys), return_exceptions=True)

        return sync(many())

    def read(self, key: str) -> bytes | None:
        value = self.read_many([key])[0]
        if isinstance(value, BaseException):
            raise value
        return value

    def is_group_dir(self, path: str) -> bool:
        try:
            return bool(self.names(path)) or bool(self._any_key(path))
        except Exception:
            return False

    def _any_key(self, path: str) -> bool:
        from zarr.core.sync import sync

        async def first() -> bool:
            async for _ in self.store.list_dir(path):
                return True
            return False

        return sync(first())

    def walk_files(self, path: str) -> Iterator[str]:
        from zarr.core.sync import sync

        async def keys() -> list[str]:
            return [k async for k in self.store.list_prefix(f"{path}/" if path else "")]

        yield from sync(keys())


# ---------------------------------------------------------------------------
# the tree
# ---------------------------------------------------------------------------


class Tree:
    """The hierarchy at one location, read lazily; safe to list from one worker thread
    while another thread reads the nodes it has handed out."""

    def __init__(self, location: str, source: _LocalSource | _StoreSource, *, n5_location: str | None = None,
                 bdv_setups: dict[int, Any] | None = None, storage_options: dict[str, Any] | None = None) -> None:  # fmt: skip
        self.location = location
        """What the user gave (folder, .zip, .xml or URL)."""
        self.n5_location = n5_location or location
        """The container the nodes live in (a BigDataViewer XML's N5 folder)."""
        self.bdv_setups = bdv_setups
        self.storage_options = storage_options
        self._source = source
        self._lock = threading.RLock()
        self._names: dict[str, list[str]] = {}
        self._nodes: dict[str, Node | None] = {}
        self._children: dict[str, list[Node]] = {}
        self._zarr_root: Any = None
        self.root = self._make_nodes([""], {})[0] or Node("", "", "error", error=f"no N5 or Zarr node at {location}")
        if self.root.kind == "group" and not self.root.n5 and not self.root.zarr and not self._names_or_error(""):
            self.root = Node("", "", "error", error=f"no N5 or Zarr node at {location}")
        if self.root.kind == "group":
            self.root.name = Path(self.n5_location.rstrip("/")).name
            self._classify(self.root)

    # -- listing -------------------------------------------------------------------
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
        names = sorted(self._source.names(path), key=natural_key)
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
            yield [Node("…", _join(node.path, "…"), "error", error=f"cannot list {self._source.where(node.path)}: {exc}")]
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
            n5 = self._source.read_many([_join(p, N5_JSON) for p in todo])
            zj = self._source.read_many([_join(p, ZARR_JSON) for p in todo])
            for p, a, z in zip(todo, n5, zj, strict=True):
                try:
                    node = self._node(p, a, z, inherited)
                except Exception as exc:  # one node's problem, never its siblings'
                    node = Node(p.rsplit("/", 1)[-1], p, "error", error=spatial.describe_error(p, exc))
                with self._lock:
                    self._nodes[p] = node
                cached[p] = node
        return [cached[p] for p in paths]

    def _node(self, path: str, n5_raw: Any, zarr_raw: Any, inherited: dict[str, Any]) -> Node | None:
        name = path.rsplit("/", 1)[-1]
        node = Node(name, path, "group", n5=n5_raw is not None and not isinstance(n5_raw, BaseException),
                    zarr=zarr_raw is not None and not isinstance(zarr_raw, BaseException))  # fmt: skip
        try:
            if isinstance(n5_raw, BaseException):
                raise n5_raw
            if n5_raw is not None:
                node.raw = n5_raw
                self._fill_from_n5(node, _parse(n5_raw))
            elif isinstance(zarr_raw, BaseException):
                raise zarr_raw
            elif zarr_raw is not None:
                node.raw = zarr_raw
                self._fill_from_zarr(node, _parse(zarr_raw))
            elif not path or self._source.is_group_dir(path):
                pass  # an implicit group (N5 groups need no attributes.json)
            else:
                return None  # a stray file: not a node
        except Exception as exc:
            node.kind = "error"
            node.error = _error_text(exc, self._source.where(_join(path, N5_JSON if node.n5 else ZARR_JSON)), path)
            return node
        own = {k: attrs[k] for k in INHERITABLE if k in attrs} if (attrs := node.attributes) else {}
        node.inherited = {**inherited, **own} if own else inherited  # shared when nothing is added
        if node.kind == "array":
            self._calibrate_array(node, inherited, attrs)
        return node

    def _fill_from_n5(self, node: Node, attrs: Any) -> None:
        from napari_n5zarr.n5.compression import normalize_n5
        from napari_n5zarr.n5.metadata import attributes_to_zarr
        from napari_n5zarr.n5.model import is_dataset

        where = node.path or "/"  # errors are prefixed with the file's location by _node
        if not isinstance(attrs, dict):
            raise N5MetadataError(f"attributes.json must hold a JSON object, got {type(attrs).__name__}")
        doc = attributes_to_zarr(attrs, path=where)
        if not is_dataset(attrs):
            return
        _validate_array(doc, where)
        node.kind = "array"
        node.array_shape = tuple(int(d) for d in doc["shape"])
        node.dtype = str(attrs["dataType"])
        node.blocks = tuple(int(b) for b in attrs["blockSize"])[::-1]
        node.compression = compression_text(normalize_n5(attrs))

    def _fill_from_zarr(self, node: Node, doc: Any) -> None:
        where = node.path or "/"
        if not isinstance(doc, dict):
            raise N5MetadataError("zarr.json must hold a JSON object")
        kind = doc.get("node_type")
        if doc.get("zarr_format") != 3 or kind not in ("array", "group"):
            raise N5MetadataError(f"not Zarr v3 metadata (zarr_format {doc.get('zarr_format')!r}, node_type {kind!r})")
        if kind == "group":
            return
        _validate_array(doc, where)
        node.kind = "array"
        node.array_shape = tuple(int(d) for d in doc.get("shape") or ())
        node.dtype = str(doc.get("data_type"))
        chunks = ((doc.get("chunk_grid") or {}).get("configuration") or {}).get("chunk_shape") or []
        node.blocks = tuple(int(c) for c in chunks)[::-1]
        node.compression = _zarr_compression(doc)

    def _info(self, node: Node, attributes: dict[str, Any] | None = None) -> spatial.ArrayInfo:
        from napari_n5zarr.n5.model import user_attributes

        attrs = node.attributes if attributes is None else attributes
        return spatial.ArrayInfo(user_attributes(attrs) if node.n5 else attrs, node.array_shape, node.dtype)

    def _calibrate_array(self, node: Node, inherited: dict[str, Any], attrs: dict[str, Any]) -> None:
        info = self._info(node, attrs)
        cal = spatial.calibrate(info.attrs, len(info.shape), name=node.name, inherited=inherited)
        node.shape = info.shape[::-1]
        node.scale, node.translate = cal.scale[::-1], cal.translate[::-1]
        node.units, node.axes = cal.units[::-1], cal.axes[::-1]
        node.convention = cal.convention
        if len(info.shape) < 2:
            node.reason = f"{len(info.shape)}-D data cannot be shown as an image"

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
        return {n: self._info(c) for n, c in zip(names, found, strict=True) if c is not None and c.kind == "array"}

    def _classify(self, group: Node) -> None:
        """Make ``group`` a pyramid node if the reader would open it as one multiscale image."""
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

    def _multiscale_of(self, group: Node) -> spatial.Multiscale | None:
        names = self.names(group.path)
        attrs = dict(group.attributes)
        refs = referenced_paths(attrs)
        referenced: dict[str, spatial.ArrayInfo] = {}
        for ref in refs:
            child = self._child(group, ref)
            if child is not None and child.kind == "array":
                referenced[ref] = self._info(child)
        levels = [n for n in names if _LEVEL.match(n)]
        arrays = self._arrays(group, levels) if levels else {}
        ms = None
        if referenced:
            ms = spatial.ngff_pyramid(attrs, referenced) or spatial.cosem_pyramid(attrs, referenced)
        if ms is None and arrays:
            ms = spatial.n5viewer_pyramid(attrs, arrays, group.inherited)
        timepoints = [n for n in names if _TIMEPOINT.match(n)]
        if ms is None and timepoints:
            tps = {}
            for tp in timepoints:
                tnode = self._child(group, tp)
                if tnode is None or tnode.kind != "group":
                    continue
                tps[tp] = (dict(tnode.attributes), self._arrays(tnode, [n for n in self.names(tnode.path) if _LEVEL.match(n)]))
            ms = spatial.bdv_setup(attrs, tps, group.inherited)
            if ms is not None and self.bdv_setups and (m := re.search(r"setup(\d+)$", group.path)):
                setup = self.bdv_setups.get(int(m.group(1)))
                if setup is not None:
                    ms = spatial.with_bdv_setup(ms, setup)
        return ms

    # -- details (on request) ------------------------------------------------------
    def zarr_root(self) -> zarr.Array | zarr.Group:
        """The root opened with :func:`napari_n5zarr.open` (cached)."""
        with self._lock:
            if self._zarr_root is None:
                import napari_n5zarr

                self._zarr_root = napari_n5zarr.open(self.n5_location, storage_options=self.storage_options)
            return self._zarr_root

    def zarr_node(self, node: Node) -> zarr.Array | zarr.Group:
        root = self.zarr_root()
        return root if not node.path else root[node.path]

    def multiscale(self, node: Node) -> spatial.Multiscale | None:
        """What the reader's detection makes of an array or pyramid node (scale, translate,
        units in N5 order; BigDataViewer XML voxel sizes applied)."""
        if not node.openable:
            return None
        found = spatial.detect(self.zarr_node(node), node.name, max_depth=0, on_error=lambda p, e: None)
        if not found:
            return None
        ms = found[0]
        if self.bdv_setups and ms.convention == "bdv" and (m := re.search(r"setup(\d+)$", node.path)):
            setup = self.bdv_setups.get(int(m.group(1)))
            if setup is not None:
                ms = spatial.with_bdv_setup(ms, setup)
        return ms

    def block_count(self, node: Node, limit: int = 1_000_000) -> tuple[int, int, bool]:
        """(blocks on disk, blocks expected, counting stopped at ``limit``) for an array, or
        level 0 of a pyramid."""
        target = self._child(self.root, node.levels[0]) if node.kind == "pyramid" and node.levels else node
        if target is None or target.kind != "array":
            raise ValueError(f"{node.path or '/'} is not a dataset")
        shape, blocks = target.shape, target.blocks
        expected = math.prod(math.ceil(s / b) for s, b in zip(shape, blocks, strict=True)) if shape else 0
        count = 0
        for key in self._source.walk_files(target.path):
            base = key.rsplit("/", 1)[-1].rsplit(os.sep, 1)[-1]
            if base in (N5_JSON, ZARR_JSON) or base.startswith("."):
                continue
            count += 1
            if count >= limit:
                return count, expected, True
        return count, expected, False

    def thumbnail(self, node: Node, size: int = 256, crop: int = 1024, max_decode: int = 256 * 2**20) -> np.ndarray:
        """A uint8 2D image (y, x): the middle slice of the coarsest level (central
        ``crop`` × ``crop`` pixels at most), strided down to about ``size``, contrast
        stretched to the 0.5–99.5 percentiles. Refused (ValueError) when the blocks it
        touches would decode to more than ``max_decode`` bytes."""
        import numpy as np

        if not node.openable:
            raise ValueError(f"{node.path or '/'} cannot be shown: {node.problem or 'not a dataset'}")
        path = node.levels[-1] if node.kind == "pyramid" and node.levels else node.path
        if node.kind == "pyramid" and node.timepoints > 1:
            ms = self.multiscale(node)
            if ms is not None and ms.time_paths:
                path = _join(node.path, ms.time_paths[len(ms.time_paths) // 2][-1])
        root = self.zarr_root()
        array = root if not path else root[path]
        shape = tuple(array.shape)  # N5 order: x, y first
        index: list[Any] = []
        for axis, extent in enumerate(shape):
            if axis < 2:
                lo = max(0, extent // 2 - crop // 2)
                index.append(slice(lo, min(extent, lo + crop)))
            else:
                index.append(extent // 2)
        blocks = tuple(array.chunks)
        touched = math.prod(
            math.ceil((ix.stop - ix.start) / b) + 1 if isinstance(ix, slice) else 1 for ix, b in zip(index, blocks, strict=True)
        )
        cost = touched * math.prod(blocks) * array.dtype.itemsize
        if cost > max_decode:
            raise ValueError(f"a preview would decode {human_bytes(cost)} of blocks (limit {human_bytes(max_decode)})")
        plane = np.asarray(array[tuple(index)])
        if plane.ndim == 1:
            plane = plane[:, None]
        plane = plane.T  # (y, x)
        step = max(1, math.ceil(max(plane.shape) / size))
        plane = plane[::step, ::step].astype("float64")
        finite = plane[np.isfinite(plane)]
        if finite.size == 0:
            return np.zeros(plane.shape, dtype="uint8")
        lo, hi = np.percentile(finite, [0.5, 99.5])
        if hi <= lo:
            hi = lo + 1
        return (np.clip((np.nan_to_num(plane, nan=lo) - lo) / (hi - lo), 0, 1) * 255).astype("uint8")


def _parse(raw: bytes) -> Any:
    # the library's one metadata parser (size cap, nesting limit); the caller adds the location
    from napari_n5zarr.n5.metadata import parse_document

    return parse_document(bytes(raw), None)


def _error_text(exc: BaseException, where: str, path: str) -> str:
    """The message prefixed with the metadata file's location (once)."""
    msg = str(exc) or type(exc).__name__
    if where in msg:
        return msg
    for prefix in (f"{path}: ", f"{path or '/'}: "):  # metadata.py's own "path: " prefix
        if msg.startswith(prefix):
            msg = msg[len(prefix) :]
            break
    return f"{where}: {msg}"


_VALID: dict[str, str | None] = {}
_VALID_LOCK = threading.Lock()


def _validate_array(doc: dict[str, Any], where: str) -> None:
    """Raise the error zarr would raise on opening the array (e.g. zstd level 1e9); one
    check per distinct codec/dtype/ndim combination (parsing codecs costs ~0.2 ms)."""
    from zarr.core.metadata.v3 import ArrayV3Metadata

    from napari_n5zarr.access import ensure_codecs_registered

    key = json.dumps([doc.get("codecs"), doc.get("data_type"), len(doc.get("shape") or ()),
                      doc.get("chunk_key_encoding"), (doc.get("chunk_grid") or {}).get("name")], sort_keys=True, default=str)  # fmt: skip
    with _VALID_LOCK:
        known = key in _VALID
        message = _VALID.get(key)
    if not known:
        ensure_codecs_registered()
        try:
            ArrayV3Metadata.from_dict({**doc, "attributes": {}})
            message = None
        except Exception as exc:
            message = str(exc) or type(exc).__name__
        with _VALID_LOCK:
            _VALID[key] = message
    if message is not None:
        raise N5MetadataError(message)


# ---------------------------------------------------------------------------
# opening a location
# ---------------------------------------------------------------------------


def open_tree(location: str | os.PathLike[str], storage_options: dict[str, Any] | None = None) -> Tree:
    """The tree at a folder, ``.zip``, BigDataViewer ``.xml`` or URL (``s3://``, ``http(s)://``).

    Raises FileNotFoundError when nothing is there (the root itself unreadable is an
    error node, not an exception)."""
    text = os.fspath(location).strip()
    if text.startswith("file://"):
        text = text[len("file://") :]
    if _URL.match(text):
        from napari_n5zarr.access import base_store

        return Tree(text.rstrip("/"), _StoreSource(base_store(text, "r", storage_options), text), storage_options=storage_options)
    path = Path(text).expanduser()
    if path.name in (N5_JSON, ZARR_JSON):
        path = path.parent
    if path.suffix.lower() == ".xml" and path.is_file():
        text_xml = path.read_text(errors="replace")
        n5, setups = spatial.bdv_xml(text_xml)
        if n5 is None:
            raise ValueError(f"{path}: not a BigDataViewer XML with an N5 image loader (bdv.n5)")
        folder = Path(n5) if Path(n5).is_absolute() else path.parent / n5
        if not folder.is_dir():
            raise NodeNotFoundError(f"{path} points at {folder}, which does not exist")
        return Tree(str(path), _LocalSource(folder), n5_location=str(folder), bdv_setups=setups)
    if path.suffix.lower() == ".zip":
        from napari_n5zarr.access import base_store

        return Tree(str(path), _StoreSource(base_store(path, "r"), str(path)))
    if not path.exists():
        raise NodeNotFoundError(f"no such N5/Zarr container: {path}")
    if not path.is_dir():
        raise NodeNotFoundError(f"not a folder, .zip or BigDataViewer .xml: {path}")
    return Tree(str(path), _LocalSource(path))
