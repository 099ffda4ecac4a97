"""One stored N5 block -> its values, and the checks a block must pass: THE block decoder.

Zarr-free (numpy, the header parser and the bounded decompressors only), so a reader can
decode blocks without loading zarr. :class:`~napari_n5zarr.n5.codec.N5DefaultCodec` decodes
through :func:`decode_block` too (one implementation); the N5 Default Store and the
zarr-free local block reader apply :func:`check_block_file_size` and
:func:`check_block_header` (one set of checks, one wording).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from napari_n5zarr.errors import N5BlockError, located
from napari_n5zarr.n5 import bounded
from napari_n5zarr.n5.header import MODE_DEFAULT, BlockHeader, parse_header, require_default_mode

Decompress = Callable[[np.ndarray, int], np.ndarray]
"""``(payload, nbytes) -> exactly nbytes`` (uint8 array), or N5BlockError."""


def validated_header(raw: np.ndarray, ndim: int | None, chunk_shape: tuple[int, ...] | None = None) -> BlockHeader:
    """Parse a block header and refuse what cannot be array data, before any allocation.

    Position-free (the codec never learns which block it decodes): the header shape may not
    exceed the chunk shape on any axis. Where the key is known, :func:`check_block_header`
    checks more.
    """
    header = parse_header(raw)
    require_default_mode(header.mode)
    if ndim is not None and len(header.shape) != ndim:
        raise N5BlockError(f"header has {len(header.shape)} dimensions, the array has {ndim}")
    if any(s == 0 for s in header.shape):
        raise N5BlockError(f"header shape {list(header.shape)} has a zero extent")
    if chunk_shape is not None and any(h > c for h, c in zip(header.shape, chunk_shape, strict=True)):
        raise N5BlockError(f"header shape {list(header.shape)} exceeds the block size {list(chunk_shape)}")
    return header


def block_values(payload: np.ndarray, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """The decompressed payload as the block's values (N5 order): a free view, no copy."""
    stored = payload.view(dtype.newbyteorder(">") if dtype.itemsize > 1 else dtype)
    # C order of the reversed shape == F order of the N5 shape: .T is a free view.
    return stored.reshape(shape[::-1]).T


def decode_block(
    data: bytes | memoryview | np.ndarray, dtype: Any, ndim: int | None, where: str | None, decompress: Decompress
) -> np.ndarray:
    """One whole stored block (header and payload) at its own (header) shape, N5 order: a
    view of the decompressed bytes (big endian, F order). N5BlockError naming ``where``
    if it is not a default-mode block of ``ndim`` dimensions or does not decompress to
    exactly what its header shape needs."""
    raw = np.frombuffer(data, dtype=np.uint8) if not isinstance(data, np.ndarray) else data.view(np.uint8).ravel()
    dtype = np.dtype(dtype)
    try:
        header = validated_header(raw, ndim)
        nbytes = math.prod(header.shape) * dtype.itemsize
        return block_values(decompress(raw[header.size :], nbytes), header.shape, dtype)
    except N5BlockError as e:
        raise located(e, where) from None


def raw_payload(payload: np.ndarray, nbytes: int) -> np.ndarray:
    """N5 ``raw``: the payload is the data, exactly ``nbytes``."""
    bounded.raw_check(payload.data, nbytes)
    return payload


@dataclass(frozen=True)
class CheckedDecompress:
    """A :data:`Decompress` from a bounded decompression of the compression table (or an
    inner codec's): any other failure than N5BlockError says ``cannot decompress (name)``."""

    name: str | None
    decompress: Callable[[memoryview, int], Any]

    def __call__(self, payload: np.ndarray, nbytes: int) -> np.ndarray:
        try:
            return np.frombuffer(self.decompress(payload.data, nbytes), dtype=np.uint8)
        except N5BlockError:
            raise
        except Exception as e:  # corrupt data: say so, not a deep library traceback
            raise N5BlockError(f"cannot decompress ({self.name}): {e}") from None


def n5_decompress(compression: dict[str, Any]) -> Decompress:
    """The :data:`Decompress` of an N5 compression object (through the compression table)."""
    from napari_n5zarr.n5.compression import n5_decompressor

    name, decompress = n5_decompressor(compression)
    if name is None or decompress is None:
        return raw_payload
    return CheckedDecompress(name, decompress)


# -- checks where the block's key (position) is known -------------------------------------
def block_name(key: str, container: str) -> str:
    """How errors name a block: ``N5 block s0/1/2/3 in /data/x.n5``."""
    return f"N5 block {key} in {container}"


def block_file_limit(block: tuple[int, ...], itemsize: int) -> int:
    """Largest block file of a ``block``-shaped block of ``itemsize``-byte elements: an N5
    block compresses to at most ~1.33x its raw size (lz4 pieces of 64 bytes)."""
    return 2 * math.prod(block) * itemsize + 4 * len(block) + 65536


def check_block_file_size(size: int, block: tuple[int, ...], itemsize: int, where: str) -> None:
    """Refuse (N5BlockError naming ``where``) a block file far larger than any encoding of the block."""
    limit = block_file_limit(block, itemsize)
    if size > limit:
        raise N5BlockError(
            f"{where}: block file of {size} bytes; a {list(block)} block of "
            f"{itemsize}-byte elements needs at most {limit} in any N5 compression"
        )


def check_block_header(
    head: np.ndarray, index: tuple[int, ...], grid: tuple[tuple[int, ...], tuple[int, ...]] | None, where: str
) -> None:
    """Refuse (N5BlockError naming ``where``) a block whose header shape its position makes
    impossible (``grid``: the array's shape and block size, N5 order; None: not known).
    O(header). The mode is not checked here: the codec does (:func:`validated_header`)."""
    try:
        header = parse_header(head)
        if header.mode == MODE_DEFAULT and grid is not None and len(header.shape) == len(index) == len(grid[0]):
            check_position(header.shape, index, grid[0], grid[1])
    except N5BlockError as e:
        raise located(e, where) from None


def check_position(header: tuple[int, ...], index: tuple[int, ...], shape: tuple[int, ...], block: tuple[int, ...]) -> None:
    """Only edge blocks may be truncated, and only to the array's extent (all axes at once,
    as n5-java and z5py write them); any other header shape is corrupt."""
    if header == block:
        return
    inside = tuple(max(0, min(b, n - i * b)) for i, n, b in zip(index, shape, block, strict=True))
    if header == inside:
        return
    if inside == block:
        raise N5BlockError(
            f"header shape {list(header)} in an interior block; it must be the block size {list(block)}"
        )
    raise N5BlockError(
        f"header shape {list(header)} is neither the block size {list(block)} nor the "
        f"array's extent in this edge block {list(inside)}"
    )
