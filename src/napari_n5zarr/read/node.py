"""One node of a hierarchy as the tree lists it, and its display text (napari order).

Pure Python, metadata only. :class:`Node` is what the browser shows as a row, ``n5zarr tree``
prints and ``--json`` writes; the text helpers format its columns.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from napari_n5zarr.spatial.units import unit_display

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
    "paintera-label": "Paintera labels",
    "paintera-raw": "Paintera raw",
    "paintera-channel": "Paintera channels",
}


def convention_label(code: str) -> str:
    """How a convention code (``Multiscale.convention``) is named to people: ``"N5 Viewer"``."""
    return _CONVENTIONS.get(code, code)


# ---------------------------------------------------------------------------
# nodes


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
    """Shape in N5 order, fastest axis first (N5 ``dimensions``; a plain, C-order zarr.json's
    ``shape`` reversed): the order of :class:`~napari_n5zarr.spatial.Multiscale`."""
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
    lookup_table: bool = False
    """A Paintera bookkeeping dataset (or a level of one): ``reason`` says so; no fault."""
    encoding: str = ""
    """How the blocks are stored where it is not the default ("label multiset(s)"), shown in its kind."""
    warning: str | None = None
    """A readable node's metadata documents disagree (zarr.json vs attributes.json)."""
    facts: tuple[tuple[str, str], ...] = ()
    """Further (label, text) lines for details panes (a Paintera group's maxId, bookkeeping)."""
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
        """ "dataset", "group", "unreadable", or "COSEM, 3 levels" for a pyramid."""
        flag = ", zarr.json disagrees" if self.warning else ""
        if self.lookup_table:  # Paintera bookkeeping: what it is, not how a pyramid would read it
            n = len(self.levels)
            return (
                "Paintera lookup table"
                + (f", {n} level{'s' if n != 1 else ''}" if self.kind == "pyramid" else "")
                + flag
            )
        if self.kind == "pyramid":
            label = convention_label(self.convention)
            n = len(self.levels)
            text = f"{label}, {n} level{'s' if n != 1 else ''}"
            text += f", {self.timepoints} timepoints" if self.timepoints > 1 else ""
            return text + (f", {self.encoding}" if self.encoding else "") + flag
        if self.kind == "array" and self.encoding:
            return f"dataset, {self.encoding}{flag}"
        return {"array": "dataset", "error": "unreadable"}.get(self.kind, self.kind) + flag

    def row(self) -> dict[str, str]:
        """Display text of every column (the widget and ``n5zarr tree`` use the same)."""
        return {
            "name": self.name or "/",
            "shape": shape_text(self.shape, self.axes),
            "dtype": self.dtype,
            "kind": self.kind_text,
            "compression": self.compression,
            "voxel": voxel_text(self.scale, self.units)
            if self.convention not in ("", "none") and not self.lookup_table
            else "",
            "size": human_bytes(self.nbytes)
            if self.nbytes is not None and not self.lookup_table
            else "",
            "blocks": "×".join(str(b) for b in self.blocks),
            "problem": self.problem or "",
            "warning": self.warning or "",
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
            "warning": self.warning,
            "encoding": self.encoding or None,
            **({"facts": dict(self.facts)} if self.facts else {}),
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


def voxel_text(scale: Sequence[float], units: Sequence[str | None]) -> str:
    """``40 × 4 × 4 nm`` (napari order); mixed units are given per axis; axes without a
    unit are left out when others have one."""
    if not scale:
        return ""
    known = [i for i in range(len(scale)) if i < len(units) and units[i]]
    keep = known if known else list(range(len(scale)))  # axes without a unit (t, c) are left out
    names = [unit_display(units[i] if i < len(units) else None) for i in keep]
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
