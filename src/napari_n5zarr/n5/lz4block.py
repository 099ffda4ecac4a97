"""lz4-java's ``LZ4BlockOutputStream`` framing (encode, bounded decode, checksums) and the
Zarr v3 bytes->bytes codec that runs it.

n5-java's ``lz4`` compression writes this stream; numcodecs' LZ4 (and z5py's bare block)
are not compatible with it, and no library on PyPI implements the framing, hence this
module. The LZ4 compression itself and the checksum come from ``lz4`` and ``xxhash``.

Stream = pieces of: magic ``LZ4Block`` (8 bytes), token (method 0x10 raw / 0x20 lz4 OR the
compression level), then int32 little-endian compressed length, decompressed length and
checksum (xxhash32, seed 0x9747B28C, of the decompressed piece, masked to 28 bits), then the
piece. An empty raw piece ends the stream.
"""

from __future__ import annotations

import asyncio
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING

from zarr.abc.codec import BytesBytesCodec

from napari_n5zarr.errors import N5BlockError
from napari_n5zarr.zarr_internals import JSON, parse_named_configuration

if TYPE_CHECKING:
    from collections.abc import Buffer as BufferLike
    from typing import Self

    from zarr.abc.buffer import Buffer

    from napari_n5zarr.zarr_internals import ArraySpec


CODEC_NAME = "n5zarr.lz4block"
MAGIC = b"LZ4Block"
_PIECE = struct.Struct("<8sBiii")
PIECE_HEADER = _PIECE.size
"""Bytes before each piece (21)."""
METHOD_RAW = 0x10
METHOD_LZ4 = 0x20
SEED = 0x9747B28C
DEFAULT_BLOCK_SIZE = 65536
MIN_BLOCK_SIZE = 64
MAX_BLOCK_SIZE = 1 << 25


def check_block_size(block_size: object) -> int:
    """``block_size`` if it is an int in [64, 2**25] (what lz4-java accepts), else ValueError."""
    if (
        not isinstance(block_size, int)
        or isinstance(block_size, bool)
        or not MIN_BLOCK_SIZE <= block_size <= MAX_BLOCK_SIZE
    ):
        raise ValueError(f"LZ4Block blockSize must be an int in [64, 2**25], got {block_size!r}")
    return block_size


def _checksum(data: bytes | memoryview) -> int:
    import xxhash  # lz4 and xxhash load with the first lz4 block, not with the package

    return xxhash.xxh32_intdigest(data, seed=SEED) & 0x0FFFFFFF


def _level(block_size: int) -> int:
    """lz4-java's ``compressionLevel`` token bits for a block size."""
    return max(0, (block_size - 1).bit_length() - 10)


def compress(data: BufferLike, block_size: int = DEFAULT_BLOCK_SIZE) -> bytes:
    """Encode ``data`` as an lz4-java LZ4Block stream (as n5-java's Lz4Compression writes)."""
    import lz4.block

    view = memoryview(data).cast("B")
    level = _level(block_size)
    out = bytearray()
    for start in range(0, len(view), block_size):
        piece = view[start : start + block_size]
        packed = lz4.block.compress(piece, store_size=False)
        check = _checksum(piece)
        if len(packed) >= len(piece):
            out += _PIECE.pack(MAGIC, METHOD_RAW | level, len(piece), len(piece), check)
            out += piece
        else:
            out += _PIECE.pack(MAGIC, METHOD_LZ4 | level, len(packed), len(piece), check)
            out += packed
    out += _PIECE.pack(MAGIC, METHOD_RAW | level, 0, 0, 0)
    return bytes(out)


def _piece(payload: memoryview, method: int, dlen: int, check: int) -> memoryview | bytes:
    """One piece of an LZ4Block stream, decoded (stored or LZ4) and its checksum verified."""
    import lz4.block

    if method == METHOD_RAW:
        if len(payload) != dlen:
            raise N5BlockError("corrupt LZ4Block stream (stored piece with two lengths)")
        piece: memoryview | bytes = payload
    elif method == METHOD_LZ4:
        try:  # uncompressed_size bounds lz4's output buffer
            piece = lz4.block.decompress(payload, uncompressed_size=dlen)
        except lz4.block.LZ4BlockError as e:
            raise N5BlockError(f"corrupt LZ4Block stream: {e}") from None
    else:
        raise N5BlockError(f"unknown LZ4Block compression method 0x{method:02x}")
    if len(piece) != dlen:
        raise N5BlockError("corrupt LZ4Block stream (wrong decompressed length)")
    if _checksum(piece) != check:
        raise N5BlockError("LZ4Block checksum mismatch (corrupt block)")
    return piece


