"""Names and numbers of the N5 format and of its Zarr v3 view, the caps on what a metadata
document or block may declare (against hostile or broken input), and the one parser of
metadata documents: one leaf module.

Imports only the standard library and :mod:`napari_n5zarr.errors` (nothing here may pull in
zarr, numpy or a compression library), so any module, however light, can use these names.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from napari_n5zarr.errors import N5BlockError, N5MetadataError

ZARR_JSON = "zarr.json"
"""A Zarr v3 node's metadata document."""
N5_JSON = "attributes.json"
"""An N5 node's metadata document (the N5 name of ``zarr.json``)."""
ATTRIBUTES_JSON = N5_JSON
METADATA_FILES = frozenset({N5_JSON, ZARR_JSON})
"""The metadata documents an N5/Zarr v3 node may hold."""
ZARR_V2_FILES = frozenset({".zarray", ".zgroup", ".zattrs", ".zmetadata"})
"""Zarr v2's metadata documents."""

CODEC_NAME = "n5_default"
"""The Zarr v3 array->bytes codec for N5 default-mode blocks (zarr-extensions ``codecs/n5_default``)."""

N5_VERSION = "4.0.0"
"""The N5 version this library writes at a container root."""
VERSION_KEY = "n5"
"""The root attribute holding the N5 version."""

N5_DTYPE_SIZES: dict[str, int] = {
    "uint8": 1, "uint16": 2, "uint32": 4, "uint64": 8,
    "int8": 1, "int16": 2, "int32": 4, "int64": 8,
    "float32": 4, "float64": 8,
}  # fmt: skip
"""N5 ``dataType`` -> item size in bytes (numpy's names, as N5 uses them)."""
N5_DTYPES = tuple(N5_DTYPE_SIZES)
"""Every N5 ``dataType`` holding array data (``object``/``string`` datasets do not)."""

DIMENSIONS = "dimensions"
MAX_DIMENSION = 2**63 - 1
"""The largest N5 extent: dimensions are Java longs (Paintera's ``label-to-block-mapping/sN``
declare ``Long.MAX_VALUE``); block sizes are u32 in every block header."""
BLOCK_SIZE = "blockSize"
DATA_TYPE = "dataType"
COMPRESSION = "compression"
LEGACY_COMPRESSION = "compressionType"
"""N5 before 1.0 named the compression by type only."""
RESERVED_KEYS = frozenset({DIMENSIONS, BLOCK_SIZE, DATA_TYPE, COMPRESSION, LEGACY_COMPRESSION})
"""Keys N5 owns in a dataset's attributes; everything else is the user's."""
SHARDING_KEYS = frozenset({"shardSize", "codecs"})
"""Keys of n5-java's experimental sharding, which this library refuses."""

MAX_JSON_DEPTH = 100
"""Deepest nesting of arrays/objects accepted in a metadata document (real ones use < 15)."""
DEFAULT_MAX_METADATA_BYTES = 16 * 2**20
MAX_METADATA_BYTES_ENV = "N5ZARR_MAX_METADATA_BYTES"
DEFAULT_MAX_BLOCK_BYTES = 2**31 - 1
"""n5-java's limit: a block travels as one ByteBuffer, so no N5 writer makes a bigger one."""
MAX_BLOCK_BYTES_ENV = "N5ZARR_MAX_BLOCK_BYTES"

DEFAULT_MAX_LISTING_BYTES = 64 * 2**20
MAX_LISTING_BYTES_ENV = "N5ZARR_MAX_LISTING_BYTES"
DEFAULT_MAX_LISTING_ENTRIES = 100_000
MAX_LISTING_ENTRIES_ENV = "N5ZARR_MAX_LISTING_ENTRIES"

INCOMPLETE_MARKER = ".n5zarr-incomplete"
"""Written first and removed last by an export: its presence means the export never finished."""


def _env_bytes(name: str, default: int) -> int:
    from napari_n5zarr.environment import number

    return int(number(name, default))


