"""attributes.json <-> zarr.json, as pure functions on dicts.

N5 order is kept: zarr ``shape`` == N5 ``dimensions`` and the chunk key ``i/j/k`` is the N5
block path; the ``n5_default`` codec's transpose makes the bytes F order.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

import numpy as np

from napari_n5zarr.n5.codec import CODEC_NAME, N5_DTYPES
from napari_n5zarr.n5.compression import n5_to_zarr, normalize_n5, zarr_to_n5
from napari_n5zarr.n5.errors import N5MetadataError

JSONDict = dict[str, Any]

N5_VERSION = "4.0.0"
RESERVED_KEYS = frozenset({"dimensions", "blockSize", "dataType", "compression", "compressionType"})
"""Keys N5 owns in a dataset's attributes; everything else is the user's."""
VERSION_KEY = "n5"
GROUP_DOC: JSONDict = {"zarr_format": 3, "node_type": "group", "attributes": {}}

MAX_JSON_DEPTH = 100
"""Deepest nesting of arrays/objects accepted in a metadata document (real ones use < 15)."""
DEFAULT_MAX_METADATA_BYTES = 16 * 2**20
MAX_METADATA_BYTES_ENV = "N5ZARR_MAX_METADATA_BYTES"


def max_metadata_bytes() -> int:
    """The size cap for one metadata document (``attributes.json``/``zarr.json``), in bytes:
    16 MiB, or the environment variable ``N5ZARR_MAX_METADATA_BYTES``."""
    return _env_bytes(MAX_METADATA_BYTES_ENV, DEFAULT_MAX_METADATA_BYTES)


DEFAULT_MAX_BLOCK_BYTES = 2**31 - 1
"""n5-java's limit: a block travels as one ByteBuffer, so no N5 writer makes a bigger one."""
MAX_BLOCK_BYTES_ENV = "N5ZARR_MAX_BLOCK_BYTES"


def _env_bytes(name: str, default: int) -> int:
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        cap = int(value)
    except ValueError:
        raise ValueError(f"{name} must be a number of bytes, got {value!r}") from None
    if cap <= 0:
        raise ValueError(f"{name} must be positive, got {cap}")
    return cap


def max_block_bytes() -> int:
    """The largest decoded block a dataset may declare (``blockSize`` x item size), in bytes:
    2**31 - 1, or the environment variable ``N5ZARR_MAX_BLOCK_BYTES``."""
    return _env_bytes(MAX_BLOCK_BYTES_ENV, DEFAULT_MAX_BLOCK_BYTES)


def check_metadata_size(size: int, where: str | None) -> None:
    """Refuse a metadata document of ``size`` bytes over :func:`max_metadata_bytes`."""
    cap = max_metadata_bytes()
    if size > cap:
        raise N5MetadataError(
            f"{where + ': ' if where else ''}metadata document is over the size limit of {cap} bytes; "
            f"set the environment variable {MAX_METADATA_BYTES_ENV} to raise it"
        )


