"""lz4-java's ``LZ4BlockOutputStream`` framing as a Zarr v3 bytes->bytes codec.

The framing itself (encode, bounded decode, checksums) is :mod:`napari_n5zarr.n5.lz4stream`,
which imports no zarr; this module is the codec zarr runs it through.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING

from zarr.abc.codec import BytesBytesCodec

from napari_n5zarr.n5.lz4stream import (
    CODEC_NAME,
    DEFAULT_BLOCK_SIZE,
    check_block_size,
    compress,
    decompress,
)
from napari_n5zarr.zarr_internals import JSON, parse_named_configuration

if TYPE_CHECKING:
    from typing import Self

    from zarr.abc.buffer import Buffer

    from napari_n5zarr.zarr_internals import ArraySpec


@dataclass(frozen=True)
class LZ4BlockCodec(BytesBytesCodec):
    """Zarr v3 codec ``n5zarr.lz4block``: N5's (lz4-java's) LZ4Block stream."""

    is_fixed_size = False

    block_size: int = DEFAULT_BLOCK_SIZE

    def __init__(self, *, blockSize: int = DEFAULT_BLOCK_SIZE) -> None:  # noqa: N803 (N5 key)
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