def max_metadata_bytes() -> int:
    """The size cap for one metadata document (``attributes.json``/``zarr.json``), in bytes:
    16 MiB, or the environment variable ``N5ZARR_MAX_METADATA_BYTES``."""
    return _env_bytes(MAX_METADATA_BYTES_ENV, DEFAULT_MAX_METADATA_BYTES)


def max_block_bytes() -> int:
    """The largest decoded block a dataset may declare (``blockSize`` x item size), in bytes:
    2**31 - 1, or the environment variable ``N5ZARR_MAX_BLOCK_BYTES``."""
    return _env_bytes(MAX_BLOCK_BYTES_ENV, DEFAULT_MAX_BLOCK_BYTES)


def max_listing_bytes() -> int:
    """The size cap for one listing page (an HTTP directory page), in bytes: 64 MiB (a
    page of ~1M links), or the environment variable ``N5ZARR_MAX_LISTING_BYTES``."""
    return _env_bytes(MAX_LISTING_BYTES_ENV, DEFAULT_MAX_LISTING_BYTES)


def max_listing_entries() -> int:
    """The most entries one listing (a folder's children) may hold: 100,000, or the
    environment variable ``N5ZARR_MAX_LISTING_ENTRIES``."""
    return _env_bytes(MAX_LISTING_ENTRIES_ENV, DEFAULT_MAX_LISTING_ENTRIES)


def check_metadata_size(size: int, where: str | None) -> None:
    """Refuse a metadata document of ``size`` bytes over :func:`max_metadata_bytes`."""
    cap = max_metadata_bytes()
    if size > cap:
        raise N5MetadataError(
            f"{where + ': ' if where else ''}metadata document is over the size limit of {cap} bytes; "
            f"set the environment variable {MAX_METADATA_BYTES_ENV} to raise it"
        )


def max_stored_block_bytes() -> int:
    """The most bytes one stored block (header and compressed payload) may take when its
    dataset is not known: :func:`max_block_bytes` plus room for the block header and the
    worst growth of any N5 compression on incompressible data (1/64 of it and 64 KiB).
    A block of a known dataset is capped by that dataset's own :class:`ReadLimit`."""
    cap = max_block_bytes()
    return cap + cap // 64 + 2**16


@dataclass(frozen=True)
class ReadLimit:
    """The most bytes one stored block of a given dataset may take (``size``) and why
    (``why``, for messages: block size, element size, compression), from its metadata."""

    size: int
    why: str


def max_stored_bytes(metadata: bool, limit: ReadLimit | None = None) -> int:
    """The cap on one stored object: :func:`max_metadata_bytes` for a metadata document,
    the dataset's ``limit`` for a block of a known dataset, else
    :func:`max_stored_block_bytes`. Every store read stops one byte past it."""
    if metadata:
        return max_metadata_bytes()
    return limit.size if limit is not None else max_stored_block_bytes()


def check_stored_size(
    size: int, where: str | None, *, metadata: bool, limit: ReadLimit | None = None
) -> None:
    """Refuse ``size`` bytes (declared or read) of a metadata document or block over its cap
    (:func:`max_stored_bytes`): N5MetadataError or N5BlockError naming ``where`` and the limit."""
    if metadata:
        check_metadata_size(size, where)
        return
    prefix = f"{where}: " if where else ""
    if limit is not None:
        if size > limit.size:
            raise N5BlockError(
                f"{prefix}stored block is over its dataset's limit of {limit.size} bytes ({limit.why}); "
                "no valid block is that large: refused as corrupt"
            )
        return
    cap = max_stored_block_bytes()
    if size > cap:
        raise N5BlockError(
            f"{prefix}stored block is over the size limit of {cap} bytes "
            f"({MAX_BLOCK_BYTES_ENV}={max_block_bytes()} decoded, plus header and compression overhead); "
            f"set the environment variable {MAX_BLOCK_BYTES_ENV} to raise it"
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
            raise N5MetadataError(
                f"{prefix}JSON nested deeper than {limit} levels; refused as bad metadata"
            )
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
        raise N5MetadataError(
            f"{prefix}JSON nested deeper than {MAX_JSON_DEPTH} levels; refused as bad metadata"
        ) from None
    check_nesting(doc, where)
    return doc