def check_nesting(doc: Any, where: str | None, limit: int = MAX_JSON_DEPTH) -> None:
    """Refuse a JSON document nested deeper than ``limit`` levels (walked without recursion,
    so a hostile document cannot exhaust the stack here or in any later recursive step)."""
    stack: list[tuple[Any, int]] = [(doc, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            children: Any = value.values()
        elif isinstance(value, list):
            children = value
        else:
            continue
        if depth > limit:
            prefix = f"{where}: " if where else ""
            raise N5MetadataError(f"{prefix}JSON nested deeper than {limit} levels; refused as bad metadata")
        stack.extend((child, depth + 1) for child in children)


def parse_document(raw: bytes, where: str | None) -> Any:
    """The JSON document in ``raw`` (read from ``where``, a path or URL, used as the message
    prefix when given); N5MetadataError if it is too large, not JSON, or nested too deeply.
    The one parser for every metadata document the library reads."""
    prefix = f"{where}: " if where else ""
    check_metadata_size(len(raw), where)
    try:
        doc = json.loads(raw)
    except ValueError as e:  # includes UnicodeDecodeError
        raise N5MetadataError(f"{prefix}not valid JSON ({e})") from None
    except RecursionError:
        raise N5MetadataError(f"{prefix}JSON nested deeper than {MAX_JSON_DEPTH} levels; refused as bad metadata") from None
    check_nesting(doc, where)
    return doc


def is_dataset(attributes: JSONDict) -> bool:
    """True if the attributes describe an N5 dataset (array).

    As in n5-java, a node is a dataset when it has ``dimensions`` and ``dataType``; other
    nodes are groups, whatever else they hold (BigDataViewer setup groups carry a
    ``dataType`` of their own).
    """
    return "dimensions" in attributes and "dataType" in attributes


def user_attributes(attributes: JSONDict) -> JSONDict:
    """The attributes that belong to the user (all but reserved keys and the version)."""
    return {k: v for k, v in attributes.items() if k not in RESERVED_KEYS and k != VERSION_KEY}


def _dims(attributes: JSONDict, key: str, path: str, *, positive: bool) -> list[int]:
    value = attributes.get(key)
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise N5MetadataError(f"{path}: N5 {key!r} must be a list of integers, got {value!r}")
    low = 1 if positive else 0
    if any(v < low or v > 0xFFFFFFFF for v in value):
        raise N5MetadataError(f"{path}: N5 {key!r} values must be in [{low}, 2**32), got {value}")
    return value


def _check_not_sharded(attributes: JSONDict, path: str) -> None:
    if "shardSize" in attributes or isinstance(attributes.get("codecs"), list):
        raise N5MetadataError(
            f"{path}: N5 datasets with 'codecs'/'shardSize' (experimental n5-java sharding) are not supported"
        )


def inner_codecs(ndim: int, data_type: str, compression: JSONDict | None) -> list[JSONDict]:
    """The ``n5_default`` configuration's codec list for an array."""
    single_byte = data_type in ("uint8", "int8")
    chain: list[JSONDict] = [
        {"name": "transpose", "configuration": {"order": list(range(ndim - 1, -1, -1))}},
        {"name": "bytes"} if single_byte else {"name": "bytes", "configuration": {"endian": "big"}},
    ]
    if compression is not None:
        chain.append(compression)
    return chain


def attributes_to_zarr(attributes: Any, path: str = "/") -> JSONDict:
    """Translate an N5 ``attributes.json`` document into a Zarr v3 ``zarr.json`` document."""
    if not isinstance(attributes, dict):
        raise N5MetadataError(f"{path}: attributes.json must hold a JSON object, got {type(attributes).__name__}")
    check_nesting(attributes, path)
    _check_not_sharded(attributes, path)
    if not is_dataset(attributes):
        group_attrs = {k: v for k, v in attributes.items() if k != VERSION_KEY}
        return {"zarr_format": 3, "node_type": "group", "attributes": group_attrs}
    missing = [k for k in ("dimensions", "dataType", "blockSize") if k not in attributes]
    if missing:
        raise N5MetadataError(f"{path}: N5 dataset attributes lack {missing}")
    dims = _dims(attributes, "dimensions", path, positive=False)
    block = _dims(attributes, "blockSize", path, positive=True)
    if len(dims) != len(block):
        raise N5MetadataError(f"{path}: 'dimensions' {dims} and 'blockSize' {block} differ in length")
    if not dims:
        raise N5MetadataError(f"{path}: N5 dataset with zero dimensions")
    dtype = attributes["dataType"]
    if dtype not in N5_DTYPES:
        raise N5MetadataError(
            f"{path}: N5 dataType {dtype!r} is not supported (supported: {', '.join(N5_DTYPES)}; "
            "'object'/'string' datasets hold non-array blocks)"
        )
    block_bytes = math.prod(block) * np.dtype(dtype).itemsize
    if block_bytes > max_block_bytes():
        raise N5MetadataError(
            f"{path}: blockSize {block} makes {block_bytes} bytes per {dtype} block, over the limit of "
            f"{max_block_bytes()} bytes (set {MAX_BLOCK_BYTES_ENV} to raise it)"
        )
    try:
        compression = n5_to_zarr(normalize_n5(attributes))
    except ValueError as e:
        raise N5MetadataError(f"{path}: {e}") from None
    except (TypeError, OverflowError) as e:  # e.g. a parameter of 1e999 (infinity)
        raise N5MetadataError(f"{path}: bad compression parameters {attributes.get('compression')!r} ({e})") from None
    doc = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": dims,
        "data_type": dtype,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": block}},
        "chunk_key_encoding": {"name": "v2", "configuration": {"separator": "/"}},
        "fill_value": 0,
        "codecs": [{"name": CODEC_NAME, "configuration": {"codecs": inner_codecs(len(dims), dtype, compression)}}],
        "attributes": user_attributes(attributes),
    }
    _check_zarr_accepts(doc, path)
    return doc


def _check_zarr_accepts(doc: JSONDict, path: str) -> None:
    """Build zarr's own metadata object from ``doc`` so that parameters zarr refuses (a zstd
    level of 1000, ...) fail here, naming the file, rather than later in zarr."""
    from zarr.core.metadata.v3 import ArrayV3Metadata

    from napari_n5zarr.n5.registry import ensure_codecs_registered

    ensure_codecs_registered()
    try:
        ArrayV3Metadata.from_dict({**doc, "attributes": {}})
    except N5MetadataError:
        raise
    except (ValueError, TypeError, KeyError, OverflowError) as e:
        raise N5MetadataError(f"{path}: zarr cannot represent this dataset: {e}") from None


def zarr_to_attributes(doc: Any, existing: JSONDict | None = None, *, root: bool = False, path: str = "/") -> JSONDict:
    """Translate a Zarr v3 ``zarr.json`` document into an N5 ``attributes.json`` document.

    ``existing`` (the current attributes.json) keeps its version key; ``root`` adds
    ``"n5": "4.0.0"`` as N5 requires at the container root.
    """
    if not isinstance(doc, dict) or doc.get("zarr_format") != 3:
        raise N5MetadataError(f"{path}: only Zarr v3 metadata can be stored as N5")
    attrs = dict(doc.get("attributes") or {})
    is_group = doc.get("node_type") == "group"
    if is_group and is_dataset(attrs):
        raise N5MetadataError(f"{path}: a group cannot hold both 'dimensions' and 'dataType' (N5 would read a dataset)")
    clash = sorted(RESERVED_KEYS.intersection(attrs))
    if clash and not is_group:
        raise N5MetadataError(f"{path}: attributes {clash} are reserved by N5 and cannot be user attributes")
    out: JSONDict = {}
    version = (existing or {}).get(VERSION_KEY) or attrs.pop(VERSION_KEY, None)
    attrs.pop(VERSION_KEY, None)
    if root or version:
        out[VERSION_KEY] = version or N5_VERSION
    if doc.get("node_type") == "group":
        return {**out, **attrs}
    if doc.get("node_type") != "array":
        raise N5MetadataError(f"{path}: unknown node_type {doc.get('node_type')!r}")
    out.update(_array_to_n5(doc, path))
    out.update(attrs)
    return out


def _array_to_n5(doc: JSONDict, path: str) -> JSONDict:
    dtype = doc.get("data_type")
    if dtype not in N5_DTYPES:
        raise N5MetadataError(f"{path}: data type {dtype!r} has no N5 equivalent ({', '.join(N5_DTYPES)})")
    grid = doc.get("chunk_grid") or {}
    if grid.get("name") != "regular":
        raise N5MetadataError(f"{path}: N5 needs a regular chunk grid, got {grid.get('name')!r}")
    cke = doc.get("chunk_key_encoding") or {}
    if cke.get("name") != "v2" or (cke.get("configuration") or {}).get("separator", ".") != "/":
        raise N5MetadataError(f"{path}: N5 needs the v2 chunk key encoding with separator '/'")
    fill = doc.get("fill_value", 0)
    if fill not in (0, 0.0, False):
        raise N5MetadataError(f"{path}: N5 has no fill value (missing blocks read as 0); got fill_value {fill!r}")
    codecs = doc.get("codecs") or []
    if len(codecs) != 1 or not isinstance(codecs[0], dict) or codecs[0].get("name") != CODEC_NAME:
        names = [c.get("name") if isinstance(c, dict) else c for c in codecs]
        raise N5MetadataError(f"{path}: an N5 array needs exactly the codec [{CODEC_NAME!r}], got {names}")
    inner = (codecs[0].get("configuration") or {}).get("codecs") or []
    if len(inner) > 3:
        raise N5MetadataError(f"{path}: {CODEC_NAME} allows at most one compressor")
    compressor = inner[2] if len(inner) == 3 else None
    if isinstance(compressor, str):
        compressor = {"name": compressor}
    try:
        compression = zarr_to_n5(compressor)
    except ValueError as e:
        raise N5MetadataError(f"{path}: {e}") from None
    return {
        "dimensions": list(doc["shape"]),
        "blockSize": list(grid["configuration"]["chunk_shape"]),
        "dataType": dtype,
        "compression": compression,
    }
