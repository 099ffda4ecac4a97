"""Names and numbers of the N5 format and of its Zarr v3 view, in one leaf module.

Imports only the standard library (nothing here may pull in zarr, numpy or a compression
library), so any module, however light, can use these names.
"""

from __future__ import annotations

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

INCOMPLETE_MARKER = ".n5zarr-incomplete"
"""Written first and removed last by an export: its presence means the export never finished."""
