"""The N5 block header: pure functions on bytes.

Layout (N5 spec 4.0.0): u16 BE mode, u16 BE ndim, ndim x u32 BE shape (N5 order), and for
varlength mode one more u32 BE element count. Object mode is mode + u32 count (no dims).
"""

from __future__ import annotations

import struct
from typing import NamedTuple

import numpy as np

from napari_n5zarr.errors import N5BlockError

MODE_DEFAULT = 0
MODE_VARLENGTH = 1
MODE_OBJECT = 2
MODE_NAMES = {MODE_DEFAULT: "default", MODE_VARLENGTH: "varlength", MODE_OBJECT: "object"}


class BlockHeader(NamedTuple):
    mode: int
    shape: tuple[int, ...]
    """Block shape in N5 order (fastest axis first)."""
    num_elements: int | None
    """Element count stored by varlength/object blocks, else None."""
    size: int
    """Length of the header in bytes; the payload starts here."""


def header_size(ndim: int) -> int:
    """Size of a default-mode header for ``ndim`` dimensions."""
    return 4 + 4 * ndim


def parse_header(data: bytes | memoryview | np.ndarray) -> BlockHeader:
    """Parse the header at the start of an N5 block."""
    buf = memoryview(data).cast("B") if not isinstance(data, np.ndarray) else data.data.cast("B")
    if len(buf) < 2:
        raise N5BlockError(f"too short for a header ({len(buf)} bytes)")
    (mode,) = struct.unpack_from(">H", buf, 0)
    if mode == MODE_OBJECT:
        if len(buf) < 6:
            raise N5BlockError("object-mode block too short for its header")
        (count,) = struct.unpack_from(">I", buf, 2)
        return BlockHeader(mode, (), count, 6)
    if mode not in (MODE_DEFAULT, MODE_VARLENGTH):
        raise N5BlockError(f"unknown block mode {mode} (expected 0 default, 1 varlength, 2 object)")
    if len(buf) < 4:
        raise N5BlockError("too short for its header")
    (ndim,) = struct.unpack_from(">H", buf, 2)
    end = header_size(ndim)
    if mode == MODE_VARLENGTH:
        end += 4
    if len(buf) < end:
        raise N5BlockError(f"too short for a {ndim}-dimensional header ({len(buf)} bytes)")
    shape = struct.unpack_from(f">{ndim}I", buf, 4)
    count = struct.unpack_from(">I", buf, 4 + 4 * ndim)[0] if mode == MODE_VARLENGTH else None
    return BlockHeader(mode, tuple(shape), count, end)


def encode_header(shape: tuple[int, ...] | list[int]) -> bytes:
    """Default-mode header for a block of ``shape`` (N5 order)."""
    if len(shape) > 0xFFFF:
        raise N5BlockError(f"N5 blocks hold at most 65535 dimensions, got {len(shape)}")
    if any(not 0 <= s <= 0xFFFFFFFF for s in shape):
        raise N5BlockError(f"N5 block shape {tuple(shape)} does not fit in uint32")
    return struct.pack(f">HH{len(shape)}I", MODE_DEFAULT, len(shape), *shape)
