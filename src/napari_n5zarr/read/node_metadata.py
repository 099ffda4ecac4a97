"""A node's metadata documents -> :class:`~napari_n5zarr.read.node.Node` fields.

attributes.json (N5) or zarr.json (Zarr v3), parsed by the library's one metadata parser,
checked as zarr would check them on opening (codec parameters, dtype), calibrated by the
conventions of :mod:`napari_n5zarr.spatial`. Errors name the metadata file.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from napari_n5zarr import spatial
from napari_n5zarr.errors import N5FormatError, N5MetadataError
from napari_n5zarr.n5.constants import CODEC_NAME
from napari_n5zarr.n5.metadata import check_zarr_accepts
from napari_n5zarr.read.node import Node, compression_text
from napari_n5zarr.spatial.model import level_number


def zarr_compression(doc: Mapping[str, Any]) -> str:
    """N5-style compression text of a Zarr v3 array (its codec mapped through N5's table)."""
    from napari_n5zarr.n5.compression import zarr_to_n5

    codecs = doc.get("codecs") or []
    if codecs and isinstance(codecs[0], dict) and codecs[0].get("name") == CODEC_NAME:
        inner = (codecs[0].get("configuration") or {}).get("codecs") or []
        comp = inner[2] if len(inner) > 2 else None
    else:
        rest = [
            c for c in codecs if isinstance(c, dict) and c.get("name") not in ("bytes", "transpose")
        ]
        if len(rest) > 1:
            return "+".join(str(c.get("name")) for c in rest)
        comp = rest[0] if rest else None
    try:
        return compression_text(zarr_to_n5(comp))
    except (N5FormatError, ValueError, AttributeError):
        return str(comp.get("name")) if isinstance(comp, dict) else str(comp)


def fill_from_n5(node: Node, attrs: Any, doc: dict[str, Any]) -> None:
    """An N5 node: kind, shape, dtype, blocks, compression from its attributes.json
    (``attrs``) and the zarr.json the N5 store translated from it (``doc``; the translation
    has checked that zarr accepts it)."""
    from napari_n5zarr.n5.compression import normalize_n5

    if not isinstance(attrs, dict):
        raise N5MetadataError(
            f"attributes.json must hold a JSON object, got {type(attrs).__name__}"
        )
    if doc.get("node_type") != "array":
        return
    node.kind = "array"
    node.array_shape = tuple(int(d) for d in doc["shape"])
    node.dtype = str(attrs["dataType"])
    node.blocks = tuple(int(b) for b in attrs["blockSize"])[::-1]
    node.compression = compression_text(normalize_n5(attrs))


def fill_from_zarr(node: Node, doc: Any) -> None:
    """A Zarr v3 node: kind, shape, dtype, blocks, compression from its zarr.json."""
    if not isinstance(doc, dict):
        raise N5MetadataError("zarr.json must hold a JSON object")
    kind = doc.get("node_type")
    if doc.get("zarr_format") != 3 or kind not in ("array", "group"):
        raise N5MetadataError(
            f"not Zarr v3 metadata (zarr_format {doc.get('zarr_format')!r}, node_type {kind!r})"
        )
    if kind == "group":
        return
    check_zarr_accepts(doc)  # the error zarr would raise on opening it (e.g. zstd level 1e9)
    node.kind = "array"
    codecs = doc.get("codecs") or []
    order = (
        slice(None)
        if codecs and isinstance(codecs[0], dict) and codecs[0].get("name") == CODEC_NAME
        else slice(None, None, -1)
    )
    node.array_shape = tuple(int(d) for d in doc.get("shape") or ())[
        order
    ]  # N5 order: a plain (C-order) array reversed
    node.dtype = str(doc.get("data_type"))
    chunks = ((doc.get("chunk_grid") or {}).get("configuration") or {}).get("chunk_shape") or []
    node.blocks = tuple(int(c) for c in chunks)[order][::-1]
    node.compression = zarr_compression(doc)


def _chunks(doc: Mapping[str, Any]) -> Any:
    grid = doc.get("chunk_grid")
    return grid.get("configuration", {}).get("chunk_shape") if isinstance(grid, Mapping) else None


def documents_disagree(ours: Any, zarr_raw: bytes) -> str | None:
    """Where a folder's zarr.json contradicts its attributes.json (``ours``: the N5 store's
    translation of it) in node type, shape, data type or chunk shape, as one line saying
    which one this reader uses; None if they agree (or zarr.json cannot be compared)."""
    try:
        theirs = parse_metadata(zarr_raw)
    except Exception:
        return None
    if not isinstance(theirs, dict) or not isinstance(ours, dict):
        return None
    fields = [("node type", ours.get("node_type"), theirs.get("node_type"))]
    if ours.get("node_type") == "array" == theirs.get("node_type"):
        fields += [("shape", ours.get("shape"), theirs.get("shape")),
                   ("data type", ours.get("data_type"), theirs.get("data_type")),
                   ("chunk shape", _chunks(ours), _chunks(theirs))]  # fmt: skip
    diffs = [f"{name} {_text(a)} vs {_text(b)}" for name, a, b in fields if a != b]
    if not diffs:
        return None
    return (f"zarr.json disagrees with attributes.json ({'; '.join(diffs)}): this reader uses attributes.json, "
            "Zarr-only tools use zarr.json (n5zarr add-zarr-metadata rewrites it)")  # fmt: skip


def _text(value: Any) -> str:
    return "×".join(str(v) for v in value) if isinstance(value, list) else str(value)


def array_info(node: Node, attributes: dict[str, Any] | None = None) -> spatial.ArrayInfo:
    """What the conventions need to know about an array node."""
    from napari_n5zarr.n5.metadata import user_attributes

    attrs = node.attributes if attributes is None else attributes
    return spatial.ArrayInfo(
        user_attributes(attrs) if node.n5 else attrs, node.array_shape, node.dtype
    )


_CALIBRATED_LOCK = threading.Lock()
_CALIBRATED: dict[
    tuple[bytes, int, str, int], tuple[dict[str, Any], spatial.ArrayInfo, spatial.Calibration]
] = {}


def _calibration(
    node: Node, inherited: dict[str, Any], attrs: dict[str, Any]
) -> tuple[spatial.ArrayInfo, spatial.Calibration]:
    """(array info, calibration) of an array node; kept for documents seen
    before beside the same inherited attributes (siblings share theirs): a container
    repeats documents (tiles, channels, time points), and a calibration costs ~0.1 ms."""
    level = (
        node.name if level_number(node.name) is not None else ""
    )  # the only use of the name (2^N for sN)
    key = (node.raw, len(node.array_shape), level, id(inherited))
    with _CALIBRATED_LOCK:
        known = _CALIBRATED.get(key) if node.raw else None
    if (
        known is not None
        and known[0] is inherited
        and known[1].shape == node.array_shape
        and known[1].dtype == node.dtype
    ):
        return known[1], known[2]
    info = array_info(node, attrs)
    cal = spatial.calibrate(info.attrs, len(info.shape), name=node.name, inherited=inherited)
    if node.raw:
        with _CALIBRATED_LOCK:
            if len(_CALIBRATED) >= 512:
                _CALIBRATED.pop(next(iter(_CALIBRATED)))
            _CALIBRATED[key] = (inherited, info, cal)
    return info, cal


def calibrate_array(node: Node, inherited: dict[str, Any], attrs: dict[str, Any]) -> None:
    """Voxel size, offset, units and axes of an array node (napari order)."""
    info, cal = _calibration(node, inherited, attrs)
    node.shape = info.shape[::-1]
    node.scale, node.translate = cal.scale[::-1], cal.translate[::-1]
    node.units, node.axes = cal.units[::-1], cal.axes[::-1]
    node.convention = cal.convention
    if len(info.shape) < 2:
        node.reason = f"{len(info.shape)}-D data cannot be shown as an image"
    if (
        info.attrs.get("isLabelMultiset") is True
    ):  # read as uint64 labels (issue 21): its kind says how it is stored
        node.encoding = "label multiset"
        node.dtype = (
            "uint64"  # what it opens as (attributes.json says uint8: the varlength blocks' bytes)
        )


def parse_metadata(raw: bytes) -> Any:
    """A metadata document (bytes) as JSON values."""
    # the library's one metadata parser (size cap, nesting limit); the caller adds the location
    from napari_n5zarr.n5.constants import parse_document

    return parse_document(bytes(raw), None)


def error_text(exc: BaseException, where: str, path: str) -> str:
    """The message prefixed with the metadata file's location (once)."""
    msg = str(exc) or type(exc).__name__
    if where in msg:
        return msg
    for prefix in (f"{path}: ", f"{path or '/'}: "):  # metadata.py's own "path: " prefix
        if msg.startswith(prefix):
            msg = msg[len(prefix) :]
            break
    return f"{where}: {msg}"
