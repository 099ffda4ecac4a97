"""Caps on what one metadata document or block may declare, against hostile or broken input.

Leaf module (standard library, constants and errors only).
"""

from __future__ import annotations

import os
from typing import Any

from napari_n5zarr.errors import N5BlockError, N5MetadataError
from napari_n5zarr.n5.constants import (
    DEFAULT_MAX_BLOCK_BYTES,
    DEFAULT_MAX_METADATA_BYTES,
    MAX_BLOCK_BYTES_ENV,
    MAX_JSON_DEPTH,
    MAX_METADATA_BYTES_ENV,
)


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


def max_metadata_bytes() -> int:
    """The size cap for one metadata document (``attributes.json``/``zarr.json``), in bytes:
    16 MiB, or the environment variable ``N5ZARR_MAX_METADATA_BYTES``."""
    return _env_bytes(MAX_METADATA_BYTES_ENV, DEFAULT_MAX_METADATA_BYTES)


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


def max_stored_block_bytes() -> int:
    """The most bytes one stored block (header and compressed payload) may take, from any
    store: :func:`max_block_bytes` plus room for the block header and the worst growth of
    any N5 compression on incompressible data (1/64 of it and 64 KiB)."""
    cap = max_block_bytes()
    return cap + cap // 64 + 2**16


def max_stored_bytes(metadata: bool) -> int:
    """The cap on one stored object: :func:`max_metadata_bytes` for a metadata document,
    else :func:`max_stored_block_bytes`. Every store read stops one byte past it."""
    return max_metadata_bytes() if metadata else max_stored_block_bytes()


def check_stored_size(size: int, where: str | None, *, metadata: bool) -> None:
    """Refuse ``size`` bytes (declared or read) of a metadata document or block over its cap
    (:func:`max_stored_bytes`): N5MetadataError or N5BlockError naming ``where`` and the limit."""
    if metadata:
        check_metadata_size(size, where)
        return
    cap = max_stored_block_bytes()
    if size > cap:
        raise N5BlockError(
            f"{where + ': ' if where else ''}stored block is over the size limit of {cap} bytes "
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
            raise N5MetadataError(f"{prefix}JSON nested deeper than {limit} levels; refused as bad metadata")
        stack.extend((child, depth + 1) for child in children)