def decompress(
    data: BufferLike, max_size: int | None = None, *, exact: bool = False
) -> bytes | bytearray:
    """Decode an lz4-java LZ4Block stream, verifying every piece's checksum.

    ``max_size`` bounds the output: each piece declares its decompressed length, and the
    running total is checked against the bound *before* the piece is allocated (a stream
    that declares more is refused, so a forged stream cannot make the reader allocate more).
    ``exact`` also refuses a stream that holds less than ``max_size``.
    """
    view = memoryview(data).cast("B")
    out = bytearray() if max_size is None else bytearray(max_size)
    total = 0
    pos = 0
    ended = False
    while pos < len(view):
        if len(view) - pos < _PIECE.size:
            raise N5BlockError("truncated LZ4Block stream (incomplete piece header)")
        magic, token, clen, dlen, check = _PIECE.unpack_from(view, pos)
        if magic != MAGIC:
            raise N5BlockError(
                "not an lz4-java LZ4Block stream (bad magic); z5py/numcodecs lz4 blocks are not N5 lz4"
            )
        pos += _PIECE.size
        method = token & 0xF0
        if clen < 0 or dlen < 0 or pos + clen > len(view):
            raise N5BlockError("corrupt LZ4Block stream (bad piece length)")
        if method == METHOD_RAW and dlen == 0 and clen == 0:
            ended = True
            break  # end of stream
        if max_size is not None and total + dlen > max_size:
            raise N5BlockError(
                f"LZ4Block stream declares more than the {max_size} bytes its header shape needs"
            )
        piece = _piece(view[pos : pos + clen], method, dlen, check)
        pos += clen
        if max_size is None:
            out += piece
        else:
            out[total : total + dlen] = piece
        total += dlen
    if max_size is not None:
        if not ended:
            raise N5BlockError("truncated LZ4Block stream (no end mark)")
        if pos != len(view):
            raise N5BlockError(f"{len(view) - pos} stray bytes after the LZ4Block end mark")
        if exact and total != max_size:
            raise N5BlockError(
                f"LZ4Block payload decompresses to {total} bytes, the header shape needs {max_size}"
            )
        return out if total == max_size else out[:total]
    return bytes(out)


@dataclass(frozen=True)
class LZ4BlockCodec(BytesBytesCodec):
    """Zarr v3 codec ``n5zarr.lz4block``: N5's (lz4-java's) LZ4Block stream."""

    is_fixed_size = False

    block_size: int = DEFAULT_BLOCK_SIZE

    def __init__(self, *, blockSize: int = DEFAULT_BLOCK_SIZE) -> None:  # N5 key
        object.__setattr__(self, "block_size", check_block_size(blockSize))

    @classmethod
    def from_dict(cls, data: dict[str, JSON]) -> Self:
        _, config = parse_named_configuration(data, CODEC_NAME, require_configuration=False)
        return cls(**(config or {}))  # type: ignore[arg-type]

    def to_dict(self) -> dict[str, JSON]:
        return {"name": CODEC_NAME, "configuration": {"blockSize": self.block_size}}

    def _decode_sync(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer:
        return chunk_spec.prototype.buffer.from_bytes(decompress(chunk_bytes.as_numpy_array()))

    def _encode_sync(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer | None:
        data = compress(chunk_bytes.as_numpy_array(), self.block_size)
        return chunk_spec.prototype.buffer.from_bytes(data)

    async def _decode_single(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer:
        return await asyncio.to_thread(self._decode_sync, chunk_bytes, chunk_spec)

    async def _encode_single(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer | None:
        return await asyncio.to_thread(self._encode_sync, chunk_bytes, chunk_spec)

    def compute_encoded_size(self, input_byte_length: int, chunk_spec: ArraySpec) -> int:
        raise NotImplementedError
